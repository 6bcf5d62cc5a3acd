"""``lakehouse train [--training-set ID]``: fit the fraud model, track it in MLflow, register it.

Fitted on the earlier decisions of one training set and measured on the later ones (ROC AUC,
PR AUC, Brier) beside two references (the base rate, the correlation confidence alone).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome

NAME = "train"
HELP = "fit the fraud model on a training set, log it to MLflow with its metrics and register it"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--training-set",
        dest="training_set",
        help="the training_set_id to train on (default: the newest training set)",
    )


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_model_measures
    from workloads.ml.tracking import check_reachable, tracking_for

    check_reachable(tracking_for(ctx.config))
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
    return Outcome(data=trained, lines=lines)


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
