"""Calibration of probabilities against later outcomes: how far they are off, and a fitted fix.

A probability ``p`` (a correlation's confidence, a model's score) is *calibrated* when, of
all the cases given ``p ≈ 0.7``, about 70 % later turn out positive. This module measures
that against binary outcomes ``y`` (1 = it turned out true, 0 = it did not), and fits a
calibrator that maps ``p`` to a better probability. Plain values in, frozen dataclasses
out, each with ``as_dict()`` for a ledger entry or a reports table: no Spark, no MLflow.

Scores
------
* **Brier score**: ``mean((p - y)²)``; 0 is perfect, 0.25 is a constant guess of 0.5.
* **Log loss**: ``-mean(y·ln p + (1-y)·ln(1-p))`` with ``p`` clipped to
  ``[LOG_LOSS_EPS, 1 - LOG_LOSS_EPS]`` so that a confident miss costs a finite
  ``-ln(LOG_LOSS_EPS) ≈ 36`` rather than infinity (the clip of scikit-learn 1.9's
  ``log_loss``, float64's machine epsilon).
* **Expected calibration error**: ``ECE = Σ_b (n_b / N)·|ȳ_b − p̄_b|`` over the non-empty
  bins ``b``, where ``n_b`` is the bin's count, ``ȳ_b`` its fraction of positives and
  ``p̄_b`` its mean predicted probability. scikit-learn has no ECE (scikit-learn#18268).

Bins (``n_bins = B``, 10 by default)
------------------------------------
* **uniform** (equal width): edges ``e_k = k / B`` for ``k = 0..B``, each computed as one
  division so that it is the float nearest ``k / B`` (a probability written ``0.3`` lies on
  the edge ``3 / 10``; ``np.linspace`` would give ``0.30000000000000004``). Bin ``k``
  holds ``e_k <= p < e_{k+1}``; the last bin also holds ``p = 1.0``. For ``B = 10``:
  ``[0, 0.1), [0.1, 0.2), …, [0.9, 1.0]``. scikit-learn's
  ``calibration_curve(strategy="uniform")`` puts a probability lying exactly on an
  interior edge in the bin *below*; both agree when no probability lies on an interior edge.
* **quantile** (equal mass), as ``calibration_curve(strategy="quantile")``: edges
  ``e_k = np.percentile(p, 100·k / B)`` (numpy's default linear interpolation), and a
  probability's bin is ``np.searchsorted(e[1:-1], p)`` (``side="left"``): bin 0 is
  ``[e_0, e_1]``, bin ``k > 0`` is ``(e_k, e_{k+1}]``, so a probability equal to an edge goes
  to the lower bin. *Ties*: many equal probabilities make edges repeat; a bin between two
  equal edges, ``(e_k, e_k]``, is empty, and every probability equal to a repeated edge lands
  in the lowest bin whose upper edge it is. Such bins stay in the table with count 0, so
  a table always has ``B`` rows; the ECE skips them, exactly as ``calibration_curve`` drops
  them.

Each bin of a reliability table carries a 95 % **Wilson score interval** for its fraction
of positives (see :func:`wilson_interval`); a bin with count 0 has ``None`` for its means
and interval.

Calibrators
-----------
Two candidates, chosen by cross-validated Brier score (see :func:`fit_calibrator`):
*isotonic* regression of ``y`` on ``p`` (monotone, step-shaped, needs more outcomes) and
*Platt* scaling, a logistic regression of ``y`` on ``logit(p)`` (two parameters, smooth).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any, Literal, get_args

import numpy as np
import numpy.typing as npt
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from sklearn.isotonic import IsotonicRegression  # type: ignore[import-untyped, unused-ignore]
from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped, unused-ignore]
from sklearn.model_selection import StratifiedKFold  # type: ignore[import-untyped, unused-ignore]

from lakehouse.errors import UsageError

__all__ = [
    "CV_FOLDS",
    "CV_SEED",
    "DEFAULT_BINS",
    "LOG_LOSS_EPS",
    "MIN_OUTCOMES_PER_CLASS",
    "MIN_OUTCOMES_PER_SCOPE",
    "PLATT_CLIP",
    "WILSON_CONFIDENCE",
    "BinStrategy",
    "CalibrationMethod",
    "CalibrationReport",
    "FittedCalibrator",
    "ReliabilityBin",
    "brier_score",
    "calibration_report",
    "expected_calibration_error",
    "fit_calibrator",
    "log_loss",
    "reliability_figure",
    "reliability_table",
    "save_reliability_png",
    "wilson_interval",
]

logger = logging.getLogger(__name__)

BinStrategy = Literal["uniform", "quantile"]
CalibrationMethod = Literal["isotonic", "platt"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Probabilities = Sequence[float] | npt.NDArray[Any]
"""Probabilities in [0, 1]: a sequence of floats or a one-dimensional numpy array."""
Outcomes = Sequence[int] | npt.NDArray[Any]
"""Binary outcomes, 0 or 1 (bools and 0.0/1.0 are accepted): a sequence or a 1-D array."""

DEFAULT_BINS = 10
LOG_LOSS_EPS = float(np.finfo(np.float64).eps)
"""Log loss clips probabilities to ``[LOG_LOSS_EPS, 1 - LOG_LOSS_EPS]`` (≈ 2.2e-16, as
scikit-learn 1.9 does; its former default was 1e-15)."""
WILSON_CONFIDENCE = 0.95

MIN_OUTCOMES_PER_SCOPE = 30
"""Fewest outcomes a calibrator is fitted on (per scope: one correlation type, one model).

