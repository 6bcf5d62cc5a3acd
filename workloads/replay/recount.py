"""The independent recount: what a replay's answer must hold, from Silver and the written rules.

Why: a reconciliation that recounts the expected pairs from the new engine's own output
agrees with a faulty engine. This module shares no code and no output with the engines
under test (it imports nothing of ``workloads.engines``, a test checks): it reads the
pinned Silver rows (identity and asset columns only) and applies, in plain Python, the
rules as ``conf/engines.yaml`` writes them down:

* **entity resolution**, read from the declared parameters of a version:

  - always: the email key is the email with leading and trailing whitespace removed,
    lower-cased (blank: no key); an event without a key takes the entity of its order
    (the ``orders`` event whose ``event_id`` is its ``order_id`` in the same input);
  - ``dot_insensitive_domains`` declared (v2, v3): the ``+tag`` of the local part is
    removed on every domain, and dots of the local part on those domains;
  - ``max_keys_per_card`` declared (v2): keys that used the same card fingerprint are one
    entity, transitively; a card used by more keys than that is ignored;
  - the entity id of a group of keys is the smallest v1 id (``"e1-"`` + the first 16 hex
    digits of the sha256 of the v1 key) among the emails in it, so an unchanged entity
    keeps its v1 id ("unchanged entities keep their v1 id");
  - ``renamed_percent`` declared (the replay benchmark's engines, ``benchmarks/replay_cost.py``,
    which must rename a known share of entities): the id of a group whose id's sha256, its
    first 8 hex digits read as a number, is below that percentage modulo 100 gets ``~r``
    appended;
  - any other parameter has no written rule here: the recount refuses
    (:class:`NoWrittenRule`), and reconciliation fails rather than guesses;

* **correlation pairs** (the producer's declaration): two entities form a pair of a type
  when they used the same asset of that type (``shared_device``: ``device_id``,
  ``shared_card``: ``card_fingerprint``) and the asset was used by at most
  ``max_entities_per_asset`` entities; the pair is valid from the earliest moment both had
  used one such asset.

**Scope.** The recount finds the affected entities itself: ids whose set of events differs
between the old and the new rule (both sides), plus every entity on an asset whose
crowding crosses ``max_entities_per_asset`` between the two. Reconciliation compares the
candidate with the recount on every pair touching those entities and on every pair the run
changed (so a change the rule does not explain is caught even outside the affected scope).

Cost follows the scope, not the history: one aggregate read of the distinct identity
tuples ``(customer_email, card_fingerprint)`` of the pinned Silver range, on which the
affected ids are found (an event without an email follows its order, so an id's events
change exactly when its emails do), then projected reads of only the events around the
entities in scope (:func:`read_around`), resolved with every identity tuple so each gets
the entity a whole-history resolution gives it. The pairs are counted only for the
entities in scope.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from ledger.engines import EngineSpec

log = logging.getLogger(__name__)

ASSET_OF_TYPE: Final[Mapping[str, str]] = {"shared_card": "card_fingerprint", "shared_device": "device_id"}
"""Correlation type -> the Silver column of the asset, as the correlation declaration says."""
RESOLUTION_ENGINE: Final = "entity_resolution"
V1_PREFIX: Final = "e1-"
V1_HASH_CHARS: Final = 16
KNOWN_RESOLUTION_PARAMETERS: Final = frozenset(
    {"dot_insensitive_domains", "max_keys_per_card", "renamed_percent"}
)
RENAMED_SUFFIX: Final = "~r"
KNOWN_PAIR_PARAMETERS: Final = frozenset(
    {"max_entities_per_asset", "types", "weighting", "base", "calibrators"}
)
"""``weighting`` and a recalibrated release's ``calibrators`` (on the ``base`` release, whose
pair rule is the same) change confidences only, never which pairs exist."""
_EDGE_SPACE: Final = re.compile(r"^[ \t\n\x0b\f\r]+|[ \t\n\x0b\f\r]+$")

EventKey = tuple[str, str]
"""``(domain, event_id)``."""
PairKey = tuple[str, str, str]
"""``(correlation_type, entity_a, entity_b)`` with ``entity_a < entity_b``."""
Identity = tuple[str, "str | None"]
"""``(customer_email, card_fingerprint)``: what the written rules decide an email's entity from."""
IDENTITY_COLUMNS: Final[tuple[str, str]] = ("customer_email", "card_fingerprint")


