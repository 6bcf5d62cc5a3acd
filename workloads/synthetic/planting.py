"""Planting faults: each generated event is parked for delivery, clean or with the fault
its :class:`~workloads.synthetic.faults.FaultPlan` picks.

Duplicates, corrections, late and backdated facts change *when* and *how often* a real
event is delivered; the other kinds add a phantom line (a fresh id, never a real event)
next to it, so the valid history stays complete and every quarantined line is pure noise.
The pure functions at the top say how each kind damages a record.
"""

from __future__ import annotations

import random
from typing import Final

from workloads.synthetic.delivery import PendingDeliveries, PendingLine
from workloads.synthetic.faults import (
    FATE_CORRECTED,
    FATE_DUPLICATE,
    FATE_MALFORMED,
    FATE_MISSING_ID,
    FATE_SILVER,
    FATE_UNKNOWN_SCHEMA,
    FATE_WRONG_TYPE,
    PHANTOM_KINDS,
    FateRules,
    FaultKind,
    FaultPlan,
    PlannedFault,
)
from workloads.synthetic.feeds import (
    EventIds,
    Fields,
    amount_cents_of,
    amount_field,
    cents_text,
    render_line,
    text_of,
    with_field,
    without_field,
)
from workloads.synthetic.timeline import DAY_SECONDS, Calendar
from workloads.vocabulary import CSV_FEEDS, Feed

WRONG_VALUES: Final = {
    "event_time": "yesterday",
    "amount": "twelve",
    "amount_cents": "twelve hundred",
    "success": "yes",
    "revision": "first",
}
"""The mistyped value a wrong-type fault writes into each field it can hit."""

EXPECTED_TYPES: Final = {
    "event_time": "an ISO-8601 UTC timestamp",
    "amount": "a decimal number",
    "amount_cents": "an integer",
    "success": "a boolean",
    "revision": "an integer",
}
"""What each of those fields should hold, as the fault's detail says."""


