"""W2 retrospective re-correlation: the replay flow in docs/concepts.md.

Plain library functions for the CLI (each returns a frozen dataclass whose fields are what
``--json`` prints; :mod:`jobs.render` draws them for people):

* :func:`plan_scope` — ``lakehouse replay --plan P --dry-run``: exact scope and cost, no writes;
* :func:`run_replay` — ``lakehouse replay --plan P [--purpose comparison]``: candidate, diff,
  reconciliation, decision; stops at ``awaiting_approval`` (or ``compared``);
* :func:`approve` — ``lakehouse approve RUN --by NAME``;
* :func:`ack` — ``lakehouse ack CONSUMER RUN``;
* :func:`publish` — ``lakehouse publish RUN``: atomic publication, supersession, notifications;
  raises :class:`~lakehouse.errors.PublicationHeldError` while a required consumer has not
  acknowledged;
* :func:`rollback` — ``lakehouse rollback RUN``;
* :func:`run_status` — where a run stands;
* :func:`protect` — ``lakehouse protect``: the versions the ledger points to are kept by the
  formats' own maintenance; :func:`check_history` — ``lakehouse ledger verify --history``.

Modules, in the order a run meets them: :mod:`~workloads.replay.plan` (the correction
plan) with :mod:`~workloads.replay.answer` (the declaration of the table it restates),
:mod:`~workloads.replay.identity` (engines, pins, run id, candidate names),
:mod:`~workloads.replay.setup` (who the run is, its I/O budget),
:mod:`~workloads.replay.scope` and :mod:`~workloads.replay.analysis` (affected entities,
scoped recomputation; the dry run), :mod:`~workloads.replay.candidate` (supersede /
retract / insert, stamping, re-applying), :mod:`~workloads.replay.build` (the candidate),
:mod:`~workloads.replay.evaluate` with :mod:`~workloads.replay.diff`,
:mod:`~workloads.replay.review` and :mod:`~workloads.replay.reconcile` (diff, independent
checks and verdict), :mod:`~workloads.replay.outcome` and :mod:`~workloads.replay.flow`
(up to the gate); :mod:`~workloads.replay.state` and :mod:`~workloads.replay.status` (a
run's state from the ledger), :mod:`~workloads.replay.approval` (approve, ack),
:mod:`~workloads.replay.publish`, :mod:`~workloads.replay.notify` with
:mod:`~workloads.replay.outbox`, :mod:`~workloads.replay.rollback`;
:mod:`~workloads.replay.protection` (what maintenance must keep); and
:mod:`~workloads.replay.faults` (failure injection).
"""

from __future__ import annotations

from workloads.replay.analysis import AlreadyPublished, plan_scope, scope_or_published
from workloads.replay.approval import ApprovalResult, ack, approve
from workloads.replay.faults import FailPoint
from workloads.replay.flow import run_replay
from workloads.replay.identity import ReplayEngines, resolve_engines, run_candidates
from workloads.replay.outcome import ReplayOutcome
from workloads.replay.protection import HistoryCheck, ProtectionReport, check_history, protect
from workloads.replay.publish import PublishResult, publish
from workloads.replay.rollback import RollbackResult, rollback
from workloads.replay.scope import Estimate, ProducingRun, ReplayScope
from workloads.replay.state import RunState
from workloads.replay.status import RunStatus, run_status

__all__ = [
    "AlreadyPublished",
    "ApprovalResult",
    "Estimate",
    "FailPoint",
    "HistoryCheck",
    "ProducingRun",
    "ProtectionReport",
    "PublishResult",
    "ReplayEngines",
    "ReplayOutcome",
    "ReplayScope",
    "RollbackResult",
    "RunState",
    "RunStatus",
    "ack",
    "approve",
    "check_history",
    "plan_scope",
    "protect",
    "publish",
    "resolve_engines",
    "rollback",
    "run_candidates",
    "run_replay",
    "run_status",
    "scope_or_published",
]