Below about 30 outcomes the measurement itself is too loose to act on: a fraction of
positives near 0.5 measured on 30 outcomes has a 95 % Wilson interval of about ±0.17
(±0.13 at 50), as wide as the miscalibration one would want to correct. 30 rather than
50 because a correlation type of a few hundred entities yields a few dozen decisions,
and the minimum is only the first guard: the caller registers a calibrator only when its
cross-validated Brier beats the uncalibrated one (:meth:`FittedCalibrator.improves`), so a
fit that learnt noise is measured and refused, not shipped."""
MIN_OUTCOMES_PER_CLASS = 10
"""Fewest positives, and fewest negatives, a calibrator is fitted on.

With :data:`CV_FOLDS` = 5 stratified folds, 10 of the rarer class put 2 in every held-out
fold and 8 in every training fold: each fold's Brier score sees both classes, and each
training fold has more than a handful of the rarer class to place isotonic steps or a
Platt slope with. 50 outcomes of which 2 are positive is a base rate, not a calibration."""
CV_FOLDS = 5
CV_SEED = 20240611
"""Seed of the stratified fold shuffle: the same outcomes always give the same folds, so
the same choice of calibrator."""
PLATT_CLIP = 1e-6
"""Platt scaling clips probabilities to ``[PLATT_CLIP, 1 - PLATT_CLIP]`` before the logit,
so that confidences of exactly 0 or 1 become ±13.8 rather than infinite."""

_WILSON_Z = NormalDist().inv_cdf(0.5 + WILSON_CONFIDENCE / 2)
_METHODS: tuple[CalibrationMethod, ...] = get_args(CalibrationMethod)
_SIMPLER_FIRST: tuple[CalibrationMethod, ...] = ("platt", "isotonic")
"""The order in which a tie of cross-validated Brier scores is broken."""


# --- input checks --------------------------------------------------------------------------


def _probabilities(p: Probabilities) -> FloatArray:
    """``p`` as a 1-D float array, refused unless every value is a number in [0, 1]."""
    try:
        values = np.asarray(p, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"probabilities must be numbers in [0, 1]: {exc}") from exc
    if values.ndim != 1:
        raise UsageError(f"probabilities must be one-dimensional, got shape {values.shape}")
    nan = np.flatnonzero(np.isnan(values))
    if nan.size:
        raise UsageError(f"probabilities contain {nan.size} NaN value(s), the first at position {nan[0]}")
    outside = np.flatnonzero((values < 0.0) | (values > 1.0))
    if outside.size:
        first = int(outside[0])
        raise UsageError(
            f"probabilities must lie in [0, 1]: {outside.size} do not, "
            f"the first is {float(values[first])!r} at position {first}"
        )
    return values


def _outcomes(y: Outcomes) -> IntArray:
    """``y`` as a 1-D int array, refused unless every value is 0 or 1."""
    try:
        values = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"outcomes must be 0 or 1: {exc}") from exc
    if values.ndim != 1:
        raise UsageError(f"outcomes must be one-dimensional, got shape {values.shape}")
    wrong = np.flatnonzero((values != 0.0) & (values != 1.0))
    if wrong.size:
        first = int(wrong[0])
        raise UsageError(
            f"outcomes must be 0 or 1: {wrong.size} are not, "
            f"the first is {float(values[first])!r} at position {first}"
        )
    return values.astype(np.int64)


def _checked(y: Outcomes, p: Probabilities) -> tuple[IntArray, FloatArray]:
    """Outcomes and probabilities checked together: same length, not empty."""
    outcomes, probabilities = _outcomes(y), _probabilities(p)
    if outcomes.size != probabilities.size:
        raise UsageError(
            f"outcomes and probabilities differ in length: {outcomes.size} outcomes, "
            f"{probabilities.size} probabilities"
        )
    if outcomes.size == 0:
        raise UsageError("no outcomes to measure calibration against: the input is empty")
    return outcomes, probabilities


def _checked_bins(n_bins: int) -> int:
    if isinstance(n_bins, bool) or not isinstance(n_bins, int) or n_bins < 1:
        raise UsageError(f"the number of bins must be a positive integer, got {n_bins!r}")
    return n_bins


# --- scores --------------------------------------------------------------------------------


def brier_score(y: Outcomes, p: Probabilities) -> float:
    """Mean squared difference between probability and outcome: 0 is perfect, lower is better."""
    outcomes, probabilities = _checked(y, p)
    return float(np.mean((probabilities - outcomes) ** 2))


def log_loss(y: Outcomes, p: Probabilities) -> float:
    """Mean negative log-likelihood of the outcomes, with ``p`` clipped to
    ``[LOG_LOSS_EPS, 1 - LOG_LOSS_EPS]`` so a confident miss costs about 36, not infinity."""
    outcomes, probabilities = _checked(y, p)
    clipped = np.clip(probabilities, LOG_LOSS_EPS, 1.0 - LOG_LOSS_EPS)
    return float(-np.mean(np.where(outcomes == 1, np.log(clipped), np.log1p(-clipped))))


def wilson_interval(positives: int, count: int) -> tuple[float, float]:
    """95 % Wilson score interval for a fraction ``positives / count`` (``count >= 1``).

    With ``p̂ = positives / count``, ``n = count`` and ``z = Φ⁻¹(0.975) ≈ 1.959964``::

        centre = (p̂ + z² / 2n) / (1 + z² / n)
        half   = z / (1 + z² / n) · √(p̂(1 − p̂) / n + z² / 4n²)
        interval = [centre − half, centre + half]

    Unlike the normal approximation ``p̂ ± z√(p̂(1−p̂)/n)`` it stays inside [0, 1] and does
    not collapse to a point when a small bin is all positive or all negative.
    """
    if count < 1 or not 0 <= positives <= count:
        raise UsageError(
            f"a Wilson interval needs 0 <= positives <= count and count >= 1, got {positives}/{count}"
        )
    fraction = positives / count
    z2 = _WILSON_Z * _WILSON_Z
    denominator = 1.0 + z2 / count
    centre = (fraction + z2 / (2 * count)) / denominator
    half = _WILSON_Z / denominator * math.sqrt(fraction * (1.0 - fraction) / count + z2 / (4 * count * count))
    low = 0.0 if positives == 0 else max(0.0, centre - half)  # exactly 0 and 1 at the ends, not ±1e-17
    high = 1.0 if positives == count else min(1.0, centre + half)
    return low, high


# --- bins ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReliabilityBin:
    """One bin of a reliability table: which probabilities it holds, how many, and how
    their mean compares with the fraction that turned out positive. The means and the
    interval are ``None`` when the bin is empty."""

    strategy: BinStrategy
    index: int
    lower: float
    upper: float
    count: int
    positives: int
    mean_predicted: float | None
    fraction_positive: float | None
    fraction_positive_low: float | None
    fraction_positive_high: float | None

    @property
    def gap(self) -> float | None:
        """``|fraction_positive − mean_predicted|``, the bin's share of the ECE per outcome."""
        if self.mean_predicted is None or self.fraction_positive is None:
            return None
        return abs(self.fraction_positive - self.mean_predicted)

    def as_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "index": self.index,
            "lower": self.lower,
            "upper": self.upper,
            "count": self.count,
            "positives": self.positives,
            "mean_predicted": self.mean_predicted,
            "fraction_positive": self.fraction_positive,
            "fraction_positive_low": self.fraction_positive_low,
            "fraction_positive_high": self.fraction_positive_high,
        }


