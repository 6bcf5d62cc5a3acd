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
from workloads.reconciliation.run import ReconcilePolicy, only_keys, reconcile

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


def data_files_read(frame: Any) -> int:
    """Collect ``frame``; the data files its table scans read, from the scans' own metrics
    (Delta's file scan ``numFiles``, Iceberg's batch scan ``resultDataFiles``)."""
    frame.collect()
    leaves = frame._jdf.queryExecution().executedPlan().collectLeaves()
    read = 0
    for index in range(leaves.size()):
        metrics = leaves.apply(index).metrics()
        for name in ("numFiles", "resultDataFiles"):
            if metrics.contains(name):
                read += int(metrics.apply(name).value())
    return read


def test_bounded_mode_reads_only_the_files_of_the_changed_keys_range_and_keeps_exactly_them(
    make_table: TableFactory, spark_session: Any
) -> None:
    """``only_keys`` bounds both sides by the changed keys' range, which the format answers from
    its files' min/max statistics (2 of 4 files read), then keeps exactly those keys: a key
    inside the range that did not change is left out, and keys no side holds give nothing."""
    table = make_table("k STRING, v INT")
    for batch in range(4):  # one file per batch, in key order: k0.., k1.., k2.., k3..
        rows = [(f"k{batch}{i:02d}", i) for i in range(10)]
        table.append(spark_session.createDataFrame(rows, "k STRING, v INT").coalesce(1))
    version = table.current_version()
    assert data_files_read(table.read(version)) == 4
    keys = spark_session.createDataFrame([("k100",), ("k205",)], "k STRING")
    source, derived = only_keys(table.read(version), table.read(version).where("v < 5"), "k", keys)
    assert data_files_read(source) == 2, "the files of k0.. and k3.. are skipped"
    assert sorted(r["k"] for r in source.collect()) == ["k100", "k205"], "k101..k204 are in range, unchanged"
    assert sorted(r["k"] for r in derived.collect()) == ["k100"]
    nowhere = spark_session.createDataFrame([("zz",)], "k STRING")
    assert only_keys(table.read(version), table.read(version), "k", nowhere)[0].count() == 0
    assert only_keys(table.read(version), table.read(version), "k", nowhere.limit(0))[1].count() == 0


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
