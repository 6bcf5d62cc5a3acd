"""Correlation engine v1: entities linked by a shared device or a shared card.

What: from Silver events, every pair of different entities that used the same device
(``shared_device``) or the same card fingerprint (``shared_card``) becomes one
correlation per type and pair, in the schema of ``gold.correlations``.

Rules (engine ``correlation@1``):

* An *asset* is a non-null ``device_id`` or ``card_fingerprint`` on a Silver event whose
  ``entity_id`` is known; every domain counts (orders and logins carry devices, orders
  carry cards).
* Assets used by more than ``max_entities_per_asset`` entities
  (:data:`MAX_ENTITIES_PER_ASSET`) are ignored: a device behind a shop counter or a
  shared corporate card links everyone and so tells nothing, and would make the pair
  count quadratic.
* ``valid_from``: the first moment both entities had used a shared asset, i.e. for each
  shared asset the later of the two entities' first use, and the earliest of those over
  the pair's shared assets. ``valid_to`` is open (null).
* ``evidence``: canonical JSON (keys sorted, no whitespace, the same text
  :func:`lakehouse.digest.canonical_json` gives) of ``assets`` (the shared assets,
  sorted), ``events_a`` / ``events_b`` (each entity's events on those assets) and
  ``shared_assets`` (their number).
* ``confidence``: with ``s`` shared assets and ``e = min(events_a, events_b)``
  co-occurring events, ``x = s + log2(e)`` and ``confidence = x / (x + 1)``, rounded to 6
  places and capped at 0.999999. So one shared asset used once by each side gives 0.5;
  more shared assets or more use on both sides raise it, never to 1. Monotone in both,
  uncalibrated on purpose (calibration is W5's job).
* ``correlation_id``: sha256 of the canonical JSON of
  ``[correlation_type, entity_a, entity_b, valid_from]`` with ``entity_a < entity_b`` and
  ``valid_from`` as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (UTC); :func:`correlation_id` computes
  the same id in Python.

Pure: the output depends only on the Silver rows and the caller's ``run_id`` and
``recorded_at`` (which record *when* and *by which run*, not *what*).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from lakehouse.digest import digest_of

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

NAME: Final = "correlation"
VERSION: Final = "1"
ENGINE: Final = f"{NAME}@{VERSION}"

ASSETS: Final[dict[str, str]] = {"shared_device": "device_id", "shared_card": "card_fingerprint"}
"""Correlation type -> the Silver column holding the shared asset."""

MAX_ENTITIES_PER_ASSET: Final = 50
"""Assets shared by more entities than this are ignored (see the module docstring)."""

PARAMETERS: Final[dict[str, Any]] = {
    "max_entities_per_asset": MAX_ENTITIES_PER_ASSET,
    "types": sorted(ASSETS),
}
"""Every parameter of v1; its canonical digest is part of the engine's identity."""

STATUS: Final = "authoritative"
TIMESTAMP_FORMAT: Final = "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'"
"""Spark pattern of ``valid_from`` inside the id; the session time zone is UTC."""

CONTENT_COLUMNS: Final[tuple[str, ...]] = (
    "correlation_id",
    "correlation_type",
    "entity_a",
    "entity_b",
    "valid_from",
    "valid_to",
    "valid_month",
    "confidence",
    "evidence",
    "engine",
)
"""What a correlation says, as opposed to who recorded it when and its lifecycle status."""


def correlation_id(correlation_type: str, entity_a: str, entity_b: str, valid_from: datetime) -> str:
    """The deterministic id of a correlation, computed in Python (same as the engine's)."""
    if not entity_a < entity_b:
        raise ValueError(f"entity_a must sort before entity_b, got {entity_a!r}, {entity_b!r}")
    moment = valid_from if valid_from.tzinfo is not None else valid_from.replace(tzinfo=UTC)
    text = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return digest_of([correlation_type, entity_a, entity_b, text])


def confidence(shared_assets: int, events_a: int, events_b: int) -> float:
    """The v1 confidence of a pair, in Python (same formula as the engine's column)."""
    import math

    x = shared_assets + math.log2(max(1, min(events_a, events_b)))
    return min(round(x / (x + 1), 6), 0.999999)


def _confidence_column(shared: Column, events_a: Column, events_b: Column) -> Column:
    from pyspark.sql import functions as F

    x = shared.cast("double") + F.log2(F.greatest(F.least(events_a, events_b), F.lit(1)).cast("double"))
    return F.least(F.round(x / (x + F.lit(1.0)), 6), F.lit(0.999999))