def _bin_edges(p: FloatArray, n_bins: int, strategy: BinStrategy) -> FloatArray:
    if strategy == "uniform":
        return np.arange(n_bins + 1, dtype=np.float64) / n_bins
    if strategy == "quantile":
        return np.percentile(p, np.linspace(0.0, 1.0, n_bins + 1) * 100).astype(np.float64)
    raise UsageError(f"unknown bin strategy {strategy!r}: use one of {list(get_args(BinStrategy))}")


def _bin_ids(p: FloatArray, edges: FloatArray, strategy: BinStrategy) -> IntArray:
    """Each probability's bin, as the module docstring defines it for ``strategy``."""
    side: Literal["left", "right"] = "right" if strategy == "uniform" else "left"
    return np.searchsorted(edges[1:-1], p, side=side).astype(np.int64)


def _reliability_bin(
    strategy: BinStrategy, index: int, edges: FloatArray, y: IntArray, p: FloatArray
) -> ReliabilityBin:
    count, positives = int(y.size), int(y.sum())
    lower, upper = float(edges[index]), float(edges[index + 1])
    if count == 0:
        return ReliabilityBin(strategy, index, lower, upper, 0, 0, None, None, None, None)
    low, high = wilson_interval(positives, count)
    return ReliabilityBin(
        strategy, index, lower, upper, count, positives, float(p.mean()), positives / count, low, high
    )


