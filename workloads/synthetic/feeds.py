"""What partners deliver: the field layout of each feed, event ids, and how a record
becomes one line of a delivery file.

A record is a tuple of ``(key, text, is_string)`` fields, rendered once into a JSON line or
a CSV row; faults are planted by replacing or dropping fields before rendering.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, TypeAlias

from workloads.synthetic.timeline import Calendar
from workloads.vocabulary import CSV_FEEDS, Feed

SCHEMAS: Final[Mapping[str, Mapping[str, tuple[str, ...]]]] = {
    Feed.ORDERS: {
        "1": (
            "schema_version",
            "event_id",
            "event_time",
            "email",
            "card_fingerprint",
            "device_id",
            "amount_cents",
            "currency",
            "merchant_id",
            "revision",
        ),
        "2": (
            "schema_version",
            "event_id",
            "event_time",
            "customer_email",
            "card_fingerprint",
            "device_id",
            "amount",
            "currency",
            "merchant_id",
            "revision",
        ),
    },
    Feed.REFUNDS: {
        "1": (
            "schema_version",
            "event_id",
            "event_time",
            "order_id",
            "customer_email",
            "amount",
            "currency",
            "revision",
        ),
    },
    Feed.LOGINS: {
        "1": (
            "schema_version",
            "event_id",
            "event_time",
            "customer_email",
            "device_id",
            "ip",
            "success",
            "revision",
        ),
    },
    Feed.SETTLEMENTS: {
        "1": (
            "schema_version",
            "event_id",
            "event_time",
            "order_id",
            "amount",
            "currency",
            "revision",
        ),
    },
    Feed.OUTCOMES: {
        "1": ("schema_version", "event_id", "event_time", "order_id", "label", "revision"),
    },
}
"""Field names, in the order they are written, per feed and known `schema_version`.

For CSV feeds this is also the header row. Types: `event_time` is ISO-8601 UTC with a `Z`
(seconds precision), `amount` is a number with two decimals, `amount_cents` and `revision`
are integers, `success` is a boolean, everything else is a string.
"""

EVENT_ID_PREFIX: Final[Mapping[str, str]] = {
    Feed.ORDERS: "ord",
    Feed.REFUNDS: "ref",
    Feed.LOGINS: "lgn",
    Feed.SETTLEMENTS: "stl",
    Feed.OUTCOMES: "out",
}
"""The prefix of each feed's event ids: ``<prefix>-<YYYYMMDD>-<sequence>``."""

_SEQUENCE_SPACE: Final[Mapping[str, str]] = {feed: "lgn" if feed is Feed.LOGINS else "ord" for feed in Feed}
"""Logins number their own ids; orders and their derived feeds share the order's number."""

Field: TypeAlias = tuple[str, str, bool]
"""One field of a record: key, rendered text, and whether it is written as a JSON string."""

Fields: TypeAlias = tuple[Field, ...]
"""One record, its fields in schema order."""


def render_line(feed: str, fields: Fields) -> str:
    """One line without its newline. Values never need escaping (generated, ASCII-safe)."""
    if feed in CSV_FEEDS:
        return ",".join(text for _, text, _ in fields)
    return (
        "{"
        + ",".join(f'"{key}":"{text}"' if is_str else f'"{key}":{text}' for key, text, is_str in fields)
        + "}"
    )


def field_of(fields: Fields, key: str) -> Field | None:
    """The field named ``key``, or None when the record has none."""
    for item in fields:
        if item[0] == key:
            return item
    return None


def text_of(fields: Fields, key: str) -> str:
    """The text of a field the record is known to have."""
    item = field_of(fields, key)
    if item is None:
        raise KeyError(f"record has no field {key!r}")
    return item[1]


def with_field(fields: Fields, key: str, text: str, is_str: bool) -> Fields:
    """The record with field ``key`` given a new text and string flag."""
    return tuple((k, text, is_str) if k == key else (k, t, s) for k, t, s in fields)


def without_field(fields: Fields, key: str) -> Fields:
    """The record with field ``key`` left out."""
    return tuple(item for item in fields if item[0] != key)


def amount_field(fields: Fields) -> str | None:
    """The name of the record's amount field (``amount`` or v1 ``amount_cents``), if any."""
    for key in ("amount", "amount_cents"):
        if field_of(fields, key) is not None:
            return key
    return None


def amount_cents_of(fields: Fields) -> int:
    """The record's amount in cents, whichever amount field it has."""
    for key, text, _ in fields:
        if key == "amount":
            units, cents = text.split(".")
            return int(units) * 100 + int(cents)
        if key == "amount_cents":
            return int(text)
    raise KeyError("record has no amount")


def cents_text(cents: int) -> str:
    """An amount in cents as the decimal text with two digits after the point."""
    return f"{cents // 100}.{cents % 100:02d}"


class EventIds:
    """Allocates event ids per feed and day; orders and their derived feeds share one
    sequence space (a settlement carries its order's number), logins have their own."""

    def __init__(self, calendar: Calendar) -> None:
        self._calendar = calendar
        self._sequence: dict[tuple[str, int], int] = {}

    def next_id(self, feed: str, day: int) -> tuple[str, int]:
        """A fresh id of ``feed`` for ``day`` and its sequence number."""
        space = _SEQUENCE_SPACE[feed]
        seq = self._sequence.get((space, day), 0)
        self._sequence[(space, day)] = seq + 1
        return f"{EVENT_ID_PREFIX[feed]}-{self._calendar.day_text(day).replace('-', '')}-{seq:06d}", seq
