"""Seeded, deterministic "commerce-risk" history written as raw partner delivery files.

What: a history of orders, refunds, logins, settlements and fraud outcomes for a population
of true persons, written the way partners deliver it (one folder per feed and delivery
date, JSON lines or CSV), with realistic faults planted on purpose, plus a ground-truth file
(`_ground_truth.json`) that says who every email variant really is and what the lakehouse
must do with every planted fault.

Why: the Bronze/Silver/Gold pipeline needs input whose correct answer is known in advance.
Every fault kind (duplicates, corrections, late and backdated facts, malformed or mistyped
lines, missing ids, unknown schema versions, a truncated file) occurs at least once for any
`entities >= 50` and `months >= 3`, so tests can check each behaviour on small data, and
the same code scales to 10M+ events because it streams: events are generated day by day,
parked until their delivery date, and written as soon as that date is reached.

Determinism: nothing reads the wall clock and all randomness comes from `random.Random`
instances seeded by `_sub_seed(settings.seed, ...)` (SHA-256 of the seed and a label), one
per person, per generated day and per delivery. The same settings and policy therefore give
byte-identical files.

The generator only needs the standard library; PyYAML is imported lazily by
`load_lateness_policy` alone.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, date, datetime, timedelta
from itertools import accumulate
from pathlib import Path
from typing import Final, TypeAlias, cast

from workloads.silver.lateness import DEFAULT_POLICY_PATH, LatenessRule, check_policy, load_lateness_policy
from workloads.vocabulary import CSV_FEEDS, FEEDS

__all__ = [
    "CSV_FEEDS",
    "DEFAULT_POLICY_PATH",
    "FATES",
    "FAULT_KINDS",
    "FEEDS",
    "SCHEMAS",
    "Fault",
    "GenerationSummary",
    "GeneratorSettings",
    "LatenessRule",
    "expected_fate",
    "generate",
    "load_lateness_policy",
    "main",
]

# --------------------------------------------------------------------------------------
# Public constants: feeds, schemas, fault kinds and fates
# --------------------------------------------------------------------------------------

SCHEMAS: Final[Mapping[str, Mapping[str, tuple[str, ...]]]] = {
    "orders": {
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
    "refunds": {
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
    "logins": {
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
    "settlements": {
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
    "outcomes": {
        "1": ("schema_version", "event_id", "event_time", "order_id", "label", "revision"),
    },
}
"""Field names, in the order they are written, per feed and known `schema_version`.

