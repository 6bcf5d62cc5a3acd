"""``lakehouse rollback RUN``: restore serving to its version before a publication, within the window."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome, add_policies_argument

NAME = "rollback"
HELP = "roll back a published replay (only within the plan's rollback window)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN", help="the replay run id (replay-...)")
    parser.add_argument("--reason", default="", help="why (recorded in the ledger)")
    add_policies_argument(parser)


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_rollback
    from workloads.policies import load_protection_policy
    from workloads.replay import rollback

    policy = load_protection_policy(args.policies)
    ctx.require_replay_run(args.run_id)  # exit 2 before Spark: malformed, no lakehouse, unknown
    result = rollback(ctx.registry, args.run_id, clock=ctx.clock, reason=args.reason, policy=policy)
    return Outcome(data=result, lines=render_rollback(result))


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
