"""The demo story on the embedded default, as one function the CLI and notebooks call.

Each chapter is a library call the user could run alone (``lakehouse generate``,
``ingest``, ``build silver``, ``build gold``, ``replay``, ``approve``, ``ack``,
``publish``, ``rollback``); the demo only strings them together and returns their results
(``lakehouse demo`` draws them with :mod:`jobs.render`).
Running it twice is safe: the history is deterministic and kept, re-ingest is a no-op,
the builds rewrite the same content, and a restatement that was already published is
shown, not repeated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.tables import TableRegistry
from ledger import Clock, Ledger

if TYPE_CHECKING:
    from lakehouse.config import LakehouseConfig
    from ledger import ErasureCertificate, ErasureVerification
    from ledger.engines import EngineCatalog, EngineSpec
    from workloads.asof.answer import AsOfAnswer
    from workloads.bronze.ingest import IngestReport
    from workloads.communities import CommunityBuild
    from workloads.compliance import Places
    from workloads.gold.build import GoldReport
    from workloads.ml.calibrate import Calibration, Recalibration
    from workloads.ml.scoring import Scoring
    from workloads.ml.tracking import Tracking
    from workloads.ml.training import TrainedModel
    from workloads.ml.training_set import TrainingSet
    from workloads.operations import ProgressReport
    from workloads.reconciliation.run import ReconcileReport
    from workloads.replay import ApprovalResult, PublishResult, ReplayOutcome, RollbackResult
    from workloads.replay.plan import CorrectionPlan
    from workloads.replay.scope import ReplayScope
    from workloads.silver.build import SilverReport
    from workloads.streaming import DivergenceView, StreamReport
    from workloads.synthetic.holdback import HeldFeed

Progress = Callable[[str], None]
Gate = Callable[[str, Any], None]


@dataclass(frozen=True)
class DemoSettings:
    """Size of the demo history (small enough for a laptop, big enough to show everything)."""

    entities: int = 200
    months: int = 6
    seed: int = 7
    restate: bool = True
    """Continue with the ER v3 restatement (replay, approve, publish, rollback, re-publish),
    then the correlation v2 re-scoring."""


@dataclass(frozen=True)
class TableSummary:
    """One configured table at the end of the demo."""

    name: str
    zone: str
    format: str
    location: str
    current_version: int | None
    """None: the table does not exist."""
    rows: int | None


@dataclass(frozen=True)
class StalledFeed:
    """A feed that stopped delivering (seed 003): its newest deliveries held back while every
    feed was ingested, ``lakehouse progress`` judged at its expected last delivery (it is
    flagged, the others judged on their own cadence), then the held deliveries arrived late,
    were ingested, and the same judgement cleared it."""

    held: HeldFeed
    stalled: ProgressReport
    late: IngestReport
    """The ingest of the held deliveries once they arrived."""
    resumed: ProgressReport


@dataclass(frozen=True)
class Medallion:
    """generate -> ingest -> Silver -> Gold: each step's report and what the zones now hold."""

    ingest: Mapping[str, IngestReport]
    """Feed -> its ingest report."""
    silver: SilverReport
    gold: GoldReport
    quarantine_reasons: Mapping[str, int]
    """``feed:reason`` -> quarantined rows."""
    exceptions_awaiting_approval: tuple[Mapping[str, Any], ...]
    """The first rows of ``ops.exceptions``."""
    top_correlations: tuple[Mapping[str, Any], ...]
    """The most confident rows of ``gold.correlations``."""
    stream: StreamReport | None = None
    """``lakehouse stream --available-now`` over the newest deliveries, before the batch builds."""
    divergence: DivergenceView | None = None
    """Streaming against batch once the Gold build reconciled the provisional rows."""
    stalled_feed: StalledFeed | None = None
    """A feed held back at ingest, flagged by ``progress``, then delivered late."""


@dataclass(frozen=True)
class DriftRepair:
    """A drift planted behind the product's back between Bronze and Silver (a lost write and a
    changed value in ``silver.events``), found by ``lakehouse reconcile bronze.orders
    silver.events --repair`` and repaired from Bronze within its rate limit; a second run
    compares again and finds nothing."""

    planted: Mapping[str, str]
    """Class (``missing``, ``divergent``) -> the event id planted."""
    repair: ReconcileReport
    recheck: ReconcileReport


@dataclass(frozen=True)
class StoppedRestatement:
    """A restatement whose replay did not reach ``awaiting_approval`` (nothing to publish)."""

    plan: str
    run_id: str
    dry_run: ReplayScope
    replay: ReplayOutcome
    stopped: str
    """Why it stopped."""


