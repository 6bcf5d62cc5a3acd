"""The Spark half of reconciliation: the bounded walk's jobs and the row diff of listed ranges.

Both sides are reduced once to ``(key, position, row hash, side)`` and materialized
(:func:`both_sides`); every job below reads that frame:

* :func:`summarise`: **one job per level**: the rows of the ranges still in disagreement
  (a left-semi join against a small broadcast frame of their ids, never a job per range nor
  an ``isin`` list), grouped by the computed id of their child range, both sides' row count
  and order-free checksum side by side; only the disagreeing ranges reach the driver, at
  most as many as the level has ranges, which :func:`~workloads.reconciliation.summaries.plan_level`
  keeps within ``max_ranges``.
* :func:`diff_ranges`: **one job per pass**: the rows of every listed range (ranges of
  several levels, matched by ``(level, id)`` in one broadcast join), grouped by key.
* :func:`walk`: the pure loop (:func:`~workloads.reconciliation.summaries.bounded_walk`)
  with these two jobs.

A key's *value* on one side is the multiset of its rows over the compared columns (row count
and the sum of its row hashes), so a key may own several rows (the entity index files each
correlation row twice): a key in the source only is ``missing``, in the derived store only
``orphan``, in both with a different value ``divergent``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from lakehouse.frames import materialize, row_hash, union_all
from workloads.reconciliation.summaries import (
    SPACE_BITS,
    Budget,
    Range,
    RangeSummary,
    Walk,
    bounded_walk,
    shift,
)
from workloads.vocabulary import Difference

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

log = logging.getLogger(__name__)

POSITION: Final = "_lakehouse_pos"
HASH: Final = "_lakehouse_h"
SIDE: Final = "_lakehouse_side"
CLASS: Final = "difference"


def position_of(key: str) -> Column:
    """A key's position: the top 60 bits of ``xxhash64(key)``, unsigned (the same on both sides)."""
    from pyspark.sql import functions as F

    return F.shiftrightunsigned(F.xxhash64(F.col(key)), 64 - SPACE_BITS)


def both_sides(source: DataFrame, derived: DataFrame, key: str, columns: Sequence[str]) -> DataFrame:
    """Both sides as ``key, position, row hash, side`` (0 source, 1 derived), computed once."""
    from pyspark.sql import functions as F

    def reduced(rows: DataFrame, side: int) -> DataFrame:
        return rows.select(
            F.col(key),
            position_of(key).alias(POSITION),
            row_hash(key, *columns).alias(HASH),
            F.lit(side).alias(SIDE),
        )

    return materialize(union_all([reduced(source, 0), reduced(derived, 1)]))


def _per_side(group: Column | str, rows: DataFrame) -> DataFrame:
    """Rows and checksum of each side per ``group``, side by side (``sn, sh, dn, dh``)."""
    from pyspark.sql import functions as F

    zero = F.lit(0).cast("decimal(38,0)")
    source = F.col(SIDE) == 0
    return rows.groupBy(group).agg(
        F.sum(F.when(source, 1).otherwise(0)).alias("sn"),
        F.coalesce(F.sum(F.when(source, F.col(HASH))), zero).alias("sh"),
        F.sum(F.when(source, 0).otherwise(1)).alias("dn"),
        F.coalesce(F.sum(F.when(source, None).otherwise(F.col(HASH))), zero).alias("dh"),
    )


def summarise(both: DataFrame, level: int, parents: Sequence[Range], start: int) -> list[RangeSummary]:
    """One job: the ranges of ``level`` (inside ``parents``; none: every range) from position
    ``start`` on where the two sides disagree, with both sides' summaries."""
    from pyspark.sql import functions as F

    rows = both.where(F.col(POSITION) >= F.lit(start))
    if parents:
        wanted = both.sparkSession.createDataFrame([(r.index,) for r in parents], "_lakehouse_parent BIGINT")
        rows = rows.withColumn(
            "_lakehouse_parent", F.shiftright(F.col(POSITION), shift(parents[0].level))
        ).join(F.broadcast(wanted), "_lakehouse_parent", "left_semi")
    table = (
        _per_side(F.shiftright(F.col(POSITION), shift(level)).alias("_lakehouse_range"), rows)
        .where((F.col("sn") != F.col("dn")) | (F.col("sh") != F.col("dh")))
        .select(
            "_lakehouse_range",
            "sn",
            F.col("sh").cast("string").alias("sh"),
            "dn",
            F.col("dh").cast("string").alias("dh"),
        )
        .collect()
    )
    return [RangeSummary(Range(level, int(r[0])), int(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in table]


def diff_ranges(both: DataFrame, key: str, ranges: Sequence[Range], start: int) -> DataFrame:
    """One job: every key of ``ranges`` (any levels; from position ``start`` on) whose value
    differs between the sides, with its class (materialized)."""
    from pyspark.sql import functions as F

    levels = sorted({r.level for r in ranges})
    wanted = both.sparkSession.createDataFrame(
        [(r.level, r.index) for r in ranges], "_lakehouse_level INT, _lakehouse_range BIGINT"
    )
    at = F.explode(
        F.array(
            *(
                F.struct(
                    F.lit(level).alias("_lakehouse_level"),
                    F.shiftright(F.col(POSITION), shift(level)).alias("_lakehouse_range"),
                )
                for level in levels
            )
        )
    )
    rows = (
        both.where(F.col(POSITION) >= F.lit(start))
        .select(key, HASH, SIDE, at.alias("_at"))
        .select(key, HASH, SIDE, "_at._lakehouse_level", "_at._lakehouse_range")
        .join(F.broadcast(wanted), ["_lakehouse_level", "_lakehouse_range"], "left_semi")
    )
    kind = (
        F.when(F.col("dn") == 0, F.lit(Difference.MISSING.value))
        .when(F.col("sn") == 0, F.lit(Difference.ORPHAN.value))
        .when((F.col("sn") != F.col("dn")) | (F.col("sh") != F.col("dh")), F.lit(Difference.DIVERGENT.value))
    )
    classified = _per_side(key, rows).select(key, kind.alias(CLASS)).where(F.col(CLASS).isNotNull())
    return materialize(classified)


def walk(
    both: DataFrame,
    key: str,
    *,
    start: int,
    max_ranges: int,
    list_rows: int,
    budget: Budget,
    step: Callable[[str], None] = lambda message: log.info("%s", message),
) -> Walk[DataFrame]:
    """:func:`~workloads.reconciliation.summaries.bounded_walk` with this module's Spark jobs:
    one :func:`summarise` per level, one :func:`diff_ranges` per pass."""
    return bounded_walk(
        lambda level, parents, first: summarise(both, level, parents, first),
        lambda ranges, first: diff_ranges(both, key, ranges, first),
        start=start,
        max_ranges=max_ranges,
        list_rows=list_rows,
        budget=budget,
        step=step,
    )


def full_join_diff(source: DataFrame, derived: DataFrame, key: str, columns: Sequence[str]) -> DataFrame:
    """The plain way, for comparison (the benchmark): every key of both sides grouped and joined."""
    return diff_ranges(both_sides(source, derived, key, columns), key, [Range(0, 0)], 0)
