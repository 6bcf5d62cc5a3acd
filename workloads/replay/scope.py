"""What a replay touches: affected entities, the rows to recompute, and what it will cost.

DataFrame functions (no table reads or writes; :func:`neighbourhood` computes its steps
as local checkpoints); :mod:`workloads.replay.flow` feeds them the pinned tables.

**Affected entities.** Silver is resolved twice, with the old and the new version of the
changed engine. An entity id is *affected* when its membership differs between the two:
some event belongs to it under one version and not under the other. Both sides count:
old ids that lose or gain events (or vanish) and new ids that gain events (or appear).
An id whose set of events is identical under both versions is not affected, whatever
happened around it (entity resolution v2 keeps v1's id for unchanged entities).

**Recomputed entities.** Correlations of an affected entity must be recomputed. One more
case changes correlations of *unaffected* entities: an asset (device, card) whose number
of distinct entities crosses the producer's ``max_entities_per_asset`` when entities merge
or split, which turns every pair on it on or off. Entities using such an asset are
recomputed too. Every other pair is provably unchanged: same entities, same events, same
assets, same crowding.

**Scope before resolving.** Whole-history resolution is not needed to find the affected
entities. A resolver decides an email's entity from the set of distinct identity tuples
``(customer_email, card_fingerprint)`` of its input, and an event without an email takes
the entity of its order (the contract every declared version keeps; the independent
recount and a test check it). So the analysis resolves, under both versions, one row per
distinct identity tuple (:func:`identities`: thousands of rows, not millions of events),
finds the affected ids at that level (the same ids as over every event), and then reads
and resolves only the :func:`neighbourhood` of the entities to recompute: their own events,
every event on an asset they used, and the orders those events refer to. The identity rows
go into that resolution too, so every event in the neighbourhood gets exactly the entity a
whole-history run gives it; the cost follows the affected share, not the history.

**A producer change** (correlation 1 -> 2) moves no entity: Silver is resolved once, by the
resolver in force, and ``old_entity`` = ``new_entity``. The scope is then the whole answer
in range: every entity that used an asset is recomputed (:func:`every_entity`). That is
the honest scope, not a shortcut: which rows a new producer changes depends on its logic
(v2 re-weighs the confidence of pairs on widely shared assets and adds ``weight`` to every
row's evidence), and the flow reads no engine's code. Rows whose content comes out the
same are kept as they are by the classification, so nothing is churned for it.

**Exact scoped recomputation.** The producer runs only on the events that carry an asset
used by a recomputed entity, with every other asset blanked out, and only pairs with a
recomputed side are kept. Every use of a kept asset is in the input, so crowding, shared
assets, event counts and ``valid_from`` of a kept pair are exactly what a run over the whole
history gives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from typing import TYPE_CHECKING, Final

from lakehouse.frames import materialize, union_all
from workloads.replay.answer import CORRELATIONS
from workloads.vocabulary import ChangeKind

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

ASSET_COLUMNS: Final[tuple[str, ...]] = ("device_id", "card_fingerprint")
"""Silver columns through which two entities can be linked."""
OLD, NEW = "old_entity", "new_entity"
EVENT_KEY: Final[tuple[str, ...]] = ("domain", "event_id")
RESOLUTION_INPUT: Final[tuple[str, ...]] = (
    "domain",
    "event_id",
    "event_time",
    "customer_email",
    "order_id",
    "card_fingerprint",
    "device_id",
)
"""The identity columns an entity-resolution engine is given (never the payload columns: a
resolver's helper columns must not collide with Silver's, e.g. ``label``)."""
MAX_LISTED: Final = 10_000
"""At most this many entity ids are listed in a scope (the counts are always exact)."""


# -- event range -------------------------------------------------------------------------------


def range_bounds(
    event_from: date | None, event_until: date | None
) -> tuple[datetime | None, datetime | None]:
    """The plan's event range as UTC instants: ``[from 00:00, until 00:00)``."""

    def at(day: date | None) -> datetime | None:
        return None if day is None else datetime.combine(day, time(0), tzinfo=UTC)

    return at(event_from), at(event_until)