@dataclass(frozen=True)
class Restatement:
    """The ER v3 restatement: dry run, replay (with both versions' quality against the
    history's labelled truth in ``replay.quality``), approval, publication, rollback,
    re-publication."""

    plan: str
    run_id: str
    dry_run: ReplayScope
    replay: ReplayOutcome
    approval: ApprovalResult
    publication: PublishResult
    example: Mapping[str, Any] | None
    """A correlation the replay retired (``superseded``) and its ``successor``, if any."""
    rollback: RollbackResult
    republication: PublishResult


@dataclass(frozen=True)
class Rescoring:
    """The correlation v2 re-scoring: a *producer* change, on the entities of the resolver in
    force (ER v3 once its restatement is published). Dry run and replay always; approval,
    acknowledgement and publication once correlation@2 has taken effect."""

    plan: str
    run_id: str
    change: str
    """``correlation@1 -> correlation@2``."""
    label: str
    """The ``engine`` label of its rows (``correlation@2;entity_resolution@3``)."""
    dry_run: ReplayScope
    replay: ReplayOutcome
    approval: ApprovalResult | None = None
    publication: PublishResult | None = None
    waiting: str | None = None
    """Why it was not published (correlation@2 not effective yet: run as a comparison)."""


@dataclass(frozen=True)
class Erasure:
    """A data subject with correlations erased (W6): where it was (the dry run), the
    certificate, the independent check run again from the certificate alone, and what
    ``asof`` answers about the subject's correlations for a moment before the erasure."""

    request_id: str
    dry_run: Places
    certificate: ErasureCertificate
    recheck: ErasureVerification
    asof: AsOfAnswer


@dataclass(frozen=True)
class Recalibrated:
    """The serving correlation release recalibrated (W5): the release declared from its
    registered calibrators, the replay of history under it, approved, acknowledged and
    published (``asof --history`` shows rows "recalibrated under ..."). ``waiting`` says
    why not, when there is nothing to recalibrate or the release cannot take effect today."""

    serving: str
    """The correlation release in force before the chapter (the one calibrated)."""
    declared: Recalibration | None = None
    replay: ReplayOutcome | None = None
    approval: ApprovalResult | None = None
    publication: PublishResult | None = None
    example: Mapping[str, Any] | None = None
    """A correlation the recalibration retired, and its successor."""
    waiting: str | None = None


@dataclass(frozen=True)
class MachineLearning:
    """The ML team's path (W4, W5): a point-in-time training set as known now, the fraud model
    trained and measured on it, each correlation release's confidence calibrated against
    the outcomes that arrived later (a release with nothing to calibrate says why), and the
    serving release recalibrated and published."""

    training_set: TrainingSet
    model: TrainedModel | None
    model_refused: str | None
    calibrations: tuple[Calibration, ...]
    not_calibrated: Mapping[str, str]
    """Release -> why it was not calibrated (no decisions serving, say)."""
    mlflow_ui: str
    recalibration: Recalibrated | None = None
    scoring: Scored | None = None


@dataclass(frozen=True)
class Scored:
    """The trained model as a scoring release (``train --declare``) and the decision points of the
    training set scored under it (``score``). A later demo run retrains, declares the next
    release and rescores: rows whose score moved are superseded "rescored under ...".
    ``waiting`` says why no new release was declared (one was declared today already)."""

    engine: str
    model: str
    model_version: str
    declared: bool
    run: Scoring
    waiting: str | None = None


@dataclass(frozen=True)
class Chapters:
    """The demo's chapters; all but ``medallion`` and ``drift`` are None with ``--no-restate``."""

    medallion: Medallion
    drift: DriftRepair | None = None
    restatement: Restatement | StoppedRestatement | None = None
    rescoring: Rescoring | None = None
    communities: CommunityBuild | None = None
    machine_learning: MachineLearning | None = None
    erasure: Erasure | None = None


@dataclass(frozen=True)
class DemoReport:
    """What the demo did, chapter by chapter, and every table at the end."""

    tables: tuple[TableSummary, ...]
    chapters: Chapters


DEMO_PLAN = Path("conf/plans/er-v3-recorrelation.yaml")
"""ER v1 -> v3: measured against the history's labelled truth, v3 (v2's email rules without
its card rule) improves entity resolution and correlations alike; v2 merged ring members."""
DEMO_ENGINES = Path("conf/engines.yaml")
RESCORING_PLAN = Path("conf/plans/correlation-v2-rescoring.yaml")
"""correlation 1 -> 2: a producer change, run after the ER restatement on its entities."""


