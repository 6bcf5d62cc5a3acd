"""The Spark half of reconciliation: leaf summaries of each side, then rows of bad leaves only.

:func:`leaf_summaries` is one aggregation per side (no shuffle of rows: a partial aggregate
per hash range, collected to the driver, at most ``16**depth`` small rows);
:func:`walk <workloads.reconciliation.summaries.walk>` finds the disagreeing leaves;
:func:`diff_leaves` groups by key only the rows of those leaves and joins the two sides,
which is where a full comparison would shuffle every row of both stores.

A key's *value* on one side is the multiset of its rows over the compared columns (its row
count and the sum of its row hashes), so a key may own several rows (the entity index files
each correlation row twice): a key in the source only is ``missing``, in the derived store
only ``orphan``, in both with a different value ``divergent``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from lakehouse.frames import order_free_checksum, row_hash
from workloads.reconciliation.summaries import FANOUT, Summary
from workloads.vocabulary import Difference

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

LEAF: Final = "_lakehouse_leaf"
CLASS: Final = "difference"


def leaf_of(key: str, depth: int) -> Column:
    """The leaf (hash range) of a key: ``xxhash64(key) mod 16**depth``, the same on both sides."""
    from pyspark.sql import functions as F

    return F.pmod(F.xxhash64(F.col(key)), F.lit(FANOUT**depth))


def leaf_summaries(
    source: DataFrame, derived: DataFrame, key: str, columns: Sequence[str], depth: int
) -> tuple[dict[int, Summary], dict[int, Summary]]:
    """Rows and order-free checksum (key plus compared columns) per non-empty leaf of each
    side: one Spark job over both, its small result fetched as Arrow."""
    from pyspark.sql import functions as F

    def tagged(rows: DataFrame, side: int) -> DataFrame:
        return rows.select(F.lit(side).alias("_side"), leaf_of(key, depth).alias(LEAF), key, *columns)

    table = (
        tagged(source, 0)
        .unionByName(tagged(derived, 1))
        .groupBy("_side", LEAF)
        .agg(F.count(F.lit(1)).alias("n"), order_free_checksum(key, *columns).cast("string").alias("h"))
        .toArrow()
    )
    sides: tuple[dict[int, Summary], dict[int, Summary]] = ({}, {})
    for side, leaf, n, h in zip(
        *(table.column(c).to_pylist() for c in ("_side", LEAF, "n", "h")), strict=True
    ):
        sides[int(side)][int(leaf)] = Summary(int(n), int(h))
    return sides


@dataclass(frozen=True)
class LeafDiff:
    """The differing keys of the disagreeing leaves, each with its class (not yet collected)."""

    differences: DataFrame
    """``key``, ``difference`` (missing | divergent | orphan)."""
    rows_diffed: int
    """Rows of both sides inside the disagreeing leaves: what the row diff had to read."""


def _per_key(
    rows: DataFrame, key: str, columns: Sequence[str], depth: int, leaves: Sequence[int]
) -> DataFrame:
    from pyspark.sql import functions as F

    inside = rows.where(leaf_of(key, depth).isin(list(leaves)))
    return inside.groupBy(key).agg(F.count(F.lit(1)).alias("n"), F.sum(row_hash(key, *columns)).alias("h"))


def diff_leaves(
    source: DataFrame, derived: DataFrame, key: str, columns: Sequence[str], depth: int, leaves: Sequence[int]
) -> LeafDiff:
    """Classify every key of ``leaves`` whose value differs between the two sides."""
    from pyspark.sql import functions as F

    from lakehouse.frames import materialize

    if not leaves:
        empty = source.select(key).where(F.lit(False)).withColumn(CLASS, F.lit(None).cast("string"))
        return LeafDiff(empty, 0)
    ours = _per_key(source, key, columns, depth, leaves).alias("s")
    theirs = _per_key(derived, key, columns, depth, leaves).alias("d")
    joined = ours.join(theirs, F.col(f"s.{key}").eqNullSafe(F.col(f"d.{key}")), "full_outer")
    kind = (
        F.when(F.col("d.n").isNull(), F.lit(Difference.MISSING.value))
        .when(F.col("s.n").isNull(), F.lit(Difference.ORPHAN.value))
        .when(
            (F.col("s.n") != F.col("d.n")) | (F.col("s.h") != F.col("d.h")), F.lit(Difference.DIVERGENT.value)
        )
    )
    classified = joined.select(
        F.coalesce(F.col(f"s.{key}"), F.col(f"d.{key}")).alias(key),
        kind.alias(CLASS),
        (F.coalesce(F.col("s.n"), F.lit(0)) + F.coalesce(F.col("d.n"), F.lit(0))).alias("_rows"),
    )
    done = materialize(classified)
    total = done.agg(F.coalesce(F.sum("_rows"), F.lit(0))).first()
    rows = int(total[0]) if total is not None else 0
    return LeafDiff(done.where(F.col(CLASS).isNotNull()).drop("_rows"), rows)


def full_join_diff(source: DataFrame, derived: DataFrame, key: str, columns: Sequence[str]) -> DataFrame:
    """The plain way, for comparison (the benchmark): every key of both sides grouped and joined."""
    return diff_leaves(source, derived, key, columns, 0, [0]).differences
