"""DataFrame helpers shared by the workloads."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def materialize(df: DataFrame) -> DataFrame:
    """Compute ``df`` once and cut its lineage: it is used by several actions.

    A local checkpoint, not ``persist()``: each later action plans against the computed rows
    instead of analysing the whole plan again, and a cached plan that reads a table is
    re-cached by Spark when that table is written, which fails for Iceberg relations
    ("computeStats called before pushdown") and would re-read a newer version anyway.
    """
    return df.localCheckpoint(eager=True)
