"""The pure rules of reconciliation: the Merkle-like walk, the window, the step change, the
rate limit, and resolving a command line to a pair from the configuration alone (no Spark)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lakehouse.config import LakehouseConfig, load_config
from lakehouse.errors import UnknownTableError, UsageError
from tests.conftest import REPO
from workloads.reconciliation.pairs import INDEX_PAIR, resolve_pair
from workloads.reconciliation.run import check_repair, load_reconcile_policy
from workloads.reconciliation.summaries import (
    FANOUT,
    RateLimiter,
    Summary,
    batches,
    check_window,
    step_change,
    walk,
)


@pytest.fixture(scope="module")
def config() -> LakehouseConfig:
    return load_config(REPO / "conf" / "lakehouse.yaml", environ={})


def test_equal_sides_compare_the_root_only() -> None:
    leaves = {3: Summary(2, 10), 70_000 % FANOUT**4: Summary(1, 5)}
    found = walk(leaves, dict(leaves), depth=4)
    assert (found.leaves, found.compared, found.disagreeing) == ((), (1,), (0,))


def test_one_disagreeing_leaf_is_found_by_refining_only_its_ancestors() -> None:
    source = {leaf: Summary(1, leaf) for leaf in range(0, FANOUT**3, 7)}
    derived = dict(source)
    derived[700] = Summary(1, 701)  # same count, other checksum: a divergent value
    del derived[14]  # a lost row
    found = walk(source, derived, depth=3)
    assert found.leaves == (14, 700)
    assert found.disagreeing[-1] == 2
    assert found.compared == (1, FANOUT, FANOUT * found.disagreeing[1], FANOUT * found.disagreeing[2])
    assert found.ranges_compared < FANOUT**3 // 10


def test_a_window_must_run_forward() -> None:
    early, late = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 2, 1, tzinfo=UTC)
    check_window(early, late)
    check_window(None, late)
    for since, until in ((late, early), (early, early)):
        with pytest.raises(UsageError, match="is not before --until"):
            check_window(since, until)


def test_a_step_change_needs_a_baseline_a_factor_and_a_minimum() -> None:
    assert step_change(50, [], factor=3, minimum=1).step_change is False
    assert step_change(4, [0, 0, 1], factor=3, minimum=1).step_change is True
    steady = step_change(11, [10, 9, 12], factor=3, minimum=1)
    assert (steady.baseline, steady.step_change) == (10, False)
    assert step_change(1, [0], factor=3, minimum=2).step_change is False


def test_batches_and_the_rate_limiter_space_the_repairs() -> None:
    assert [list(b) for b in batches(["a", "b", "c"], 2)] == [["a", "b"], ["c"]]
    with pytest.raises(UsageError, match="at least 1"):
        next(batches(["a"], 0))
    now = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    limiter = RateLimiter(2, clock=lambda: now[0], sleep=sleep)
    for size in (2, 2, 1):
        limiter.admit(size)
    assert slept == [1.0, 1.0]
    assert limiter.done == 5


def test_a_command_line_resolves_to_a_pair_before_spark(config: LakehouseConfig) -> None:
    orders = resolve_pair(config, "bronze.orders", "silver.events", "event_id")
    assert (orders.source_key, orders.derived_key, orders.authority) == ("_event_id", "event_id", "source")
    assert (
        resolve_pair(config, "gold.correlations", "gold.correlations_by_entity", "correlation_id")
        is INDEX_PAIR
    )
    adhoc = resolve_pair(config, "silver.events", "gold.entity_daily", "entity_id")
    assert (adhoc.declared, adhoc.authority, adhoc.columns) == (False, None, ("resolver",))
    with pytest.raises(UsageError, match="declares no authority"):
        check_repair(adhoc)
    renamed = resolve_pair(config, "gold.training_sets", "silver.events", "decision_id:event_id")
    assert (renamed.source_key, renamed.derived_key) == ("decision_id", "event_id")
    with pytest.raises(UnknownTableError, match=r"unknown table 'gold\.nope'"):
        resolve_pair(config, "gold.nope", "silver.events", "event_id")
    with pytest.raises(UsageError, match="key types differ"):
        resolve_pair(config, "silver.events", "gold.training_sets", "label")
    with pytest.raises(UsageError, match="has no column 'nope'"):
        resolve_pair(config, "silver.events", "gold.entity_daily", "nope")
    with pytest.raises(UsageError, match="keyed by _event_id:event_id"):
        resolve_pair(config, "bronze.orders", "silver.events", "order_id")


def test_the_shipped_policy_has_a_reconcile_section() -> None:
    policy = load_reconcile_policy()
    assert policy.staleness_seconds > 0
    assert policy.max_repairs_per_second >= 1
