"""Rolling a publication back: serving returns to its version before the run, within a window.

``lakehouse rollback RUN`` restores the version serving had before the run's publication,
within the plan's ``rollback_window_days``, and records a ``rollback`` entry; a later
``publish`` of the same run re-applies its changes (re-publication).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from lakehouse.errors import ReplayRefusedError
from ledger.api import open_ledger
from ledger.clock import Clock, utc
from ledger.entries import Rollback
from workloads.gold.entity_index import IndexRefresh
from workloads.policies import ProtectionPolicy
from workloads.replay.protection import sync_protections
from workloads.replay.publish import refresh_index
from workloads.replay.status import load_state

if TYPE_CHECKING:
    from lakehouse.tables import TableRegistry

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RollbackResult:
    """What ``rollback`` did."""

    run_id: str
    table: str
    from_version: int
    to_version: int
    new_version: int
    reason: str
    entity_index: IndexRefresh | None = None


def rollback(
    registry: TableRegistry,
    run_id: str,
    *,
    clock: Clock,
    reason: str = "",
    policy: ProtectionPolicy | None = None,
) -> RollbackResult:
    """Restore serving to its version before the run's publication, within the rollback window.

    Refused outside ``publication.rollback_window_days`` of the publication's effective
    time, for a run that is not published, when serving moved since (rolling back would
    also discard later writes), and when maintenance removed the version to return to (the
    message names the version and the rule that should have kept it). Afterwards the
    protections follow the ledger (``policy``: ``conf/policies.yaml`` when not given).
    """
    state = load_state(registry, run_id)
    live = state.live_publication
    if live is None:
        what = "was rolled back already" if state.publications else "was never published"
        raise ReplayRefusedError(f"run {run_id} {what}; nothing to roll back")
    window = timedelta(days=state.plan.publication.rollback_window_days)
    now = utc(clock.now())
    age = now - live.effective_at
    if age > window:
        raise ReplayRefusedError(
            f"run {run_id} was published at {live.effective_at.isoformat()}, {age.days} days ago, "
            f"outside its rollback window of {window.days} days; restate it with a new plan instead"
        )
    table = registry.get(state.table)
    published = live.tables[state.table]
    previous = live.previous.get(state.table)
    current = table.current_version()
    if previous is None:
        raise ReplayRefusedError(f"{state.table} had no version before run {run_id}; nothing to restore")
    if current != published:
        raise ReplayRefusedError(
            f"{state.table} moved from version {published} (published by {run_id}) to {current} since; "
            f"rolling back would discard those later writes: restate with a new correction plan instead"
        )
    if not table.readable(previous):
        until = live.effective_at + window
        raise ReplayRefusedError(
            f"run {run_id} cannot be rolled back: {state.table} version {previous}, the version before "
            f"its publication, is gone ({table.removal_note(previous)}); plan {state.plan.plan}'s "
            f"publication.rollback_window_days = {window.days} should have kept it until "
            f"{until.date().isoformat()}. Restate with a new correction plan instead"
        )
    text = reason or f"rollback of run {run_id} (plan {state.plan.plan})"
    new_version = table.rollback(previous, run_id=run_id)
    ledger = open_ledger(registry, clock=clock)
    ledger.writer.append(
        Rollback(
            run_id=run_id,
            table=state.table,
            from_version=published,
            to_version=previous,
            new_version=new_version,
            reason=text,
        )
    )
    log.info("run %s rolled back: %s version %d restored as %d", run_id, state.table, previous, new_version)
    sync_protections(registry, clock, policy)
    index = refresh_index(registry, state.table, ledger, clock)
    return RollbackResult(run_id, state.table, published, previous, new_version, text, index)
