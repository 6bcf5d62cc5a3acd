"""Point-in-time-correct training rows (W4): one row per decision point, features as known then.

Pure transforms (DataFrames in, a DataFrame out) over tables the caller has already read
*as the lake knew them at the build's as-of time T* (:mod:`workloads.ml.training_set` pins
them). Two clocks meet here, and both are guarded:

* **The lake's knowledge time** (transaction time, the clock of ``asof --at``): every input
  is a table version current at T, and correlations are filtered on their bitemporal
  columns (``recorded_at <= T`` and not superseded by T). A restatement published after T,
  or an outcome ingested after T, is not in the inputs at all.
* **The business timeline** (valid time): a decision point is an order at its event time
  ``t``. Its row sees only what precedes ``t``:

  - ``entity_daily`` of the order's entity over the :data:`DAILY_WINDOW_DAYS` complete days
    before ``t``'s day (``day`` in ``[date(t) - 30, date(t) - 1]``); the day of ``t`` itself
    is excluded because its row also holds events after ``t``. Outcomes count on their
    arrival day in ``entity_daily``, so ``chargebacks_30d`` / ``fraud_labels_30d`` only hold
    outcomes that had arrived.
  - the W1 baseline (``order_amount``, 90-day window) of the latest day before ``t``'s day,
    at most :data:`BASELINE_TTL_DAYS` old: Feast's point-in-time rule (latest feature row
    with event timestamp <= t, within the TTL, else null).
  - correlations naming the entity whose ``valid_from <= t``: how many, their highest
    confidence, and the engine labels that decided them.

* **The label** (:func:`labels`): the first confirmed outcome (:data:`POSITIVE_OUTCOMES`) of
  the order that *arrived* (its Silver ``ingest_time``, the delivery) after ``t`` and within
  the horizon, and not after T. A decision point whose horizon had not closed by what the
  lake knew at T (``t + horizon`` later than T or than the last delivery in the Silver
  version read) is *censored*: left out and counted, because its "no outcome" is not known
  yet.

Where this differs from Feast's point-in-time join (``event_timestamp <= t``, TTL, ties to the
highest ``created_timestamp``, LEFT JOIN): Feast never compares the created timestamp with
``t``, so a row written late leaks; here the as-of version pin and the bitemporal filter
guard the lake's clock. The residual: ``entity_daily`` and correlations carry no per-fact
arrival time, so a *late* event (delivered after ``t``, dated before it) already counts in
a window day before ``t`` when the version read at T holds it. The lateness policy bounds
it (late facts for a closed month are booked on their arrival day instead).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Final

from lakehouse.errors import UsageError
from workloads.gold.features import DAILY_COLUMNS, DAILY_KEY
from workloads.vocabulary import Feed, OutcomeLabel

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "BASELINE_METRIC",
    "BASELINE_TTL_DAYS",
    "BASELINE_WINDOW_DAYS",
    "DAILY_WINDOW_DAYS",
    "FEATURE_COLUMNS",
    "POSITIVE_OUTCOMES",
    "TRAINING_COLUMNS",
    "TrainingWindow",
    "decision_points",
    "knowledge_end",
    "known_correlations",
    "label_horizon_days",
    "training_rows",
]

DAILY_WINDOW_DAYS: Final = 30
"""Complete days of ``entity_daily`` before the decision's day that its window sums cover."""
BASELINE_METRIC: Final = "order_amount"
BASELINE_WINDOW_DAYS: Final = 90
BASELINE_TTL_DAYS: Final = 30
"""A baseline row older than this (in days before the decision's day) is too stale to use."""

POSITIVE_OUTCOMES: Final[frozenset[str]] = frozenset(OutcomeLabel)
"""Outcome labels that make a decision point positive: every confirmed outcome (fraud or chargeback)."""

DAILY_SUMS: Final[tuple[str, ...]] = tuple(
    c for c in DAILY_COLUMNS if c not in (*DAILY_KEY, "month", "resolver")
)
"""``entity_daily`` columns summed over the window (``<column>_30d``)."""

FEATURE_COLUMNS: Final[tuple[str, ...]] = (
    "amount",
    *(f"{c}_30d" for c in DAILY_SUMS),
    "active_days_30d",
    "amount_mean_90d",
    "amount_std_90d",
    "correlations",
    "max_confidence",
)
"""The numeric features a model trains on, in a fixed order (nulls mean "not known then")."""