def create_zones(registry: TableRegistry, progress: Progress) -> None:
    """Create every configured table that does not exist yet."""
    for table in registry:
        if not table.exists():
            progress(f"creating {table.name} ({table.format.value})")
            table.create(if_not_exists=True)


def describe_tables(registry: TableRegistry) -> tuple[TableSummary, ...]:
    """Every table with its zone, format, location, version and row count."""
    described = []
    for table in registry:
        exists = table.exists()
        described.append(
            TableSummary(
                name=table.name,
                zone=table.spec.zone.value,
                format=table.format.value,
                location=table.location,
                current_version=table.current_version() if exists else None,
                rows=table.read().count() if exists else None,
            )
        )
    return tuple(described)


def medallion(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    history: Path,
    settings: DemoSettings,
    progress: Progress,
    gate: Gate | None,
    pinned: Mapping[str, int] | None = None,
    engines_path: Path = DEMO_ENGINES,
) -> Medallion:
    """generate -> ingest every feed -> stream -> Silver -> Gold; returns what to show.

    The stream (``lakehouse stream --available-now``) takes the deliveries Bronze received since
    its checkpoint (on a first run, all of them) into provisional correlations; the Gold build
    then reconciles them against the batch's (agree, batch stronger, false positive, missed)
    and the divergence per scope is read back (``lakehouse divergence``).

    ``pinned`` (engine name -> version): the entity resolver's pin goes to the Silver build,
    the others to the Gold build (``--engine`` on the CLI).
    """
    from pyspark.sql import functions as F

    from workloads.engines.entity_resolution import NAME as RESOLVER
    from workloads.pipeline import run_gold, run_ingest, run_silver, run_stream_provisional
    from workloads.policies import load_streaming_policy
    from workloads.streaming import read_divergence, stream_home
    from workloads.synthetic.generator import FEEDS, GeneratorSettings, generate, load_lateness_policy
    from workloads.synthetic.holdback import hold_back, release_held

    policy = load_lateness_policy()
    if not (history / "_ground_truth.json").is_file():
        progress(f"generating {settings.months} months of history for {settings.entities} persons")
        generate(
            history,
            GeneratorSettings(entities=settings.entities, months=settings.months, seed=settings.seed),
            policy=policy,
        )
    for feed in FEEDS:  # deliveries an interrupted run held back arrive first
        release_held(history, feed)
    held = hold_back(history, STALLED_FEED, STALLED_DAYS)
    progress(f"holding back the last {len(held.deliveries)} deliveries of {held.feed}: it stops delivering")
    ingested: dict[str, IngestReport] = {}
    for feed in FEEDS:
        progress(f"ingesting {feed}")
        ingested[feed] = run_ingest(registry, ledger, clock, feed=feed, source=history)
    stalled_feed = stall_and_resume(registry, ledger, clock, history, held, progress)
    pins = dict(pinned or {})
    resolver = {name: v for name, v in pins.items() if name == RESOLVER}
    streaming = load_streaming_policy()
    progress("streaming the new deliveries into provisional correlations (stream --available-now)")
    streamed = run_stream_provisional(
        registry,
        ledger,
        clock,
        home=stream_home(registry.config),
        lateness=policy,
        streaming=streaming,
        engines_path=engines_path,
        pinned=pins,
    )
    progress("building Silver (canonicalise, quarantine, dedupe, lateness, entity resolution)")
    silver = run_silver(
        registry, ledger, clock, policy=policy, gate=gate, pinned=resolver, engines_path=engines_path
    )
    progress("building Gold (daily features, W1 baselines, correlations)")
    producers = {name: v for name, v in pins.items() if name != RESOLVER}
    gold = run_gold(
        registry, ledger, clock, gate=gate, pinned=producers, engines_path=engines_path, streaming=streaming
    )

    quarantine = registry.get("ops.quarantine").read()
    reasons = {
        f"{r['feed']}:{r['reason']}": r["count"]
        for r in quarantine.groupBy("feed", "reason").count().orderBy("feed", "reason").collect()
    }
    exceptions = [
        {k: r[k] for k in ("event_id", "domain", "period", "status", "reason")}
        for r in registry.get("ops.exceptions").read().orderBy("event_id").limit(10).collect()
    ]
    correlations = [
        {k: r[k] for k in ("correlation_type", "entity_a", "entity_b", "confidence", "engine", "status")}
        for r in registry.get("gold.correlations")
        .read()
        .orderBy(F.desc("confidence"), "correlation_id")
        .limit(5)
        .collect()
    ]
    return Medallion(
        ingest=ingested,
        silver=silver,
        gold=gold,
        quarantine_reasons=reasons,
        exceptions_awaiting_approval=tuple(exceptions),
        top_correlations=tuple(correlations),
        stream=streamed,
        divergence=read_divergence(registry),
        stalled_feed=stalled_feed,
    )


