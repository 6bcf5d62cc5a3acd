"""DataFrame helpers shared by the workloads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


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


def row_hash(*columns: str) -> Column:
    """One row's hash over ``columns`` (``xxhash64``; a null column adds nothing), as a
    ``decimal(38,0)`` so that summing millions of them never overflows."""
    from pyspark.sql import functions as F

    return F.xxhash64(*columns).cast("decimal(38,0)")


def order_free_checksum(*columns: str) -> Column:
    """An aggregate: the sum of :func:`row_hash` over the rows (0 for none). Equal for the same
    multiset of rows in any order or file layout, so two stores compare without sorting."""
    from pyspark.sql import functions as F

    return F.coalesce(F.sum(row_hash(*columns)), F.lit(0).cast("decimal(38,0)"))
