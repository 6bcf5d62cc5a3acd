"""Writing a correlation engine's output to ``gold.correlations``, idempotently.

Rows are merged by ``(valid_month, correlation_id, engine)``; rows whose content equals
the stored row of the same id and engine are not written again, so a rerun changes
nothing and the first ``recorded_at`` / ``run_id`` stay (what was known since when).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from lakehouse.digest import row_hash_column
from workloads.engines import correlation as correlation_v1
from workloads.gold.tables import ENGINE_KEY, materialize, read_pinned
from workloads.vocabulary import INACTIVE_STATUSES

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.quality import Gate
    from lakehouse.tables import Table

__all__ = ["CORRELATION_MERGE_KEYS", "CorrelationWrite", "write_correlations"]

log = logging.getLogger(__name__)

CORRELATION_MERGE_KEYS: Final[tuple[str, ...]] = ("valid_month", "correlation_id", "engine")
"""The merge key of ``gold.correlations``: one row per id and engine (per month)."""


@dataclass(frozen=True)
class CorrelationWrite:
    """What :func:`write_correlations` did, compared with the stored rows of the same engine."""

    engine: str
    version: int | None
    """The table's version after the write (the version read when nothing was written)."""
    inserted: int
    updated: int
    unchanged: int
    not_reproduced: int
    """Stored active rows of this engine that the new output no longer contains. They are left
    as they are: retracting or superseding them is the replay flow's decision."""


def write_correlations(
    table: Table,
    correlations: DataFrame,
    *,
    engine: str,
    run_id: str,
    metadata: Mapping[str, str] | None = None,
    gate: Gate | None = None,
) -> CorrelationWrite:
    """Write an engine's correlations idempotently: merge by ``correlation_id`` (and engine).

    Rows whose content (:data:`workloads.engines.correlation.CONTENT_COLUMNS`) equals the
    stored row of the same id and engine are not written again, so a rerun changes
    nothing and the first ``recorded_at`` / ``run_id`` stay (what was known since when).
    New ids are inserted; ids whose evidence or confidence changed are updated in place.
    Stored rows the engine no longer produces are counted, not touched. Reusable by any
    engine version: ``engine`` is the ``name@version`` of the rows in ``correlations``.
    """
    from pyspark.sql import functions as F

    table.create(if_not_exists=True)
    version = table.current_version()
    stored = read_pinned(table, version)
    content = list(correlation_v1.CONTENT_COLUMNS)
    new = correlations.withColumn("_new", row_hash_column(correlations, content))
    old = stored.where(F.col("engine") == engine).select(
        F.col("correlation_id").alias("_id"),
        row_hash_column(stored, content).alias("_old"),
        F.col("status").isin(*INACTIVE_STATUSES).alias("_inactive"),
    )
    kind = (
        F.when(F.col("_old").isNull(), F.lit("inserted"))
        .when(F.col("_new").isNull() & F.col("_inactive"), F.lit("inactive"))
        .when(F.col("_new").isNull(), F.lit("not_reproduced"))
        .when(F.col("_old") != F.col("_new"), F.lit("updated"))
        .otherwise(F.lit("unchanged"))
    )
    joined = new.join(old, new["correlation_id"] == old["_id"], "full_outer").withColumn("_kind", kind)
    counts = {str(r["_kind"]): int(r["count"]) for r in joined.groupBy("_kind").count().collect()}
    inserted, updated = counts.get("inserted", 0), counts.get("updated", 0)
    if inserted or updated:
        # Materialized: a MERGE whose source still reads its own target table fails to plan
        # on Iceberg ("No plan for TableReference").
        rows = materialize(
            joined.where(F.col("_kind").isin("inserted", "updated")).select(*correlations.columns)
        )
        if gate is not None:
            gate(table.name, rows)
        meta = {**(metadata or {}), ENGINE_KEY: engine}
        table.merge(rows, list(CORRELATION_MERGE_KEYS), run_id=run_id, metadata=meta)
        version = table.current_version()
    log.info(
        "%s (%s): %d inserted, %d updated, %d unchanged, %d not reproduced",
        table.name,
        engine,
        inserted,
        updated,
        counts.get("unchanged", 0),
        counts.get("not_reproduced", 0),
    )
    return CorrelationWrite(
        engine=engine,
        version=version,
        inserted=inserted,
        updated=updated,
        unchanged=counts.get("unchanged", 0),
        not_reproduced=counts.get("not_reproduced", 0),
    )
