"""``lakehouse train``: fit the fraud model on one training set, track it, register it.

A recorded run reads exactly one training set (``gold.training_sets`` at its version, rows of
one ``training_set_id``), fits :func:`workloads.ml.model.fit_fraud_model` on its earlier
decisions, measures it on the later ones against the references, and logs to MLflow the
parameters, the metrics, the ROC / precision-recall / reliability plots, the model and the
training set as a dataset input; the model is registered as a new version of
:func:`model_name`. The ledger's ``run_finished`` counts carry that model version, its
``run_started`` the MLflow run id; the MLflow run carries the ledger run id.

A registered version enters a scoring engine's identity through ``model_versions`` in
``conf/engines.yaml``: a retrained model is a new engine version, and rescoring history
under it is an ordinary replay.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

import numpy as np

from lakehouse.errors import UsageError
from lakehouse.tables.base import sql_literal
from workloads.ml import model as fraud
from workloads.ml.point_in_time import FEATURE_COLUMNS
from workloads.ml.tracking import Tracking, mlflow_run
from workloads.runs import new_run_id, recorded_run
from workloads.vocabulary import TableName

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from lakehouse.tables import TableRegistry
    from ledger import Clock, Ledger

__all__ = ["MODEL", "TrainedModel", "latest_training_set", "model_name", "train_model"]

log = logging.getLogger(__name__)

MODEL: Final = "fraud-score"
"""The registered model's base name (:func:`model_name` adds the lakehouse instance)."""


def model_name(tracking: Tracking) -> str:
    """The registered fraud model of this lakehouse (``fraud-score``, per instance)."""
    return tracking.registered_name(MODEL)


@dataclass(frozen=True)
class TrainedModel:
    """One fitted, measured and registered model."""

    run_id: str
    training_set_id: str
    training_set_version: int
    model_name: str
    model_version: int
    model_uri: str
    mlflow_run_id: str
    train_rows: int
    metrics: fraud.ModelMetrics
    better_than_references: bool


def latest_training_set(registry: TableRegistry) -> str:
    """The id of the newest training set (``lakehouse train`` without ``--training-set``)."""
    from pyspark.sql import functions as F

    table = registry.get(TableName.TRAINING_SETS)
    if not table.exists():
        raise UsageError("no training set yet: build one with `lakehouse training-set --at T`")
    newest = table.read().agg(F.max("training_set_id")).first()
    if newest is None or newest[0] is None:
        raise UsageError("no training set yet: build one with `lakehouse training-set --at T`")
    return str(newest[0])


def _training_frame(registry: TableRegistry, training_set_id: str) -> tuple[pd.DataFrame, int, str]:
    from pyspark.sql import functions as F

    table = registry.get(TableName.TRAINING_SETS)
    version = table.current_version() if table.exists() else None
    if version is None:
        raise UsageError("no training set yet: build one with `lakehouse training-set --at T`")
    rows = table.read(as_of=version).where(F.col("training_set_id") == training_set_id)
    frame = cast(
        "pd.DataFrame", rows.select("decision_id", "decision_time", *FEATURE_COLUMNS, "label").toPandas()
    )
    if frame.empty:
        raise UsageError(f"--training-set {training_set_id}: no such training set in {table.name}@{version}")
    source = (
        f"SELECT * FROM {table.sql_name} VERSION AS OF {version} "
        f"WHERE training_set_id = {sql_literal(training_set_id)}"
    )
    return frame, version, source


