"""The pure half of reconciliation: key-hash ranges, the bounded walk's decisions, budgets,
the health signal and the repair rate. Everything here takes plain values (no Spark).

**Ranges.** A key's *position* is the top :data:`SPACE_BITS` bits of ``xxhash64(key)`` read
unsigned, so ``[0, END)`` is the key space of every pair. A :class:`Range` of level ``l``
covers ``2**(SPACE_BITS - 4*l)`` positions: level 0 is the whole space, each level splits a
range into :data:`FANOUT` children, level :data:`MAX_LEVEL` holds one position.

**The walk is bounded by construction.** The driver never holds more than
``max_ranges`` range summaries (a setting): the first level is the deepest whose range count
fits once split again (:func:`first_level`), and a later level refines only as many disagreeing ranges as
their children fit (:func:`plan_level`; the rest wait for the next pass of the same run, or
the next run). A range small enough (``list_rows``) is not refined: its keys are listed. What
a run may list is capped by its row budget (:func:`fit_rows`), the time it may take by its
time budget (:class:`Budget`); coverage is always a prefix of the key space from where the
run started, so the first position not covered is where the next run resumes.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Generic, TypeVar

from lakehouse.errors import UsageError

T = TypeVar("T")

SPACE_BITS: Final = 60
"""Bits of a key's position (the top 60 of its 64-bit hash: a BIGINT that is never negative)."""
FANOUT_BITS: Final = 4
FANOUT: Final = 1 << FANOUT_BITS
"""Children per range: each refined range is split into 16."""
MAX_LEVEL: Final = SPACE_BITS // FANOUT_BITS
"""The deepest level (15): a range of one position, refined no further (its keys are listed)."""
END: Final = 1 << SPACE_BITS
"""One past the last position: a run that reaches it covered the whole key space."""
SUMMARY_BYTES: Final = 1024
"""A generous bound on what one range summary costs the driver (a JVM row of two BIGINTs and
two DECIMAL(38,0) sums per side, its Arrow copy, its Python objects)."""