class NoWrittenRule(ValueError):
    """A declaration the recount has no written rule for (it never guesses one)."""


@dataclass(frozen=True)
class SilverEvent:
    """The columns of one Silver event the written rules speak of (time in UTC microseconds)."""

    domain: str
    event_id: str
    event_time: int
    customer_email: str | None
    order_id: str | None
    card_fingerprint: str | None
    device_id: str | None

    @property
    def key(self) -> EventKey:
        return self.domain, self.event_id

    def asset(self, kind: str) -> str | None:
        value: str | None = getattr(self, ASSET_OF_TYPE[kind])
        return value


@dataclass(frozen=True)
class ResolutionRule:
    """An entity-resolution version's rule, as its declaration writes it."""

    ref: str
    email_variants: bool = False
    dot_insensitive_domains: frozenset[str] = frozenset()
    max_keys_per_card: int | None = None
    renamed_percent: int | None = None

    @classmethod
    def declared(cls, spec: EngineSpec) -> ResolutionRule:
        """The rule of a declared version; :class:`NoWrittenRule` for anything else."""
        if spec.name != RESOLUTION_ENGINE:
            raise NoWrittenRule(f"{spec.ref}: the recount has a written rule for {RESOLUTION_ENGINE} only")
        unknown = sorted(set(spec.parameters) - KNOWN_RESOLUTION_PARAMETERS)
        if unknown:
            raise NoWrittenRule(f"{spec.ref}: no written rule for parameter {unknown[0]!r}")
        domains = spec.parameters.get("dot_insensitive_domains")
        cards = spec.parameters.get("max_keys_per_card")
        if domains is not None and not (
            isinstance(domains, list) and all(isinstance(d, str) for d in domains)
        ):
            raise NoWrittenRule(f"{spec.ref}: dot_insensitive_domains must be a list of domains")
        renamed = spec.parameters.get("renamed_percent")
        return cls(
            ref=spec.ref,
            email_variants=domains is not None,
            dot_insensitive_domains=frozenset(str(d) for d in domains or ()),
            max_keys_per_card=_integer(spec, "max_keys_per_card", cards),
            renamed_percent=_integer(spec, "renamed_percent", renamed),
        )


def _integer(spec: EngineSpec, name: str, value: object) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise NoWrittenRule(f"{spec.ref}: {name} must be an integer")
    return value


@dataclass(frozen=True)
class PairRule:
    """The producer's pair rule, as its declaration writes it."""

    ref: str
    types: tuple[str, ...]
    max_entities_per_asset: int

    @classmethod
    def declared(cls, spec: EngineSpec) -> PairRule:
        unknown = sorted(set(spec.parameters) - KNOWN_PAIR_PARAMETERS)
        if unknown:
            raise NoWrittenRule(f"{spec.ref}: no written rule for parameter {unknown[0]!r}")
        limit = spec.parameters.get("max_entities_per_asset")
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise NoWrittenRule(f"{spec.ref}: declares no integer max_entities_per_asset")
        types = spec.parameters.get("types", sorted(ASSET_OF_TYPE))
        if not isinstance(types, list) or any(t not in ASSET_OF_TYPE for t in types):
            raise NoWrittenRule(f"{spec.ref}: types must be among {sorted(ASSET_OF_TYPE)}")
        return cls(ref=spec.ref, types=tuple(sorted(str(t) for t in types)), max_entities_per_asset=limit)


# -- reading ---------------------------------------------------------------------------------------

COLUMNS: Final[tuple[str, ...]] = (
    "domain",
    "event_id",
    "customer_email",
    "order_id",
    *ASSET_OF_TYPE.values(),
)


def read_events(silver: DataFrame, *, projected: bool = False) -> list[SilverEvent]:
    """The pinned Silver rows (already restricted to the range) as plain Python events.

    Only a projection is read (``event_time`` as UTC microseconds, so no time zone is
    involved; ``projected``: ``silver`` is that projection already); every rule is applied
    afterwards in Python.
    """
    from pyspark.sql import functions as F

    rows = silver if projected else silver.select(*COLUMNS, F.unix_micros("event_time").alias("event_time"))
    table = rows.toArrow()
    return [
        SilverEvent(
            domain=r["domain"],
            event_id=r["event_id"],
            event_time=r["event_time"],
            customer_email=r["customer_email"],
            order_id=r["order_id"],
            card_fingerprint=r["card_fingerprint"],
            device_id=r["device_id"],
        )
        for r in table.to_pylist()
    ]


