"""``lakehouse reconcile SOURCE DERIVED``: a derived store against its source (seed 002).

The pair must be declared in ``reconcile.pairs`` of the configuration (``conf/lakehouse.yaml``:
which side wins, the key, the projection; :mod:`workloads.reconciliation.pairs`). Walks
key-hash range checksums of both sides at pinned versions, refining only the ranges that
disagree (one Spark job per level, at most ``reconcile.max_ranges_per_level`` summaries on
the driver), lists the keys of small disagreeing ranges, classifies every difference as
missing, divergent or orphan outside the staleness window, reports the delta per class
(``ops.reconcile_reports`` and the ledger) and flags a step change. ``--repair`` rewrites
missing and divergent keys from the source, rate-limited; orphans are reported, never deleted.

Exit 0: the whole key space compared and nothing differs. 4: differences remain or the delta
is a step change. 5: not finished, nothing wrong found so far: a budget (``--max-rows``,
``--max-seconds``) stopped the walk (the next run resumes where it stopped), or another
reconcile of the same derived table runs. 2: bad input, before Spark starts: an undeclared
pair, a declaration ``reconcile.pairs`` gets wrong (an unknown table or projection, a key whose
two columns have different types), a ``--key`` of different types, a budget <= 0, ``--repair``
of a pair without an authority or declared report-only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from typing import TYPE_CHECKING

from jobs.common import Context, Outcome, add_policies_argument
from lakehouse.errors import ExitCode

if TYPE_CHECKING:
    from workloads.reconciliation.run import ReconcileReport

NAME = "reconcile"
HELP = "compare a derived table with its source by range checksums; report (and --repair) the drift"


LAST_CLEAN = "last-clean"
"""``--since last-clean``: bounded mode from the pair's last clean, complete run."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="the source table (e.g. bronze.orders, gold.correlations)")
    parser.add_argument("derived", help="the derived table (e.g. silver.events, gold.correlations_by_entity)")
    parser.add_argument(
        "--key", help="the key column, or SOURCE_COLUMN:DERIVED_COLUMN (default: the declared pair's)"
    )
    parser.add_argument(
        "--since",
        help="bounded mode: only keys modified after this instant (ISO-8601, zone), or "
        "last-clean: since the pair's last clean, complete run",
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
    parser.add_argument(
        "--max-rows",
        type=int,
        default=None,
        help="list at most this many rows key by key, both sides (default: reconcile.max_rows in policies)",
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        help="start no Spark job after this many seconds (default: reconcile.max_seconds in policies)",
    )
    parser.add_argument(
        "--from-start",
        action="store_true",
        help="ignore where the pair's last run stopped and walk the key space from its start",
    )
    add_policies_argument(parser)


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_reconcile
    from lakehouse.expressions import parse_instant
    from workloads.reconciliation.pairs import resolve_pair
    from workloads.reconciliation.run import check_repair, load_reconcile_policy, reconcile
    from workloads.reconciliation.summaries import batches, check_budget, check_window

    # everything a user can get wrong is refused here, before Spark starts
    since_last_clean = args.since == LAST_CLEAN
    since = parse_instant(args.since, what="--since") if args.since and not since_last_clean else None
    until = parse_instant(args.until, what="--until") if args.until else None
    check_window(since, until)
    pair = resolve_pair(ctx.config, args.source, args.derived, args.key)
    if args.repair:
        check_repair(pair)
    if args.max_repairs_per_second is not None:
        next(batches([], args.max_repairs_per_second), None)
    check_budget(args.max_rows, "--max-rows")
    check_budget(args.max_seconds, "--max-seconds")
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
        since_last_clean=since_last_clean,
        repair=args.repair,
        max_repairs_per_second=args.max_repairs_per_second,
        max_rows=args.max_rows,
        max_seconds=args.max_seconds,
        from_start=args.from_start,
        progress=ctx.progress,
    )
    return Outcome(data=report, lines=render_reconcile(report), exit_code=reconcile_exit_code(report))


def reconcile_exit_code(report: ReconcileReport) -> ExitCode:
    """4 when differences remain or stepped up (whatever the coverage), else 5 when a budget
    stopped the walk before the end of the key space, else 0."""
    if report.remaining > 0 or report.step_change:
        return ExitCode.CHECK_FAILED
    return ExitCode.HELD if report.resume_from is not None else ExitCode.DONE


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
