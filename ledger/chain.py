"""The hash chain: pure functions over ledger records, no Spark and no I/O.

A :class:`LedgerRecord` is one row of ``ops.ledger``. Records form one linear chain:
``seq`` is dense from 0, every record carries the hash of the one before it
(``prev_hash``; 64 zeros for seq 0), and its own ``hash`` is the sha256 of the canonical
JSON of its fields. Which fields are hashed depends on the record's ``schema_version``
(:data:`HASHED_FIELDS`): rows keep the formula of the schema they were written under, so
an upgrade never rewrites history.

:func:`verify_chain` finds the first broken record of any edit (hash mismatch), deletion
(seq gap, or a ``prev_hash`` that names no predecessor), insertion (two records claiming
one seq, or a link mismatch) and reorder (seq is hashed, so a moved record no longer
matches). :func:`check_anchors` adds what a chain cannot see by itself: every ledger commit
records its tip (seq and hash) in the table's commit metadata, so a truncated tail, a
rewritten-and-rehashed stretch, a rolled-back table or a write that bypassed the writer
show up against the table's own history.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from lakehouse.digest import canonical_json
from lakehouse.errors import LedgerError
from lakehouse.tables import Commit
from ledger.clock import utc
from ledger.entries import LedgerEntryBase, entry_id_of, parse_entry

GENESIS_HASH = "0" * 64
"""``prev_hash`` of the first record."""

HASHED_FIELDS: Mapping[int, tuple[str, ...]] = {
    1: ("seq", "kind", "run_id", "recorded_at", "body", "prev_hash", "schema_version"),
    2: ("seq", "entry_id", "kind", "run_id", "recorded_at", "body", "prev_hash", "schema_version", "refs"),
}
"""Fields covered by ``hash``, per schema version of the record (see ledger/migrations)."""

TIP_SEQ_KEY = "lakehouse.ledger.tip-seq"
TIP_HASH_KEY = "lakehouse.ledger.tip-hash"
FIRST_SEQ_KEY = "lakehouse.ledger.first-seq"
"""Commit metadata written by every ledger append: the batch's first seq and the new tip."""

MAINTENANCE_OPERATIONS = frozenset(
    {
        # Delta
        "CREATE TABLE",
        "ADD COLUMNS",
        "SET TBLPROPERTIES",
        "UNSET TBLPROPERTIES",
        "UPGRADE PROTOCOL",
        "OPTIMIZE",
        "VACUUM START",
        "VACUUM END",
        # Iceberg
        "replace",
    }
)
"""Table operations that change layout or schema, never content; any other commit without
ledger metadata changed the ledger's rows outside the writer."""


def format_timestamp(moment: datetime) -> str:
    """The canonical text of a ``recorded_at`` value: UTC, microseconds, ``Z``."""
    return utc(moment).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LedgerRecord:
    """One stored row of the ledger."""

    seq: int
    entry_id: str
    kind: str
    run_id: str | None
    recorded_at: datetime
    body: str
    prev_hash: str
    hash: str
    schema_version: int
    refs: tuple[str, ...] | None = None
    """From schema v2 on; None on rows written under v1."""

    def entry(self) -> LedgerEntryBase:
        """The typed entry this row holds."""
        return parse_entry(self.kind, self.run_id, self.body)

    def computed_hash(self) -> str:
        """The hash this record's fields give (equal to ``hash`` unless tampered with)."""
        return record_hash(
            seq=self.seq,
            entry_id=self.entry_id,
            kind=self.kind,
            run_id=self.run_id,
            recorded_at=self.recorded_at,
            body=self.body,
            prev_hash=self.prev_hash,
            schema_version=self.schema_version,
            refs=self.refs,
        )


@dataclass(frozen=True)
class Tip:
    """The last record of a chain: where the next one attaches."""

    seq: int
    hash: str
    schema_version: int


