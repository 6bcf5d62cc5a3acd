"""The candidate's content: which serving rows a replay supersedes or retracts, and what it adds.

Pure DataFrame functions over rows of an answer table, named by its declaration
(:class:`~workloads.replay.answer.AnswerTable`; ``gold.correlations`` when none is given;
statuses are :class:`~workloads.vocabulary.CorrelationStatus`). Below, the columns are
``gold.correlations``' own: its key ``correlation_id``, its subjects ``entity_a`` and
``entity_b``, its kind ``correlation_type``, its partition ``valid_month``.

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

from workloads.replay.answer import (
    CORRELATIONS,
    RECORDED_AT,
    RUN,
    STATUS,
    SUPERSEDE_REASON,
    SUPERSEDED_AT,
    SUPERSEDED_BY,
    WHEN,
    AnswerTable,
)
from workloads.replay.scope import NEW, OLD
from workloads.vocabulary import CURRENT_STATUSES, INACTIVE_STATUSES, CorrelationStatus

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

IDENTITY: Final[tuple[str, ...]] = CORRELATIONS.identity
"""``gold.correlations``' row identity (:attr:`AnswerTable.identity`)."""
CONTENT_COLUMNS: Final[tuple[str, ...]] = CORRELATIONS.content
"""What a correlation asserts (:attr:`AnswerTable.content`). The engine label, run and
lifecycle columns are not content: a row that says the same under the new engine is not
rewritten."""
WHEN_COLUMNS: Final[tuple[str, ...]] = WHEN
"""Columns that record *when*, excluded from content hashes of candidates."""
PARTITION: Final = CORRELATIONS.partition
"""``gold.correlations``' partition (:attr:`AnswerTable.partition`)."""

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
    def of(
        cls,
        *,
        plan: str,
        run_id: str,
        change: str,
        new_engine: str,
        verb: str = "restated",
        answer: AnswerTable = CORRELATIONS,
    ) -> Reasons:
        """The answer table's reason template (:attr:`AnswerTable.reasons`) for one run.

        ``verb`` says what kind of restatement it is: ``recalibrated`` when the new release
        only maps confidences through calibrators (``lakehouse calibrate --declare``)."""
        return cls(
            **answer.reasons.render(plan=plan, run_id=run_id, change=change, new_engine=new_engine, verb=verb)
        )


def is_current(column: str = STATUS) -> Column:
    from pyspark.sql import functions as F

    return F.col(column).isin(*CURRENT_STATUSES)


def _same_content(left: str, right: str, columns: Sequence[str]) -> Column:
    from pyspark.sql import functions as F

    same = F.lit(True)
    for column in columns:
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
    """The key (``correlation_id``) of serving rows kept as they are."""
    transitions: DataFrame
    """One row per change for reviewers: kind, old and new id, pairs, confidences, delta."""


