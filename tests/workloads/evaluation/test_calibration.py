"""Calibration scores, reliability tables, calibrator fitting and the reliability diagram.

Small cases are worked out by hand in the comments; large ones are synthetic samples with
fixed seeds, whose outcomes are drawn either from the probabilities themselves
(calibrated) or from their cubes (over-confident).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import numpy.typing as npt
import pytest
import sklearn.metrics
from matplotlib.figure import Figure
from sklearn.calibration import calibration_curve
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression

from lakehouse.errors import UsageError
from workloads.evaluation.calibration import (
    LOG_LOSS_EPS,
    MIN_OUTCOMES_PER_CLASS,
    MIN_OUTCOMES_PER_SCOPE,
    PLATT_CLIP,
    CalibrationReport,
    FittedCalibrator,
    ReliabilityBin,
    brier_score,
    calibration_report,
    expected_calibration_error,
    fit_calibrator,
    log_loss,
    reliability_figure,
    reliability_table,
    save_reliability_png,
    wilson_interval,
)

# Five outcomes, each in its own tenth of [0, 1].
Y = [0, 1, 0, 1, 1]
P = [0.1, 0.2, 0.6, 0.8, 0.9]

FloatArray = npt.NDArray[np.float64]
Sample = tuple[npt.NDArray[np.int64], FloatArray]


def sample(seed: int, n: int, truth: Any) -> Sample:
    """``n`` probabilities uniform on [0, 1], outcomes drawn with probability ``truth(p)``."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(size=n)
    return rng.binomial(1, truth(p)).astype(np.int64), p


def filled_means(table: Sequence[ReliabilityBin]) -> tuple[FloatArray, FloatArray]:
    """Fraction positive and mean predicted of the non-empty bins, as ``calibration_curve`` gives them."""
    filled = [b for b in table if b.count]
    fractions = np.array([b.fraction_positive for b in filled], dtype=np.float64)
    return fractions, np.array([b.mean_predicted for b in filled], dtype=np.float64)


@pytest.fixture(scope="module")
def calibrated() -> Sample:
    return sample(7, 20_000, lambda p: p)


@pytest.fixture(scope="module")
def overconfident() -> Sample:
    return sample(8, 20_000, lambda p: p**3)


# --- scores by hand ------------------------------------------------------------------------


def test_brier_and_log_loss_by_hand() -> None:
    # squared errors: 0.01 + 0.64 + 0.36 + 0.04 + 0.01 = 1.06, over 5 = 0.212
    assert brier_score(Y, P) == pytest.approx(0.212)
    # -ln of the probability given to what happened: 0.9, 0.2, 0.4, 0.8, 0.9
    expected = -(math.log(0.9) + math.log(0.2) + math.log(0.4) + math.log(0.8) + math.log(0.9)) / 5
    assert log_loss(Y, P) == pytest.approx(expected)
    assert expected == pytest.approx(0.591919, abs=1e-6)


def test_brier_and_log_loss_agree_with_sklearn(calibrated: Sample) -> None:
    y, p = calibrated
    assert brier_score(y, p) == pytest.approx(sklearn.metrics.brier_score_loss(y, p), rel=1e-12)
    assert log_loss(y, p) == pytest.approx(sklearn.metrics.log_loss(y, p), rel=1e-12)


def test_log_loss_clips_confident_misses() -> None:
    # p = 0 for a positive and p = 1 for a negative each cost -ln(eps), not infinity
    loss = log_loss([1, 0], [0.0, 1.0])
    assert loss == pytest.approx(-math.log(LOG_LOSS_EPS))
    assert loss == pytest.approx(sklearn.metrics.log_loss([1, 0], [0.0, 1.0]))
    assert log_loss([1, 0], [1.0, 0.0]) == pytest.approx(0.0, abs=1e-15)


