"""Failure injection: stop a replay at a named step, as a crash there would.

Recovery is part of the product (a crash at any step leaves serving untouched or fully
published, and rerunning ends in exactly one publication), so it is exercised on purpose:
``fail_at=`` makes the step raise :class:`~lakehouse.errors.InjectedFailure` right there,
without recording anything a real crash would not have recorded.
"""

from __future__ import annotations

import logging
from enum import StrEnum

from lakehouse.errors import InjectedFailure, UsageError

log = logging.getLogger(__name__)


class FailPoint(StrEnum):
    """Where a failure can be injected, in the order the steps run."""

    AFTER_CANDIDATE = "after_candidate"
    """The candidate is written; no diff, no decision yet."""
    AFTER_DIFF = "after_diff"
    """The diff manifest is recorded; no reconciliation yet."""
    DURING_PUBLISH = "during_publish"
    """The candidate is stamped with the effective time and the intent recorded; serving untouched."""
    AFTER_PUBLISH_BEFORE_NOTIFY = "after_publish_before_notify"
    """Serving is published; neither the publication entry nor any notification is recorded."""


def fail_point(value: FailPoint | str | None) -> FailPoint | None:
    """Parse a fail point (``None`` for none); a clear error for unknown names."""
    if value is None or isinstance(value, FailPoint):
        return value
    try:
        return FailPoint(value)
    except ValueError:
        known = ", ".join(p.value for p in FailPoint)
        raise UsageError(f"unknown fail point {value!r}; known: {known}") from None


def maybe_fail(chosen: FailPoint | None, here: FailPoint, run_id: str) -> None:
    """Raise the injected failure if ``here`` is the chosen point."""
    if chosen is here:
        log.warning("injecting failure %s in replay %s", here.value, run_id)
        raise InjectedFailure(
            f"injected failure {here.value} in replay {run_id}; rerun the same command to recover"
        )
