"""Recording a reconciliation of the provisional view: ledger entries and the outbox.

:func:`workloads.gold.provisional.reconcile_provisional` decides and writes the four outcomes;
this module records them where every other decision is recorded, for both callers (a batch
Gold build, :func:`workloads.pipeline.run_gold`, and a replay's publication,
:mod:`workloads.replay.publish`):

* one ``supersession`` entry per outcome that retired streaming rows (agree: promoted,
  batch stronger: superseded, false positive: retracted), with its count and reason, on
  ``gold.provisional_correlations``; the missed pairs (the recall gap) as a ``supersession``
  of "nothing" by the batch rows, so the ledger names the gap too;
* when streaming false positives were retracted: one outbox message per consumer of the
  ``streaming:`` policy, keyed by consumer and reconciling run (a rerun never sends a second
  one), and a ``notification`` entry each. The payload holds counts and the view's version,
  never an identifier (the consumer reads the retracted rows at that version).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Final

from ledger.entries import Notification, Supersession
from workloads.gold.provisional import ProvisionalReconciliation, reconcile_provisional
from workloads.replay import outbox
from workloads.vocabulary import StreamOutcome, TableName

if TYPE_CHECKING:
    from lakehouse.tables import TableRegistry
    from ledger.api import Ledger
    from workloads.policies import StreamingPolicy

__all__ = ["STREAM_PLAN", "reconcile_and_record", "record_reconciliation"]

log = logging.getLogger(__name__)

STREAM_PLAN: Final = "stream-reconciliation"
"""The outbox ``plan`` of streaming false-positive notifications."""

_RETIRED: Final[dict[StreamOutcome, tuple[str, str]]] = {
    StreamOutcome.AGREE: ("provisional", "promoted: batch agrees"),
    StreamOutcome.BATCH_STRONGER: ("provisional", "superseded: batch stronger on complete evidence"),
    StreamOutcome.FALSE_POSITIVE: ("provisional", "retracted: streaming false positive, consumers notified"),
    StreamOutcome.MISSED: ("none", "inserted: streaming missed the pair (recall gap)"),
}


def record_reconciliation(
    registry: TableRegistry, ledger: Ledger, report: ProvisionalReconciliation, policy: StreamingPolicy
) -> int:
    """Ledger entries and outbox messages of one reconciliation; returns the messages written."""
    table = TableName.PROVISIONAL_CORRELATIONS
    version = report.versions.get(table)
    window = f"valid window {report.window_start.isoformat()}..{report.window_end.isoformat()}"
    entries: list[Supersession | Notification] = [
        Supersession(
            run_id=report.run_id,
            table=table,
            key=f"outcome={outcome.value} ({window})",
            old=old,
            new=f"{TableName.CORRELATIONS} as built by {report.run_id}",
            reason=reason,
            count=report.outcomes[outcome],
        )
        for outcome, (old, reason) in _RETIRED.items()
        if report.outcomes.get(outcome)
    ]
    written: list[outbox.OutboxMessage] = []
    retracted = report.outcomes.get(StreamOutcome.FALSE_POSITIVE, 0)
    if retracted and version is not None:
        payload = {
            "table": str(table),
            "version": version,
            "retracted": retracted,
            "reconciled_by": report.run_id,
            "scopes": {s.scope: s.false_positive for s in report.scopes if s.false_positive},
        }
        messages = [
            outbox.message(
                consumer=consumer,
                plan=STREAM_PLAN,
                run_id=report.run_id,
                table_name=table,
                published_version=version,
                payload=payload,
                created_at=report.recorded_at,
            )
            for consumer in policy.consumers
        ]
        box = registry.get(outbox.OUTBOX)
        written = outbox.enqueue(box, messages, run_id=report.run_id)
        entries += [outbox.notification_of(report.run_id, m) for m in written]
    if entries:
        ledger.writer.append(*entries)
    missed = report.outcomes.get(StreamOutcome.MISSED, 0)
    if missed:
        log.warning(
            "stream reconciliation %s: recall gap, %d pair(s) the stream missed", report.run_id, missed
        )
    return len(written)


def reconcile_and_record(
    registry: TableRegistry,
    ledger: Ledger,
    *,
    run_id: str,
    recorded_at: datetime,
    policy: StreamingPolicy,
) -> ProvisionalReconciliation | None:
    """Reconcile the provisional view against the serving correlations now, and record it
    (a replay's publication: its correlations are what serves from now on)."""
    report = reconcile_provisional(registry, run_id=run_id, recorded_at=recorded_at, policy=policy)
    if report is not None:
        record_reconciliation(registry, ledger, report, policy)
    return report
