"""The provenance ledger: typed entries, the hash chain, tamper detection, concurrency, migration.

The first half is pure (in-memory records, no Spark). The second half runs on the real
``ops.ledger`` table in both formats: append/read/lineage, tampering through the table
interface, two concurrent writers (threads; and two OS processes, marked slow), and the
upgrade of a v1 ledger.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from lakehouse.config import LakehouseConfig, TableFormat, load_config
from lakehouse.digest import digest_of
from lakehouse.errors import LedgerError, LedgerSchemaError
from lakehouse.tables import Commit, Table, TableRegistry
from ledger.api import open_ledger
from ledger.chain import (
    FIRST_SEQ_KEY,
    GENESIS_HASH,
    TIP_HASH_KEY,
    TIP_SEQ_KEY,
    LedgerRecord,
    Tip,
    link,
    verify_chain,
)
from ledger.clock import FixedClock
from ledger.entries import (
    KINDS,
    Approval,
    AuditExtract,
    CalibrationMeasured,
    CommunitiesMeasured,
    DiffManifest,
    EngineDeclared,
    ErasedIn,
    ErasureCertificate,
    ErasureProgress,
    ErasureVerification,
    ExtractFile,
    ExtractManifest,
    LedgerEntryBase,
    LedgerSchemaChanged,
    LegalHold,
    MaintenanceDone,
    Notification,
    Publication,
    QualityComparison,
    ReconciliationDecision,
    Rollback,
    RunFinished,
    RunStarted,
    Supersession,
    TableMaintained,
    entry_id_of,
    parse_entry,
)
from ledger.identity import EngineIdentity, InputRead, OutputWritten
from ledger.lineage import lineage_of
from ledger.migrations import (
    CURRENT_SCHEMA_VERSION,
    MIGRATIONS,
    m0002_refs,
    migrate,
    schema_ddl,
    schema_version,
)
from ledger.reader import LedgerReader
from ledger.store import (
    SQLITE_JDBC,
    DeltaLedgerStorage,
    IcebergLedgerStorage,
    LedgerStorage,
    commit_entries,
    current_records,
    is_conflict,
    ledger_table,
    local_path,
    read_records,
    records_frame,
    spark_records,
    sqlite_catalog,
    sqlite_file_identity,
    storage_for,
    table_columns,
)
from ledger.writer import LedgerWriter

REPO = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ENGINE = EngineIdentity(name="correlation", version=1, code_fingerprint="a" * 64, config_digest=digest_of({}))
TABLE = "gold.correlations"


def run_entries(run_id: str, version: int = 7) -> list[LedgerEntryBase]:
    """A run that read silver.events@3, wrote gold.correlations@<version> and published it."""
    return [
        RunStarted(
            run_id=run_id,
            command="replay",
            purpose="correction",
            engines=(ENGINE,),
            inputs={
                "silver.events": InputRead(version=3, range={"event_time": ["2025-01-01", "2025-02-01"]})
            },
        ),
        RunFinished(
            run_id=run_id,
            status="ok",
            outputs={TABLE: OutputWritten(version=version, rows=10)},
            counts={"rows": 10},
        ),
        Publication(run_id=run_id, tables={TABLE: version}, effective_at=T0, candidate="c1"),
    ]


def chain(entries: Sequence[LedgerEntryBase], schema: int = CURRENT_SCHEMA_VERSION) -> list[LedgerRecord]:
    return link(entries, None, recorded_at=T0, schema_version=schema)


def rehashed(record: LedgerRecord, **changes: Any) -> LedgerRecord:
    """A record changed the way a careful forger would: entry id (unless given) and hash recomputed."""
    changed = dataclasses.replace(record, **changes)
    if "entry_id" not in changes:
        changed = dataclasses.replace(
            changed, entry_id=entry_id_of(changed.kind, changed.run_id, changed.body)
        )
    return dataclasses.replace(changed, hash=changed.computed_hash())


# -- entries (pure) ---------------------------------------------------------------------------


def one_of_each_kind() -> list[LedgerEntryBase]:
    return [
        EngineDeclared(engine=ENGINE, implementation="m:f", effective_from=T0.date(), description="v1"),
        LedgerSchemaChanged(schema_version=1, migration="m0001_initial", description="create"),
        *run_entries("r1"),
        DiffManifest(
            run_id="r1",
            table=TABLE,
            candidate="c1",
            base_version=6,
            counts={"added": 1, "removed": 0, "changed": 2, "unchanged": 7},
            manifest_digest="d" * 64,
        ),
        ReconciliationDecision(
            run_id="r1",
            table=TABLE,
            verdict="publish",
            old_total=Decimal("10.50"),
            candidate_total=Decimal("11.00"),
            expected_delta=Decimal("0.50"),
            residual_delta=Decimal("0"),
            owner="risk-team",
        ),
        QualityComparison(
            run_id="r1",
            table=TABLE,
            basis="ground_truth",
            old_engine="entity_resolution@1",
            new_engine="entity_resolution@3",
            report={"old": {"entity_resolution": {"f1": 0.708}}, "new": {"entity_resolution": {"f1": 1.0}}},
        ),
        Approval(run_id="r1", approver="ana", decision="approved", scope="plan-1", approved_at=T0),
        Supersession(
            run_id="r1", table=TABLE, key="corr-1", old="correlation@1", new="correlation@2", reason="v2"
        ),
        Notification(
            run_id="r1", consumer="alerts", table=TABLE, version=7, decision_version="7", idempotency_key="k1"
        ),
        Rollback(run_id="r2", table=TABLE, from_version=7, to_version=6, new_version=8, reason="bad publish"),
        ErasureCertificate(
            run_id="r3",
            certificate_id="cert-1",
            request_id="req-7",
            reason="GDPR art. 17 request",
            subject_digest="s" * 64,
            salt="0" * 32,
            identifier_digests=("d" * 64,),
            identifiers={"emails": 1, "orders": 0, "entities": 0},
            tables={"bronze.orders": ErasedIn(rows=3, version=4)},
            verification=ErasureVerification(roots=("/lake",), files_scanned=12),
            completed_at=T0,
        ),
        ErasureProgress(
            run_id="r3",
            certificate_id="cert-1",
            table="gold.correlations",
            erased=ErasedIn(rows=2, redacted=("entity_a",), version=5, versions_purged=(3, 4)),
        ),
        CommunitiesMeasured(
            run_id="r4",
            engine="community@1",
            table="gold.communities",
            basis="ground_truth",
            note="labelled truth t.json",
            report={"adjusted_rand_index": 1.0, "rings": [{"ring": "R1", "best_community": ""}]},
        ),
        CalibrationMeasured(
            run_id="r4",
            engine="correlation@1",
            table="gold.correlations",
            label_horizon_days=90,
            scopes={"shared_card": {"ece_uniform": 0.12, "flagged": True}},
            flagged=("shared_card",),
        ),
        LegalHold(
            hold_id="LH-1",
            action="placed",
            by="counsel",
            reason="case 14",
            salt="1" * 32,
            subject_digest="h" * 64,
            at=T0,
        ),
        MaintenanceDone(
            run_id="maintain-1",
            owner="data-platform",
            tables={
                "silver.events": TableMaintained(
                    zone="silver",
                    format="iceberg",
                    owner="data-platform",
                    compacted_to=7,
                    expired_before=T0,
                    kept=("version 3: published by run r-1",),
                    live_files_before=9,
                    live_files_after=2,
                    stored_files_before=30,
                    stored_files_after=4,
                    stored_bytes_before=3000,
                    stored_bytes_after=1000,
                )
            },
        ),
        AuditExtract(
            run_id="extract-1",
            folder="extracts/q4",
            manifest=ExtractManifest(
                extract_id="extract-1",
                table="gold.correlations",
                at=T0,
                version=4,
                route="a",
                routes_agree=True,
                where="confidence >= 0.8",
                rows=3,
                files={"part-00000.parquet": ExtractFile(sha256="f" * 64, rows=3, bytes=1200)},
                pseudonymised=("entity_a", "entity_b"),
                pseudonymisation="salted sha256",
                withheld={"erasure-1": 1},
                created_at=T0,
            ),
            manifest_sha256="m" * 64,
        ),
    ]


def test_every_kind_round_trips_through_its_canonical_body() -> None:
    entries = one_of_each_kind()
    assert sorted({e.kind for e in entries}) == sorted(KINDS)
    assert {
        "engine_declared",
        "run_started",
        "run_finished",
        "diff_manifest",
        "reconciliation_decision",
        "approval",
        "publication",
        "supersession",
        "notification",
        "rollback",
        "erasure_certificate",
        "erasure_progress",
        "legal_hold",
        "calibration_measured",
        "communities_measured",
        "maintenance",
        "audit_extract",
    } <= set(KINDS)
    for entry in entries:
        body = entry.body()
        assert body == json.dumps(json.loads(body), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert "kind" not in json.loads(body)
        assert parse_entry(entry.kind, entry.run_id, body) == entry


def test_entry_ids_are_content_addresses() -> None:
    a, b = run_entries("r1")[0], run_entries("r1")[0]
    assert a is not b
    assert a.entry_id() == b.entry_id()
    assert run_entries("r2")[0].entry_id() != a.entry_id()
    assert len({e.entry_id() for e in one_of_each_kind()}) == len(one_of_each_kind())


def test_entries_are_immutable_and_validated() -> None:
    entry = run_entries("r1")[1]
    with pytest.raises(Exception, match="frozen"):
        entry.status = "failed"  # type: ignore[misc]
    with pytest.raises(ValueError, match="a failed run needs an error message"):
        RunFinished(run_id="r1", status="failed")
    with pytest.raises(ValueError, match="cannot carry an error"):
        RunFinished(run_id="r1", status="ok", error="boom")
    with pytest.raises(ValueError, match="timezone"):
        Approval(run_id="r1", approver="a", decision="approved", scope="p", approved_at=datetime(2026, 1, 1))
    with pytest.raises(LedgerError, match="kind 'gossip' is unknown"):
        parse_entry("gossip", None, "{}")
    with pytest.raises(LedgerError, match="has an invalid status"):
        parse_entry("run_finished", "r1", '{"status":"maybe"}')


def test_refs_label_outputs_inputs_and_engines() -> None:
    started, finished, published = run_entries("r1")
    assert started.refs() == ("engine:correlation@1", "in:silver.events@3")
    assert finished.refs() == (f"out:{TABLE}@7",)
    assert published.refs() == (f"out:{TABLE}@7",)


def test_identity_digest_depends_on_inputs_and_engines_not_on_purpose() -> None:
    started = run_entries("r1")[0]
    assert isinstance(started, RunStarted)
    assert started.model_copy(update={"purpose": "comparison"}).identity_digest() == started.identity_digest()
    other_input = started.model_copy(update={"inputs": {"silver.events": InputRead(version=4)}})
    assert other_input.identity_digest() != started.identity_digest()


# -- the chain (pure) -------------------------------------------------------------------------


def test_link_builds_a_dense_chain_whose_hashes_anyone_can_recompute() -> None:
    records = chain(run_entries("r1"))
    assert [r.seq for r in records] == [0, 1, 2]
    assert records[0].prev_hash == GENESIS_HASH == "0" * 64
    assert [r.prev_hash for r in records[1:]] == [r.hash for r in records[:-1]]
    for record in records:  # the v2 formula, written out independently
        fields = {
            "seq": record.seq,
            "entry_id": record.entry_id,
            "kind": record.kind,
            "run_id": record.run_id,
            "recorded_at": "2026-03-01T12:00:00.000000Z",
            "body": record.body,
            "prev_hash": record.prev_hash,
            "schema_version": 2,
            "refs": sorted(record.refs or ()),
        }
        text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert record.hash == hashlib.sha256(text.encode()).hexdigest()
    v1 = chain(run_entries("r1"), schema=1)[0]
    v1_fields = {
        "seq": 0,
        "kind": v1.kind,
        "run_id": "r1",
        "recorded_at": "2026-03-01T12:00:00.000000Z",
        "body": v1.body,
        "prev_hash": GENESIS_HASH,
        "schema_version": 1,
    }
    text = json.dumps(v1_fields, sort_keys=True, separators=(",", ":"))
    assert v1.hash == hashlib.sha256(text.encode()).hexdigest()
    assert v1.refs is None


def test_link_continues_after_the_tip() -> None:
    first = chain(run_entries("r1"))
    more = link(run_entries("r2"), Tip(2, first[-1].hash, 2), recorded_at=T0, schema_version=2)
    assert [r.seq for r in more] == [3, 4, 5]
    assert more[0].prev_hash == first[-1].hash
    assert verify_chain(first + more).ok


def tamper_edit(records: list[LedgerRecord]) -> list[LedgerRecord]:
    records[3] = dataclasses.replace(records[3], body=records[3].body.replace("10", "11"))
    return records


def tamper_edit_rehashed(records: list[LedgerRecord]) -> list[LedgerRecord]:
    records[3] = rehashed(records[3], body=records[3].body.replace("10", "11"))
    return records


def tamper_edit_rehashed_keeping_entry_id(records: list[LedgerRecord]) -> list[LedgerRecord]:
    records[3] = rehashed(records[3], body=records[3].body.replace("10", "11"), entry_id=records[3].entry_id)
    return records


def tamper_delete(records: list[LedgerRecord]) -> list[LedgerRecord]:
    del records[3]
    return records


def tamper_delete_first(records: list[LedgerRecord]) -> list[LedgerRecord]:
    del records[0]
    return records


def tamper_delete_and_renumber(records: list[LedgerRecord]) -> list[LedgerRecord]:
    del records[3]
    return [*records[:3], *(rehashed(r, seq=r.seq - 1) for r in records[3:])]


def tamper_insert_duplicate(records: list[LedgerRecord]) -> list[LedgerRecord]:
    forged = rehashed(records[3], body='{"forged":true}', entry_id="f" * 32)
    return [*records, forged]


def tamper_insert_spliced(records: list[LedgerRecord]) -> list[LedgerRecord]:
    forged = rehashed(records[3], body='{"forged":true}')
    return [*records[:3], forged, *(dataclasses.replace(r, seq=r.seq + 1) for r in records[3:])]


def tamper_reorder(records: list[LedgerRecord]) -> list[LedgerRecord]:
    records[3], records[4] = dataclasses.replace(records[4], seq=3), dataclasses.replace(records[3], seq=4)
    return records


def tamper_entry_id(records: list[LedgerRecord]) -> list[LedgerRecord]:
    records[3] = rehashed(records[3], entry_id="0" * 32)
    return records


@pytest.mark.parametrize(
    ("tamper", "first_broken", "problem"),
    [
        (tamper_edit, 3, "does not match its hash"),
        # a re-hashed edit of seq 3 is self-consistent: the chain alone sees the link into seq 4 break
        # (the commit anchors in the table history name seq 3's batch, see the anchor test)
        (tamper_edit_rehashed, 4, "does not link to entry seq 3"),
        (tamper_edit_rehashed_keeping_entry_id, 3, "entry_id that does not match its content"),
        (tamper_delete, 3, "entry seq 3 is missing"),
        (tamper_delete_first, 0, "entry seq 0 is missing"),
        (tamper_delete_and_renumber, 3, "does not link to entry seq 2"),
        (tamper_insert_duplicate, 3, "2 entries claim seq 3"),
        # the forged seq 3 links correctly; the first entry no longer as written is the old seq 3, now 4
        (tamper_insert_spliced, 4, "does not match its hash"),
        (tamper_reorder, 3, "does not match its hash"),
        (tamper_entry_id, 3, "entry_id that does not match its content"),
    ],
    ids=lambda v: v.__name__.removeprefix("tamper_") if callable(v) else None,
)
def test_verify_names_the_first_broken_entry(
    tamper: Callable[[list[LedgerRecord]], list[LedgerRecord]], first_broken: int, problem: str
) -> None:
    records = chain(run_entries("r1") + run_entries("r2"))
    assert verify_chain(records).ok
    report = verify_chain(tamper(list(records)))
    assert not report.ok
    assert report.first_broken_seq == first_broken
    assert report.problem is not None
    assert problem in report.problem


def commit(version: int, records: Sequence[LedgerRecord], operation: str = "MERGE") -> Commit:
    meta = {
        FIRST_SEQ_KEY: str(records[0].seq),
        TIP_SEQ_KEY: str(records[-1].seq),
        TIP_HASH_KEY: records[-1].hash,
    }
    return Commit(version=version, timestamp=T0, operation=operation, run_id=None, metadata=meta)


def test_anchors_in_table_history_catch_what_the_chain_cannot_see() -> None:
    records = chain(run_entries("r1") + run_entries("r2"))
    history = [
        Commit(0, T0, "CREATE TABLE", None, {}),
        commit(1, records[:3]),
        commit(2, records[3:]),
        Commit(3, T0, "ADD COLUMNS", None, {}),
    ]
    assert verify_chain(records, history).ok

    truncated = verify_chain(records[:5], history)  # the last entry deleted: the chain alone looks fine
    assert verify_chain(records[:5]).ok
    assert (truncated.first_broken_seq, truncated.ok) == (5, False)
    assert truncated.problem is not None
    assert "entries from seq 5 on are missing" in truncated.problem

    # a forger rewrote seq 4..5 and re-hashed them: consistent chain, wrong tip hash
    forged = records[:4] + link(
        run_entries("forged")[1:], Tip(3, records[3].hash, 2), recorded_at=T0, schema_version=2
    )
    assert verify_chain(forged).ok
    rewritten = verify_chain(forged, history)
    assert rewritten.first_broken_seq == 3
    assert rewritten.problem is not None
    assert "entries seq 3..5 were rewritten" in rewritten.problem

    rolled_back = verify_chain(records[:3], [*history, commit(4, records[:3], "overwrite")])
    assert rolled_back.first_broken_seq == 3
    assert rolled_back.problem is not None
    assert "rolled back" in rolled_back.problem

    foreign = verify_chain(records, [*history, Commit(5, T0, "DELETE", "someone", {})])
    assert (foreign.ok, foreign.first_broken_seq) == (False, None)
    assert foreign.problem is not None
    assert "changed outside the ledger writer at version 5 (operation DELETE)" in foreign.problem


def test_lineage_names_the_producing_run_its_engines_and_inputs() -> None:
    failed = RunFinished(
        run_id="r0", status="failed", outputs={TABLE: OutputWritten(version=7)}, error="boom"
    )
    built = Publication(run_id="pub", tables={TABLE: 9}, effective_at=T0, built_by_run="r2")
    records = chain([failed, *run_entries("r1"), *run_entries("r2", version=8), built])
    found = lineage_of(records, TABLE, 7)
    assert found is not None
    assert (found.run_id, found.command, found.purpose) == ("r1", "replay", "correction")
    assert found.engines == (ENGINE,)
    assert found.inputs == {
        "silver.events": InputRead(version=3, range={"event_time": ["2025-01-01", "2025-02-01"]})
    }
    assert found.produced_by == ("run_finished", "publication")
    assert found.effective_at == T0
    assert found.evidence == (1, 2, 3)
    by_publication = lineage_of(records, TABLE, 9)
    assert by_publication is not None
    assert (by_publication.run_id, by_publication.produced_by) == ("r2", ("publication",))
    assert lineage_of(records, TABLE, 99) is None
    assert lineage_of(records, "gold.other", 7) is None


def test_fixed_clock_is_deterministic_and_utc() -> None:
    clock = FixedClock(datetime(2026, 1, 1, 9, 0), step=timedelta(seconds=1))
    assert [clock.now() for _ in range(2)] == [
        datetime(2026, 1, 1, 9, 0, tzinfo=UTC),
        datetime(2026, 1, 1, 9, 0, 1, tzinfo=UTC),
    ]


def test_migrations_are_numbered_and_agree_with_the_configured_schema() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, CURRENT_SCHEMA_VERSION + 1))
    assert [m.name[:5] for m in MIGRATIONS] == [f"m{v:04d}" for v in range(1, CURRENT_SCHEMA_VERSION + 1)]
    for m in MIGRATIONS:
        assert (REPO / "ledger" / "migrations" / f"{m.name}.py").is_file()
    config = load_config(REPO / "conf" / "lakehouse.yaml", environ={})
    configured = " ".join(config.tables["ops.ledger"].schema_ddl.split())
    assert configured == schema_ddl()
    assert MIGRATIONS[0].entry().entry_id() == MIGRATIONS[0].entry().entry_id()  # same in every ledger


def test_conflicts_are_told_apart_from_real_errors() -> None:
    assert is_conflict(
        RuntimeError("io.delta.exceptions.ConcurrentAppendException: [DELTA_CONCURRENT_APPEND]")
    )
    assert is_conflict(
        RuntimeError("org.apache.iceberg.exceptions.ValidationException: Found conflicting files")
    )
    assert not is_conflict(RuntimeError("[UNRESOLVED_COLUMN] A column cannot be resolved"))
    assert is_conflict(
        RuntimeError(
            "CommitFailedError: Failed to commit transaction: Commit failed: a concurrent "
            "transactions added new data"
        )
    )


@pytest.mark.parametrize(
    ("location", "path"),
    [
        ("/work/warehouse/delta/ops/ledger", "/work/warehouse/delta/ops/ledger"),
        ("file:/work/ware%20house/ops/ledger", "/work/ware house/ops/ledger"),
        ("file:///work/warehouse/ops/ledger", "/work/warehouse/ops/ledger"),
        ("s3a://bucket/lakehouse/ops/ledger", None),
        ("hdfs://namenode/lakehouse/ops/ledger", None),
        ("relative/ledger", None),
    ],
)
def test_a_delta_ledger_on_the_local_file_system_is_appended_by_deltalake_any_other_by_spark(
    location: str, path: str | None
) -> None:
    assert local_path(location) == path


# -- on the table, both formats ---------------------------------------------------------------


@pytest.fixture
def registry(lakehouse: Any) -> TableRegistry:
    return lakehouse.registry  # type: ignore[no-any-return]


def ledger_commits(table: Table) -> list[Commit]:
    return [c for c in table.history() if TIP_SEQ_KEY in c.metadata]


@pytest.mark.spark
def test_append_read_lineage_and_one_commit_per_batch(registry: TableRegistry) -> None:
    table = ledger_table(registry)
    table.create()  # as `lakehouse demo` does, straight from conf/lakehouse.yaml
    ledger = open_ledger(registry, clock=FixedClock(T0, step=timedelta(seconds=1)))
    assert ledger.migration.applied == ("m0001_initial", "m0002_refs")

    result = ledger.writer.append(*run_entries("run-1"))
    assert ([r.seq for r in result.records], result.attempts) == ([2, 3, 4], 1)
    again = ledger.writer.append(*run_entries("run-1"))  # a rerun records nothing twice
    assert (again.records, len(again.skipped)) == ((), 3)

    reader = ledger.reader
    assert reader.by_run("run-1") == run_entries("run-1")
    assert [e.kind for e in reader.by_kind("ledger_schema")] == ["ledger_schema", "ledger_schema"]
    tip = reader.tip()
    assert tip is not None
    assert (tip.seq, tip.hash, tip.recorded_at) == (
        4,
        result.records[-1].hash,
        result.records[-1].recorded_at,
    )
    found = reader.lineage(TABLE, 7)
    assert found is not None
    assert (found.run_id, found.engines, found.effective_at) == ("run-1", (ENGINE,), T0)
    assert found.inputs["silver.events"].version == 3
    assert reader.lineage(TABLE, 8) is None

    report = reader.verify()
    assert (report.ok, report.entries, report.tip_seq) == (True, 5, 4)
    commits = ledger_commits(table)  # each batch is one commit carrying its run id and new tip
    assert [(c.metadata[FIRST_SEQ_KEY], c.metadata[TIP_SEQ_KEY]) for c in commits] == [
        ("0", "0"),
        ("1", "1"),
        ("2", "4"),
    ]
    assert commits[-1].run_id == "run-1"
    assert open_ledger(registry, clock=FixedClock(T0)).migration.applied == ()

    # after its own append, the process answers from the records it read plus those it
    # wrote: exactly what a fresh scan of the new version reads
    written = ledger.writer.append(*run_entries("run-2", 8)).records
    assert [r.seq for r in written] == [5, 6, 7]
    assert current_records(table) == tuple(read_records(table))
    assert reader.tip() == written[-1]


@pytest.mark.spark
def test_tampering_through_the_table_is_found_and_named(registry: TableRegistry) -> None:
    """Each tamper goes before the previous one, so each becomes the first broken entry."""
    ledger = open_ledger(registry, clock=FixedClock(T0))
    for run, version in (("run-1", 7), ("run-2", 8), ("run-3", 9)):
        ledger.writer.append(*run_entries(run, version))  # seqs 2..4, 5..7, 8..10
    table = ledger_table(registry)
    columns = table_columns(table)
    clean = {r.seq: r for r in read_records(table)}
    assert sorted(clean) == list(range(11))
    assert ledger.reader.verify().ok

    def frame(*records: LedgerRecord) -> Any:
        return records_frame(table, records, columns)

    def first_broken() -> tuple[int | None, str]:
        report = ledger.reader.verify()
        assert not report.ok
        return report.first_broken_seq, report.problem or ""

    assert ledger.reader.tip() == clean[10]
    table.delete_where("seq = 10")  # truncated tail: only the commit anchors in the history can tell
    assert ledger.reader.tip() == clean[9], "a change through the table is a new version: read afresh"
    assert first_broken() == (
        10,
        f"entries from seq 10 on are missing: ledger commit {_tip_commit(table, 10)} recorded tip seq 10",
    )

    table.merge(
        frame(dataclasses.replace(clean[8], seq=7), dataclasses.replace(clean[7], seq=8)), keys=["entry_id"]
    )
    seq, problem = first_broken()  # reordered
    assert (seq, problem) == (
        7,
        "entry seq 7 does not match its hash: it was edited or moved after it was written",
    )

    forged = rehashed(clean[5], body='{"forged":true}', entry_id="f" * 32)
    table.merge(frame(forged), keys=["entry_id"])  # inserted
    assert first_broken() == (5, "2 entries claim seq 5: an entry was inserted or the chain forked")

    table.delete_where("seq = 4")  # deleted
    assert first_broken() == (
        4,
        "entry seq 4 is missing (next present is seq 5): entries were deleted from the ledger",
    )

    table.merge(frame(dataclasses.replace(clean[2], body=clean[2].body.replace("10", "11"))), keys=["seq"])
    assert first_broken() == (
        2,
        "entry seq 2 does not match its hash: it was edited or moved after it was written",
    )


def _tip_commit(table: Table, tip_seq: int) -> int:
    return next(c.version for c in ledger_commits(table) if c.metadata[TIP_SEQ_KEY] == str(tip_seq))


@pytest.mark.spark
def test_two_concurrent_writers_keep_one_linear_chain(registry: TableRegistry) -> None:
    open_ledger(registry, clock=FixedClock(T0))
    table = ledger_table(registry)
    barrier = threading.Barrier(2, timeout=120)
    results: dict[str, list[int]] = {}
    errors: list[BaseException] = []

    def write(name: str) -> None:
        first_call = [True]

        def race(attempt: int) -> None:
            # Both writers read the same tip before either commits: one of them must lose.
            if first_call[0]:
                first_call[0] = False
                barrier.wait()

        writer = LedgerWriter(table, clock=FixedClock(T0), on_attempt=race)
        try:
            results[name] = [writer.append(*run_entries(f"{name}-{i}")[:2]).attempts for i in range(2)]
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=write, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors

    records = read_records(table)
    assert [r.seq for r in records] == list(range(2 + 2 * 2 * 2))
    assert len({r.prev_hash for r in records}) == len(records)
    assert LedgerReader(table).verify().ok
    assert results["a"][0] + results["b"][0] >= 3, results  # the loser of the race retried


def ledger_in(
    spark: Any, config: LakehouseConfig, layout: TableFormat, prefix: str
) -> tuple[Table, LedgerStorage, list[str]]:
    """A fresh ledger of its own instance with every zone in ``layout``: the table, its storage
    and its columns."""
    instance = f"{prefix}{uuid.uuid4().hex[:6]}"
    registry = TableRegistry(spark, config.model_copy(update={"force_format": layout, "instance": instance}))
    open_ledger(registry, clock=FixedClock(T0))
    table = ledger_table(registry)
    return table, storage_for(table), table_columns(table)


@pytest.mark.spark
def test_both_delta_merges_append_once_and_insert_nothing_on_a_taken_seq(
    spark_session: Any, lakehouse_config: LakehouseConfig
) -> None:
    """The guarded MERGE through delta-rs (a local warehouse) and through Spark (any other
    storage), on one real Delta ledger: each commits its batch once with the run's commit
    metadata, and a batch whose first seq another writer already took inserts nothing
    (False: retry from the new tip); the chain they make together verifies."""
    from lakehouse.tables.base import commit_metadata
    from ledger.chain import commit_anchor

    table, storage, columns = ledger_in(spark_session, lakehouse_config, TableFormat.DELTA, "dm")
    assert isinstance(storage, DeltaLedgerStorage)
    assert local_path(table.location) is not None, "the test warehouse is local: delta-rs appends"
    try:
        for name, way in (("rust", "guarded_append"), ("spark", "spark_merge")):
            tip = read_records(table)[-1]
            records = link(
                run_entries(f"run-{name}")[:2],
                Tip(tip.seq, tip.hash, tip.schema_version),
                recorded_at=T0,
                schema_version=CURRENT_SCHEMA_VERSION,
            )
            meta = commit_metadata(f"run-{name}", commit_anchor(records))

            def append(batch: list[LedgerRecord], way: str = way, meta: dict[str, str] = meta) -> bool | None:
                if way == "spark_merge":
                    return storage.spark_merge(table, batch, columns, meta=meta)
                return storage.guarded_append(table, batch, columns, pin=None, meta=meta)

            assert append(records) is True, name
            rival = [dataclasses.replace(r, entry_id="0" * 32) for r in records]
            assert append(rival) is False, f"{name}: the seq is taken, nothing is inserted"
            assert table.history()[-1].run_id == f"run-{name}", "the commit carries the run's metadata"
        records = read_records(table)
        assert [r.seq for r in records] == list(range(len(records)))
        assert records == spark_records(table), "delta-rs reads what Spark reads"
        assert read_records(table, as_of=2) == spark_records(table, as_of=2)
        assert LedgerReader(table).verify().ok
    finally:
        table.drop()


@pytest.mark.spark
def test_both_iceberg_appends_commit_once_and_refuse_a_snapshot_that_moved(
    spark_session: Any, lakehouse_config: LakehouseConfig
) -> None:
    """The guarded append through pyiceberg (a JDBC catalog and a local warehouse) and through
    Spark (any other catalog or storage), on one real Iceberg ledger: each commits its batch
    once with the run's snapshot properties, and a batch read from a snapshot another writer
    has moved past writes nothing (pyiceberg: False, retry from the new tip; Spark: Iceberg's
    validation fails as a conflict); Spark reads every pyiceberg commit at once (its cached
    table is refreshed), pyiceberg reads what Spark reads, at any snapshot, and the chain they
    make together verifies."""
    from lakehouse.tables.base import commit_metadata
    from ledger.chain import commit_anchor

    table, storage, columns = ledger_in(spark_session, lakehouse_config, TableFormat.ICEBERG, "im")
    assert isinstance(storage, IcebergLedgerStorage)
    versions: dict[str, int | None] = {}
    try:
        for name in ("pyiceberg", "spark"):
            tip = read_records(table)[-1]
            pin = table.current_version()
            records = link(
                run_entries(f"run-{name}")[:2],
                Tip(tip.seq, tip.hash, tip.schema_version),
                recorded_at=T0,
                schema_version=CURRENT_SCHEMA_VERSION,
            )
            meta = commit_metadata(f"run-{name}", commit_anchor(records))
            if name == "pyiceberg":
                assert storage.guarded_append(table, records, columns, pin=pin, meta=meta) is True
            else:
                assert storage.spark_overwrite(table, records, columns, pin=pin, meta=meta) is True
            assert table.history()[-1].run_id == f"run-{name}", "the commit carries the run's metadata"
            assert spark_records(table)[-2:] == records, f"{name}: Spark reads the commit at once"
            rival = [dataclasses.replace(r, entry_id="0" * 32) for r in records]
            if name == "pyiceberg":
                assert storage.guarded_append(table, rival, columns, pin=pin, meta=meta) is False
            else:
                with pytest.raises(Exception, match="conflicting") as raised:
                    storage.spark_overwrite(table, rival, columns, pin=pin, meta=meta)
                assert is_conflict(raised.value), raised.value
            versions[name] = table.current_version()
        records = read_records(table)
        assert [r.seq for r in records] == list(range(len(records)))
        assert records == spark_records(table), "pyiceberg reads what Spark reads"
        earlier = versions["pyiceberg"]
        assert earlier is not None
        assert read_records(table, as_of=earlier) == spark_records(table, as_of=earlier)
        assert len(read_records(table, as_of=earlier)) == len(records) - 2
        assert LedgerReader(table).verify().ok
    finally:
        table.drop()


@pytest.mark.spark
def test_a_v1_ledger_upgrades_to_current_and_still_verifies(registry: TableRegistry) -> None:
    clock = FixedClock(T0, step=timedelta(minutes=1))
    table = ledger_table(registry)
    assert migrate(registry, clock=clock, to_version=1).applied == ("m0001_initial",)
    assert "refs" not in table_columns(table)
    commit_entries(table, run_entries("run-old"), clock=clock, schema_version=1, expect_tip_schema=1)
    with pytest.raises(
        LedgerSchemaError, match=r"is at ledger schema v1, this code writes v2; run ledger\.migrate"
    ):
        LedgerWriter(table, clock=clock).append(*run_entries("run-new", version=8))
    assert LedgerReader(table).verify().ok
    # interrupted after adding its column (Iceberg makes no snapshot for that): still readable
    m0002_refs.apply(table)
    assert [r.schema_version for r in LedgerReader(table).records()] == [1, 1, 1, 1]

    report = migrate(registry, clock=clock)
    assert (report.from_version, report.to_version, report.applied) == (1, 2, ("m0002_refs",))
    assert table_columns(table) == [c.split()[0] for c in schema_ddl().split(", ")]
    LedgerWriter(table, clock=clock).append(*run_entries("run-new", version=8))

    reader = LedgerReader(table)
    verified = reader.verify()
    assert (verified.ok, verified.entries) == (True, 1 + 3 + 1 + 3)
    records = reader.records()
    assert [r.schema_version for r in records] == [1, 1, 1, 1, 2, 2, 2, 2]
    assert all(r.refs is None for r in records[:4])
    assert records[-1].refs == (f"out:{TABLE}@8",)
    old, new = reader.lineage(TABLE, 7), reader.lineage(TABLE, 8)
    assert (old.run_id if old else None, new.run_id if new else None) == ("run-old", "run-new")
    assert schema_version(table) == CURRENT_SCHEMA_VERSION
    assert migrate(registry, clock=clock).applied == ()


# -- two OS processes -------------------------------------------------------------------------

CHILD_BATCHES = 2
"""Batches per process and format: the first races the other process on one tip, the second
follows the retry (more batches only repeat the second, each in a cold JVM)."""


def file_barrier(folder: str, name: str, timeout: float = 300) -> None:
    """Wait until both writer processes have reached this point (each leaves a file)."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / name).touch()
    deadline = time.monotonic() + timeout
    while len(list(Path(folder).iterdir())) < 2:
        if time.monotonic() > deadline:
            raise TimeoutError("the other writer process never reached the barrier")
        time.sleep(0.05)


