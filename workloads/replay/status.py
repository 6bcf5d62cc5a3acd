"""Where a run stands, for ``lakehouse replay status RUN``, scripts and the other steps.

Every step after the build (approve, ack, publish, rollback) takes only a run id and reads
the run's state from the ledger (:func:`load_state`), so each can run in its own process
and be rerun after a crash.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.errors import ReplayError
from ledger.reader import LedgerReader
from workloads.replay.state import RunState, run_state
from workloads.vocabulary import Verdict

if TYPE_CHECKING:
    from lakehouse.tables import TableRegistry


def load_state(registry: TableRegistry, run_id: str) -> RunState:
    """The run's state from the ledger (a clear error for an unknown run)."""
    return run_state(run_id, LedgerReader.for_registry(registry).by_run(run_id))


@dataclass(frozen=True)
class RunStatus:
    """Where a run stands, for ``lakehouse replay status RUN`` and scripts."""

    run_id: str
    plan: str
    purpose: str
    status: str
    verdict: str | None
    failed_invariant: str | None
    approved_by: str | None
    published: Mapping[str, int]
    effective_at: str | None
    notified: tuple[str, ...]
    rollbacks: int


def run_status(registry: TableRegistry, run_id: str) -> RunStatus:
    """The status of a run as its ledger entries describe it."""
    state = load_state(registry, run_id)
    decision, approval, live = state.decision, state.approval, state.live_publication
    return RunStatus(
        run_id=run_id,
        plan=state.plan.plan,
        purpose=state.plan.purpose.value,
        status=state.status,
        verdict=decision.verdict if decision else None,
        failed_invariant=decision.failed_invariant if decision else None,
        approved_by=approval.approver if approval and approval.decision == "approved" else None,
        published=dict(live.tables) if live else {},
        effective_at=live.effective_at.isoformat() if live else None,
        notified=tuple(sorted(state.notified())),
        rollbacks=len(state.rollbacks),
    )


def why_not(state: RunState) -> str:
    """Why a run that was built cannot go on to approval or publication ("" if it can)."""
    decision = state.decision
    if decision is None:
        return "its build has not finished; rerun lakehouse replay --plan"
    if Verdict(decision.verdict) is not Verdict.PUBLISH:
        return (
            f"its reconciliation verdict is {decision.verdict} (failed check: "
            f"{decision.failed_invariant or 'none'}; first bad partition: "
            f"{decision.first_bad_partition or '-'}); owner {decision.owner} must resolve it"
        )
    return ""


def run_partitions(state: RunState) -> list[str]:
    """The ``valid_month`` partitions the run rewrites (from its latest diff manifest)."""
    manifest = state.manifest
    if manifest is None:
        raise ReplayError(f"run {state.run_id} has no diff manifest; rerun lakehouse replay --plan")
    return list(manifest.partitions)
