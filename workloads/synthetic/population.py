"""The true population: persons with noisy email variants, their cards and devices, fraud
rings that share assets, and households that share one device.

Everything here is derived from the master seed alone (one ``random.Random`` per person,
one for the rings, one for the households), so the population could be built per shard.
Card and device fingerprints come from a bijection of the person index, so they look random
yet never collide between persons or rings.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Final

from workloads.synthetic.seeds import sub_seed

FIRST_NAMES: Final = (
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
LAST_NAMES: Final = (
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
EMAIL_DOMAINS: Final = (
    "outlook.com",
    "yahoo.com",
    "proton.me",
    "web.de",
    "icloud.com",
    "mail.com",
    "gmx.net",
)
PLUS_TAGS: Final = ("shop", "news", "promo", "orders", "deals", "x")
CURRENCIES: Final = ("EUR", "GBP", "USD")
IP_FIRST_OCTETS: Final = (31, 46, 62, 77, 81, 86, 88, 92, 109, 151, 176, 188, 212, 217)
MERCHANTS: Final = 400
"""Merchant ids run from ``m_0000`` to ``m_0399``."""

HOUSEHOLD_EVERY: Final = 25
"""One household (two persons sharing a device) per this many persons."""


@dataclass(frozen=True, slots=True)
class Person:
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
class Ring:
    """A fraud ring: its members (person indices) and the assets they share."""

    ring_id: str
    members: tuple[int, ...]
    cards: tuple[str, ...]
    devices: tuple[str, ...]
    ip_prefix: str
    merchants: tuple[str, ...]


@dataclass(frozen=True)
class Population:
    """Every person (index = position) and every fraud ring of a history."""

    persons: tuple[Person, ...]
    rings: tuple[Ring, ...]


def scramble32(index: int, mask: int) -> int:
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


def insert_dot(local: str, rng: random.Random) -> str:
    """Insert a dot between two letters of a gmail local part (gmail ignores dots)."""
    spots = [i for i in range(1, len(local)) if local[i - 1].isalpha() and local[i].isalpha()]
    if not spots:
        return local
    i = rng.choice(spots)
    return f"{local[:i]}.{local[i:]}"


def case_variant(email: str, rng: random.Random) -> str:
    """Capitalise name parts and/or the domain: same mailbox, different bytes."""
    local, domain = email.split("@")
    parts = [p.capitalize() for p in local.split(".")]
    if rng.random() < 0.5:
        domain = domain.capitalize()
    elif rng.random() < 0.3:
        domain = domain.upper()
    return f"{'.'.join(parts)}@{domain}"


def email_variants(
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
    domain = "gmail.com" if gmail else rng.choice(EMAIL_DOMAINS)
    base = f"{local}@{domain}"

    count = 3 if force_rich else rng.choices((1, 2, 3), weights=(4, 4, 2))[0]
    kinds: list[str] = ["dots", "plus", "case"] if force_rich else []
    while len(kinds) < count - 1:
        options = ["case", "plus", "space"] + (["dots", "dots"] if gmail else [])
        kinds.append(rng.choice(options))

    variants: list[str] = [base]
    for kind in kinds[: count - 1]:
        if kind == "dots":
            candidate = insert_dot(local.replace(".", "") if rng.random() < 0.5 else local, rng)
            candidate = f"{candidate}@{domain}"
        elif kind == "plus":
            candidate = f"{local}+{rng.choice(PLUS_TAGS)}@{domain}"
        elif kind == "case":
            candidate = case_variant(base, rng)
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


def build_population(entities: int, ring_count: int, seed: int) -> Population:
    """All persons and fraud rings; deterministic per person so it could be sharded."""
    card_mask = sub_seed(seed, "card-mask") & 0xFFFFFFFF
    device_mask = sub_seed(seed, "device-mask") & 0xFFFFFFFF
    rings, member_ring = _build_rings(entities, ring_count, seed, card_mask, device_mask)
    modulus = 10 ** max(3, len(str(entities)))
    offset = sub_seed(seed, "email-number") % modulus
    persons: list[Person] = []
    for i in range(entities):
        rng = random.Random(sub_seed(seed, "person", i))
        first = rng.choice(FIRST_NAMES)
        last = rng.choice(LAST_NAMES)
        number = (i * 7919 + offset) % modulus  # bijective on range(modulus): 7919 is prime
        emails = email_variants(first, last, number, rng, force_rich=(i == 0))
        cards = tuple(f"cf_{scramble32(i * 4 + j, card_mask):08x}" for j in range(rng.randint(1, 2)))
        devices = tuple(f"dev_{scramble32(i * 4 + j, device_mask):08x}" for j in range(rng.randint(1, 3)))
        currency = rng.choices(CURRENCIES, weights=(6, 2, 2))[0]
        ip_prefix = f"{rng.choice(IP_FIRST_OCTETS)}.{rng.randrange(256)}.{rng.randrange(256)}"
        activity = rng.lognormvariate(0.0, 0.6)
        ring_index = member_ring.get(i)
        ring = rings[ring_index] if ring_index is not None else None
        persons.append(
            Person(
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
    with_households = _add_households(persons, set(member_ring), seed, device_mask)
    return Population(persons=with_households, rings=tuple(rings))


def _build_rings(
    entities: int, ring_count: int, seed: int, card_mask: int, device_mask: int
) -> tuple[list[Ring], dict[int, int]]:
    """The fraud rings (3-6 members each, person 0 never in one) and each member's ring index.

    Built before the persons, so the shared assets can be attached to the members' profiles.
    """
    rng = random.Random(sub_seed(seed, "rings"))
    sizes = [rng.randint(3, 6) for _ in range(ring_count)]
    pool = list(range(1, entities)) if entities > 1 else []
    while sizes and sum(sizes) > len(pool):
        sizes.pop()
    chosen = rng.sample(pool, sum(sizes)) if sizes else []
    rings: list[Ring] = []
    member_ring: dict[int, int] = {}
    cursor = 0
    for r, size in enumerate(sizes):
        members = tuple(sorted(chosen[cursor : cursor + size]))
        cursor += size
        base = 0xF0000000 + r * 8
        cards = tuple(f"cf_{scramble32(base + j, card_mask):08x}" for j in range(rng.randint(1, 2)))
        devices = tuple(f"dev_{scramble32(base + j, device_mask):08x}" for j in range(2))
        ip_prefix = f"185.{rng.randrange(16, 250)}.{rng.randrange(256)}"
        merchants = tuple(f"m_{rng.randrange(MERCHANTS):04d}" for _ in range(3))
        rings.append(Ring(f"R{r + 1:03d}", members, cards, devices, ip_prefix, merchants))
        for member in members:
            member_ring[member] = r
    return rings, member_ring


def _add_households(
    persons: list[Person], ring_members: set[int], seed: int, device_mask: int
) -> tuple[Person, ...]:
    """The persons, with pairs outside any ring sharing one household device (a family tablet).

    They share no card, so entity resolution never merges them: their correlation
    survives a change of resolver and is *restated* (superseded) rather than retracted.
    One household per 25 persons.
    """
    rng = random.Random(sub_seed(seed, "households"))
    singles = [i for i in range(len(persons)) if i not in ring_members]
    rng.shuffle(singles)
    result = list(persons)
    for h in range(min(len(result) // HOUSEHOLD_EVERY, len(singles) // 2)):
        shared = f"dev_{scramble32(0xE0000000 + h, device_mask):08x}"
        for index in (singles[2 * h], singles[2 * h + 1]):
            person = result[index]
            result[index] = replace(person, own_devices=(*person.own_devices, shared))
    return tuple(result)