STALLED_FEED = "orders"
"""The feed the demo holds back: the busiest, so every other day of it has a delivery."""
STALLED_DAYS = 3
"""Deliveries of its last days held back: 3 days without one is past 2 x its 24-hour cadence."""


def feed_progress(registry: TableRegistry, at: datetime) -> ProgressReport:
    """``lakehouse progress --at AT`` with the shipped policies."""
    from workloads.operations import load_progress_policy, read_feed_stats, source_progress
    from workloads.silver.lateness import load_lateness_policy

    policy = load_progress_policy()
    stats = read_feed_stats(registry, at, policy.interval_hours)
    return source_progress(stats, load_lateness_policy(), policy, at)


def stall_and_resume(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    history: Path,
    held: HeldFeed,
    progress: Progress,
) -> StalledFeed:
    """``progress`` at six in the morning of the held feed's newest delivery (when it should
    have arrived), then the held deliveries arrive and are ingested, then ``progress`` again."""
    from workloads.pipeline import run_ingest
    from workloads.synthetic.holdback import release_held

    at = datetime.combine(held.newest, time(6), tzinfo=UTC)
    progress(f"progress at {at.isoformat()}: is every feed delivering?")
    stalled = feed_progress(registry, at)
    release_held(history, held.feed)
    progress(f"the held deliveries of {held.feed} arrive late: ingesting them")
    late = run_ingest(registry, ledger, clock, feed=held.feed, source=history)
    return StalledFeed(held=held, stalled=stalled, late=late, resumed=feed_progress(registry, at))


PLANTED_MISSING = 0
PLANTED_DIVERGENT = 1
"""Which Silver orders (in event id order) the planted drift loses and changes."""


def drift_repair(registry: TableRegistry, ledger: Ledger, clock: Clock, progress: Progress) -> DriftRepair:
    """Plant a drift in ``silver.events`` (an operator's hand: one order row deleted, another's
    amount changed), then ``reconcile bronze.orders silver.events --repair`` and again.

    The staleness window is 0 here: the demo's deliveries were ingested seconds ago, and the
    shipped window (``reconcile.staleness_seconds``) would leave every difference pending.
    """
    from decimal import Decimal

    from pyspark.sql import functions as F

    from workloads.reconciliation.pairs import resolve_pair
    from workloads.reconciliation.run import load_reconcile_policy, reconcile

    silver = registry.get("silver.events")
    orders = silver.read().where(F.col("domain") == "orders").select("event_id").orderBy("event_id")
    ids = [str(r["event_id"]) for r in orders.limit(2).collect()]
    lost, changed = ids[PLANTED_MISSING], ids[PLANTED_DIVERGENT]
    kept = silver.read().where(F.col("event_id") == changed).localCheckpoint()
    progress(f"planting a drift in silver.events: order {lost} lost, order {changed} changed by hand")
    silver.delete_where(f"event_id IN ('{lost}', '{changed}')", run_id="demo-operator")
    wrong = F.coalesce(F.col("amount"), F.lit(0)) + F.lit(Decimal("100.00"))
    changed_row = kept.withColumn("amount", wrong.cast(kept.schema["amount"].dataType))
    silver.append(changed_row, run_id="demo-operator")
    pair = resolve_pair(registry.config, "bronze.orders", "silver.events", None)
    policy = load_reconcile_policy().model_copy(update={"staleness_seconds": 0})
    progress("reconcile bronze.orders silver.events --repair")
    repaired = reconcile(registry, ledger, clock, pair, policy=policy, repair=True, progress=progress)
    progress("reconcile bronze.orders silver.events (again)")
    recheck = reconcile(registry, ledger, clock, pair, policy=policy, progress=progress)
    return DriftRepair(planted={"missing": lost, "divergent": changed}, repair=repaired, recheck=recheck)


def demo_catalog_path(config: LakehouseConfig) -> Path:
    """Where the demo lakehouse keeps its own engine catalog: ``engines.yaml`` in the work dir,
    or ``engines-<instance>.yaml`` for an instance (:meth:`LakehouseConfig.workdir_file`), the
    file later commands on the work dir read when given no ``--engines``."""
    return config.workdir_file("engines")


def demo_catalog(registry: TableRegistry, shipped: Path = DEMO_ENGINES) -> Path:
    """The demo lakehouse's own engine catalog (:func:`demo_catalog_path`): the shipped file
    copied once. The ML chapter declares its recalibrated release there, so the shipped file
    is never edited; every chapter reads it, and so do later commands on this work dir that
    are given no ``--engines``."""
    import shutil

    path = demo_catalog_path(registry.config)
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shipped, path)
    return path


