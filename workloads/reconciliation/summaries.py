"""The pure half of reconciliation: range summaries, the Merkle-like walk, the health signal.

A side of a pair is summarised per *leaf* (a hash range of the key: ``xxhash64(key) mod
16**depth``) as a row count and an order-free checksum (the sum of each row's ``xxhash64``
over its canonical columns). The leaves are the bottom of a 16-ary tree: a node of level
``l`` covers the leaves whose number divided by ``16**(depth - l)`` is its own, and its
summary is the sum of theirs. :func:`walk` compares the root, then only the children of
the nodes that disagree, down to the leaves; rows are diffed only inside the disagreeing
leaves. Everything here takes plain values, so the rules are tested without Spark.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from lakehouse.errors import UsageError

FANOUT: Final = 16
"""Children per range: each disagreeing range is refined into 16 sub-ranges."""
DEFAULT_DEPTH: Final = 4
"""Levels below the root: 16**4 = 65,536 leaves (a leaf of a 1M-row table holds ~15 rows)."""


@dataclass(frozen=True)
class Summary:
    """What one side holds in one hash range: its rows and the sum of their row hashes."""

    rows: int
    checksum: int


EMPTY: Final = Summary(0, 0)


@dataclass(frozen=True)
class TreeWalk:
    """Where the two sides disagree, and how many ranges the walk compared to find it."""

    leaves: tuple[int, ...]
    """The disagreeing leaves, ascending: the only ranges whose rows are diffed."""
    compared: tuple[int, ...]
    """Ranges compared per level (root first)."""
    disagreeing: tuple[int, ...]
    """Ranges that disagreed per level (root first)."""

    @property
    def ranges_compared(self) -> int:
        return sum(self.compared)


def _level(leaves: Mapping[int, Summary], shift: int) -> dict[int, Summary]:
    nodes: dict[int, Summary] = {}
    for leaf, s in leaves.items():
        node = leaf // shift
        held = nodes.get(node, EMPTY)
        nodes[node] = Summary(held.rows + s.rows, held.checksum + s.checksum)
    return nodes


def walk(
    source: Mapping[int, Summary], derived: Mapping[int, Summary], depth: int = DEFAULT_DEPTH
) -> TreeWalk:
    """Compare the two sides' leaf summaries top-down, refining only disagreeing ranges."""
    if depth < 0:
        raise UsageError(f"a tree depth must be 0 or more, not {depth}")
    levels = [
        (_level(source, FANOUT ** (depth - level)), _level(derived, FANOUT ** (depth - level)))
        for level in range(depth + 1)
    ]
    frontier = [0]
    compared: list[int] = []
    disagreeing: list[int] = []
    for level, (ours, theirs) in enumerate(levels):
        bad = [node for node in frontier if ours.get(node, EMPTY) != theirs.get(node, EMPTY)]
        compared.append(len(frontier))
        disagreeing.append(len(bad))
        if level == depth or not bad:
            leaves = tuple(sorted(bad)) if level == depth else ()
            return TreeWalk(leaves, tuple(compared), tuple(disagreeing))
        frontier = [node * FANOUT + child for node in bad for child in range(FANOUT)]
    raise AssertionError("unreachable")  # pragma: no cover


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