def _table(y: IntArray, p: FloatArray, n_bins: int, strategy: BinStrategy) -> tuple[ReliabilityBin, ...]:
    edges = _bin_edges(p, n_bins, strategy)
    ids = _bin_ids(p, edges, strategy)
    return tuple(
        _reliability_bin(strategy, index, edges, y[ids == index], p[ids == index]) for index in range(n_bins)
    )


def _ece(bins: Sequence[ReliabilityBin]) -> float:
    total = sum(b.count for b in bins)
    return float(sum(b.count / total * b.gap for b in bins if b.gap is not None))


def reliability_table(
    y: Outcomes, p: Probabilities, *, n_bins: int = DEFAULT_BINS, strategy: BinStrategy = "uniform"
) -> tuple[ReliabilityBin, ...]:
    """The ``n_bins`` bins of ``strategy`` (see the module docstring), empty ones included."""
    outcomes, probabilities = _checked(y, p)
    return _table(outcomes, probabilities, _checked_bins(n_bins), strategy)


def expected_calibration_error(
    y: Outcomes, p: Probabilities, *, n_bins: int = DEFAULT_BINS, strategy: BinStrategy = "uniform"
) -> float:
    """``Σ_b (n_b / N)·|ȳ_b − p̄_b|`` over the non-empty bins of ``strategy``: the mean
    distance, per outcome, between what was predicted and what happened in its bin."""
    return _ece(reliability_table(y, p, n_bins=n_bins, strategy=strategy))