def read_identities(silver: DataFrame) -> list[Identity]:
    """The distinct ``(customer_email, card_fingerprint)`` of the rows with an email."""
    from pyspark.sql import functions as F

    rows = silver.where(F.col("customer_email").isNotNull()).select(*IDENTITY_COLUMNS).distinct().toArrow()
    return [(r["customer_email"], r["card_fingerprint"]) for r in rows.to_pylist()]


def read_around(silver: DataFrame) -> ReadAround:
    """A :data:`ReadAround` over ``silver`` (the pinned range): a few projected reads per call,
    each restricted by a semi-join on the values found so far."""
    from pyspark.sql import functions as F

    projected = silver.select(*COLUMNS, F.unix_micros("event_time").alias("event_time"))

    def matching(column: str, values: Iterable[str]) -> list[SilverEvent]:
        wanted = sorted(set(values))
        if not wanted:
            return []
        keys = silver.sparkSession.createDataFrame([(v,) for v in wanted], f"{column} string")
        return read_events(projected.join(F.broadcast(keys), column, "left_semi"), projected=True)

    def read(emails: set[str]) -> list[SilverEvent]:
        own = matching("customer_email", emails)
        found = {e.key: e for e in own}
        for e in matching("order_id", {e.event_id for e in own if e.domain == "orders"}):
            found.setdefault(e.key, e)
        mine = list(found.values())
        for kind, column in ASSET_OF_TYPE.items():
            for e in matching(column, {a for e in mine if (a := e.asset(kind)) is not None}):
                found.setdefault(e.key, e)
        referenced = {e.order_id for e in found.values() if e.order_id is not None}
        for e in matching("event_id", referenced):
            if e.domain == "orders":
                found.setdefault(e.key, e)
        return sorted(found.values(), key=lambda e: e.key)

    return read


# -- entity resolution -----------------------------------------------------------------------------


def v1_key(email: str | None) -> str | None:
    """The email without leading and trailing whitespace, lower-cased; None when blank."""
    if email is None:
        return None
    key = _EDGE_SPACE.sub("", email).lower()
    return key or None


def v1_id(key: str) -> str:
    """``e1-`` + the first 16 hex digits of the sha256 of a v1 key."""
    return V1_PREFIX + hashlib.sha256(key.encode("utf-8")).hexdigest()[:V1_HASH_CHARS]


def email_key(rule: ResolutionRule, email: str | None) -> str | None:
    """The key of an email under ``rule``."""
    key = v1_key(email)
    if key is None or not rule.email_variants or "@" not in key:
        return key
    local, domain = key.split("@", 1)[0], key.rsplit("@", 1)[1]
    local = local.split("+", 1)[0]
    if domain in rule.dot_insensitive_domains:
        local = local.replace(".", "")
    return f"{local}@{domain}"


class _Groups:
    """Union-find over keys; a group's label is the smallest seed in it."""

    def __init__(self, seeds: Mapping[str, str]) -> None:
        self._parent = {k: k for k in seeds}
        self._seeds = dict(seeds)

    def find(self, key: str) -> str:
        root = key
        while self._parent[root] != root:
            root = self._parent[root]
        while self._parent[key] != root:
            self._parent[key], key = root, self._parent[key]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self._parent[rb] = ra
            self._seeds[ra] = min(self._seeds[ra], self._seeds[rb])

    def label(self, key: str) -> str:
        return self._seeds[self.find(key)]


def identities_of(events: Iterable[SilverEvent]) -> set[Identity]:
    """The distinct identity tuples of the events that carry an email."""
    return {(e.customer_email, e.card_fingerprint) for e in events if e.customer_email is not None}