def test_ece_uniform_by_hand() -> None:
    # two bins: [0, 0.5) holds p 0.1, 0.2 with y 0, 1: |0.5 - 0.15| = 0.35, weight 2/5;
    # [0.5, 1] holds p 0.6, 0.8, 0.9 with y 0, 1, 1: |2/3 - 23/30| = 0.1, weight 3/5
    assert expected_calibration_error(Y, P, n_bins=2) == pytest.approx(0.14 + 0.06)
    # ten bins, one point each: gaps 0.1, 0.8, 0.6, 0.2, 0.1 = 1.8, over 5 = 0.36
    assert expected_calibration_error(Y, P) == pytest.approx(0.36)


def test_ece_quantile_by_hand_puts_a_probability_on_an_edge_in_the_lower_bin() -> None:
    # edges at the 0th, 50th, 100th percentiles: 0.1, 0.6, 0.9; 0.6 lies on the edge and
    # goes below. Bin 0: p 0.1, 0.2, 0.6, y 0, 1, 0: |1/3 - 0.3| = 1/30, weight 3/5;
    # bin 1: p 0.8, 0.9, y 1, 1: |1 - 0.85| = 0.15, weight 2/5. ECE = 0.02 + 0.06 = 0.08
    table = reliability_table(Y, P, n_bins=2, strategy="quantile")
    assert [(b.lower, b.upper, b.count) for b in table] == [(0.1, 0.6, 3), (0.6, 0.9, 2)]
    assert expected_calibration_error(Y, P, n_bins=2, strategy="quantile") == pytest.approx(0.08)


def test_uniform_bins_are_closed_on_the_left_and_the_last_holds_one() -> None:
    table = reliability_table([0, 1, 0, 1, 0, 1], [0.0, 0.1, 0.3, 0.5, 0.9, 1.0])
    assert [b.count for b in table] == [1, 1, 0, 1, 0, 1, 0, 0, 0, 2]
    assert [b.lower for b in table] == [k / 10 for k in range(10)]
    assert table[-1].upper == 1.0
    assert table[9].mean_predicted == pytest.approx(0.95)


def test_quantile_ties_leave_empty_bins_and_agree_with_sklearn() -> None:
    # percentiles 0, 25, 50, 75, 100 of [0.2, 0.2, 0.2, 0.2, 0.8] are 0.2, 0.2, 0.2, 0.2, 0.8:
    # every 0.2 goes to bin 0 (the lowest bin with upper edge 0.2), bins 1 and 2 are (0.2, 0.2]
    y, p = [0, 1, 0, 0, 1], [0.2, 0.2, 0.2, 0.2, 0.8]
    table = reliability_table(y, p, n_bins=4, strategy="quantile")
    assert [b.count for b in table] == [4, 0, 0, 1]
    assert [b.fraction_positive for b in table] == [0.25, None, None, 1.0]
    prob_true, prob_pred = calibration_curve(y, p, n_bins=4, strategy="quantile")
    fractions, means = filled_means(table)
    np.testing.assert_allclose(fractions, prob_true)
    np.testing.assert_allclose(means, prob_pred)
    # |0.25 - 0.2| · 4/5 + |1 - 0.8| · 1/5 = 0.04 + 0.04
    assert expected_calibration_error(y, p, n_bins=4, strategy="quantile") == pytest.approx(0.08)


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("n_bins", [5, 10, 15])
def test_per_bin_means_agree_with_sklearn_calibration_curve(
    overconfident: Sample, strategy: Any, n_bins: int
) -> None:
    y, p = overconfident[0][:3000], overconfident[1][:3000]
    table = reliability_table(y, p, n_bins=n_bins, strategy=strategy)
    prob_true, prob_pred = calibration_curve(y, p, n_bins=n_bins, strategy=strategy)
    fractions, means = filled_means(table)
    np.testing.assert_allclose(fractions, prob_true, rtol=1e-12)
    np.testing.assert_allclose(means, prob_pred, rtol=1e-12)
    assert sum(b.count for b in table) == 3000
    gaps = np.abs(prob_true - prob_pred)
    counts = np.array([b.count for b in table if b.count])
    assert expected_calibration_error(y, p, n_bins=n_bins, strategy=strategy) == pytest.approx(
        float(np.sum(counts / 3000 * gaps))
    )


