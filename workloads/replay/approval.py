"""The gate: an approver's decision on a correction, and consumers' acknowledgements.

``lakehouse approve RUN --by NAME`` records an ``approval`` (or a rejection) of a
correction awaiting approval by one of the plan's approvers. ``lakehouse ack CONSUMER
RUN`` records that a consumer acknowledged the decision version; a publication is held
while a *required* consumer has not (:mod:`workloads.replay.publish`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from lakehouse.errors import ReplayRefusedError
from ledger.api import open_ledger
from ledger.clock import Clock, utc
from ledger.entries import Approval
from workloads.replay import outbox
from workloads.replay.plan import Purpose
from workloads.replay.state import APPROVED, AWAITING_APPROVAL, RunState
from workloads.replay.status import load_state, why_not

if TYPE_CHECKING:
    from lakehouse.tables import TableRegistry

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ApprovalResult:
    """What ``approve`` recorded."""

    run_id: str
    approver: str
    decision: str
    scope: str
    approved_at: datetime


def check_approver(state: RunState, by: str) -> None:
    """Refuse (exit 2) an approver the run's plan does not list. Pure: the command checks it on
    the ledger read without a JVM, before Spark starts, and :func:`approve` again."""
    plan = state.plan
    if by not in plan.publication.approvers:
        raise ReplayRefusedError(
            f"{by!r} may not approve plan {plan.plan}; "
            f"its approvers are: {', '.join(plan.publication.approvers)}"
        )


def check_consumer(state: RunState, consumer: str) -> None:
    """Refuse (exit 2) a consumer the run's plan does not name, and a comparison (nothing will
    be published). Pure, like :func:`check_approver`."""
    names = [c.name for c in state.plan.publication.consumers]
    if consumer not in names:
        raise ReplayRefusedError(
            f"{consumer!r} is not a consumer of plan {state.plan.plan}; its consumers are: {', '.join(names)}"
        )
    if state.plan.purpose is Purpose.COMPARISON:
        raise ReplayRefusedError(
            f"run {state.run_id} is a comparison: nothing will be published to acknowledge"
        )


def approve(
    registry: TableRegistry,
    run_id: str,
    *,
    by: str,
    clock: Clock,
    reason: str = "",
    reject: bool = False,
) -> ApprovalResult:
    """Record ``by``'s approval (or rejection) of a correction awaiting approval.

    Refused for a comparison, for a run that is not awaiting approval (still building,
    blocked by its verdict, already published) and for an approver the plan does not list.
    """
    state = load_state(registry, run_id)
    plan = state.plan
    if plan.purpose is Purpose.COMPARISON:
        raise ReplayRefusedError(f"run {run_id} is a comparison: it can never be published, so not approved")
    if state.status not in (AWAITING_APPROVAL, APPROVED):
        raise ReplayRefusedError(
            f"run {run_id} is {state.status}, not awaiting approval; "
            f"{why_not(state) or 'see lakehouse replay status ' + run_id}"
        )
    check_approver(state, by)
    manifest = state.manifest
    scope = f"{plan.plan}:{manifest.candidate if manifest else run_id}"
    moment = utc(clock.now())
    entry = Approval(
        run_id=run_id,
        approver=by,
        decision="rejected" if reject else "approved",
        scope=scope,
        reason=reason,
        approved_at=moment,
    )
    open_ledger(registry, clock=clock).writer.append(entry)
    log.info("run %s %s by %s (scope %s)", run_id, entry.decision, by, scope)
    return ApprovalResult(run_id, by, entry.decision, scope, moment)


def ack(
    registry: TableRegistry, consumer: str, run_id: str, *, by: str, clock: Clock
) -> outbox.Acknowledgement:
    """Record that ``consumer`` acknowledged the decision version ``run_id`` (idempotent)."""
    state = load_state(registry, run_id)
    check_consumer(state, consumer)
    acknowledgement = outbox.record_ack(
        registry.get(outbox.ACKS), consumer=consumer, run_id=run_id, by=by, at=utc(clock.now())
    )
    log.info(
        "%s acknowledged run %s%s",
        consumer,
        run_id,
        "" if acknowledgement.recorded else " (already acknowledged; the first ack stays)",
    )
    return acknowledgement
