"""``lakehouse approve RUN --by NAME [--reject]``: an approver's decision on a correction."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome

NAME = "approve"
HELP = "approve (or --reject) a correction replay awaiting approval"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN", help="the replay run id (replay-...)")
    parser.add_argument("--by", required=True, help="the approver; must be listed in the plan")
    parser.add_argument("--reason", default="", help="why (recorded in the ledger)")
    parser.add_argument("--reject", action="store_true", help="reject instead of approve")


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_approval
    from workloads.replay import approve
    from workloads.replay.approval import check_approver

    state = ctx.require_replay_run(args.run_id)  # exit 2 before Spark: malformed, no lakehouse, unknown
    if state is not None:
        check_approver(state, args.by)  # exit 2 before Spark: not an approver of its plan
    result = approve(
        ctx.registry, args.run_id, by=args.by, clock=ctx.clock, reason=args.reason, reject=args.reject
    )
    return Outcome(data=result, lines=[render_approval(result)])


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
