"""Where "now" comes from when the ledger records an entry.

The ledger never reads the wall clock inside its logic: ``recorded_at`` is taken from a
:class:`Clock` handed in at the edge (a job passes :class:`SystemClock`, a test a
:class:`FixedClock`), so the same entries recorded with the same clock give byte-identical
ledger rows and hashes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Something that says what time it is, as an aware datetime."""

    def now(self) -> datetime:
        """The current moment; naive values are read as UTC."""
        ...


class SystemClock:
    """The machine's clock, in UTC: what jobs use."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class FixedClock:
    """A clock that starts at ``at`` and moves ``step`` forward each time it is read.

    ``step`` defaults to zero (always the same moment). Deterministic: tests get the same
    ``recorded_at`` values, and therefore the same hashes, on every run.
    """

    def __init__(self, at: datetime, step: timedelta = timedelta(0)) -> None:
        self._next = utc(at)
        self._step = step

    def now(self) -> datetime:
        current = self._next
        self._next = current + self._step
        return current


def utc(moment: datetime) -> datetime:
    """The same moment as an aware UTC datetime (naive values are taken to be UTC)."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
