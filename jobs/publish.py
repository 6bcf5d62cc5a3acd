"""``lakehouse publish RUN``: publish an approved correction atomically, then notify consumers once.

Exits 5 while a required consumer has not acknowledged (``lakehouse ack``): the publication
is held, nothing changed, and running it again after the acknowledgement publishes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome, add_policies_argument

NAME = "publish"
HELP = "publish an approved correction replay (held, exit 5, until required consumers acknowledge)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN", help="the replay run id (replay-...)")
    add_policies_argument(parser)


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_publication
    from workloads.policies import load_protection_policy
    from workloads.replay import publish

    policy = load_protection_policy(args.policies)
    ctx.require_replay_run(args.run_id)  # exit 2 before Spark: malformed, no lakehouse, unknown
    result = publish(ctx.registry, args.run_id, clock=ctx.clock, policy=policy)
    return Outcome(data=result, lines=render_publication(result))


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
