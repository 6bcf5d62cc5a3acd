"""Publishing an approved correction atomically, then notifying each consumer once.

Like every step after the build, :func:`publish` takes a run id and reads the run's state
from the ledger (:mod:`workloads.replay.status`), so it can run in its own process
(``lakehouse publish``) and be rerun after a crash.

**publish** refuses a comparison, a run without an approval, and a run whose verdict is
not ``publish``; it is *held* (:class:`~lakehouse.errors.PublicationHeldError`, nothing
published) while a required consumer has not acknowledged the run. Then:

1. The run's changes are taken from its candidate (or, after a rollback, from its earlier
   publication) and checked against the reconciled hash: a candidate edited after
   reconciliation is refused.
2. A publication *intent* fixes the effective time ``E`` (reused on a rerun).
3. The changes are applied onto the current serving rows in a candidate staged from the
   current serving version and stamped with ``E``: if serving moved after the candidate
   was staged (a late event built meanwhile), the candidate is restaged from current
   serving and the changes re-applied, keeping every row that arrived since as it is.
4. The candidate is published in one atomic step (Iceberg fast-forward, Delta one
   transaction over the touched partitions); the ``publication`` and ``supersession``
   entries (grouped by reason, with counts) are recorded.
5. One notification per consumer goes to ``ops.outbox`` (MERGE on the idempotency key)
   and is recorded as a ``notification`` entry (:mod:`workloads.replay.notify`).

A rerun after a crash at any step ends in exactly one publication and one notification
per consumer: an intent whose changes are already in serving is recognised as published
(and recorded as such), a recorded publication skips straight to notifying, and stored
outbox keys are never written again.

Rolling back is :mod:`workloads.replay.rollback`; approving and acknowledging,
:mod:`workloads.replay.approval`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from lakehouse.digest import canonical_hash
from lakehouse.errors import (
    CandidateError,
    PublicationHeldError,
    ReplayError,
    ReplayRefusedError,
)
from lakehouse.tables import Candidate, Table
from ledger.api import Ledger, open_ledger
from ledger.clock import Clock, utc
from ledger.entries import Publication, RunStarted, Supersession
from ledger.identity import InputRead
from workloads.gold.entity_index import IndexRefresh
from workloads.gold.provisional import ProvisionalReconciliation
from workloads.policies import (
    ProtectionPolicy,
    StreamingPolicy,
    load_protection_policy,
    load_streaming_policy,
)
from workloads.replay import candidate as cand
from workloads.replay import outbox
from workloads.replay.answer import (
    ENGINE,
    RECORDED_AT,
    RUN,
    STATUS,
    SUPERSEDE_REASON,
    SUPERSEDED_AT,
    AnswerTable,
    answer_table,
)
from workloads.replay.faults import FailPoint, fail_point, maybe_fail
from workloads.replay.identity import candidate_name, run_candidates
from workloads.replay.notify import notify
from workloads.replay.plan import Purpose
from workloads.replay.protection import history_days, keep_history, sync_protections
from workloads.replay.state import PUBLISH_COMMAND, PublishIntent, RunState
from workloads.replay.status import load_state, run_partitions, why_not
from workloads.vocabulary import Verdict

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.tables import TableRegistry

log = logging.getLogger(__name__)

MAX_RESTAGES: Final = 3


@dataclass(frozen=True)
class PublishResult:
    """What ``publish`` did."""

    run_id: str
    status: str
    """``published`` (now), or ``already_published`` (a rerun that only completed notifications)."""
    table: str
    version: int
    previous: int | None
    effective_at: datetime
    restaged: bool
    supersessions: tuple[Mapping[str, Any], ...]
    notifications: tuple[outbox.OutboxMessage, ...]
    """Every notification of this run in the outbox (one per consumer)."""
    notifications_written: int
    """How many of them this call wrote (0 on a rerun)."""
    entity_index: IndexRefresh | None = None
    """The rebuild of the table's entity index that followed, if it has one."""
    provisional: ProvisionalReconciliation | None = None
    """The stream's provisional rows reconciled against the published correlations (None:
    a table without a provisional view, or no provisional row was waiting)."""