def in_range(column: Column, bounds: tuple[datetime | None, datetime | None]) -> Column:
    """``column`` within the half-open range (true when the range is open on both ends)."""
    from pyspark.sql import functions as F

    start, end = bounds
    condition = F.lit(True)
    if start is not None:
        condition = condition & (column >= F.lit(start))
    if end is not None:
        condition = condition & (column < F.lit(end))
    return condition


def month_bounds(bounds: tuple[datetime | None, datetime | None]) -> tuple[str | None, str | None]:
    """First and last ``yyyy-MM`` month the range reaches (for partition pruning)."""
    start, end = bounds
    first = start.strftime("%Y-%m") if start is not None else None
    last = None
    if end is not None:
        from datetime import timedelta

        last = (end - timedelta(microseconds=1)).strftime("%Y-%m")
    return first, last


# -- resolutions and affected entities -------------------------------------------------------


def pair_resolutions(silver: DataFrame, old: DataFrame, new: DataFrame) -> DataFrame:
    """Silver events with the entity of each resolution beside each other.

    ``old`` and ``new`` are :data:`RESOLUTION_INPUT` of the same events resolved by the old
    and the new version; the result has every Silver column except ``entity_id`` and
    ``resolver``, plus ``old_entity`` and ``new_entity``, matched on ``(domain, event_id)``.
    """
    from pyspark.sql import functions as F

    olds = old.select(*EVENT_KEY, F.col("entity_id").alias(OLD))
    news = new.select(*EVENT_KEY, F.col("entity_id").alias(NEW))
    base = silver.drop("entity_id", "resolver")
    return base.join(news, list(EVENT_KEY), "left").join(olds, list(EVENT_KEY), "left")


def same_resolution(silver: DataFrame, resolved: DataFrame) -> DataFrame:
    """:func:`pair_resolutions` for a producer change: one resolution on both sides."""
    from pyspark.sql import functions as F

    entities = resolved.select(*EVENT_KEY, F.col("entity_id").alias(NEW))
    return (
        silver.drop("entity_id", "resolver")
        .join(entities, list(EVENT_KEY), "left")
        .withColumn(OLD, F.col(NEW))
    )


IDENTITY_COLUMNS: Final[tuple[str, ...]] = ("customer_email", "card_fingerprint")
"""What a resolver decides an email's entity from (see the module docstring)."""
IDENTITY_DOMAIN: Final = "_identity"
"""The ``domain`` of the identity rows given to a resolver beside real events (never an order)."""


def identities(silver: DataFrame) -> DataFrame:
    """``(customer_email, card_fingerprint, events, event_id)``: each distinct identity tuple
    of the events that carry an email, with its number of events and a row key."""
    from pyspark.sql import functions as F

    return (
        silver.where(F.col("customer_email").isNotNull())
        .groupBy(*IDENTITY_COLUMNS)
        .agg(F.count(F.lit(1)).alias("events"))
        .withColumn(
            "event_id",
            F.concat_ws("\x1f", "customer_email", F.coalesce("card_fingerprint", F.lit("\x00"))),
        )
    )


def identity_rows(identity: DataFrame) -> DataFrame:
    """The identity tuples as resolver input (:data:`RESOLUTION_INPUT`; no order, time or device)."""
    from pyspark.sql import functions as F

    return identity.select(
        F.lit(IDENTITY_DOMAIN).alias("domain"),
        "event_id",
        F.lit(None).cast("timestamp").alias("event_time"),
        "customer_email",
        F.lit(None).cast("string").alias("order_id"),
        "card_fingerprint",
        F.lit(None).cast("string").alias("device_id"),
    )


def pair_identities(identity: DataFrame, old: DataFrame, new: DataFrame) -> DataFrame:
    """The identity tuples with ``old_entity`` and ``new_entity`` (``old``/``new``: the
    :func:`identity_rows` resolved by each version)."""
    from pyspark.sql import functions as F

    olds = old.select("event_id", F.col("entity_id").alias(OLD))
    news = new.select("event_id", F.col("entity_id").alias(NEW))
    return identity.join(olds, "event_id", "left").join(news, "event_id", "left").drop("event_id")


