"""What a replay run produced and where it stopped (:class:`ReplayOutcome`).

Built by the run itself, or read back from its ledger entries and review file alone
(:func:`outcome_from_state`) when a rerun finds the run already past its build.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ledger.entries import ReconciliationDecision
from workloads.replay import scope as sc
from workloads.replay.outbox import idempotency_key
from workloads.replay.plan import CorrectionPlan
from workloads.replay.review import read_review
from workloads.replay.state import AWAITING_APPROVAL, RunState


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
        decision=decision_dict(decision) if decision else {},
        sample=tuple(review.get("sample", ())),
        high_impact=tuple(review.get("high_impact", ())),
        notifications_planned=planned_notifications(state.plan, state.run_id),
        review_location=manifest.location if manifest else None,
        candidate_hash=review.get("candidate_hash"),
        resumed=resumed,
    )


def decision_dict(decision: ReconciliationDecision) -> dict[str, Any]:
    """The decision's fields for an outcome (without ``kind`` and ``run_id``)."""
    data = decision.model_dump(mode="json", exclude={"kind", "run_id"})
    return data
