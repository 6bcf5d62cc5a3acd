"""The replay flow up to the gate: scope (dry run), candidate, diff, reconciliation, decision.

:func:`plan_scope` is the dry run: it pins the inputs, verifies the engines, estimates the
I/O and computes the exact scope, and writes nothing at all (not even the ledger).

:func:`run_replay` runs the plan: the same analysis, then

1. records ``run_started`` (plan, pins, engines) under the run id;
2. builds the candidate (Iceberg branch / Delta shadow table) holding serving plus this
   run's changes, stamped with the build time ``B`` (resumes an existing candidate that
   already holds this run's rows, unless ``rebuild``);
3. diffs candidate-current against serving-current by the answer table's key (its
   declaration, :mod:`workloads.replay.answer`: ``correlation_id``) and accounts for
   every input event (scored, rejected, held), records the ``diff_manifest`` and writes
   the per-key diff and a review file (every high-impact change, a sample of the others)
   under ``<workdir>/replays/<run_id>/``;
4. reconciles independently (:mod:`workloads.replay.reconcile`) and runs the Great
   Expectations gate, measures the old and the new version against labelled truth
   (:mod:`workloads.replay.quality`; "no ground truth" when the data has none), records
   the ``quality_comparison``, the ``reconciliation_decision`` and ``run_finished``;
5. stops: a ``correction`` at ``awaiting_approval`` (or ``blocked`` / ``suppressed`` by
   the verdict), a ``comparison`` at ``compared`` (its candidate is dropped; it can never
   be published).

A correction whose new version takes effect after the replay's date is refused before
anything is recorded (:func:`~workloads.replay.setup.check_effective`); a comparison runs.
The flow is the same whichever kind of engine the plan changes (a resolver upstream of the
answer, or the answer's producer): :class:`~workloads.replay.identity.ReplayEngines` hands
the analysis two resolutions and a producer, and nothing after it asks for the kind.

Nothing is written to the live outbox: the notifications a publication would send are
only listed (``notifications_planned``).

A rerun of the same plan finds the run it would be (same plan and engines; an earlier run
that is unfinished, awaiting approval or published keeps its pins) and resumes it; a
finished build is returned as recorded. After a comparison, a blocked, suppressed,
rejected or rolled-back run, a rerun pins afresh (and gets the same run id if nothing moved).

The steps live in their own modules: :mod:`~workloads.replay.setup` (engines, pins, run
id, budget), :mod:`~workloads.replay.analysis` (scope; the dry run),
:mod:`~workloads.replay.build` (the candidate), :mod:`~workloads.replay.evaluate` (diff,
reconciliation, decision), :mod:`~workloads.replay.review` (what the approver reads) and
:mod:`~workloads.replay.outcome` (what a run reports). This module runs them in order.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from lakehouse.errors import InjectedFailure, ReplayError, ReplayRefusedError
from lakehouse.meter import StepMeter
from lakehouse.tables import Table, TableSize
from lakehouse.tables.base import first_line, recorded_error
from ledger.api import open_ledger
from ledger.clock import Clock
from ledger.engines import EngineCatalog
from ledger.entries import LedgerEntryBase, RunFinished, RunStarted
from ledger.identity import InputRead
from ledger.reader import LedgerReader
from ledger.writer import LedgerWriter
from workloads.evaluation import LabelledTruth, TruthSearch
from workloads.policies import ProtectionPolicy, load_protection_policy
from workloads.replay.analysis import analyse, describe_scope, plan_scope
from workloads.replay.build import build_candidate
from workloads.replay.evaluate import evaluate
from workloads.replay.faults import FailPoint, fail_point, maybe_fail
from workloads.replay.identity import input_tables, run_candidates
from workloads.replay.outcome import ReplayOutcome, decision_dict, outcome_from_state, planned_notifications
from workloads.replay.plan import CorrectionPlan
from workloads.replay.protection import history_days, keep_history, sync_protections
from workloads.replay.quality import locate_truth
from workloads.replay.setup import Setup, check_budget, check_effective, input_size, setup_replay
from workloads.replay.state import (
    ABANDONED_PREFIX,
    APPROVED,
    AWAITING_APPROVAL,
    BLOCKED,
    COMPARED,
    REJECTED,
    REPLAY_COMMAND,
    SUPPRESSED,
    RunState,
    run_state,
)
from workloads.vocabulary import TableName

if TYPE_CHECKING:
    from lakehouse.tables import TableRegistry

log = logging.getLogger(__name__)


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
            name: InputRead(version=version, range=event_range if name == TableName.SILVER_EVENTS else {})
            for name, version in sorted(setup.pins.items())
        },
        parameters={
            "plan": plan.model_dump(mode="json", by_alias=True),
            "plan_digest": plan.digest,
            "engine_label": setup.engines.label,
            "engine_change": setup.engines.change,
            "change_kind": setup.engines.kind.value,
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
    truth: LabelledTruth | None = None,
    policy: ProtectionPolicy | None = None,
) -> ReplayOutcome:
    """Run a correction or comparison plan up to its gate (see the module docstring).

    ``clock`` gives the build time and the ledger's ``recorded_at``. ``fail_at`` injects
    a failure at a step (:class:`FailPoint`). ``rebuild`` drops an existing candidate of
    the run and builds it again instead of resuming it, and starts a new run pinned at the
    current versions when maintenance removed the old run's pins. ``truth`` is the
    labelled truth both versions' quality is measured against; without it the one beside
    the ingested deliveries is used, if any (:mod:`workloads.replay.quality`). ``policy``
    is the protection policy (``conf/policies.yaml`` when not given): the run's pinned
    inputs stay protected from maintenance while it can resume
    (:mod:`workloads.replay.protection`).
    """
    meter = StepMeter(registry.spark, "setup")
    chosen = fail_point(fail_at)
    policy = policy or load_protection_policy()
    days = history_days(policy, [plan.publication.rollback_window_days])
    setup = setup_replay(registry, plan, engines, clock=clock, rebuild=rebuild)
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
        log.info("run %s is already %s; returning its recorded outcome", run_id, state.status)
        return outcome_from_state(state)
    size = input_size(registry, setup)
    check_budget(plan, size)
    searched = locate_truth(registry, truth)
    ledger = open_ledger(registry, clock=clock)
    built_at = clock.now()
    check_effective(setup, built_at.date())
    keep_history(registry, input_tables(plan, registry), days)
    _abandon(table, setup, ledger.writer)
    ledger.writer.append(_started_entry(setup))
    try:
        sync_protections(registry, clock, policy)  # its pins are kept while it can resume
        return _build_and_evaluate(
            registry, setup, table, ledger.writer, size, built_at, chosen, rebuild, searched, meter
        )
    except InjectedFailure:
        raise
    except Exception as exc:
        log.warning("run %s failed: %s: %s", run_id, type(exc).__name__, first_line(exc))
        ledger.writer.append(
            RunFinished(run_id=run_id, status="failed", error=f"{type(exc).__name__}: {recorded_error(exc)}")
        )
        raise


def _abandon(table: Table, setup: Setup, writer: LedgerWriter) -> None:
    """A run given up for lost pins is closed in the ledger (it never resumes again, and its
    pins are no longer protected) and keeps no candidate: its build can never be published."""
    if setup.abandoned is None:
        return
    for stale in run_candidates(table, setup.abandoned):
        log.info("dropping candidate %s of abandoned run %s", stale.name, setup.abandoned)
        table.drop_candidate(stale)
    writer.append(
        RunFinished(
            run_id=setup.abandoned,
            status="failed",
            error=f"{ABANDONED_PREFIX}its pinned inputs are gone; rebuilt as run {setup.run_id}",
        )
    )


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
    truth: TruthSearch,
    meter: StepMeter,
) -> ReplayOutcome:
    plan, run_id = setup.plan, setup.run_id
    meter.mark("analyse")
    analysis = analyse(registry, setup, built_at=built_at)
    meter.mark("scope")
    scope = describe_scope(registry, setup, analysis, size)
    log.info(
        "run %s scope: %d affected entities, %d recomputed; supersede %d, retract %d, insert %d",
        run_id,
        scope.affected_entity_count,
        scope.recomputed_entity_count,
        scope.to_supersede,
        scope.to_retract,
        scope.to_insert,
    )
    meter.mark("candidate")
    candidate, resumed = build_candidate(table, setup, analysis, built_at=built_at, rebuild=rebuild)
    maybe_fail(chosen, FailPoint.AFTER_CANDIDATE, run_id)
    evaluation = evaluate(registry, setup, table, writer, analysis, scope, candidate, chosen, truth, meter)
    state = run_state(run_id, LedgerReader.for_registry(registry).by_run(run_id))
    steps = meter.close()
    log.info("run %s stops at %s", run_id, state.status)
    return ReplayOutcome(
        run_id=run_id,
        plan=plan.plan,
        purpose=plan.purpose.value,
        status=state.status,
        table=table.name,
        candidate=candidate.name,
        base_version=candidate.base_version,
        partitions=scope.changed_partitions,
        diff=evaluation.counts,
        decision=decision_dict(evaluation.decision, evaluation.examples),
        sample=evaluation.sample,
        high_impact=evaluation.high_impact,
        notifications_planned=planned_notifications(plan, run_id),
        review_location=evaluation.review_location,
        candidate_hash=evaluation.candidate_hash,
        resumed=resumed,
        scope=scope,
        quality=evaluation.quality,
        steps=steps,
    )


__all__ = ["ReplayOutcome", "plan_scope", "run_replay"]