def neighbourhood(silver: DataFrame, identity: DataFrame, entities: DataFrame) -> DataFrame:
    """The Silver events an exact recomputation of ``entities`` needs (see the module docstring).

    ``identity``: :func:`pair_identities`; ``entities``: ``entity_id`` of either version.
    Returns, without duplicates: every event of those entities under either version (by
    email, and by order for events without one), every event carrying a device or card any
    of those events carries, and the ``orders`` event of every event selected so far.
    """
    from pyspark.sql import functions as F

    ids = entities.select("entity_id").distinct()
    emails = (
        identity.join(ids, (identity[OLD] == ids["entity_id"]) | (identity[NEW] == ids["entity_id"]))
        .select("customer_email")
        .distinct()
    )
    # Each step reads Silver once against the computed rows of the step before (materialized:
    # unmaterialized, every later step would read Silver again for each earlier one).
    own = silver.join(F.broadcast(emails), "customer_email", "left_semi")
    their_orders = own.where(F.col("domain") == "orders").select(F.col("event_id").alias("order_id"))
    mine = materialize(own.unionByName(silver.join(their_orders.distinct(), "order_id", "left_semi")))
    selected = mine
    for column in ASSET_COLUMNS:
        assets = mine.where(F.col(column).isNotNull()).select(column).distinct()
        selected = selected.unionByName(silver.join(assets, column, "left_semi"))
    selected = materialize(selected)
    referenced = selected.where(F.col("order_id").isNotNull()).select(F.col("order_id").alias("event_id"))
    orders = silver.where(F.col("domain") == "orders").join(referenced.distinct(), "event_id", "left_semi")
    return selected.unionByName(orders).dropDuplicates(list(EVENT_KEY))


def every_entity(events: DataFrame) -> DataFrame:
    """``(entity_id, old_side, new_side)`` of every entity with an event carrying an asset.

    The affected entities of a producer change: every correlation in range is decided again.
    """
    from pyspark.sql import functions as F

    has_asset = F.lit(False)
    for column in ASSET_COLUMNS:
        has_asset = has_asset | F.col(column).isNotNull()
    return (
        events.where(F.col(NEW).isNotNull() & has_asset)
        .select(F.col(NEW).alias("entity_id"))
        .distinct()
        .select("entity_id", F.lit(True).alias("old_side"), F.lit(True).alias("new_side"))
    )


def affected_entities(events: DataFrame) -> DataFrame:
    """``(entity_id, old_side, new_side)`` for every id whose membership differs.

    An event whose old and new entity differ (null-safe) changes the membership of both.
    ``old_side`` / ``new_side``: the id exists under the old / new version (an affected id
    only on the old side vanished; only on the new side is new).
    """
    from pyspark.sql import functions as F

    moved = events.where(~F.col(OLD).eqNullSafe(F.col(NEW)))
    ids = (
        moved.select(F.explode(F.array(OLD, NEW)).alias("entity_id"))
        .where(F.col("entity_id").isNotNull())
        .distinct()
    )
    olds = events.select(F.col(OLD).alias("entity_id")).distinct().withColumn("old_side", F.lit(True))
    news = events.select(F.col(NEW).alias("entity_id")).distinct().withColumn("new_side", F.lit(True))
    return (
        ids.join(olds, "entity_id", "left")
        .join(news, "entity_id", "left")
        .select(
            "entity_id",
            F.coalesce("old_side", F.lit(False)).alias("old_side"),
            F.coalesce("new_side", F.lit(False)).alias("new_side"),
        )
    )


def _flag(df: DataFrame, ids: DataFrame, column: str, flag: str) -> DataFrame:
    """``df`` with a boolean ``flag``: ``column`` is one of ``ids.entity_id``."""
    from pyspark.sql import functions as F

    keys = ids.select(F.col("entity_id").alias(f"_{flag}_id")).distinct()
    joined = df.join(keys, df[column] == keys[f"_{flag}_id"], "left")
    return joined.withColumn(flag, F.col(f"_{flag}_id").isNotNull()).drop(f"_{flag}_id")