TRAINING_COLUMNS: Final[tuple[str, ...]] = (
    "decision_id",
    "entity_id",
    "decision_time",
    "decision_month",
    "resolver",
    *FEATURE_COLUMNS,
    "baseline_day",
    "correlation_engines",
    "label",
    "label_value",
    "label_arrived_at",
)
"""A training row's columns besides the build's own (``training_set_id``, ``as_of``, horizon)."""

_HORIZON = re.compile(r"^\s*(-?\d+)\s*d\s*$")


def label_horizon_days(text: str) -> int:
    """``90d`` -> 90. A negative, zero or malformed horizon is refused (exit 2)."""
    match = _HORIZON.match(text)
    if match is None:
        raise UsageError(f"--label-horizon: expected a number of days such as 90d, got {text!r}")
    days = int(match.group(1))
    if days <= 0:
        raise UsageError(f"--label-horizon: must be a positive number of days, got {text!r}")
    return days


@dataclass(frozen=True)
class TrainingWindow:
    """What one build asks for: the lake's moment T, the label horizon and the decision dates."""

    as_of: datetime
    horizon_days: int
    since: date | None = None
    until: date | None = None
    """Decision points with ``since <= date(t) < until`` (either end open when None)."""


def knowledge_end(silver: DataFrame, as_of: datetime) -> datetime:
    """The last moment a horizon can close in: the earlier of T and the last delivery in Silver."""
    from pyspark.sql import functions as F

    from ledger.clock import utc

    last = silver.agg(F.max("ingest_time")).first()
    return min(as_of, utc(last[0])) if last and last[0] else as_of


def decision_points(silver: DataFrame, window: TrainingWindow, knowledge_end: datetime) -> DataFrame:
    """Orders of a resolved entity in the date range: ``decision_id``, ``entity_id``,
    ``decision_time``, ``resolver``, ``amount``, and ``censored`` (horizon not closed by
    ``knowledge_end``, the earlier of T and the last delivery the Silver version holds)."""
    from pyspark.sql import functions as F

    orders = silver.where((F.col("domain") == Feed.ORDERS.value) & F.col("entity_id").isNotNull())
    if window.since is not None:
        orders = orders.where(F.col("event_date") >= F.lit(window.since))
    if window.until is not None:
        orders = orders.where(F.col("event_date") < F.lit(window.until))
    closes = F.col("event_time") + F.make_interval(days=F.lit(window.horizon_days))
    return orders.select(
        F.col("event_id").alias("decision_id"),
        "entity_id",
        F.col("event_time").alias("decision_time"),
        "resolver",
        F.col("amount").cast("double").alias("amount"),
        (closes > F.lit(knowledge_end)).alias("censored"),
    )


def known_correlations(correlations: DataFrame, known_at: datetime) -> DataFrame:
    """The row versions the lake held as current at ``known_at`` (route (a) of ``asof``)."""
    from pyspark.sql import functions as F

    at = F.lit(known_at)
    return correlations.where(
        (F.col("recorded_at") <= at) & (F.col("superseded_at").isNull() | (F.col("superseded_at") > at))
    )


