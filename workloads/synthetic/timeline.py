"""The generator's calendar: whole days as integers, event times as seconds since 1970.

Events are generated and parked by day number (days since 1970-01-01) and times are
integer seconds, so the hot path does integer arithmetic; :class:`Calendar` renders them
as text and finds period ends, caching both because millions of events share few days.
"""

from __future__ import annotations

from datetime import date
from typing import Final

DAY_SECONDS: Final = 86_400
_EPOCH_ORDINAL: Final = date(1970, 1, 1).toordinal()


def day_number(day: date) -> int:
    """Days since 1970-01-01 (the generator's internal calendar)."""
    return day.toordinal() - _EPOCH_ORDINAL


def date_of(day: int) -> date:
    """The date of a day number."""
    return date.fromordinal(day + _EPOCH_ORDINAL)


def first_of_next_month(day: date) -> date:
    """The first day of the month after ``day``: where the period of ``day`` ends."""
    return date(day.year + 1, 1, 1) if day.month == 12 else date(day.year, day.month + 1, 1)


def add_months(day: date, months: int) -> date:
    """``day`` moved by whole months (a first of month stays one; other days cap at 28)."""
    index = day.year * 12 + (day.month - 1) + months
    year, month0 = divmod(index, 12)
    return date(year, month0 + 1, 1) if day.day == 1 else date(year, month0 + 1, min(day.day, 28))


class Calendar:
    """Cached text forms of day numbers and the period end of each day."""

    def __init__(self) -> None:
        self._day_text: dict[int, str] = {}
        self._close_day: dict[int, int] = {}

    def day_text(self, day: int) -> str:
        """``YYYY-MM-DD`` of a day number."""
        text = self._day_text.get(day)
        if text is None:
            text = date_of(day).isoformat()
            self._day_text[day] = text
        return text

    def iso(self, secs: int) -> str:
        """ISO-8601 UTC timestamp with seconds precision and a ``Z``, as feeds carry it."""
        day, time_of_day = divmod(secs, DAY_SECONDS)
        hours, rest = divmod(time_of_day, 3600)
        minutes, seconds = divmod(rest, 60)
        return f"{self.day_text(day)}T{hours:02d}:{minutes:02d}:{seconds:02d}Z"

    def next_month_day(self, day: int) -> int:
        """Day number of the first day of the month after ``day`` (the period end)."""
        result = self._close_day.get(day)
        if result is None:
            result = day_number(first_of_next_month(date_of(day)))
            self._close_day[day] = result
        return result
