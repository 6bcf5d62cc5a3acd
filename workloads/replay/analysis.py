"""The dry run: what a replay would change, computed from the pinned inputs without writing.

:func:`analyse` resolves Silver twice (old and new engine version of a resolver change;
once, by the resolver in force, for a producer change), finds the affected entities and
those whose correlations must be recomputed (:mod:`workloads.replay.scope`),
runs the producer on exactly that scope and classifies the serving rows
(:mod:`workloads.replay.candidate`). :func:`describe_scope` turns the analysis into the
:class:`~workloads.replay.scope.ReplayScope` a user reads, and :func:`plan_scope` is
``lakehouse replay --dry-run``: setup, budget, analysis, scope; nothing is written, not
even the ledger.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from lakehouse.errors import ReplayRefusedError
from lakehouse.frames import materialize
from lakehouse.tables import TableSize
from ledger.clock import Clock, SystemClock
from ledger.engines import EngineCatalog
from ledger.entries import Publication
from ledger.reader import LedgerReader
from workloads.engines.correlation_calibrated import is_recalibrated
from workloads.replay import candidate as cand
from workloads.replay import scope as sc
from workloads.replay.answer import ENGINE, RUN
from workloads.replay.identity import declared_int, engine_function, engine_kwargs
from workloads.replay.plan import CorrectionPlan
from workloads.replay.setup import Setup, check_budget, input_size, setup_replay
from workloads.replay.state import PUBLISHED_STATES
from workloads.replay.status import load_state
from workloads.vocabulary import ExceptionStatus, TableName

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.tables import TableRegistry

log = logging.getLogger(__name__)

EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
"""The build time a dry run stamps on rows it never writes."""


@dataclass(frozen=True)
class Analysis:
    """Everything computed about a replay before its candidate is written."""

    events: DataFrame
    """Silver in range with ``old_entity``/``new_entity``: the events the scope needs (every
    event for a producer change; the recomputed entities' neighbourhood for a resolver change)."""
    identities: DataFrame
    """Each distinct identity tuple with its event count under both versions (see
    :func:`~workloads.replay.scope.identities`): what the quality report is measured on."""
    affected: DataFrame
    recompute: DataFrame
    vanished: DataFrame
    serving: DataFrame
    serving_in_scope: DataFrame
    recomputed_rows: DataFrame
    classified: cand.Classified
    changes: DataFrame
    reasons: cand.Reasons
    max_entities: int


def analyse(registry: TableRegistry, setup: Setup, *, built_at: datetime) -> Analysis:
    """Scope before resolving, recompute the scope and classify serving rows (module docs)."""
    from pyspark.sql import functions as F

    plan, engines, answer = setup.plan, setup.engines, setup.answer
    silver = registry.get(TableName.SILVER_EVENTS).read(as_of=setup.pins[TableName.SILVER_EVENTS])
    silver = silver.where(sc.in_range(F.col("event_time"), setup.bounds))
    old_resolver, new_resolver = engines.resolutions
    resolve_old, resolve_new = engine_function(old_resolver), engine_function(new_resolver)
    max_entities = declared_int(engines.producer, "max_entities_per_asset")
    identity = materialize(sc.identities(silver))
    rows = sc.identity_rows(identity)
    if old_resolver == new_resolver:  # a producer change: the entities do not move
        resolved = resolve_new(rows)
        identities = materialize(sc.pair_identities(identity, resolved, resolved))
        events = materialize(sc.same_resolution(silver, resolve_new(silver.select(*sc.RESOLUTION_INPUT))))
        affected = materialize(sc.every_entity(events))
        recompute = affected.select("entity_id")
    else:
        identities = materialize(sc.pair_identities(identity, resolve_old(rows), resolve_new(rows)))
        affected = materialize(sc.affected_entities(identities))

        def resolved_around(entities: DataFrame) -> DataFrame:
            subset = materialize(sc.neighbourhood(silver, identities, entities))
            given = subset.select(*sc.RESOLUTION_INPUT).unionByName(rows)
            return materialize(sc.pair_resolutions(subset, resolve_old(given), resolve_new(given)))

        events = resolved_around(affected)
        flips = sc.crowding_flips(events, affected, max_entities)
        recompute = materialize(sc.recomputed_entities(affected, flips))
        if not recompute.join(affected, "entity_id", "left_anti").isEmpty():
            events = resolved_around(recompute)  # a flipped entity's other assets are read too
    vanished = affected.where(F.col("old_side") & ~F.col("new_side")).select("entity_id")
    producer = engine_function(engines.producer)
    kwargs = engine_kwargs(producer, engines.producer.parameters)
    raw = producer(sc.scoped_events(events, recompute), run_id=setup.run_id, recorded_at=built_at, **kwargs)
    recomputed = materialize(
        sc.involving(raw, recompute, answer.subjects).withColumn(ENGINE, F.lit(engines.label))
    )
    serving = registry.get(plan.answer.table).read(as_of=setup.pins[plan.answer.table])
    current = serving.where(cand.is_current() & sc.in_range(F.col(answer.valid_from), setup.bounds))
    serving_in_scope = materialize(sc.involving(current, recompute, answer.subjects))
    recalibrated = is_recalibrated(engines.new.parameters)
    reasons = cand.Reasons.of(
        plan=plan.plan,
        run_id=setup.run_id,
        change=engines.change,
        new_engine=engines.new.ref,
        verb="recalibrated" if recalibrated else "restated",
        answer=answer,
    )
    classified = cand.classify(
        serving_in_scope,
        recomputed,
        sc.entity_mapping(events),
        reasons=reasons,
        built_at=built_at,
        answer=answer,
    )
    classified = cand.Classified(
        retired=materialize(classified.retired),
        inserted=materialize(classified.inserted),
        unchanged_ids=materialize(classified.unchanged_ids),
        transitions=materialize(classified.transitions),
    )
    return Analysis(
        events=events,
        identities=identities,
        affected=affected,
        recompute=recompute,
        vanished=vanished,
        serving=serving,
        serving_in_scope=serving_in_scope,
        recomputed_rows=recomputed,
        classified=classified,
        changes=materialize(cand.changes_of(classified)),
        reasons=reasons,
        max_entities=max_entities,
    )


def _held_events(registry: TableRegistry, setup: Setup) -> int:
    """Facts in ``ops.exceptions`` awaiting approval whose event time is in the range."""
    from pyspark.sql import functions as F

    table = registry.get(TableName.EXCEPTIONS)
    if not table.exists():
        return 0
    rows = table.read().where(
        (F.col("status") == ExceptionStatus.AWAITING_APPROVAL)
        & sc.in_range(F.col("event_time"), setup.bounds)
    )
    return int(rows.count())


def _producing_runs(registry: TableRegistry, retired: DataFrame) -> tuple[sc.ProducingRun, ...]:
    """The runs whose serving rows the replay retires, and their publications in the ledger."""
    from pyspark.sql import functions as F

    rows = (
        retired.groupBy(RUN)
        .agg(F.count(F.lit(1)).alias("rows"), F.sort_array(F.collect_set(ENGINE)).alias("engines"))
        .orderBy(RUN)
        .collect()
    )
    if not rows:
        return ()
    reader = LedgerReader.for_registry(registry)
    known: set[str] = set()
    published: dict[str, list[int]] = {}
    for entry in reader.entries(kind="run_started"):
        if entry.run_id is not None:
            known.add(entry.run_id)
    for entry in reader.entries(kind="publication"):
        if isinstance(entry, Publication):
            run = entry.built_by_run or entry.run_id
            known.add(run)
            published.setdefault(run, []).extend(entry.tables.values())
    return tuple(
        sc.ProducingRun(
            run_id=str(r["run_id"]),
            rows=int(r["rows"]),
            engines=tuple(str(e) for e in r["engines"]),
            in_ledger=str(r["run_id"]) in known,
            publications=tuple(published.get(str(r["run_id"]), ())),
        )
        for r in rows
    )


def _ids(df: DataFrame, condition: Any = None) -> tuple[int, tuple[str, ...]]:
    frame = df if condition is None else df.where(condition)
    ordered = frame.select("entity_id").distinct().orderBy("entity_id")
    listed = tuple(str(r[0]) for r in ordered.limit(sc.MAX_LISTED).collect())
    count = len(listed) if len(listed) < sc.MAX_LISTED else int(ordered.count())
    return count, listed


def describe_scope(
    registry: TableRegistry, setup: Setup, analysis: Analysis, size: TableSize
) -> sc.ReplayScope:
    """The :class:`ReplayScope` of an analysis (a handful of small Spark jobs)."""
    from pyspark.sql import functions as F

    classified, answer = analysis.classified, setup.answer
    count, entities = _ids(analysis.affected)
    listed = analysis.affected.where(F.col("entity_id").isin(*entities)).collect()
    olds = tuple(sorted(str(r["entity_id"]) for r in listed if r["old_side"]))
    news = tuple(sorted(str(r["entity_id"]) for r in listed if r["new_side"]))
    changed = cand.months_of(analysis.changes, answer)

    def tagged(df: DataFrame, tag: Any, month: Any = None) -> DataFrame:
        return df.select(
            (F.lit(tag) if isinstance(tag, str) else tag).alias("tag"),
            (F.lit(None).cast("string") if month is None else month).alias("month"),
        )

    month = F.col(answer.partition)
    counted = (
        tagged(classified.retired, F.col("status"))
        .unionByName(tagged(classified.inserted, cand.INSERTED))
        .unionByName(tagged(classified.unchanged_ids, "unchanged"))
        .unionByName(tagged(analysis.serving_in_scope, "serving_in_scope", month))
        .unionByName(tagged(analysis.recomputed_rows, "new_rows", month))
        .unionByName(tagged(analysis.recompute, "recomputed"))
        .unionByName(tagged(cand.restrict_months(analysis.serving, changed, answer), "serving_rewritten"))
        .groupBy("tag")
        .agg(F.count(F.lit(1)).alias("n"), F.sort_array(F.collect_set("month")).alias("months"))
        .collect()
    )
    tally = {str(r["tag"]): int(r["n"]) for r in counted}
    months_in_scope = sorted(
        {str(m) for r in counted if r["tag"] in ("serving_in_scope", "new_rows") for m in r["months"]}
    )
    inserted = tally.get(cand.INSERTED, 0)
    table = registry.get(setup.plan.answer.table)
    accounting = sc.input_accounting(sc.events_in_scope(analysis.events, analysis.recompute))
    accounting["held"] = _held_events(registry, setup)
    start, end = setup.plan.range.event_from, setup.plan.range.event_until
    return sc.ReplayScope(
        run_id=setup.run_id,
        plan=setup.plan.plan,
        purpose=setup.plan.purpose.value,
        table=table.name,
        engine_change=setup.engines.change,
        engine_label=setup.engines.label,
        pins=dict(setup.pins),
        event_range=(start.isoformat() if start else None, end.isoformat() if end else None),
        affected_entity_count=count,
        affected_entities=entities,
        old_entities=olds,
        new_entities=news,
        recomputed_entity_count=tally.get("recomputed", 0),
        partitions=tuple(months_in_scope),
        changed_partitions=tuple(changed),
        serving_rows_in_scope=tally.get("serving_in_scope", 0),
        new_rows=tally.get("new_rows", 0),
        to_supersede=tally.get(cand.SUPERSEDED, 0),
        to_retract=tally.get(cand.RETRACTED, 0),
        to_insert=inserted,
        unchanged=tally.get("unchanged", 0),
        producing_runs=_producing_runs(registry, classified.retired),
        estimate=sc.Estimate(
            bytes_to_read=size.bytes,
            rows_to_read=size.rows,
            files_to_read=size.files,
            rows_to_write=tally.get("serving_rewritten", 0) + inserted,
            max_bytes_read=setup.plan.operations.max_bytes_read,
        ),
        inputs=accounting,
        change_kind=setup.engines.kind.value,
        inputs_route=setup.inputs_route,
    )


def plan_scope(
    registry: TableRegistry,
    plan: CorrectionPlan,
    *,
    engines: EngineCatalog,
    clock: Clock | None = None,
    rebuild: bool = False,
) -> sc.ReplayScope:
    """The dry run: the exact scope and cost of a replay; writes nothing, not even the ledger.

    Refuses (:class:`ReplayRefusedError`) when the estimated read exceeds the plan's cap,
    and (:class:`~lakehouse.errors.EngineFingerprintError`) when an engine's code changed
    without a version bump. ``clock`` gives the date a producer change takes the resolver in
    force at (the machine's clock if not given). A dry run is allowed before the new
    version takes effect: it decides nothing. A plan whose run is already published has
    nothing to scope (refused here; :func:`scope_or_published` answers it instead); one
    whose resumable run lost its pins to maintenance is refused
    (:class:`~lakehouse.errors.PinnedInputGoneError`) unless ``rebuild``, which scopes a new
    run on the current versions.
    """
    answer = scope_or_published(registry, plan, engines=engines, clock=clock, rebuild=rebuild)
    if isinstance(answer, AlreadyPublished):
        raise ReplayRefusedError(
            f"run {answer.run_id} of plan {plan.plan} is already published; there is nothing to scope"
        )
    return answer


@dataclass(frozen=True)
class AlreadyPublished:
    """A plan whose run is published: a rerun has nothing to do (and writes nothing)."""

    run_id: str
    plan: str
    table: str
    version: int
    effective_at: datetime
    status: str


def scope_or_published(
    registry: TableRegistry,
    plan: CorrectionPlan,
    *,
    engines: EngineCatalog,
    clock: Clock | None = None,
    rebuild: bool = False,
) -> sc.ReplayScope | AlreadyPublished:
    """``lakehouse replay --dry-run``: the plan's published run if it has one (from the ledger
    only: its pinned versions may have been expired since, and are not read), else the scope
    of :func:`plan_scope`."""
    setup = setup_replay(registry, plan, engines, clock=clock or SystemClock(), rebuild=rebuild)
    if setup.resumed_from is not None and setup.resumed_status in PUBLISHED_STATES:
        live = load_state(registry, setup.resumed_from).live_publication
        if live is not None:
            table = plan.answer.table
            return AlreadyPublished(
                setup.resumed_from,
                plan.plan,
                table,
                live.tables[table],
                live.effective_at,
                str(setup.resumed_status),
            )
    size = input_size(registry, setup)
    check_budget(plan, size)
    analysis = analyse(registry, setup, built_at=EPOCH)
    scope = describe_scope(registry, setup, analysis, size)
    log.info(
        "dry run of %s: %d affected entities, supersede %d, retract %d, insert %d in %d partitions; "
        "inputs: %s",
        setup.run_id,
        scope.affected_entity_count,
        scope.to_supersede,
        scope.to_retract,
        scope.to_insert,
        len(scope.changed_partitions),
        setup.inputs_route,
    )
    return scope