def test_empty_bins_are_listed_with_none() -> None:
    table = reliability_table(Y, P)
    empty = table[0]
    assert (empty.count, empty.positives) == (0, 0)
    assert (empty.mean_predicted, empty.fraction_positive, empty.gap) == (None, None, None)
    assert (empty.fraction_positive_low, empty.fraction_positive_high) == (None, None)
    assert (empty.lower, empty.upper) == (0.0, 0.1)


# --- Wilson intervals ----------------------------------------------------------------------


def test_wilson_interval_hand_values() -> None:
    # 5 of 10, z² = 3.8415: centre 0.5, half = 1.96 / 1.38415 · √(0.025 + 0.0096) = 0.26341
    assert wilson_interval(5, 10) == pytest.approx((0.23659, 0.76341), abs=1e-5)
    # 0 of 10: centre = half = (3.8415 / 20) / 1.38415 = 0.13877, so [0, 0.27753]
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.27753), abs=1e-5)
    assert wilson_interval(10, 10) == pytest.approx((0.72247, 1.0), abs=1e-5)
    # 1 of 50: denominator 1 + 3.84146/50 = 1.07683, centre (0.02 + 0.03841) / 1.07683 = 0.05425,
    # half = 1.95996 / 1.07683 · √(0.02 · 0.98 / 50 + 3.84146 / 10000) = 0.05071
    assert wilson_interval(1, 50) == pytest.approx((0.00354, 0.10496), abs=1e-5)


@pytest.mark.parametrize(("positives", "count"), [(0, 1), (1, 1), (1, 3), (7, 9), (3, 1000), (500, 1000)])
def test_wilson_interval_contains_the_fraction(positives: int, count: int) -> None:
    low, high = wilson_interval(positives, count)
    assert 0.0 <= low <= positives / count <= high <= 1.0
    assert low < high


def test_every_filled_bin_carries_its_wilson_interval(overconfident: Sample) -> None:
    for b in calibration_report(*overconfident).bins_uniform:
        assert b.fraction_positive is not None
        assert (b.fraction_positive_low, b.fraction_positive_high) == wilson_interval(b.positives, b.count)


# --- synthetic samples ---------------------------------------------------------------------


def test_calibrated_sample_has_a_small_ece_and_an_overconfident_one_a_large_ece(
    calibrated: Sample, overconfident: Sample
) -> None:
    good, bad = calibration_report(*calibrated), calibration_report(*overconfident)
    assert good.ece_uniform < 0.02
    assert good.ece_quantile < 0.02
    # E|p - p³| over p uniform on [0, 1] = 1/2 - 1/4 = 0.25
    assert bad.ece_uniform == pytest.approx(0.25, abs=0.02)
    assert bad.ece_quantile == pytest.approx(0.25, abs=0.02)
    assert bad.brier > good.brier
    assert (good.n, bad.n) == (20_000, 20_000)


def test_a_calibrator_fitted_on_half_improves_the_other_half(overconfident: Sample) -> None:
    y, p = overconfident
    calibrator = fit_calibrator(y[:10_000], p[:10_000])
    before = calibration_report(y[10_000:], p[10_000:])
    after = calibration_report(y[10_000:], calibrator.predict(p[10_000:]))
    assert before.ece_uniform > 0.2
    assert after.ece_uniform < 0.03
    assert after.brier < before.brier - 0.05
    assert after.log_loss < before.log_loss
    assert calibrator.uncalibrated_brier > max(calibrator.cv_brier.values())


def logit(p: FloatArray) -> FloatArray:
    return np.log(p) - np.log1p(-p)