def check_publishable(state: RunState) -> None:
    """Refuse a comparison, an unreconciled or unapproved run, and a verdict other than publish."""
    run_id, plan = state.run_id, state.plan
    if plan.purpose is Purpose.COMPARISON:
        raise ReplayRefusedError(
            f"run {run_id} is a comparison of plan {plan.plan}: a comparison is never published; "
            f"run the plan with purpose correction to publish"
        )
    decision = state.decision
    if decision is None:
        raise ReplayRefusedError(
            f"run {run_id} has no reconciliation decision ({state.status}); rerun lakehouse replay --plan"
        )
    if Verdict(decision.verdict) is not Verdict.PUBLISH:
        raise ReplayRefusedError(f"run {run_id} cannot be published: {why_not(state)}")
    approval = state.approval
    if approval is None:
        raise ReplayRefusedError(
            f"run {run_id} is not approved; an approver of plan {plan.plan} "
            f"({', '.join(plan.publication.approvers)}) must run lakehouse approve {run_id} --by NAME"
        )
    if approval.decision != "approved":
        raise ReplayRefusedError(
            f"run {run_id} was rejected by {approval.approver}: {approval.reason or '-'}"
        )


def _hold_for_acks(registry: TableRegistry, state: RunState) -> None:
    required = [c.name for c in state.plan.publication.consumers if c.required]
    if not required:
        return
    done = outbox.acknowledged(registry.get(outbox.ACKS), state.run_id)
    missing = [name for name in required if name not in done]
    if missing:
        log.info(
            "publication of run %s held: waiting for %s to acknowledge", state.run_id, ", ".join(missing)
        )
        raise PublicationHeldError(
            f"publication of run {state.run_id} is HELD: required consumer(s) {', '.join(missing)} "
            f"have not acknowledged it; each runs lakehouse ack CONSUMER {state.run_id}, then publish again"
        )


def publish(
    registry: TableRegistry,
    run_id: str,
    *,
    clock: Clock,
    fail_at: FailPoint | str | None = None,
    policy: ProtectionPolicy | None = None,
    streaming: StreamingPolicy | None = None,
) -> PublishResult:
    """Publish an approved correction atomically, then notify each consumer once (module docstring).

    The table's kept history is checked first against the plan's rollback window (raised on
    Iceberg, a warning on Delta: see :func:`~workloads.replay.protection.keep_history`); after
    the publication, the published version and the one its rollback returns
    to are protected from maintenance (``policy``: ``conf/policies.yaml`` when not given).
    A publication of a table with a provisional view (its declaration's
    :attr:`~workloads.replay.answer.AnswerTable.provisional`: ``gold.correlations``) then
    reconciles the stream's waiting provisional rows against what now serves
    (:mod:`workloads.replay.provisional`; ``streaming``: the policy file's ``streaming:``
    section when not given).
    """
    chosen = fail_point(fail_at)
    policy = policy or load_protection_policy()
    state = load_state(registry, run_id)
    check_publishable(state)
    table = registry.get(state.table)
    ledger = open_ledger(registry, clock=clock)
    live = state.live_publication
    restaged = False
    status = "already_published"
    if live is None:
        live = _recorded_if_published(table, state, ledger)
        if live is not None:
            log.info("run %s had reached serving before a crash; its publication is now recorded", run_id)
    if live is None:
        _hold_for_acks(registry, state)
        window = state.plan.publication.rollback_window_days
        keep_history(registry, [state.table], history_days(policy, [window]))
        live, restaged = _publish_table(table, state, ledger, clock, chosen)
        status = "published"
        log.info(
            "run %s published: %s version %d (was %s), effective %s%s",
            run_id,
            state.table,
            live.tables[state.table],
            live.previous.get(state.table),
            live.effective_at.isoformat(),
            "; restaged onto moved serving" if restaged else "",
        )
    sync_protections(registry, clock, policy)  # the published version and the one a rollback returns to
    written, messages = notify(registry, state, live, ledger)
    reconcile_provisional = state.answer.provisional_reconciliation()
    provisional: ProvisionalReconciliation | None = (
        reconcile_provisional(
            registry,
            ledger,
            run_id=run_id,
            recorded_at=live.effective_at,
            policy=streaming or load_streaming_policy(),
        )
        if reconcile_provisional is not None
        else None
    )
    supersessions = tuple(
        {
            "status": e.new if e.new == cand.RETRACTED else cand.SUPERSEDED,
            "reason": e.reason,
            "count": e.count,
        }
        for e in load_state(registry, run_id).entries
        if isinstance(e, Supersession)
    )
    return PublishResult(
        run_id=run_id,
        status=status,
        table=state.table,
        version=live.tables[state.table],
        previous=live.previous.get(state.table),
        effective_at=live.effective_at,
        restaged=restaged,
        supersessions=supersessions,
        notifications=tuple(messages),
        notifications_written=written,
        entity_index=refresh_index(registry, state.table, ledger, clock),
        provisional=provisional,
    )


