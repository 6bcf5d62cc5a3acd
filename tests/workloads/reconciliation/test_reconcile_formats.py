"""Reconciliation's table operations on each format: the keys a commit changed (from the two
versions' files), the version current at an instant, and a bounded reconcile of the entity
index, its drift found by range checksums and repaired, in Delta and in Iceberg."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest

from ledger import open_ledger
from ledger.clock import SystemClock
from tests.conftest import Lakehouse, TableFactory
from tests.replay_history import seed
from workloads.gold.entity_index import refresh_entity_index
from workloads.reconciliation.pairs import resolve_pair
from workloads.reconciliation.run import ReconcilePolicy, reconcile

pytestmark = pytest.mark.spark

POLICY = ReconcilePolicy(
    staleness_seconds=0,
    recent_runs=3,
    step_factor=3,
    step_min=1,
    lock_timeout_seconds=600,
    max_repairs_per_second=50,
    max_ranges_per_level=256,
    list_rows=16,
    max_rows=100_000,
    max_seconds=600,
)


def test_changed_keys_come_from_the_files_two_versions_differ_by(
    make_table: TableFactory, spark_session: Any
) -> None:
    table = make_table("k STRING, v INT, p STRING", partition_by=("p",))
    table.append(spark_session.createDataFrame([("a", 1, "x"), ("b", 2, "y")], "k STRING, v INT, p STRING"))
    first = table.current_version()
    assert first is not None
    time.sleep(1.1)
    between = datetime.now(UTC)
    time.sleep(1.1)
    table.append(spark_session.createDataFrame([("c", 3, "x")], "k STRING, v INT, p STRING"))
    table.delete_where("k = 'b'")
    last = table.current_version()
    assert last is not None
    assert table.version_at(between) == first
    assert table.version_at(datetime(2000, 1, 1, tzinfo=UTC)) is None
    changed = {r["k"] for r in table.changed_keys(first, last, ["k"]).collect()}
    assert changed == {"b", "c"}, "a appended before, untouched since"
    assert {r["k"] for r in table.changed_keys(None, first, ["k"]).collect()} == {"a", "b"}
    assert table.changed_keys(last, last, ["k"]).count() == 0
    with pytest.raises(Exception, match="partition column"):
        table.changed_keys(first, last, ["p"])


def test_a_bounded_reconcile_of_the_entity_index_finds_and_repairs_its_drift(lakehouse: Lakehouse) -> None:
    index_pair = resolve_pair(lakehouse.config, "gold.correlations", "gold.correlations_by_entity", None)
    seed(lakehouse)
    clock = SystemClock()
    ledger = open_ledger(lakehouse.registry, clock=clock)
    assert refresh_entity_index(lakehouse.registry, ledger, clock).status == "rebuilt"
    clean = reconcile(lakehouse.registry, ledger, clock, index_pair, policy=POLICY)
    assert (clean.total_delta, clean.jobs, clean.ranges_listed, clean.complete) == (0, 1, 0, True)
    time.sleep(1.1)
    quiet = datetime.now(UTC)
    time.sleep(1.1)
    before = datetime.now(UTC)
    time.sleep(1.1)
    index = lakehouse.registry.get("gold.correlations_by_entity")
    victim = sorted(r["correlation_id"] for r in index.read().collect())[0]
    index.delete_where(f"correlation_id = '{victim}' AND entity_id = entity_b", run_id="operator")

    old = reconcile(lakehouse.registry, ledger, clock, index_pair, policy=POLICY, since=quiet, until=before)
    assert old.total_delta == 0, "no commit in that window: no key to compare"
    found = reconcile(lakehouse.registry, ledger, clock, index_pair, policy=POLICY, since=before, repair=True)
    assert (found.divergent, found.missing, found.orphan, found.repaired) == (1, 0, 0, 1)
    assert found.samples["divergent"] == (victim,)
    assert found.step_change
    again = reconcile(lakehouse.registry, ledger, clock, index_pair, policy=POLICY)
    assert (again.total_delta, again.repaired) == (0, 0)
    assert index.read().where(f"correlation_id = '{victim}'").count() == 2