def corrected_revision(feed: str, fields: Fields, rng: random.Random) -> tuple[Fields, str, str, str]:
    """Revision 2 of a record: revision bumped and one business field changed.

    Returns the new fields, the changed field's name, its old and its new text.
    """
    fields = with_field(fields, "revision", "2", False)
    if feed == Feed.LOGINS:
        old = text_of(fields, "success")
        new = "false" if old == "true" else "true"
        return with_field(fields, "success", new, False), "success", old, new
    if feed == Feed.OUTCOMES:
        old = text_of(fields, "label")
        new = "chargeback" if old == "fraud" else "fraud"
        return with_field(fields, "label", new, True), "label", old, new
    key = amount_field(fields)
    if key is None:
        raise KeyError(f"a {feed} record has no amount to correct")
    cents = amount_cents_of(fields)
    delta = max(1, cents * rng.randint(3, 15) // 100)
    new_cents = cents - delta if cents - delta >= 50 else cents + delta
    old_text = text_of(fields, key)
    new_text = str(new_cents) if key == "amount_cents" else cents_text(new_cents)
    return with_field(fields, key, new_text, False), key, old_text, new_text


def malformed_line(feed: str, fields: Fields, rng: random.Random) -> tuple[str, str]:
    """A line that no parser accepts, and what is wrong with it."""
    line = render_line(feed, fields)
    if feed in CSV_FEEDS:
        choice = rng.randrange(3)
        if choice == 0:
            return line.rsplit(",", 1)[0], "CSV row with a column missing"
        if choice == 1:
            return f"{line},EXTRA", "CSV row with an extra column"
        return line.replace(",", ";"), "CSV row separated by semicolons"
    choice = rng.randrange(3)
    if choice == 0:
        return line[:-1], "broken JSON: closing brace missing"
    if choice == 1:
        return line.replace('"event_id":', '"event_id" ', 1), "broken JSON: colon missing"
    return line.replace('"event_id":', "event_id:", 1), "broken JSON: unquoted key"


def wrong_type_line(
    feed: str, fields: Fields, variant: str | None, rng: random.Random
) -> tuple[str, str, str]:
    """A line with one field of the wrong type: the line, the field and the detail.

    ``variant`` names the field to hit (``amount`` means whichever amount field the record
    has); otherwise one eligible field is drawn.
    """
    options = ["event_time", amount_field(fields) or "revision"]
    if feed == Feed.LOGINS:
        options.append("success")
    if variant == "amount":
        variant = amount_field(fields) or "event_time"
    field = variant if variant in options else rng.choice(options)
    bad = WRONG_VALUES[field]
    line = render_line(feed, with_field(fields, field, bad, True))
    return line, field, f"field {field} is {bad!r}, expected {EXPECTED_TYPES[field]}"


def missing_id_line(feed: str, fields: Fields, rng: random.Random) -> tuple[str, str]:
    """A line whose event id is empty (always so in CSV) or absent, and which it is."""
    if feed in CSV_FEEDS or rng.random() < 0.5:
        return render_line(feed, with_field(fields, "event_id", "", True)), "event_id is empty"
    return render_line(feed, without_field(fields, "event_id")), "event_id is absent"


def unknown_schema_line(feed: str, fields: Fields) -> tuple[str, str]:
    """A line claiming a schema version no feed has, and the detail."""
    line = render_line(feed, with_field(fields, "schema_version", "9", True))
    return line, "schema_version '9' is not a known version of this feed"


class Planter:
    """Parks each generated event for delivery, planting the fault the plan picks."""

    def __init__(
        self,
        pending: PendingDeliveries,
        plan: FaultPlan,
        rules: FateRules,
        ids: EventIds,
        calendar: Calendar,
    ) -> None:
        self._pending = pending
        self._plan = plan
        self._rules = rules
        self._ids = ids
        self._calendar = calendar

    def deliver(
        self,
        feed: str,
        secs: int,
        event_id: str,
        fields: Fields,
        rng: random.Random,
        generation_day: int,
    ) -> Fields:
        """Park one real event for delivery, planting a fault on it when one is due.

        Returns the fields of the event's latest revision (a correction may change them),
        so derived events (settlements, refunds) can follow the corrected amount.
        ``generation_day`` is the day being generated; phantom lines take their ids from it.
        """
        kind, variant = self._plan.pick(feed, secs, rng)
        day = secs // DAY_SECONDS
        line = render_line(feed, fields)
        if kind is None or kind in PHANTOM_KINDS:
            target = day if rng.random() < 0.8 else day + 1
            fate = self._rules.on_time_fate(feed, secs, target)
            self._pending.put(target, feed, PendingLine(secs, event_id, 0, line, fate, None))
            if kind is not None:
                self._plant_phantom(kind, variant, feed, secs, fields, target, rng, generation_day)
            return fields
        if kind == FaultKind.EXACT_DUPLICATE:
            self._plant_duplicate(variant, feed, secs, event_id, line, rng)
            return fields
        if kind == FaultKind.RESENT_CORRECTION:
            return self._plant_correction(feed, secs, event_id, fields, line, rng)
        self._plant_delayed(kind, feed, secs, event_id, line, rng)
        return fields

    def _plant_delayed(
        self, kind: FaultKind, feed: str, secs: int, event_id: str, line: str, rng: random.Random
    ) -> None:
        """A late event (period still open) or a backdated one (period already closed)."""
        rule = self._rules.policy[feed]
        day = secs // DAY_SECONDS
        close = self._rules.period_close(feed, day)
        day_text = self._calendar.day_text
        period = day_text(day)[:7]
        if kind == FaultKind.LATE_EVENT:
            target = rng.randint(day + rule.allowed_lateness_days + 1, close)
            fate = self._rules.fate(feed, secs, target)
            if fate != FATE_SILVER:  # pragma: no cover - guarded by FaultPlan's eligibility
                raise AssertionError(f"late event planned into a closed period: {event_id}")
            detail = (
                f"delivered {day_text(target)}, {target - day} days after its event day "
                f"(allowed {rule.allowed_lateness_days}); period {period} closes after "
                f"{day_text(close)}, still open"
            )
        else:  # BACKDATED_CLOSED_PERIOD
            target = max(day + rule.allowed_lateness_days + 1, close + 1) + rng.randrange(21)
            fate = self._rules.fate(feed, secs, target)
            if fate != self._rules.closed_fate(feed):  # pragma: no cover
                raise AssertionError(f"backdated event not in a closed period: {event_id}")
            detail = (
                f"delivered {day_text(target)} for period {period}, which closed after "
                f"{day_text(close)}; closed_period_action={rule.closed_period_action}"
            )
        fault = PlannedFault(kind, event_id, fate, detail)
        self._pending.put(target, feed, PendingLine(secs, event_id, 0, line, fate, fault))

    def _plant_duplicate(
        self,
        variant: str | None,
        feed: str,
        secs: int,
        event_id: str,
        line: str,
        rng: random.Random,
    ) -> None:
        """The event once, then an identical copy in the same file or the next delivery."""
        day = secs // DAY_SECONDS
        if variant is None:
            variant = "same_file" if rng.random() < 0.5 else "later_delivery"
        first = day if variant == "later_delivery" or rng.random() < 0.8 else day + 1
        fate = self._rules.on_time_fate(feed, secs, first)
        self._pending.put(first, feed, PendingLine(secs, event_id, 0, line, fate, None))
        if variant == "same_file":
            again = first
            detail = "identical copy of the line right before it in the same file"
        else:
            again = first + 1
            first_text = self._calendar.day_text(first)
            detail = f"identical re-delivery of the line first delivered in {feed}/{first_text}"
        fault = PlannedFault(FaultKind.EXACT_DUPLICATE, event_id, FATE_DUPLICATE, detail)
        self._pending.put(again, feed, PendingLine(secs, event_id, 1, line, FATE_DUPLICATE, fault))

    def _plant_correction(
        self,
        feed: str,
        secs: int,
        event_id: str,
        fields: Fields,
        line: str,
        rng: random.Random,
    ) -> Fields:
        """Revision 1 on its day, superseded by revision 2 resent a few days later."""
        day = secs // DAY_SECONDS
        rule = self._rules.policy[feed]
        close = self._rules.period_close(feed, day)
        # Partners resend corrections within days, not months: at most 5 days later, on time
        # and inside the open period, so the correction itself is an ordinary silver fact.
        span = max(1, min(rule.allowed_lateness_days, close - day, 5))
        again = day + rng.randint(1, span)
        corrected, field, old, new = corrected_revision(feed, fields, rng)
        fate = self._rules.fate(feed, secs, again)
        if fate != FATE_SILVER:  # pragma: no cover - span keeps it inside the open period
            raise AssertionError(f"correction planned into a closed period: {event_id}")
        change = f"({field}: {old} -> {new})"
        day_text, again_text = self._calendar.day_text(day), self._calendar.day_text(again)
        superseded = PlannedFault(
            FaultKind.RESENT_CORRECTION,
            event_id,
            FATE_CORRECTED,
            f"revision 1, superseded by revision 2 delivered in {feed}/{again_text} {change}",
            field,
        )
        correcting = PlannedFault(
            FaultKind.RESENT_CORRECTION,
            event_id,
            fate,
            f"revision 2 supersedes revision 1 delivered in {feed}/{day_text} {change}",
            field,
        )
        self._pending.put(day, feed, PendingLine(secs, event_id, 0, line, FATE_CORRECTED, superseded))
        self._pending.put(
            again, feed, PendingLine(secs, event_id, 0, render_line(feed, corrected), fate, correcting)
        )
        return corrected

    def _plant_phantom(
        self,
        kind: FaultKind,
        variant: str | None,
        feed: str,
        secs: int,
        fields: Fields,
        target: int,
        rng: random.Random,
        generation_day: int,
    ) -> None:
        """Add an extra, invalid line (with a fresh id) next to a valid event's delivery."""
        phantom_id, _ = self._ids.next_id(feed, generation_day)
        base = with_field(fields, "event_id", phantom_id, True)
        field: str | None = None
        event_id: str | None = phantom_id
        if kind == FaultKind.MALFORMED_LINE:
            fate = FATE_MALFORMED
            line, detail = malformed_line(feed, base, rng)
        elif kind == FaultKind.WRONG_TYPE:
            fate = FATE_WRONG_TYPE
            line, field, detail = wrong_type_line(feed, base, variant, rng)
        elif kind == FaultKind.MISSING_ID:
            fate = FATE_MISSING_ID
            field = "event_id"
            event_id = None
            line, detail = missing_id_line(feed, base, rng)
        else:  # UNKNOWN_SCHEMA_VERSION
            fate = FATE_UNKNOWN_SCHEMA
            field = "schema_version"
            line, detail = unknown_schema_line(feed, base)
        fault = PlannedFault(kind, event_id, fate, detail, field)
        self._pending.put(
            target, feed, PendingLine(secs, phantom_id if event_id else "", 0, line, fate, fault)
        )