def record_hash(
    *,
    seq: int,
    entry_id: str,
    kind: str,
    run_id: str | None,
    recorded_at: datetime,
    body: str,
    prev_hash: str,
    schema_version: int,
    refs: Sequence[str] | None,
) -> str:
    """sha256 of the canonical JSON of the fields the record's schema version hashes."""
    fields = HASHED_FIELDS.get(schema_version)
    if fields is None:
        raise LedgerError(
            f"ledger schema version {schema_version} is unknown to this code "
            f"(known: {sorted(HASHED_FIELDS)}); upgrade lakehouse-replay"
        )
    values: dict[str, object] = {
        "seq": seq,
        "entry_id": entry_id,
        "kind": kind,
        "run_id": run_id,
        "recorded_at": format_timestamp(recorded_at),
        "body": body,
        "prev_hash": prev_hash,
        "schema_version": schema_version,
        "refs": sorted(refs) if refs is not None else None,
    }
    chosen = {name: values[name] for name in fields}
    return hashlib.sha256(canonical_json(chosen).encode("utf-8")).hexdigest()


def link(
    entries: Sequence[LedgerEntryBase],
    tip: Tip | None,
    *,
    recorded_at: datetime,
    schema_version: int,
) -> list[LedgerRecord]:
    """Records for ``entries`` attached after ``tip`` (or starting the chain), in order."""
    if schema_version not in HASHED_FIELDS:
        raise LedgerError(
            f"cannot write ledger schema version {schema_version}; known: {sorted(HASHED_FIELDS)}"
        )
    seq = tip.seq + 1 if tip is not None else 0
    prev = tip.hash if tip is not None else GENESIS_HASH
    stamp = utc(recorded_at)
    records = []
    for entry in entries:
        body = entry.body()
        refs = tuple(sorted(entry.refs())) if schema_version >= 2 else None
        fields = {
            "seq": seq,
            "entry_id": entry_id_of(entry.kind, entry.run_id, body),
            "kind": entry.kind,
            "run_id": entry.run_id,
            "recorded_at": stamp,
            "body": body,
            "prev_hash": prev,
            "schema_version": schema_version,
            "refs": refs,
        }
        digest = record_hash(**fields)  # type: ignore[arg-type]
        records.append(LedgerRecord(hash=digest, **fields))  # type: ignore[arg-type]
        seq += 1
        prev = digest
    return records


@dataclass(frozen=True)
class VerifyReport:
    """The result of checking a ledger."""

    ok: bool
    entries: int
    first_broken_seq: int | None
    """The first record that is not what was written (or the first missing seq)."""
    problem: str | None
    """One line: what is wrong and what to do; None when ok."""
    tip_seq: int | None = None
    tip_hash: str | None = None


@dataclass(frozen=True)
class _Break:
    seq: int | None
    problem: str
    covers: tuple[int, int] | None = None
    """For a batch found rewritten by its anchor: the seq range of that batch."""


def _chain_break(records: Sequence[LedgerRecord]) -> _Break | None:
    ordered = sorted(records, key=lambda r: (r.seq, r.hash))
    counts = Counter(r.seq for r in ordered)
    prev_hash = GENESIS_HASH
    expected = 0
    for record in ordered:
        if record.seq < expected:  # second record claiming a seq already seen
            continue
        if record.seq > expected:
            return _Break(
                expected,
                f"entry seq {expected} is missing (next present is seq {record.seq}): "
                f"entries were deleted from the ledger",
            )
        if counts[record.seq] > 1:
            return _Break(
                record.seq,
                f"{counts[record.seq]} entries claim seq {record.seq}: "
                f"an entry was inserted or the chain forked",
            )
        if record.computed_hash() != record.hash:
            return _Break(
                record.seq,
                f"entry seq {record.seq} does not match its hash: "
                f"it was edited or moved after it was written",
            )
        if record.prev_hash != prev_hash:
            return _Break(
                record.seq,
                f"entry seq {record.seq} does not link to entry seq {record.seq - 1} (prev_hash differs): "
                f"an entry before it was deleted, inserted or replaced",
            )
        if record.schema_version >= 2 and record.entry_id != entry_id_of(
            record.kind, record.run_id, record.body
        ):
            return _Break(
                record.seq, f"entry seq {record.seq} has an entry_id that does not match its content"
            )
        prev_hash = record.hash
        expected += 1
    return None