def starting_pins(ledger: Ledger, plan_paths: Sequence[Path] = (DEMO_PLAN, RESCORING_PLAN)) -> dict[str, int]:
    """The story's starting point: a lakehouse whose history the plans' old versions decided.

    On a fresh lakehouse the in-force rule would build with the latest effective version of
    each engine (there is no history to restate yet), leaving the plans nothing to restate;
    the demo therefore starts under each plan's ``from`` version (entity_resolution@1 for
    the ER restatement, correlation@1 for the re-scoring), as ``lakehouse build silver
    --engine entity_resolution@1`` and ``build gold --engine correlation@1`` do. Once an
    engine has produced output (a second demo run) the rule decides again: no pin.
    """
    from ledger.engines import engine_history
    from workloads.replay.plan import load_plan

    produced = engine_history(ledger.reader.entries())
    changes = [load_plan(path).engine_change for path in plan_paths]
    return {c.engine: int(c.from_version) for c in changes if c.engine not in produced}


def _superseded_example(registry: TableRegistry, run_id: str) -> dict[str, Any] | None:
    """One correlation the replay retired, with its successor if it has one.

    A superseded row is preferred (it has a successor to show); a retracted one otherwise.
    """
    from pyspark.sql import functions as F

    rows = registry.get("gold.correlations").read()
    old = (
        rows.where(
            F.col("status").isin("superseded", "retracted") & F.col("supersede_reason").contains(run_id)
        )
        .orderBy(F.col("status").desc(), "correlation_id", "run_id")
        .limit(1)
        .collect()
    )
    if not old:
        return None
    columns = ("correlation_id", "correlation_type", "entity_a", "entity_b", "confidence", "engine", "status")
    before = {k: old[0][k] for k in (*columns, "superseded_at", "superseded_by", "supersede_reason")}
    after = (
        rows.where((F.col("correlation_id") == before["superseded_by"]) & (F.col("run_id") == run_id))
        .limit(1)
        .collect()
    )
    return {"superseded": before, "successor": {k: after[0][k] for k in columns} if after else None}


def _declare(plan: CorrectionPlan, engines: EngineCatalog, ledger: Ledger, progress: Progress) -> EngineSpec:
    """Record the plan's new engine version in the ledger (what a team does when it ships it)."""
    change = plan.engine_change
    new_engine = engines.resolve(change.engine, int(change.to_version))
    progress(f"declaring {new_engine.ref} effective from {new_engine.effective_from} in the ledger")
    ledger.writer.append(new_engine.declared_entry())
    return new_engine


def _approve_and_ack(
    registry: TableRegistry, plan: CorrectionPlan, run_id: str, clock: Clock, progress: Progress
) -> ApprovalResult:
    """The plan's first approver approves, then every required consumer acknowledges."""
    from workloads.replay import ack, approve

    approver = plan.publication.approvers[0]
    progress(f"approving as {approver}")
    approval = approve(registry, run_id, by=approver, clock=clock)
    for consumer in plan.publication.consumers:
        if consumer.required:
            progress(f"acknowledging for required consumer {consumer.name}")
            ack(registry, consumer.name, run_id, by=f"{consumer.name}-oncall", clock=clock)
    return approval


def restatement(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    progress: Progress,
    *,
    plan_path: Path = DEMO_PLAN,
    engines_path: Path = DEMO_ENGINES,
) -> Restatement | StoppedRestatement:
    """Declare ER v3 -> dry run -> replay -> approve -> ack -> publish -> rollback -> re-publish.

    If the plan's engine change was already published (a second demo run), the chapter
    shows that publication instead of restating again.
    """
    from ledger.engines import load_engines
    from workloads.replay import plan_scope, publish, rollback, run_replay
    from workloads.replay.plan import load_plan
    from workloads.replay.state import AWAITING_APPROVAL

    plan = load_plan(plan_path)
    engines = load_engines(engines_path)
    _declare(plan, engines, ledger, progress)

    progress(f"dry run of plan {plan.plan}: exact scope, nothing written")
    scope = plan_scope(registry, plan, engines=engines)
    progress(f"replaying {scope.affected_entity_count} affected entities into a candidate")
    outcome = run_replay(registry, plan, engines=engines, clock=clock)
    run_id = outcome.run_id
    if outcome.status != AWAITING_APPROVAL:
        return StoppedRestatement(
            plan=plan.plan,
            run_id=run_id,
            dry_run=scope,
            replay=outcome,
            stopped=f"replay {run_id} is {outcome.status}: nothing to approve or publish",
        )

    approval = _approve_and_ack(registry, plan, run_id, clock, progress)
    progress("publishing atomically (supersession, stamping, notifications)")
    publication = publish(registry, run_id, clock=clock)
    example = _superseded_example(registry, run_id)
    progress("rolling back the publication, then publishing it again")
    back = rollback(registry, run_id, clock=clock, reason="demo: show that rollback works")
    return Restatement(
        plan=plan.plan,
        run_id=run_id,
        dry_run=scope,
        replay=outcome,
        approval=approval,
        publication=publication,
        example=example,
        rollback=back,
        republication=publish(registry, run_id, clock=clock),
    )


