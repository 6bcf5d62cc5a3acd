"""``lakehouse stream [--available-now]``: the streaming provisional path over Bronze.

Spark Structured Streaming with Bronze as the source and a ``foreachBatch`` sink: each
micro-batch is canonicalised, resolved and correlated with the batch path's own functions
over a bounded evidence window, and written to ``gold.provisional_correlations`` as
``provisional`` exactly once (``ops.stream_batches``). ``--available-now`` processes what
Bronze holds and stops; without it the query runs until interrupted. Checkpoints under
``<workdir>/streams/<instance>/``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.build import add_engine_pins_argument, pinned_versions
from jobs.common import Context, Outcome, add_engines_argument, add_policies_argument, positive_int

NAME = "stream"
HELP = (
    "stream Bronze into provisional correlations (Structured Streaming; --available-now stops when caught up)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--available-now", action="store_true", help="process everything Bronze holds now, then stop"
    )
    parser.add_argument(
        "--max-files-per-batch",
        type=positive_int,
        help="cap the Bronze data files one micro-batch takes, per feed",
    )
    add_engines_argument(parser)
    add_engine_pins_argument(parser, "run it instead of the version in force (repeatable), as build does")
    parser.add_argument(
        "--fail-at",
        metavar="POINT",
        help="inject a crash at this point of the first batch (drills: after_sink_write)",
    )
    add_policies_argument(parser)


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_stream
    from ledger.engines import load_engines
    from workloads.pipeline import run_stream_provisional
    from workloads.policies import load_streaming_policy
    from workloads.silver.lateness import load_lateness_policy
    from workloads.streaming import stream_fail_point, stream_home

    fail_at = stream_fail_point(args.fail_at)  # bad input: exit 2, before Spark
    streaming = load_streaming_policy(args.policies)
    lateness = load_lateness_policy(args.policies)
    catalog = load_engines(args.engines)  # a bad file or pin: exit 2, before Spark
    pinned = pinned_versions(catalog, args.pins)
    ctx.require_lakehouse()
    ctx.progress("streaming Bronze into provisional correlations")
    report = run_stream_provisional(
        ctx.registry,
        ctx.ledger,
        ctx.clock,
        home=stream_home(ctx.config),
        lateness=lateness,
        streaming=streaming,
        available_now=args.available_now,
        max_files_per_batch=args.max_files_per_batch,
        fail_at=fail_at,
        engines_path=args.engines,
        pinned=pinned,
        progress=ctx.progress,
    )
    return Outcome(data=report, lines=render_stream(report))


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
