"""The Gold build: per-entity daily features, W1 baselines and the correlation store.

What :func:`build_gold` does, in this order:

1. Pins the current version of ``silver.events`` and of every Gold table, and reads
   exactly those (a run never reads "whatever is there now").
2. Recomputes ``gold.entity_daily`` from Silver
   (:func:`workloads.gold.features.daily_features`, cheap) and compares it with the
   stored table by key ``(entity_id, day)`` through row hashes
   (:func:`~workloads.gold.features.daily_diff`): added, removed, changed.
3. ``gold.baselines``: recomputes only the (entity, day) keys a change can reach
   (:func:`workloads.gold.baselines.affected_days`: from each changed day up to 729 days
   later, for the changed entities only) and rewrites only the months holding them.
   Unaffected rows of those months are carried over unchanged; other months are not
   touched at all.
4. ``gold.entity_daily``: rewrites only the months with a changed key.
5. ``gold.correlations``: the correlation engine in force (``producer``, chosen by
   :func:`workloads.pipeline.run_gold` for the build's date) over the same Silver version,
   written by :func:`workloads.gold.correlations.write_correlations`: a changed row is
   superseded by its rebuilt successor and a row no longer produced is retracted, never
   updated in place; a rerun writes nothing. Rows are labelled with the deciding versions
   (the producer, and the entity resolver of the Silver rows when it is not v1's).

``gold.entity_daily`` and ``gold.baselines`` are derived per (entity, day) and restated in
place (whole months replaced); each rebuild is a recorded run (``run_gold``), and the
table formats' history keeps what they held before.

Baselines are written before entity_daily on purpose: the stored entity_daily is what
the next run diffs against, so it acts as the commit marker. If a run dies between the
two writes, the rerun sees the same difference and rewrites the same baselines.

Every write goes through the ``gate`` hook first and replaces whole ``month`` partitions
(:mod:`workloads.gold.tables`). ``full=True`` rewrites every month from scratch; the
result is the same rows as the incremental path (tested by canonical hash).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from lakehouse.digest import canonical_json
from lakehouse.errors import TableMissingError
from lakehouse.frames import materialize
from lakehouse.tables import describe_versions
from workloads.gold import baselines as w1
from workloads.gold.correlations import (
    V1_PRODUCER,
    CorrelationWrite,
    Producer,
    row_engine_label,
    write_correlations,
)
from workloads.gold.features import DAILY_COLUMNS, DAILY_KEY, daily_diff, daily_features, only_attributed
from workloads.gold.provisional import ProvisionalReconciliation, reconcile_provisional
from workloads.gold.tables import ENGINE_KEY, INPUTS_KEY, read_pinned, replace_months
from workloads.vocabulary import TableName

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.quality import Gate
    from lakehouse.tables import TableRegistry
    from workloads.gold.entity_index import IndexRefresh
    from workloads.policies import StreamingPolicy

__all__ = ["ENTITY_DAILY_ENGINE", "GOLD_TABLES", "GoldReport", "build_gold"]

log = logging.getLogger(__name__)

GOLD_TABLES: Final[tuple[TableName, ...]] = (
    TableName.ENTITY_DAILY,
    TableName.BASELINES,
    TableName.CORRELATIONS,
)
"""The tables a Gold build writes."""

ENTITY_DAILY_ENGINE: Final = "entity_daily@1"
"""The engine label written in ``gold.entity_daily``'s commit metadata."""


@dataclass(frozen=True)
class GoldReport:
    """What one Gold build read, recomputed and wrote."""

    run_id: str
    full: bool
    inputs: Mapping[str, int]
    """Table -> version read (Delta version or Iceberg snapshot id)."""
    outputs: Mapping[str, int | None]
    """Table -> version after the build (unchanged when nothing had to be written)."""
    events: int
    """Feature-domain Silver events read."""
    unattributed_events: int
    """Events left out because neither they nor their order have an entity."""
    daily_rows: int
    daily_added: int
    daily_changed: int
    daily_removed: int
    entities_recomputed: int
    """Entities whose baselines were recomputed."""
    baseline_rows_recomputed: int
    months_rewritten: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Table -> the ``month`` partitions replaced or emptied."""
    correlations: CorrelationWrite | None = None
    entity_index: IndexRefresh | None = None
    """The rebuild of the correlation store's entity index that followed (run_gold)."""
    provisional: ProvisionalReconciliation | None = None
    """The reconciliation of the stream's provisional rows against this build's correlations
    (None: no streaming policy given, or no provisional row to reconcile)."""


