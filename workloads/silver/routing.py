"""Routing: the rows each fate writes, in the shape of the table that receives them.

``silver`` rows go to ``silver.events`` (entity-resolved, in the table's column order),
``quarantine`` rows to ``ops.quarantine`` (reason, detail, the raw line), ``exceptions``
rows to ``ops.exceptions`` (held facts awaiting approval, their canonical record as
JSON). Duplicates and corrected revisions are counted, never written. Pure:
DataFrame -> DataFrame.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from workloads.silver.columns import BUSINESS_COLUMNS, COORDINATES, SILVER_COLUMNS
from workloads.vocabulary import ExceptionStatus, Fate

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["exception_rows", "quarantine_rows", "silver_rows"]


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
    """Rows for ``ops.exceptions``: held facts with their canonical record as JSON."""
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
    )
