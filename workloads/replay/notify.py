"""Notifying consumers of a publication: one outbox message and one ledger entry each, once.

The messages go to ``ops.outbox`` through :func:`workloads.replay.outbox.enqueue` (MERGE
on the idempotency key, keys already stored are never written again), and a
``notification`` entry is recorded for every consumer the ledger has not yet recorded,
so a rerun after a crash anywhere in between completes the set without duplicates.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ledger.api import Ledger
from ledger.entries import Publication
from workloads.replay import outbox
from workloads.replay.state import RunState
from workloads.replay.status import run_partitions

if TYPE_CHECKING:
    from lakehouse.tables import TableRegistry

log = logging.getLogger(__name__)


def notify(
    registry: TableRegistry, state: RunState, live: Publication, ledger: Ledger
) -> tuple[int, list[outbox.OutboxMessage]]:
    """One outbox message and one notification entry per consumer, never a second one."""
    table = state.table
    payload = {
        "plan": state.plan.plan,
        "table": table,
        "version": live.tables[table],
        "previous": live.previous.get(table),
        "effective_at": live.effective_at.isoformat(),
        "partitions": run_partitions(state),
    }
    messages = [
        outbox.message(
            consumer=c.name,
            plan=state.plan.plan,
            run_id=state.run_id,
            table_name=table,
            published_version=live.tables[table],
            payload=payload,
            created_at=live.effective_at,
        )
        for c in state.plan.publication.consumers
    ]
    box = registry.get(outbox.OUTBOX)
    written = outbox.enqueue(box, messages, run_id=state.run_id)
    stored = outbox.messages_of(box, state.run_id)
    notified = state.notified()
    entries = [outbox.notification_of(state.run_id, m) for m in stored if m.consumer not in notified]
    if entries:
        ledger.writer.append(*entries)
    log.info(
        "run %s: %d outbox message(s) written, %d notification(s) recorded, %d consumer(s) notified",
        state.run_id,
        len(written),
        len(entries),
        len(stored),
    )
    return len(written), stored