def _pairs(silver: DataFrame, correlation_type: str, column: str, max_entities: int) -> DataFrame:
    """One row per (entity_a, entity_b) sharing at least one asset of ``column``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    uses = (
        silver.where(F.col("entity_id").isNotNull() & F.col(column).isNotNull())
        .groupBy(F.col(column).alias("asset"), "entity_id")
        .agg(F.min("event_time").alias("first_use"), F.count(F.lit(1)).alias("events"))
    )
    # A window count, not an anti-join with a grouped count: Spark 4.1 plans the latter by
    # asking a DSv2 (Iceberg) source for statistics before pushdown, an internal error.
    sharing = F.count(F.lit(1)).over(Window.partitionBy("asset"))
    uses = uses.withColumn("_sharing", sharing).where(F.col("_sharing") <= max_entities).drop("_sharing")
    a, b = uses.alias("a"), uses.alias("b")
    linked = a.join(b, (F.col("a.asset") == F.col("b.asset")) & (F.col("a.entity_id") < F.col("b.entity_id")))
    return (
        linked.select(
            F.col("a.entity_id").alias("entity_a"),
            F.col("b.entity_id").alias("entity_b"),
            F.col("a.asset").alias("asset"),
            F.greatest("a.first_use", "b.first_use").alias("since"),
            F.col("a.events").alias("ea"),
            F.col("b.events").alias("eb"),
        )
        .groupBy("entity_a", "entity_b")
        .agg(
            F.min("since").alias("valid_from"),
            F.sort_array(F.collect_list("asset")).alias("assets"),
            F.sum("ea").alias("events_a"),
            F.sum("eb").alias("events_b"),
            F.count(F.lit(1)).alias("shared_assets"),
        )
        .withColumn("correlation_type", F.lit(correlation_type))
    )


def correlate_v1(
    silver: DataFrame,
    *,
    run_id: str,
    recorded_at: datetime,
    max_entities_per_asset: int = MAX_ENTITIES_PER_ASSET,
) -> DataFrame:
    """Correlations of v1 from Silver events, in the column order of ``gold.correlations``."""
    from functools import reduce

    from pyspark.sql import functions as F

    moment = recorded_at if recorded_at.tzinfo is not None else recorded_at.replace(tzinfo=UTC)
    pairs = reduce(
        lambda left, right: left.unionByName(right),
        [_pairs(silver, kind, column, max_entities_per_asset) for kind, column in sorted(ASSETS.items())],
    )
    # Struct fields in alphabetical order: to_json then equals canonical_json.
    evidence = F.to_json(
        F.struct(
            F.col("assets").alias("assets"),
            F.col("events_a").alias("events_a"),
            F.col("events_b").alias("events_b"),
            F.col("shared_assets").alias("shared_assets"),
        )
    )
    identity = F.to_json(
        F.array(
            F.col("correlation_type"),
            F.col("entity_a"),
            F.col("entity_b"),
            F.date_format("valid_from", TIMESTAMP_FORMAT),
        )
    )
    return pairs.select(
        F.sha2(identity, 256).alias("correlation_id"),
        "correlation_type",
        "entity_a",
        "entity_b",
        "valid_from",
        F.lit(None).cast("timestamp").alias("valid_to"),
        F.date_format("valid_from", "yyyy-MM").alias("valid_month"),
        _confidence_column(F.col("shared_assets"), F.col("events_a"), F.col("events_b")).alias("confidence"),
        evidence.alias("evidence"),
        F.lit(ENGINE).alias("engine"),
        F.lit(run_id).alias("run_id"),
        F.lit(STATUS).alias("status"),
        F.lit(moment).cast("timestamp").alias("recorded_at"),
        F.lit(None).cast("timestamp").alias("superseded_at"),
        F.lit(None).cast("string").alias("superseded_by"),
        F.lit(None).cast("string").alias("supersede_reason"),
    )


# -- version 2 ------------------------------------------------------------------------------------------

VERSION_V2: Final = "2"
ENGINE_V2: Final = f"{NAME}@{VERSION_V2}"
PARAMETERS_V2: Final[dict[str, Any]] = {
    "max_entities_per_asset": MAX_ENTITIES_PER_ASSET,
    "types": sorted(ASSETS),
    "weighting": "inverse_sharing",
}
"""Every parameter of v2; its canonical digest is part of the engine's identity."""


def confidence_v2(weights: list[float], events_a: int, events_b: int) -> float:
    """The v2 confidence of a pair, in Python (same formula as :func:`correlate_v2`'s column).

    ``weights`` holds one weight per shared asset: ``1 / (k - 1)`` for an asset used by
    ``k`` entities, so an asset only the two of them share weighs 1 and one shared by a
    dozen weighs 1/11.
    """
    import math

    x = sum(weights) + math.log2(max(1, min(events_a, events_b)))
    return min(round(x / (x + 1), 6), 0.999999)


