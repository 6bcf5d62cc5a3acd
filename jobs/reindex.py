"""``lakehouse reindex``: make the correlation store's entity index mirror its serving version.

Builds, publications and rollbacks rebuild the index themselves; this command catches up
after one of those died before its rebuild, or rebuilds with a chosen bucket count. It
does nothing when the index already mirrors the serving version.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome

NAME = "reindex"
HELP = "rebuild gold.correlations_by_entity (the entity index asof reads) if it lags the store"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--buckets",
        type=int,
        default=None,
        help="bucket count (default: one per ~500k index rows, at most 32)",
    )


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_index_refresh
    from lakehouse.errors import UsageError
    from workloads.gold.entity_index import refresh_entity_index

    if args.buckets is not None and args.buckets < 1:
        raise UsageError(f"--buckets must be at least 1, not {args.buckets}")
    ctx.require_lakehouse()
    done = refresh_entity_index(ctx.registry, ctx.ledger, ctx.clock, buckets=args.buckets)
    return Outcome(data=done, lines=[render_index_refresh(done)])


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
