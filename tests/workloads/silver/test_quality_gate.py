"""The real quality gate in front of a real recorded Silver build: bad rows stop every write.

Runs the product path a user runs (``lakehouse build silver``): deliveries ingested by
``run_ingest``, Silver built by ``run_silver`` with ``medallion_gate``, the gate the
command line passes. Tables use the shipped zone formats (Delta Bronze, Iceberg
Silver and ops), not a forced one. The failing rows are made the way they would arrive: a partner
delivers an order in a currency the reference domain does not trade in; the line is
well-formed, so it passes canonicalisation and reaches the gate.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from lakehouse.config import TableFormat
from lakehouse.errors import DataQualityError
from ledger import RunFinished, RunStarted, open_ledger
from ledger.clock import FixedClock
from tests.conftest import Lakehouse
from workloads.gold.quality import medallion_gate
from workloads.pipeline import run_ingest, run_silver
from workloads.silver.build import OUTPUT_TABLES
from workloads.silver.lateness import load_lateness_policy
from workloads.vocabulary import TableName

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[3]
ENGINES = REPO / "conf" / "engines.yaml"
START = datetime(2025, 1, 3, 9, 0)


def order_line(event_id: str, when: str, currency: str) -> str:
    record = {
        "schema_version": "2",
        "event_id": event_id,
        "event_time": when,
        "customer_email": f"{event_id}@example.com",
        "card_fingerprint": "card-1",
        "device_id": "dev-1",
        "amount": 12.5,
        "currency": currency,
        "merchant_id": "m-1",
        "revision": 1,
    }
    return json.dumps(record, separators=(",", ":"))


def deliver(root: Path, day: str, lines: list[str]) -> Path:
    path = root / "orders" / day / f"orders-{day}-1.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return root


def test_rows_that_break_the_silver_suite_stop_a_recorded_build_before_any_write(
    shipped_lakehouse: Lakehouse, tmp_path: Path
) -> None:
    registry = shipped_lakehouse.registry
    assert registry.spec(TableName.SILVER_EVENTS).format is TableFormat.ICEBERG
    assert registry.spec(TableName.BRONZE_ORDERS).format is TableFormat.DELTA
    clock = FixedClock(START, step=timedelta(seconds=1))
    ledger = open_ledger(registry, clock=clock)
    policy = load_lateness_policy()
    history = tmp_path / "history"

    # a clean delivery builds, through the same gate
    deliver(
        history,
        "2025-01-01",
        [
            order_line("ord-1", "2025-01-01T10:00:00Z", "EUR"),
            order_line("ord-2", "2025-01-01T11:00:00Z", "GBP"),
        ],
    )
    run_ingest(registry, ledger, clock, feed="orders", source=history)
    first = run_silver(registry, ledger, clock, policy=policy, gate=medallion_gate, engines_path=ENGINES)
    assert first.fates == {"orders": {"silver": 2}}
    before = {name: registry.get(name).current_version() for name in OUTPUT_TABLES}
    silver_rows = sorted(tuple(r) for r in registry.get(TableName.SILVER_EVENTS).read().collect())
    silver_commits = [c.version for c in registry.get(TableName.SILVER_EVENTS).history()]

    # the next delivery holds one order in yen: well-formed, so it reaches the gate
    deliver(history, "2025-01-02", [order_line("ord-3", "2025-01-02T09:00:00Z", "JPY")])
    run_ingest(registry, ledger, clock, feed="orders", source=history)
    with pytest.raises(DataQualityError) as raised:
        run_silver(registry, ledger, clock, policy=policy, gate=medallion_gate, engines_path=ENGINES)
    message = str(raised.value)
    assert "quality gate failed for silver.events" in message
    assert "expect_column_values_to_be_in_set(currency)" in message
    assert "event_id=ord-3, currency=JPY" in message
    assert "nothing was written" in message

    # nothing was written: Silver, quarantine and exceptions are where they were
    assert {name: registry.get(name).current_version() for name in OUTPUT_TABLES} == before
    assert [c.version for c in registry.get(TableName.SILVER_EVENTS).history()] == silver_commits
    assert sorted(tuple(r) for r in registry.get(TableName.SILVER_EVENTS).read().collect()) == silver_rows

    # and the ledger records the run as failed, with the gate's message, and no output
    started = [e for e in ledger.reader.entries(kind="run_started") if isinstance(e, RunStarted)]
    silver_runs = [e.run_id for e in started if e.command == "build silver"]
    assert len(silver_runs) == 2
    (finished,) = [
        e
        for e in ledger.reader.entries(kind="run_finished", run_id=silver_runs[-1])
        if isinstance(e, RunFinished)
    ]
    assert finished.status == "failed"
    assert finished.outputs == {}
    assert finished.error is not None
    assert finished.error.startswith("quality gate failed for silver.events")
    assert "e.g." not in finished.error, "the ledger keeps the gate's rules and counts, no row values"