def classify(
    serving_in_scope: DataFrame,
    recomputed: DataFrame,
    mapping: DataFrame,
    *,
    reasons: Reasons,
    built_at: datetime,
    answer: AnswerTable = CORRELATIONS,
) -> Classified:
    """Split the scope into kept, retired and inserted rows (see the module docstring).

    ``serving_in_scope``: current serving rows involving a recomputed entity.
    ``recomputed``: the producer's rows for the scope, already labelled with this run.
    ``mapping``: ``(old_entity, new_entity)`` from :func:`workloads.replay.scope.entity_mapping`.
    ``answer``: the table's declaration; the successor rule maps its two ordered subjects
    (``entity_a < entity_b``) and looks among rows of the same kind.
    """
    from pyspark.sql import functions as F

    key, kind_column, impact = answer.key, answer.kind, answer.impact
    first, second = answer.subjects
    columns = serving_in_scope.columns
    old, new = serving_in_scope.alias("o"), recomputed.alias("n")
    unchanged_ids = (
        old.join(new, F.col(f"o.{key}") == F.col(f"n.{key}"))
        .where(_same_content("o", "n", answer.content))
        .select(F.col(f"o.{key}").alias(key))
        .distinct()
    )
    inserted = recomputed.join(unchanged_ids, key, "left_anti")
    to_retire = serving_in_scope.join(unchanged_ids, key, "left_anti")
    kept = serving_in_scope.join(unchanged_ids, key, "left_semi")
    after = (
        inserted.select(kind_column, first, second, key, impact)
        .unionByName(kept.select(kind_column, first, second, key, impact))
        .groupBy(kind_column, F.col(first).alias("_sa"), F.col(second).alias("_sb"))
        .agg(F.min(F.struct(key, impact)).alias("_succ"))
    )
    ma = mapping.select(F.col(OLD).alias("_oa"), F.col(NEW).alias("_ma"))
    mb = mapping.select(F.col(OLD).alias("_ob"), F.col(NEW).alias("_mb"))
    mapped = (
        to_retire.join(ma, to_retire[first] == ma["_oa"], "left")
        .join(mb, to_retire[second] == mb["_ob"], "left")
        .withColumn("_ma", F.coalesce("_ma", first))
        .withColumn("_mb", F.coalesce("_mb", second))
        .withColumn("_sa", F.least("_ma", "_mb"))
        .withColumn("_sb", F.greatest("_ma", "_mb"))
        .join(after, [kind_column, "_sa", "_sb"], "left")
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
        *[c for c in columns if c not in (STATUS, SUPERSEDED_AT, SUPERSEDED_BY, SUPERSEDE_REASON)],
        F.when(has_successor, F.lit(SUPERSEDED)).otherwise(F.lit(RETRACTED)).alias(STATUS),
        F.lit(built_at).cast("timestamp").alias(SUPERSEDED_AT),
        F.when(has_successor, F.col(f"_succ.{key}")).alias(SUPERSEDED_BY),
        reason.alias(SUPERSEDE_REASON),
        "kind",
        F.col(f"_succ.{key}").alias("_succ_id"),
        F.col(f"_succ.{impact}").alias("_succ_conf"),
    )
    retired = retired_all.select(*columns, "kind")
    transitions = _transitions(retired_all, inserted, answer)
    return Classified(
        retired=retired, inserted=inserted, unchanged_ids=unchanged_ids, transitions=transitions
    )


def _transitions(retired: DataFrame, inserted: DataFrame, answer: AnswerTable) -> DataFrame:
    """Reviewer rows: every retirement (with its successor) and every insert without predecessor.

    Columns: ``kind``, ``old_id``, ``new_id``, the table's kind column, ``old_pair`` (the
    subjects), its partition, ``old_<impact>``, ``new_<impact>``, ``<impact>_delta`` and
    ``reason`` (for ``gold.correlations``: ``old_confidence``, ``confidence_delta``...).
    """
    from pyspark.sql import functions as F

    key, impact = answer.key, answer.impact
    succ_conf = F.when(F.col(STATUS) == SUPERSEDED, F.col("_succ_conf"))
    olds = retired.select(
        F.col(STATUS).alias("kind"),
        F.col(key).alias("old_id"),
        F.col(SUPERSEDED_BY).alias("new_id"),
        answer.kind,
        F.concat_ws(" ", *answer.subjects).alias("old_pair"),
        answer.partition,
        F.col(impact).alias(f"old_{impact}"),
        succ_conf.alias(f"new_{impact}"),
        (F.coalesce(succ_conf, F.lit(0.0)) - F.col(impact)).alias(impact_delta(answer)),
        F.col(SUPERSEDE_REASON).alias("reason"),
    )
    successors = retired.where(F.col(STATUS) == SUPERSEDED).select(F.col(SUPERSEDED_BY).alias("_sid"))
    fresh = inserted.join(successors, inserted[key] == successors["_sid"], "left_anti").select(
        F.lit(INSERTED).alias("kind"),
        F.lit(None).cast("string").alias("old_id"),
        F.col(key).alias("new_id"),
        answer.kind,
        F.lit(None).cast("string").alias("old_pair"),
        answer.partition,
        F.lit(None).cast("double").alias(f"old_{impact}"),
        F.col(impact).alias(f"new_{impact}"),
        F.col(impact).alias(impact_delta(answer)),
        F.lit(None).cast("string").alias("reason"),
    )
    return olds.unionByName(fresh)