def rescoring(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    progress: Progress,
    *,
    plan_path: Path = RESCORING_PLAN,
    engines_path: Path = DEMO_ENGINES,
) -> Rescoring:
    """Declare correlation v2 -> dry run -> replay -> approve -> ack -> publish.

    The same flow as the ER chapter, for a change of the answer's producer. A correction
    needs the new version in effect on the replay's date (otherwise the next Gold build
    would still run correlation@1 and undo it): before correlation@2's ``effective_from``
    the chapter runs the plan as a comparison (diff, reconciliation, quality; never
    published) and says from when it can publish. A second demo run shows the recorded
    run again (a published one is published once).
    """
    from ledger.engines import load_engines
    from workloads.replay import plan_scope, publish, run_replay
    from workloads.replay.plan import Purpose, load_plan
    from workloads.replay.state import APPROVED, AWAITING_APPROVAL, PUBLISHED

    plan = load_plan(plan_path)
    engines = load_engines(engines_path)
    new_engine = _declare(plan, engines, ledger, progress)
    today = clock.now().date()
    waiting = None
    if new_engine.effective_from > today:
        waiting = (
            f"{new_engine.ref} takes effect {new_engine.effective_from}, after today ({today}): a "
            f"correction now would be undone by the next Gold build, so the plan ran as a comparison; "
            f"from {new_engine.effective_from} the same chapter publishes it"
        )
        plan = plan.with_purpose(Purpose.COMPARISON)

    progress(f"dry run of plan {plan.plan}: exact scope, nothing written")
    scope = plan_scope(registry, plan, engines=engines, clock=clock)
    progress(f"re-scoring {scope.affected_entity_count} entities into a candidate ({plan.purpose.value})")
    outcome = run_replay(registry, plan, engines=engines, clock=clock)
    run_id = outcome.run_id
    told = Rescoring(
        plan=plan.plan,
        run_id=run_id,
        change=scope.engine_change,
        label=scope.engine_label,
        dry_run=scope,
        replay=outcome,
    )
    if waiting is not None:
        return replace(told, waiting=waiting)
    if outcome.status not in (AWAITING_APPROVAL, APPROVED, PUBLISHED):
        return replace(told, waiting=f"replay {run_id} is {outcome.status}: nothing to approve or publish")
    approval = None
    if outcome.status == AWAITING_APPROVAL:
        approval = _approve_and_ack(registry, plan, run_id, clock, progress)
    progress("publishing the re-scored correlations atomically")
    publication = publish(registry, run_id, clock=clock)
    return replace(told, approval=approval, publication=publication)


def communities(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    progress: Progress,
    *,
    engines_path: Path = DEMO_ENGINES,
) -> CommunityBuild:
    """The community release in force over the restated correlations, measured against the
    history's true rings (``lakehouse communities``)."""
    from ledger.engines import load_engines
    from workloads.communities import run_communities
    from workloads.engines.community import NAME

    spec = load_engines(engines_path).resolve(NAME, at=clock.now().date())
    progress(f"grouping the correlation graph into communities under {spec.ref}")
    return run_communities(registry, ledger, clock, spec, progress=progress)


def run_demo(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    workdir: Path,
    progress: Progress,
    *,
    settings: DemoSettings = DemoSettings(),
    gate: Gate | None = None,
) -> DemoReport:
    """The whole story, in order, under the lakehouse's own catalog (:func:`demo_catalog`)."""
    create_zones(registry, progress)
    catalog = demo_catalog(registry)
    pins = starting_pins(ledger)
    story = medallion(
        registry, ledger, clock, workdir / "history", settings, progress, gate, pins, engines_path=catalog
    )
    drift = drift_repair(registry, ledger, clock, progress)
    restated = rescored = grouped = learnt = erased = None
    if settings.restate:
        restated = restatement(registry, ledger, clock, progress, engines_path=catalog)
        rescored = rescoring(registry, ledger, clock, progress, engines_path=catalog)
        grouped = communities(registry, ledger, clock, progress, engines_path=catalog)
        learnt = machine_learning(registry, ledger, clock, workdir, progress, engines_path=catalog)
        erased = erasure(registry, ledger, clock, workdir / "history", progress)
    chapters = Chapters(
        medallion=story,
        drift=drift,
        restatement=restated,
        rescoring=rescored,
        communities=grouped,
        machine_learning=learnt,
        erasure=erased,
    )
    return DemoReport(tables=describe_tables(registry), chapters=chapters)