@pytest.mark.parametrize(
    ("world", "expected"),
    [
        # few outcomes whose truth is exactly a Platt curve: isotonic's steps fit noise
        (sample(0, 100, lambda p: 1 / (1 + np.exp(-(2 * logit(p) + 0.5)))), "platt"),
        # a step no logistic curve can follow
        (sample(0, 500, lambda p: np.where(p < 0.5, 0.1, 0.9)), "isotonic"),
    ],
    ids=["logistic-truth", "step-truth"],
)
def test_the_method_with_the_lower_cross_validated_brier_is_chosen(world: Sample, expected: str) -> None:
    calibrator = fit_calibrator(*world)
    assert calibrator.method == min(calibrator.cv_brier, key=lambda m: calibrator.cv_brier[m])
    assert calibrator.method == expected
    expected_type = LogisticRegression if expected == "platt" else IsotonicRegression
    assert type(calibrator.estimator) is expected_type


def test_the_platt_estimator_takes_logit_p_as_its_one_feature() -> None:
    y, p = sample(0, 100, lambda p: 1 / (1 + np.exp(-(2 * logit(p) + 0.5))))
    calibrator = fit_calibrator(y, p)
    assert calibrator.method == "platt"
    probe = np.array([0.0, 1e-9, 0.1, 0.5, 0.9, 1.0])
    feature = logit(np.clip(probe, PLATT_CLIP, 1 - PLATT_CLIP)).reshape(-1, 1)
    np.testing.assert_array_equal(
        calibrator.predict(probe), calibrator.estimator.predict_proba(feature)[:, 1]
    )
    assert calibrator.estimator.n_features_in_ == 1
    parameters = calibrator.as_dict()["parameters"]
    assert parameters["slope"] == pytest.approx(float(calibrator.estimator.coef_[0][0]))
    assert parameters["slope"] > 1  # the truth's slope is 2: the scores were under-confident


def test_calibrated_probabilities_stay_in_the_unit_interval(overconfident: Sample) -> None:
    y, p = overconfident
    calibrator = fit_calibrator(y[:2000], np.clip(p[:2000], 0.2, 0.8))
    assert calibrator.method == "isotonic"
    predicted = calibrator.predict([0.0, 0.05, 0.5, 0.95, 1.0])
    assert predicted.dtype == np.float64
    assert np.all((predicted >= 0) & (predicted <= 1))
    assert np.all(np.diff(predicted) >= 0)


def test_fitting_is_deterministic(overconfident: Sample) -> None:
    y, p = overconfident[0][:3000], overconfident[1][:3000]
    first, second = fit_calibrator(y, p), fit_calibrator(list(y), list(p))
    assert first.as_dict() == second.as_dict()
    probe = np.linspace(0, 1, 101)
    np.testing.assert_array_equal(first.predict(probe), second.predict(probe))
    assert calibration_report(y, p) == calibration_report(y, p)


def test_folds_shrink_to_the_rarer_class() -> None:
    y = np.array([1] * 12 + [0] * 88)
    p = np.linspace(0.01, 0.99, 100)[::-1]
    assert fit_calibrator(y, p, folds=20).folds == 12
    assert fit_calibrator(y, p).folds == 5


def test_too_few_outcomes_are_refused_with_the_counts() -> None:
    y, p = [0, 1] * 14 + [0], [0.3, 0.7] * 14 + [0.3]
    with pytest.raises(UsageError) as refused:
        fit_calibrator(y, p)
    message = str(refused.value)
    assert "found 29 outcomes (14 positives, 15 negatives)" in message
    assert f"minimum is {MIN_OUTCOMES_PER_SCOPE} outcomes" in message
    assert "\n" not in message


def test_too_few_of_one_class_are_refused_with_the_counts() -> None:
    y = [1] * (MIN_OUTCOMES_PER_CLASS - 1) + [0] * 200
    p = [0.5] * len(y)
    with pytest.raises(UsageError, match=r"209 outcomes \(9 positives, 200 negatives\)") as refused:
        fit_calibrator(y, p)
    assert f"at least {MIN_OUTCOMES_PER_CLASS} positives and {MIN_OUTCOMES_PER_CLASS} negatives" in str(
        refused.value
    )


