"""Bronze ingest by manifest: raw fidelity, manifest identity, idempotence and refusals.

The Spark test runs once per table format on a hand-written history of a few lines, so
every expectation (line numbers, raw text, parsed fields) is written out in the test.
Manifest ids are recomputed here with hashlib and json, not with lakehouse.digest.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from jobs.output import plain
from lakehouse.config import load_config
from lakehouse.errors import IngestError
from ledger.reader import LedgerReader
from tests.cli_runner import instance_env, run_cli
from tests.conftest import Lakehouse, drop_all
from workloads.bronze.ingest import (
    STATUS_ALREADY_INGESTED,
    STATUS_INGESTED,
    FileEntry,
    Manifest,
    build_manifest,
    check_against_known,
    delivery_folders,
    ingest_feed,
    locate_feed,
    scan_file,
)

ORDER_A = (
    '{"schema_version":"2","event_id":"ord-1","event_time":"2025-01-01T10:00:00Z",'
    '"customer_email":"a@x.com","amount":1.50,"revision":1}'
)
ORDER_B = '{"schema_version":"1","event_id":"ord-2","event_time":"2025-01-01T11:00:00Z","email":"b@x.com"}'
ORDER_CUT = '{"schema_version":"2","event_id":"ord-3","event_ti'
ORDER_C = '{"schema_version":"2","event_id":"ord-4","event_time":"2025-01-02T09:30:00Z"}'
ORDER_BAD = "{not json"
SETTLEMENT_HEADER = "schema_version,event_id,event_time,order_id,amount,currency,revision"
SETTLEMENT_A = "1,stl-1,2025-01-01T12:00:00Z,ord-1,1.50,EUR,1"
SETTLEMENT_SHORT = "1,stl-2,2025-01-01T1"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


def tiny_history(root: Path) -> Path:
    """Two order deliveries (one file ends mid-record, one has CRLF and a bad line) and
    one settlement delivery (CSV with header)."""
    write(root / "orders/2025-01-01/orders-2025-01-01-1.jsonl", f"{ORDER_A}\n{ORDER_B}\n{ORDER_CUT}")
    write(root / "orders/2025-01-02/orders-2025-01-02-1.jsonl", f"{ORDER_C}\r\n{ORDER_BAD}\n")
    write(
        root / "settlements/2025-01-01/settlements-2025-01-01-1.csv",
        f"{SETTLEMENT_HEADER}\n{SETTLEMENT_A}\n{SETTLEMENT_SHORT}\n",
    )
    return root


def manifest_id_by_hand(root: Path, folder: str) -> str:
    entries = []
    for path in sorted((root / folder).iterdir()):
        data = path.read_bytes()
        lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
        if path.suffix == ".csv":
            lines -= 1
        entries.append(
            {
                "path": path.relative_to(root).as_posix(),
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "rows": lines,
            }
        )
    text = json.dumps(entries, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------------------
# Pure: files, manifests, folder layout, refusals
# --------------------------------------------------------------------------------------


def test_scan_file_counts_data_lines_like_an_editor(tmp_path: Path) -> None:
    cases = {
        "a.jsonl": (b"x\ny\n", 2),
        "b.jsonl": (b"x\ny", 2),  # unterminated last line counts
        "c.jsonl": (b"", 0),
        "d.jsonl": (b"\n", 1),  # one empty line
        "e.csv": (b"h1,h2\n1,2\n", 1),  # header is not data
        "f.csv": (b"h1,h2\n", 0),
    }
    for name, (data, rows) in cases.items():
        (tmp_path / name).write_bytes(data)
        entry = scan_file(tmp_path / name, name)
        assert entry == FileEntry(name, len(data), hashlib.sha256(data).hexdigest(), rows), name


def test_manifest_id_is_the_sha256_of_the_sorted_file_entries(tmp_path: Path) -> None:
    root = tiny_history(tmp_path / "h")
    write(root / "orders/2025-01-01/orders-2025-01-01-0.jsonl", ORDER_C + "\n")
    manifest = build_manifest(root, "orders", root / "orders/2025-01-01")
    assert [f.path for f in manifest.files] == [
        "orders/2025-01-01/orders-2025-01-01-0.jsonl",
        "orders/2025-01-01/orders-2025-01-01-1.jsonl",
    ]
    assert manifest.manifest_id == manifest_id_by_hand(root, "orders/2025-01-01")
    assert manifest.rows == 4
    assert manifest.ingest_time_text == "2025-01-01T00:00:00Z"


def test_feed_folder_or_history_root_are_both_accepted(tmp_path: Path) -> None:
    root = tiny_history(tmp_path / "h")
    assert locate_feed(root, "orders") == (root, root / "orders")
    assert locate_feed(root / "orders", "orders") == (root, root / "orders")
    with pytest.raises(IngestError, match="neither the history root"):
        locate_feed(root / "orders" / "2025-01-01", "orders")
    with pytest.raises(IngestError, match="no such folder"):
        locate_feed(tmp_path / "missing", "orders")


def test_bad_folder_layouts_are_refused_with_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty" / "orders"
    empty.mkdir(parents=True)
    with pytest.raises(IngestError, match="holds no delivery folders") as info:
        delivery_folders(empty)
    assert "\n" not in str(info.value)
    stray = tmp_path / "stray" / "orders"
    write(stray / "notes.txt", "x")
    with pytest.raises(IngestError, match="deliveries must be folders named YYYY-MM-DD"):
        delivery_folders(stray)
    bad_date = tmp_path / "bad" / "orders" / "2025-02-30"
    bad_date.mkdir(parents=True)
    with pytest.raises(IngestError, match="not a valid date"):
        delivery_folders(bad_date.parent)
    no_files = tmp_path / "nofiles" / "orders" / "2025-01-01"
    no_files.mkdir(parents=True)
    write(no_files / ".hidden", "x")
    with pytest.raises(IngestError, match="has no files"):
        build_manifest(tmp_path / "nofiles", "orders", no_files)


def test_changed_files_and_changed_deliveries_are_refused(tmp_path: Path) -> None:
    entry = FileEntry("orders/2025-01-01/a.jsonl", 3, "1" * 64, 1)
    old = Manifest("orders", date(2025, 1, 1), (entry,))
    known = {old.manifest_id: {"delivery": "2025-01-01", "files": json.loads(old.files_json())}}
    assert check_against_known([old], known) == []

    changed = Manifest("orders", date(2025, 1, 1), (FileEntry(entry.path, 3, "2" * 64, 1),))
    with pytest.raises(IngestError) as info:
        check_against_known([changed], known)
    message = str(info.value)
    assert entry.path in message
    assert "1" * 64 in message
    assert "2" * 64 in message

    grown = Manifest(
        "orders", date(2025, 1, 1), (entry, FileEntry("orders/2025-01-01/b.jsonl", 1, "3" * 64, 1))
    )
    with pytest.raises(IngestError, match=r"now differs \(added \['orders/2025-01-01/b.jsonl'\]"):
        check_against_known([grown], known)

    later = Manifest("orders", date(2025, 1, 2), (FileEntry("orders/2025-01-02/a.jsonl", 1, "4" * 64, 1),))
    assert check_against_known([old, later], known) == [later]


# --------------------------------------------------------------------------------------
# Spark, both formats
# --------------------------------------------------------------------------------------


def bronze_rows(lakehouse: Any, feed: str) -> list[dict[str, Any]]:
    rows = lakehouse.registry.get(f"bronze.{feed}").read().collect()
    return sorted((r.asDict() for r in rows), key=lambda r: (r["_source_file"], r["_line"]))


@pytest.mark.spark
def test_ingest_is_verbatim_once_and_refuses_changed_files(lakehouse: Any, tmp_path: Path) -> None:
    root = tiny_history(tmp_path / "history")
    registry = lakehouse.registry

    orders = ingest_feed(registry, "orders", root / "orders", run_id="ing-1")
    settlements = ingest_feed(registry, "settlements", root, run_id="ing-1")

    # -- the reports --------------------------------------------------------------------
    first, second = orders.manifests
    assert (first.delivery, first.rows, first.status) == ("2025-01-01", 3, STATUS_INGESTED)
    assert (second.delivery, second.rows, second.status) == ("2025-01-02", 2, STATUS_INGESTED)
    assert first.manifest_id == manifest_id_by_hand(root, "orders/2025-01-01")
    assert second.manifest_id == manifest_id_by_hand(root, "orders/2025-01-02")
    assert orders.rows_written == 5
    assert settlements.rows_written == 2
    assert orders.outputs["bronze.orders"] is not None
    assert json.loads(json.dumps(plain(orders)))["manifests"][0]["files"] == [
        "orders/2025-01-01/orders-2025-01-01-1.jsonl"
    ]

    # -- Bronze: one row per raw line, verbatim, with coordinates -----------------------
    rows = bronze_rows(lakehouse, "orders")
    day1 = datetime(2025, 1, 1, tzinfo=UTC)
    assert [(r["_source_file"].rsplit("/", 1)[1], r["_line"], r["_raw"]) for r in rows] == [
        ("orders-2025-01-01-1.jsonl", 1, ORDER_A),
        ("orders-2025-01-01-1.jsonl", 2, ORDER_B),
        ("orders-2025-01-01-1.jsonl", 3, ORDER_CUT),  # the file ends mid-record: kept
        ("orders-2025-01-02-1.jsonl", 1, ORDER_C + "\r"),  # CR stays: raw fidelity
        ("orders-2025-01-02-1.jsonl", 2, ORDER_BAD),
    ]
    assert [r["_event_id"] for r in rows] == ["ord-1", "ord-2", None, "ord-4", None]
    assert [r["_schema_version"] for r in rows] == ["2", "1", None, "2", None]
    assert rows[0]["_event_time"].replace(tzinfo=UTC) == datetime(2025, 1, 1, 10, tzinfo=UTC)
    assert rows[2]["_event_time"] is None
    assert {r["_ingest_time"].replace(tzinfo=UTC) for r in rows[:3]} == {day1}
    assert {r["_ingest_date"] for r in rows[3:]} == {date(2025, 1, 2)}
    assert {r["_source"] for r in rows} == {"orders"}
    assert {r["_run_id"] for r in rows} == {"ing-1"}
    assert [r["_manifest_id"] for r in rows] == [first.manifest_id] * 3 + [second.manifest_id] * 2

    csv_rows = bronze_rows(lakehouse, "settlements")
    assert [(r["_line"], r["_raw"], r["_event_id"]) for r in csv_rows] == [
        (2, SETTLEMENT_A, "stl-1"),  # the header is line 1 and not a row
        (3, SETTLEMENT_SHORT, "stl-2"),
    ]
    assert csv_rows[0]["_event_time"].replace(tzinfo=UTC) == datetime(2025, 1, 1, 12, tzinfo=UTC)
    assert csv_rows[1]["_event_time"] is None  # parsed where possible, never failing

    # -- provenance: manifests recorded, run id in the commit -------------------------
    manifests = {r["manifest_id"]: r.asDict() for r in registry.get("ops.manifests").read().collect()}
    assert set(manifests) == {first.manifest_id, second.manifest_id, settlements.manifests[0].manifest_id}
    record = manifests[first.manifest_id]
    assert (record["feed"], record["delivery"], record["rows"], record["run_id"]) == (
        "orders",
        "2025-01-01",
        3,
        "ing-1",
    )
    assert [f["path"] for f in json.loads(record["files"])] == ["orders/2025-01-01/orders-2025-01-01-1.jsonl"]
    bronze = registry.get("bronze.orders")
    assert bronze.history()[-1].run_id == "ing-1"
    version = bronze.current_version()

    # -- re-ingest: a no-op that says so ------------------------------------------------
    again = ingest_feed(registry, "orders", root, run_id="ing-2")
    assert [m.status for m in again.manifests] == [STATUS_ALREADY_INGESTED] * 2
    assert again.rows_written == 0
    assert again.outputs == again.inputs
    assert bronze.current_version() == version

    # -- a new delivery is ingested alone -----------------------------------------------
    write(root / "orders/2025-01-03/orders-2025-01-03-1.jsonl", ORDER_A.replace("ord-1", "ord-9") + "\n")
    third = ingest_feed(registry, "orders", root, run_id="ing-3")
    assert [m.status for m in third.manifests] == [STATUS_ALREADY_INGESTED] * 2 + [STATUS_INGESTED]
    assert third.rows_written == 1
    assert len(bronze_rows(lakehouse, "orders")) == 6
    version = bronze.current_version()
    manifests_version = registry.get("ops.manifests").current_version()

    # -- interrupted between the Bronze append and its ops.manifests record: the rerun
    #    completes the record and writes no Bronze row twice ----------------------------
    registry.get("ops.manifests").delete_where(f"manifest_id = '{third.manifests[2].manifest_id}'")
    resumed = ingest_feed(registry, "orders", root, run_id="ing-3b")
    assert [m.status for m in resumed.manifests] == [STATUS_ALREADY_INGESTED] * 3
    assert resumed.rows_written == 0
    assert bronze.current_version() == version
    recorded = registry.get("ops.manifests").read().where(f"manifest_id = '{third.manifests[2].manifest_id}'")
    assert [r["run_id"] for r in recorded.collect()] == ["ing-3b"]
    manifests_version = registry.get("ops.manifests").current_version()

    # -- a changed file is refused and nothing of the call is written -------------------
    write(root / "orders/2025-01-04/orders-2025-01-04-1.jsonl", ORDER_C + "\n")  # new, valid
    changed = root / "orders/2025-01-01/orders-2025-01-01-1.jsonl"
    before = hashlib.sha256(changed.read_bytes()).hexdigest()
    write(changed, f"{ORDER_A}\n{ORDER_B}\n")
    after = hashlib.sha256(changed.read_bytes()).hexdigest()
    with pytest.raises(IngestError) as info:
        ingest_feed(registry, "orders", root, run_id="ing-4")
    message = str(info.value)
    assert "orders/2025-01-01/orders-2025-01-01-1.jsonl" in message
    assert before in message
    assert after in message
    assert "\n" not in message
    assert bronze.current_version() == version
    assert registry.get("ops.manifests").current_version() == manifests_version
    assert len(bronze_rows(lakehouse, "orders")) == 6


@pytest.mark.spark
def test_unknown_feed_and_missing_folders_fail_before_anything_is_written(
    lakehouse: Any, tmp_path: Path
) -> None:
    root = tiny_history(tmp_path / "history")
    with pytest.raises(IngestError, match="unknown feed 'payments'; known feeds: logins, orders"):
        ingest_feed(lakehouse.registry, "payments", root, run_id="r")
    with pytest.raises(IngestError, match="no such folder"):
        ingest_feed(lakehouse.registry, "orders", tmp_path / "nowhere", run_id="r")
    assert not lakehouse.registry.get("bronze.orders").exists()


CONF = Path(__file__).resolve().parents[3] / "conf" / "lakehouse.yaml"


@pytest.mark.spark
def test_the_command_ingests_several_feeds_in_one_call_each_its_own_run(
    spark_session: Any, lakehouse_config: Any, tmp_path: Path
) -> None:
    """``lakehouse ingest --feed orders --feed settlements``: one call, two recorded ingest runs
    in the order named; ``--json`` is ``{"feeds": [...]}``, each the report one feed prints
    alone. A feed that fails stops the call there: the feeds before it are printed, then its
    error (naming it) with its exit code."""
    env = instance_env(f"ing{uuid.uuid4().hex[:6]}")
    workdir = lakehouse_config.workdir_path
    root = tiny_history(tmp_path / "history")
    lh = Lakehouse(spark_session, load_config(CONF, environ=env, overrides={"workdir": str(workdir)}))
    argv = ["ingest", "--feed", "orders", "--feed", "settlements", "--source", str(root)]
    argv += ["--conf", str(CONF), "--workdir", str(workdir), "--quiet", "--json"]
    try:
        both = run_cli(argv, env)
        assert both.code == 0, both.stderr
        reports = json.loads(both.stdout)["feeds"]
        assert [(r["feed"], r["rows_written"], len(r["manifests"])) for r in reports] == [
            ("orders", 5, 2),
            ("settlements", 2, 1),
        ]
        finished = LedgerReader.for_registry(lh.registry).entries(kind="run_finished")
        assert [(e.run_id, e.status) for e in finished] == [(r["run_id"], "ok") for r in reports]

        write(root / "settlements/notes.txt", "not a delivery\n")
        stopped = run_cli(argv, env)
        assert stopped.code == 2, stopped.stderr
        done = json.loads(stopped.stdout)["feeds"]
        assert [(r["feed"], r["rows_written"]) for r in done] == [("orders", 0)]
        error = json.loads(stopped.stderr.strip().splitlines()[-1])
        assert error["error"].startswith("--feed settlements: unexpected entry"), error
    finally:
        drop_all(lh.registry)