def email_entities(identities: Iterable[Identity], rule: ResolutionRule) -> dict[str, str | None]:
    """Each email's entity id under ``rule``, decided from every identity tuple of the input."""
    tuples = sorted(set(identities), key=lambda t: (t[0], t[1] or ""))
    keys = {email: email_key(rule, email) for email, _ in tuples}
    seeds: dict[str, str] = {}
    for email, key in keys.items():
        if key is not None:
            own = v1_id(v1_key(email) or "")
            seeds[key] = min(seeds.get(key, own), own)
    groups = _Groups(seeds)
    if rule.max_keys_per_card is not None:
        users: dict[str, set[str]] = defaultdict(set)
        for email, card in tuples:
            key = keys[email]
            if key is not None and card is not None:
                users[card].add(key)
        for members in users.values():
            if 1 < len(members) <= rule.max_keys_per_card:
                first, *rest = sorted(members)
                for other in rest:
                    groups.union(first, other)
    return {email: None if key is None else _renamed(rule, groups.label(key)) for email, key in keys.items()}


def _renamed(rule: ResolutionRule, entity: str) -> str:
    if rule.renamed_percent is None:
        return entity
    chosen = int(hashlib.sha256(entity.encode("utf-8")).hexdigest()[:8], 16) % 100 < rule.renamed_percent
    return entity + RENAMED_SUFFIX if chosen else entity


def resolve(events: Sequence[SilverEvent], rule: ResolutionRule) -> dict[EventKey, str | None]:
    """Each event's entity id under ``rule`` (None when the rule gives it none)."""
    return entities_of(events, email_entities(identities_of(events), rule))


def entities_of(
    events: Sequence[SilverEvent], by_email: Mapping[str, str | None]
) -> dict[EventKey, str | None]:
    """Each event's entity: its email's (``by_email``, decided from every identity tuple of the
    history, so a subset of events resolves as the whole history does), else its order's."""
    own_entity = {e.key: None if e.customer_email is None else by_email.get(e.customer_email) for e in events}
    order_entity: dict[str, str] = {}
    for e in events:
        entity = own_entity[e.key]
        if e.domain == "orders" and entity is not None:
            order_entity[e.event_id] = min(order_entity.get(e.event_id, entity), entity)
    return {
        e.key: own_entity[e.key]
        if own_entity[e.key] is not None
        else (order_entity.get(e.order_id) if e.order_id is not None else None)
        for e in events
    }


# -- scope -----------------------------------------------------------------------------------------


def affected(old: Mapping[Any, str | None], new: Mapping[Any, str | None]) -> set[str]:
    """Ids (either rule) whose set of members differs between the two resolutions (members:
    events, or the emails of the identity tuples)."""
    found: set[str] = set()
    for key, before in old.items():
        after = new.get(key)
        if before != after:
            found.update(e for e in (before, after) if e is not None)
    return found


def _users(
    events: Iterable[SilverEvent], entities: Mapping[EventKey, str | None], kind: str
) -> dict[str, dict[str, int]]:
    """Asset -> entity -> first use (microseconds), over events with an entity and the asset."""
    uses: dict[str, dict[str, int]] = defaultdict(dict)
    for e in events:
        asset, entity = e.asset(kind), entities.get(e.key)
        if asset is None or entity is None:
            continue
        seen = uses[asset]
        seen[entity] = min(seen.get(entity, e.event_time), e.event_time)
    return uses


def crowding_flips(
    events: Sequence[SilverEvent],
    old: Mapping[EventKey, str | None],
    new: Mapping[EventKey, str | None],
    touched: set[str],
    rule: PairRule,
) -> set[str]:
    """Entities (either rule) on an asset used by a ``touched`` entity whose crowding flips."""
    found: set[str] = set()
    limit = rule.max_entities_per_asset
    for kind in rule.types:
        before, after = _users(events, old, kind), _users(events, new, kind)
        for asset in set(before) | set(after):
            users_old, users_new = before.get(asset, {}), after.get(asset, {})
            if not (touched & (set(users_old) | set(users_new))):
                continue
            if (len(users_old) > limit) != (len(users_new) > limit):
                found.update(users_old)
                found.update(users_new)
    return found


# -- pairs -----------------------------------------------------------------------------------------


def pairs_touching(
    events: Sequence[SilverEvent],
    entities: Mapping[EventKey, str | None],
    rule: PairRule,
    touching: set[str],
) -> dict[PairKey, int]:
    """Every pair of the rule with a side in ``touching``: ``(type, a, b)`` -> valid_from (µs)."""
    found: dict[PairKey, int] = {}
    for kind in rule.types:
        for users in _users(events, entities, kind).values():
            if len(users) > rule.max_entities_per_asset or not (touching & set(users)):
                continue
            ordered = sorted(users)
            for i, a in enumerate(ordered):
                for b in ordered[i + 1 :]:
                    if a not in touching and b not in touching:
                        continue
                    since = max(users[a], users[b])
                    key = (kind, a, b)
                    found[key] = min(found.get(key, since), since)
    return found