def test_the_minimum_itself_is_enough() -> None:
    y = [1] * MIN_OUTCOMES_PER_CLASS + [0] * (MIN_OUTCOMES_PER_SCOPE - MIN_OUTCOMES_PER_CLASS)
    p = np.linspace(0.9, 0.1, MIN_OUTCOMES_PER_SCOPE)
    assert fit_calibrator(y, p).n == MIN_OUTCOMES_PER_SCOPE


# --- refusals of bad input -----------------------------------------------------------------

BAD_INPUTS = {
    "lengths differ": ([0, 1, 1], [0.2, 0.8], "differ in length: 3 outcomes, 2 probabilities"),
    "empty": ([], [], "the input is empty"),
    "p above 1": ([0, 1], [0.2, 1.5], r"must lie in \[0, 1\]: 1 do not, the first is 1.5 at position 1"),
    "p below 0": ([0, 1], [-0.1, 0.5], r"must lie in \[0, 1\]"),
    "p NaN": ([0, 1, 1], [0.2, 0.5, math.nan], "1 NaN value.*position 2"),
    "y is 2": ([0, 2], [0.2, 0.8], "outcomes must be 0 or 1: 1 are not, the first is 2.0 at position 1"),
    "y is 0.5": ([0.5, 1], [0.2, 0.8], "outcomes must be 0 or 1"),
    "y is -1": ([-1, 1], [0.2, 0.8], "outcomes must be 0 or 1"),
    "p not numbers": ([0, 1], ["low", "high"], r"probabilities must be numbers in \[0, 1\]"),
    "p two-dimensional": ([0, 1], [[0.2], [0.8]], "one-dimensional"),
}