For CSV feeds this is also the header row. Types: `event_time` is ISO-8601 UTC with a `Z`
(seconds precision), `amount` is a number with two decimals, `amount_cents` and `revision`
are integers, `success` is a boolean, everything else is a string.
"""

EXACT_DUPLICATE: Final = "exact_duplicate"
RESENT_CORRECTION: Final = "resent_correction"
LATE_EVENT: Final = "late_event"
BACKDATED_CLOSED_PERIOD: Final = "backdated_closed_period"
MALFORMED_LINE: Final = "malformed_line"
WRONG_TYPE: Final = "wrong_type"
MISSING_ID: Final = "missing_id"
UNKNOWN_SCHEMA_VERSION: Final = "unknown_schema_version"
TRUNCATED_FILE: Final = "truncated_file"

FAULT_KINDS: Final[tuple[str, ...]] = (
    EXACT_DUPLICATE,
    RESENT_CORRECTION,
    LATE_EVENT,
    BACKDATED_CLOSED_PERIOD,
    MALFORMED_LINE,
    WRONG_TYPE,
    MISSING_ID,
    UNKNOWN_SCHEMA_VERSION,
    TRUNCATED_FILE,
)
"""Every fault kind the generator plants (each at least once for entities>=50, months>=3)."""

FATE_SILVER: Final = "silver"
FATE_DUPLICATE: Final = "duplicate"
FATE_CORRECTED: Final = "corrected"
FATE_REOPEN: Final = "silver:reopen"
FATE_ADJUSTMENT: Final = "silver:adjustment"
FATE_EXCEPTIONS: Final = "exceptions"
FATE_MALFORMED: Final = "quarantine:malformed"
FATE_WRONG_TYPE: Final = "quarantine:wrong_type"
FATE_MISSING_ID: Final = "quarantine:missing_event_id"
FATE_UNKNOWN_SCHEMA: Final = "quarantine:unknown_schema_version"

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

_ACTION_FATE: Final[Mapping[str, str]] = {
    "reopen": FATE_REOPEN,
    "adjust": FATE_ADJUSTMENT,
    "hold": FATE_EXCEPTIONS,
}

GROUND_TRUTH_FILE: Final = "_ground_truth.json"

_DAY: Final = 86_400
_EPOCH_ORDINAL: Final = date(1970, 1, 1).toordinal()

# --------------------------------------------------------------------------------------
# Settings, policy and results
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GeneratorSettings:
    """Size and seed of a generated history.

    `fault_rate` is the probability that any one event (and any one delivered file, for
    truncation) carries a random fault. Independently of it, a fixed plan plants each fault
    kind in the first weeks, so every kind occurs even when the random draw finds none.
    """

    entities: int = 200
    months: int = 6
    seed: int = 7
    start: date = date(2025, 1, 1)
    ring_count: int = 3
    fault_rate: float = 0.002

    def __post_init__(self) -> None:
        """Reject settings that cannot produce a meaningful history."""
        if self.entities < 1:
            raise ValueError(f"entities must be >= 1, got {self.entities}")
        if self.months < 1:
            raise ValueError(f"months must be >= 1, got {self.months}")
        if self.ring_count < 0:
            raise ValueError(f"ring_count must be >= 0, got {self.ring_count}")
        if not 0.0 <= self.fault_rate < 0.5:
            raise ValueError(f"fault_rate must be in [0, 0.5), got {self.fault_rate}")

    def to_json(self) -> dict[str, object]:
        """Plain JSON form (the start date as an ISO string), as stored in the ground truth."""
        data: dict[str, object] = asdict(self)
        data["start"] = self.start.isoformat()
        return data


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
class GenerationSummary:
    """What `generate` wrote: per-feed line, file and fate counts, and faults per kind.

    `total_events` counts data lines (faulty ones included, CSV headers excluded).
    `faults_per_kind` counts ground-truth fault entries; a resent correction contributes two
    (the superseded line and the correcting line).
    """

    out_dir: Path
    ground_truth: Path
    files_written: int
    total_events: int
    lines_per_feed: Mapping[str, int]
    files_per_feed: Mapping[str, int]
    fates_per_feed: Mapping[str, Mapping[str, int]]
    faults_per_kind: Mapping[str, int]
    persons: int
    rings: int
    first_delivery: date
    last_delivery: date

    def describe(self) -> str:
        """Human-readable multi-line rendering, as printed by the command line."""
        lines = [
            f"out dir        : {self.out_dir}",
            f"ground truth   : {self.ground_truth}",
            f"persons / rings: {self.persons} / {self.rings}",
            f"deliveries     : {self.first_delivery} .. {self.last_delivery}",
            f"files written  : {self.files_written}",
            f"total events   : {self.total_events}",
        ]
        for feed in FEEDS:
            fates = ", ".join(f"{k}={v}" for k, v in sorted(self.fates_per_feed[feed].items()))
            lines.append(
                f"  {feed:<12} lines={self.lines_per_feed[feed]:<9} "
                f"files={self.files_per_feed[feed]:<5} {fates}"
            )
        lines.append("faults:")
        lines.extend(f"  {kind:<24} {n}" for kind, n in self.faults_per_kind.items())
        return "\n".join(lines)


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
    first_next = _first_of_next_month(event_utc.date())
    closes = datetime(first_next.year, first_next.month, first_next.day, tzinfo=UTC)
    if ingest > closes + timedelta(days=rule.period_close_grace_days):
        return _ACTION_FATE[rule.closed_period_action]
    return FATE_SILVER


# --------------------------------------------------------------------------------------
# Small pure helpers
# --------------------------------------------------------------------------------------


def _sub_seed(seed: int, *parts: object) -> int:
    """A 64-bit seed derived from the master seed and a label; stable across processes."""
    text = "|".join([str(seed), *(str(p) for p in parts)])
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def _first_of_next_month(day: date) -> date:
    return date(day.year + 1, 1, 1) if day.month == 12 else date(day.year, day.month + 1, 1)


def _add_months(day: date, months: int) -> date:
    index = day.year * 12 + (day.month - 1) + months
    year, month0 = divmod(index, 12)
    return date(year, month0 + 1, 1) if day.day == 1 else date(year, month0 + 1, min(day.day, 28))


def _day_number(day: date) -> int:
    """Days since 1970-01-01 (the generator's internal calendar)."""
    return day.toordinal() - _EPOCH_ORDINAL


def _date_of(day_number: int) -> date:
    return date.fromordinal(day_number + _EPOCH_ORDINAL)


def _scramble32(index: int, mask: int) -> int:
    """A bijection of 32-bit integers: distinct indices always give distinct outputs.

    XOR with a seed mask, then MurmurHash3's fmix32 (every step is invertible), so
    fingerprints look random yet can never collide between persons or rings.
    """
    h = (index ^ mask) & 0xFFFFFFFF
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    return h ^ (h >> 16)


def _cents_text(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"


# --------------------------------------------------------------------------------------
# Persons, email variants and fraud rings
# --------------------------------------------------------------------------------------

_FIRST_NAMES: Final = (
    "alice",
    "bruno",
    "chloe",
    "david",
    "elena",
    "farid",
    "greta",
    "hugo",
    "ines",
    "jonas",
    "karin",
    "liam",
    "maria",
    "nadia",
    "oscar",
    "paula",
    "quentin",
    "rosa",
    "samir",
    "tessa",
    "umar",
    "vera",
    "willem",
    "xenia",
    "yusuf",
    "zoe",
    "anton",
    "bianca",
    "carlos",
    "daria",
)
_LAST_NAMES: Final = (
    "smith",
    "muller",
    "rossi",
    "garcia",
    "novak",
    "jansen",
    "dubois",
    "kowalski",
    "silva",
    "berg",
    "costa",
    "fischer",
    "moreau",
    "nielsen",
    "ortiz",
    "petrov",
    "quinn",
    "romero",
    "schmidt",
    "tanaka",
    "vogel",
    "weber",
    "young",
    "zimmer",
    "baker",
    "clark",
    "evans",
)
_DOMAINS: Final = (
    "outlook.com",
    "yahoo.com",
    "proton.me",
    "web.de",
    "icloud.com",
    "mail.com",
    "gmx.net",
)
_PLUS_TAGS: Final = ("shop", "news", "promo", "orders", "deals", "x")
_CURRENCIES: Final = ("EUR", "GBP", "USD")
_IP_FIRST_OCTETS: Final = (31, 46, 62, 77, 81, 86, 88, 92, 109, 151, 176, 188, 212, 217)
_MERCHANTS: Final = 400


@dataclass(frozen=True, slots=True)
class _Person:
    """One true person's profile, kept in memory for the whole run (small per entity)."""

    person_id: str
    emails: tuple[str, ...]
    own_cards: tuple[str, ...]
    own_devices: tuple[str, ...]
    ring: str | None
    ring_cards: tuple[str, ...]
    ring_devices: tuple[str, ...]
    ring_ip_prefix: str
    ring_merchants: tuple[str, ...]
    home_currency: str
    ip_prefix: str
    activity: float


@dataclass(frozen=True)
class _Ring:
    ring_id: str
    members: tuple[int, ...]
    cards: tuple[str, ...]
    devices: tuple[str, ...]
    ip_prefix: str
    merchants: tuple[str, ...]


def _insert_dot(local: str, rng: random.Random) -> str:
    """Insert a dot between two letters of a gmail local part (gmail ignores dots)."""
    spots = [i for i in range(1, len(local)) if local[i - 1].isalpha() and local[i].isalpha()]
    if not spots:
        return local
    i = rng.choice(spots)
    return f"{local[:i]}.{local[i:]}"


def _case_variant(email: str, rng: random.Random) -> str:
    """Capitalise name parts and/or the domain: same mailbox, different bytes."""
    local, domain = email.split("@")
    parts = [p.capitalize() for p in local.split(".")]
    if rng.random() < 0.5:
        domain = domain.capitalize()
    elif rng.random() < 0.3:
        domain = domain.upper()
    return f"{'.'.join(parts)}@{domain}"


def _email_variants(
    first: str, last: str, number: int, rng: random.Random, *, force_rich: bool
) -> tuple[str, ...]:
    """1-3 noisy spellings of one person's mailbox.

    The numeric suffix is unique per person (a bijection of the person index), and names
    hold no digits, so no two persons' variants can collide, not even after gmail dot or
    plus-tag removal: any correct normalisation maps each variant to exactly one person.
    """
    gmail = force_rich or rng.random() < 0.5
    style = rng.randrange(4)
    if style == 0:
        local = f"{first}.{last}{number}"
    elif style == 1:
        local = f"{first}{last}{number}"
    elif style == 2:
        local = f"{first[0]}{last}{number}"
    else:
        local = f"{first}_{last}{number}"
    domain = "gmail.com" if gmail else rng.choice(_DOMAINS)
    base = f"{local}@{domain}"

    count = 3 if force_rich else rng.choices((1, 2, 3), weights=(4, 4, 2))[0]
    kinds: list[str] = ["dots", "plus", "case"] if force_rich else []
    while len(kinds) < count - 1:
        options = ["case", "plus", "space"] + (["dots", "dots"] if gmail else [])
        kinds.append(rng.choice(options))

    variants: list[str] = [base]
    for kind in kinds[: count - 1]:
        if kind == "dots":
            candidate = _insert_dot(local.replace(".", "") if rng.random() < 0.5 else local, rng)
            candidate = f"{candidate}@{domain}"
        elif kind == "plus":
            candidate = f"{local}+{rng.choice(_PLUS_TAGS)}@{domain}"
        elif kind == "case":
            candidate = _case_variant(base, rng)
        else:
            candidate = base
        if rng.random() < 0.25 or kind == "space":
            pad = rng.choice((" ", "  "))
            candidate = rng.choice((f"{pad}{candidate}", f"{candidate}{pad}", f" {candidate} "))
        if candidate not in variants:
            variants.append(candidate)
    if force_rich:
        # Keep the guaranteed person's variants distinguishable for v1 vs v2 on purpose.
        assert len({v.strip().lower() for v in variants}) >= 2
    return tuple(variants)


def _build_population(
    settings: GeneratorSettings,
) -> tuple[list[_Person], list[_Ring]]:
    """All persons and fraud rings; deterministic per person so it could be sharded."""
    n = settings.entities
    seed = settings.seed
    card_mask = _sub_seed(seed, "card-mask") & 0xFFFFFFFF
    device_mask = _sub_seed(seed, "device-mask") & 0xFFFFFFFF
    modulus = 10 ** max(3, len(str(n)))
    offset = _sub_seed(seed, "email-number") % modulus

    # Rings first, so their shared assets can be attached to the members' profiles.
    ring_rng = random.Random(_sub_seed(seed, "rings"))
    sizes = [ring_rng.randint(3, 6) for _ in range(settings.ring_count)]
    pool = list(range(1, n)) if n > 1 else []
    while sizes and sum(sizes) > len(pool):
        sizes.pop()
    chosen = ring_rng.sample(pool, sum(sizes)) if sizes else []
    rings: list[_Ring] = []
    member_ring: dict[int, int] = {}
    cursor = 0
    for r, size in enumerate(sizes):
        members = tuple(sorted(chosen[cursor : cursor + size]))
        cursor += size
        base = 0xF0000000 + r * 8
        ring_cards = tuple(
            f"cf_{_scramble32(base + j, card_mask):08x}" for j in range(ring_rng.randint(1, 2))
        )
        ring_devices = tuple(f"dev_{_scramble32(base + j, device_mask):08x}" for j in range(2))
        ip_prefix = f"185.{ring_rng.randrange(16, 250)}.{ring_rng.randrange(256)}"
        merchants = tuple(f"m_{ring_rng.randrange(_MERCHANTS):04d}" for _ in range(3))
        rings.append(_Ring(f"R{r + 1:03d}", members, ring_cards, ring_devices, ip_prefix, merchants))
        for member in members:
            member_ring[member] = r

    persons: list[_Person] = []
    for i in range(n):
        rng = random.Random(_sub_seed(seed, "person", i))
        first = rng.choice(_FIRST_NAMES)
        last = rng.choice(_LAST_NAMES)
        number = (i * 7919 + offset) % modulus  # bijective on range(modulus): 7919 is prime
        emails = _email_variants(first, last, number, rng, force_rich=(i == 0))
        cards = tuple(f"cf_{_scramble32(i * 4 + j, card_mask):08x}" for j in range(rng.randint(1, 2)))
        devices = tuple(f"dev_{_scramble32(i * 4 + j, device_mask):08x}" for j in range(rng.randint(1, 3)))
        currency = rng.choices(_CURRENCIES, weights=(6, 2, 2))[0]
        ip_prefix = f"{rng.choice(_IP_FIRST_OCTETS)}.{rng.randrange(256)}.{rng.randrange(256)}"
        activity = rng.lognormvariate(0.0, 0.6)
        ring_index = member_ring.get(i)
        ring = rings[ring_index] if ring_index is not None else None
        persons.append(
            _Person(
                person_id=f"P{i + 1:06d}",
                emails=emails,
                own_cards=cards,
                own_devices=devices,
                ring=ring.ring_id if ring else None,
                ring_cards=ring.cards if ring else (),
                ring_devices=ring.devices if ring else (),
                ring_ip_prefix=ring.ip_prefix if ring else "",
                ring_merchants=ring.merchants if ring else (),
                home_currency=currency,
                ip_prefix=ip_prefix,
                activity=activity * (1.5 if ring else 1.0),
            )
        )
    _add_households(persons, member_ring, seed, device_mask)
    return persons, rings


def _add_households(persons: list[_Person], member_ring: dict[int, int], seed: int, device_mask: int) -> None:
    """Pairs of persons outside any ring who share one household device (a family tablet).

    They share no card, so entity resolution never merges them: their correlation
    survives a change of resolver and is *restated* (superseded) rather than retracted.
    One household per 25 persons.
    """
    rng = random.Random(_sub_seed(seed, "households"))
    singles = [i for i in range(len(persons)) if i not in member_ring]
    rng.shuffle(singles)
    for h in range(min(len(persons) // 25, len(singles) // 2)):
        shared = f"dev_{_scramble32(0xE0000000 + h, device_mask):08x}"
        for index in (singles[2 * h], singles[2 * h + 1]):
            person = persons[index]
            persons[index] = replace(person, own_devices=(*person.own_devices, shared))


# --------------------------------------------------------------------------------------
# Records: a record is a tuple of (key, text, is_string) fields, rendered once
# --------------------------------------------------------------------------------------

_FieldT: TypeAlias = tuple[str, str, bool]
_Fields: TypeAlias = tuple[_FieldT, ...]


def _render(feed: str, fields: _Fields) -> str:
    """One line without its newline. Values never need escaping (generated, ASCII-safe)."""
    if feed in CSV_FEEDS:
        return ",".join(text for _, text, _ in fields)
    return (
        "{"
        + ",".join(f'"{key}":"{text}"' if is_str else f'"{key}":{text}' for key, text, is_str in fields)
        + "}"
    )


def _get(fields: _Fields, key: str) -> _FieldT | None:
    for item in fields:
        if item[0] == key:
            return item
    return None


def _replace(fields: _Fields, key: str, text: str, is_str: bool) -> _Fields:
    return tuple((k, text, is_str) if k == key else (k, t, s) for k, t, s in fields)


def _drop(fields: _Fields, key: str) -> _Fields:
    return tuple(item for item in fields if item[0] != key)


def _amount_field(fields: _Fields) -> str | None:
    for key in ("amount", "amount_cents"):
        if _get(fields, key) is not None:
            return key
    return None


def _amount_cents_of(fields: _Fields) -> int:
    for key, text, _ in fields:
        if key == "amount":
            units, cents = text.split(".")
            return int(units) * 100 + int(cents)
        if key == "amount_cents":
            return int(text)
    raise KeyError("record has no amount")


# --------------------------------------------------------------------------------------
# The streaming engine
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _PlannedFault:
    """A fault attached to a pending line; file and line are known only when written."""

    kind: str
    event_id: str | None
    expected_fate: str
    detail: str
    field: str | None = None


# A pending line: (event seconds, event id, copy index, text, fate, fault or None).
_Entry: TypeAlias = tuple[int, str, int, str, str, _PlannedFault | None]

_ID_PREFIX: Final[Mapping[str, str]] = {
    "orders": "ord",
    "refunds": "ref",
    "logins": "lgn",
    "settlements": "stl",
    "outcomes": "out",
}
_RANDOM_KINDS: Final[Mapping[str, tuple[str, ...]]] = {
    feed: tuple(
        k
        for k in FAULT_KINDS
        if k != TRUNCATED_FILE and not (feed == "outcomes" and k in (LATE_EVENT, BACKDATED_CLOSED_PERIOD))
    )
    for feed in FEEDS
}
# The fixed plan: (kind, feed, variant). Planted on the first eligible event of the feed on
# or after start + 1 + (position % 10) days, so all kinds exist even for tiny histories.
_FORCED_PLAN: Final[tuple[tuple[str, str, str | None], ...]] = (
    (EXACT_DUPLICATE, "orders", "same_file"),
    (EXACT_DUPLICATE, "logins", "later_delivery"),
    (EXACT_DUPLICATE, "settlements", "later_delivery"),
    (RESENT_CORRECTION, "orders", None),
    (RESENT_CORRECTION, "settlements", None),
    (RESENT_CORRECTION, "outcomes", None),
    (LATE_EVENT, "orders", None),
    (LATE_EVENT, "logins", None),
    (BACKDATED_CLOSED_PERIOD, "orders", None),
    (BACKDATED_CLOSED_PERIOD, "refunds", None),
    (BACKDATED_CLOSED_PERIOD, "settlements", None),
    (BACKDATED_CLOSED_PERIOD, "logins", None),
    (MALFORMED_LINE, "orders", None),
    (MALFORMED_LINE, "settlements", None),
    (WRONG_TYPE, "orders", "amount"),
    (WRONG_TYPE, "logins", "event_time"),
    (WRONG_TYPE, "settlements", "amount"),
    (MISSING_ID, "logins", None),
    (MISSING_ID, "settlements", None),
    (UNKNOWN_SCHEMA_VERSION, "orders", None),
    (UNKNOWN_SCHEMA_VERSION, "refunds", None),
)
_FORCED_TRUNCATIONS: Final[Mapping[str, int]] = {"orders": 3, "settlements": 5}
_WEEKDAY_FACTOR: Final = (0.95, 0.97, 1.0, 1.0, 1.05, 1.15, 1.1)
_ORDERS_PER_ACTIVITY_DAY: Final = 0.125
_LOGINS_PER_ACTIVITY_DAY: Final = 0.3


class _Engine:
    """Holds the per-run state: profiles, parked deliveries, id counters, faults, counts.

    Per-day state is bounded by the delivery horizon: a settlement waits at most 3 days,
    a refund 20, an outcome 90, a rare backdated fact a few weeks past its period close.
    """

    def __init__(
        self,
        out_dir: Path,
        settings: GeneratorSettings,
        policy: Mapping[str, LatenessRule],
        progress: Callable[[str], None] | None,
    ) -> None:
        self.out_dir = out_dir
        self.settings = settings
        self.policy = policy
        self.progress = progress
        self.persons, self.rings = _build_population(settings)
        self.cum_weights = list(accumulate(p.activity for p in self.persons))
        self.total_activity = self.cum_weights[-1]
        self.first_day = _day_number(settings.start)
        self.end_day = _day_number(_add_months(settings.start, settings.months))
        self.pending: dict[int, dict[str, list[_Entry]]] = {}
        self.sequence: dict[tuple[str, int], int] = {}
        self.forced: dict[str, list[tuple[str, int, str | None]]] = {f: [] for f in FEEDS}
        for position, (kind, feed, variant) in enumerate(_FORCED_PLAN):
            self.forced[feed].append((kind, self.first_day + 1 + position % 10, variant))
        self.forced_truncations = {
            feed: self.first_day + offset for feed, offset in _FORCED_TRUNCATIONS.items()
        }
        self.faults: list[Fault] = []
        self.lines: dict[str, int] = dict.fromkeys(FEEDS, 0)
        self.files: dict[str, int] = dict.fromkeys(FEEDS, 0)
        self.fates: dict[str, dict[str, int]] = {feed: {} for feed in FEEDS}
        self.first_delivery: int | None = None
        self.last_delivery: int | None = None
        self._day_text: dict[int, str] = {}
        self._close_day: dict[int, int] = {}
        self.gen_day = self.first_day

    # ---- calendar helpers -------------------------------------------------------------

    def day_text(self, day: int) -> str:
        text = self._day_text.get(day)
        if text is None:
            text = _date_of(day).isoformat()
            self._day_text[day] = text
        return text

    def iso(self, secs: int) -> str:
        day, tod = divmod(secs, _DAY)
        hours, rest = divmod(tod, 3600)
        minutes, seconds = divmod(rest, 60)
        return f"{self.day_text(day)}T{hours:02d}:{minutes:02d}:{seconds:02d}Z"

    def next_month_day(self, day: int) -> int:
        """Day number of the first day of the month after `day` (the period end)."""
        result = self._close_day.get(day)
        if result is None:
            result = _day_number(_first_of_next_month(_date_of(day)))
            self._close_day[day] = result
        return result

    def fate(self, feed: str, secs: int, delivery_day: int) -> str:
        """Expected fate of a valid, unique line (integer twin of `expected_fate`)."""
        rule = self.policy[feed]
        if delivery_day * _DAY - secs <= rule.allowed_lateness_days * _DAY:
            return FATE_SILVER
        if delivery_day > self.next_month_day(secs // _DAY) + rule.period_close_grace_days:
            return _ACTION_FATE[rule.closed_period_action]
        return FATE_SILVER

    def next_id(self, feed: str, day: int) -> tuple[str, int]:
        """Allocate a sequence number; orders and their derived feeds share one space."""
        space = "lgn" if feed == "logins" else "ord"
        seq = self.sequence.get((space, day), 0)
        self.sequence[(space, day)] = seq + 1
        return f"{_ID_PREFIX[feed]}-{self.day_text(day).replace('-', '')}-{seq:06d}", seq

    # ---- scheduling -----------------------------------------------------------------------

    def put(self, day: int, feed: str, entry: _Entry) -> None:
        by_feed = self.pending.get(day)
        if by_feed is None:
            by_feed = self.pending[day] = {}
        bucket = by_feed.get(feed)
        if bucket is None:
            by_feed[feed] = [entry]
        else:
            bucket.append(entry)

    def pick_fault(self, feed: str, secs: int, rng: random.Random) -> tuple[str | None, str | None]:
        """The fault (if any) for the next event of `feed`: planned first, then random."""
        day = secs // _DAY
        plan = self.forced[feed]
        if plan:
            for index, (kind, earliest, variant) in enumerate(plan):
                if earliest <= day and self.eligible(kind, feed, secs):
                    del plan[index]
                    return kind, variant
        if rng.random() < self.settings.fault_rate:
            kind = rng.choice(_RANDOM_KINDS[feed])
            if self.eligible(kind, feed, secs):
                return kind, None
        return None, None

    def eligible(self, kind: str, feed: str, secs: int) -> bool:
        if kind != LATE_EVENT:
            return True
        rule = self.policy[feed]
        day = secs // _DAY
        return day + rule.allowed_lateness_days + 1 <= self.next_month_day(day) + rule.period_close_grace_days

    def deliver(
        self,
        feed: str,
        secs: int,
        event_id: str,
        fields: _Fields,
        rng: random.Random,
    ) -> _Fields:
        """Park one real event for delivery, planting a fault on it when one is due.

        Returns the fields of the event's latest revision (a correction may change them),
        so derived events (settlements, refunds) can follow the corrected amount.
        """
        kind, variant = self.pick_fault(feed, secs, rng)
        day = secs // _DAY
        line = _render(feed, fields)
        if kind is None or kind in (MALFORMED_LINE, WRONG_TYPE, MISSING_ID, UNKNOWN_SCHEMA_VERSION):
            target = day if rng.random() < 0.8 else day + 1
            self.put(target, feed, (secs, event_id, 0, line, self.normal_fate(feed, secs, target), None))
            if kind is not None:
                self.plant_phantom(kind, variant, feed, secs, fields, target, rng)
            return fields
        if kind == EXACT_DUPLICATE:
            self.plant_duplicate(variant, feed, secs, event_id, line, rng)
            return fields
        if kind == RESENT_CORRECTION:
            return self.plant_correction(feed, secs, event_id, fields, line, rng)
        rule = self.policy[feed]
        close = self.next_month_day(day) + rule.period_close_grace_days
        period = self.day_text(day)[:7]
        if kind == LATE_EVENT:
            target = rng.randint(day + rule.allowed_lateness_days + 1, close)
            fate = self.fate(feed, secs, target)
            if fate != FATE_SILVER:  # pragma: no cover - guarded by `eligible`
                raise AssertionError(f"late event planned into a closed period: {event_id}")
            detail = (
                f"delivered {self.day_text(target)}, {target - day} days after its event day "
                f"(allowed {rule.allowed_lateness_days}); period {period} closes after "
                f"{self.day_text(close)}, still open"
            )
        else:  # BACKDATED_CLOSED_PERIOD
            target = max(day + rule.allowed_lateness_days + 1, close + 1) + rng.randrange(21)
            fate = self.fate(feed, secs, target)
            if fate != _ACTION_FATE[rule.closed_period_action]:  # pragma: no cover
                raise AssertionError(f"backdated event not in a closed period: {event_id}")
            detail = (
                f"delivered {self.day_text(target)} for period {period}, which closed after "
                f"{self.day_text(close)}; closed_period_action={rule.closed_period_action}"
            )
        fault = _PlannedFault(kind, event_id, fate, detail)
        self.put(target, feed, (secs, event_id, 0, line, fate, fault))
        return fields

    def normal_fate(self, feed: str, secs: int, target: int) -> str:
        fate = self.fate(feed, secs, target)
        if fate != FATE_SILVER:
            raise ValueError(
                f"policy for {feed} makes a next-day delivery non-silver ({fate}); "
                "allowed_lateness_days and period_close_grace_days must allow it"
            )
        return fate

    def plant_duplicate(
        self,
        variant: str | None,
        feed: str,
        secs: int,
        event_id: str,
        line: str,
        rng: random.Random,
    ) -> None:
        day = secs // _DAY
        if variant is None:
            variant = "same_file" if rng.random() < 0.5 else "later_delivery"
        first = day if variant == "later_delivery" or rng.random() < 0.8 else day + 1
        self.put(first, feed, (secs, event_id, 0, line, self.normal_fate(feed, secs, first), None))
        if variant == "same_file":
            again = first
            detail = "identical copy of the line right before it in the same file"
        else:
            again = first + 1
            detail = f"identical re-delivery of the line first delivered in {feed}/{self.day_text(first)}"
        fault = _PlannedFault(EXACT_DUPLICATE, event_id, FATE_DUPLICATE, detail)
        self.put(again, feed, (secs, event_id, 1, line, FATE_DUPLICATE, fault))

    def plant_correction(
        self,
        feed: str,
        secs: int,
        event_id: str,
        fields: _Fields,
        line: str,
        rng: random.Random,
    ) -> _Fields:
        day = secs // _DAY
        rule = self.policy[feed]
        close = self.next_month_day(day) + rule.period_close_grace_days
        # Partners resend corrections within days, not months: at most 5 days later, on time
        # and inside the open period, so the correction itself is an ordinary silver fact.
        span = max(1, min(rule.allowed_lateness_days, close - day, 5))
        again = day + rng.randint(1, span)
        corrected, field, old, new = self.corrected(feed, fields, rng)
        fate = self.fate(feed, secs, again)
        if fate != FATE_SILVER:  # pragma: no cover - span keeps it inside the open period
            raise AssertionError(f"correction planned into a closed period: {event_id}")
        self.put(
            day,
            feed,
            (
                secs,
                event_id,
                0,
                line,
                FATE_CORRECTED,
                _PlannedFault(
                    RESENT_CORRECTION,
                    event_id,
                    FATE_CORRECTED,
                    f"revision 1, superseded by revision 2 delivered in {feed}/{self.day_text(again)}"
                    f" ({field}: {old} -> {new})",
                    field,
                ),
            ),
        )
        self.put(
            again,
            feed,
            (
                secs,
                event_id,
                0,
                _render(feed, corrected),
                fate,
                _PlannedFault(
                    RESENT_CORRECTION,
                    event_id,
                    fate,
                    f"revision 2 supersedes revision 1 delivered in {feed}/{self.day_text(day)}"
                    f" ({field}: {old} -> {new})",
                    field,
                ),
            ),
        )
        return corrected

    @staticmethod
    def corrected(feed: str, fields: _Fields, rng: random.Random) -> tuple[_Fields, str, str, str]:
        """Revision 2 of a record: revision bumped and one business field changed."""
        fields = _replace(fields, "revision", "2", False)
        if feed == "logins":
            old = cast(_FieldT, _get(fields, "success"))[1]
            new = "false" if old == "true" else "true"
            return _replace(fields, "success", new, False), "success", old, new
        if feed == "outcomes":
            old = cast(_FieldT, _get(fields, "label"))[1]
            new = "chargeback" if old == "fraud" else "fraud"
            return _replace(fields, "label", new, True), "label", old, new
        key = cast(str, _amount_field(fields))
        cents = _amount_cents_of(fields)
        delta = max(1, cents * rng.randint(3, 15) // 100)
        new_cents = cents - delta if cents - delta >= 50 else cents + delta
        old_text = cast(_FieldT, _get(fields, key))[1]
        new_text = str(new_cents) if key == "amount_cents" else _cents_text(new_cents)
        return _replace(fields, key, new_text, False), key, old_text, new_text

    def plant_phantom(
        self,
        kind: str,
        variant: str | None,
        feed: str,
        secs: int,
        fields: _Fields,
        target: int,
        rng: random.Random,
    ) -> None:
        """Add an extra, invalid line (with a fresh id) next to a valid event's delivery.

        Quarantined lines never stand for a real event: the valid history stays complete
        and referentially intact, and every quarantined line is pure noise.
        """
        phantom_id, _ = self.next_id(feed, self.gen_day)
        base = _replace(fields, "event_id", phantom_id, True)
        field: str | None = None
        event_id: str | None = phantom_id
        if kind == MALFORMED_LINE:
            fate = FATE_MALFORMED
            line, detail = self.malformed(feed, base, rng)
        elif kind == WRONG_TYPE:
            fate = FATE_WRONG_TYPE
            options = ["event_time", _amount_field(base) or "revision"]
            if feed == "logins":
                options.append("success")
            if variant == "amount":
                variant = _amount_field(base) or "event_time"
            field = variant if variant in options else rng.choice(options)
            bad = {
                "event_time": "yesterday",
                "amount": "twelve",
                "amount_cents": "twelve hundred",
                "success": "yes",
                "revision": "first",
            }[field]
            line = _render(feed, _replace(base, field, bad, True))
            expected = {
                "event_time": "an ISO-8601 UTC timestamp",
                "amount": "a decimal number",
                "amount_cents": "an integer",
                "success": "a boolean",
                "revision": "an integer",
            }[field]
            detail = f"field {field} is {bad!r}, expected {expected}"
        elif kind == MISSING_ID:
            fate = FATE_MISSING_ID
            field = "event_id"
            event_id = None
            if feed in CSV_FEEDS or rng.random() < 0.5:
                line = _render(feed, _replace(base, "event_id", "", True))
                detail = "event_id is empty"
            else:
                line = _render(feed, _drop(base, "event_id"))
                detail = "event_id is absent"
        else:  # UNKNOWN_SCHEMA_VERSION
            fate = FATE_UNKNOWN_SCHEMA
            field = "schema_version"
            line = _render(feed, _replace(base, "schema_version", "9", True))
            detail = "schema_version '9' is not a known version of this feed"
        fault = _PlannedFault(kind, event_id, fate, detail, field)
        self.put(target, feed, (secs, phantom_id if event_id else "", 0, line, fate, fault))

    @staticmethod
    def malformed(feed: str, fields: _Fields, rng: random.Random) -> tuple[str, str]:
        line = _render(feed, fields)
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

    # ---- generation -----------------------------------------------------------------------

    def run(self) -> None:
        """Generate every event day, delivering each day as soon as it is complete."""
        for day in range(self.first_day, self.end_day):
            if self.progress is not None and (day == self.first_day or _date_of(day).day == 1):
                self.progress(f"generating {self.day_text(day)[:7]}")
            self.gen_day = day
            rng = random.Random(_sub_seed(self.settings.seed, "day", day))
            self.generate_logins(day, rng)
            self.generate_orders(day, rng)
            self.flush(day)
        self.gen_day = self.end_day
        while self.pending:
            day = min(self.pending)
            self.gen_day = day
            self.flush(day)

    def daily_count(self, day: int, per_activity: float, rng: random.Random) -> int:
        mean = self.total_activity * per_activity * _WEEKDAY_FACTOR[_date_of(day).weekday()]
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))

    def generate_logins(self, day: int, rng: random.Random) -> None:
        count = self.daily_count(day, _LOGINS_PER_ACTIVITY_DAY, rng)
        who = rng.choices(self.persons, cum_weights=self.cum_weights, k=count)
        base = day * _DAY
        for person in who:
            secs = base + min(_DAY - 1, int(rng.triangular(0, _DAY, 0.8 * _DAY)))
            event_id, _ = self.next_id("logins", day)
            in_ring = person.ring is not None and rng.random() < 0.35
            device = rng.choice(person.ring_devices if in_ring else person.own_devices)
            prefix = person.ring_ip_prefix if in_ring else person.ip_prefix
            success = rng.random() < (0.8 if person.ring else 0.94)
            fields: _Fields = (
                ("schema_version", "1", True),
                ("event_id", event_id, True),
                ("event_time", self.iso(secs), True),
                ("customer_email", rng.choice(person.emails), True),
                ("device_id", device, True),
                ("ip", f"{prefix}.{rng.randrange(1, 255)}", True),
                ("success", "true" if success else "false", False),
                ("revision", "1", False),
            )
            self.deliver("logins", secs, event_id, fields, rng)

    def generate_orders(self, day: int, rng: random.Random) -> None:
        count = self.daily_count(day, _ORDERS_PER_ACTIVITY_DAY, rng)
        who = rng.choices(self.persons, cum_weights=self.cum_weights, k=count)
        base = day * _DAY
        months_in = (day - self.first_day) / 30.0
        v1_share = max(0.04, 0.3 - 0.05 * months_in)  # the partner migrates to v2 over time
        for person in who:
            secs = base + min(_DAY - 1, int(rng.triangular(0, _DAY, 0.75 * _DAY)))
            event_id, seq = self.next_id("orders", day)
            ringed = person.ring is not None
            use_ring = ringed and rng.random() < 0.4
            card = rng.choice(person.ring_cards if use_ring else person.own_cards)
            device = rng.choice(person.ring_devices if ringed and rng.random() < 0.4 else person.own_devices)
            cents = int(math.exp(rng.gauss(3.4, 0.9)) * 100) * (2 if ringed else 1)
            cents = min(500_000, max(100, cents))
            currency = person.home_currency if rng.random() < 0.85 else rng.choice(_CURRENCIES)
            if ringed and rng.random() < 0.5:
                merchant = rng.choice(person.ring_merchants)
            else:
                merchant = f"m_{rng.randrange(_MERCHANTS):04d}"
            email = rng.choice(person.emails)
            time_text = self.iso(secs)
            fields: _Fields
            if rng.random() < v1_share:
                fields = (
                    ("schema_version", "1", True),
                    ("event_id", event_id, True),
                    ("event_time", time_text, True),
                    ("email", email, True),
                    ("card_fingerprint", card, True),
                    ("device_id", device, True),
                    ("amount_cents", str(cents), False),
                    ("currency", currency, True),
                    ("merchant_id", merchant, True),
                    ("revision", "1", False),
                )
            else:
                fields = (
                    ("schema_version", "2", True),
                    ("event_id", event_id, True),
                    ("event_time", time_text, True),
                    ("customer_email", email, True),
                    ("card_fingerprint", card, True),
                    ("device_id", device, True),
                    ("amount", _cents_text(cents), False),
                    ("currency", currency, True),
                    ("merchant_id", merchant, True),
                    ("revision", "1", False),
                )
            final = self.deliver("orders", secs, event_id, fields, rng)
            cents = _amount_cents_of(final)
            self.generate_followers(person, day, secs, seq, event_id, cents, currency, rng)

    def generate_followers(
        self,
        person: _Person,
        day: int,
        order_secs: int,
        seq: int,
        order_id: str,
        cents: int,
        currency: str,
        rng: random.Random,
    ) -> None:
        """Settlement (always), refund (sometimes) and outcome (rarely) of one order."""
        suffix = f"{self.day_text(day).replace('-', '')}-{seq:06d}"
        amount = _cents_text(cents)
        secs = (day + rng.randint(1, 3)) * _DAY + rng.randrange(_DAY)
        settlement_id = f"stl-{suffix}"
        self.deliver(
            "settlements",
            secs,
            settlement_id,
            (
                ("schema_version", "1", True),
                ("event_id", settlement_id, True),
                ("event_time", self.iso(secs), True),
                ("order_id", order_id, True),
                ("amount", amount, False),
                ("currency", currency, True),
                ("revision", "1", False),
            ),
            rng,
        )
        ringed = person.ring is not None
        if rng.random() < (0.02 if ringed else 0.05):
            refund_cents = cents if rng.random() < 0.7 else max(1, cents * rng.randint(10, 90) // 100)
            secs = (day + rng.randint(1, 20)) * _DAY + rng.randrange(_DAY)
            refund_id = f"ref-{suffix}"
            self.deliver(
                "refunds",
                secs,
                refund_id,
                (
                    ("schema_version", "1", True),
                    ("event_id", refund_id, True),
                    ("event_time", self.iso(secs), True),
                    ("order_id", order_id, True),
                    ("customer_email", rng.choice(person.emails), True),
                    ("amount", _cents_text(refund_cents), False),
                    ("currency", currency, True),
                    ("revision", "1", False),
                ),
                rng,
            )
        if rng.random() < (0.35 if ringed else 0.015 + (0.02 if cents > 20_000 else 0.0)):
            label = "fraud" if rng.random() < (0.75 if ringed else 0.3) else "chargeback"
            # Confirmation day 30-89 days after the order; delivery that day or the next,
            # so outcomes always arrive 30-90 days after their order.
            secs = (day + rng.randint(30, 89)) * _DAY + rng.randrange(_DAY)
            outcome_id = f"out-{suffix}"
            self.deliver(
                "outcomes",
                secs,
                outcome_id,
                (
                    ("schema_version", "1", True),
                    ("event_id", outcome_id, True),
                    ("event_time", self.iso(secs), True),
                    ("order_id", order_id, True),
                    ("label", label, True),
                    ("revision", "1", False),
                ),
                rng,
            )

    # ---- delivery -------------------------------------------------------------------------

    def flush(self, day: int) -> None:
        """Write every feed's batch for delivery date `day`: one folder, 1-2 sorted files."""
        by_feed = self.pending.pop(day, None)
        if not by_feed:
            return
        day_text = self.day_text(day)
        if self.first_delivery is None:
            self.first_delivery = day
        self.last_delivery = day
        for feed in FEEDS:
            entries = by_feed.get(feed)
            if not entries:
                continue
            entries.sort(key=lambda e: (e[0], e[1], e[2]))
            rng = random.Random(_sub_seed(self.settings.seed, "deliver", feed, day))
            split = len(entries)
            if len(entries) >= 20 and rng.random() < 0.35:
                split = len(entries) // 2
                while split < len(entries) and entries[split][:2] == entries[split - 1][:2]:
                    split += 1
            chunks = [entries[:split], entries[split:]] if split < len(entries) else [entries]
            truncate = rng.random() < self.settings.fault_rate
            forced = self.forced_truncations.get(feed)
            if forced is not None and day >= forced:
                truncate = True
            folder = self.out_dir / feed / day_text
            folder.mkdir(parents=True, exist_ok=True)
            for number, chunk in enumerate(chunks, start=1):
                last = number == len(chunks)
                done = self.write_file(feed, day, folder, number, chunk, truncate and last)
                if done and forced is not None:
                    del self.forced_truncations[feed]

    def write_file(
        self,
        feed: str,
        day: int,
        folder: Path,
        number: int,
        chunk: Sequence[_Entry],
        truncate: bool,
    ) -> bool:
        """Write one data file; return whether a truncated record was appended to it."""
        csv = feed in CSV_FEEDS
        name = f"{feed}-{self.day_text(day)}-{number}.{'csv' if csv else 'jsonl'}"
        relative = f"{feed}/{self.day_text(day)}/{name}"
        parts: list[str] = []
        line_no = 0
        if csv:
            parts.append(",".join(SCHEMAS[feed]["1"]) + "\n")
            line_no = 1
        fates = self.fates[feed]
        for _secs, _event_id, _copy, text, fate, fault in chunk:
            line_no += 1
            parts.append(text + "\n")
            fates[fate] = fates.get(fate, 0) + 1
            if fault is not None:
                self.faults.append(
                    Fault(
                        fault.kind,
                        feed,
                        relative,
                        line_no,
                        fault.event_id,
                        fault.expected_fate,
                        fault.detail,
                        fault.field,
                    )
                )
        truncated = False
        if truncate:
            template = next((e for e in reversed(chunk) if e[5] is None), None)
            if template is not None:
                phantom_id, _ = self.next_id(feed, self.gen_day)
                whole = template[3].replace(template[1], phantom_id, 1)
                if csv:
                    third = [i for i, ch in enumerate(whole) if ch == ","][2]
                    cut = third + 6  # inside order_id: 4 columns instead of 7
                else:
                    cut = max(2, (len(whole) * 3) // 5)
                line_no += 1
                parts.append(whole[:cut])  # no trailing newline: the file ends mid-record
                fates[FATE_MALFORMED] = fates.get(FATE_MALFORMED, 0) + 1
                self.faults.append(
                    Fault(
                        TRUNCATED_FILE,
                        feed,
                        relative,
                        line_no,
                        phantom_id,
                        FATE_MALFORMED,
                        f"file ends mid-record: last line cut after {cut} of {len(whole)} characters",
                    )
                )
                truncated = True
        (folder / name).write_bytes("".join(parts).encode("utf-8"))
        self.lines[feed] += line_no - (1 if csv else 0)
        self.files[feed] += 1
        return truncated

    # ---- ground truth -------------------------------------------------------------------

    def write_ground_truth(self) -> Path:
        """Write `_ground_truth.json`: settings, identities, persons, rings, faults, counts."""
        persons: dict[str, object] = {}
        identities: dict[str, str] = {}
        for person in self.persons:
            persons[person.person_id] = {
                "emails": list(person.emails),
                "cards": [*person.own_cards, *person.ring_cards],
                "devices": [*person.own_devices, *person.ring_devices],
                "ring": person.ring,
            }
            for email in person.emails:
                identities[email] = person.person_id
        rings = {ring.ring_id: [self.persons[m].person_id for m in ring.members] for ring in self.rings}
        ring_assets = {
            ring.ring_id: {
                "cards": list(ring.cards),
                "devices": list(ring.devices),
                "ip_prefix": ring.ip_prefix,
                "merchants": list(ring.merchants),
            }
            for ring in self.rings
        }
        device_users: dict[str, list[str]] = {}
        for person in self.persons:
            if person.ring is None:
                for device in person.own_devices:
                    device_users.setdefault(device, []).append(person.person_id)
        households = {d: sorted(users) for d, users in sorted(device_users.items()) if len(users) > 1}
        faults = sorted(self.faults, key=lambda f: (f.file, f.line))
        document = {
            "settings": self.settings.to_json(),
            "policy": {feed: asdict(rule) for feed, rule in sorted(self.policy.items())},
            "window": {
                "first_event_day": self.day_text(self.first_day),
                "end_event_day_exclusive": self.day_text(self.end_day),
                "first_delivery": self.day_text(cast(int, self.first_delivery)),
                "last_delivery": self.day_text(cast(int, self.last_delivery)),
            },
            "identities": identities,
            "persons": persons,
            "rings": rings,
            "ring_assets": ring_assets,
            "households": households,
            "faults": [asdict(f) for f in faults],
            "counts": {
                feed: {
                    "lines": self.lines[feed],
                    "files": self.files[feed],
                    "fates": dict(sorted(self.fates[feed].items())),
                }
                for feed in FEEDS
            },
        }
        path = self.out_dir / GROUND_TRUTH_FILE
        with path.open("w", encoding="utf-8", newline="\n") as handle:
            json.dump(document, handle, sort_keys=True, indent=1, ensure_ascii=True)
            handle.write("\n")
        return path


def generate(
    out_dir: Path,
    settings: GeneratorSettings,
    progress: Callable[[str], None] | None = None,
    *,
    policy: Mapping[str, LatenessRule] | None = None,
) -> GenerationSummary:
    """Write a deterministic commerce-risk history under `out_dir` and return its summary.

    Layout: `out_dir/<feed>/<delivery date>/<feed>-<delivery date>-<n>.jsonl|csv` (n = 1 or
    2) plus `out_dir/_ground_truth.json`. Event days span `settings.months` calendar months
    from `settings.start`; deliveries trail past that window by up to ~3 months (outcomes,
    late and backdated facts). `policy` defaults to conf/policies.yaml of this repository.
    `out_dir` must not exist or be empty, so stale files can never mix into a history.
    """
    if policy is None:
        policy = load_lateness_policy(DEFAULT_POLICY_PATH)
    check_policy(policy)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise FileExistsError(f"{out_dir} is not empty; refusing to mix histories")
    out_dir.mkdir(parents=True, exist_ok=True)
    engine = _Engine(out_dir, settings, policy, progress)
    engine.run()
    ground_truth = engine.write_ground_truth()
    faults_per_kind = dict.fromkeys(FAULT_KINDS, 0)
    for fault in engine.faults:
        faults_per_kind[fault.kind] += 1
    summary = GenerationSummary(
        out_dir=out_dir,
        ground_truth=ground_truth,
        files_written=sum(engine.files.values()),
        total_events=sum(engine.lines.values()),
        lines_per_feed=dict(engine.lines),
        files_per_feed=dict(engine.files),
        fates_per_feed={feed: dict(sorted(f.items())) for feed, f in engine.fates.items()},
        faults_per_kind=faults_per_kind,
        persons=len(engine.persons),
        rings=len(engine.rings),
        first_delivery=_date_of(cast(int, engine.first_delivery)),
        last_delivery=_date_of(cast(int, engine.last_delivery)),
    )
    if progress is not None:
        progress(f"wrote {summary.total_events} lines in {summary.files_written} files")
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m workloads.synthetic.generator --out DIR ...`: generate and print the summary."""
    parser = argparse.ArgumentParser(
        prog="python -m workloads.synthetic.generator",
        description="Write a seeded, deterministic commerce-risk history of partner deliveries.",
    )
    defaults = GeneratorSettings()
    parser.add_argument("--out", type=Path, required=True, help="output folder (new or empty)")
    parser.add_argument("--entities", type=int, default=defaults.entities)
    parser.add_argument("--months", type=int, default=defaults.months)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--start", type=date.fromisoformat, default=defaults.start)
    parser.add_argument("--rings", type=int, default=defaults.ring_count)
    parser.add_argument("--fault-rate", type=float, default=defaults.fault_rate)
    parser.add_argument("--policy", type=Path, default=DEFAULT_POLICY_PATH)
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    settings = GeneratorSettings(
        entities=args.entities,
        months=args.months,
        seed=args.seed,
        start=args.start,
        ring_count=args.rings,
        fault_rate=args.fault_rate,
    )

    def report(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    summary = generate(
        args.out,
        settings,
        None if args.quiet else report,
        policy=load_lateness_policy(args.policy),
    )
    print(summary.describe())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
