"""Diff a candidate against serving, key by key: added, removed, changed, unchanged.

Pure DataFrame functions; the replay stores the result as its diff manifest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

ADDED, REMOVED, CHANGED, UNCHANGED = "added", "removed", "changed", "unchanged"


@dataclass(frozen=True)
class DiffSummary:
    """How many keys fell in each class."""

    added: int
    removed: int
    changed: int
    unchanged: int
    serving_total: int = field(init=False)
    """Keys in serving: removed + changed + unchanged (derived)."""
    candidate_total: int = field(init=False)
    """Keys in the candidate: added + changed + unchanged (derived)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "serving_total", self.removed + self.changed + self.unchanged)
        object.__setattr__(self, "candidate_total", self.added + self.changed + self.unchanged)


def diff_by_key(
    serving: DataFrame, candidate: DataFrame, key: Sequence[str], compare: Sequence[str]
) -> DataFrame:
    """One row per key with ``change`` and the old and new values of ``compare`` columns.

    Keys must be unique on each side (the reconciliation checks that independently).
    Values are compared null-safely.
    """
    from pyspark.sql import functions as F

    old = serving.select(*key, *[F.col(c).alias(f"old_{c}") for c in compare]).withColumn(
        "_in_old", F.lit(True)
    )
    new = candidate.select(*key, *[F.col(c).alias(f"new_{c}") for c in compare]).withColumn(
        "_in_new", F.lit(True)
    )
    joined = old.join(new, on=list(key), how="full_outer")
    same = F.lit(True)
    for c in compare:
        same = same & F.col(f"old_{c}").eqNullSafe(F.col(f"new_{c}"))
    change = (
        F.when(F.col("_in_old").isNull(), F.lit(ADDED))
        .when(F.col("_in_new").isNull(), F.lit(REMOVED))
        .when(same, F.lit(UNCHANGED))
        .otherwise(F.lit(CHANGED))
    )
    return joined.withColumn("change", change).drop("_in_old", "_in_new")


def summarize(diff: DataFrame) -> DiffSummary:
    """Counts per change class, in one Spark action."""
    counts: dict[str, Any] = {
        r["change"]: r["n"] for r in diff.groupBy("change").count().withColumnRenamed("count", "n").collect()
    }
    return DiffSummary(
        added=int(counts.get(ADDED, 0)),
        removed=int(counts.get(REMOVED, 0)),
        changed=int(counts.get(CHANGED, 0)),
        unchanged=int(counts.get(UNCHANGED, 0)),
    )
