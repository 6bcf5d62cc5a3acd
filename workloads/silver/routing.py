"""Routing: the rows each fate writes, in the shape of the table that receives them.

``silver`` rows go to ``silver.events`` (entity-resolved, in the table's column order),
``quarantine`` rows to ``ops.quarantine`` (reason, detail, the raw line), ``exceptions``
rows to ``ops.exceptions`` (held facts awaiting approval, their canonical record as
JSON, keyed by an ``exception_id`` derived from their Bronze coordinates, the decision
columns empty). Duplicates and corrected revisions are counted, never written. Pure:
DataFrame -> DataFrame.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from workloads.silver.columns import BUSINESS_COLUMNS, COORDINATES, SILVER_COLUMNS
from workloads.vocabulary import ExceptionStatus, Fate

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["EXCEPTION_ID_PREFIX", "exception_id", "exception_rows", "quarantine_rows", "silver_rows"]

EXCEPTION_ID_PREFIX: Final = "exc-"
EXCEPTION_ID_HEX: Final = 16


def exception_id() -> Column:
    """The id users name a held fact by: ``exc-`` and 16 hex of the sha256 of its Bronze
    coordinates (``manifest|file|line``). Deterministic, so a rebuild queues the same id,
    and short enough to type; the coordinates stay in the row."""
    from pyspark.sql import functions as F

    key = F.concat_ws("|", *(F.col(c).cast("string") for c in COORDINATES))
    return F.concat(F.lit(EXCEPTION_ID_PREFIX), F.substring(F.sha2(key, 256), 1, EXCEPTION_ID_HEX))


def silver_rows(fated: DataFrame, resolve: Callable[[DataFrame], DataFrame]) -> DataFrame:
    """The Silver rows (fate ``silver``), entity-resolved, in the table's column order."""
    from pyspark.sql import functions as F

    events = fated.where(F.col("_fate") == Fate.SILVER).select(
        "event_id",
        "domain",
        "event_time",
        "event_date",
        "event_month",
        F.col("_ingest_time").alias("ingest_time"),
        "accounting_date",
        "lateness",
        "schema_version",
        "revision",
        *BUSINESS_COLUMNS,
        *COORDINATES,
    )
    return resolve(events).select(*SILVER_COLUMNS)


def quarantine_rows(fated: DataFrame, run_id: str) -> DataFrame:
    """Rows for ``ops.quarantine``: reason, detail, the raw line and its Bronze coordinates."""
    from pyspark.sql import functions as F

    return fated.where(F.col("_fate") == Fate.QUARANTINE).select(
        F.col("domain").alias("feed"),
        F.col("_reason").alias("reason"),
        F.col("_detail").alias("detail"),
        "_raw",
        "_event_id",
        "_ingest_time",
        *COORDINATES,
        F.lit(run_id).alias("run_id"),
    )


def exception_rows(fated: DataFrame, run_id: str) -> DataFrame:
    """Rows for ``ops.exceptions``: held facts awaiting approval, with their id and their
    canonical record as JSON; nobody has decided on them yet."""
    from pyspark.sql import functions as F

    record = F.to_json(
        F.struct(
            "event_id",
            "domain",
            "event_time",
            "schema_version",
            "revision",
            *BUSINESS_COLUMNS,
        )
    )
    reason = F.concat(
        F.lit("late fact for closed period "),
        F.col("event_month"),
        F.lit(": ingested "),
        F.col("ingest_date").cast("string"),
        F.lit(", period closed after "),
        F.col("_period_closes").cast("string"),
        F.lit("; closed_period_action=hold"),
    )
    return fated.where(F.col("_fate") == Fate.EXCEPTIONS).select(
        exception_id().alias("exception_id"),
        "event_id",
        "domain",
        "event_time",
        F.col("_ingest_time").alias("ingest_time"),
        F.col("event_month").alias("period"),
        F.lit(ExceptionStatus.AWAITING_APPROVAL).alias("status"),
        reason.alias("reason"),
        record.alias("record"),
        *COORDINATES,
        F.lit(run_id).alias("run_id"),
        F.lit(None).cast("string").alias("decided_by"),
        F.lit(None).cast("timestamp").alias("decided_at"),
        F.lit(None).cast("string").alias("decision_reason"),
        F.lit(None).cast("string").alias("decision_run_id"),
    )
