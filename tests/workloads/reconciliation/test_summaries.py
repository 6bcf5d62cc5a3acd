"""The pure rules of reconciliation: ranges, the bounded walk (on an in-memory pair), the
budgets, the window, the step change, the rate limit, and resolving a command line to a pair
from the configuration alone (no Spark)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from lakehouse.config import LakehouseConfig, load_config
from lakehouse.errors import UnknownTableError, UsageError
from tests.conftest import REPO
from workloads.reconciliation.pairs import declared_pairs, resolve_pair
from workloads.reconciliation.run import check_repair, load_reconcile_policy
from workloads.reconciliation.summaries import (
    END,
    FANOUT,
    MAX_LEVEL,
    Budget,
    Range,
    RangeSummary,
    RateLimiter,
    Walk,
    batches,
    bounded_walk,
    check_budget,
    check_window,
    earliest,
    first_level,
    fit_rows,
    max_ranges_for_heap,
    plan_level,
    range_of,
    shift,
    step_change,
)


@pytest.fixture(scope="module")
def config() -> LakehouseConfig:
    return load_config(REPO / "conf" / "lakehouse.yaml", environ={})


# -- ranges -----------------------------------------------------------------------------


def test_ranges_split_the_key_space_into_sixteen_per_level() -> None:
    assert (shift(0), shift(MAX_LEVEL), MAX_LEVEL) == (60, 0, 15)
    assert (Range(0, 0).lo, Range(0, 0).hi) == (0, END)
    child = Range(1, 3)
    assert (child.lo, child.hi) == (3 * END // 16, 4 * END // 16)
    assert range_of(child.lo, 1) == child
    assert range_of(child.hi - 1, 1) == child
    assert range_of(child.lo + 5, 3) == Range(3, 3 * 256)
    with pytest.raises(ValueError, match="0 to 15"):
        shift(16)


def test_the_first_level_is_the_deepest_whose_ranges_split_once_still_fit() -> None:
    assert (first_level(16), first_level(255), first_level(256), first_level(65_536)) == (0, 0, 1, 3)
    assert first_level(1 << 62) == MAX_LEVEL - 1
    with pytest.raises(UsageError, match="at least 16"):
        first_level(15)


def test_the_default_bound_fits_a_sixteenth_of_a_one_gib_heap() -> None:
    assert max_ranges_for_heap(1 << 30) == 65_536 == load_reconcile_policy().max_ranges_per_level
    assert max_ranges_for_heap(1) == FANOUT


def summary(level: int, index: int, rows: int, drift: int = 1) -> RangeSummary:
    return RangeSummary(Range(level, index), rows, 7, rows - drift, 7)


def test_a_level_lists_small_ranges_and_refines_big_ones_as_deep_as_fit() -> None:
    plan = plan_level(
        [summary(2, 9, 500), summary(2, 3, 40), summary(2, 5, 10, drift=0)], max_ranges=4096, list_rows=100
    )
    assert plan.listed == (summary(2, 3, 40),), "an agreeing range is neither listed nor refined"
    assert (plan.refine, plan.next_level, plan.cut) == ((Range(2, 9),), 4, None), "1 x 16**2 fits 4096"
    deepest = plan_level([summary(MAX_LEVEL, 1, 10**6)], max_ranges=4096, list_rows=64)
    assert (deepest.refine, deepest.listed) == ((), (summary(MAX_LEVEL, 1, 10**6),)), "one position: listed"


def test_a_level_refines_only_what_the_bound_holds_and_cuts_the_pass_there() -> None:
    big = [summary(1, i, 1000) for i in range(10)]
    plan = plan_level([*big, summary(1, 12, 5)], max_ranges=64, list_rows=64, held=10)
    assert (plan.refine, plan.next_level) == ((Range(1, 0), Range(1, 1), Range(1, 2)), 2)
    assert plan.cut == Range(1, 3).lo
    assert plan.listed == (), "the small range lies past the cut: the next pass takes it"
    full = plan_level(big, max_ranges=64, list_rows=64, held=60)
    assert (full.refine, full.next_level, full.cut) == ((), None, Range(1, 0).lo)
    inherited = plan_level(
        [summary(2, 40, 5), summary(2, 16, 5)], max_ranges=64, list_rows=64, cut=Range(1, 2).lo
    )
    assert inherited.listed == (summary(2, 16, 5),)


def test_the_row_budget_takes_a_prefix_of_the_listed_ranges() -> None:
    listed = [summary(3, 7, 30), summary(3, 2, 50), summary(3, 9, 10)]  # 59, 99 and 19 rows
    assert fit_rows(listed, 177) == ((summary(3, 2, 50), summary(3, 7, 30), summary(3, 9, 10)), None)
    assert fit_rows(listed, 176) == ((summary(3, 2, 50), summary(3, 7, 30)), Range(3, 9).lo)
    assert fit_rows(listed, 98) == ((), Range(3, 2).lo)
    assert earliest(None, 5, 3) == 3
    assert earliest(None) is None


def test_budgets_must_be_positive_and_time_is_checked_before_each_job() -> None:
    for value, flag in ((0, "--max-rows"), (-1.5, "--max-seconds"), (float("nan"), "--max-seconds")):
        with pytest.raises(UsageError, match=f"{flag} must be more than 0"):
            check_budget(value, flag)
    now = [0.0]
    budget = Budget(100, 10, clock=lambda: now[0])
    assert budget.may_start_job()
    now[0] = 10.0
    assert not budget.may_start_job()
    assert budget.stopped_by == "max_seconds"


# -- the walk, on an in-memory pair (the same loop the Spark jobs run in) --------------------


class Sides:
    """Two sides as ``position -> (key, row hash)``, with the two jobs done in Python,
    counting what each job was asked for."""

    def __init__(self, source: dict[str, int], derived: dict[str, int]) -> None:
        rng = random.Random(7)
        positions = {key: rng.randrange(END) for key in {*source, *derived}}
        self.rows = [(positions[k], k, h, 0) for k, h in source.items()]
        self.rows += [(positions[k], k, h, 1) for k, h in derived.items()]
        self.jobs: list[tuple[int, int]] = []
        """(level, ranges asked) per summarise job."""

    def summarise(self, level: int, parents: Sequence[Range], start: int) -> list[RangeSummary]:
        self.jobs.append((level, len(parents)))
        wanted = {p.index for p in parents}
        sums: dict[int, list[int]] = {}
        for position, _, h, side in self.rows:
            if position < start or (parents and position >> shift(parents[0].level) not in wanted):
                continue
            held = sums.setdefault(position >> shift(level), [0, 0, 0, 0])
            held[2 * side] += 1
            held[2 * side + 1] += h
        return [
            RangeSummary(Range(level, index), *held)
            for index, held in sums.items()
            if (held[0], held[1]) != (held[2], held[3])
        ]

    def listing(self, ranges: Sequence[Range], start: int) -> dict[str, str]:
        inside = {(r.level, r.index) for r in ranges}
        levels = {r.level for r in ranges}
        values: dict[str, list[list[int]]] = {}
        for position, key, h, side in self.rows:
            if position >= start and any((lv, position >> shift(lv)) in inside for lv in levels):
                values.setdefault(key, [[], []])[side].append(h)
        found = {}
        for key, (ours, theirs) in values.items():
            if not theirs:
                found[key] = "missing"
            elif not ours:
                found[key] = "orphan"
            elif sorted(ours) != sorted(theirs):
                found[key] = "divergent"
        return found

    def walk(
        self, start: int = 0, *, max_ranges: int, list_rows: int, budget: Budget
    ) -> Walk[dict[str, str]]:
        return bounded_walk(
            self.summarise,
            self.listing,
            start=start,
            max_ranges=max_ranges,
            list_rows=list_rows,
            budget=budget,
        )


def drifted(rows: int, every: int) -> tuple[dict[str, int], dict[str, int], dict[str, str]]:
    """A source of ``rows`` keys and a derived copy in which every ``every``-th key drifted
    (missing, divergent and orphan in turn), spread over the whole key space."""
    source = {f"k{i:06d}": i * 7919 for i in range(rows)}
    derived = dict(source)
    expected = {}
    for n, i in enumerate(range(0, rows, every)):
        key = f"k{i:06d}"
        kind = ("missing", "divergent", "orphan")[n % 3]
        if kind == "missing":
            del derived[key]
        elif kind == "divergent":
            derived[key] += 1
        else:
            derived[f"o{i:06d}"] = 1
            key = f"o{i:06d}"
        expected[key] = kind
    return source, derived, expected


def merged(found: Walk[dict[str, str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in found.found:
        assert not set(part) & set(out), "no key is listed twice"
        out.update(part)
    return out


def test_equal_sides_take_one_job_and_list_nothing() -> None:
    source, _, _ = drifted(2000, 10**9)
    sides = Sides(source, dict(source))
    found = sides.walk(max_ranges=256, list_rows=64, budget=Budget(10**6, 60))
    assert (sides.jobs, found.found, found.resume_from, found.peak_held) == ([(1, 0)], (), None, 0)


def test_a_drift_across_every_range_is_found_in_one_job_per_level_within_the_bound() -> None:
    source, derived, expected = drifted(8000, 4)  # 2,000 drifted keys: every range disagrees
    sides = Sides(source, derived)
    found = sides.walk(max_ranges=256, list_rows=16, budget=Budget(10**6, 60))
    assert merged(found) == expected
    assert found.trace.passes > 1, "the bound left ranges to later passes of the same run"
    assert found.resume_from is None
    assert found.stopped_by is None
    assert found.peak_held <= 256, "the driver never held more summaries than the bound"
    assert max(level for level, _ in sides.jobs) > first_level(256), "ranges were refined"
    assert max(found.trace.compared) <= 256, "no job had more ranges than the bound"
    assert found.trace.jobs == len(sides.jobs) + found.trace.passes, "a job per level, a list job per pass"
    assert found.rows_diffed < 2 * len(source) + 1


def test_a_row_budget_stops_the_walk_and_the_next_runs_resume_where_it_stopped() -> None:
    source, derived, expected = drifted(8000, 4)
    sides = Sides(source, derived)
    seen: dict[str, str] = {}
    start, runs, rows = 0, 0, 0
    while True:
        runs += 1
        budget = Budget(2000, 60)
        found = sides.walk(start, max_ranges=256, list_rows=64, budget=budget)
        assert found.rows_diffed <= 2000, "inside the row budget"
        rows += found.rows_diffed
        assert found.peak_held <= 256
        part = merged(found)
        assert not set(part) & set(seen), "a resumed run does not compare what an earlier one did"
        seen.update(part)
        if found.resume_from is None:
            break
        assert found.stopped_by == "max_rows"
        assert found.resume_from > start
        start = found.resume_from
    assert seen == expected, "the resumed runs together compared everything, once"
    assert runs > rows // 2000, "each run stopped at its budget"


def test_a_time_budget_starts_no_job_after_it_and_leaves_the_pass_to_the_next_run() -> None:
    source, derived, expected = drifted(4000, 4)
    sides = Sides(source, derived)
    now = [0.0]

    def summarise(level: int, parents: Sequence[Range], start: int) -> list[RangeSummary]:
        now[0] += 1.0  # every job takes a second
        return sides.summarise(level, parents, start)

    budget = Budget(10**6, 1.5, clock=lambda: now[0])
    found = bounded_walk(summarise, sides.listing, start=0, max_ranges=256, list_rows=8, budget=budget)
    assert (found.stopped_by, found.resume_from, found.found) == ("max_seconds", 0, ())
    assert len(sides.jobs) == 2, "no job started after 1.5 s"
    again = sides.walk(0, max_ranges=256, list_rows=8, budget=Budget(10**6, 60))
    assert merged(again) == expected


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
    assert resolve_pair(config, "gold.correlations", "gold.correlations_by_entity", "correlation_id") == next(
        p for p in declared_pairs(config) if p.label == "entity_index"
    )
    assert resolve_pair(config, "bronze.orders", "silver.events", None) == orders
    for key in ("entity_id", None):
        with pytest.raises(UsageError, match=r"silver\.events -> gold\.entity_daily is not a declared pair"):
            resolve_pair(config, "silver.events", "gold.entity_daily", key)
    with pytest.raises(UsageError, match="declares no authority"):
        check_repair(replace(orders, authority=None))
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
