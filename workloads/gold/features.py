"""Per-entity daily features of ``gold.entity_daily``, and how two versions of them differ.

Pure transforms (DataFrame -> DataFrame) over ``silver.events`` rows.

Attribution (which entity an event counts for): its own ``entity_id``, else the entity
of the order it references (``order_id``), which is how outcomes and refunds without a
resolved customer are attributed. Events still without an entity are excluded and
counted by the build. Only the feature domains (:data:`FEATURE_DOMAINS`) count;
settlements mirror orders and carry no feature.

The day of a feature is the event's ``accounting_date``: equal to the event date for
on-time facts, and the ingest date for a late fact booked as a current-period adjustment
(conf/policies.yaml, ``adjust``), so Gold never silently restates a closed period.
Outcomes count on the day they arrive, not on the order's day: a feature of day d then
only holds what was known on day d (point-in-time correct for W4 training sets).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from lakehouse.digest import row_hash_column
from workloads.vocabulary import Feed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "DAILY_COLUMNS",
    "DAILY_KEY",
    "FEATURE_DOMAINS",
    "attribute_events",
    "daily_diff",
    "daily_features",
    "entity_daily",
    "only_attributed",
]

FEATURE_DOMAINS: Final[tuple[Feed, ...]] = (Feed.ORDERS, Feed.REFUNDS, Feed.LOGINS, Feed.OUTCOMES)
"""Domains whose events count in the features (settlements mirror orders)."""
DAILY_KEY: Final[tuple[str, ...]] = ("entity_id", "day")
"""The key of ``gold.entity_daily``."""
DAILY_COLUMNS: Final[tuple[str, ...]] = (
    "entity_id",
    "day",
    "month",
    "resolver",
    "orders",
    "order_amount",
    "refunds",
    "refund_amount",
    "logins",
    "failed_logins",
    "devices",
    "cards",
    "chargebacks",
    "fraud_labels",
)
"""The columns of ``gold.entity_daily``, in table order."""


def attribute_events(silver: DataFrame) -> DataFrame:
    """Feature-domain Silver rows with ``entity_id``/``resolver`` filled from their order.

    An event keeps its own entity; one without (for example an outcome, which names only
    an order) takes the entity of the order it references. Rows that still have no
    entity keep a null ``entity_id``.
    """
    from pyspark.sql import functions as F

    owners = (
        silver.where((F.col("domain") == Feed.ORDERS) & F.col("entity_id").isNotNull())
        .groupBy(F.coalesce("order_id", "event_id").alias("_order"))
        .agg(F.min(F.struct("entity_id", "resolver")).alias("_owner"))
    )
    feature = silver.where(F.col("domain").isin(*FEATURE_DOMAINS))
    joined = feature.join(owners, feature["order_id"] == owners["_order"], "left")
    own = F.col("entity_id").isNotNull()
    return joined.select(
        *[c for c in feature.columns if c not in ("entity_id", "resolver")],
        F.when(own, F.col("entity_id")).otherwise(F.col("_owner.entity_id")).alias("entity_id"),
        F.when(own, F.col("resolver")).otherwise(F.col("_owner.resolver")).alias("resolver"),
    )


def daily_features(silver: DataFrame) -> DataFrame:
    """:func:`entity_daily`'s rows plus, per day, one row with a null ``entity_id`` for the
    events no entity could be attributed to; ``events`` counts the events of each row.

    One pass over Silver gives both the features and the report's attribution counts.
    """
    from pyspark.sql import functions as F

    domain = F.col("domain")

    def amount_of(name: str) -> Any:
        total = F.sum(F.when(domain == name, F.col("amount")))
        return F.coalesce(total, F.lit(0)).cast("decimal(18,2)")

    label = F.lower(F.col("label"))
    daily = (
        attribute_events(silver)
        .groupBy("entity_id", F.col("accounting_date").alias("day"))
        .agg(
            F.coalesce(F.max("resolver"), F.lit("unknown")).alias("resolver"),
            F.count_if(domain == Feed.ORDERS).alias("orders"),
            amount_of(Feed.ORDERS).alias("order_amount"),
            F.count_if(domain == Feed.REFUNDS).alias("refunds"),
            amount_of(Feed.REFUNDS).alias("refund_amount"),
            F.count_if(domain == Feed.LOGINS).alias("logins"),
            F.count_if((domain == Feed.LOGINS) & (F.col("success") == F.lit(False))).alias("failed_logins"),
            F.count_distinct("device_id").alias("devices"),
            F.count_distinct("card_fingerprint").alias("cards"),
            F.count_if((domain == Feed.OUTCOMES) & (label == "chargeback")).alias("chargebacks"),
            F.count_if((domain == Feed.OUTCOMES) & (label == "fraud")).alias("fraud_labels"),
            F.count(F.lit(1)).alias("events"),
        )
    )
    counts = (
        "orders",
        "refunds",
        "logins",
        "failed_logins",
        "devices",
        "cards",
        "chargebacks",
        "fraud_labels",
    )
    return daily.select(
        "entity_id",
        "day",
        F.date_format("day", "yyyy-MM").alias("month"),
        "resolver",
        *[F.col(c).cast("bigint").alias(c) if c in counts else F.col(c) for c in DAILY_COLUMNS[4:]],
        F.col("events").cast("bigint").alias("events"),
    )


def entity_daily(silver: DataFrame) -> DataFrame:
    """Per entity and day: the features of ``gold.entity_daily`` (its exact columns and types).

    orders / order_amount, refunds / refund_amount, logins / failed_logins (``success``
    false; unknown success counts as a login, not a failure), devices and cards (distinct
    non-null ids seen that day in any domain), chargebacks and fraud_labels (outcomes by
    label, attributed through the order). Events without an entity are left out.
    """
    return only_attributed(daily_features(silver))


def only_attributed(features: DataFrame) -> DataFrame:
    """The ``gold.entity_daily`` rows of :func:`daily_features`' output."""
    from pyspark.sql import functions as F

    return features.where(F.col("entity_id").isNotNull()).select(*DAILY_COLUMNS)


def daily_diff(stored: DataFrame, new: DataFrame) -> DataFrame:
    """Keys ``(entity_id, day)`` whose row was added, removed or changed, with ``month`` and ``change``.

    Rows are compared by the sha256 of their canonical JSON over every column
    (:func:`lakehouse.digest.row_hash_column`), so any changed value counts.
    """
    from pyspark.sql import functions as F

    columns = list(DAILY_COLUMNS)
    old = stored.select(
        *DAILY_KEY, F.col("month").alias("_m_old"), row_hash_column(stored, columns).alias("_old")
    )
    cur = new.select(*DAILY_KEY, F.col("month").alias("_m_new"), row_hash_column(new, columns).alias("_new"))
    change = (
        F.when(F.col("_old").isNull(), F.lit("added"))
        .when(F.col("_new").isNull(), F.lit("removed"))
        .when(F.col("_old") != F.col("_new"), F.lit("changed"))
    )
    return (
        old.join(cur, list(DAILY_KEY), "full_outer")
        .select(*DAILY_KEY, F.coalesce("_m_new", "_m_old").alias("month"), change.alias("change"))
        .where(F.col("change").isNotNull())
    )
