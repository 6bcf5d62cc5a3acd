"""The fault catalogue: what the generator plants, where it must end up, and when.

Fault kinds and their expected fates (the ground truth's ``expected_fate`` strings, built
from :mod:`workloads.vocabulary`), the :class:`Fault` record the ground truth lists, the
lateness arithmetic that decides a valid fact's fate, and the fixed plan that plants every
kind early in the history so even tiny histories contain each one.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum
from typing import Final

from workloads.silver.lateness import LatenessRule
from workloads.synthetic.timeline import DAY_SECONDS, Calendar, first_of_next_month
from workloads.vocabulary import FEEDS, ClosedPeriodAction, Fate, Feed, Lateness, QuarantineReason


class FaultKind(StrEnum):
    """Every fault kind the generator plants (each at least once for entities>=50, months>=3)."""

    EXACT_DUPLICATE = "exact_duplicate"
    RESENT_CORRECTION = "resent_correction"
    LATE_EVENT = "late_event"
    BACKDATED_CLOSED_PERIOD = "backdated_closed_period"
    MALFORMED_LINE = "malformed_line"
    WRONG_TYPE = "wrong_type"
    MISSING_ID = "missing_id"
    UNKNOWN_SCHEMA_VERSION = "unknown_schema_version"
    TRUNCATED_FILE = "truncated_file"


FAULT_KINDS: Final[tuple[FaultKind, ...]] = tuple(FaultKind)
"""Every fault kind, in catalogue order."""

PHANTOM_KINDS: Final[frozenset[FaultKind]] = frozenset(
    {FaultKind.MALFORMED_LINE, FaultKind.WRONG_TYPE, FaultKind.MISSING_ID, FaultKind.UNKNOWN_SCHEMA_VERSION}
)
"""Kinds planted as an extra, invalid line next to a valid event (quarantined noise)."""


def silver_fate(lateness: Lateness) -> str:
    """Expected fate of a fact that enters Silver with a non-default lateness class."""
    return f"{Fate.SILVER}:{lateness}"


def quarantine_fate(reason: QuarantineReason) -> str:
    """Expected fate of a line quarantined for ``reason``."""
    return f"{Fate.QUARANTINE}:{reason}"


FATE_SILVER: Final[str] = Fate.SILVER.value
FATE_DUPLICATE: Final[str] = Fate.DUPLICATE.value
FATE_CORRECTED: Final[str] = Fate.CORRECTED.value
FATE_REOPEN: Final[str] = silver_fate(Lateness.REOPEN)
FATE_ADJUSTMENT: Final[str] = silver_fate(Lateness.ADJUSTMENT)
FATE_EXCEPTIONS: Final[str] = Fate.EXCEPTIONS.value
FATE_MALFORMED: Final[str] = quarantine_fate(QuarantineReason.MALFORMED)
FATE_WRONG_TYPE: Final[str] = quarantine_fate(QuarantineReason.WRONG_TYPE)
FATE_MISSING_ID: Final[str] = quarantine_fate(QuarantineReason.MISSING_EVENT_ID)
FATE_UNKNOWN_SCHEMA: Final[str] = quarantine_fate(QuarantineReason.UNKNOWN_SCHEMA_VERSION)

FATES: Final[tuple[str, ...]] = (
    FATE_SILVER,
    FATE_DUPLICATE,
    FATE_CORRECTED,
    FATE_REOPEN,
    FATE_ADJUSTMENT,
    FATE_EXCEPTIONS,
    FATE_MALFORMED,
    FATE_WRONG_TYPE,
    FATE_MISSING_ID,
    FATE_UNKNOWN_SCHEMA,
)
"""Every expected fate string that can appear in the ground truth."""


def closed_period_fate(action: str) -> str:
    """Expected fate of a late fact for a closed period under ``closed_period_action``."""
    closed = ClosedPeriodAction(action)
    if closed is ClosedPeriodAction.HOLD:
        return FATE_EXCEPTIONS
    return silver_fate(closed.lateness)


@dataclass(frozen=True)
class Fault:
    """One planted fault: the line it sits on and what the lakehouse must do with it.

    `line` is 1-based and counts a CSV header as line 1. `event_id` is the id the line was
    meant to carry (None when the fault is the missing id itself). `field` names the field
    involved for wrong types, missing ids and corrections.
    """

    kind: str
    feed: str
    file: str
    line: int
    event_id: str | None
    expected_fate: str
    detail: str
    field: str | None = None


@dataclass(frozen=True)
class PlannedFault:
    """A fault attached to a pending line; file and line are known only when written."""

    kind: str
    event_id: str | None
    expected_fate: str
    detail: str
    field: str | None = None

    def placed(self, feed: str, file: str, line: int) -> Fault:
        """The ground-truth record of this fault once its line is written."""
        return Fault(self.kind, feed, file, line, self.event_id, self.expected_fate, self.detail, self.field)


def expected_fate(rule: LatenessRule, event_time: datetime, delivery_date: date) -> str:
    """Fate of a valid, non-duplicate fact under a lateness rule.

    Ingest time is `delivery_date` 00:00:00Z. The fact is on time when
    `ingest - event_time <= allowed_lateness_days`; a late fact whose period (the UTC month
    of `event_time`) is still open is processed normally; the period is closed once ingest
    time is later than the first day of the next month plus `period_close_grace_days`, and
    a late fact for a closed period gets the feed's `closed_period_action`.
    """
    ingest = datetime(delivery_date.year, delivery_date.month, delivery_date.day, tzinfo=UTC)
    event_utc = event_time.astimezone(UTC)
    if ingest - event_utc <= timedelta(days=rule.allowed_lateness_days):
        return FATE_SILVER
    first_next = first_of_next_month(event_utc.date())
    closes = datetime(first_next.year, first_next.month, first_next.day, tzinfo=UTC)
    if ingest > closes + timedelta(days=rule.period_close_grace_days):
        return closed_period_fate(rule.closed_period_action)
    return FATE_SILVER


class FateRules:
    """:func:`expected_fate` on the generator's integer calendar, per feed's policy."""

    def __init__(self, policy: Mapping[str, LatenessRule], calendar: Calendar) -> None:
        self.policy = policy
        self._calendar = calendar
        self._closed_fate = {
            feed: closed_period_fate(rule.closed_period_action) for feed, rule in policy.items()
        }

    def fate(self, feed: str, secs: int, delivery_day: int) -> str:
        """Expected fate of a valid, unique line of ``feed`` with event time ``secs``."""
        rule = self.policy[feed]
        if delivery_day * DAY_SECONDS - secs <= rule.allowed_lateness_days * DAY_SECONDS:
            return FATE_SILVER
        if delivery_day > self.period_close(feed, secs // DAY_SECONDS):
            return self._closed_fate[feed]
        return FATE_SILVER

    def closed_fate(self, feed: str) -> str:
        """The fate of ``feed``'s late facts for closed periods."""
        return self._closed_fate[feed]

    def period_close(self, feed: str, day: int) -> int:
        """The last delivery day on which the period of ``day`` is still open for ``feed``."""
        return self._calendar.next_month_day(day) + self.policy[feed].period_close_grace_days

    def on_time_fate(self, feed: str, secs: int, delivery_day: int) -> str:
        """The fate of a same- or next-day delivery, which the policy must keep in Silver."""
        fate = self.fate(feed, secs, delivery_day)
        if fate != FATE_SILVER:
            raise ValueError(
                f"policy for {feed} makes a next-day delivery non-silver ({fate}); "
                "allowed_lateness_days and period_close_grace_days must allow it"
            )
        return fate

    def can_be_late_in_open_period(self, feed: str, secs: int) -> bool:
        """Whether a fact of ``secs`` can arrive late while its period is still open."""
        day = secs // DAY_SECONDS
        return day + self.policy[feed].allowed_lateness_days + 1 <= self.period_close(feed, day)


