"""``lakehouse generate``: write a seeded, faulty commerce-risk history as partner deliveries."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from datetime import date
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from typing import TYPE_CHECKING

from jobs.common import Block, Context, Outcome, TableView
from lakehouse.errors import UsageError
from workloads.vocabulary import FEEDS

if TYPE_CHECKING:
    from workloads.synthetic.generator import GenerationSummary

NAME = "generate"
HELP = "generate a seeded history of raw deliveries (orders, refunds, logins, settlements, outcomes)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, help="output folder, new or empty (default: <workdir>/history)")
    parser.add_argument("--entities", type=int, default=200, help="true persons (default 200)")
    parser.add_argument("--months", type=int, default=6, help="months of history (default 6)")
    parser.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    parser.add_argument("--start", type=date.fromisoformat, default=date(2025, 1, 1), help="first day")
    parser.add_argument(
        "--hold-back",
        choices=[f.value for f in FEEDS],
        metavar="FEED",
        help="a feed that stops delivering: its newest deliveries go to OUT/_held/FEED, not OUT/FEED "
        "(move them back to deliver them late); lakehouse progress flags it",
    )
    parser.add_argument(
        "--hold-back-days",
        type=int,
        default=3,
        help="how many days of the held feed's newest deliveries are held back (default 3)",
    )


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from workloads.silver.lateness import load_lateness_policy
    from workloads.synthetic.generator import GeneratorSettings, generate
    from workloads.synthetic.holdback import hold_back

    out = args.out or ctx.config.workdir_path / "history"
    if args.hold_back_days < 1:
        raise UsageError(f"--hold-back-days must be at least 1, not {args.hold_back_days}")
    try:
        settings = GeneratorSettings(
            entities=args.entities, months=args.months, seed=args.seed, start=args.start
        )
        summary = generate(out, settings, ctx.progress, policy=load_lateness_policy())
        if args.hold_back is not None:
            summary = replace(summary, held=hold_back(out, args.hold_back, args.hold_back_days))
    except (ValueError, FileExistsError) as exc:
        raise UsageError(f"generate: {exc}") from None
    return Outcome(data=summary, lines=render_generation(summary))


def render_generation(summary: GenerationSummary) -> list[Block]:
    """What ``generate`` wrote: where, how much, per feed (lines, files, fates) and faults per kind."""
    from workloads.vocabulary import FEEDS

    feeds = [
        {
            "feed": feed,
            "lines": summary.lines_per_feed[feed],
            "files": summary.files_per_feed[feed],
            "fates": ", ".join(f"{k}={v}" for k, v in sorted(summary.fates_per_feed[feed].items())),
        }
        for feed in FEEDS
    ]
    faults = [{"fault": kind, "count": n} for kind, n in summary.faults_per_kind.items()]
    return [
        f"out dir        : {summary.out_dir}",
        f"ground truth   : {summary.ground_truth}",
        f"persons / rings: {summary.persons} / {summary.rings}",
        f"deliveries     : {summary.first_delivery} .. {summary.last_delivery}",
        f"files written  : {summary.files_written}",
        f"total events   : {summary.total_events}",
        "",
        TableView(feeds, ["feed", "lines", "files", "fates"]),
        "",
        TableView(faults, ["fault", "count"]),
        *_held_lines(summary),
    ]


def _held_lines(summary: GenerationSummary) -> list[Block]:
    from workloads.synthetic.holdback import HELD_DIR

    held = summary.held
    if held is None:
        return []
    folder = summary.out_dir / HELD_DIR / held.feed
    return [
        "",
        f"held back      : {len(held.deliveries)} deliveries of {held.feed} ({', '.join(held.deliveries)}) "
        f"in {folder}; move them into {summary.out_dir / held.feed} to deliver them late",
    ]


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