def _read(table: Table, version: int | None, months: Sequence[str], answer: AnswerTable) -> DataFrame:
    frame = table.read().limit(0) if version is None else table.read(as_of=version)
    return cand.restrict_months(frame, months, answer)


def _recorded_if_published(table: Table, state: RunState, ledger: Ledger) -> Publication | None:
    """Recognise a publication that reached serving but not the ledger (crash right after it).

    With an open intent, serving holds this run's changes stamped with the intent's
    effective time only if the atomic publish happened; then the publication (and its
    supersessions) are recorded now, and nothing is published twice.
    """
    from pyspark.sql import functions as F

    intent = state.open_intent
    if intent is None:
        return None
    current = table.current_version()
    if current is None or current == intent.previous:
        return None
    months, answer = run_partitions(state), state.answer
    mine = cand.extract_changes(
        _read(table, current, months, answer),
        _read(table, intent.previous, months, answer),
        state.run_id,
        answer,
    )
    stamp = F.lit(intent.effective_at).cast("timestamp")
    stamped = mine.where(
        ((F.col(RUN) == state.run_id) & (F.col(RECORDED_AT) == stamp)) | (F.col(SUPERSEDED_AT) == stamp)
    )
    if stamped.isEmpty():
        return None
    version = _first_version_after(table, intent.previous, current)
    publication = _record_publication(ledger, table, state, intent, version, stamped)
    for stale in run_candidates(table, state.run_id):
        table.drop_candidate(stale)
    return publication


def _first_version_after(table: Table, previous: int | None, current: int) -> int:
    versions = [c.version for c in table.history()]
    if previous in versions:
        index = len(versions) - 1 - versions[::-1].index(previous)
        later = versions[index + 1 :]
        if later:
            return later[0]
    return current


def _record_publication(
    ledger: Ledger, table: Table, state: RunState, intent: PublishIntent, version: int, changes: DataFrame
) -> Publication:
    from pyspark.sql import functions as F

    publication = Publication(
        run_id=state.run_id,
        tables={table.name: version},
        previous={table.name: intent.previous},
        effective_at=intent.effective_at,
        candidate=intent.candidate,
    )
    label = str(state.started.parameters.get("engine_label", ""))
    groups = (
        changes.where(F.col(RUN) != state.run_id)
        .groupBy(STATUS, SUPERSEDE_REASON, ENGINE)
        .count()
        .orderBy(STATUS, SUPERSEDE_REASON, ENGINE)
        .collect()
    )
    supersessions = [
        Supersession(
            run_id=state.run_id,
            table=table.name,
            key=state.answer.key,
            old=str(r[ENGINE]),
            new=cand.RETRACTED if r[STATUS] == cand.RETRACTED else label,
            reason=str(r[SUPERSEDE_REASON]),
            count=int(r["count"]),
        )
        for r in groups
    ]
    ledger.writer.append(publication, *supersessions)
    return publication


def _changes_source(
    table: Table, state: RunState, months: Sequence[str]
) -> tuple[DataFrame, list[Candidate]]:
    """The run's changes: from its candidate, or after a rollback from its last publication."""
    answer = state.answer
    candidates = run_candidates(table, state.run_id)
    if candidates:
        source = candidates[-1]
        after = cand.restrict_months(table.read_candidate(source), months, answer)
        before = _read(table, source.base_version, months, answer)
    elif state.publications:
        last = state.publications[-1]
        after = _read(table, last.tables[state.table], months, answer)
        before = _read(table, last.previous.get(state.table), months, answer)
    else:
        raise ReplayError(
            f"run {state.run_id} has no candidate any more (dropped?); "
            f"rerun lakehouse replay --plan to rebuild it"
        )
    changes = cand.extract_changes(after, before, state.run_id, answer).localCheckpoint(eager=True)
    return changes, candidates