@dataclass(frozen=True)
class CalibrationReport:
    """How well probabilities matched later outcomes: the scores and both reliability tables."""

    n: int
    positives: int
    brier: float
    log_loss: float
    ece_uniform: float
    ece_quantile: float
    n_bins: int
    bins_uniform: tuple[ReliabilityBin, ...]
    bins_quantile: tuple[ReliabilityBin, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "positives": self.positives,
            "brier": self.brier,
            "log_loss": self.log_loss,
            "ece_uniform": self.ece_uniform,
            "ece_quantile": self.ece_quantile,
            "n_bins": self.n_bins,
            "bins_uniform": [b.as_dict() for b in self.bins_uniform],
            "bins_quantile": [b.as_dict() for b in self.bins_quantile],
        }


def calibration_report(y: Outcomes, p: Probabilities, *, n_bins: int = DEFAULT_BINS) -> CalibrationReport:
    """Brier score, log loss, and ECE with reliability tables for both bin strategies."""
    outcomes, probabilities = _checked(y, p)
    n_bins = _checked_bins(n_bins)
    uniform = _table(outcomes, probabilities, n_bins, "uniform")
    quantile = _table(outcomes, probabilities, n_bins, "quantile")
    return CalibrationReport(
        n=int(outcomes.size),
        positives=int(outcomes.sum()),
        brier=brier_score(outcomes, probabilities),
        log_loss=log_loss(outcomes, probabilities),
        ece_uniform=_ece(uniform),
        ece_quantile=_ece(quantile),
        n_bins=n_bins,
        bins_uniform=uniform,
        bins_quantile=quantile,
    )


# --- calibrators ---------------------------------------------------------------------------


def _platt_feature(p: FloatArray) -> FloatArray:
    """The single feature the Platt estimator is fitted on: ``logit(p)`` as an (n, 1) column."""
    clipped = np.clip(p, PLATT_CLIP, 1.0 - PLATT_CLIP)
    return (np.log(clipped) - np.log1p(-clipped)).reshape(-1, 1)


def _unfitted(method: CalibrationMethod) -> Any:
    if method == "isotonic":
        return IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0)
    return LogisticRegression()


def _fitted(method: CalibrationMethod, y: IntArray, p: FloatArray) -> Any:
    estimator = _unfitted(method)
    if method == "isotonic":
        return estimator.fit(p, y)
    return estimator.fit(_platt_feature(p), y)


def _raw_prediction(method: CalibrationMethod, estimator: Any, p: FloatArray) -> Any:
    if method == "isotonic":
        return estimator.predict(p)
    return estimator.predict_proba(_platt_feature(p))[:, 1]


def _calibrated(method: CalibrationMethod, estimator: Any, p: FloatArray) -> FloatArray:
    return np.clip(np.asarray(_raw_prediction(method, estimator, p), dtype=np.float64), 0.0, 1.0)


def _fold_count(y: IntArray, folds: int) -> int:
    """``folds``, or fewer when the rarer class has fewer members (each fold needs one)."""
    rarer = int(min(y.sum(), y.size - y.sum()))
    if rarer < folds:
        logger.info(
            "calibration: %d folds asked, the rarer class has %d outcomes; using %d", folds, rarer, rarer
        )
    return min(folds, rarer)


def _out_of_fold(method: CalibrationMethod, y: IntArray, p: FloatArray, folds: int) -> FloatArray:
    """Out-of-fold calibrated probabilities: each outcome predicted by a calibrator fitted
    without it (stratified, shuffled folds, seed :data:`CV_SEED`)."""
    held_out = np.empty_like(p)
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=CV_SEED)
    for train, test in splitter.split(p.reshape(-1, 1), y):
        held_out[test] = _calibrated(method, _fitted(method, y[train], p[train]), p[test])
    return held_out


def _refuse_too_few(y: IntArray) -> None:
    n, positives = int(y.size), int(y.sum())
    negatives = n - positives
    if n < MIN_OUTCOMES_PER_SCOPE or min(positives, negatives) < MIN_OUTCOMES_PER_CLASS:
        raise UsageError(
            f"too few outcomes to fit a calibrator: found {n} outcomes ({positives} positives, "
            f"{negatives} negatives); the minimum is {MIN_OUTCOMES_PER_SCOPE} outcomes with at least "
            f"{MIN_OUTCOMES_PER_CLASS} positives and {MIN_OUTCOMES_PER_CLASS} negatives"
        )


