"""The candidate's content: which serving rows a replay supersedes or retracts, and what it adds.

Pure DataFrame functions over rows in the ``gold.correlations`` schema (statuses are
:class:`~workloads.vocabulary.CorrelationStatus`).

**Row identity** is ``(correlation_id, run_id)``: a run writes at most one row per
correlation id, and a row keeps its identity when its lifecycle columns change. At most
one row per ``correlation_id`` is *current* (``provisional`` or ``authoritative``).

**Classification** (:func:`classify`) of the serving rows in scope ``O`` against the
recomputed rows ``N``:

* same ``correlation_id`` and same content (:data:`CONTENT_COLUMNS`): the serving row
  stays exactly as it is and the recomputed one is dropped (no churn);
* every other row of ``N`` is inserted, ``authoritative``, with this run's id;
* every other row of ``O`` is retired. Its successor is the current-after row of the same
  type whose pair is the old pair mapped to the new entities. With a successor it becomes
  ``superseded`` (``superseded_by`` = the successor's id, which may be its own id when only
  the evidence changed); when both sides now are one entity it becomes ``retracted``
  ("both entities resolve to one"); with no successor it is ``retracted`` ("pair no longer
  correlated"). ``supersede_reason`` names the plan, the run and the engine change, and
  is the same text for every row of one kind, so supersessions can be counted by reason.

**Timestamps.** Rows are built with the build time ``B``; at publication
:func:`apply_changes` stamps this run's rows with the effective time ``E`` (new rows'
``recorded_at``, retired rows' ``superseded_at``), so the bitemporal columns say exactly
from when readers could see them.

**Re-applying** (:func:`extract_changes`, :func:`apply_changes`): a run's changes are the
rows of an *after* state (its candidate, or its earlier publication) that belong to the
run: rows with its ``run_id`` and rows it retired (inactive after, current before, same
identity). Applied onto any serving state they replace rows of the same identity and add
the run's rows; rows of other runs that reached serving meanwhile are kept as they are
(rule ``keep_serving``), and a retirement whose row no longer exists is dropped rather
than resurrected.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Final

from workloads.replay.scope import NEW, OLD
from workloads.vocabulary import CURRENT_STATUSES, INACTIVE_STATUSES, CorrelationStatus

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

IDENTITY: Final[tuple[str, ...]] = ("correlation_id", "run_id")
CONTENT_COLUMNS: Final[tuple[str, ...]] = (
    "correlation_type",
    "entity_a",
    "entity_b",
    "valid_from",
    "valid_to",
    "valid_month",
    "confidence",
    "evidence",
)
"""What a correlation asserts. The engine label, run and lifecycle columns are not content:
a row that says the same under the new engine is not rewritten."""
WHEN_COLUMNS: Final[tuple[str, ...]] = ("recorded_at", "superseded_at")
"""Columns that record *when*, excluded from content hashes of candidates."""
PARTITION: Final = "valid_month"

SUPERSEDED: Final = CorrelationStatus.SUPERSEDED
RETRACTED: Final = CorrelationStatus.RETRACTED
"""The two ways a run retires a serving row (statuses, and kinds of change for reviewers)."""
INSERTED, MERGED, NO_LONGER = "inserted", "merged", "no_longer"
"""Other kinds of change: a new row; a retraction because both entities are now one, or
because the pair is no longer correlated."""


@dataclass(frozen=True)
class Reasons:
    """The ``supersede_reason`` texts of one run (one text per kind of retirement)."""

    superseded: str
    merged: str
    no_longer: str

    @classmethod
    def of(cls, *, plan: str, run_id: str, change: str, new_engine: str, verb: str = "restated") -> Reasons:
        """``verb`` says what kind of restatement it is: ``recalibrated`` when the new release
        only maps confidences through calibrators (``lakehouse calibrate --declare``)."""
        tail = f"(plan {plan}, run {run_id}: {change})"
        return cls(
            superseded=f"{verb} under {new_engine} {tail}",
            merged=f"retracted: both entities resolve to one entity under {new_engine} {tail}",
            no_longer=f"retracted: pair no longer correlated under {new_engine} {tail}",
        )


def is_current(column: str = "status") -> Column:
    from pyspark.sql import functions as F

    return F.col(column).isin(*CURRENT_STATUSES)


def _same_content(left: str, right: str) -> Column:
    from pyspark.sql import functions as F

    same = F.lit(True)
    for column in CONTENT_COLUMNS:
        same = same & F.col(f"{left}.{column}").eqNullSafe(F.col(f"{right}.{column}"))
    return same


@dataclass(frozen=True)
class Classified:
    """The outcome of :func:`classify`, as DataFrames in the table's columns (plus ``kind``)."""

    retired: DataFrame
    """Serving rows in scope turned superseded / retracted (same identity), with ``kind``."""
    inserted: DataFrame
    """New rows of this run (``authoritative``)."""
    unchanged_ids: DataFrame
    """``correlation_id`` of serving rows kept as they are."""
    transitions: DataFrame
    """One row per change for reviewers: kind, old and new id, pairs, confidences, delta."""


