"""The provisional view (``gold.provisional_correlations``) and its reconciliation by batch.

Two views of the correlation store, with two contracts (seed 004, 12.4):

* **provisional**: what ``lakehouse stream`` decided within seconds of a delivery, over a
  bounded window of partial evidence (:func:`write_provisional`, called once per micro-batch);
* **published**: what the batch Gold build decided on complete evidence
  (``gold.correlations``). Batch wins.

:func:`reconcile_provisional` runs inside every batch Gold build (and after a replay's
publication), after ``gold.correlations`` is written, over the window the stream covered.
Each ``provisional`` row is compared with the serving batch rows by its pair
(``correlation_type``, ``entity_a``, ``entity_b``; the stream's ``valid_from``, and so its
id, may differ on partial evidence) and gets one of four outcomes
(:class:`~workloads.vocabulary.StreamOutcome`):

* ``agree`` (same pair, same confidence): promoted. The provisional row is kept as
  ``superseded`` by the batch row, reason ``promoted: ...``, and the batch row is inserted
  beside it, ``authoritative``;
* ``batch_stronger`` (same pair, another confidence: batch's evidence is complete): the same,
  reason ``superseded: batch stronger ...`` with both confidences;
* ``false_positive`` (batch has no such pair): the row is kept as ``retracted``; the caller
  tells the streaming consumers through the outbox;
* ``missed`` (a batch row whose ``valid_from`` lies in the covered window, for a pair the
  provisional view has never held): the batch row is inserted, ``authoritative``, outcome
  ``missed``: the recall gap, logged and counted.

So after a reconciliation the provisional view agrees with the published one over the
window, and every streaming row is still there (superseded or retracted, never deleted).
The figures go to ``ops.stream_divergence``, one row per scope (``correlation_type``) and
release (the ``engine`` label that decided the streaming rows): the counts, streaming
precision ``(agree + batch_stronger) / streaming rows`` and recall ``(agree +
batch_stronger) / (that + missed)``, and whether precision fell below the scope's declared
threshold (``streaming:`` in ``conf/policies.yaml``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Final

from lakehouse.digest import row_hash_column
from lakehouse.frames import materialize
from workloads.gold.correlations import CONTENT_COLUMNS, CORRELATION_MERGE_KEYS
from workloads.gold.tables import read_pinned
from workloads.vocabulary import CURRENT_STATUSES, CorrelationStatus, StreamOutcome, TableName

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.tables import Table, TableRegistry
    from workloads.policies import StreamingPolicy

__all__ = [
    "PAIR",
    "ProvisionalReconciliation",
    "ProvisionalWrite",
    "ScopeDivergence",
    "reconcile_provisional",
    "write_provisional",
]

log = logging.getLogger(__name__)

PAIR: Final[tuple[str, ...]] = ("correlation_type", "entity_a", "entity_b")
"""What a streaming row and a batch row are matched by."""

STREAM_COLUMNS: Final[tuple[str, ...]] = ("stream_batch", "window_start", "window_end", "outcome")
"""The provisional view's columns beyond ``gold.correlations``'."""


@dataclass(frozen=True)
class ProvisionalWrite:
    """What one micro-batch wrote to the provisional view."""

    version: int | None
    provisional: int
    """Rows inserted ``provisional`` (new pairs, or pairs whose content changed)."""
    superseded: int
    """Earlier provisional rows of the same pairs, restated by this batch."""


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def write_provisional(
    table: Table,
    produced: DataFrame,
    *,
    batch_id: int,
    run_id: str,
    window_start: datetime,
    window_end: datetime,
    recorded_at: datetime,
) -> ProvisionalWrite:
    """Merge one micro-batch's correlations (``gold.correlations``' columns) as ``provisional``.

    A pair that already has a provisional row from an earlier batch with the same content is
    left alone; with other content, the earlier row is kept as ``superseded`` and the new one
    inserted. Rows are keyed like the store (:data:`CORRELATION_MERGE_KEYS`) with a ``run_id``
    derived from the batch, so a batch applied again after a crash writes the same keys: no
    duplicate, whatever the crash left.
    """
    from pyspark.sql import functions as F

    table.create(if_not_exists=True)
    version = table.current_version()
    stored = read_pinned(table, version)
    columns = stored.columns
    content = list(CONTENT_COLUMNS)
    pending = stored.where(
        (F.col("status") == CorrelationStatus.PROVISIONAL) & (F.col("run_id") != F.lit(run_id))
    )
    new = produced.select(
        *[F.col(c) for c in produced.columns],
        F.lit(CorrelationStatus.PROVISIONAL).alias("_status"),
        row_hash_column(produced, content).alias("_new"),
    )
    old = pending.select(
        *[F.col(c).alias(f"_o_{c}") for c in columns], row_hash_column(pending, content).alias("_old")
    )
    on = [new[c] == old[f"_o_{c}"] for c in PAIR]
    joined = materialize(new.join(old, on, "left"))
    changed = joined.where(F.col("_old").isNull() | (F.col("_old") != F.col("_new")))
    stamp = {
        "run_id": F.lit(run_id),
        "status": F.lit(CorrelationStatus.PROVISIONAL),
        "recorded_at": F.lit(_utc(recorded_at)).cast("timestamp"),
        "stream_batch": F.lit(batch_id).cast("bigint"),
        "window_start": F.lit(_utc(window_start)).cast("timestamp"),
        "window_end": F.lit(_utc(window_end)).cast("timestamp"),
        "outcome": F.lit(None).cast("string"),
        "superseded_at": F.lit(None).cast("timestamp"),
        "superseded_by": F.lit(None).cast("string"),
        "supersede_reason": F.lit(None).cast("string"),
    }
    fresh = changed.select(*[stamp[c].alias(c) if c in stamp else F.col(c) for c in columns])
    retire = {
        "status": F.lit(CorrelationStatus.SUPERSEDED),
        "superseded_at": F.lit(_utc(recorded_at)).cast("timestamp"),
        "superseded_by": F.col("correlation_id"),
        "supersede_reason": F.lit(f"restated by stream batch {batch_id} on newer evidence (run {run_id})"),
    }
    restated = changed.where(F.col("_old").isNotNull()).select(
        *[retire[c].alias(c) if c in retire else F.col(f"_o_{c}").alias(c) for c in columns]
    )
    rows = materialize(fresh.unionByName(restated))
    counts = rows.groupBy("status").count().collect()
    by_status = {str(r["status"]): int(r["count"]) for r in counts}
    if by_status:
        table.merge(rows, list(CORRELATION_MERGE_KEYS), run_id=run_id)
        version = table.current_version()
    written = ProvisionalWrite(
        version=version,
        provisional=by_status.get(CorrelationStatus.PROVISIONAL, 0),
        superseded=by_status.get(CorrelationStatus.SUPERSEDED, 0),
    )
    log.info(
        "%s: stream batch %d wrote %d provisional row(s), restated %d",
        table.name,
        batch_id,
        written.provisional,
        written.superseded,
    )
    return written


@dataclass(frozen=True)
class ScopeDivergence:
    """Streaming against batch for one scope (correlation type) and release (engine label)."""

    scope: str
    release: str
    agree: int
    batch_stronger: int
    false_positive: int
    missed: int
    precision: float | None
    """``(agree + batch_stronger) / (that + false_positive)``; None without streaming rows."""
    recall: float | None
    """``(agree + batch_stronger) / (that + missed)``; None when neither side found a pair."""
    threshold: float
    flagged: bool
    """Precision below ``threshold``."""


def divergence(scope: str, release: str, counts: Mapping[str, int], threshold: float) -> ScopeDivergence:
    """The figures of one scope and release from its outcome counts (pure)."""
    agree, stronger = counts.get(StreamOutcome.AGREE, 0), counts.get(StreamOutcome.BATCH_STRONGER, 0)
    false_positive, missed = counts.get(StreamOutcome.FALSE_POSITIVE, 0), counts.get(StreamOutcome.MISSED, 0)
    found = agree + stronger
    precision = round(found / (found + false_positive), 6) if found + false_positive else None
    recall = round(found / (found + missed), 6) if found + missed else None
    return ScopeDivergence(
        scope=scope,
        release=release,
        agree=agree,
        batch_stronger=stronger,
        false_positive=false_positive,
        missed=missed,
        precision=precision,
        recall=recall,
        threshold=threshold,
        flagged=precision is not None and precision < threshold,
    )


@dataclass(frozen=True)
class ProvisionalReconciliation:
    """What one batch build's reconciliation of the provisional view decided."""

    run_id: str
    recorded_at: datetime
    window_start: datetime
    window_end: datetime
    """The event-time window the reconciled streaming rows covered."""
    outcomes: Mapping[str, int]
    """Outcome -> rows (every outcome present, zeros included)."""
    scopes: tuple[ScopeDivergence, ...] = field(default_factory=tuple)
    versions: Mapping[str, int | None] = field(default_factory=dict)
    """Provisional view and divergence table -> version after the write."""

    @property
    def flagged(self) -> tuple[str, ...]:
        return tuple(sorted({s.scope for s in self.scopes if s.flagged}))


