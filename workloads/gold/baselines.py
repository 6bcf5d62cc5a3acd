"""W1 wide-window baselines: per entity, metric and trailing window, what is normal.

What: for every day on which an entity has a ``gold.entity_daily`` row, and for every
metric and window (30/90/365/730 days), the rolling mean, the standard deviation, the
number of days observed and a day-of-week seasonality factor.

How the window is counted (the choice, and why):

* **Calendar days, zero-filled.** The window of day ``d`` and width ``W`` is the calendar
  days ``[d - W + 1, d]``. A day without a ``gold.entity_daily`` row counts as a day with
  value 0: "no orders today" is a real observation for a risk baseline, and skipping
  idle days would make an entity that orders once a month look as busy as one that
  orders every day.
* **Clipped at the entity's first day.** Days before the entity's first row are not
  zeros but unknown (the entity did not exist for us yet), so the window starts at
  ``max(d - W + 1, first_day)``. ``observations`` is the number of calendar days in that
  clipped window, ``min(W, d - first_day + 1)``. A new entity's 730-day baseline is
  therefore its baseline over the days it has existed, not one diluted by years of zeros.
* **Population standard deviation** over those ``observations`` days (defined, as 0, for
  a single day; the sample estimator is not).
* **Seasonality** ``dow_factor``: the mean over the days of the window that fall on
  ``d``'s weekday, divided by the mean over the whole window; 1.0 when the window mean
  is 0 (undefined). 1.3 means "this weekday is 30% busier than this entity's average".

Determinism: every sum is exact (integers in minor units held as DECIMAL(38,0), amounts
scaled by 100), and the doubles are derived row by row from those exact sums, so the
result does not depend on partitioning or evaluation order: an incremental recompute
gives bit-identical rows to a full one.

Incrementality: a change of day ``c`` affects the windows of days ``c .. c + H`` with
``H = max(windows) - 1`` (:data:`HORIZON_DAYS`). :func:`affected_days` derives exactly
those (entity, day) keys from a set of changed keys; :mod:`workloads.gold.build` recomputes only
them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

NAME: Final = "baselines"
VERSION: Final = "1"
ENGINE: Final = f"{NAME}@{VERSION}"

WINDOWS: Final[tuple[int, ...]] = (30, 90, 365, 730)
"""Trailing window widths in calendar days."""

HORIZON_DAYS: Final = max(WINDOWS) - 1
"""A change on day c can alter baselines of days c .. c + HORIZON_DAYS, no later."""

METRICS: Final[Mapping[str, int]] = {
    "orders": 1,
    "order_amount": 100,
    "refunds": 1,
    "refund_amount": 100,
    "logins": 1,
    "failed_logins": 1,
    "devices": 1,
    "cards": 1,
    "chargebacks": 1,
    "fraud_labels": 1,
}
"""Metric column of ``gold.entity_daily`` -> scale to exact integer minor units (cents)."""

KEY: Final[tuple[str, ...]] = ("entity_id", "day")

_EXACT = "decimal(38,0)"


def _unpivot(daily: DataFrame, metrics: Mapping[str, int]) -> DataFrame:
    """One row per (entity, day, metric) with the value as an exact integer and its scale."""
    from pyspark.sql import functions as F

    values = [(F.col(m) * F.lit(scale)).cast(_EXACT).alias(m) for m, scale in sorted(metrics.items())]
    wide = daily.select("entity_id", "day", "month", *values)
    long = wide.unpivot(["entity_id", "day", "month"], tuple(sorted(metrics)), "metric", "v")
    scale_map = F.create_map(*[F.lit(x) for m, s in sorted(metrics.items()) for x in (m, s)])
    return long.withColumn("scale", scale_map[F.col("metric")].cast("double"))


def _window_sums(width: int) -> list[Column]:
    """Exact trailing sums of one window width: total, sum of squares and same-weekday total."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    frame = (-(width - 1), 0)
    by_metric = Window.partitionBy("entity_id", "metric").orderBy("dn").rangeBetween(*frame)
    by_weekday = Window.partitionBy("entity_id", "metric", "dow").orderBy("dn").rangeBetween(*frame)
    return [
        F.sum("v").over(by_metric).alias(f"s{width}"),
        F.sum(F.col("v") * F.col("v")).over(by_metric).alias(f"q{width}"),
        F.sum("v").over(by_weekday).alias(f"w{width}"),
    ]