@dataclass(frozen=True)
class _BaselinePlan:
    """Which baseline months to rewrite, with what, and how much was recomputed."""

    content: DataFrame
    months: frozenset[str]
    entities: int
    rows: int


def _distinct_months(df: DataFrame) -> set[str]:
    return {str(r["month"]) for r in df.select("month").distinct().collect()}


def _plan_full(new_daily: DataFrame, months: frozenset[str]) -> _BaselinePlan:
    """Every baseline recomputed; ``months`` (all stored or new) rewritten or emptied."""
    from pyspark.sql import functions as F

    stats = new_daily.agg(F.count_distinct("entity_id").alias("entities"), F.count(F.lit(1)).alias("rows"))
    row = stats.collect()[0]
    return _BaselinePlan(
        content=w1.baselines(new_daily),
        months=months,
        entities=int(row["entities"]),
        rows=int(row["rows"]) * len(w1.METRICS) * len(w1.WINDOWS),
    )


def _plan_incremental(
    new_daily: DataFrame,
    stored_daily: DataFrame,
    stored_baselines: DataFrame,
    changed_keys: DataFrame,
) -> _BaselinePlan:
    """Recompute only the affected (entity, day) keys; carry the rest of their months over."""
    from pyspark.sql import functions as F

    key = list(DAILY_KEY)
    all_keys = stored_daily.select(*key).unionByName(new_daily.select(*key))
    affected = materialize(w1.affected_days(all_keys, changed_keys))
    present = new_daily.select(*key, F.lit(1).alias("_present"))
    stats = (
        affected.join(present, key, "left")
        .agg(
            F.collect_set(F.date_format("day", "yyyy-MM")).alias("months"),
            F.count_distinct("entity_id").alias("entities"),
            F.count("_present").alias("present"),
        )
        .collect()[0]
    )
    months = frozenset(str(m) for m in stats["months"])
    scope = affected.select("entity_id").distinct()
    recomputed = w1.baselines(new_daily.join(scope, "entity_id", "left_semi")).join(
        affected, key, "left_semi"
    )
    kept = (
        stored_baselines.where(F.col("month").isin(*sorted(months)))
        .join(affected, key, "left_anti")
        .select(*recomputed.columns)
    )
    return _BaselinePlan(
        content=kept.unionByName(recomputed),
        months=months,
        entities=int(stats["entities"]),
        rows=int(stats["present"]) * len(w1.METRICS) * len(w1.WINDOWS),
    )


