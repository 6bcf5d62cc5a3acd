"""What a replay run produced and where it stopped (:class:`ReplayOutcome`).

Built by the run itself, or read back from its ledger entries and review file alone
(:func:`outcome_from_state`) when a rerun finds the run already past its build.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lakehouse.meter import StepCost
from ledger.entries import ReconciliationDecision
from workloads.evaluation import QualityReport
from workloads.replay import scope as sc
from workloads.replay.outbox import idempotency_key
from workloads.replay.plan import CorrectionPlan
from workloads.replay.quality import recorded_quality
from workloads.replay.review import read_review
from workloads.replay.state import RunState


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
    quality: QualityReport | None = None
    """The old and the new version's quality against labelled truth, side by side (or why
    it was not measured); None for runs recorded before replays measured quality."""
    steps: tuple[StepCost, ...] = ()
    """Where this run's time went: wall seconds and Spark jobs per step (``setup``, ``analyse``,
    ``scope``, ``candidate``, ``diff``, ``gate``, ``recount``, ``reconcile``, ``decision``);
    empty for an outcome read back from the ledger (nothing was computed)."""


def planned_notifications(plan: CorrectionPlan, run_id: str) -> tuple[dict[str, Any], ...]:
    """The notifications a publication of ``run_id`` would send (listed, never written)."""
    return tuple(
        {
            "consumer": c.name,
            "required": c.required,
            "decision_version": run_id,
            "idempotency_key": idempotency_key(c.name, plan.plan, run_id),
        }
        for c in plan.publication.consumers
    )


def outcome_from_state(state: RunState, *, resumed: bool = True) -> ReplayOutcome:
    """The outcome of a run as recorded: from its ledger entries and its review file, no recomputation."""
    manifest, decision = state.manifest, state.decision
    review = read_review(manifest.location if manifest else None)
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
        decision=decision_dict(decision, review.get("examples")) if decision else {},
        sample=tuple(review.get("sample", ())),
        high_impact=tuple(review.get("high_impact", ())),
        notifications_planned=planned_notifications(state.plan, state.run_id),
        review_location=manifest.location if manifest else None,
        candidate_hash=review.get("candidate_hash"),
        resumed=resumed,
        quality=recorded_quality(state.entries),
    )


def decision_dict(
    decision: ReconciliationDecision, examples: Mapping[str, Sequence[str]] | None = None
) -> dict[str, Any]:
    """The decision's fields for an outcome (without ``kind`` and ``run_id``), each check with its
    ``examples`` (kept in the review file, not the ledger: :meth:`Reconciliation.examples`)."""
    data = decision.model_dump(mode="json", exclude={"kind", "run_id"})
    checks = data.get("checks") or {}
    for name, found in (examples or {}).items():
        if isinstance(checks.get(name), dict):
            checks[name]["examples"] = list(found)
    return data
