"""``lakehouse train [--training-set ID]``: fit the fraud model, track it in MLflow, register it.

Fitted on the earlier decisions of one training set and measured on the later ones (ROC AUC,
PR AUC, Brier) beside two references (the base rate, the correlation confidence alone).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome, add_engines_argument, training_set_id

NAME = "train"
HELP = "fit the fraud model on a training set, log it to MLflow with its metrics and register it"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--training-set",
        dest="training_set",
        type=training_set_id,
        metavar="ID",
        help="the training_set_id to train on (default: the newest training set)",
    )
    parser.add_argument(
        "--declare",
        action="store_true",
        help="declare the next fraud_scoring release pinning the registered model version in --engines",
    )
    parser.add_argument(
        "--model-version",
        dest="model_version",
        type=int,
        help="--declare: pin this already registered fraud-score version instead of training a new one",
    )
    add_engines_argument(parser)
    parser.add_argument(
        "--effective-from",
        dest="effective_from",
        type=date.fromisoformat,
        help="--declare: the date the scoring release takes effect (default: today; after every "
        "declared fraud_scoring release)",
    )


@dataclass(frozen=True)
class Declared:
    """``train --declare``: the model (trained now, or registered before) and the release."""

    trained: Any
    engine: str
    model: str
    model_version: str
    engines: str


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_model_measures
    from lakehouse.errors import UsageError
    from ledger.engines import load_engines
    from workloads.ml.scoring import check_declarable, check_model_version
    from workloads.ml.tracking import check_reachable, tracking_for
    from workloads.ml.training import model_name

    effective = args.effective_from or datetime.now(UTC).date()
    if args.model_version is not None and not args.declare:
        raise UsageError("--model-version: only with --declare (pin a registered version without training)")
    if args.model_version is not None and args.training_set:
        raise UsageError("--model-version declares a registered version: --training-set trains a new one")
    if args.declare:
        check_declarable(load_engines(args.engines), effective)
    tracking = tracking_for(ctx.config)
    check_reachable(tracking)
    if args.model_version is not None:
        check_model_version(tracking, model_name(tracking), str(args.model_version))
        return _declare(args, ctx, None, str(args.model_version), effective, [])
    if args.training_set is not None:  # a training set is its run: the ledger read before Spark starts
        ctx.require_run(args.training_set, what="--training-set", noun="training set")
    ctx.require_lakehouse()

    from workloads.ml.tracking import open_tracking
    from workloads.ml.training import latest_training_set, train_model

    chosen = args.training_set or latest_training_set(ctx.registry)
    tracking = open_tracking(ctx.config)
    trained = train_model(ctx.registry, ctx.ledger, ctx.clock, tracking, chosen, progress=ctx.progress)
    m = trained.metrics
    lines = [
        f"model {trained.model_name} version {trained.model_version} registered ({trained.model_uri}), "
        f"run {trained.run_id}, MLflow run {trained.mlflow_run_id}",
        f"trained on {trained.train_rows} decisions of {trained.training_set_id} "
        f"(gold.training_sets@{trained.training_set_version}); measured on {m.rows} later ones "
        f"({m.positives} positive)",
        render_model_measures(m, trained.better_than_references),
        f"open the UI with: {tracking.ui_command()}",
    ]
    if args.declare:
        return _declare(args, ctx, trained, str(trained.model_version), effective, lines)
    return Outcome(data=trained, lines=lines)


def _declare(
    args: argparse.Namespace,
    ctx: Context,
    trained: Any,
    model_version: str,
    effective: date,
    lines: list[str],
) -> Outcome:
    """Declare the scoring release in ``--engines`` and record the declaration in the ledger."""
    from workloads.ml.scoring import declare_scoring
    from workloads.ml.tracking import open_tracking

    ctx.require_lakehouse()
    tracking = open_tracking(ctx.config)
    entry = declare_scoring(
        args.engines,
        tracking,
        model_version,
        effective_from=effective,
        run_id=trained.run_id if trained is not None else None,
    )
    ctx.ledger.writer.append(entry)
    ((model, version),) = entry.engine.model_versions.items()
    lines = [
        *lines,
        f"declared {entry.engine.ref} in {args.engines} (effective {effective}): {model} v{version} pinned",
        f"rescore with it: lakehouse score --engine {entry.engine.ref} --engines {args.engines}",
    ]
    data = Declared(trained, entry.engine.ref, model, version, str(args.engines))
    return Outcome(data=data, lines=lines)


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