RANDOM_KINDS: Final[Mapping[str, tuple[FaultKind, ...]]] = {
    feed: tuple(
        kind
        for kind in FAULT_KINDS
        if kind != FaultKind.TRUNCATED_FILE
        and not (feed == Feed.OUTCOMES and kind in (FaultKind.LATE_EVENT, FaultKind.BACKDATED_CLOSED_PERIOD))
    )
    for feed in FEEDS
}
"""The kinds a random draw may plant on an event of each feed (outcomes are never late)."""

FORCED_PLAN: Final[tuple[tuple[FaultKind, Feed, str | None], ...]] = (
    (FaultKind.EXACT_DUPLICATE, Feed.ORDERS, "same_file"),
    (FaultKind.EXACT_DUPLICATE, Feed.LOGINS, "later_delivery"),
    (FaultKind.EXACT_DUPLICATE, Feed.SETTLEMENTS, "later_delivery"),
    (FaultKind.RESENT_CORRECTION, Feed.ORDERS, None),
    (FaultKind.RESENT_CORRECTION, Feed.SETTLEMENTS, None),
    (FaultKind.RESENT_CORRECTION, Feed.OUTCOMES, None),
    (FaultKind.LATE_EVENT, Feed.ORDERS, None),
    (FaultKind.LATE_EVENT, Feed.LOGINS, None),
    (FaultKind.BACKDATED_CLOSED_PERIOD, Feed.ORDERS, None),
    (FaultKind.BACKDATED_CLOSED_PERIOD, Feed.REFUNDS, None),
    (FaultKind.BACKDATED_CLOSED_PERIOD, Feed.SETTLEMENTS, None),
    (FaultKind.BACKDATED_CLOSED_PERIOD, Feed.LOGINS, None),
    (FaultKind.MALFORMED_LINE, Feed.ORDERS, None),
    (FaultKind.MALFORMED_LINE, Feed.SETTLEMENTS, None),
    (FaultKind.WRONG_TYPE, Feed.ORDERS, "amount"),
    (FaultKind.WRONG_TYPE, Feed.LOGINS, "event_time"),
    (FaultKind.WRONG_TYPE, Feed.SETTLEMENTS, "amount"),
    (FaultKind.MISSING_ID, Feed.LOGINS, None),
    (FaultKind.MISSING_ID, Feed.SETTLEMENTS, None),
    (FaultKind.UNKNOWN_SCHEMA_VERSION, Feed.ORDERS, None),
    (FaultKind.UNKNOWN_SCHEMA_VERSION, Feed.REFUNDS, None),
)
"""The fixed plan: (kind, feed, variant). Planted on the first eligible event of the feed on
or after start + 1 + (position % 10) days, so all kinds exist even for tiny histories."""