def train_model(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    tracking: Tracking,
    training_set_id: str,
    progress: Callable[[str], None] | None = None,
) -> TrainedModel:
    """Fit, measure, track and register the fraud model on one training set."""
    import mlflow
    import mlflow.sklearn
    from mlflow.data.pandas_dataset import from_pandas

    say = progress or (lambda _message: None)
    frame, version, source = _training_frame(registry, training_set_id)
    train, test = fraud.time_split(frame)
    started = clock.now()
    run_id = new_run_id("train", started, salt=training_set_id)
    name = model_name(tracking)
    with (
        mlflow_run(tracking, ledger_run_id=run_id, kind="train") as tracked,
        recorded_run(
            ledger,
            run_id=run_id,
            command="train",
            purpose="training",
            inputs={TableName.TRAINING_SETS.value: version},
            parameters={
                "training_set_id": training_set_id,
                "model": name,
                "estimator": "sklearn.ensemble.HistGradientBoostingClassifier",
                "hyperparameters": fraud.HYPERPARAMETERS,
                "train_fraction": fraud.TRAIN_FRACTION,
                "mlflow_run_id": tracked.info.run_id,
            },
        ) as run,
    ):
        say(f"fitting on {len(train)} decisions, measuring on {len(test)} later ones")
        fitted = fraud.fit_fraud_model(train, FEATURE_COLUMNS)
        scores = fitted.predict_proba(fraud.features_of(test, FEATURE_COLUMNS))[:, 1]
        y = test["label"].astype(int).to_numpy()
        confidence = test["max_confidence"].fillna(0.0).to_numpy()
        metrics = fraud.measure(y, scores, confidence, float(train["label"].mean()))
        dataset = from_pandas(
            frame.drop(columns=["decision_id"]), source=source, name=training_set_id, targets="label"
        )
        mlflow.log_input(dataset, context="training", tags={"table": TableName.TRAINING_SETS.value})
        mlflow.log_params(_params(training_set_id, version, len(train), len(test)))
        mlflow.log_metrics({k: v for k, v in metrics.as_dict().items() if isinstance(v, float)})
        for path, figure in _figures(y, scores, confidence).items():
            mlflow.log_figure(figure, path)
        say("logging and registering the model")
        info = mlflow.sklearn.log_model(fitted, name="model", skops_trusted_types=list(fraud.TRUSTED_TYPES))
        registered = mlflow.register_model(info.model_uri, name)
        model_version = int(registered.version)
        mlflow.set_tag("registered_model", f"{name}/{model_version}")
        run.counts.update({"train_rows": len(train), "test_rows": len(test), "model_version": model_version})
    better = metrics.better_than_references()
    log.info(
        "model %s v%d: ROC AUC %s, Brier %.4f (base rate %.4f); better than the references: %s",
        name,
        model_version,
        metrics.roc_auc,
        metrics.brier,
        metrics.base_rate_brier,
        better,
    )
    return TrainedModel(
        run_id=run_id,
        training_set_id=training_set_id,
        training_set_version=version,
        model_name=name,
        model_version=model_version,
        model_uri=f"models:/{name}/{model_version}",
        mlflow_run_id=tracked.info.run_id,
        train_rows=len(train),
        metrics=metrics,
        better_than_references=better,
    )


def _params(training_set_id: str, version: int, train_rows: int, test_rows: int) -> dict[str, Any]:
    return {
        "training_set_id": training_set_id,
        "training_set_version": version,
        "train_rows": train_rows,
        "test_rows": test_rows,
        "features": ",".join(FEATURE_COLUMNS),
        **fraud.HYPERPARAMETERS,
    }


def _figures(y: np.ndarray, scores: np.ndarray, confidence: np.ndarray) -> dict[str, Figure]:
    """ROC and precision-recall curves of the model beside the confidence reference."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from sklearn.metrics import PrecisionRecallDisplay, RocCurveDisplay

    figures: dict[str, Figure] = {}
    if not 0 < y.sum() < len(y):
        return figures
    for path, display in (
        ("plots/roc.png", RocCurveDisplay),
        ("plots/precision_recall.png", PrecisionRecallDisplay),
    ):
        figure = Figure(figsize=(5, 4))
        ax = figure.subplots()
        display.from_predictions(y, scores, name="model", ax=ax)
        display.from_predictions(y, confidence, name="correlation confidence", ax=ax)
        figures[path] = figure
    return figures