def racing_once(folder: str, name: str) -> Callable[[int], None]:
    """An attempt hook that meets the other process at its first attempt, once.

    Called after the tip was read and before the commit: both processes then commit on
    the same tip, so one of them must lose and retry."""
    first_call = [True]

    def race(attempt: int) -> None:
        if first_call[0]:
            first_call[0] = False
            file_barrier(folder, name)

    return race


def child_main(settings: dict[str, Any]) -> None:
    """The second writer process: start Spark, race the test process, report."""
    from lakehouse.session import build_session

    started = time.monotonic()
    config = load_config(REPO / "conf" / "lakehouse.yaml", environ={}, overrides=settings["overrides"])
    spark = build_session(config)
    session_s = round(time.monotonic() - started, 1)
    report = write_racing_batches(spark, config, settings)
    print("RESULT " + json.dumps({**report, "session_s": session_s}), flush=True)
    spark.stop()


def write_racing_batches(spark: Any, config: LakehouseConfig, settings: dict[str, Any]) -> dict[str, Any]:
    """One writer: wait for the other, then per format migrate and append batches, the first
    racing the other writer on one tip; returns the attempts per batch and format."""
    report: dict[str, Any] = {"name": settings["name"]}
    Path(settings["ready"]).touch()
    deadline = time.monotonic() + 300
    while not all(Path(p).exists() for p in settings["all_ready"]):
        if time.monotonic() > deadline:
            raise TimeoutError("the other writer process never became ready")
        time.sleep(0.05)
    for fmt, instance in settings["instances"].items():
        update = {"force_format": TableFormat(fmt), "instance": instance}
        registry = TableRegistry(spark, config.model_copy(update=update))
        began = time.monotonic()
        open_ledger(registry, clock=FixedClock(T0))
        writer = LedgerWriter.for_registry(
            registry, clock=FixedClock(T0), on_attempt=racing_once(settings["race"][fmt], settings["name"])
        )
        attempts = [
            writer.append(*run_entries(f"{settings['name']}-{i}")[:2]).attempts for i in range(CHILD_BATCHES)
        ]
        report[fmt] = {"attempts": attempts, "seconds": round(time.monotonic() - began, 1)}
    return report