def classify(
    serving_in_scope: DataFrame,
    recomputed: DataFrame,
    mapping: DataFrame,
    *,
    reasons: Reasons,
    built_at: datetime,
) -> Classified:
    """Split the scope into kept, retired and inserted rows (see the module docstring).

    ``serving_in_scope``: current serving rows involving a recomputed entity.
    ``recomputed``: the producer's rows for the scope, already labelled with this run.
    ``mapping``: ``(old_entity, new_entity)`` from :func:`workloads.replay.scope.entity_mapping`.
    """
    from pyspark.sql import functions as F

    columns = serving_in_scope.columns
    old, new = serving_in_scope.alias("o"), recomputed.alias("n")
    unchanged_ids = (
        old.join(new, F.col("o.correlation_id") == F.col("n.correlation_id"))
        .where(_same_content("o", "n"))
        .select(F.col("o.correlation_id").alias("correlation_id"))
        .distinct()
    )
    inserted = recomputed.join(unchanged_ids, "correlation_id", "left_anti")
    to_retire = serving_in_scope.join(unchanged_ids, "correlation_id", "left_anti")
    kept = serving_in_scope.join(unchanged_ids, "correlation_id", "left_semi")
    after = (
        inserted.select("correlation_type", "entity_a", "entity_b", "correlation_id", "confidence")
        .unionByName(kept.select("correlation_type", "entity_a", "entity_b", "correlation_id", "confidence"))
        .groupBy("correlation_type", F.col("entity_a").alias("_sa"), F.col("entity_b").alias("_sb"))
        .agg(F.min(F.struct("correlation_id", "confidence")).alias("_succ"))
    )
    ma = mapping.select(F.col(OLD).alias("_oa"), F.col(NEW).alias("_ma"))
    mb = mapping.select(F.col(OLD).alias("_ob"), F.col(NEW).alias("_mb"))
    mapped = (
        to_retire.join(ma, to_retire["entity_a"] == ma["_oa"], "left")
        .join(mb, to_retire["entity_b"] == mb["_ob"], "left")
        .withColumn("_ma", F.coalesce("_ma", "entity_a"))
        .withColumn("_mb", F.coalesce("_mb", "entity_b"))
        .withColumn("_sa", F.least("_ma", "_mb"))
        .withColumn("_sb", F.greatest("_ma", "_mb"))
        .join(after, ["correlation_type", "_sa", "_sb"], "left")
    )
    merged = F.col("_ma") == F.col("_mb")
    has_successor = F.col("_succ").isNotNull() & ~merged
    kind = F.when(merged, F.lit(MERGED)).when(has_successor, F.lit(SUPERSEDED)).otherwise(F.lit(NO_LONGER))
    reason = (
        F.when(merged, F.lit(reasons.merged))
        .when(has_successor, F.lit(reasons.superseded))
        .otherwise(F.lit(reasons.no_longer))
    )
    retired_all = mapped.withColumn("kind", kind).select(
        *[c for c in columns if c not in ("status", "superseded_at", "superseded_by", "supersede_reason")],
        F.when(has_successor, F.lit(SUPERSEDED)).otherwise(F.lit(RETRACTED)).alias("status"),
        F.lit(built_at).cast("timestamp").alias("superseded_at"),
        F.when(has_successor, F.col("_succ.correlation_id")).alias("superseded_by"),
        reason.alias("supersede_reason"),
        "kind",
        F.col("_succ.correlation_id").alias("_succ_id"),
        F.col("_succ.confidence").alias("_succ_conf"),
    )
    retired = retired_all.select(*columns, "kind")
    transitions = _transitions(retired_all, inserted)
    return Classified(
        retired=retired, inserted=inserted, unchanged_ids=unchanged_ids, transitions=transitions
    )