def reconcile_provisional(
    registry: TableRegistry,
    *,
    run_id: str,
    recorded_at: datetime,
    policy: StreamingPolicy,
) -> ProvisionalReconciliation | None:
    """Reconcile every ``provisional`` row against the serving batch rows; see the module
    docstring. None when the provisional view holds no provisional row (nothing written)."""
    from pyspark.sql import functions as F

    table = registry.get(TableName.PROVISIONAL_CORRELATIONS)
    version = table.current_version() if table.exists() else None
    if version is None:
        return None
    stored = table.read(as_of=version)
    pending = materialize(stored.where(F.col("status") == CorrelationStatus.PROVISIONAL))
    window = pending.agg(F.min("window_start").alias("ws"), F.max("window_end").alias("we")).collect()[0]
    if window["ws"] is None:
        log.info("%s: no provisional row to reconcile", table.name)
        return None
    window_start, window_end = _utc(window["ws"]), _utc(window["we"])
    store = registry.get(TableName.CORRELATIONS)
    batch = read_pinned(store, store.current_version()).where(F.col("status").isin(*CURRENT_STATUSES))
    columns = stored.columns
    moment = F.lit(_utc(recorded_at)).cast("timestamp")
    tail = f" (run {run_id})"

    b = batch.select(*[F.col(c).alias(f"_b_{c}") for c in batch.columns])
    on = [pending[c] == b[f"_b_{c}"] for c in PAIR]
    judged = materialize(
        pending.join(b, on, "left").withColumn(
            "_outcome",
            F.when(F.col("_b_correlation_id").isNull(), F.lit(StreamOutcome.FALSE_POSITIVE))
            .when(F.col("_b_confidence") == F.col("confidence"), F.lit(StreamOutcome.AGREE))
            .otherwise(F.lit(StreamOutcome.BATCH_STRONGER)),
        )
    )
    found = judged.where(F.col("_outcome") != StreamOutcome.FALSE_POSITIVE)
    confidences = F.concat(
        F.lit("confidence "),
        F.col("confidence").cast("string"),
        F.lit(" -> "),
        F.col("_b_confidence").cast("string"),
    )
    reason = (
        F.when(
            F.col("_outcome") == StreamOutcome.AGREE,
            F.concat(F.lit("promoted: batch agrees, "), confidences, F.lit(tail)),
        )
        .when(
            F.col("_outcome") == StreamOutcome.BATCH_STRONGER,
            F.concat(F.lit("superseded: batch stronger on complete evidence, "), confidences, F.lit(tail)),
        )
        .otherwise(F.lit(f"retracted: streaming false positive, batch does not find the pair{tail}"))
    )
    retire = {
        "status": F.when(
            F.col("_outcome") == StreamOutcome.FALSE_POSITIVE, F.lit(CorrelationStatus.RETRACTED)
        ).otherwise(F.lit(CorrelationStatus.SUPERSEDED)),
        "superseded_at": moment,
        "superseded_by": F.col("_b_correlation_id"),
        "supersede_reason": reason,
        "outcome": F.col("_outcome"),
    }
    retired = judged.select(*[(retire[c] if c in retire else F.col(c)).alias(c) for c in columns])
    promoted = found.select(
        *[
            F.col(f"_b_{c}").alias(c)
            if c not in STREAM_COLUMNS
            else (F.col("_outcome") if c == "outcome" else F.col(c)).alias(c)
            for c in columns
        ]
    )
    known = stored.select(*PAIR).distinct()
    missed = (
        batch.where(F.col("valid_from").between(F.lit(window_start), F.lit(window_end)))
        .join(known, list(PAIR), "left_anti")
        .select(
            *[F.col(c) for c in batch.columns],
            F.lit(None).cast("bigint").alias("stream_batch"),
            F.lit(window_start).cast("timestamp").alias("window_start"),
            F.lit(window_end).cast("timestamp").alias("window_end"),
            F.lit(StreamOutcome.MISSED).alias("outcome"),
        )
        .select(*columns)
    )
    # An earlier reconciliation's copy of a pair's batch row, now replaced by a newer batch row.
    touched = promoted.select(*PAIR, F.col("correlation_id").alias("_n_id"), F.col("run_id").alias("_n_run"))
    current = stored.where(F.col("status") == CorrelationStatus.AUTHORITATIVE)
    stale = (
        current.join(touched, list(PAIR))
        .where((F.col("correlation_id") != F.col("_n_id")) | (F.col("run_id") != F.col("_n_run")))
        .select(
            *[
                (
                    {
                        "status": F.lit(CorrelationStatus.SUPERSEDED),
                        "superseded_at": moment,
                        "superseded_by": F.col("_n_id"),
                        "supersede_reason": F.lit(f"superseded: a newer batch row{tail}"),
                    }[c]
                    if c in ("status", "superseded_at", "superseded_by", "supersede_reason")
                    else F.col(c)
                ).alias(c)
                for c in columns
            ]
        )
    )
    rows = materialize(retired.unionByName(promoted).unionByName(missed).unionByName(stale))
    # one row per streaming row (judged) and per missed pair
    counts = (
        judged.select("correlation_type", "engine", F.col("_outcome").alias("outcome"))
        .unionByName(missed.select("correlation_type", "engine", "outcome"))
        .groupBy("correlation_type", "engine", "outcome")
        .count()
        .collect()
    )
    per_scope: dict[tuple[str, str], dict[str, int]] = {}
    outcomes = dict.fromkeys((o.value for o in StreamOutcome), 0)
    for r in counts:
        key = (str(r["correlation_type"]), str(r["engine"]))
        per_scope.setdefault(key, {})[str(r["outcome"])] = int(r["count"])
        outcomes[str(r["outcome"])] += int(r["count"])
    scopes = tuple(
        divergence(scope, release, tally, policy.threshold(scope))
        for (scope, release), tally in sorted(per_scope.items())
    )
    table.merge(rows, list(CORRELATION_MERGE_KEYS), run_id=run_id)
    metrics = registry.get(TableName.STREAM_DIVERGENCE)
    metrics.create(if_not_exists=True)
    metrics.append(_divergence_frame(metrics, run_id, recorded_at, scopes), run_id=run_id)
    for s in scopes:
        log.log(
            logging.WARNING if s.flagged or s.missed else logging.INFO,
            "stream divergence %s (%s): precision %s recall %s (threshold %.2f%s); missed %d (recall gap)",
            s.scope,
            s.release,
            s.precision,
            s.recall,
            s.threshold,
            ", FLAGGED" if s.flagged else "",
            s.missed,
        )
    return ProvisionalReconciliation(
        run_id=run_id,
        recorded_at=_utc(recorded_at),
        window_start=window_start,
        window_end=window_end,
        outcomes=outcomes,
        scopes=scopes,
        versions={table.name: table.current_version(), metrics.name: metrics.current_version()},
    )


def _divergence_frame(
    metrics: Table, run_id: str, recorded_at: datetime, scopes: tuple[ScopeDivergence, ...]
) -> DataFrame:
    schema = metrics.read().schema
    rows = [
        (
            run_id,
            _utc(recorded_at),
            s.scope,
            s.release,
            s.agree,
            s.batch_stronger,
            s.false_positive,
            s.missed,
            s.precision,
            s.recall,
            s.threshold,
            s.flagged,
        )
        for s in scopes
    ]
    return metrics.spark.createDataFrame(rows, schema)


def window_start_of(window_end: datetime, days: int) -> datetime:
    """The first moment of a ``days`` window of event time that ends at ``window_end``."""
    return _utc(window_end) - timedelta(days=days)