@pytest.mark.spark
@pytest.mark.slow
def test_two_writer_processes_that_conflict_keep_one_linear_chain(
    spark_session: Any, lakehouse_config: LakehouseConfig, tmp_path: Path
) -> None:
    instances = {f.value: f"p{uuid.uuid4().hex[:8]}" for f in (TableFormat.DELTA, TableFormat.ICEBERG)}
    ready = [str(tmp_path / f"ready-{n}") for n in ("a", "b")]
    settings = {
        name: {
            "name": name,
            "ready": flag,
            "all_ready": ready,
            "instances": instances,
            "race": {fmt: str(tmp_path / f"race-{fmt}") for fmt in instances},
        }
        for name, flag in zip(("a", "b"), ready, strict=True)
    }
    # "b" is a second OS process with its own JVM; "a" is this test process, its own session
    overrides = {
        "workdir": str(lakehouse_config.workdir_path),
        "spark.master": "local[1]",
        "spark.shuffle_partitions": 1,
        "spark.driver_memory": "1g",
    }
    child = subprocess.Popen(
        [sys.executable, __file__, json.dumps({**settings["b"], "overrides": overrides})],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        reports = [write_racing_batches(spark_session, lakehouse_config, settings["a"])]
    finally:
        out, err = child.communicate(timeout=600)
    python_lines = [line for line in err.splitlines() if not line.lstrip().startswith("at ")]
    assert child.returncode == 0, "\n".join(python_lines[-40:])
    reports += [json.loads(line[7:]) for line in out.splitlines() if line.startswith("RESULT ")]
    print(json.dumps(reports))  # shown with -s: session start, attempts per batch, seconds per format

    for fmt, instance in instances.items():
        first_batches = [report[fmt]["attempts"][0] for report in reports]
        assert len(first_batches) == 2, reports
        assert sum(first_batches) >= 3, (fmt, reports)  # they raced on one tip: the loser retried
        config = lakehouse_config.model_copy(update={"force_format": TableFormat(fmt), "instance": instance})
        table = ledger_table(TableRegistry(spark_session, config))
        try:
            records = read_records(table)
            expected = len(MIGRATIONS) + 2 * CHILD_BATCHES * 2
            assert [r.seq for r in records] == list(range(expected)), fmt
            assert len({r.prev_hash for r in records}) == expected, fmt
            report = LedgerReader(table).verify()
            assert report.ok, (fmt, report)
        finally:
            table.drop()


@pytest.mark.spark
def test_a_ledger_kept_in_another_format_is_refused_not_started_again(
    spark_session: Any, lakehouse_config: LakehouseConfig
) -> None:
    """A work dir made while ``ops`` was Delta (the old default) keeps its ledger: opening it
    with ``ops`` in Iceberg is exit 2 naming the setting, and nothing is created or lost."""
    from tests.cli_runner import instance_env, run_cli
    from tests.conftest import drop_all

    instance = f"fmt{uuid.uuid4().hex[:6]}"
    argv = ["ledger", "verify", "--conf", str(REPO / "conf" / "lakehouse.yaml")]
    argv += ["--workdir", str(lakehouse_config.workdir_path), "--json"]
    as_delta = {**instance_env(instance), "LAKEHOUSE__ZONE_FORMATS__OPS": "delta"}
    made = run_cli(argv, as_delta)
    assert made.code == 0, made.stderr

    refused = run_cli(argv, instance_env(instance))
    assert refused.code == 2, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, "one line: no log of the statements that probed for the ledger"
    error = json.loads(lines[0])
    assert "ops.ledger exists as a delta table" in error["error"]
    assert "zone_formats.ops is iceberg" in error["error"]
    config = load_config(
        REPO / "conf" / "lakehouse.yaml",
        environ=instance_env(instance),
        overrides={"workdir": str(lakehouse_config.workdir_path)},
    )
    assert not TableRegistry(spark_session, config).get("ops.ledger").exists(), "no empty twin"

    kept = run_cli(argv, as_delta)
    assert kept.code == 0, kept.stderr
    assert json.loads(made.stdout) == json.loads(kept.stdout)
    drop_all(TableRegistry(spark_session, config.model_copy(update={"force_format": TableFormat.DELTA})))


def test_a_catalog_file_put_in_its_own_place_gets_a_catalog_of_its_own(tmp_path: Path) -> None:
    """The pyiceberg catalogs the ledger keeps open (:func:`sqlite_catalog`, real pyiceberg on
    real SQLite) are one per database file: a lake restored from a copy (the benchmarks'
    restore) puts a new file at the same path, where a connection to the file it replaced can
    only fail ("attempt to write a readonly database"); the ledger opens the new file instead."""
    path = tmp_path / "iceberg_catalog.db"
    uri, warehouse = f"{SQLITE_JDBC}{path}", (tmp_path / "warehouse").as_uri()
    assert sqlite_file_identity(uri) is None, "no file yet: nothing to key on"
    first = sqlite_catalog("lake", uri, warehouse)
    assert first is sqlite_catalog("lake", uri, warehouse), "opened once per process and file"
    first.create_namespace("before")
    identity = sqlite_file_identity(uri)
    assert identity is not None
    assert sqlite_file_identity(f"{uri}?journal_mode=WAL") == identity, "URI parameters are not the path"

    copy = tmp_path / "copy.db"
    copy.write_bytes(path.read_bytes())
    copy.replace(path)
    assert sqlite_file_identity(uri) not in (None, identity)
    with pytest.raises(Exception, match="readonly database"):
        first.create_namespace("stale")  # the failure a cached catalog met after a restore
    second = sqlite_catalog("lake", uri, warehouse)
    assert second is not first
    second.create_namespace("after")
    assert {n[0] for n in second.list_namespaces()} == {"before", "after"}


if __name__ == "__main__":
    child_main(json.loads(sys.argv[1]))
