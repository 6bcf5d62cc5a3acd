"""``lakehouse training-set --at T --label-horizon 90d``: a point-in-time training set (W4).

One row per decision point (an order at its event time t) with the features known at t and
the outcome that arrived within the horizon, read as the lake knew it at T; written as a
new version of ``gold.training_sets``, recorded in the ledger and logged to MLflow.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, date, datetime
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome, add_renamed_argument

NAME = "training-set"
HELP = "build a point-in-time-correct training set as known at T (features at each decision, later labels)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_renamed_argument(
        parser,
        "--at",
        "--as-of",
        dest="as_of",
        metavar="T",
        help="what the lake knew at this instant (ISO-8601 with a time zone; default: now)",
    )
    parser.add_argument(
        "--label-horizon",
        dest="label_horizon",
        default="90d",
        help="how long after a decision an outcome still counts as its label, e.g. 90d (default)",
    )
    add_renamed_argument(
        parser, "--since", "--from", dest="since", type=date.fromisoformat, help="first decision date"
    )
    parser.add_argument("--until", type=date.fromisoformat, help="decision date to stop before")


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from lakehouse.errors import UsageError
    from lakehouse.expressions import parse_instant
    from workloads.ml.point_in_time import TrainingWindow, label_horizon_days
    from workloads.ml.tracking import check_reachable, tracking_for

    horizon = label_horizon_days(args.label_horizon)
    now = datetime.now(UTC)
    as_of = parse_instant(args.as_of, what="--at") if args.as_of else now
    if as_of > now:
        raise UsageError(f"--at {args.as_of} is in the future (now {now.isoformat(timespec='seconds')})")
    if args.since and args.until and args.since >= args.until:
        raise UsageError(f"--since {args.since} must be before --until {args.until}")
    check_reachable(tracking_for(ctx.config))
    ctx.require_lakehouse()
    window = TrainingWindow(as_of=as_of, horizon_days=horizon, since=args.since, until=args.until)

    from workloads.ml.tracking import open_tracking
    from workloads.ml.training_set import build_training_set

    tracking = open_tracking(ctx.config)
    built = build_training_set(ctx.registry, ctx.ledger, ctx.clock, window, tracking, progress=ctx.progress)
    lines = [
        f"training set {built.training_set_id}: {built.rows} decision points "
        f"({built.positives} positive, {built.censored} censored: horizon not closed by "
        f"{built.knowledge_end.isoformat()})",
        f"as known at {built.as_of.isoformat()}: "
        + ", ".join(f"{name}@{version}" for name, version in sorted(built.inputs.items())),
        f"written to {built.table}@{built.version} (content hash {built.content_hash[:16]})",
        f"MLflow run {built.mlflow_run_id}; open the UI with: {tracking.ui_command()}",
    ]
    return Outcome(data=built, lines=lines)


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
