"""``lakehouse extract TABLE --at T [--where EXPR] --out DIR``: a redacted audit extract.

The answer ``asof`` gives for a Gold table at T, with every identifier pseudonymised under a
salt drawn for this extract and kept nowhere, erased subjects left out, written as Parquet
files with a manifest (each file's sha256 and rows, the table, T, the version read, the
filter, the extract id) under the work dir, and recorded in the ledger. A later erasure of a
subject deletes every extract of a table that held it, and its certificate lists them.
Every argument is checked before Spark starts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome

NAME = "extract"
HELP = (
    "a redacted audit extract of a Gold table as known at T: identifiers pseudonymised, erased "
    "subjects absent, Parquet files and a manifest under the work dir, recorded in the ledger"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("table", metavar="TABLE", help="a Gold table, e.g. gold.correlations")
    parser.add_argument("--at", help="ISO-8601 instant with a time zone, e.g. 2026-11-29T12:00:00Z")
    parser.add_argument(
        "--where",
        help=(
            "filter on non-identifier columns (the asof grammar), "
            "e.g. \"confidence >= 0.8 and correlation_type = 'shared_card'\""
        ),
    )
    parser.add_argument("--out", type=Path, help="a new or empty folder under the work dir")


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_extract
    from workloads.compliance.extract import extract, extract_request

    ctx.require_lakehouse()
    request = extract_request(ctx.config, args.table, args.at, args.out, args.where)  # exit 2 before Spark
    result = extract(ctx.registry, ctx.ledger, request, ctx.progress)
    return Outcome(data=result, lines=render_extract(result))


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