FORCED_TRUNCATIONS: Final[Mapping[Feed, int]] = {Feed.ORDERS: 3, Feed.SETTLEMENTS: 5}
"""Feed -> days after the start from which its next delivery's last file is truncated."""


class FaultPlan:
    """Decides which fault, if any, the next event or delivery carries: the fixed plan
    first (each entry once, on the first eligible event), then a random draw."""

    def __init__(self, first_day: int, fault_rate: float, rules: FateRules) -> None:
        self._fault_rate = fault_rate
        self._rules = rules
        self._forced: dict[str, list[tuple[FaultKind, int, str | None]]] = {feed: [] for feed in FEEDS}
        for position, (kind, feed, variant) in enumerate(FORCED_PLAN):
            self._forced[feed].append((kind, first_day + 1 + position % 10, variant))
        self._forced_truncations: dict[str, int] = {
            feed: first_day + offset for feed, offset in FORCED_TRUNCATIONS.items()
        }

    def pick(self, feed: str, secs: int, rng: random.Random) -> tuple[FaultKind | None, str | None]:
        """The fault kind and variant for the next event of ``feed``, or (None, None)."""
        day = secs // DAY_SECONDS
        plan = self._forced[feed]
        if plan:
            for index, (kind, earliest, variant) in enumerate(plan):
                if earliest <= day and self._eligible(kind, feed, secs):
                    del plan[index]
                    return kind, variant
        if rng.random() < self._fault_rate:
            kind = rng.choice(RANDOM_KINDS[feed])
            if self._eligible(kind, feed, secs):
                return kind, None
        return None, None

    def _eligible(self, kind: FaultKind, feed: str, secs: int) -> bool:
        return kind != FaultKind.LATE_EVENT or self._rules.can_be_late_in_open_period(feed, secs)

    def truncate(self, feed: str, day: int, rng: random.Random) -> bool:
        """Whether ``feed``'s delivery of ``day`` ends in a truncated file: by a random draw
        (always made, to keep ``rng``'s sequence) or because the planned day has come."""
        drawn = rng.random() < self._fault_rate
        planned = self._forced_truncations.get(feed)
        return drawn or (planned is not None and day >= planned)

    def truncation_written(self, feed: str) -> None:
        """A truncated file of ``feed`` was written: the planned truncation is not needed."""
        self._forced_truncations.pop(feed, None)