def machine_learning(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    workdir: Path,
    progress: Progress,
    *,
    engines_path: Path = DEMO_ENGINES,
) -> MachineLearning:
    """training-set (as known now, 90-day labels) -> train -> calibrate every correlation
    release -> recalibrate the serving one (declare, replay, approve, ack, publish)."""
    from lakehouse.errors import UsageError
    from ledger.engines import load_engines
    from workloads.engines.correlation import NAME as CORRELATION
    from workloads.ml.calibrate import calibrate
    from workloads.ml.point_in_time import TrainingWindow
    from workloads.ml.tracking import open_tracking
    from workloads.ml.training import train_model
    from workloads.ml.training_set import build_training_set
    from workloads.policies import load_calibration_policy

    tracking = open_tracking(registry.config)
    policy = load_calibration_policy()
    progress("ML: a point-in-time training set as known now")
    window = TrainingWindow(as_of=clock.now(), horizon_days=policy.label_horizon_days)
    built = build_training_set(registry, ledger, clock, window, tracking, progress=progress)
    model: TrainedModel | None = None
    refused: str | None = None
    try:
        model = train_model(registry, ledger, clock, tracking, built.training_set_id, progress=progress)
    except UsageError as exc:
        refused = str(exc)
    calibrations: list[Calibration] = []
    skipped: dict[str, str] = {}
    for spec in load_engines(engines_path).versions(CORRELATION):
        progress(f"ML: calibrating {spec.ref} against later outcomes")
        try:
            calibrations.append(
                calibrate(
                    registry,
                    ledger,
                    clock,
                    tracking,
                    spec.ref,
                    policy,
                    figures=workdir / "calibration",
                    progress=progress,
                )
            )
        except UsageError as exc:
            skipped[spec.ref] = str(exc)
    scored = None
    if model is not None:
        scored = scoring(
            registry, ledger, clock, tracking, model, built.training_set_id, engines_path, progress
        )
    recalibrated = recalibration(
        registry, ledger, clock, progress, calibrations, engines_path, workdir / "plans"
    )
    return MachineLearning(
        built, model, refused, tuple(calibrations), skipped, tracking.ui_command(), recalibrated, scored
    )


def scoring(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    tracking: Tracking,
    model: TrainedModel,
    training_set_id: str,
    engines_path: Path,
    progress: Progress,
) -> Scored:
    """Declare the model as the next ``fraud_scoring`` release (unless the latest already pins
    it, or one was declared today) and score the training set under the latest release."""
    from ledger.engines import load_engines
    from workloads.ml.scoring import ENGINE, declare_scoring, score

    pinned = {model.model_name: str(model.model_version)}
    today = clock.now().date()
    versions = load_engines(engines_path).versions(ENGINE)
    latest = versions[-1] if versions else None
    waiting: str | None = None
    declared = False
    if latest is None or (latest.model_versions != pinned and latest.effective_from < today):
        progress(f"ML: declaring {model.model_name} v{model.model_version} as a {ENGINE} release")
        entry = declare_scoring(
            engines_path, tracking, model.model_version, effective_from=today, run_id=model.run_id
        )
        ledger.writer.append(entry)
        declared = True
    elif latest.model_versions != pinned:
        waiting = (
            f"{latest.ref} was declared today ({latest.effective_from}); a release pinning "
            f"{model.model_name} v{model.model_version} can take effect from tomorrow"
        )
    spec = load_engines(engines_path).versions(ENGINE)[-1]
    progress(f"ML: scoring the training set's decisions under {spec.ref}")
    run = score(registry, ledger, clock, tracking, spec, training_set_id, progress=progress)
    return Scored(spec.ref, run.model, run.model_version, declared, run, waiting)