def _window_stats(width: int) -> Column:
    """A struct of the baseline of one window width, from the sums of :func:`_window_sums`."""
    from pyspark.sql import functions as F

    total, squares, weekday_total = F.col(f"s{width}"), F.col(f"q{width}"), F.col(f"w{width}")
    n = F.least(F.lit(width), F.col("dn") - F.col("first_dn") + 1).cast("bigint")
    # Days in [d - n + 1, d] on d's weekday: d, d-7, d-14, ...
    n_weekday = (F.floor((n - 1) / 7) + 1).cast("bigint")
    mean = total.cast("double") / n.cast("double") / F.col("scale")
    variance_num = (n.cast(_EXACT) * squares - total * total).cast("double")
    variance = variance_num / (n * n).cast("double") / (F.col("scale") * F.col("scale"))
    stddev = F.sqrt(F.greatest(variance, F.lit(0.0)))
    factor = F.when(total == 0, F.lit(1.0)).otherwise(
        (weekday_total * n.cast(_EXACT)).cast("double") / (total * n_weekday.cast(_EXACT)).cast("double")
    )
    return F.struct(
        F.lit(width).cast("int").alias("window_days"),
        mean.alias("mean"),
        stddev.alias("stddev"),
        n.alias("observations"),
        factor.alias("dow_factor"),
    )


def baselines(
    daily: DataFrame,
    *,
    metrics: Mapping[str, int] = METRICS,
    windows: Sequence[int] = WINDOWS,
) -> DataFrame:
    """Baselines of every (entity, day) row of ``daily`` (rows of ``gold.entity_daily``).

    ``daily`` must hold each entity's whole history (or at least everything from
    ``HORIZON_DAYS`` before the first day wanted, and the true first day): the windows
    and the first-day clip are computed from it. Output columns are those of
    ``gold.baselines``.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if not windows or min(windows) < 1:
        raise ValueError(f"window widths must be positive day counts, got {list(windows)}")
    long = _unpivot(daily, metrics)
    entity = Window.partitionBy("entity_id", "metric")
    prepared = (
        long.withColumn("dn", F.unix_date("day"))
        .withColumn("dow", F.pmod(F.col("dn"), F.lit(7)))
        .withColumn("first_dn", F.min("dn").over(entity))
    )
    widths = sorted(set(windows))
    sums = prepared.select(
        "entity_id",
        "day",
        "month",
        "metric",
        "scale",
        "dn",
        "first_dn",
        *[c for w in widths for c in _window_sums(w)],
    )
    stats = F.array(*[_window_stats(w) for w in widths])
    return sums.select("entity_id", "day", "month", "metric", F.explode(stats).alias("s")).select(
        "entity_id",
        "day",
        "month",
        "metric",
        "s.window_days",
        "s.mean",
        "s.stddev",
        "s.observations",
        "s.dow_factor",
    )


def affected_days(all_keys: DataFrame, changed_keys: DataFrame, *, horizon: int = HORIZON_DAYS) -> DataFrame:
    """The (entity_id, day) keys whose baselines a change can alter.

    ``all_keys``: every (entity_id, day) that exists before or after the change (old keys
    union new keys). ``changed_keys``: the (entity_id, day) keys added, removed or changed.
    A key is affected when some changed day ``c`` of the same entity has
    ``c <= day <= c + horizon``. Removed keys are returned too (their stored baselines
    must go). Only entities with a change appear.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    changed = changed_keys.select("entity_id", "day").distinct().withColumn("changed_day", F.col("day"))
    keys = all_keys.select("entity_id", "day").distinct()
    # An inner join with the distinct changed entities (a semi-join here makes Spark 4.1 ask an
    # Iceberg source for statistics before pushdown, an internal error under SPARK_TESTING).
    scoped = keys.join(changed.select("entity_id").distinct(), "entity_id")
    marked = scoped.join(changed, ["entity_id", "day"], "left")
    upto = Window.partitionBy("entity_id").orderBy("day").rowsBetween(Window.unboundedPreceding, 0)
    last_change = F.max("changed_day").over(upto)
    return (
        marked.withColumn("last_change", last_change)
        .where(F.col("last_change").isNotNull() & (F.datediff("day", "last_change") <= F.lit(horizon)))
        .select("entity_id", "day")
    )
