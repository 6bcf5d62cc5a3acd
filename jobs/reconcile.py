"""``lakehouse reconcile SOURCE DERIVED --key K``: a derived store against its source (seed 002).

Compares range checksums of both sides at pinned versions, refines only the ranges that
disagree, classifies every difference as missing, divergent or orphan outside the staleness
window, reports the delta per class (``ops.reconcile_reports`` and the ledger) and flags a
step change. ``--repair`` rewrites missing and divergent keys from the source, rate-limited;
orphans are reported, never deleted. Exit 0 when nothing differs, 4 when differences remain
or the delta is a step change, 5 when another reconcile of the same derived table runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome, add_policies_argument

NAME = "reconcile"
HELP = "compare a derived table with its source by range checksums; report (and --repair) the drift"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="the source table (e.g. bronze.orders, gold.correlations)")
    parser.add_argument("derived", help="the derived table (e.g. silver.events, gold.correlations_by_entity)")
    parser.add_argument("--key", required=True, help="the key column, or SOURCE_COLUMN:DERIVED_COLUMN")
    parser.add_argument(
        "--since", help="bounded mode: only keys modified after this instant (ISO-8601, zone)"
    )
    parser.add_argument("--until", help="bounded mode: only keys modified up to this instant (default: now)")
    parser.add_argument(
        "--repair", action="store_true", help="rewrite missing and divergent keys from the source"
    )
    parser.add_argument(
        "--max-repairs-per-second",
        type=int,
        default=None,
        help="repair at most this many keys a second (default: reconcile.max_repairs_per_second in policies)",
    )
    add_policies_argument(parser)


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_reconcile
    from lakehouse.expressions import parse_instant
    from workloads.reconciliation.pairs import resolve_pair
    from workloads.reconciliation.run import check_repair, load_reconcile_policy, reconcile
    from workloads.reconciliation.summaries import batches, check_window

    # everything a user can get wrong is refused here, before Spark starts
    since = parse_instant(args.since, what="--since") if args.since else None
    until = parse_instant(args.until, what="--until") if args.until else None
    check_window(since, until)
    pair = resolve_pair(ctx.config, args.source, args.derived, args.key)
    if args.repair:
        check_repair(pair)
    if args.max_repairs_per_second is not None:
        next(batches([], args.max_repairs_per_second), None)
    policy = load_reconcile_policy(args.policies)
    ctx.require_lakehouse()
    report = reconcile(
        ctx.registry,
        ctx.ledger,
        ctx.clock,
        pair,
        policy=policy,
        policies=args.policies,
        since=since,
        until=until,
        repair=args.repair,
        max_repairs_per_second=args.max_repairs_per_second,
        progress=ctx.progress,
    )
    failed = report.remaining > 0 or report.step_change
    return Outcome(data=report, lines=render_reconcile(report), exit_code=4 if failed else 0)


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