def _transitions(retired: DataFrame, inserted: DataFrame) -> DataFrame:
    """Reviewer rows: every retirement (with its successor) and every insert without predecessor."""
    from pyspark.sql import functions as F

    succ_conf = F.when(F.col("status") == SUPERSEDED, F.col("_succ_conf"))
    olds = retired.select(
        F.col("status").alias("kind"),
        F.col("correlation_id").alias("old_id"),
        F.col("superseded_by").alias("new_id"),
        "correlation_type",
        F.concat_ws(" ", "entity_a", "entity_b").alias("old_pair"),
        "valid_month",
        F.col("confidence").alias("old_confidence"),
        succ_conf.alias("new_confidence"),
        (F.coalesce(succ_conf, F.lit(0.0)) - F.col("confidence")).alias("confidence_delta"),
        F.col("supersede_reason").alias("reason"),
    )
    successors = retired.where(F.col("status") == SUPERSEDED).select(F.col("superseded_by").alias("_sid"))
    fresh = inserted.join(successors, inserted["correlation_id"] == successors["_sid"], "left_anti").select(
        F.lit(INSERTED).alias("kind"),
        F.lit(None).cast("string").alias("old_id"),
        F.col("correlation_id").alias("new_id"),
        "correlation_type",
        F.lit(None).cast("string").alias("old_pair"),
        "valid_month",
        F.lit(None).cast("double").alias("old_confidence"),
        F.col("confidence").alias("new_confidence"),
        F.col("confidence").alias("confidence_delta"),
        F.lit(None).cast("string").alias("reason"),
    )
    return olds.unionByName(fresh)


def candidate_partitions(classified: Classified) -> DataFrame:
    """``valid_month`` of every row the candidate changes (retired or inserted)."""
    return classified.retired.select(PARTITION).unionByName(classified.inserted.select(PARTITION)).distinct()


def changes_of(classified: Classified) -> DataFrame:
    """The rows this run writes: retired serving rows (same identity) and inserted rows."""
    return classified.retired.drop("kind").unionByName(classified.inserted)


def extract_changes(after: DataFrame, before: DataFrame, run_id: str) -> DataFrame:
    """The rows of ``after`` that belong to ``run_id``: its own rows and the rows it retired.

    A retired row is inactive in ``after`` and has the identity of a current row of
    ``before``. Both frames should be restricted to the run's partitions.
    """
    from pyspark.sql import functions as F

    was_current = before.where(is_current()).select(*IDENTITY).withColumn("_was_current", F.lit(True))
    marked = after.join(was_current, list(IDENTITY), "left")
    mine = (F.col("run_id") == F.lit(run_id)) | (
        F.col("status").isin(*INACTIVE_STATUSES) & F.col("_was_current").isNotNull()
    )
    return marked.where(mine).drop("_was_current").select(*after.columns)


def apply_changes(
    serving: DataFrame, changes: DataFrame, *, run_id: str, effective_at: datetime
) -> DataFrame:
    """Serving rows of the changes' partitions with the run's changes applied and stamped.

    ``serving`` must hold (at least) every partition ``changes`` touches. Rows of
    ``serving`` whose identity a change carries are replaced; retirements of rows no longer
    in ``serving`` are dropped (keep_serving); this run's rows get ``recorded_at`` and
    retired rows ``superseded_at`` = ``effective_at``. Returns only the touched partitions.
    """
    from pyspark.sql import functions as F

    columns = serving.columns
    months = changes.select(PARTITION).distinct()
    base = serving.join(months, PARTITION, "left_semi")
    present = base.select(*IDENTITY).withColumn("_present", F.lit(True))
    mine = F.col("run_id") == F.lit(run_id)
    usable = changes.join(present, list(IDENTITY), "left").where(mine | F.col("_present").isNotNull())
    stamped = usable.select(
        *[
            F.when(mine, F.lit(effective_at).cast("timestamp")).otherwise(F.col(c)).alias(c)
            if c == "recorded_at"
            else F.when(~mine, F.lit(effective_at).cast("timestamp")).otherwise(F.col(c)).alias(c)
            if c == "superseded_at"
            else F.col(c)
            for c in columns
        ]
    )
    kept = base.join(stamped.select(*IDENTITY), list(IDENTITY), "left_anti")
    return kept.unionByName(stamped).select(*columns)


def current_duplicates(content: DataFrame) -> DataFrame:
    """``correlation_id`` with more than one current row (must be empty)."""
    from pyspark.sql import functions as F

    return (
        content.where(is_current())
        .groupBy("correlation_id")
        .count()
        .where(F.col("count") > 1)
        .select("correlation_id")
    )


def months_of(df: DataFrame) -> list[str]:
    """Sorted distinct ``valid_month`` values (one small Spark job)."""
    return sorted(str(r[PARTITION]) for r in df.select(PARTITION).distinct().collect())


def restrict_months(df: DataFrame, months: Sequence[str]) -> DataFrame:
    """Rows of the given ``valid_month`` partitions (pruned by the table formats)."""
    from pyspark.sql import functions as F

    return df.where(F.col(PARTITION).isin(*months)) if months else df.where(F.lit(False))
