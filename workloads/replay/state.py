"""Where a replay run stands, read from its ledger entries alone (pure).

Every step of a replay records ledger entries under the run id; nothing else holds state.
So any process can pick a run up again: ``approve``, ``publish``, ``ack`` and ``rollback``
take only the run id, and a rerun of the same plan finds the run it would be.

Entries of a run, in ledger order:

* ``run_started`` with ``command = "replay"``: the plan (whole, canonical), pins, engines;
* ``run_finished``: the build ended (``ok``) or failed;
* ``diff_manifest`` and ``reconciliation_decision``: the candidate's diff and verdict.
  Every evaluation appends its manifest (never deduplicated), so the latest manifest is
  the current candidate's; a decision names the manifest it judged, and only the decision
  on the latest manifest counts (a rebuilt candidate is judged afresh);
* ``approval``; ``run_started`` with ``command = "publish"``: a publication *intent*
  (effective time ``E`` and the serving version published over), written before the
  candidate is stamped, so a crashed publication resumes with the same ``E``;
* ``publication``, ``supersession``, ``notification``, ``rollback``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from lakehouse.errors import ReplayError, UnknownRunError
from ledger.entries import (
    Approval,
    DiffManifest,
    LedgerEntryBase,
    Notification,
    Publication,
    ReconciliationDecision,
    Rollback,
    RunFinished,
    RunStarted,
)
from workloads.replay.answer import AnswerTable
from workloads.replay.plan import CorrectionPlan, Purpose
from workloads.vocabulary import Verdict

REPLAY_COMMAND: Final = "replay"
PUBLISH_COMMAND: Final = "publish"

BUILDING, FAILED, ABANDONED = "building", "failed", "abandoned"
COMPARED, SUPPRESSED, BLOCKED = "compared", "suppressed", "blocked"
AWAITING_APPROVAL, APPROVED, REJECTED = "awaiting_approval", "approved", "rejected"
PUBLISHED, PUBLISHED_UNNOTIFIED, ROLLED_BACK = "published", "published_unnotified", "rolled_back"

PUBLISHED_STATES: Final[frozenset[str]] = frozenset({PUBLISHED, PUBLISHED_UNNOTIFIED})
"""A rerun of a plan whose run is in one of these has nothing to replay."""
ABANDONED_PREFIX: Final = "abandoned: "
"""How a failed ``run_finished`` marks a run given up for good (its pinned inputs are gone and
``--rebuild`` started a new run): it never resumes, and its pins are no longer protected."""
RESTARTABLE: Final[frozenset[str]] = frozenset(
    {COMPARED, SUPPRESSED, BLOCKED, REJECTED, ROLLED_BACK, ABANDONED}
)
"""States after which a rerun of the plan pins its inputs afresh (the same pins give the same
run again). From any other state a rerun resumes the run, keeping its pins: an unfinished
build continues, and a published run is returned as it is rather than restated again."""


@dataclass(frozen=True)
class PublishIntent:
    """A publication begun: the effective time and the serving version it publishes over."""

    effective_at: datetime
    candidate: str
    previous: int | None
    position: int


@dataclass(frozen=True)
class RunState:
    """A replay run as its ledger entries describe it."""

    run_id: str
    started: RunStarted
    plan: CorrectionPlan
    entries: tuple[LedgerEntryBase, ...]

    def _of(self, kind: type[Any]) -> list[tuple[int, Any]]:
        return [(i, e) for i, e in enumerate(self.entries) if isinstance(e, kind)]

    def _last(self, kind: type[Any]) -> Any:
        found = self._of(kind)
        return found[-1][1] if found else None

    @property
    def table(self) -> str:
        return self.plan.answer.table

    @property
    def answer(self) -> AnswerTable:
        """The declaration of the table the run restates."""
        return self.plan.answer.declaration

    @property
    def pins(self) -> dict[str, int]:
        return {name: read.version for name, read in self.started.inputs.items()}

    @property
    def finished(self) -> RunFinished | None:
        value: RunFinished | None = self._last(RunFinished)
        return value

    @property
    def manifest(self) -> DiffManifest | None:
        value: DiffManifest | None = self._last(DiffManifest)
        return value

    @property
    def decision(self) -> ReconciliationDecision | None:
        """The decision on the current candidate: the latest decision recorded for the latest
        diff manifest (each evaluation records its manifest anew; a decision names the
        manifest it judged in ``checks.manifest_digest``)."""
        manifest = self.manifest
        if manifest is None:
            return None
        for _, decision in reversed(self._of(ReconciliationDecision)):
            if decision.checks.get("manifest_digest") == manifest.manifest_digest:
                found: ReconciliationDecision = decision
                return found
        return None

    @property
    def approval(self) -> Approval | None:
        value: Approval | None = self._last(Approval)
        return value

    @property
    def publications(self) -> list[Publication]:
        return [e for _, e in self._of(Publication)]

    @property
    def rollbacks(self) -> list[Rollback]:
        return [e for _, e in self._of(Rollback)]

    @property
    def notifications(self) -> list[Notification]:
        return [e for _, e in self._of(Notification)]

    @property
    def live_publication(self) -> Publication | None:
        """The run's publication readers see now: the last one, unless rolled back since."""
        pubs = self._of(Publication)
        if not pubs:
            return None
        position, publication = pubs[-1]
        if any(i > position for i, _ in self._of(Rollback)):
            return None
        value: Publication = publication
        return value

    @property
    def open_intent(self) -> PublishIntent | None:
        """The latest publication intent not yet followed by a publication."""
        intents = [
            (i, e)
            for i, e in enumerate(self.entries)
            if isinstance(e, RunStarted) and e.command == PUBLISH_COMMAND
        ]
        if not intents:
            return None
        position, intent = intents[-1]
        if any(i > position for i, _ in self._of(Publication)):
            return None
        params = intent.parameters
        previous = params.get("previous")
        return PublishIntent(
            effective_at=datetime.fromisoformat(str(params["effective_at"])),
            candidate=str(params["candidate"]),
            previous=int(previous) if isinstance(previous, int) else None,
            position=position,
        )

    def _position(self, entry: LedgerEntryBase | None) -> int:
        if entry is None:
            return -1
        return max(i for i, e in enumerate(self.entries) if e is entry)

    def notified(self) -> set[str]:
        return {n.consumer for n in self.notifications}

    @property
    def status(self) -> str:
        if self.live_publication is not None:
            wanted = {c.name for c in self.plan.publication.consumers}
            return PUBLISHED if wanted <= self.notified() else PUBLISHED_UNNOTIFIED
        if self.publications:
            return ROLLED_BACK
        finished = self._of(RunFinished)
        decision = self.decision
        if finished and finished[-1][1].status == "failed" and finished[-1][0] > self._position(decision):
            return ABANDONED if (finished[-1][1].error or "").startswith(ABANDONED_PREFIX) else FAILED
        if decision is None:
            return BUILDING
        if self.plan.purpose is Purpose.COMPARISON:
            return COMPARED
        verdict = Verdict(decision.verdict)
        if verdict is Verdict.SUPPRESS:
            return SUPPRESSED
        if verdict is not Verdict.PUBLISH:
            return BLOCKED
        approval = self.approval
        if approval is None:
            return AWAITING_APPROVAL
        return APPROVED if approval.decision == "approved" else REJECTED


def run_state(run_id: str, entries: Sequence[LedgerEntryBase]) -> RunState:
    """The state of ``run_id`` from its entries (in ledger order); refuses unknown runs."""
    mine = tuple(e for e in entries if e.run_id == run_id)
    started = next(
        (e for e in mine if isinstance(e, RunStarted) and e.command == REPLAY_COMMAND),
        None,
    )
    if started is None:
        raise UnknownRunError(
            f"no replay run {run_id!r} in the ledger; start one with lakehouse replay --plan PLAN"
        )
    raw = started.parameters.get("plan")
    if not isinstance(raw, dict):
        raise ReplayError(f"replay run {run_id} records no plan in its run_started entry; rerun the plan")
    plan = CorrectionPlan.model_validate(raw)
    return RunState(run_id=run_id, started=started, plan=plan, entries=mine)
