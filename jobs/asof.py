"""``lakehouse asof TABLE --at T``: what the system knew at T, and why (for auditors).

Two independent routes answer and are compared: the bitemporal columns plus the ledger,
and the format's time travel to the version the ledger says was published at T. A
disagreement is printed loudly with the first differing key and exits 7. With
``--reader pyiceberg`` no JVM starts: Iceberg tables are read with pyiceberg and Delta
tables (the ledger, by default) with deltalake. A one-entity question on
gold.correlations reads its entity index (``--no-index``: the table itself).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome

NAME = "asof"
HELP = "what a Gold table (or one entity) looked like at time T, by two routes that must agree"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("table", metavar="TABLE", help="a Gold table, e.g. gold.correlations")
    parser.add_argument("--at", help="ISO-8601 instant with a time zone, e.g. 2026-11-29T12:00:00Z")
    parser.add_argument("--entity", help="only this entity (bound as a value, never parsed)")
    parser.add_argument(
        "--where",
        help=(
            "filter: column op literal, joined by and/or/not, "
            "e.g. \"confidence >= 0.8 and correlation_type = 'shared_card'\""
        ),
    )
    parser.add_argument("--history", action="store_true", help="the entity's story over knowledge time")
    parser.add_argument(
        "--reader",
        choices=["spark", "pyiceberg"],
        default="spark",
        help="spark (default) or pyiceberg: no JVM (pyiceberg for Iceberg, deltalake for Delta tables)",
    )
    parser.add_argument(
        "--no-index",
        action="store_true",
        help="read gold.correlations itself, every file, instead of its entity index (a cross-check)",
    )


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_asof, render_history
    from lakehouse.errors import UsageError
    from lakehouse.expressions import parse_instant, parse_where
    from workloads.asof import PythonReader, Reader, SparkReader, asof, entity_history
    from workloads.asof.answer import refuse_unanswerable

    # Every argument is checked against the configuration alone, then the work dir: bad input
    # is one line (exit 2) before a JVM starts (SparkReader starts it).
    known = sorted(ctx.config.tables)
    refuse_unanswerable(args.table, known)
    if args.history and not args.entity:
        raise UsageError("--history needs --entity ID")
    if not args.history and not args.at:
        raise UsageError("asof needs --at TIMESTAMP (ISO-8601 with a time zone), or --history --entity ID")
    at = None if args.history else parse_instant(args.at, what="--at")
    if args.where:
        parse_where(args.where, PythonReader(ctx.config).columns(args.table))
    ctx.require_lakehouse()
    reader: Reader = PythonReader(ctx.config) if args.reader == "pyiceberg" else SparkReader(ctx.registry)
    if args.history:
        story = entity_history(
            reader, args.table, args.entity, known_tables=known, use_index=not args.no_index
        )
        return Outcome(data=story, lines=render_history(story))
    assert at is not None
    answer = asof(
        reader,
        args.table,
        at,
        known_tables=known,
        entity=args.entity,
        where=args.where,
        use_index=not args.no_index,
    )
    disagreement = (
        f"routes disagree for {args.table} at {args.at}: first differing key "
        f"{answer.first_difference and answer.first_difference.get('key')}"
        if answer.routes_agree is False
        else None
    )
    return Outcome(data=answer, lines=render_asof(answer), exit_code=answer.exit_code, error=disagreement)


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