def verify_chain(records: Sequence[LedgerRecord], commits: Sequence[Commit] | None = None) -> VerifyReport:
    """Check records (in any order) and, if given, the table history they were read from.

    The report names the first broken seq: of all problems found, the one earliest in the
    chain. Commits written outside the ledger writer are reported last (they may have
    been undone, but the table's history still shows them).
    """
    chain = _chain_break(records)
    anchors = _anchor_break(records, commits) if commits is not None else None
    if chain is not None and anchors is not None and anchors.covers is not None:
        low, high = anchors.covers
        if chain.seq is not None and low <= chain.seq <= high:
            anchors = None  # the chain names the broken entry inside that batch more precisely
    found = [b for b in (chain, anchors) if b is not None]
    last = max(records, key=lambda r: r.seq) if records else None
    tip_seq = last.seq if last is not None else None
    tip_hash = last.hash if last is not None else None
    if found:
        first = min(found, key=lambda b: b.seq if b.seq is not None else 1 << 62)
        return VerifyReport(False, len(records), first.seq, first.problem, tip_seq, tip_hash)
    foreign = _foreign_commit(commits) if commits is not None else None
    if foreign is not None:
        return VerifyReport(False, len(records), None, foreign, tip_seq, tip_hash)
    return VerifyReport(True, len(records), None, None, tip_seq, tip_hash)


def _anchor_break(records: Sequence[LedgerRecord], commits: Sequence[Commit]) -> _Break | None:
    by_seq: dict[int, set[str]] = {}
    for record in records:
        by_seq.setdefault(record.seq, set()).add(record.hash)
    last_seq = max(by_seq) if by_seq else -1
    anchors = [
        (commit, int(commit.metadata[TIP_SEQ_KEY]), commit.metadata[TIP_HASH_KEY])
        for commit in commits
        if TIP_SEQ_KEY in commit.metadata and TIP_HASH_KEY in commit.metadata
    ]
    highest = -1
    for commit, tip_seq, _ in anchors:
        if tip_seq < highest:
            return _Break(
                tip_seq + 1,
                f"the ledger table was rolled back: version {commit.version} has tip seq {tip_seq} "
                f"after an earlier commit had tip seq {highest}",
            )
        highest = tip_seq
    for commit, tip_seq, tip_hash in anchors:
        first_seq = int(commit.metadata.get(FIRST_SEQ_KEY, tip_seq))
        if tip_seq > last_seq:
            return _Break(
                last_seq + 1,
                f"entries from seq {last_seq + 1} on are missing: ledger commit {commit.version} "
                f"recorded tip seq {tip_seq}",
            )
        if tip_hash not in by_seq.get(tip_seq, set()):
            return _Break(
                first_seq,
                f"entries seq {first_seq}..{tip_seq} were rewritten: ledger commit {commit.version} "
                f"recorded tip hash {tip_hash[:12]}, the table now holds another",
                (first_seq, tip_seq),
            )
    return None


def _foreign_commit(commits: Sequence[Commit]) -> str | None:
    for commit in commits:
        if TIP_SEQ_KEY in commit.metadata or commit.operation in MAINTENANCE_OPERATIONS:
            continue
        return (
            f"the ledger table was changed outside the ledger writer at version {commit.version} "
            f"(operation {commit.operation}); investigate who wrote it"
        )
    return None


def tip_of(records: Sequence[LedgerRecord]) -> Tip | None:
    """The record with the highest seq, as a :class:`Tip`."""
    if not records:
        return None
    last = max(records, key=lambda r: r.seq)
    return Tip(last.seq, last.hash, last.schema_version)


def commit_anchor(records: Sequence[LedgerRecord]) -> dict[str, str]:
    """The commit metadata a ledger append writes: first seq and the new tip."""
    if not records:
        raise LedgerError("a ledger commit needs at least one record")
    return {
        FIRST_SEQ_KEY: str(records[0].seq),
        TIP_SEQ_KEY: str(records[-1].seq),
        TIP_HASH_KEY: records[-1].hash,
    }