def _weighted_pairs(silver: DataFrame, correlation_type: str, column: str, max_entities: int) -> DataFrame:
    """Like v1's pairs, plus the summed rarity weight of the shared assets."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    uses = (
        silver.where(F.col("entity_id").isNotNull() & F.col(column).isNotNull())
        .groupBy(F.col(column).alias("asset"), "entity_id")
        .agg(F.min("event_time").alias("first_use"), F.count(F.lit(1)).alias("events"))
    )
    sharing = F.count(F.lit(1)).over(Window.partitionBy("asset"))
    uses = uses.withColumn("_sharing", sharing).where(F.col("_sharing") <= max_entities)
    a, b = uses.alias("a"), uses.alias("b")
    linked = a.join(b, (F.col("a.asset") == F.col("b.asset")) & (F.col("a.entity_id") < F.col("b.entity_id")))
    return (
        linked.select(
            F.col("a.entity_id").alias("entity_a"),
            F.col("b.entity_id").alias("entity_b"),
            F.col("a.asset").alias("asset"),
            F.greatest("a.first_use", "b.first_use").alias("since"),
            F.col("a.events").alias("ea"),
            F.col("b.events").alias("eb"),
            (F.lit(1.0) / (F.col("a._sharing") - F.lit(1)).cast("double")).alias("weight"),
        )
        .groupBy("entity_a", "entity_b")
        .agg(
            F.min("since").alias("valid_from"),
            F.sort_array(F.collect_list("asset")).alias("assets"),
            F.sum("ea").alias("events_a"),
            F.sum("eb").alias("events_b"),
            F.count(F.lit(1)).alias("shared_assets"),
            F.round(F.sum("weight"), 6).alias("weight"),
        )
        .withColumn("correlation_type", F.lit(correlation_type))
    )


def correlate_v2(
    silver: DataFrame,
    *,
    run_id: str,
    recorded_at: datetime,
    max_entities_per_asset: int = MAX_ENTITIES_PER_ASSET,
) -> DataFrame:
    """Correlations of v2: v1's pairs with confidence weighted by how rare each shared asset is.

    v1 counts every shared asset as 1, so a device shared by 40 entities (a family tablet,
    a kiosk) counts as much as a card only two people ever used. v2 weighs each shared
    asset ``1 / (k - 1)`` (``k`` entities use it): ``x = sum(weights) + log2(min events)``
    and ``confidence = x / (x + 1)`` (rounded to 6 places, capped at 0.999999). Pairs,
    ids, ``valid_from`` and the schema are v1's; ``evidence`` adds ``weight``.
    """
    from functools import reduce

    from pyspark.sql import functions as F

    moment = recorded_at if recorded_at.tzinfo is not None else recorded_at.replace(tzinfo=UTC)
    pairs = reduce(
        lambda left, right: left.unionByName(right),
        [
            _weighted_pairs(silver, kind, column, max_entities_per_asset)
            for kind, column in sorted(ASSETS.items())
        ],
    )
    evidence = F.to_json(
        F.struct(
            F.col("assets").alias("assets"),
            F.col("events_a").alias("events_a"),
            F.col("events_b").alias("events_b"),
            F.col("shared_assets").alias("shared_assets"),
            F.col("weight").alias("weight"),
        )
    )
    identity = F.to_json(
        F.array(
            F.col("correlation_type"),
            F.col("entity_a"),
            F.col("entity_b"),
            F.date_format("valid_from", TIMESTAMP_FORMAT),
        )
    )
    x = F.col("weight") + F.log2(F.greatest(F.least("events_a", "events_b"), F.lit(1)).cast("double"))
    return pairs.select(
        F.sha2(identity, 256).alias("correlation_id"),
        "correlation_type",
        "entity_a",
        "entity_b",
        "valid_from",
        F.lit(None).cast("timestamp").alias("valid_to"),
        F.date_format("valid_from", "yyyy-MM").alias("valid_month"),
        F.least(F.round(x / (x + F.lit(1.0)), 6), F.lit(0.999999)).alias("confidence"),
        evidence.alias("evidence"),
        F.lit(ENGINE_V2).alias("engine"),
        F.lit(run_id).alias("run_id"),
        F.lit(STATUS).alias("status"),
        F.lit(moment).cast("timestamp").alias("recorded_at"),
        F.lit(None).cast("timestamp").alias("superseded_at"),
        F.lit(None).cast("string").alias("superseded_by"),
        F.lit(None).cast("string").alias("supersede_reason"),
    )