def involving(df: DataFrame, ids: DataFrame, columns: Sequence[str] = CORRELATIONS.subjects) -> DataFrame:
    """Rows of ``df`` where any of ``columns`` (an answer table's subjects) is one of ``ids.entity_id``."""
    from pyspark.sql import functions as F

    flagged = df
    flags = []
    for index, column in enumerate(columns):
        name = f"_inv{index}"
        flagged = _flag(flagged, ids, column, name)
        flags.append(F.col(name))
    condition = flags[0]
    for flag in flags[1:]:
        condition = condition | flag
    return flagged.where(condition).drop(*[f"_inv{i}" for i in range(len(columns))])


def crowding_flips(events: DataFrame, affected: DataFrame, max_entities: int) -> DataFrame:
    """``entity_id`` of every entity (either version) using an asset whose crowding flips.

    Only assets used by an affected entity can change their number of distinct entities.
    An asset flips when it is crowded (more than ``max_entities`` distinct entities) under
    one version and not under the other.
    """
    from pyspark.sql import functions as F

    marked = _flag(_flag(events, affected, OLD, "_ao"), affected, NEW, "_an")
    found = []
    for column in ASSET_COLUMNS:
        touched = (
            marked.where(F.col(column).isNotNull() & (F.col("_ao") | F.col("_an")))
            .select(F.col(column).alias("_asset"))
            .distinct()
        )
        uses = marked.join(touched, marked[column] == touched["_asset"])
        flipped = (
            uses.groupBy("_asset")
            .agg(F.count_distinct(OLD).alias("n_old"), F.count_distinct(NEW).alias("n_new"))
            .where((F.col("n_old") > max_entities) != (F.col("n_new") > max_entities))
            .select("_asset")
        )
        members = uses.join(flipped, "_asset").select(F.explode(F.array(OLD, NEW)).alias("entity_id"))
        found.append(members)
    return union_all(found).where(F.col("entity_id").isNotNull()).distinct()


def recomputed_entities(affected: DataFrame, flips: DataFrame) -> DataFrame:
    """``entity_id`` whose correlations are recomputed: affected ids plus crowding flips."""
    return affected.select("entity_id").unionByName(flips.select("entity_id")).distinct()


def entity_mapping(events: DataFrame) -> DataFrame:
    """``(old_entity, new_entity)``: where each old id's events went (the smallest new id).

    The new version never splits an old entity's key, so one new id is the rule; should an
    old id's events ever land in several, the smallest is taken as its successor.
    """
    from pyspark.sql import functions as F

    return (
        events.where(F.col(OLD).isNotNull() & F.col(NEW).isNotNull()).groupBy(OLD).agg(F.min(NEW).alias(NEW))
    )


def scoped_events(events: DataFrame, recompute: DataFrame) -> DataFrame:
    """The producer's input: events carrying an asset of a recomputed entity, other assets blanked.

    ``entity_id`` is the new entity. Every event using a kept asset is included, so the
    producer sees each kept asset's full use (see the module docstring).
    """
    from pyspark.sql import functions as F

    mine = _flag(events, recompute, NEW, "_mine").where(F.col("_mine"))
    result = events
    keep = F.lit(False)
    for column in ASSET_COLUMNS:
        assets = mine.where(F.col(column).isNotNull()).select(F.col(column).alias(f"_k_{column}")).distinct()
        result = result.join(assets, result[column] == assets[f"_k_{column}"], "left")
        kept = F.col(f"_k_{column}").isNotNull()
        result = result.withColumn(column, F.when(kept, F.col(column)))
        keep = keep | kept
    return (
        result.where(keep)
        .drop(*[f"_k_{c}" for c in ASSET_COLUMNS])
        .withColumnRenamed(NEW, "entity_id")
        .drop(OLD)
    )


