"""What counts as the outcome of a correlation (W5), defined once, and its decisions.

**A decision** is a correlation row version an engine release recorded (its ``engine`` label
names the release, e.g. ``correlation@1`` in ``correlation@1;entity_resolution@3``) by the
moment T: its ``confidence`` is the probability it stated. A rebuild that recorded the same
correlation with the same confidence is the same decision (the earliest row version counts);
one that changed the confidence is a new decision. Superseded and retracted row versions
count: they were what the system decided then.

**Its outcome** (the definition, once): a correlation links two entities through shared
assets (devices or cards, listed in its evidence). It is *confirmed* (1) when a confirmed
outcome (:data:`~workloads.ml.point_in_time.POSITIVE_OUTCOMES`: fraud or chargeback) of an
order placed on one of its shared assets *arrived* (Silver ``ingest_time``) after the
correlation's ``valid_from`` and within the horizon, and not after T; *not confirmed* (0)
when the horizon closed without one. A decision whose horizon had not closed by the
knowledge end (the earlier of T and the last delivery) is *censored*: left out, counted.

Why through the assets and not the entity ids: the ids are the deciding resolver's, and
Silver may have been restated under another resolver since; the assets are raw identifiers
recorded in the evidence with the decision. So the join keeps the decision version (its
``engine`` label and ``run_id`` travel with each row) whatever was restated after it.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import TYPE_CHECKING, Final

from workloads.engines.correlation import ASSETS
from workloads.ml.point_in_time import POSITIVE_OUTCOMES
from workloads.vocabulary import Feed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["DECISION_COLUMNS", "decision_outcomes", "engine_decisions"]

DECISION_COLUMNS: Final[tuple[str, ...]] = (
    "correlation_id",
    "scope",
    "valid_from",
    "confidence",
    "engine",
    "run_id",
    "recorded_at",
    "assets",
)
"""A decision's columns: what was decided, by which release and run, when, on which assets."""


def engine_decisions(
    correlations: DataFrame,
    engine: str,
    known_at: datetime,
    *,
    scope: str | None = None,
    since: date | None = None,
    until: date | None = None,
) -> DataFrame:
    """The decisions of release ``engine`` (``name@version``) recorded by ``known_at``,
    optionally of one correlation type and with ``since <= date(valid_from) < until``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = correlations.where(
        F.array_contains(F.split("engine", ";"), engine) & (F.col("recorded_at") <= F.lit(known_at))
    )
    if scope is not None:
        rows = rows.where(F.col("correlation_type") == scope)
    if since is not None:
        rows = rows.where(F.to_date("valid_from") >= F.lit(since))
    if until is not None:
        rows = rows.where(F.to_date("valid_from") < F.lit(until))
    first = Window.partitionBy("correlation_id", "confidence").orderBy("recorded_at", "run_id")
    assets = F.from_json("evidence", "struct<assets:array<string>>").getField("assets")
    return (
        rows.withColumn("_rank", F.row_number().over(first))
        .where("_rank = 1")
        .select(
            "correlation_id",
            F.col("correlation_type").alias("scope"),
            "valid_from",
            "confidence",
            "engine",
            "run_id",
            "recorded_at",
            F.coalesce(assets, F.array().cast("array<string>")).alias("assets"),
        )
    )


def _orders_by_asset(silver: DataFrame) -> DataFrame:
    """``(scope, asset, order_id)`` for every order and each asset column of a correlation type."""
    from functools import reduce

    from pyspark.sql import functions as F

    orders = silver.where(F.col("domain") == Feed.ORDERS.value)
    per_type = [
        orders.where(F.col(column).isNotNull()).select(
            F.lit(kind).alias("scope"), F.col(column).alias("asset"), F.col("event_id").alias("order_id")
        )
        for kind, column in sorted(ASSETS.items())
    ]
    return reduce(lambda a, b: a.unionByName(b), per_type)


def decision_outcomes(
    decisions: DataFrame, silver: DataFrame, horizon_days: int, as_of: datetime, knowledge_end: datetime
) -> DataFrame:
    """Each decision with ``outcome`` (1 confirmed, 0 not) and ``censored`` (horizon still open)."""
    from pyspark.sql import functions as F

    outcomes = silver.where(
        (F.col("domain") == Feed.OUTCOMES.value)
        & F.col("order_id").isNotNull()
        & F.col("label").isin(*sorted(POSITIVE_OUTCOMES))
    ).select("order_id", F.col("ingest_time").alias("arrived"))
    closes = F.col("d.valid_from") + F.make_interval(days=F.lit(horizon_days))
    assets = decisions.select(
        "correlation_id", "confidence", "scope", "valid_from", F.explode("assets").alias("asset")
    )
    confirmed = (
        assets.alias("d")
        .join(_orders_by_asset(silver).alias("a"), ["scope", "asset"])
        .join(outcomes.alias("o"), "order_id")
        .where((F.col("o.arrived") > F.col("d.valid_from")) & (F.col("o.arrived") <= closes))
        .where(F.col("o.arrived") <= F.lit(as_of))
        .select("correlation_id", "confidence")
        .distinct()
        .withColumn("outcome", F.lit(1))
    )
    return (
        decisions.alias("d")
        .join(confirmed, ["correlation_id", "confidence"], "left")
        .select(
            *DECISION_COLUMNS,
            F.coalesce("outcome", F.lit(0)).alias("outcome"),
            (closes > F.lit(knowledge_end)).alias("censored"),
        )
    )