def max_ranges_for_heap(heap_bytes: int, share: float = 1 / 16) -> int:
    """The summaries per level that fit in ``share`` of a driver heap: the default setting
    (65,536 for 1 GiB: 64 MiB of summaries, a sixteenth of the heap)."""
    return max(FANOUT, int(heap_bytes * share) // SUMMARY_BYTES)


def shift(level: int) -> int:
    """Position bits below a range of ``level``: its index is ``position >> shift(level)``."""
    if not 0 <= level <= MAX_LEVEL:
        raise ValueError(f"a range level is 0 to {MAX_LEVEL}, not {level}")
    return SPACE_BITS - FANOUT_BITS * level


@dataclass(frozen=True, order=True)
class Range:
    """A range of key positions: ``[lo, hi)`` of ``level``, numbered ``index`` within it."""

    level: int
    index: int

    @property
    def lo(self) -> int:
        return self.index << shift(self.level)

    @property
    def hi(self) -> int:
        return (self.index + 1) << shift(self.level)


def range_of(position: int, level: int) -> Range:
    """The range of ``level`` holding ``position``."""
    return Range(level, position >> shift(level))


@dataclass(frozen=True)
class RangeSummary:
    """What both sides hold in one range: rows and the order-free sum of their row hashes."""

    range: Range
    source_rows: int
    source_sum: int
    derived_rows: int
    derived_sum: int

    @property
    def rows(self) -> int:
        """Rows of both sides in the range: what listing its keys reads."""
        return self.source_rows + self.derived_rows

    @property
    def agrees(self) -> bool:
        return self.source_rows == self.derived_rows and self.source_sum == self.derived_sum


def first_level(max_ranges: int) -> int:
    """The first job's level: the deepest whose ranges, split once more, still fit
    ``max_ranges``, so that a drift in every range is refined without a second pass."""
    check_max_ranges(max_ranges)
    level = 0
    while level + 1 < MAX_LEVEL and FANOUT ** (level + 2) <= max_ranges:
        level += 1
    return level


def check_max_ranges(max_ranges: int) -> None:
    if max_ranges < FANOUT:
        raise UsageError(f"reconcile.max_ranges_per_level must be at least {FANOUT}, not {max_ranges}")


@dataclass(frozen=True)
class LevelPlan:
    """What to do with one level's disagreeing ranges (:func:`plan_level`)."""

    refine: tuple[Range, ...]
    """Ranges to split, all of one level (ascending)."""
    next_level: int | None
    """The level of the next job (None: nothing to refine)."""
    listed: tuple[RangeSummary, ...]
    """Ranges small enough to list their keys (ascending)."""
    cut: int | None
    """The first position this pass no longer covers (None: it covers everything it was given)."""


def plan_level(
    disagreeing: Sequence[RangeSummary],
    *,
    max_ranges: int,
    list_rows: int,
    held: int = 0,
    cut: int | None = None,
) -> LevelPlan:
    """Refine a disagreeing range while it holds more than ``list_rows`` rows and can be
    split; list the others. The driver then holds ``held`` (earlier listed ranges), this
    level's listed ranges and the next job's ranges (the children of the refined), never
    more than ``max_ranges`` together: the next job jumps as many levels as fit, and refines
    only the first ranges whose children fit, cutting the pass before the first it leaves
    (``cut``, inherited if earlier)."""
    check_max_ranges(max_ranges)
    ordered = sorted(
        (s for s in disagreeing if not s.agrees and (cut is None or s.range.lo < cut)),
        key=lambda s: s.range.lo,
    )
    big = [s for s in ordered if s.rows > list_rows and s.range.level < MAX_LEVEL]
    if not big:
        return LevelPlan((), None, tuple(ordered), cut)
    level = big[0].range.level
    if any(s.range.level != level for s in big):
        raise ValueError("one job refines ranges of one level")
    small = [s for s in ordered if s.rows <= list_rows or s.range.level == MAX_LEVEL]
    capacity = max(0, max_ranges - held - len(small))
    keep = big[: capacity // FANOUT]
    if len(keep) < len(big):
        cut = big[len(keep)].range.lo
    listed = tuple(s for s in small if cut is None or s.range.lo < cut)
    if not keep:
        return LevelPlan((), None, listed, cut)
    capacity = max_ranges - held - len(listed)
    jump = 1
    while level + jump < MAX_LEVEL and len(keep) * FANOUT ** (jump + 1) <= capacity:
        jump += 1
    return LevelPlan(tuple(s.range for s in keep), level + jump, listed, cut)


def fit_rows(listed: Sequence[RangeSummary], rows_left: int) -> tuple[tuple[RangeSummary, ...], int | None]:
    """The ranges (ascending) whose rows fit ``rows_left`` in order, and where the budget cut
    (the first range that did not fit; None: all fit)."""
    taken: list[RangeSummary] = []
    for summary in sorted(listed, key=lambda s: s.range.lo):
        if summary.rows > rows_left:
            return tuple(taken), summary.range.lo
        taken.append(summary)
        rows_left -= summary.rows
    return tuple(taken), None


def earliest(*positions: int | None) -> int | None:
    """The first of some cut positions (None: no cut)."""
    found = [p for p in positions if p is not None]
    return min(found) if found else None


def check_budget(value: float | None, flag: str) -> None:
    """A budget must be positive (one line, before Spark starts)."""
    if value is not None and not value > 0:  # NaN too
        raise UsageError(f"{flag} must be more than 0, not {value:g}")


@dataclass
class Budget:
    """A run's two budgets: rows it may list key by key, and seconds (checked before each job)."""

    max_rows: int
    max_seconds: float
    clock: Callable[[], float] = time.monotonic
    rows: int = 0
    """Rows listed so far (both sides)."""
    started: float = field(init=False)
    stopped_by: str | None = None
    """``max_rows`` or ``max_seconds`` once a budget stopped the run."""

    def __post_init__(self) -> None:
        check_budget(self.max_rows, "--max-rows")
        check_budget(self.max_seconds, "--max-seconds")
        self.started = self.clock()

    @property
    def rows_left(self) -> int:
        return max(0, self.max_rows - self.rows)

    @property
    def elapsed(self) -> float:
        return self.clock() - self.started

    def may_start_job(self) -> bool:
        """Whether another job may start; False (and recorded) once the time is spent."""
        if self.stopped_by is None and self.elapsed >= self.max_seconds:
            self.stopped_by = "max_seconds"
        return self.stopped_by is None

    def spend_rows(self, rows: int, cut: int | None) -> None:
        self.rows += rows
        if cut is not None and self.stopped_by is None:
            self.stopped_by = "max_rows"


@dataclass
class WalkTrace:
    """What a walk did: ranges compared and disagreeing per job, and the jobs it ran."""

    compared: list[int] = field(default_factory=list)
    disagreeing: list[int] = field(default_factory=list)
    jobs: int = 0
    passes: int = 0

    def level(self, compared: int, disagreeing: int) -> None:
        self.compared.append(compared)
        self.disagreeing.append(disagreeing)
        self.jobs += 1


@dataclass(frozen=True)
class Walk(Generic[T]):
    """What a bounded walk covered and found."""

    found: tuple[T, ...]
    """What each pass's list job returned (the differences of its listed ranges)."""
    start: int
    """The first position compared."""
    resume_from: int | None
    """The first position not compared (None: the walk reached the end of the key space)."""
    stopped_by: str | None
    """``max_rows`` or ``max_seconds`` when a budget stopped the walk before the end."""
    ranges_listed: int
    rows_diffed: int
    """Rows (both sides) of the listed ranges: what the key-by-key diff read."""
    peak_held: int
    """The most range summaries the driver held at once (never above ``max_ranges``)."""
    trace: WalkTrace


def bounded_walk(
    summarise: Callable[[int, Sequence[Range], int], Sequence[RangeSummary]],
    listing: Callable[[Sequence[Range], int], T],
    *,
    start: int,
    max_ranges: int,
    list_rows: int,
    budget: Budget,
    step: Callable[[str], None] = lambda message: None,
) -> Walk[T]:
    """Walk the key space from ``start`` in passes, until its end or a budget stops it.

    A pass summarises the first level that fits ``max_ranges`` (``summarise(level, (), start)``:
    one job, the disagreeing ranges back), then refines the disagreeing ranges that are too
    big to list, one job per level (``summarise(level, parents, start)``), as :func:`plan_level`
    decides, and lists the keys of the others in one job (``listing(ranges, start)``), as many
    as :func:`fit_rows` lets the row budget take. A pass cut by ``max_ranges`` is followed by
    another from the cut; one cut by the row budget ends the walk there. No job starts once
    the time budget is spent, and a pass the time budget interrupts is not covered.
    """
    list_rows = min(list_rows, budget.max_rows)  # a listed range always fits an empty budget
    trace = WalkTrace()
    found: list[T] = []
    position, listed_count, rows, peak = start, 0, 0, 0
    while position < END and budget.may_start_job():
        trace.passes += 1
        level = first_level(max_ranges)
        parents: tuple[Range, ...] = ()
        compared = FANOUT**level - (position >> shift(level))
        listed: list[RangeSummary] = []
        cut: int | None = None
        interrupted = False
        while True:
            if not budget.may_start_job():
                interrupted = True
                break
            disagreeing = summarise(level, parents, position)
            trace.level(compared, len(disagreeing))
            peak = max(peak, len(listed) + len(disagreeing))
            plan = plan_level(
                disagreeing, max_ranges=max_ranges, list_rows=list_rows, held=len(listed), cut=cut
            )
            cut = plan.cut
            listed = [s for s in listed if cut is None or s.range.lo < cut] + list(plan.listed)
            step(
                f"level {level}: {compared} ranges compared, {len(disagreeing)} disagree, "
                f"{len(plan.refine)} refined, {len(listed)} to list"
            )
            if plan.next_level is None:
                break
            compared = len(plan.refine) * FANOUT ** (plan.next_level - level)
            parents, level = plan.refine, plan.next_level
        if interrupted:
            break  # the pass is not covered: the next run starts it again
        taken, over = fit_rows(listed, budget.rows_left)
        if taken:
            if not budget.may_start_job():
                break
            found.append(listing([s.range for s in taken], position))
            trace.jobs += 1
        spent = sum(s.rows for s in taken)
        budget.spend_rows(spent, over)
        listed_count, rows = listed_count + len(taken), rows + spent
        step(f"listed the keys of {len(taken)} ranges ({spent} rows)")
        if over is not None and rows == 0:
            step(
                f"a range of one key position from {over} holds more rows than --max-rows "
                f"({budget.max_rows}): no run passes it until --max-rows is raised"
            )
        cut = earliest(cut, over)
        position = cut if cut is not None else END
        if over is not None:
            break
    return Walk(
        found=tuple(found),
        start=start,
        resume_from=position if position < END else None,
        stopped_by=budget.stopped_by if position < END else None,
        ranges_listed=listed_count,
        rows_diffed=rows,
        peak_held=peak,
        trace=trace,
    )


def check_window(since: datetime | None, until: datetime | None) -> None:
    """Bounded mode's window: ``since`` must come before ``until`` (one line otherwise)."""
    if since is not None and until is not None and since >= until:
        raise UsageError(
            f"--since {since.isoformat()} is not before --until {until.isoformat()}: "
            f"the window of modified keys would be empty"
        )


@dataclass(frozen=True)
class StepCheck:
    """This run's delta against the pair's recent runs (the health signal)."""

    baseline: float | None
    """The median delta of the recent runs (None: no earlier run)."""
    step_change: bool


def step_change(delta: int, recent: Sequence[int], *, factor: float, minimum: int) -> StepCheck:
    """A step change: the delta reaches ``factor`` x the recent median and at least
    ``minimum`` above it. A steady small delta is normal; the first run has no baseline."""
    if not recent:
        return StepCheck(None, False)
    baseline = float(statistics.median(recent))
    return StepCheck(baseline, delta >= factor * baseline and delta - baseline >= minimum)


def batches(keys: Sequence[str], per_second: int) -> Iterator[Sequence[str]]:
    """The repair batches: at most ``per_second`` keys each (one batch a second at most)."""
    if per_second < 1:
        raise UsageError(f"--max-repairs-per-second must be at least 1, not {per_second}")
    for start in range(0, len(keys), per_second):
        yield keys[start : start + per_second]


class RateLimiter:
    """Spaces work so that ``per_second`` units are never exceeded over any run of batches:
    batch ``i`` starts no earlier than ``i`` seconds after the first (clock and sleep injectable)."""

    def __init__(
        self,
        per_second: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.per_second = per_second
        self._clock, self._sleep = clock, sleep
        self._start: float | None = None
        self.done = 0
        self.waited = 0.0

    def admit(self, units: int) -> None:
        """Wait until ``units`` more fit in the rate, then count them."""
        now = self._clock()
        if self._start is None:
            self._start = now
        due = self._start + self.done / self.per_second
        if due > now:
            self._sleep(due - now)
            self.waited += due - now
        self.done += units