def _daily_window(points: DataFrame, daily: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    day = F.to_date("p.decision_time")
    joined = points.alias("p").join(
        daily.alias("d"),
        (F.col("d.entity_id") == F.col("p.entity_id"))
        & (F.col("d.day") < day)
        & (F.col("d.day") >= F.date_sub(day, DAILY_WINDOW_DAYS)),
        "left",
    )
    sums = [F.coalesce(F.sum(F.col(f"d.{c}")), F.lit(0)).alias(f"{c}_30d") for c in DAILY_SUMS]
    return joined.groupBy("p.decision_id").agg(*sums, F.count("d.day").cast("int").alias("active_days_30d"))


def _baseline(points: DataFrame, baselines: DataFrame) -> DataFrame:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    day = F.to_date("p.decision_time")
    chosen = baselines.where(
        (F.col("metric") == BASELINE_METRIC) & (F.col("window_days") == BASELINE_WINDOW_DAYS)
    )
    joined = points.alias("p").join(
        chosen.alias("b"),
        (F.col("b.entity_id") == F.col("p.entity_id"))
        & (F.col("b.day") < day)
        & (F.col("b.day") >= F.date_sub(day, BASELINE_TTL_DAYS)),
    )
    latest = Window.partitionBy("p.decision_id").orderBy(F.col("b.day").desc())
    return (
        joined.select(
            "p.decision_id",
            F.col("b.mean").alias("amount_mean_90d"),
            F.col("b.stddev").alias("amount_std_90d"),
            F.col("b.day").alias("baseline_day"),
            F.row_number().over(latest).alias("_rank"),
        )
        .where("_rank = 1")
        .drop("_rank")
    )


def _correlation_summary(points: DataFrame, known: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    sides = known.select(
        F.explode(F.array("entity_a", "entity_b")).alias("entity_id"), "valid_from", "confidence", "engine"
    )
    joined = points.alias("p").join(
        sides.alias("c"),
        (F.col("c.entity_id") == F.col("p.entity_id")) & (F.col("c.valid_from") <= F.col("p.decision_time")),
    )
    return joined.groupBy("p.decision_id").agg(
        F.count("*").cast("int").alias("correlations"),
        F.max("c.confidence").alias("max_confidence"),
        F.array_join(F.array_sort(F.collect_set("c.engine")), " | ").alias("correlation_engines"),
    )


def labels(points: DataFrame, silver: DataFrame, window: TrainingWindow) -> DataFrame:
    """Per decision point, the first positive outcome that arrived in ``(t, t + horizon]``
    and not after T: ``label_value`` and ``label_arrived_at`` (absent: no such outcome)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    outcomes = silver.where(
        (F.col("domain") == Feed.OUTCOMES.value)
        & F.col("order_id").isNotNull()
        & F.col("label").isin(*sorted(POSITIVE_OUTCOMES))
    ).select(
        "order_id", F.col("label").alias("label_value"), F.col("ingest_time").alias("arrived"), "event_id"
    )
    t = F.col("p.decision_time")
    joined = points.alias("p").join(
        outcomes.alias("o"),
        (F.col("o.order_id") == F.col("p.decision_id"))
        & (F.col("o.arrived") > t)
        & (F.col("o.arrived") <= t + F.make_interval(days=F.lit(window.horizon_days)))
        & (F.col("o.arrived") <= F.lit(window.as_of)),
    )
    first = Window.partitionBy("p.decision_id").orderBy("o.arrived", "o.event_id")
    return (
        joined.select(
            "p.decision_id",
            "o.label_value",
            F.col("o.arrived").alias("label_arrived_at"),
            F.row_number().over(first).alias("_rank"),
        )
        .where("_rank = 1")
        .drop("_rank")
    )


def training_rows(
    silver: DataFrame,
    daily: DataFrame,
    baselines: DataFrame,
    correlations: DataFrame,
    window: TrainingWindow,
    knowledge_end: datetime,
) -> DataFrame:
    """Every uncensored decision point with its features and label (:data:`TRAINING_COLUMNS`).

    ``correlations`` are the rows of any version holding the history up to T; they are
    filtered to what was current at T here.
    """
    from pyspark.sql import functions as F

    points = decision_points(silver, window, knowledge_end).where(~F.col("censored")).drop("censored")
    known = known_correlations(correlations, window.as_of)
    rows = (
        points.join(_daily_window(points, daily), "decision_id", "left")
        .join(_baseline(points, baselines), "decision_id", "left")
        .join(_correlation_summary(points, known), "decision_id", "left")
        .join(labels(points, silver, window), "decision_id", "left")
    )
    return rows.select(
        "decision_id",
        "entity_id",
        "decision_time",
        F.date_format("decision_time", "yyyy-MM").alias("decision_month"),
        "resolver",
        "amount",
        *(F.col(f"{c}_30d").cast("double").alias(f"{c}_30d") for c in DAILY_SUMS),
        "active_days_30d",
        "amount_mean_90d",
        "amount_std_90d",
        F.coalesce("correlations", F.lit(0)).alias("correlations"),
        "max_confidence",
        "baseline_day",
        "correlation_engines",
        F.when(F.col("label_value").isNotNull(), 1).otherwise(0).alias("label"),
        "label_value",
        "label_arrived_at",
    )
