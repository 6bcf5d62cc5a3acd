"""``lakehouse ack CONSUMER RUN --by NAME``: a consumer acknowledges a decision version."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome

NAME = "ack"
HELP = "acknowledge, for a consumer, the new version a replay will publish (releases a held publication)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("consumer", metavar="CONSUMER", help="a consumer named in the plan")
    parser.add_argument("run_id", metavar="RUN", help="the replay run id (replay-...)")
    parser.add_argument("--by", default="cli", help="who acknowledges (recorded)")


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_ack
    from workloads.replay import ack
    from workloads.replay.approval import check_consumer

    state = ctx.require_replay_run(args.run_id)  # exit 2 before Spark: malformed, no lakehouse, unknown
    if state is not None:
        check_consumer(state, args.consumer)  # exit 2 before Spark: not a consumer of its plan
    result = ack(ctx.registry, args.consumer, args.run_id, by=args.by, clock=ctx.clock)
    return Outcome(data=result, lines=[render_ack(result)])


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
