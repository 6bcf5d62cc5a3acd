"""The replay flow up to the gate: scope (dry run), candidate, diff, reconciliation, decision.

:func:`plan_scope` is the dry run: it pins the inputs, verifies the engines, estimates the
I/O and computes the exact scope, and writes nothing at all (not even the ledger).

:func:`run_replay` runs the plan: the same analysis, then

1. records ``run_started`` (plan, pins, engines) under the run id;
2. builds the candidate (Iceberg branch / Delta shadow table) holding serving plus this
   run's changes, stamped with the build time ``B`` (resumes an existing candidate that
   already holds this run's rows, unless ``rebuild``);
3. diffs candidate-current against serving-current by ``correlation_id`` and accounts for
   every input event (scored, rejected, held), records the ``diff_manifest`` and writes
   the per-key diff and a review file (every high-impact change, a sample of the others)
   under ``<workdir>/replays/<run_id>/``;
4. reconciles independently (:mod:`workloads.replay.reconcile`) and runs the Great
   Expectations gate, records the ``reconciliation_decision`` and ``run_finished``;
5. stops: a ``correction`` at ``awaiting_approval`` (or ``blocked`` / ``suppressed`` by
   the verdict), a ``comparison`` at ``compared`` (its candidate is dropped; it can never
   be published).

Nothing is written to the live outbox: the notifications a publication would send are
only listed (``notifications_planned``).

A rerun of the same plan finds the run it would be (same plan and engines; an earlier run
that is unfinished, awaiting approval or published keeps its pins) and resumes it; a
finished build is returned as recorded. After a comparison, a blocked, suppressed,
rejected or rolled-back run, a rerun pins afresh (and gets the same run id if nothing moved).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from lakehouse import quality
from lakehouse.digest import canonical_hash, digest_of
from lakehouse.errors import InjectedFailure, ReplayError, ReplayRefusedError
from lakehouse.tables import Candidate, Table, TableSize
from lakehouse.tables.base import first_line
from ledger.api import open_ledger
from ledger.clock import Clock
from ledger.engines import EngineCatalog
from ledger.entries import (
    DiffManifest,
    LedgerEntryBase,
    Publication,
    ReconciliationDecision,
    RunFinished,
    RunStarted,
)
from ledger.identity import InputRead
from ledger.reader import LedgerReader
from ledger.writer import LedgerWriter
from workloads.replay import candidate as cand
from workloads.replay import reconcile as rec
from workloads.replay import scope as sc
from workloads.replay.diff import CHANGED, REMOVED, UNCHANGED, diff_by_key, summarize
from workloads.replay.faults import FailPoint, fail_point, maybe_fail
from workloads.replay.identity import (
    BRONZE_PREFIX,
    SILVER,
    ReplayEngines,
    candidate_name,
    declared_int,
    engine_function,
    engine_kwargs,
    pin_inputs,
    replay_run_id,
    resolve_engines,
    run_candidates,
)
from workloads.replay.plan import CorrectionPlan, Purpose
from workloads.replay.state import (
    APPROVED,
    AWAITING_APPROVAL,
    BLOCKED,
    COMPARED,
    PUBLISH_COMMAND,
    REJECTED,
    REPLAY_COMMAND,
    RESTARTABLE,
    SUPPRESSED,
    RunState,
    run_state,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.tables import TableRegistry

EXCEPTIONS: Final = "ops.exceptions"
AWAITING: Final = "awaiting_approval"
COMPARE: Final[tuple[str, ...]] = ("entity_a", "entity_b", "valid_from", "valid_to", "confidence", "evidence")
"""Columns the per-key diff compares (the id fixes type, pair and valid_from)."""
REVIEW_FILE: Final = "review.json"
EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


# -- setup: engines, pins, run id -----------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    """What identifies a replay before anything is read."""

    plan: CorrectionPlan
    engines: ReplayEngines
    pins: Mapping[str, int]
    run_id: str
    bounds: tuple[datetime | None, datetime | None]
    resumed_from: str | None = None
    """The unfinished run whose pins were reused, if any."""


def _replay_runs(reader: LedgerReader, plan: CorrectionPlan, engines: ReplayEngines) -> list[str]:
    """Run ids of earlier replays of this exact plan and engines, newest first."""
    found = []
    for entry in reader.entries(kind="run_started"):
        if not isinstance(entry, RunStarted) or entry.command != REPLAY_COMMAND or entry.run_id is None:
            continue
        if entry.parameters.get("plan_digest") != plan.digest:
            continue
        if sorted(e.digest for e in entry.engines) != engines.digests():
            continue
        found.append(entry.run_id)
    return list(reversed(list(dict.fromkeys(found))))


def setup_replay(registry: TableRegistry, plan: CorrectionPlan, catalog: EngineCatalog) -> Setup:
    """Verify the engines, pin the inputs (reusing an unfinished run's pins) and derive the run id."""
    engines = resolve_engines(plan, catalog)
    reader = LedgerReader.for_registry(registry)
    bounds = sc.range_bounds(plan.range.event_from, plan.range.event_until)
    for run_id in _replay_runs(reader, plan, engines):
        state = run_state(run_id, reader.by_run(run_id))
        if state.status not in RESTARTABLE:
            return Setup(plan, engines, state.pins, run_id, bounds, resumed_from=run_id)
    pins = pin_inputs(plan, registry)
    return Setup(plan, engines, pins, replay_run_id(plan, pins, engines), bounds)


# -- input size estimate ----------------------------------------------------------------------------


def input_size(registry: TableRegistry, setup: Setup) -> TableSize:
    """What the replay reads: Silver in the event range, the whole answer table, Bronze feeds.

    Bytes and files count every pinned input; rows count the Silver events (the engines' input).
    """
    months = sc.month_bounds(setup.bounds)
    total = TableSize(0, 0, 0)
    for name, version in sorted(setup.pins.items()):
        table = registry.get(name)
        silver = name == SILVER
        first, last = months if silver else (None, None)
        size = table.size_at(
            version, partition="event_month" if silver else None, first=first, last=last, count_rows=silver
        )
        total = TableSize(total.files + size.files, total.bytes + size.bytes, total.rows + size.rows)
    return total


def check_budget(plan: CorrectionPlan, size: TableSize) -> None:
    """Refuse a replay whose estimated read exceeds the plan's I/O cap."""
    cap = plan.operations.max_bytes_read
    if size.bytes > cap:
        raise ReplayRefusedError(
            f"plan {plan.plan} would read about {size.bytes} bytes ({size.files} files), over its cap "
            f"operations.max_bytes_read = {cap}; narrow range.event_from/event_until or raise the cap"
        )


# -- analysis (pure apart from reading the pinned inputs) -----------------------------------------


@dataclass(frozen=True)
class Analysis:
    """Everything computed about a replay before its candidate is written."""

    events: DataFrame
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


def _checkpoint(df: DataFrame) -> DataFrame:
    """Compute once and cut the lineage (see workloads.gold.build._materialize for why not persist)."""
    return df.localCheckpoint(eager=True)


def analyse(registry: TableRegistry, setup: Setup, *, built_at: datetime) -> Analysis:
    """Resolve twice, find the affected scope, recompute it and classify serving rows."""
    from pyspark.sql import functions as F

    plan, engines = setup.plan, setup.engines
    silver = registry.get(SILVER).read(as_of=setup.pins[SILVER])
    silver = silver.where(sc.in_range(F.col("event_time"), setup.bounds))
    identity = silver.select(*sc.RESOLUTION_INPUT)
    old = engine_function(engines.old)(identity)
    new = engine_function(engines.new)(identity)
    events = _checkpoint(sc.pair_resolutions(silver, old, new))
    affected = _checkpoint(sc.affected_entities(events))
    max_entities = declared_int(engines.producer, "max_entities_per_asset")
    flips = sc.crowding_flips(events, affected, max_entities)
    recompute = _checkpoint(sc.recomputed_entities(affected, flips))
    vanished = affected.where(F.col("old_side") & ~F.col("new_side")).select("entity_id")
    producer = engine_function(engines.producer)
    kwargs = engine_kwargs(producer, engines.producer.parameters)
    raw = producer(sc.scoped_events(events, recompute), run_id=setup.run_id, recorded_at=built_at, **kwargs)
    recomputed = _checkpoint(sc.involving(raw, recompute).withColumn("engine", F.lit(engines.label)))
    serving = registry.get(plan.answer.table).read(as_of=setup.pins[plan.answer.table])
    current = serving.where(cand.is_current() & sc.in_range(F.col("valid_from"), setup.bounds))
    serving_in_scope = _checkpoint(sc.involving(current, recompute))
    reasons = cand.Reasons.of(
        plan=plan.plan, run_id=setup.run_id, change=engines.change, new_engine=engines.new.ref
    )
    classified = cand.classify(
        serving_in_scope, recomputed, sc.entity_mapping(events), reasons=reasons, built_at=built_at
    )
    classified = cand.Classified(
        retired=_checkpoint(classified.retired),
        inserted=_checkpoint(classified.inserted),
        unchanged_ids=_checkpoint(classified.unchanged_ids),
        transitions=_checkpoint(classified.transitions),
    )
    return Analysis(
        events=events,
        affected=affected,
        recompute=recompute,
        vanished=vanished,
        serving=serving,
        serving_in_scope=serving_in_scope,
        recomputed_rows=recomputed,
        classified=classified,
        changes=_checkpoint(cand.changes_of(classified)),
        reasons=reasons,
        max_entities=max_entities,
    )


def _held_events(registry: TableRegistry, setup: Setup) -> int:
    """Facts in ``ops.exceptions`` awaiting approval whose event time is in the range."""
    from pyspark.sql import functions as F

    table = registry.get(EXCEPTIONS)
    if not table.exists():
        return 0
    rows = table.read().where((F.col("status") == AWAITING) & sc.in_range(F.col("event_time"), setup.bounds))
    return int(rows.count())


def _producing_runs(registry: TableRegistry, retired: DataFrame) -> tuple[sc.ProducingRun, ...]:
    """The runs whose serving rows the replay retires, and their publications in the ledger."""
    from pyspark.sql import functions as F

    rows = (
        retired.groupBy("run_id")
        .agg(F.count(F.lit(1)).alias("rows"), F.sort_array(F.collect_set("engine")).alias("engines"))
        .orderBy("run_id")
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

    classified = analysis.classified
    count, entities = _ids(analysis.affected)
    listed = analysis.affected.where(F.col("entity_id").isin(*entities)).collect()
    olds = tuple(sorted(str(r["entity_id"]) for r in listed if r["old_side"]))
    news = tuple(sorted(str(r["entity_id"]) for r in listed if r["new_side"]))
    changed = cand.months_of(analysis.changes)

    def tagged(df: DataFrame, tag: Any, month: Any = None) -> DataFrame:
        return df.select(
            (F.lit(tag) if isinstance(tag, str) else tag).alias("tag"),
            (F.lit(None).cast("string") if month is None else month).alias("month"),
        )

    month = F.col(cand.PARTITION)
    counted = (
        tagged(classified.retired, F.col("status"))
        .unionByName(tagged(classified.inserted, cand.INSERTED))
        .unionByName(tagged(classified.unchanged_ids, "unchanged"))
        .unionByName(tagged(analysis.serving_in_scope, "serving_in_scope", month))
        .unionByName(tagged(analysis.recomputed_rows, "new_rows", month))
        .unionByName(tagged(analysis.recompute, "recomputed"))
        .unionByName(tagged(cand.restrict_months(analysis.serving, changed), "serving_rewritten"))
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
    )


def plan_scope(registry: TableRegistry, plan: CorrectionPlan, *, engines: EngineCatalog) -> sc.ReplayScope:
    """The dry run: the exact scope and cost of a replay; writes nothing, not even the ledger.

    Refuses (:class:`ReplayRefusedError`) when the estimated read exceeds the plan's cap,
    and (:class:`~lakehouse.errors.EngineFingerprintError`) when an engine's code changed
    without a version bump.
    """
    setup = setup_replay(registry, plan, engines)
    size = input_size(registry, setup)
    check_budget(plan, size)
    analysis = analyse(registry, setup, built_at=EPOCH)
    return describe_scope(registry, setup, analysis, size)


# -- outcome ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplayOutcome:
    """What a replay run produced and where it stopped."""

    run_id: str
    plan: str
    purpose: str
    status: str
    """``awaiting_approval``, ``blocked`` (verdict not publish), ``suppressed`` (nothing
    changes), ``compared`` (comparison: never published), or a later state when a rerun
    found the run already past its build."""
    table: str
    candidate: str | None
    base_version: int | None
    partitions: tuple[str, ...]
    diff: Mapping[str, int]
    decision: Mapping[str, Any]
    sample: tuple[Mapping[str, Any], ...] = ()
    high_impact: tuple[Mapping[str, Any], ...] = ()
    notifications_planned: tuple[Mapping[str, Any], ...] = ()
    review_location: str | None = None
    candidate_hash: str | None = None
    resumed: bool = False
    scope: sc.ReplayScope | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["scope"] = self.scope.to_dict() if self.scope is not None else None
        return json.loads(json.dumps(data, default=str))  # type: ignore[no-any-return]

    def lines(self) -> list[str]:
        """Human output for ``lakehouse replay``."""
        d = self.decision
        out = [
            f"replay {self.run_id} of plan {self.plan} ({self.purpose}): {self.status}",
            f"candidate {self.candidate or '-'} of {self.table} (base {self.base_version}); "
            f"partitions rewritten: {', '.join(self.partitions) or 'none'}",
            "diff: " + ", ".join(f"{k} {v}" for k, v in self.diff.items()),
            f"verdict: {d.get('verdict')} (owner {d.get('owner')}); failed check: "
            f"{d.get('failed_invariant') or 'none'}; "
            f"first bad partition: {d.get('first_bad_partition') or '-'}",
            f"totals: serving {d.get('old_total')}, candidate {d.get('candidate_total')}, expected delta "
            f"{d.get('expected_delta')}, residual {d.get('residual_delta')}",
            f"high-impact changes: {len(self.high_impact)}; sample of changes: {len(self.sample)}",
        ]
        for change in self.high_impact:
            out.append(
                f"  ! {change.get('kind')} {change.get('old_id') or '-'} -> {change.get('new_id') or '-'} "
                f"({change.get('old_confidence')} -> {change.get('new_confidence')})"
            )
        if self.review_location:
            out.append(f"review: {self.review_location}")
        if self.status == AWAITING_APPROVAL:
            out.append(
                f"next: lakehouse approve {self.run_id} --by NAME, then lakehouse publish {self.run_id}"
            )
        return out


def _planned_notifications(plan: CorrectionPlan, run_id: str) -> tuple[dict[str, Any], ...]:
    from workloads.replay.outbox import idempotency_key

    return tuple(
        {
            "consumer": c.name,
            "required": c.required,
            "decision_version": run_id,
            "idempotency_key": idempotency_key(c.name, plan.plan, run_id),
        }
        for c in plan.publication.consumers
    )


def _review_dir(registry: TableRegistry, run_id: str) -> Path:
    return registry.config.workdir_path / "replays" / run_id


def _read_review(location: str | None) -> dict[str, Any]:
    if not location:
        return {}
    path = Path(location) / REVIEW_FILE
    if not path.is_file():
        return {}
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def outcome_from_state(state: RunState, *, resumed: bool = True) -> ReplayOutcome:
    """The outcome of a run as recorded: from its ledger entries and its review file, no recomputation."""
    manifest, decision = state.manifest, state.decision
    review = _read_review(manifest.location if manifest else None)
    return ReplayOutcome(
        run_id=state.run_id,
        plan=state.plan.plan,
        purpose=state.plan.purpose.value,
        status=state.status,
        table=state.table,
        candidate=manifest.candidate if manifest else None,
        base_version=manifest.base_version if manifest else None,
        partitions=manifest.partitions if manifest else (),
        diff=dict(manifest.counts) if manifest else {},
        decision=_decision_dict(decision) if decision else {},
        sample=tuple(review.get("sample", ())),
        high_impact=tuple(review.get("high_impact", ())),
        notifications_planned=_planned_notifications(state.plan, state.run_id),
        review_location=manifest.location if manifest else None,
        candidate_hash=review.get("candidate_hash"),
        resumed=resumed,
    )


def _decision_dict(decision: ReconciliationDecision) -> dict[str, Any]:
    data = decision.model_dump(mode="json", exclude={"kind", "run_id"})
    return data


# -- building the candidate ---------------------------------------------------------------------------


def _stage(table: Table, run_id: str) -> Candidate:
    """Stage a fresh candidate of ``run_id`` from current serving (named after its base)."""
    for _ in range(3):
        base = table.current_version()
        name = candidate_name(run_id, base)
        staged = table.stage_candidate(name)
        if staged.base_version == base:
            return staged
        table.drop_candidate(staged)  # serving moved between reading the version and staging
    raise ReplayError(f"{table.name} kept changing while staging the candidate of {run_id}; rerun the replay")


def _holds_run(table: Table, candidate: Candidate, run_id: str, months: Sequence[str]) -> bool:
    """Whether a staged candidate already holds this run's build (its rows or retirements)."""
    from pyspark.sql import functions as F

    rows = cand.restrict_months(table.read_candidate(candidate), months)
    marked = rows.where((F.col("run_id") == run_id) | F.col("supersede_reason").contains(f"run {run_id}:"))
    return not marked.isEmpty()


def build_candidate(
    table: Table, setup: Setup, analysis: Analysis, *, built_at: datetime, rebuild: bool
) -> tuple[Candidate, bool]:
    """The run's candidate with its changes written; returns it and whether it was resumed."""
    months = cand.months_of(analysis.changes)
    existing = run_candidates(table, setup.run_id)
    if existing and not rebuild and _holds_run(table, existing[-1], setup.run_id, months):
        for stale in existing[:-1]:
            table.drop_candidate(stale)
        return existing[-1], True
    for stale in existing:
        table.drop_candidate(stale)
    staged = _stage(table, setup.run_id)
    if months:
        base = cand.restrict_months(table.read_candidate(staged), months)
        content = cand.apply_changes(base, analysis.changes, run_id=setup.run_id, effective_at=built_at)
        table.overwrite_partitions(
            content,
            run_id=setup.run_id,
            metadata={"lakehouse.replay-step": "build"},
            candidate=staged,
        )
    return staged, False


def read_base(table: Table, version: int | None) -> DataFrame:
    """Serving as of ``version`` (an empty frame of the table's schema for None)."""
    if version is None:
        return table.read().limit(0)
    return table.read(as_of=version)


# -- diff and review ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiffResult:
    """The per-key diff of a candidate and the run's changes in it."""

    counts: Mapping[str, int]
    per_key: DataFrame
    changes: DataFrame
    changes_hash: str
    changes_rows: int


def diff_candidate(
    table: Table, candidate: Candidate, run_id: str, months: Sequence[str]
) -> tuple[DiffResult, DataFrame, DataFrame]:
    """Per-key diff of candidate-current vs serving-current (at the candidate's base) in ``months``.

    Returns the result, the whole candidate and the whole base (for reconciliation).
    """
    from pyspark.sql import functions as F

    whole = table.read_candidate(candidate)
    base = read_base(table, candidate.base_version)
    new_cur = cand.restrict_months(whole, months).where(cand.is_current())
    old_cur = cand.restrict_months(base, months).where(cand.is_current())
    per_key = _checkpoint(diff_by_key(old_cur, new_cur, ["correlation_id"], COMPARE))
    summary = summarize(per_key)
    outside = base.where(cand.is_current() & ~F.col(cand.PARTITION).isin(*months)) if months else base
    unchanged_outside = int(outside.where(cand.is_current()).count())
    counts = summary.to_dict()
    counts[UNCHANGED] += unchanged_outside
    counts["serving_total"] += unchanged_outside
    counts["candidate_total"] += unchanged_outside
    changes = cand.extract_changes(
        cand.restrict_months(whole, months), cand.restrict_months(base, months), run_id
    )
    changes = _checkpoint(changes)
    return (
        DiffResult(
            counts=counts,
            per_key=per_key,
            changes=changes,
            changes_hash=canonical_hash(changes, exclude=cand.WHEN_COLUMNS),
            changes_rows=int(changes.count()),
        ),
        whole,
        base,
    )


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [json.loads(json.dumps(r.asDict(), default=str)) for r in df.collect()]


def review_lists(
    transitions: DataFrame, *, threshold: float, sample_size: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(sample of changes, every high-impact change): |confidence delta| >= threshold, or retracted."""
    from pyspark.sql import functions as F

    key = F.coalesce(F.col("new_id"), F.col("old_id"))
    ordered = transitions.orderBy("kind", key, "old_id")
    high = ordered.where((F.abs(F.col("confidence_delta")) >= threshold) | (F.col("kind") == cand.RETRACTED))
    return _rows(ordered.limit(sample_size)), _rows(high)


def write_review(
    directory: Path,
    per_key: DataFrame,
    transitions: DataFrame,
    review: Mapping[str, Any],
) -> str:
    """Write the per-key diff (changed keys), every transition and the review file; returns the folder."""
    from pyspark.sql import functions as F

    directory.mkdir(parents=True, exist_ok=True)
    changed = per_key.where(F.col("change") != UNCHANGED)
    changed.coalesce(1).write.mode("overwrite").json((directory / "diff").as_uri())
    transitions.coalesce(1).write.mode("overwrite").json((directory / "transitions").as_uri())
    (directory / REVIEW_FILE).write_text(
        json.dumps(dict(review), sort_keys=True, indent=1, default=str), encoding="utf-8"
    )
    return str(directory)


# -- reconciliation inputs -----------------------------------------------------------------------------


def trace_keys(changes: DataFrame, run_id: str, size: int) -> DataFrame:
    """The first ``size`` changed keys by id; new rows trace under the new resolution, old under the old."""
    from pyspark.sql import functions as F

    side = F.when(F.col("run_id") == run_id, F.lit("new")).otherwise(F.lit("old"))
    return (
        changes.select(
            F.concat_ws("@", "correlation_id", side).alias("key"),
            side.alias("side"),
            "correlation_type",
            "entity_a",
            "entity_b",
        )
        .orderBy("key")
        .limit(size)
    )


def pinned_bronze(registry: TableRegistry, pins: Mapping[str, int]) -> dict[str, DataFrame]:
    """Domain -> the pinned Bronze table of that feed."""
    return {
        name[len(BRONZE_PREFIX) :]: registry.get(name).read(as_of=version)
        for name, version in sorted(pins.items())
        if name.startswith(BRONZE_PREFIX)
    }


def gate_check(rows: DataFrame, table_name: str) -> rec.Check:
    """The table's Great Expectations suite on the rewritten rows, as a reconciliation check."""
    result = quality.validate(rows, table_name)
    return rec.Check(
        name="quality_gate",
        passed=result.success,
        violations=len(result.failures),
        detail=result.message(),
        examples=tuple(f.describe() for f in result.failures[:3]),
    )


# -- the run ----------------------------------------------------------------------------------------------


def _started_entry(setup: Setup) -> RunStarted:
    plan = setup.plan
    event_range = {
        "event_from": plan.range.event_from.isoformat() if plan.range.event_from else None,
        "event_until": plan.range.event_until.isoformat() if plan.range.event_until else None,
    }
    return RunStarted(
        run_id=setup.run_id,
        command=REPLAY_COMMAND,
        purpose=plan.purpose.value,
        engines=setup.engines.identities,
        inputs={
            name: InputRead(version=version, range=event_range if name == SILVER else {})
            for name, version in sorted(setup.pins.items())
        },
        parameters={
            "plan": plan.model_dump(mode="json", by_alias=True),
            "plan_digest": plan.digest,
            "engine_label": setup.engines.label,
            "engine_change": setup.engines.change,
        },
        plan=plan.plan,
    )


def run_replay(
    registry: TableRegistry,
    plan: CorrectionPlan,
    *,
    engines: EngineCatalog,
    clock: Clock,
    fail_at: FailPoint | str | None = None,
    rebuild: bool = False,
) -> ReplayOutcome:
    """Run a correction or comparison plan up to its gate (see the module docstring).

    ``clock`` gives the build time and the ledger's ``recorded_at``. ``fail_at`` injects
    a failure at a step (:class:`FailPoint`). ``rebuild`` drops an existing candidate of
    the run and builds it again instead of resuming it.
    """
    chosen = fail_point(fail_at)
    setup = setup_replay(registry, plan, engines)
    run_id = setup.run_id
    reader = LedgerReader.for_registry(registry)
    state = _existing(run_id, reader.by_run(run_id))
    table = registry.get(plan.answer.table)
    if state is not None and rebuild and state.live_publication is not None:
        raise ReplayRefusedError(
            f"run {run_id} is published; it cannot be rebuilt in place: roll it back "
            f"(lakehouse rollback {run_id}) or restate it with a new plan"
        )
    if state is not None and not rebuild and _finished_build(state, table):
        return outcome_from_state(state)
    size = input_size(registry, setup)
    check_budget(plan, size)
    ledger = open_ledger(registry, clock=clock)
    built_at = clock.now()
    ledger.writer.append(_started_entry(setup))
    try:
        return _build_and_evaluate(registry, setup, table, ledger.writer, size, built_at, chosen, rebuild)
    except InjectedFailure:
        raise
    except Exception as exc:
        ledger.writer.append(
            RunFinished(run_id=run_id, status="failed", error=f"{type(exc).__name__}: {first_line(exc)}")
        )
        raise


def _existing(run_id: str, entries: Sequence[LedgerEntryBase]) -> RunState | None:
    try:
        return run_state(run_id, entries)
    except ReplayError:
        return None


def _finished_build(state: RunState, table: Table) -> bool:
    """Whether a rerun can return the recorded outcome instead of building again.

    A recorded decision stands for the candidate it judged: a comparison or suppressed
    run keeps no candidate, the others keep theirs. A candidate where none should be (or
    none where one should be) means a later build was interrupted: build (resume) again.
    """
    if state.publications:  # published, or rolled back: re-publication goes through publish
        return True
    staged = bool(run_candidates(table, state.run_id))
    if state.status in (COMPARED, SUPPRESSED):
        return not staged
    if state.status in (BLOCKED, REJECTED, AWAITING_APPROVAL, APPROVED):
        return staged
    return False


def _build_and_evaluate(
    registry: TableRegistry,
    setup: Setup,
    table: Table,
    writer: LedgerWriter,
    size: TableSize,
    built_at: datetime,
    chosen: FailPoint | None,
    rebuild: bool,
) -> ReplayOutcome:
    plan, run_id = setup.plan, setup.run_id
    analysis = analyse(registry, setup, built_at=built_at)
    scope = describe_scope(registry, setup, analysis, size)
    candidate, resumed = build_candidate(table, setup, analysis, built_at=built_at, rebuild=rebuild)
    maybe_fail(chosen, FailPoint.AFTER_CANDIDATE, run_id)

    months = list(scope.changed_partitions)
    diff, whole, base = diff_candidate(table, candidate, run_id, months)
    counts = {
        **diff.counts,
        "superseded": scope.to_supersede,
        "retracted": scope.to_retract,
        "inserted": scope.to_insert,
        "changes": diff.changes_rows,
        **scope.inputs,
    }
    sample, high = review_lists(
        analysis.classified.transitions,
        threshold=plan.checks.high_impact_confidence_delta,
        sample_size=plan.checks.sample_size,
    )
    candidate_hash = canonical_hash(whole, exclude=cand.WHEN_COLUMNS)
    location = write_review(
        _review_dir(registry, run_id),
        diff.per_key,
        analysis.classified.transitions,
        {"sample": sample, "high_impact": high, "candidate_hash": candidate_hash, "counts": counts},
    )
    manifest_digest = digest_of(
        {
            "diff": canonical_hash(diff.per_key),
            "changes": diff.changes_hash,
            "partitions": months,
            "counts": counts,
        }
    )
    manifest = DiffManifest(
        run_id=run_id,
        table=table.name,
        candidate=candidate.name,
        base_version=candidate.base_version,
        counts=counts,
        partitions=tuple(months),
        manifest_digest=manifest_digest,
        location=location,
    )
    # Not deduplicated: every evaluation asserts its manifest anew, so the latest manifest
    # is always the one of the current candidate (see RunState.decision).
    writer.append(manifest, deduplicate=False)
    maybe_fail(chosen, FailPoint.AFTER_DIFF, run_id)

    rewritten = cand.restrict_months(whole, months)
    gate = (
        gate_check(rewritten, table.name)
        if months
        else rec.Check(name="quality_gate", passed=True, detail="nothing rewritten")
    )
    engines = setup.engines
    declared_types = engines.producer.parameters.get("types")
    types = (
        [str(t) for t in declared_types] if isinstance(declared_types, list) else sorted(rec.ASSET_OF_TYPE)
    )
    reconciliation = rec.reconcile(
        candidate=whole,
        serving=base,
        serving_in_scope=analysis.serving_in_scope,
        events=analysis.events,
        recompute=analysis.recompute,
        vanished=analysis.vanished,
        rewritten=months,
        types=types,
        max_entities=analysis.max_entities,
        thresholds=rec.Thresholds(plan.checks.max_residual_delta, plan.checks.max_changed_ratio),
        trace_keys=trace_keys(diff.changes, run_id, plan.checks.trace_sample_size),
        bronze=pinned_bronze(registry, setup.pins),
        removed_or_changed=diff.counts[REMOVED] + diff.counts[CHANGED],
        changes=diff.changes_rows,
        gate=gate,
        owner=plan.answer.authority,
        affected_range={
            "event_from": scope.event_range[0],
            "event_until": scope.event_range[1],
            "partitions": months,
            "entities": scope.affected_entity_count,
        },
        bounds=setup.bounds,
    )
    fields = reconciliation.ledger_fields()
    fields["checks"] = {
        **fields["checks"],
        "changes": {"hash": diff.changes_hash, "rows": diff.changes_rows},
        "manifest_digest": manifest_digest,
    }
    decision = ReconciliationDecision(run_id=run_id, table=table.name, **fields)
    finished = RunFinished(run_id=run_id, status="ok", counts={k: int(v) for k, v in counts.items()})
    writer.append(decision, finished)
    if plan.purpose is Purpose.COMPARISON or reconciliation.verdict == "suppress":
        table.drop_candidate(candidate)  # never published: keep no shadow table or branch around
    state = run_state(run_id, LedgerReader.for_registry(registry).by_run(run_id))
    return ReplayOutcome(
        run_id=run_id,
        plan=plan.plan,
        purpose=plan.purpose.value,
        status=state.status,
        table=table.name,
        candidate=candidate.name,
        base_version=candidate.base_version,
        partitions=tuple(months),
        diff=counts,
        decision=_decision_dict(decision),
        sample=tuple(sample),
        high_impact=tuple(high),
        notifications_planned=_planned_notifications(plan, run_id),
        review_location=location,
        candidate_hash=candidate_hash,
        resumed=resumed,
        scope=scope,
    )


__all__ = [
    "PUBLISH_COMMAND",
    "Analysis",
    "ReplayOutcome",
    "Setup",
    "analyse",
    "build_candidate",
    "describe_scope",
    "plan_scope",
    "run_replay",
    "setup_replay",
]