@dataclass(frozen=True, eq=False)
class FittedCalibrator:
    """A calibrator fitted on outcomes, and the evidence for choosing it.

    ``estimator`` is a plain scikit-learn estimator, so that it can be logged as it is:
    an ``IsotonicRegression`` whose input is ``p`` itself, or (Platt) a ``LogisticRegression``
    whose single feature is ``logit(p)`` with ``p`` clipped to ``[PLATT_CLIP, 1 − PLATT_CLIP]``.
    :meth:`predict` applies that transformation; anyone using the estimator directly must too.
    """

    method: CalibrationMethod
    estimator: Any
    cv_brier: Mapping[CalibrationMethod, float]
    uncalibrated_brier: float
    n: int
    positives: int
    folds: int
    held_out: FloatArray
    """The chosen method's out-of-fold predictions, in input order: what an honest "after"
    report measures (the refitted calibrator has seen every outcome)."""

    def predict(self, p: Probabilities) -> FloatArray:
        """Calibrated probabilities in [0, 1], one per probability given."""
        return _calibrated(self.method, self.estimator, _probabilities(p))

    def improves(self) -> bool:
        """Whether the chosen method's cross-validated Brier beats the probabilities as they are."""
        return self.cv_brier[self.method] < self.uncalibrated_brier

    def declared_map(self) -> dict[str, Any]:
        """The whole learnt map as plain numbers, for an engine that applies it without the
        estimator: Platt's slope, intercept and clip, or the isotonic thresholds (``x`` -> ``y``,
        linear between them, constant outside)."""
        if self.method == "platt":
            return {"method": "platt", **self.parameters(), "clip": PLATT_CLIP}
        return {
            "method": "isotonic",
            "x": [float(x) for x in self.estimator.X_thresholds_],
            "y": [float(y) for y in self.estimator.y_thresholds_],
        }

    def parameters(self) -> dict[str, float | int]:
        """What the fitted estimator learnt, in a few numbers: Platt's slope and intercept
        on ``logit(p)``, or how many steps the isotonic map has."""
        if self.method == "platt":
            return {
                "slope": float(self.estimator.coef_[0][0]),
                "intercept": float(self.estimator.intercept_[0]),
            }
        return {"thresholds": len(self.estimator.X_thresholds_)}

    def as_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "cv_brier": {method: self.cv_brier[method] for method in _METHODS},
            "uncalibrated_brier": self.uncalibrated_brier,
            "n": self.n,
            "positives": self.positives,
            "folds": self.folds,
            "cv_seed": CV_SEED,
            "parameters": self.parameters(),
        }


