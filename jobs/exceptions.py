"""``lakehouse exceptions list|approve|reject``: the queue of held facts in ``ops.exceptions``.

* ``list [--status S]``: the queue (or one status), a table for people, the rows with
  ``--json``;
* ``approve EXCEPTION_ID --by NAME [--reason TEXT]``: the fact enters Silver as an
  adjustment accounted on today's (UTC) date, in a recorded run that names the approver;
* ``reject EXCEPTION_ID --by NAME --reason TEXT``: the fact stays out of Silver, with the
  reason on its row.

A missing id, approver or rejection reason is refused before Spark starts; an unknown or
already decided exception is refused before anything is written (one line, exit 2).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Action, Context, Outcome, TableView, add_policies_argument
from lakehouse.errors import UsageError
from workloads.vocabulary import ExceptionStatus

if TYPE_CHECKING:
    from workloads.silver.exceptions import ExceptionDecision, HeldFact

NAME = "exceptions"
HELP = "list the held late facts in ops.exceptions, or approve (into Silver as an adjustment) or reject one"
COLUMNS = (
    "exception_id",
    "domain",
    "event_id",
    "period",
    "status",
    "event_time",
    "decided_by",
    "decided_at",
    "decision_reason",
)


def _list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--status", choices=[str(s) for s in ExceptionStatus], help="only exceptions with this status"
    )


def _decision_arguments(parser: argparse.ArgumentParser, reason: str) -> None:
    parser.add_argument("exception_id", metavar="EXCEPTION_ID", help="the id (exc-...) from exceptions list")
    parser.add_argument("--by", help="who decides (required; recorded)")
    parser.add_argument("--reason", help=reason)
    add_policies_argument(parser)


def _approve_arguments(parser: argparse.ArgumentParser) -> None:
    _decision_arguments(parser, "why (recorded on the exception's row)")


def _reject_arguments(parser: argparse.ArgumentParser) -> None:
    _decision_arguments(parser, "why (required; recorded on the exception's row)")


EXCEPTION_ID = re.compile(r"exc-[0-9a-f]{16}")
"""An exception's id: ``exc-`` and 16 hex digits of its Bronze line (workloads/silver/exceptions.py)."""


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse what can be refused without Spark: one line naming the argument."""
    from workloads.silver.exceptions import check_decision

    if args.action == "list":
        return
    if not args.exception_id:
        raise UsageError(f"EXCEPTION_ID: exceptions {args.action} needs the id of one exception (exc-...)")
    if not EXCEPTION_ID.fullmatch(args.exception_id):
        raise UsageError(
            f"EXCEPTION_ID {args.exception_id!r} is not an exception id (exc- and 16 hex digits, "
            "from lakehouse exceptions list)"
        )
    if args.by is None:
        raise UsageError(f"--by: exceptions {args.action} needs the name of who decides")
    decision = ExceptionStatus.APPROVED if args.action == "approve" else ExceptionStatus.REJECTED
    check_decision(decision, args.by, args.reason)


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    """Either sub-action, as ``lakehouse exceptions ACTION`` runs it: arguments checked, then the
    work dir, before Spark starts."""
    check_arguments(args)
    if args.action != "list":
        from workloads.silver.lateness import load_lateness_policy

        load_lateness_policy(args.policies)  # a bad file: exit 2, before Spark
        check_queued(args.exception_id, ctx)
    ctx.require_lakehouse()
    return _list(args, ctx) if args.action == "list" else _decide(args, ctx)


def check_queued(exception_id: str, ctx: Context) -> None:
    """Refuse, before Spark starts, an exception ``ops.exceptions`` does not hold or one decided
    already, the queue read without a JVM (pyiceberg or deltalake); a queue only Spark can read
    is checked once Spark runs, with the same line."""
    from workloads.asof import Scope
    from workloads.silver.exceptions import check_pending
    from workloads.vocabulary import TableName

    queue = TableName.EXCEPTIONS
    rows = ctx.without_jvm(queue, lambda reader: reader.rows(queue, Scope(exception_id, ("exception_id",))))
    if rows is not None:
        check_pending(exception_id, [(r["status"], r["decided_by"], r["decided_at"]) for r in rows])


def queue_row(fact: HeldFact) -> dict[str, object]:
    """The columns the queue's table shows for one held fact."""
    return {
        "exception_id": fact.exception_id,
        "domain": fact.domain,
        "event_id": fact.event_id,
        "period": fact.period,
        "status": fact.status,
        "event_time": fact.event_time.isoformat(),
        "decided_by": fact.decided_by,
        "decided_at": fact.decided_at.isoformat() if fact.decided_at else None,
        "decision_reason": fact.decision_reason,
    }


def decision_line(result: ExceptionDecision) -> str:
    """One human line for a decision."""
    text = (
        f"{result.decision}: {result.exception_id} ({result.domain} {result.event_id}, period "
        f"{result.period}) by {result.decided_by} at {result.decided_at.isoformat()} in run {result.run_id}"
    )
    if result.accounting_date is not None:
        text += f"; in Silver as an adjustment accounted on {result.accounting_date.isoformat()}"
    if result.reason:
        text += f"; reason: {result.reason}"
    return text


def _list(args: argparse.Namespace, ctx: Context) -> Outcome:
    from workloads.silver.exceptions import list_exceptions

    status = ExceptionStatus(args.status) if args.status else None
    facts = list_exceptions(ctx.registry, status)
    title = f"ops.exceptions ({status or 'every status'}): {len(facts)}"
    rows = [queue_row(f) for f in facts]
    return Outcome(data=facts, lines=[TableView(rows=rows, columns=COLUMNS, title=title)])


def _decide(args: argparse.Namespace, ctx: Context) -> Outcome:
    from workloads.gold.quality import medallion_gate as gate
    from workloads.pipeline import run_exception_decision
    from workloads.silver.lateness import load_lateness_policy

    decision = ExceptionStatus.APPROVED if args.action == "approve" else ExceptionStatus.REJECTED
    policy = load_lateness_policy(args.policies)
    if decision is ExceptionStatus.APPROVED:
        ctx.progress(f"approving {args.exception_id}: rebuilding Silver with the fact admitted")
    result = run_exception_decision(
        ctx.registry,
        ctx.ledger,
        ctx.clock,
        exception_id=args.exception_id,
        decision=decision,
        by=args.by,
        reason=args.reason,
        policy=policy,
        gate=gate,
    )
    return Outcome(data=result, lines=[decision_line(result)])


ACTIONS = {
    "list": Action("the queue of held late facts (or those of one status)", _list_arguments, run),
    "approve": Action(
        "the fact enters Silver as an adjustment accounted on today's (UTC) date, in a recorded run "
        "that names the approver",
        _approve_arguments,
        run,
    ),
    "reject": Action("the fact stays out of Silver, with the reason on its row", _reject_arguments, run),
}


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
