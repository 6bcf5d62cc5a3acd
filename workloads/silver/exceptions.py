"""The exceptions queue: held facts in ``ops.exceptions``, and the decisions that empty it.

A late fact for a closed period of a ``hold`` feed (``conf/policies.yaml``) is not put in
Silver by the build: it waits in ``ops.exceptions`` with status ``awaiting_approval``.
A person decides on it by its ``exception_id`` (``exc-`` + 16 hex of its Bronze
coordinates, see :func:`workloads.silver.routing.exception_id`):

* **approved**: the fact enters Silver as an adjustment (``lateness='adjustment'``,
  ``accounting_date`` = the approval's UTC date, ``event_time`` unchanged). Every later
  Silver build reads the approved rows of the queue (:func:`approvals_in_queue`) and admits
  the same fact the same way, so a rebuild neither drops, duplicates nor re-holds it.
* **rejected**: the fact stays out of Silver, with the reason on its row.

The row keeps who decided, when, why and in which recorded run. A decision is final:
deciding again on a decided exception, or on an id the queue does not hold, is refused
(:func:`pending_exception`, a :class:`~lakehouse.errors.UsageError`, exit 2) before
anything is written.

Conservation counts an approved fact once, where it went: in Silver's rows (or among the
corrected revisions, if a later revision of the same event wins), never among the held
ones; its queue row stays as the record of the decision.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Final

from lakehouse.errors import UsageError
from workloads.silver.columns import COORDINATES
from workloads.vocabulary import ExceptionStatus, TableName

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.tables import Table, TableRegistry
    from workloads.silver.build import SilverReport

__all__ = [
    "DECISIONS",
    "Approval",
    "ExceptionDecision",
    "HeldFact",
    "approvals_in_queue",
    "check_decision",
    "list_exceptions",
    "pending_exception",
    "record_decision",
    "utc_date",
]

log = logging.getLogger(__name__)

DECISIONS: Final[tuple[ExceptionStatus, ...]] = (ExceptionStatus.APPROVED, ExceptionStatus.REJECTED)
"""The statuses a decision can set."""

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class HeldFact:
    """One row of ``ops.exceptions`` as people and programs see it (times in UTC)."""

    exception_id: str
    event_id: str
    domain: str
    period: str
    status: ExceptionStatus
    event_time: datetime
    ingest_time: datetime
    reason: str
    manifest_id: str
    source_file: str
    line: int
    queued_by_run: str
    decided_by: str | None = None
    decided_at: datetime | None = None
    decision_reason: str | None = None
    decision_run_id: str | None = None


@dataclass(frozen=True, order=True)
class Approval:
    """A held fact, by its Bronze coordinates, admitted to Silver on ``approved_on``."""

    manifest_id: str
    source_file: str
    line: int
    approved_on: date


@dataclass(frozen=True)
class ExceptionDecision:
    """What ``lakehouse exceptions approve|reject`` did: the decision, and for an approval
    the Silver build of the recorded run that admitted the fact."""

    exception_id: str
    event_id: str
    domain: str
    period: str
    decision: ExceptionStatus
    decided_by: str
    decided_at: datetime
    reason: str | None
    run_id: str
    accounting_date: date | None = None
    silver: SilverReport | None = None


def utc_date(moment: datetime) -> date:
    """The UTC calendar date of a moment (a naive moment is read as UTC)."""
    aware = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return aware.date()


def _utc(micros: int | None) -> datetime | None:
    return None if micros is None else _EPOCH + timedelta(microseconds=int(micros))


def _queue(registry: TableRegistry) -> Table | None:
    table = registry.get(TableName.EXCEPTIONS)
    return table if table.exists() and table.current_version() is not None else None


def _facts(frame: DataFrame) -> list[HeldFact]:
    """Rows of ``ops.exceptions`` as :class:`HeldFact`; timestamps read as UTC microseconds,
    so the answer does not depend on the Python process's time zone."""
    from pyspark.sql import functions as F

    rows = frame.select(
        "exception_id",
        "event_id",
        "domain",
        "period",
        "status",
        F.unix_micros("event_time").alias("event_time"),
        F.unix_micros("ingest_time").alias("ingest_time"),
        "reason",
        *COORDINATES,
        "run_id",
        "decided_by",
        F.unix_micros("decided_at").alias("decided_at"),
        "decision_reason",
        "decision_run_id",
    ).collect()
    facts = []
    for r in rows:
        event_time, ingest_time = _utc(r["event_time"]), _utc(r["ingest_time"])
        assert event_time is not None, "event_time is NOT NULL"
        assert ingest_time is not None, "ingest_time is NOT NULL"
        facts.append(
            HeldFact(
                exception_id=r["exception_id"],
                event_id=r["event_id"],
                domain=r["domain"],
                period=r["period"],
                status=ExceptionStatus(r["status"]),
                event_time=event_time,
                ingest_time=ingest_time,
                reason=r["reason"],
                manifest_id=r["_manifest_id"],
                source_file=r["_source_file"],
                line=int(r["_line"]),
                queued_by_run=r["run_id"],
                decided_by=r["decided_by"],
                decided_at=_utc(r["decided_at"]),
                decision_reason=r["decision_reason"],
                decision_run_id=r["decision_run_id"],
            )
        )
    return sorted(facts, key=lambda f: (f.period, f.domain, f.event_id, f.exception_id))