def month_of(micros: int) -> str:
    """``yyyy-MM`` of a UTC instant in microseconds (the partition ``valid_month``)."""
    return datetime.fromtimestamp(micros / 1_000_000, tz=UTC).strftime("%Y-%m")


@dataclass(frozen=True)
class Recount:
    """What the new version's answer must hold, recounted independently.

    ``scope``: the entities the recount itself finds affected (with crowding flips).
    ``pairs``: every pair of the new rule touching ``scope`` or an entity of ``changed``.
    ``changed``: the pair keys the run changed (given by the caller, to widen the check).
    """

    old_rule: str
    new_rule: str
    pair_rule: str
    events_read: int
    scope: frozenset[str]
    changed: frozenset[PairKey]
    pairs: Mapping[PairKey, int]

    def covers(self, key: PairKey) -> bool:
        """Whether a pair is in the compared universe: touching the scope, or changed by the run."""
        return key[1] in self.scope or key[2] in self.scope or key in self.changed

    @property
    def entities(self) -> frozenset[str]:
        """Every entity whose pairs were counted (scope and the sides of changed pairs)."""
        return self.scope | {side for key in self.changed for side in key[1:]}

    def expected(self) -> dict[PairKey, int]:
        """The pairs of the new rule in the compared universe, with their valid_from."""
        return {k: v for k, v in self.pairs.items() if self.covers(k)}


ReadAround = Callable[[set[str]], Sequence[SilverEvent]]
"""Given emails, the Silver events the pairs of their entities need: the events with those
emails, the events of their orders, every event on a device or card any of these carries,
and the orders those refer to (:func:`read_around` reads them from Spark)."""


def recount(
    events: Sequence[SilverEvent],
    *,
    old: ResolutionRule,
    new: ResolutionRule,
    pairs: PairRule,
    changed: Iterable[PairKey] = (),
) -> Recount:
    """Resolve under both written rules, find the affected scope, count the new rule's pairs
    (every event in memory: :func:`recount_around` with the events as their own neighbourhood)."""
    return recount_around(
        identities_of(events), lambda _: events, old=old, new=new, pairs=pairs, changed=changed
    )


def recount_around(
    identities: Iterable[Identity],
    read: ReadAround,
    *,
    old: ResolutionRule,
    new: ResolutionRule,
    pairs: PairRule,
    changed: Iterable[PairKey] = (),
) -> Recount:
    """:func:`recount` reading only what the scope needs.

    The ids whose set of events differs are found on the distinct identity tuples (an
    event without an email follows its order, so an id's events change exactly when its
    emails do); only the events around those entities, the sides of the changed pairs and
    the entities of crowding flips are read (``read``), and resolved with every identity
    tuple so each gets the entity a whole-history resolution gives it.
    """
    known = set(identities)
    before_email, after_email = email_entities(known, old), email_entities(known, new)
    moved = affected(before_email, after_email)
    changed_keys = frozenset(changed)
    sides = {side for key in changed_keys for side in key[1:]}
    wanted = moved | sides
    while True:
        emails = {m for m in before_email if before_email[m] in wanted or after_email[m] in wanted}
        events = read(emails)
        before, after = entities_of(events, before_email), entities_of(events, after_email)
        flips = crowding_flips(events, before, after, moved, pairs)
        if flips <= wanted:
            break
        wanted |= flips  # a flipped entity's pairs on its other assets need their events too
    scope = moved | flips
    counted = scope | sides
    found = pairs_touching(events, after, pairs, counted)
    log.debug(
        "recount %s -> %s over %d events: %d entities in scope, %d pairs counted",
        old.ref,
        new.ref,
        len(events),
        len(scope),
        len(found),
    )
    return Recount(
        old_rule=old.ref,
        new_rule=new.ref,
        pair_rule=pairs.ref,
        events_read=len(events),
        scope=frozenset(scope),
        changed=changed_keys,
        pairs=found,
    )