def impact_delta(answer: AnswerTable) -> str:
    """The transitions' column holding the change of the table's impact figure (``confidence_delta``)."""
    return f"{answer.impact}_delta"


def candidate_partitions(classified: Classified, answer: AnswerTable = CORRELATIONS) -> DataFrame:
    """The partition (``valid_month``) of every row the candidate changes (retired or inserted)."""
    column = answer.partition
    return classified.retired.select(column).unionByName(classified.inserted.select(column)).distinct()


def changes_of(classified: Classified) -> DataFrame:
    """The rows this run writes: retired serving rows (same identity) and inserted rows."""
    return classified.retired.drop("kind").unionByName(classified.inserted)


def extract_changes(
    after: DataFrame, before: DataFrame, run_id: str, answer: AnswerTable = CORRELATIONS
) -> DataFrame:
    """The rows of ``after`` that belong to ``run_id``: its own rows and the rows it retired.

    A retired row is inactive in ``after`` and has the identity of a current row of
    ``before``. Both frames should be restricted to the run's partitions.
    """
    from pyspark.sql import functions as F

    identity = list(answer.identity)
    was_current = before.where(is_current()).select(*identity).withColumn("_was_current", F.lit(True))
    marked = after.join(was_current, identity, "left")
    mine = (F.col(RUN) == F.lit(run_id)) | (
        F.col(STATUS).isin(*INACTIVE_STATUSES) & F.col("_was_current").isNotNull()
    )
    return marked.where(mine).drop("_was_current").select(*after.columns)


def apply_changes(
    serving: DataFrame,
    changes: DataFrame,
    *,
    run_id: str,
    effective_at: datetime,
    answer: AnswerTable = CORRELATIONS,
) -> DataFrame:
    """Serving rows of the changes' partitions with the run's changes applied and stamped.

    ``serving`` must hold (at least) every partition ``changes`` touches. Rows of
    ``serving`` whose identity a change carries are replaced; retirements of rows no longer
    in ``serving`` are dropped (keep_serving); this run's rows get ``recorded_at`` and
    retired rows ``superseded_at`` = ``effective_at``. Returns only the touched partitions.
    """
    from pyspark.sql import functions as F

    columns = serving.columns
    partition, identity = answer.partition, list(answer.identity)
    months = changes.select(partition).distinct()
    base = serving.join(months, partition, "left_semi")
    present = base.select(*identity).withColumn("_present", F.lit(True))
    mine = F.col(RUN) == F.lit(run_id)
    usable = changes.join(present, identity, "left").where(mine | F.col("_present").isNotNull())
    stamped = usable.select(
        *[
            F.when(mine, F.lit(effective_at).cast("timestamp")).otherwise(F.col(c)).alias(c)
            if c == RECORDED_AT
            else F.when(~mine, F.lit(effective_at).cast("timestamp")).otherwise(F.col(c)).alias(c)
            if c == SUPERSEDED_AT
            else F.col(c)
            for c in columns
        ]
    )
    kept = base.join(stamped.select(*identity), identity, "left_anti")
    return kept.unionByName(stamped).select(*columns)


def current_duplicates(content: DataFrame, answer: AnswerTable = CORRELATIONS) -> DataFrame:
    """Keys (``correlation_id``) with more than one current row (must be empty)."""
    from pyspark.sql import functions as F

    return (
        content.where(is_current()).groupBy(answer.key).count().where(F.col("count") > 1).select(answer.key)
    )


def months_of(df: DataFrame, answer: AnswerTable = CORRELATIONS) -> list[str]:
    """Sorted distinct partition (``valid_month``) values (one small Spark job)."""
    column = answer.partition
    return sorted(str(r[column]) for r in df.select(column).distinct().collect())


def restrict_months(df: DataFrame, months: Sequence[str], answer: AnswerTable = CORRELATIONS) -> DataFrame:
    """Rows of the given partitions (``valid_month``; pruned by the table formats)."""
    from pyspark.sql import functions as F

    return df.where(F.col(answer.partition).isin(*months)) if months else df.where(F.lit(False))