def _verify(changes: DataFrame, state: RunState) -> None:
    decision = state.decision
    recorded = decision.checks.get("changes") if decision else None
    expected = recorded.get("hash") if isinstance(recorded, dict) else None
    actual = canonical_hash(changes, exclude=cand.WHEN_COLUMNS)
    if expected != actual:
        raise ReplayRefusedError(
            f"the changes of run {state.run_id} differ from what was reconciled (hash {actual[:12]}, "
            f"reconciled {str(expected)[:12]}); rerun lakehouse replay --plan and approve again"
        )


def _intent(
    ledger: Ledger, state: RunState, effective_at: datetime, candidate: str, previous: int | None
) -> None:
    ledger.writer.append(
        RunStarted(
            run_id=state.run_id,
            command=PUBLISH_COMMAND,
            purpose=state.plan.purpose.value,
            inputs={} if previous is None else {state.table: InputRead(version=previous)},
            parameters={
                "effective_at": effective_at.isoformat(),
                "candidate": candidate,
                "previous": previous,
            },
            plan=state.plan.plan,
        )
    )


def _publish_table(
    table: Table, state: RunState, ledger: Ledger, clock: Clock, chosen: FailPoint | None
) -> tuple[Publication, bool]:
    """Stamp, (re)stage if serving moved, publish atomically, record. Returns (publication, restaged)."""
    run_id, answer = state.run_id, state.answer
    months = run_partitions(state)
    changes, candidates = _changes_source(table, state, months)
    _verify(changes, state)
    intent = state.open_intent
    effective_at = intent.effective_at if intent is not None else utc(clock.now())
    touched = sorted(set(months) | set(cand.months_of(changes, answer)))
    restaged = False
    for _ in range(MAX_RESTAGES):
        current = table.current_version()
        target = next((c for c in candidates if c.base_version == current), None)
        if target is None:
            target = table.stage_candidate(candidate_name(run_id, current))
            candidates.append(target)
            restaged = True
        if intent is None or intent.previous != current or intent.candidate != target.name:
            _intent(ledger, state, effective_at, target.name, current)
            intent = PublishIntent(effective_at, target.name, current, -1)
        content = cand.apply_changes(
            cand.restrict_months(table.read_candidate(target), touched, answer),
            changes,
            run_id=run_id,
            effective_at=effective_at,
            answer=answer,
        ).localCheckpoint(eager=True)
        if not cand.current_duplicates(content, answer).isEmpty():
            raise ReplayError(
                f"rows that reached {table.name} after run {run_id} was built collide with its changes "
                f"(two current rows for one {answer.key.replace('_', ' ')}); rerun lakehouse replay --plan"
            )
        table.overwrite_partitions(
            content, run_id=run_id, metadata={"lakehouse.replay-step": "stamp"}, candidate=target
        )
        maybe_fail(chosen, FailPoint.DURING_PUBLISH, run_id)
        try:
            version = table.publish(target, run_id=run_id)
        except CandidateError:
            if table.current_version() == current:
                raise
            continue  # serving moved between staging and publishing: restage from it
        candidates.remove(target)
        for stale in candidates:
            table.drop_candidate(stale)
        maybe_fail(chosen, FailPoint.AFTER_PUBLISH_BEFORE_NOTIFY, run_id)
        stamped = cand.extract_changes(
            cand.restrict_months(table.read(as_of=version), touched, answer),
            _read(table, current, touched, answer),
            run_id,
            answer,
        )
        return _record_publication(ledger, table, state, intent, version, stamped), restaged
    raise ReplayError(
        f"{table.name} kept moving while publishing run {run_id} ({MAX_RESTAGES} attempts); publish again"
    )


def refresh_index(registry: TableRegistry, table: str, ledger: Ledger, clock: Clock) -> IndexRefresh | None:
    """Rebuild the entity index of a table whose serving version just changed, if its
    declaration has one (:attr:`~workloads.replay.answer.AnswerTable.index`)."""
    rebuild = answer_table(table).index_refresh()
    if rebuild is None:
        return None
    refreshed: IndexRefresh = rebuild(registry, ledger, clock)
    return refreshed
