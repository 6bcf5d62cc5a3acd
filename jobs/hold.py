"""``lakehouse hold add|release|list``: legal holds on data subjects.

* ``add HOLD --subject-email ADDRESS | --entity ID --by NAME --reason TEXT``: while the hold
  is placed, ``lakehouse erase`` refuses the subject (exit 2, naming the hold; a dry run
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

from jobs.common import Action, Context, Outcome, TableView

NAME = "hold"
HELP = "place, release or list legal holds on data subjects (a held subject cannot be erased)"


def _decision_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("hold_id", metavar="HOLD", help="the hold's id (your case number)")
    parser.add_argument("--by", help="who decides (required; recorded)")
    parser.add_argument("--reason", help="why (required; recorded)")


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    _decision_arguments(parser)
    subject = parser.add_mutually_exclusive_group(required=True)
    subject.add_argument("--subject-email", metavar="ADDRESS", help="the subject's email address")
    subject.add_argument("--entity", metavar="ID", help="an entity id of the subject")


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # the common flags only


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse what can be refused without Spark: one line naming the argument."""
    from workloads.compliance import HoldRequest

    if args.action == "list":
        return
    subject = (getattr(args, "subject_email", None), getattr(args, "entity", None))
    HoldRequest(args.hold_id or "", args.by or "", args.reason or "", *subject)


def _list(args: argparse.Namespace, ctx: Context) -> Outcome:
    from workloads.compliance import open_holds

    ctx.require_lakehouse()
    holds = sorted(open_holds(ctx.ledger).values(), key=lambda h: h.at)
    rows = [{"hold": h.hold_id, "by": h.by, "at": h.at.isoformat(), "reason": h.reason} for h in holds]
    title = f"legal holds placed: {len(rows)}"
    return Outcome(
        data=holds, lines=[TableView(rows=rows, columns=("hold", "by", "at", "reason"), title=title)]
    )


def _decide(args: argparse.Namespace, ctx: Context) -> Outcome:
    from workloads.compliance import HoldRequest, place_hold, release_hold
    from workloads.compliance.holds import check_decision, placed_holds

    check_arguments(args)
    subject = (getattr(args, "subject_email", None), getattr(args, "entity", None))
    request = HoldRequest(args.hold_id, args.by, args.reason, *subject)
    holds = ctx.ledger_without_jvm(lambda reader: reader.kind_records("legal_hold"))
    if holds is not None:  # exit 2 before Spark: an id already placed (add), or not placed (release)
        check_decision(args.action, request, placed_holds(holds))
    hold = place_hold(ctx.ledger, request) if args.action == "add" else release_hold(ctx.ledger, request)
    return Outcome(data=hold, lines=[f"legal hold {hold.hold_id} {hold.action} by {hold.by}: {hold.reason}"])


ACTIONS = {
    "add": Action(
        "place a hold: while it is placed, lakehouse erase refuses the subject (exit 2); the id, name "
        "and reason may not name the subject",
        _add_arguments,
        _decide,
    ),
    "release": Action(
        "release a hold (it names the subject it was placed on): the subject may be erased again",
        _decision_arguments,
        _decide,
    ),
    "list": Action("the holds placed and not released", _no_arguments, _list),
}


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
