"""``lakehouse ingest``: append feeds' new deliveries to Bronze, one manifest per delivery.

``--feed`` names one feed, is repeated for several (``--feed orders --feed refunds``), or is
``all``: every configured feed, in the configuration's order. Every feed is checked before a
JVM starts; each is then its own recorded ingest run, in one Spark session. One feed prints
its report as before; several print ``{"feeds": [report, ...]}`` (text: each feed's lines),
and a feed that fails stops the command there: the feeds ingested before it are printed,
then its error, with its exit code.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome

if TYPE_CHECKING:
    from lakehouse.config import LakehouseConfig

NAME = "ingest"
HELP = "ingest feeds' deliveries into Bronze (re-ingesting a manifest is a no-op)"

ALL_FEEDS = "all"
"""``--feed all``: every configured feed, in the configuration's order."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--feed",
        action="append",
        required=True,
        help="orders, refunds, logins, settlements or outcomes; repeat it for several feeds, "
        "or 'all' for every configured feed (each is its own recorded run)",
    )
    parser.add_argument(
        "--source", type=Path, help="history folder or the feed's folder (default: <workdir>/history)"
    )


def configured_feeds(config: LakehouseConfig) -> list[str]:
    """The feeds of the configured Bronze tables, in the configuration's order."""
    from workloads.bronze.ingest import bronze_table_of, feed_of

    return [feed_of(name) for name in config.tables if name.startswith(bronze_table_of(""))]


def chosen_feeds(named: list[str], config: LakehouseConfig) -> list[str]:
    """The feeds ``--feed`` names, checked against the configuration before a JVM starts:
    one line (exit 2) for an unknown feed, a feed named twice, or ``all`` beside other names."""
    from lakehouse.errors import UsageError

    known = configured_feeds(config)
    if ALL_FEEDS in named:
        if len(named) > 1:
            raise UsageError(f"--feed {ALL_FEEDS} names every configured feed: give it alone")
        return known
    for feed in named:
        if feed not in known:
            listed = ", ".join(sorted(known))
            raise UsageError(f"--feed {feed!r} is not a configured feed; known feeds: {listed}")
        if named.count(feed) > 1:
            raise UsageError(f"--feed {feed!r} is given twice")
    return named


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_ingest, render_ingests
    from lakehouse.errors import LakehouseError
    from workloads.bronze.ingest import IngestReport, locate_feed
    from workloads.pipeline import run_ingest

    # The feeds and their deliveries' folders are checked before a JVM starts: one line, exit 2.
    feeds = chosen_feeds(args.feed, ctx.config)
    source = args.source or ctx.config.workdir_path / "history"
    for feed in feeds:
        locate_feed(source.expanduser().resolve(), feed)
    if len(feeds) == 1:
        report = run_ingest(ctx.registry, ctx.ledger, ctx.clock, feed=feeds[0], source=source)
        return Outcome(data=report, lines=render_ingest(report))
    reports: list[IngestReport] = []
    for done, feed in enumerate(feeds):
        ctx.progress(f"ingesting {feed}", done=done, total=len(feeds))
        try:
            reports.append(run_ingest(ctx.registry, ctx.ledger, ctx.clock, feed=feed, source=source))
        except LakehouseError as exc:  # the feeds before it stay ingested (each its own run)
            return Outcome(
                data={"feeds": reports},
                lines=render_ingests(reports),
                exit_code=exc.exit_code,
                error=f"--feed {feed}: {exc}",
            )
    return Outcome(data={"feeds": reports}, lines=render_ingests(reports))


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
