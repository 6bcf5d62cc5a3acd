"""The fraud model of ``lakehouse train``: a time-ordered split, the fit, and its measures.

**Library: scikit-learn, not Spark ML.** A training set has one row per decision point (an
order), a few hundred thousand rows at the 1M-event scale: it fits on the driver, and the
model most teams deploy and inspect is a scikit-learn one. The estimator is
``HistGradientBoostingClassifier``: it handles the missing features a point-in-time join
produces (no baseline yet, no correlation) natively, so "not known then" stays distinct
from zero instead of being imputed. A set beyond the driver's memory is the point where
Spark ML's ``GBTClassifier`` would take over; none is that large here.

**Honest measures.** The split is by decision time: the model is fitted on the earliest
:data:`TRAIN_FRACTION` of decisions and measured on the later ones, as it would be used.
ROC AUC, PR AUC (average precision) and Brier are measured on that held-out part, and
judged against two references measured on the same rows: the base rate (the Brier of
always predicting the training positive rate) and the correlation engine's own
confidence used as a score (``max_confidence``, 0 where there is none). A model that does
not beat them is different, not better, and the report says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from lakehouse.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd
    from sklearn.ensemble import HistGradientBoostingClassifier

__all__ = [
    "HYPERPARAMETERS",
    "MIN_TRAINING_POSITIVES",
    "TRAIN_FRACTION",
    "ModelMetrics",
    "fit_fraud_model",
    "measure",
    "time_split",
]

TRAIN_FRACTION: Final = 0.8
"""Share of decisions (earliest first) the model is fitted on; the rest measure it."""
MIN_TRAINING_POSITIVES: Final = 5
"""Fewer positive decisions than this in either part and a fit or a measure means nothing: refused."""
HYPERPARAMETERS: Final[dict[str, Any]] = {
    "max_iter": 200,
    "learning_rate": 0.05,
    "max_leaf_nodes": 15,
    "l2_regularization": 1.0,
    "random_state": 0,
}
"""Fixed, so the same training set gives the same model (no early stopping: its split is random)."""
TRUSTED_TYPES: Final[tuple[str, ...]] = ("sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",)
"""Types skops must be told to trust when MLflow saves the model (we wrote the file ourselves)."""


@dataclass(frozen=True)
class ModelMetrics:
    """How well scores rank and predict held-out outcomes, beside the two references."""

    rows: int
    positives: int
    roc_auc: float | None
    """None when the held-out part has a single class (the measure is undefined)."""
    pr_auc: float | None
    brier: float
    base_rate_brier: float
    confidence_roc_auc: float | None
    """ROC AUC of the correlation confidence alone on the same rows."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def better_than_references(self) -> bool:
        """Beats the base rate's Brier and the confidence's ranking (where that is defined)."""
        ranks = self.roc_auc is not None and (
            self.confidence_roc_auc is None or self.roc_auc > self.confidence_roc_auc
        )
        return ranks and self.brier < self.base_rate_brier


def time_split(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The earliest :data:`TRAIN_FRACTION` of decisions, and the rest (ties stay together)."""
    ordered = frame.sort_values(["decision_time", "decision_id"], kind="mergesort").reset_index(drop=True)
    if ordered.empty:
        raise UsageError("the training set has no rows: nothing to train on")
    cut_time = ordered["decision_time"].iloc[min(int(len(ordered) * TRAIN_FRACTION), len(ordered) - 1)]
    train = ordered[ordered["decision_time"] < cut_time]
    test = ordered[ordered["decision_time"] >= cut_time]
    for part, rows in (("training", train), ("held-out", test)):
        positives = int(rows["label"].sum())
        if positives < MIN_TRAINING_POSITIVES:
            raise UsageError(
                f"the {part} part of the training set has {positives} positive decision(s) of "
                f"{len(rows)}; at least {MIN_TRAINING_POSITIVES} are needed "
                f"(a wider date range, a longer --label-horizon or a later --at)"
            )
    return train, test


def features_of(frame: pd.DataFrame, columns: tuple[str, ...]) -> np.ndarray:
    """The feature matrix in a fixed column order, missing values as NaN."""
    matrix: np.ndarray = frame.loc[:, list(columns)].astype("float64").to_numpy()
    return matrix


def fit_fraud_model(frame: pd.DataFrame, columns: tuple[str, ...]) -> HistGradientBoostingClassifier:
    """Fit the model on ``frame`` (deterministic: fixed hyperparameters and seed)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    model = HistGradientBoostingClassifier(**HYPERPARAMETERS)
    model.fit(features_of(frame, columns), frame["label"].astype(int).to_numpy())
    return model


def _auc(y: np.ndarray, scores: np.ndarray) -> float | None:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, scores)) if 0 < y.sum() < len(y) else None


def measure(y: np.ndarray, scores: np.ndarray, confidence: np.ndarray, base_rate: float) -> ModelMetrics:
    """The held-out measures of ``scores`` against outcomes ``y`` (0/1)."""
    from sklearn.metrics import average_precision_score, brier_score_loss

    both = 0 < y.sum() < len(y)
    return ModelMetrics(
        rows=len(y),
        positives=int(y.sum()),
        roc_auc=_auc(y, scores),
        pr_auc=float(average_precision_score(y, scores)) if both else None,
        brier=float(brier_score_loss(y, scores)),
        base_rate_brier=float(brier_score_loss(y, np.full(len(y), base_rate))),
        confidence_roc_auc=_auc(y, confidence),
    )
