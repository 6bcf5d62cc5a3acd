"""``lakehouse progress [--at T]``: per source, how far its data has arrived (the operational view).

For each feed: last event time, last ingest time, watermark, lag, rows in the last interval,
and whether it is stalled against its expected cadence (``progress:`` in the policy file).
Read from what Bronze holds, never from when a job last ran; a stalled feed is named even
while the others deliver, and makes the exit code 4 (a check failed), so a scheduler notices.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome, add_policies_argument
from lakehouse.errors import ExitCode

NAME = "progress"
HELP = "per source: last event and ingest time, watermark, lag, recent rows, and whether it stalled (exit 4)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--at", help="judge progress at this instant (ISO-8601 with a time zone; default: now)"
    )
    add_policies_argument(parser)


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_progress
    from lakehouse.expressions import parse_instant
    from workloads.operations import load_progress_policy, read_feed_stats, source_progress
    from workloads.silver.lateness import load_lateness_policy

    at = parse_instant(args.at, what="--at") if args.at else ctx.clock.now()
    policy = load_progress_policy(args.policies)  # a bad file: exit 2, before Spark
    lateness = load_lateness_policy(args.policies)
    ctx.require_lakehouse()
    report = source_progress(read_feed_stats(ctx.registry, at, policy.interval_hours), lateness, policy, at)
    return Outcome(
        data=report,
        lines=render_progress(report),
        exit_code=ExitCode.CHECK_FAILED if report.stalled else ExitCode.DONE,
    )


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
