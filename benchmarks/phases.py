"""Where a timed product call's time goes, from the progress messages it reports."""

from __future__ import annotations

import time
from collections.abc import Callable
from itertools import pairwise


class Phases:
    """(moment, message) marks of one timed call: the start, each progress message, the end.

    Pass it as the call's ``progress`` callback; each message's phase runs until the next mark.
    """

    def __init__(self, first: str) -> None:
        self.marks: list[tuple[float, str]] = [(time.monotonic(), first)]

    def __call__(self, message: str) -> None:
        self.marks.append((time.monotonic(), message))

    def end(self) -> float:
        """Mark the end; the seconds since the start."""
        self.marks.append((time.monotonic(), "end"))
        return self.marks[-1][0] - self.marks[0][0]

    def seconds(self, name: Callable[[str], str] = str, *, first: bool = True) -> dict[str, float]:
        """Seconds per ``name(message)``, in the order first reported (phases of one name add
        up); without the first phase (the part before the first message) unless ``first``."""
        steps: dict[str, float] = {}
        for (before, message), (after, _) in pairwise(self.marks if first else self.marks[1:]):
            steps[name(message)] = steps.get(name(message), 0.0) + after - before
        return steps
