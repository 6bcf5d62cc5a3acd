"""``lakehouse ingest``: append a feed's new deliveries to Bronze, one manifest per delivery."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome

NAME = "ingest"
HELP = "ingest a feed's deliveries into Bronze (re-ingesting a manifest is a no-op)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--feed", required=True, help="orders, refunds, logins, settlements or outcomes")
    parser.add_argument(
        "--source", type=Path, help="history folder or the feed's folder (default: <workdir>/history)"
    )


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_ingest
    from lakehouse.errors import UsageError
    from workloads.bronze.ingest import bronze_table_of, feed_of, locate_feed
    from workloads.pipeline import run_ingest

    # The feed and the deliveries' folder are checked before a JVM starts: one line, exit 2.
    if bronze_table_of(args.feed) not in ctx.config.tables:
        feeds = sorted(feed_of(name) for name in ctx.config.tables if name.startswith(bronze_table_of("")))
        raise UsageError(f"--feed {args.feed!r} is not a configured feed; known feeds: {', '.join(feeds)}")
    source = args.source or ctx.config.workdir_path / "history"
    locate_feed(source.expanduser().resolve(), args.feed)
    report = run_ingest(ctx.registry, ctx.ledger, ctx.clock, feed=args.feed, source=source)
    return Outcome(data=report, lines=render_ingest(report))


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
