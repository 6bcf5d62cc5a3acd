"""The notification outbox and consumer acknowledgements (``ops.outbox``, ``ops.acks``).

A published decision is announced to each consumer exactly once: one outbox row per
(consumer, decision version), keyed by an idempotency key that is a digest of consumer,
plan and run. Rows are written by MERGE on that key, and only keys not yet present are
merged, so a rerun (a crash after the outbox write, a re-publication after a rollback)
never adds or rewrites a notification. Delivering the rows to consumers is a relay's
job (not part of this toolkit); the outbox is the durable record of what must be sent.

A consumer that is *required* by a plan acknowledges a decision version before it may be
published (``lakehouse ack CONSUMER RUN``); acknowledgements are kept one per
(consumer, run), the first one winning.

Replays never write here while building: a candidate's would-be notifications are only
listed in its outcome. Only a publication enqueues (:func:`workloads.replay.notify.notify`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from lakehouse.digest import canonical_json, digest_of
from ledger.entries import Notification
from workloads.vocabulary import TableName

if TYPE_CHECKING:
    from lakehouse.tables import Table

log = logging.getLogger(__name__)

OUTBOX: Final = TableName.OUTBOX
ACKS: Final = TableName.ACKS
KEY: Final = "idempotency_key"


def idempotency_key(consumer: str, plan: str, run_id: str) -> str:
    """The key of the one notification of ``consumer`` about ``run_id`` of ``plan``."""
    return digest_of({"consumer": consumer, "plan": plan, "run": run_id})[:32]


@dataclass(frozen=True)
class OutboxMessage:
    """One notification, as stored in ``ops.outbox``."""

    idempotency_key: str
    consumer: str
    run_id: str
    plan: str
    decision_version: str
    table_name: str
    published_version: int
    payload: str
    created_at: datetime


def message(
    *,
    consumer: str,
    plan: str,
    run_id: str,
    table_name: str,
    published_version: int,
    payload: Mapping[str, Any],
    created_at: datetime,
) -> OutboxMessage:
    """The notification of ``consumer`` about a published decision (decision version = run id)."""
    return OutboxMessage(
        idempotency_key=idempotency_key(consumer, plan, run_id),
        consumer=consumer,
        run_id=run_id,
        plan=plan,
        decision_version=run_id,
        table_name=table_name,
        published_version=published_version,
        payload=canonical_json(dict(payload)),
        created_at=created_at if created_at.tzinfo is not None else created_at.replace(tzinfo=UTC),
    )


def notification_of(run_id: str, message: OutboxMessage) -> Notification:
    """The ledger's record that ``message`` was written for ``run_id``'s consumer."""
    return Notification(
        run_id=run_id,
        consumer=message.consumer,
        table=message.table_name,
        version=message.published_version,
        decision_version=message.decision_version,
        idempotency_key=message.idempotency_key,
    )


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def stored_keys(table: Table, keys: Sequence[str]) -> set[str]:
    """Which of ``keys`` the outbox already holds."""
    if not keys or not table.exists():
        return set()
    listed = ", ".join(_quote(k) for k in keys)
    rows = table.read().where(f"{KEY} IN ({listed})").select(KEY).collect()
    return {str(r[KEY]) for r in rows}


def enqueue(table: Table, messages: Sequence[OutboxMessage], *, run_id: str) -> list[OutboxMessage]:
    """Write the messages whose key is not stored yet (MERGE on the key); returns those written."""
    table.create(if_not_exists=True)
    present = stored_keys(table, [m.idempotency_key for m in messages])
    fresh = [m for m in messages if m.idempotency_key not in present]
    if fresh:
        rows = [asdict(m) for m in fresh]
        schema = table.read().schema
        frame = table.spark.createDataFrame([tuple(r[f.name] for f in schema.fields) for r in rows], schema)
        table.merge(frame, [KEY], run_id=run_id)
    log.debug("outbox: %d of %d message(s) of run %s were new", len(fresh), len(messages), run_id)
    return fresh


def messages_of(table: Table, run_id: str) -> list[OutboxMessage]:
    """The outbox rows of one decision version, by consumer."""
    if not table.exists():
        return []
    rows = table.read().where(f"run_id = {_quote(run_id)}").orderBy("consumer").collect()
    return [
        OutboxMessage(**{k: r[k] for k in r.asDict()} | {"created_at": _aware(r["created_at"])}) for r in rows
    ]


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Acknowledgement:
    """A consumer's acknowledgement of a decision version."""

    consumer: str
    run_id: str
    acknowledged_by: str
    acknowledged_at: datetime
    recorded: bool
    """False when the consumer had already acknowledged this run (the first ack stays)."""


def acknowledged(table: Table, run_id: str) -> dict[str, Acknowledgement]:
    """Consumer -> its acknowledgement of ``run_id``."""
    if not table.exists():
        return {}
    rows = table.read().where(f"run_id = {_quote(run_id)}").collect()
    return {
        str(r["consumer"]): Acknowledgement(
            consumer=str(r["consumer"]),
            run_id=str(r["run_id"]),
            acknowledged_by=str(r["acknowledged_by"]),
            acknowledged_at=_aware(r["acknowledged_at"]),
            recorded=True,
        )
        for r in rows
    }


def record_ack(table: Table, *, consumer: str, run_id: str, by: str, at: datetime) -> Acknowledgement:
    """Store ``consumer``'s acknowledgement of ``run_id`` unless one is stored (MERGE on both)."""
    table.create(if_not_exists=True)
    existing = acknowledged(table, run_id).get(consumer)
    if existing is not None:
        return Acknowledgement(
            consumer=consumer,
            run_id=run_id,
            acknowledged_by=existing.acknowledged_by,
            acknowledged_at=existing.acknowledged_at,
            recorded=False,
        )
    moment = _aware(at)
    frame = table.spark.createDataFrame([(consumer, run_id, by, moment)], table.read().schema)
    table.merge(frame, ["consumer", "run_id"], run_id=run_id)
    return Acknowledgement(
        consumer=consumer, run_id=run_id, acknowledged_by=by, acknowledged_at=moment, recorded=True
    )