def build_gold(
    registry: TableRegistry,
    *,
    run_id: str,
    recorded_at: datetime,
    full: bool = False,
    gate: Gate | None = None,
    producer: Producer = V1_PRODUCER,
    streaming: StreamingPolicy | None = None,
) -> GoldReport:
    """Build Gold from the current version of ``silver.events``; see the module docstring.

    With ``streaming`` (the ``streaming:`` policy), the provisional rows ``lakehouse stream``
    wrote are reconciled against the correlations just written, last
    (:func:`workloads.gold.provisional.reconcile_provisional`: agree, batch stronger,
    streaming false positive, streaming missed).

    ``recorded_at`` is when this run's knowledge counts as recorded (passed in, never
    read from the clock; naive means UTC). ``gate`` is called before every Gold write.
    ``full`` recomputes and rewrites everything (the repair path if a Gold table was
    changed by hand); the default recomputes only what the Silver change reaches.
    """
    from pyspark.sql import functions as F

    silver_table = registry.get(TableName.SILVER_EVENTS)
    silver_version = silver_table.current_version() if silver_table.exists() else None
    if silver_version is None:
        raise TableMissingError(
            f"{TableName.SILVER_EVENTS} has no committed version to build Gold from; "
            "run the Silver build first"
        )
    moment = recorded_at if recorded_at.tzinfo is not None else recorded_at.replace(tzinfo=UTC)
    silver = silver_table.read(as_of=silver_version)
    tables = {name: registry.get(name) for name in GOLD_TABLES}
    for table in tables.values():
        table.create(if_not_exists=True)
    pinned = {name: tables[name].current_version() for name in (TableName.ENTITY_DAILY, TableName.BASELINES)}
    inputs: dict[str, int] = {
        TableName.SILVER_EVENTS: silver_version,
        **{n: v for n, v in pinned.items() if v is not None},
    }
    stored_daily = read_pinned(tables[TableName.ENTITY_DAILY], pinned[TableName.ENTITY_DAILY]).select(
        *DAILY_COLUMNS
    )
    stored_baselines = read_pinned(tables[TableName.BASELINES], pinned[TableName.BASELINES])
    meta = {INPUTS_KEY: canonical_json({TableName.SILVER_EVENTS: silver_version})}
    log.info("gold build %s: pinned %s (full=%s)", run_id, describe_versions(inputs), full)

    features = materialize(daily_features(silver))
    new_daily = only_attributed(features)
    month_rows = (
        features.groupBy("month", F.col("entity_id").isNull().alias("unattributed"))
        .agg(F.count(F.lit(1)).alias("rows"), F.sum("events").alias("events"))
        .collect()
    )
    new_months = {str(r["month"]) for r in month_rows if not r["unattributed"]}
    diff = materialize(daily_diff(stored_daily, new_daily))
    changes = diff.groupBy("change", "month").count().collect()
    by_change = dict.fromkeys(("added", "changed", "removed"), 0)
    for r in changes:
        by_change[str(r["change"])] += int(r["count"])
    log.info(
        "gold build %s: %d events read; entity_daily +%d ~%d -%d",
        run_id,
        sum(int(r["events"]) for r in month_rows),
        by_change["added"],
        by_change["changed"],
        by_change["removed"],
    )
    if full:
        daily_months = _distinct_months(stored_daily) | new_months
        plan = _plan_full(new_daily, frozenset(daily_months | _distinct_months(stored_baselines)))
    elif changes:
        plan = _plan_incremental(new_daily, stored_daily, stored_baselines, diff.select(*DAILY_KEY))
        daily_months = {str(r["month"]) for r in changes}
    else:  # Silver changed nothing Gold depends on
        plan = _BaselinePlan(content=stored_baselines, months=frozenset(), entities=0, rows=0)
        daily_months = set()
    log.debug(
        "gold build %s: baselines of %d entities recomputed over %d month(s)",
        run_id,
        plan.entities,
        len(plan.months),
    )
    # Baselines first: the stored entity_daily is what the next run diffs against.
    months_rewritten: dict[str, tuple[str, ...]] = {
        TableName.BASELINES: replace_months(
            tables[TableName.BASELINES],
            plan.content,
            months=plan.months,
            present=new_months,
            run_id=run_id,
            metadata={**meta, ENGINE_KEY: w1.ENGINE},
            gate=gate,
        ),
        TableName.ENTITY_DAILY: replace_months(
            tables[TableName.ENTITY_DAILY],
            new_daily,
            months=daily_months,
            present=new_months,
            run_id=run_id,
            metadata={**meta, ENGINE_KEY: ENTITY_DAILY_ENGINE},
            gate=gate,
        ),
    }

    resolvers = [str(r["resolver"]) for r in silver.select("resolver").distinct().collect() if r["resolver"]]
    label = row_engine_label(producer.ref, resolvers)
    produced = producer.correlate(silver, run_id=run_id, recorded_at=moment, **dict(producer.parameters))
    written = write_correlations(
        tables[TableName.CORRELATIONS],
        produced.withColumn("engine", F.lit(label)),
        engine=label,
        run_id=run_id,
        recorded_at=moment,
        metadata=meta,
        gate=gate,
    )
    outputs: dict[str, int | None] = {
        name: tables[name].current_version() if months_rewritten[name] else pinned[name]
        for name in (TableName.ENTITY_DAILY, TableName.BASELINES)
    }
    outputs[TableName.CORRELATIONS] = written.version
    reconciled = (
        reconcile_provisional(registry, run_id=run_id, recorded_at=moment, policy=streaming)
        if streaming is not None
        else None
    )
    if reconciled is not None:
        outputs.update(reconciled.versions)
    log.info("gold build %s: output versions %s", run_id, describe_versions(outputs))
    return GoldReport(
        run_id=run_id,
        full=full,
        inputs=inputs,
        outputs=outputs,
        events=sum(int(r["events"]) for r in month_rows),
        unattributed_events=sum(int(r["events"]) for r in month_rows if r["unattributed"]),
        daily_rows=sum(int(r["rows"]) for r in month_rows if not r["unattributed"]),
        daily_added=by_change["added"],
        daily_changed=by_change["changed"],
        daily_removed=by_change["removed"],
        entities_recomputed=plan.entities,
        baseline_rows_recomputed=plan.rows,
        months_rewritten=months_rewritten,
        correlations=written,
        provisional=reconciled,
    )