def recalibration(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    progress: Progress,
    calibrations: Sequence[Calibration],
    engines_path: Path,
    plans: Path,
) -> Recalibrated:
    """Declare the serving release's calibrators as the next correlation release, replay
    history under it, approve, acknowledge, publish (``lakehouse calibrate --declare``, then
    the plan it writes). A second demo run finds the recalibrated release in force and
    shows it; a serving release with no registered calibrator, or a pending release that a
    new one cannot precede, leaves the chapter waiting, with the reason."""
    from lakehouse.errors import UsageError
    from ledger.engines import engines_in_force, load_engines
    from workloads.engines.correlation import NAME as CORRELATION
    from workloads.engines.correlation_calibrated import is_recalibrated
    from workloads.ml.calibrate import check_declarable, declare_recalibration
    from workloads.replay import publish, run_replay
    from workloads.replay.plan import load_plan
    from workloads.replay.state import AWAITING_APPROVAL

    engines = load_engines(engines_path)
    today = clock.now().date()
    serving = engines_in_force(engines, ledger.reader.entries(), [CORRELATION], today)[CORRELATION].spec
    if is_recalibrated(serving.parameters):
        return Recalibrated(
            serving.ref, waiting=f"{serving.ref}, a recalibrated release, is already in force"
        )
    fitted = next((c for c in calibrations if c.engine == serving.ref and c.model_versions), None)
    if fitted is None:
        return Recalibrated(
            serving.ref, waiting=f"no calibrator of {serving.ref} is registered: nothing to declare"
        )
    try:
        check_declarable(engines, serving, today)
    except UsageError as exc:
        return Recalibrated(serving.ref, waiting=str(exc))
    progress(f"ML: declaring {serving.ref} recalibrated as the next correlation release")
    declared, entry = declare_recalibration(
        engines_path, serving, fitted, effective_from=today, template=RESCORING_PLAN, plans=plans
    )
    ledger.writer.append(entry)
    plan = load_plan(Path(declared.plan_path))
    progress(f"ML: replaying history under {declared.engine}")
    outcome = run_replay(registry, plan, engines=load_engines(engines_path), clock=clock)
    told = Recalibrated(serving.ref, declared=declared, replay=outcome)
    if outcome.status != AWAITING_APPROVAL:
        return replace(told, waiting=f"replay {outcome.run_id} is {outcome.status}: nothing to publish")
    approval = _approve_and_ack(registry, plan, outcome.run_id, clock, progress)
    progress("ML: publishing the recalibrated correlations atomically")
    publication = publish(registry, outcome.run_id, clock=clock)
    example = _superseded_example(registry, outcome.run_id)
    return replace(told, approval=approval, publication=publication, example=example)


def subject_with_correlations(registry: TableRegistry) -> str | None:
    """The address of the entity on the first serving correlation (by entity id); None
    without one."""
    from pyspark.sql import functions as F

    from workloads.vocabulary import CURRENT_STATUSES, REDACTED_PREFIX, TableName

    correlations = registry.get(TableName.CORRELATIONS).read()
    serving = correlations.where(F.col("status").isin([str(s) for s in CURRENT_STATUSES])).where(
        ~F.col("entity_a").startswith(REDACTED_PREFIX)
    )
    first = serving.orderBy("entity_a").first()
    if first is None:
        return None
    silver = registry.get(TableName.SILVER_EVENTS).read()
    row = silver.where(
        (F.col("entity_id") == first["entity_a"]) & F.col("customer_email").isNotNull()
    ).first()
    return str(row["customer_email"]) if row is not None else None


def erasure(
    registry: TableRegistry, ledger: Ledger, clock: Clock, deliveries: Path, progress: Progress
) -> Erasure | None:
    """Dry run -> erase -> erase --verify -> asof at a moment before the erasure (None when no
    subject has a serving correlation)."""
    from workloads.asof.answer import asof
    from workloads.asof.readers import SparkReader
    from workloads.compliance import ErasureRequest, erase, reverify
    from workloads.vocabulary import TableName, redacted_as

    email = subject_with_correlations(registry)
    if email is None:
        progress("erasure: skipped, no subject has a serving correlation")
        return None
    request_id = f"demo-{clock.now():%Y%m%dT%H%M%S}"
    progress("erasure: where is the subject? (dry run)")
    dry = erase(
        registry,
        ledger,
        ErasureRequest("", "", email=email, dry_run=True),
        deliveries=deliveries,
        progress=progress,
    )
    before = clock.now()
    request = ErasureRequest(request_id, "GDPR art. 17 (demo)", email=email)
    done = erase(registry, ledger, request, deliveries=deliveries, progress=progress)
    assert done.certificate is not None
    certificate = done.certificate
    recheck = reverify(registry, ledger, certificate, deliveries, progress)
    redacted = redacted_as(certificate.certificate_id)
    answer = asof(
        SparkReader(registry),
        TableName.CORRELATIONS,
        before,
        known_tables=registry.names(),
        where=f"entity_a = '{redacted}' or entity_b = '{redacted}'",
    )
    return Erasure(request_id, dry.places, certificate, recheck, answer)