def events_in_scope(events: DataFrame, recompute: DataFrame) -> DataFrame:
    """Events the replay accounts for: of a recomputed entity (either version) or on a scoped asset."""
    from pyspark.sql import functions as F

    marked = _flag(_flag(events, recompute, OLD, "_ro"), recompute, NEW, "_rn")
    mine = marked.where(F.col("_ro") | F.col("_rn"))
    on_asset = F.lit(False)
    result = marked
    for column in ASSET_COLUMNS:
        assets = mine.where(F.col(column).isNotNull()).select(F.col(column).alias(f"_s_{column}")).distinct()
        result = result.join(assets, result[column] == assets[f"_s_{column}"], "left")
        on_asset = on_asset | F.col(f"_s_{column}").isNotNull()
    return result.where(F.col("_ro") | F.col("_rn") | on_asset).drop(
        "_ro", "_rn", *[f"_s_{c}" for c in ASSET_COLUMNS]
    )


def input_accounting(scope_events: DataFrame) -> dict[str, int]:
    """Every event in scope is ``scored`` (an entity and an asset) or ``rejected`` (one missing)."""
    from pyspark.sql import functions as F

    has_asset = F.lit(False)
    for column in ASSET_COLUMNS:
        has_asset = has_asset | F.col(column).isNotNull()
    scored = F.col(NEW).isNotNull() & has_asset
    row = scope_events.agg(
        F.count(F.lit(1)).alias("events"),
        F.count_if(scored).alias("scored"),
        F.count_if(~scored).alias("rejected"),
    ).collect()[0]
    return {"events": int(row["events"]), "scored": int(row["scored"]), "rejected": int(row["rejected"])}


# -- the scope report -------------------------------------------------------------------------


@dataclass(frozen=True)
class ProducingRun:
    """A run whose rows in serving the replay supersedes, with what the ledger knows of it."""

    run_id: str
    rows: int
    engines: tuple[str, ...]
    """Engine labels of its rows in scope (``correlation@1``)."""
    in_ledger: bool
    publications: tuple[int, ...] = ()
    """Serving versions the ledger records this run as having published."""


@dataclass(frozen=True)
class Estimate:
    """What the replay will read and write, estimated before anything runs."""

    bytes_to_read: int
    rows_to_read: int
    files_to_read: int
    rows_to_write: int
    max_bytes_read: int
    within_budget: bool = field(init=False)
    """The bytes to read do not exceed the plan's ``max_bytes_read`` (derived)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "within_budget", self.bytes_to_read <= self.max_bytes_read)


@dataclass(frozen=True)
class ReplayScope:
    """The dry run's answer: what a replay would read, recompute, supersede and write."""

    run_id: str
    plan: str
    purpose: str
    table: str
    engine_change: str
    engine_label: str
    pins: Mapping[str, int]
    event_range: tuple[str | None, str | None]
    affected_entity_count: int
    affected_entities: tuple[str, ...]
    """Ids whose membership differs (both versions' ids), sorted; at most :data:`MAX_LISTED`."""
    old_entities: tuple[str, ...]
    """Affected ids under the old version (superseded or regrouped)."""
    new_entities: tuple[str, ...]
    """Affected ids under the new version."""
    recomputed_entity_count: int
    """Affected entities plus those on an asset whose crowding flips."""
    partitions: tuple[str, ...]
    """The answer table's partitions in scope (``valid_month``): months of serving rows
    involving a recomputed entity plus months of new rows."""
    changed_partitions: tuple[str, ...]
    """The subset the candidate rewrites: months where a row is superseded, retracted or added."""
    serving_rows_in_scope: int
    new_rows: int
    to_supersede: int
    to_retract: int
    to_insert: int
    unchanged: int
    producing_runs: tuple[ProducingRun, ...]
    estimate: Estimate
    inputs: Mapping[str, int] = field(default_factory=dict)
    """Input accounting of the events in scope: events, scored, rejected, held."""
    change_kind: str = ChangeKind.RESOLVER.value
    """``resolver`` (affected = entities whose membership differs) or ``producer`` (affected =
    every entity with an asset in range: the whole answer is decided again)."""
    inputs_route: str = "the current versions"
    """Where the pinned versions come from: the current versions, or an earlier run's pins."""