def fit_calibrator(y: Outcomes, p: Probabilities, *, folds: int = CV_FOLDS) -> FittedCalibrator:
    """Fit isotonic and Platt calibrators of ``p`` to ``y`` and keep the better one.

    "Better" is the lower Brier score of out-of-fold predictions over ``folds`` stratified,
    shuffled folds (seed :data:`CV_SEED`); a tie goes to Platt, the simpler map. The
    chosen method is then refitted on all outcomes. ``folds`` shrinks to the size of the
    rarer class when that is smaller. Platt regresses on ``logit(p)`` rather than on ``p``:
    ``sigmoid(a·logit(p) + b)`` is the identity at ``a = 1, b = 0``, so probabilities that
    are already calibrated stay as they are, and a systematic over- or under-confidence is
    a slope, whereas a logistic curve in ``p`` cannot even represent "leave it alone".
    Its L2 penalty is scikit-learn's default (``C = 1``), negligible against 50 or more
    outcomes yet enough to keep the slope finite when the classes are perfectly separated.

    Refused with :class:`~lakehouse.errors.UsageError` below :data:`MIN_OUTCOMES_PER_SCOPE`
    outcomes or :data:`MIN_OUTCOMES_PER_CLASS` of either class. Deterministic.
    """
    outcomes, probabilities = _checked(y, p)
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise UsageError(f"cross-validation needs at least 2 folds, got {folds!r}")
    _refuse_too_few(outcomes)
    used_folds = _fold_count(outcomes, folds)
    held_out = {method: _out_of_fold(method, outcomes, probabilities, used_folds) for method in _METHODS}
    cv_brier = {method: float(np.mean((held_out[method] - outcomes) ** 2)) for method in _METHODS}
    method = min(_SIMPLER_FIRST, key=lambda candidate: cv_brier[candidate])
    logger.info(
        "calibration: %s chosen on %d outcomes (cross-validated Brier: isotonic %.5f, platt %.5f)",
        method,
        outcomes.size,
        cv_brier["isotonic"],
        cv_brier["platt"],
    )
    return FittedCalibrator(
        method=method,
        estimator=_fitted(method, outcomes, probabilities),
        cv_brier=cv_brier,
        uncalibrated_brier=brier_score(outcomes, probabilities),
        n=int(outcomes.size),
        positives=int(outcomes.sum()),
        folds=used_folds,
        held_out=held_out[method],
    )


# --- figures -------------------------------------------------------------------------------


def _plot_reliability(
    curve: Axes, histogram: Axes, report: CalibrationReport, label: str, colour: str
) -> None:
    filled = [b for b in report.bins_uniform if b.count]
    means = np.array([b.mean_predicted for b in filled], dtype=np.float64)
    fractions = np.array([b.fraction_positive for b in filled], dtype=np.float64)
    lows = np.array([b.fraction_positive_low for b in filled], dtype=np.float64)
    highs = np.array([b.fraction_positive_high for b in filled], dtype=np.float64)
    curve.errorbar(
        means,
        fractions,
        yerr=np.vstack([fractions - lows, highs - fractions]),
        marker="o",
        capsize=3,
        color=colour,
        label=f"{label}: ECE {report.ece_uniform:.3f}, Brier {report.brier:.3f}",
    )
    histogram.bar(
        [b.lower for b in report.bins_uniform],
        [b.count for b in report.bins_uniform],
        width=[b.upper - b.lower for b in report.bins_uniform],
        align="edge",
        alpha=0.45,
        color=colour,
        edgecolor=colour,
        label=label,
    )


def reliability_figure(
    before: CalibrationReport,
    after: CalibrationReport | None = None,
    title: str = "Reliability",
    *,
    labels: tuple[str, str] = ("before", "after"),
) -> Figure:
    """A reliability diagram of the equal-width bins: mean predicted probability against
    fraction positive with 95 % Wilson intervals, and the diagonal of perfect calibration;
    underneath, the histogram of predicted probabilities (the bins' counts). With ``after``,
    both on the same axes; the legend gives each one's ECE (equal-width) and Brier score.

    The figure is drawn on an Agg canvas and never handed to ``pyplot``: nothing global
    holds it, so it needs no closing and is freed with its last reference.
    """
    figure = Figure(figsize=(6.4, 7.2), layout="constrained")
    FigureCanvasAgg(figure)
    curve, histogram = figure.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    curve.plot([0, 1], [0, 1], linestyle=":", color="grey", label="perfectly calibrated")
    _plot_reliability(curve, histogram, before, labels[0], "tab:blue")
    if after is not None:
        _plot_reliability(curve, histogram, after, labels[1], "tab:orange")
    curve.set(xlim=(0, 1), ylim=(0, 1), ylabel="fraction positive", title=title)
    curve.legend(loc="upper left")
    histogram.set(xlabel="predicted probability", ylabel="count")
    return figure


def save_reliability_png(figure: Figure, path: str | os.PathLike[str]) -> Path:
    """Write ``figure`` as a PNG at ``path`` (its folder must exist) and return the path."""
    target = Path(path)
    figure.savefig(target, format="png", dpi=100)
    logger.info("calibration: reliability diagram written to %s", target)
    return target
