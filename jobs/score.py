"""``lakehouse score [--engine fraud_scoring@N] [--training-set ID]``: score decisions under a release.

The release's registered ``fraud-score`` version (its ``model_versions``) is loaded from the
registry and applied to every decision point of one training set; ``gold.fraud_scores`` keeps a
rescored decision's earlier score as superseded, with the reason naming the release.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import (
    Context,
    EngineRelease,
    Outcome,
    add_engine_argument,
    add_engines_argument,
    resolve_release,
    training_set_id,
)

NAME = "score"
HELP = "score a training set's decisions under a fraud_scoring release (its pinned model version)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_engine_argument(
        parser,
        "the fraud_scoring release to score under (default: fraud_scoring, the version in force today)",
        name_alone="the version in force today (the latest effective)",
    )
    parser.add_argument(
        "--training-set",
        dest="training_set",
        type=training_set_id,
        metavar="ID",
        help="the training_set_id whose decisions to score (default: the newest training set)",
    )
    add_engines_argument(parser)


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_model_measures
    from lakehouse.errors import UsageError
    from ledger.engines import load_engines
    from workloads.ml.scoring import ENGINE, check_model_version, pinned_model
    from workloads.ml.tracking import check_reachable, tracking_for

    catalog = load_engines(args.engines)
    release = args.engine or EngineRelease(ENGINE)
    spec = resolve_release(catalog, release, at=datetime.now(UTC).date(), name_alone=True)
    if spec.name != ENGINE:
        raise UsageError(f"--engine {spec.ref} is not a {ENGINE} release")
    model, model_version = pinned_model(spec)
    tracking = tracking_for(ctx.config)
    check_reachable(tracking)
    check_model_version(tracking, model, model_version)
    if args.training_set is not None:  # a training set is its run: the ledger read before Spark starts
        ctx.require_run(args.training_set, what="--training-set", noun="training set")
    ctx.require_lakehouse()

    from workloads.ml.scoring import score
    from workloads.ml.tracking import open_tracking
    from workloads.ml.training import latest_training_set

    chosen = args.training_set or latest_training_set(ctx.registry)
    result = score(
        ctx.registry, ctx.ledger, ctx.clock, open_tracking(ctx.config), spec, chosen, progress=ctx.progress
    )
    lines = [
        f"scored {result.scored} decisions of {result.training_set_id} under {result.engine} "
        f"({result.model} v{result.model_version}), run {result.run_id}",
        f"{result.table}@{result.version}: {result.inserted} inserted, {result.rescored} rescored "
        f"(earlier rows superseded), {result.unchanged} unchanged; content hash {result.content_hash[:16]}",
        "on the later decisions: "
        + (
            render_model_measures(result.measures, result.measures.better_than_references())
            if result.measures
            else "not measured (too few outcomes)"
        ),
    ]
    return Outcome(data=result, lines=lines)


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
