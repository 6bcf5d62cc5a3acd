"""The quality suite of ``silver.events``, checked on the rows a Silver build is about to write.

Kept next to the code that produces the rows, with its value sets taken from the
workloads' vocabulary, so a new feed or lateness class reaches the suite without a second
edit. The generic machinery (checks, the GX runner, the gate) is :mod:`lakehouse.quality`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from lakehouse.quality import Suite, at_least, in_set, not_null, suites_by_table, unique
from workloads.vocabulary import FEEDS, Feed, Lateness, TableName

__all__ = ["CURRENCIES", "DOMAINS", "EVENTS_SUITE", "LATENESS", "SUITES"]

DOMAINS: Final[tuple[Feed, ...]] = FEEDS
"""``silver.events.domain`` is one of the feeds."""

LATENESS: Final[tuple[Lateness, ...]] = tuple(c for c in Lateness if c is not Lateness.HOLD)
"""Lateness classes stored in Silver (a held fact waits in ``ops.exceptions`` instead)."""

CURRENCIES: Final[tuple[str, ...]] = ("EUR", "GBP", "USD")
"""Currencies the reference domain trades in."""

ENTITY_REQUIRED: Final[tuple[Feed, ...]] = (Feed.ORDERS, Feed.LOGINS)
"""Domains whose events always carry a customer, so entity resolution must give them an
entity (refunds and outcomes may be attributed through their order in Gold instead)."""

EVENTS_SUITE: Final = Suite(
    table=TableName.SILVER_EVENTS,
    identity=("event_id",),
    checks=(
        not_null("event_id"),
        unique("event_id"),
        in_set("domain", DOMAINS),
        not_null("event_time"),
        at_least("amount", 0),
        in_set("lateness", LATENESS),
        in_set("currency", CURRENCIES),
        at_least("revision", 1),
        not_null("entity_id", only_when=("domain", ENTITY_REQUIRED)),
    ),
)

SUITES: Final[Mapping[str, Suite]] = suites_by_table([EVENTS_SUITE])
"""Silver's suites by logical table name."""
