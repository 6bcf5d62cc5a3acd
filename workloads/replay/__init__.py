"""W2 retrospective re-correlation: the replay flow of DESIGN.md section 6.

Plain library functions for the CLI (each returns a frozen dataclass with ``to_dict()``;
outcomes of ``run_replay``, ``plan_scope`` and ``publish`` also have ``lines()``):

* :func:`plan_scope` — ``lakehouse replay --plan P --dry-run``: exact scope and cost, no writes;
* :func:`run_replay` — ``lakehouse replay --plan P [--purpose comparison]``: candidate, diff,
  reconciliation, decision; stops at ``awaiting_approval`` (or ``compared``);
* :func:`approve` — ``lakehouse approve RUN --by NAME``;
* :func:`ack` — ``lakehouse ack CONSUMER RUN``;
* :func:`publish` — ``lakehouse publish RUN``: atomic publication, supersession, notifications;
  raises :class:`~lakehouse.errors.PublicationHeldError` while a required consumer has not
  acknowledged;
* :func:`rollback` — ``lakehouse rollback RUN``;
* :func:`run_status` — where a run stands.

Modules: :mod:`~workloads.replay.identity` (engines, pins, run id), :mod:`~workloads.replay.scope`
(affected entities, scoped recomputation), :mod:`~workloads.replay.candidate` (supersede /
retract / insert, stamping, re-applying), :mod:`~workloads.replay.reconcile` (independent
checks and verdict), :mod:`~workloads.replay.state` (a run's state from the ledger),
:mod:`~workloads.replay.flow` (up to the gate), :mod:`~workloads.replay.publish` (the gate
and after), :mod:`~workloads.replay.faults` (failure injection).
"""

from __future__ import annotations

from workloads.replay.faults import FailPoint
from workloads.replay.flow import ReplayOutcome, plan_scope, run_replay
from workloads.replay.identity import ReplayEngines, resolve_engines, run_candidates
from workloads.replay.publish import (
    ApprovalResult,
    PublishResult,
    RollbackResult,
    RunStatus,
    ack,
    approve,
    publish,
    rollback,
    run_status,
)
from workloads.replay.scope import Estimate, ProducingRun, ReplayScope
from workloads.replay.state import RunState

__all__ = [
    "ApprovalResult",
    "Estimate",
    "FailPoint",
    "ProducingRun",
    "PublishResult",
    "ReplayEngines",
    "ReplayOutcome",
    "ReplayScope",
    "RollbackResult",
    "RunState",
    "RunStatus",
    "ack",
    "approve",
    "plan_scope",
    "publish",
    "resolve_engines",
    "rollback",
    "run_candidates",
    "run_replay",
    "run_status",
]
