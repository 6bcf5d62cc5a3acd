"""DataFrame helpers shared by the workloads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def materialize(df: DataFrame) -> DataFrame:
    """Compute ``df`` once and cut its lineage: it is used by several actions.

    A local checkpoint, not ``persist()``: each later action plans against the computed rows
    instead of analysing the whole plan again, and a cached plan that reads a table is
    re-cached by Spark when that table is written, which fails for Iceberg relations
    ("computeStats called before pushdown") and would re-read a newer version anyway.
    """
    return df.localCheckpoint(eager=True)


def union_all(frames: Sequence[DataFrame]) -> DataFrame:
    """The rows of every frame in ``frames`` (at least one), matched by column name."""
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union


def in_session(df: DataFrame, spark: SparkSession) -> DataFrame:
    """``df``'s rows as a DataFrame of ``spark``, without leaving the JVM.

    A streaming query hands ``foreachBatch`` its micro-batch in a session of its own; the
    table interface registers temporary views and commit metadata in the session it was
    opened with, so a micro-batch is moved there before it is written anywhere.
    """
    from pyspark.sql import DataFrame as SparkFrame

    if df.sparkSession is spark:
        return df
    jdf = spark._jsparkSession.createDataFrame(df._jdf.rdd(), df._jdf.schema())
    return SparkFrame(jdf, spark)
