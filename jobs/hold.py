"""``lakehouse hold add|release|list``: legal holds on data subjects.

* ``add HOLD --subject-email ADDRESS | --entity ID --by NAME --reason TEXT``: while the hold
  is placed, ``lakehouse erase`` refuses the subject (exit 5, naming the hold; a dry run
  still lists where the subject is); the id, name and reason may not name the subject;
* ``release HOLD --by NAME --reason TEXT``: the subject may be erased again;
* ``list``: the holds placed and not released.

The ledger records each as a ``legal_hold`` entry that names the subject by a salted digest
only. A missing id, name or reason is refused before Spark starts (exit 2).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome, TableView
from lakehouse.errors import UsageError

NAME = "hold"
HELP = "place, release or list legal holds on data subjects (a held subject cannot be erased)"
ACTIONS = ("add", "release", "list")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=ACTIONS)
    parser.add_argument(
        "hold_id", nargs="?", metavar="HOLD", help="add, release: the hold's id (your case number)"
    )
    subject = parser.add_mutually_exclusive_group()
    subject.add_argument("--subject-email", metavar="ADDRESS", help="add: the subject's email address")
    subject.add_argument("--entity", metavar="ID", help="add: an entity id of the subject")
    parser.add_argument("--by", help="add, release: who decides (recorded)")
    parser.add_argument("--reason", help="add, release: why (recorded)")


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse what can be refused without Spark: one line naming the argument."""
    from workloads.compliance import HoldRequest

    if args.action == "list":
        if args.hold_id or args.subject_email or args.entity or args.by or args.reason:
            raise UsageError("hold list takes no HOLD, subject, --by or --reason")
        return
    if args.action == "release" and (args.subject_email or args.entity):
        raise UsageError("hold release takes no subject: the hold names the subject it was placed on")
    if args.action == "add" and not (args.subject_email or args.entity):
        raise UsageError("hold add needs the subject: --subject-email ADDRESS or --entity ID")
    HoldRequest(args.hold_id or "", args.by or "", args.reason or "", args.subject_email, args.entity)


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from workloads.compliance import HoldRequest, open_holds, place_hold, release_hold

    check_arguments(args)
    ctx.require_lakehouse()
    if args.action == "list":
        holds = sorted(open_holds(ctx.ledger).values(), key=lambda h: h.at)
        rows = [{"hold": h.hold_id, "by": h.by, "at": h.at.isoformat(), "reason": h.reason} for h in holds]
        title = f"legal holds placed: {len(rows)}"
        return Outcome(
            data=holds, lines=[TableView(rows=rows, columns=("hold", "by", "at", "reason"), title=title)]
        )
    request = HoldRequest(args.hold_id, args.by, args.reason, args.subject_email, args.entity)
    hold = place_hold(ctx.ledger, request) if args.action == "add" else release_hold(ctx.ledger, request)
    return Outcome(data=hold, lines=[f"legal hold {hold.hold_id} {hold.action} by {hold.by}: {hold.reason}"])


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