def list_exceptions(registry: TableRegistry, status: ExceptionStatus | None = None) -> tuple[HeldFact, ...]:
    """The queue (or the rows with one status), by period, domain, event id and id."""
    from pyspark.sql import functions as F

    table = _queue(registry)
    if table is None:
        return ()
    frame = table.read()
    if status is not None:
        frame = frame.where(F.col("status") == status)
    facts = tuple(_facts(frame))
    log.debug("exceptions queue: %d row(s) with status %s", len(facts), status or "any")
    return facts


def check_decision(decision: ExceptionStatus, by: str, reason: str | None) -> None:
    """Refuse a decision without an approver, or a rejection without a reason (no Spark)."""
    if decision not in DECISIONS:
        raise UsageError(f"decision: expected one of {', '.join(DECISIONS)}, got {decision!r}")
    if not by.strip():
        raise UsageError("--by: name who decides (it is recorded with the decision)")
    if decision is ExceptionStatus.REJECTED and not (reason or "").strip():
        raise UsageError("--reason: a rejection needs a reason (it stays on the exception's row)")


def pending_exception(registry: TableRegistry, exception_id: str) -> HeldFact:
    """The queued fact ``exception_id`` names, if it still awaits a decision; otherwise a
    one-line :class:`UsageError` (unknown id, or decided already, by whom and when)."""
    from pyspark.sql import functions as F

    table = _queue(registry)
    found = [] if table is None else _facts(table.read().where(F.col("exception_id") == exception_id))
    check_pending(exception_id, [(f.status, f.decided_by, f.decided_at) for f in found])
    (fact,) = found
    return fact


def check_pending(exception_id: str, found: Sequence[tuple[str, str | None, datetime | None]]) -> None:
    """Refuse an exception the queue does not hold, or one decided already (exit 2): ``found``
    is the queue's rows of ``exception_id`` as (status, decided_by, decided_at), read by Spark
    or, before Spark starts, without a JVM."""
    if not found:
        raise UsageError(
            f"exception {exception_id!r}: no such exception in {TableName.EXCEPTIONS} "
            f"(see lakehouse exceptions list)"
        )
    ((status, decided_by, decided_at),) = found
    if status != ExceptionStatus.AWAITING_APPROVAL:
        when = decided_at.isoformat() if decided_at else "?"
        raise UsageError(
            f"exception {exception_id}: already {status} by {decided_by} at {when}; a decision is final"
        )


def approvals_in_queue(registry: TableRegistry) -> tuple[Approval, ...]:
    """The held facts the queue records as approved, each with its approval date (the UTC
    date of ``decided_at``): what every Silver build admits."""
    from pyspark.sql import functions as F

    table = _queue(registry)
    if table is None:
        return ()
    seconds = F.unix_seconds(F.col("decided_at"))
    rows = (
        table.read()
        .where(F.col("status") == ExceptionStatus.APPROVED)
        .select(*COORDINATES, F.date_from_unix_date(F.floor(seconds / 86400).cast("int")).alias("on"))
        .collect()
    )
    approvals = tuple(
        sorted(Approval(r["_manifest_id"], r["_source_file"], int(r["_line"]), r["on"]) for r in rows)
    )
    log.debug("%d approved exception(s) admitted to Silver", len(approvals))
    return approvals


def record_decision(
    registry: TableRegistry,
    fact: HeldFact,
    *,
    decision: ExceptionStatus,
    by: str,
    at: datetime,
    reason: str | None,
    run_id: str,
) -> int | None:
    """Write the decision on the fact's queue row (merge by ``exception_id``); returns the
    table's new version."""
    from pyspark.sql import functions as F

    table = registry.get(TableName.EXCEPTIONS)
    decided = (
        table.read()
        .where(F.col("exception_id") == fact.exception_id)
        .withColumn("status", F.lit(str(decision)))
        .withColumn("decided_by", F.lit(by))
        .withColumn("decided_at", F.lit(at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)))
        .withColumn("decision_reason", F.lit(reason).cast("string"))
        .withColumn("decision_run_id", F.lit(run_id))
    )
    # The one decided row is materialised: an Iceberg MERGE whose source still reads its own
    # target fails to plan on Spark 4.1 ("No plan for TableReference").
    decided = decided.sparkSession.createDataFrame(decided.collect(), decided.schema)
    table.merge(decided, ["exception_id"], run_id=run_id)
    log.info("exception %s %s by %s in run %s", fact.exception_id, decision, by, run_id)
    return table.current_version()