@pytest.mark.parametrize("score", [brier_score, log_loss, expected_calibration_error, calibration_report])
@pytest.mark.parametrize(("y", "p", "message"), BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_bad_input_is_refused_in_one_line(score: Any, y: Any, p: Any, message: str) -> None:
    with pytest.raises(UsageError, match=message) as refused:
        score(y, p)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(("y", "p", "message"), BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_fitting_refuses_bad_input_before_counting(y: Any, p: Any, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        fit_calibrator(y, p)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(UsageError, match="positive integer, got 0"):
        calibration_report(Y, P, n_bins=0)
    with pytest.raises(UsageError, match="unknown bin strategy 'equal'"):
        reliability_table(Y, P, strategy="equal")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="at least 2 folds, got 1"):
        fit_calibrator([0, 1] * 50, [0.4, 0.6] * 50, folds=1)
    with pytest.raises(UsageError, match="count >= 1"):
        wilson_interval(0, 0)


def test_predict_refuses_probabilities_outside_the_unit_interval(overconfident: Sample) -> None:
    calibrator = fit_calibrator(overconfident[0][:500], overconfident[1][:500])
    with pytest.raises(UsageError, match=r"must lie in \[0, 1\]"):
        calibrator.predict([0.5, 1.2])


# --- plain values for the ledger and the reports table -------------------------------------


def test_report_and_calibrator_are_plain_json(overconfident: Sample) -> None:
    report = calibration_report(Y, P, n_bins=4)
    data = json.loads(json.dumps(report.as_dict(), allow_nan=False))
    assert data["n"] == 5
    assert data["positives"] == 3
    assert data["brier"] == pytest.approx(0.212)
    assert data["n_bins"] == 4
    assert [b["count"] for b in data["bins_uniform"]] == [2, 0, 1, 2]
    assert data["bins_uniform"][1]["mean_predicted"] is None
    assert {b["strategy"] for b in data["bins_quantile"]} == {"quantile"}
    calibrator = fit_calibrator(overconfident[0][:500], overconfident[1][:500])
    fitted = json.loads(json.dumps(calibrator.as_dict(), allow_nan=False))
    assert fitted["method"] in {"isotonic", "platt"}
    assert set(fitted["cv_brier"]) == {"isotonic", "platt"}
    assert fitted["n"] == 500
    assert fitted["folds"] == 5


def test_results_are_frozen() -> None:
    report = calibration_report(Y, P)
    with pytest.raises(AttributeError):
        report.brier = 0.0  # type: ignore[misc]
    assert isinstance(report, CalibrationReport)
    calibrator = fit_calibrator([0, 1] * 30, [0.3, 0.7] * 30)
    assert isinstance(calibrator, FittedCalibrator)
    with pytest.raises(AttributeError):
        calibrator.method = "isotonic"  # type: ignore[misc]


# --- the reliability diagram ---------------------------------------------------------------


def test_reliability_png_is_written(tmp_path: Path, overconfident: Sample) -> None:
    y, p = overconfident[0][:2000], overconfident[1][:2000]
    calibrator = fit_calibrator(y, p)
    before, after = calibration_report(y, p), calibration_report(y, calibrator.predict(p))
    figure = reliability_figure(before, after, title="correlation confidence")
    assert isinstance(figure, Figure)
    legend = figure.axes[0].get_legend()
    assert legend is not None
    texts = [text.get_text() for text in legend.get_texts()]
    assert texts[0] == "perfectly calibrated"
    assert texts[1] == f"before: ECE {before.ece_uniform:.3f}, Brier {before.brier:.3f}"
    assert texts[2] == f"after: ECE {after.ece_uniform:.3f}, Brier {after.brier:.3f}"
    written = save_reliability_png(figure, tmp_path / "reliability.png")
    assert written == tmp_path / "reliability.png"
    content = written.read_bytes()
    assert content[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(content) > 1000
    alone = save_reliability_png(reliability_figure(before, title="before only"), tmp_path / "before.png")
    assert alone.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_figures_are_not_kept_by_pyplot(overconfident: Sample) -> None:
    import matplotlib.pyplot as plt

    open_before = plt.get_fignums()
    reliability_figure(calibration_report(*overconfident), title="leak check")
    assert plt.get_fignums() == open_before
    assert matplotlib.get_backend()  # drawing did not need a display


def test_improves_says_whether_the_calibrator_beats_the_probabilities_as_they_are(
    overconfident: Sample,
) -> None:
    y, p = overconfident
    assert fit_calibrator(y[:2_000], p[:2_000]).improves()
    # already calibrated and uninformative: every fold's calibrator predicts 0.5, the same Brier
    flat = fit_calibrator([0, 1] * 20, [0.5] * 40)
    assert flat.cv_brier[flat.method] == pytest.approx(flat.uncalibrated_brier)
    assert not flat.improves()


@pytest.mark.parametrize(
    "world",
    [
        sample(0, 100, lambda p: 1 / (1 + np.exp(-(2 * logit(p) + 0.5)))),
        sample(0, 500, lambda p: np.where(p < 0.5, 0.1, 0.9)),
    ],
    ids=["platt", "isotonic"],
)
def test_the_declared_map_reproduces_the_calibrator_without_its_estimator(world: Sample) -> None:
    """What a calibrated correlation release declares is the whole map, by hand here."""
    calibrator = fit_calibrator(*world)
    declared = calibrator.declared_map()
    assert json.loads(json.dumps(declared)) == declared
    probe = np.array([0.0, 1e-9, 0.05, 0.3, 0.5, 0.77, 0.999, 1.0])
    if declared["method"] == "platt":
        q = np.clip(probe, declared["clip"], 1 - declared["clip"])
        by_hand = 1 / (1 + np.exp(-(declared["slope"] * logit(q) + declared["intercept"])))
    else:
        by_hand = np.interp(probe, declared["x"], declared["y"])
    np.testing.assert_allclose(calibrator.predict(probe), by_hand, rtol=1e-12, atol=1e-12)
