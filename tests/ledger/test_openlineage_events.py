"""OpenLineage events of recorded runs, without Spark: ledger entries in, validated events out.

A recording writer stands in for the ledger table (it numbers the entries like the ledger
and hands the records to the emitter as :class:`ledger.writer.LedgerWriter` does after a
commit), so :func:`workloads.runs.recorded_run` runs unchanged. The real recorded history
(the command line's) is checked in ``tests/jobs/test_cli_history.py``.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from lakehouse.config import LakehouseConfig, load_config
from lakehouse.errors import ConfigError
from ledger import EngineIdentity, Publication, Rollback, RunStarted
from ledger.chain import LedgerRecord
from ledger.entries import LedgerEntryBase
from ledger.openlineage_events import (
    FACET,
    LEDGER_RUN_NAMESPACE,
    LineageEmitter,
    dataset_name,
    openlineage_run_id,
)
from tests.openlineage_schema import read_events, schema_errors
from workloads.runs import recorded_run

REPO = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ENGINE = EngineIdentity(
    name="correlation", version=2, code_fingerprint="sha256:abc", config_digest="sha256:def"
)


def config_of(tmp_path: Path, **lineage: Any) -> LakehouseConfig:
    overrides: dict[str, Any] = {"workdir": str(tmp_path / "work")}
    overrides.update({f"lineage.{k}": v for k, v in lineage.items()})
    return load_config(REPO / "conf" / "lakehouse.yaml", environ={}, overrides=overrides)


class RecordingWriter:
    """Numbers entries like the ledger and emits their events like LedgerWriter after a commit."""

    def __init__(self, emitter: LineageEmitter) -> None:
        self.emitter = emitter
        self.records: list[LedgerRecord] = []

    def append(self, *entries: LedgerEntryBase, **_: Any) -> None:
        new = [
            LedgerRecord(
                seq=len(self.records) + i,
                entry_id=e.entry_id(),
                kind=e.kind,
                run_id=e.run_id,
                recorded_at=T0 + timedelta(seconds=len(self.records) + i),
                body=e.body(),
                prev_hash="0" * 64,
                hash="0" * 64,
                schema_version=2,
                refs=e.refs(),
            )
            for i, e in enumerate(entries)
        ]
        self.records += new
        self.emitter.emit_records(new)


def fake_ledger(config: LakehouseConfig) -> Any:
    return SimpleNamespace(writer=RecordingWriter(LineageEmitter(config)))


def valid_events(path: Path) -> list[dict[str, Any]]:
    events = read_events(path)
    assert events
    for event in events:
        assert schema_errors(event) == [], event
    return events


def build(ledger: Any, *, fail: bool = False) -> None:
    with recorded_run(
        ledger,
        run_id="build-gold-1",
        command="build gold",
        purpose="build",
        inputs={"silver.events": 7, "gold.baselines": None},
        engines=[ENGINE],
    ) as run:
        if fail:
            raise RuntimeError("executor lost\nsecond line")
        run.outputs["gold.correlations"] = 123456789
        run.outputs["gold.entity_daily"] = 3


def test_a_recorded_run_emits_start_then_complete_with_pinned_versions_and_its_ledger_ids(
    tmp_path: Path,
) -> None:
    config = config_of(tmp_path)
    ledger = fake_ledger(config)
    build(ledger)

    start, complete = valid_events(config.lineage_path)
    started = ledger.writer.records[0]
    assert [start["eventType"], complete["eventType"]] == ["START", "COMPLETE"]
    assert (
        start["run"]["runId"]
        == complete["run"]["runId"]
        == openlineage_run_id("build-gold-1", started.entry_id)
    )
    assert start["run"]["runId"] == str(uuid.uuid5(LEDGER_RUN_NAMESPACE, f"build-gold-1/{started.entry_id}"))
    assert start["job"] == complete["job"]
    assert start["job"]["name"] == "build gold"
    assert start["job"]["namespace"] == "lakehouse-replay"
    assert start["eventTime"] == started.recorded_at.isoformat()
    facet = complete["run"]["facets"][FACET]
    assert facet["_schemaURL"] == "urn:lakehouse-replay:openlineage:LakehouseRunFacet"
    assert facet["ledgerRunId"] == "build-gold-1"
    assert facet["ledgerEntryId"] == started.entry_id
    assert facet["engines"] == [
        {"name": "correlation", "version": 2, "codeFingerprint": "sha256:abc", "configDigest": "sha256:def"}
    ]
    warehouse = config.iceberg_warehouse_uri.rstrip("/")
    assert [
        (d["namespace"], d["name"], d["facets"]["version"]["datasetVersion"]) for d in start["inputs"]
    ] == [(warehouse, "silver.events", "7")]
    assert start["outputs"] == []
    assert [(d["name"], d["facets"]["version"]["datasetVersion"]) for d in complete["outputs"]] == [
        ("gold.correlations", "123456789"),
        ("gold.entity_daily", "3"),
    ]
    assert complete["inputs"] == start["inputs"]
    assert complete["outputs"][0]["facets"]["storage"]["storageLayer"] == "iceberg"


def test_a_failing_run_emits_fail_with_its_error_and_the_run_still_fails(tmp_path: Path) -> None:
    config = config_of(tmp_path)
    with pytest.raises(RuntimeError, match="executor lost"):
        build(fake_ledger(config), fail=True)

    start, fail = valid_events(config.lineage_path)
    assert [start["eventType"], fail["eventType"]] == ["START", "FAIL"]
    assert fail["run"]["runId"] == start["run"]["runId"]
    assert fail["run"]["facets"]["errorMessage"]["message"] == "executor lost"
    assert fail["outputs"] == []


def test_publication_completes_the_publish_run_its_intent_opened_and_rollback_is_a_run_of_its_own(
    tmp_path: Path,
) -> None:
    config = config_of(tmp_path, namespace="lh")
    ledger = fake_ledger(config)
    replay = RunStarted(run_id="replay-1", command="replay", purpose="correction", inputs={}, plan="p1")
    intent = RunStarted(
        run_id="replay-1",
        command="publish",
        purpose="correction",
        inputs={"gold.correlations": {"version": 10}},  # type: ignore[dict-item]
        plan="p1",
    )
    ledger.writer.append(replay)
    ledger.writer.append(intent)
    ledger.writer.append(
        Publication(
            run_id="replay-1",
            tables={"gold.correlations": 11},
            previous={"gold.correlations": 10},
            effective_at=T0,
        )
    )
    ledger.writer.append(
        Rollback(
            run_id="replay-1",
            table="gold.correlations",
            from_version=11,
            to_version=10,
            new_version=10,
            reason="r",
        )
    )

    events = valid_events(config.lineage_path)
    assert [(e["job"]["name"], e["eventType"]) for e in events] == [
        ("replay", "START"),
        ("publish", "START"),
        ("publish", "COMPLETE"),
        ("rollback", "START"),
        ("rollback", "COMPLETE"),
    ]
    run_ids = [e["run"]["runId"] for e in events]
    assert len(set(run_ids)) == 3
    assert run_ids[1] == run_ids[2]
    assert run_ids[3] == run_ids[4]
    assert {e["run"]["facets"][FACET]["ledgerRunId"] for e in events} == {"replay-1"}
    assert events[2]["outputs"][0]["facets"]["version"]["datasetVersion"] == "11"
    assert events[4]["inputs"][0]["facets"]["version"]["datasetVersion"] == "10"
    assert events[0]["job"]["namespace"] == "lh"


def test_an_end_whose_start_another_process_recorded_is_found_in_the_ledger(tmp_path: Path) -> None:
    config = config_of(tmp_path)
    first = fake_ledger(config)
    build(first)
    started, finished = first.writer.records
    later = LineageEmitter(config, records_of_run=lambda run_id: [started, finished])
    config.lineage_path.unlink()
    later.emit_records([finished])

    (complete,) = valid_events(config.lineage_path)
    assert complete["run"]["runId"] == openlineage_run_id("build-gold-1", started.entry_id)
    assert complete["inputs"][0]["name"] == "silver.events"


def test_disabled_lineage_writes_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = config_of(tmp_path, transport="none")
    build(fake_ledger(config))
    assert not (tmp_path / "work" / "lineage").exists()
    monkeypatch.setenv("OPENLINEAGE_DISABLED", "true")  # the client's own switch
    build(fake_ledger(config_of(tmp_path)))
    assert not (tmp_path / "work" / "lineage").exists()


class Collector(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, dict[str, Any], str]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((self.path, json.loads(body), self.headers.get("Authorization", "")))
        self.send_response(201)
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def marquez() -> Iterator[str]:
    Collector.received = []
    server = HTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_http_transport_posts_every_event_to_the_configured_consumer(
    tmp_path: Path, marquez: str
) -> None:
    config = config_of(tmp_path, transport="http", url=marquez, api_key="s3cret")
    build(fake_ledger(config))

    assert [path for path, _, _ in Collector.received] == ["/api/v1/lineage"] * 2
    assert [event["eventType"] for _, event, _ in Collector.received] == ["START", "COMPLETE"]
    assert all(schema_errors(event) == [] for _, event, _ in Collector.received)
    assert {auth for _, _, auth in Collector.received} == {"Bearer s3cret"}
    assert not config.lineage_path.exists()


def test_an_unreachable_consumer_is_a_warning_and_never_fails_the_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = HTTPServer(("127.0.0.1", 0), Collector)
    closed = f"http://127.0.0.1:{server.server_address[1]}"
    server.server_close()
    config = config_of(tmp_path, transport="http", url=closed, timeout_seconds=1)
    ledger = fake_ledger(config)
    with caplog.at_level(logging.WARNING, logger="ledger.openlineage_events"):
        build(ledger)
    assert [r.kind for r in ledger.writer.records] == ["run_started", "run_finished"]
    warnings = [r.getMessage() for r in caplog.records if r.name == "ledger.openlineage_events"]
    assert len(warnings) == 2, warnings
    assert all("not sent (http)" in w for w in warnings), warnings


def test_datasets_are_named_by_warehouse_and_catalog_name_with_the_instance(tmp_path: Path) -> None:
    config = load_config(
        REPO / "conf" / "lakehouse.yaml",
        environ={"LAKEHOUSE__INSTANCE": "dev", "LAKEHOUSE__LINEAGE__NAMESPACE": "team"},
        overrides={"workdir": str(tmp_path)},
    )
    bronze, silver = dataset_name(config, "bronze.orders"), dataset_name(config, "silver.events")
    assert (bronze.namespace, bronze.name, bronze.storage) == (
        config.warehouse_uri,
        "bronze_dev.orders",
        "delta",
    )
    assert (silver.name, silver.storage) == ("silver_dev.events", "iceberg")
    assert config.lineage_namespace == "team-dev"
    assert config.lineage_path == tmp_path.resolve() / "lineage" / "events.ndjson"


def test_the_lineage_section_is_strict(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="lineage"):
        config_of(tmp_path, transport="kafka")
    with pytest.raises(ConfigError, match="needs a url"):
        config_of(tmp_path, transport="http")
    with pytest.raises(ConfigError, match="lineage"):
        config_of(tmp_path, urll="http://x")
