"""A recalibrated correlation release: v1's pairs, each type's confidence through its declared map."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from workloads.engines.correlation import correlate_v1
from workloads.engines.correlation_calibrated import calibrated_confidence, correlate_calibrated
from workloads.evaluation.calibration import fit_calibrator

pytestmark = pytest.mark.spark

COLUMNS = "event_id STRING, entity_id STRING, device_id STRING, card_fingerprint STRING, event_time TIMESTAMP"
AT = datetime(2026, 12, 1, tzinfo=UTC)
PROBE = [0.0, 1e-9, 0.05, 0.2, 0.3333, 0.5, 0.61, 0.75, 0.9, 0.999999, 1.0]


def _fitted(method: str) -> Any:
    rng = np.random.default_rng(3)
    p = rng.uniform(0.01, 0.99, 400)
    truth = (
        1 / (1 + np.exp(-(2 * np.log(p / (1 - p)) + 0.5)))
        if method == "platt"
        else np.where(p < 0.5, 0.1, 0.9)
    )
    y = (rng.uniform(size=p.size) < truth).astype(int)
    fitted = fit_calibrator(y, p)
    assert fitted.method == method
    return fitted


@pytest.mark.parametrize("method", ["platt", "isotonic"])
def test_the_spark_map_equals_the_fitted_calibrator(spark_session: Any, method: str) -> None:
    from pyspark.sql import functions as F

    fitted = _fitted(method)
    frame = spark_session.createDataFrame([(p,) for p in PROBE], "p DOUBLE")
    got = [r[0] for r in frame.select(calibrated_confidence(F.col("p"), fitted.declared_map())).collect()]
    expected = np.minimum(np.round(fitted.predict(np.array(PROBE)), 6), 0.999999)
    np.testing.assert_allclose(got, expected, atol=1.5e-6)


def test_only_calibrated_types_move_and_everything_else_is_v1(spark_session: Any) -> None:
    t = datetime(2026, 1, 5, 12, 0)
    events = spark_session.createDataFrame(
        [("e1", "ann", "d1", "c1", t), ("e2", "bob", "d1", "c1", t), ("e3", "bob", "d1", None, t)], COLUMNS
    )
    platt = {"method": "platt", "slope": 0.5, "intercept": -1.0, "clip": 1e-6}
    base = {
        r["correlation_type"]: r.asDict() for r in correlate_v1(events, run_id="r", recorded_at=AT).collect()
    }
    mapped = correlate_calibrated(
        events, run_id="r", recorded_at=AT, base="correlation@1", calibrators={"shared_device": platt}
    )
    got = {r["correlation_type"]: r.asDict() for r in mapped.collect()}
    assert got["shared_card"] == base["shared_card"]
    p = base["shared_device"]["confidence"]
    by_hand = 1 / (1 + np.exp(-(0.5 * np.log(p / (1 - p)) - 1.0)))
    assert got["shared_device"]["confidence"] == pytest.approx(round(by_hand, 6), abs=1e-9)
    unchanged = {k: v for k, v in base["shared_device"].items() if k != "confidence"}
    assert {k: v for k, v in got["shared_device"].items() if k != "confidence"} == unchanged


def test_an_unknown_base_or_method_is_refused(spark_session: Any) -> None:
    events = spark_session.createDataFrame([], COLUMNS)
    with pytest.raises(ValueError, match="base 'correlation@7' is not a correlation release"):
        correlate_calibrated(events, run_id="r", recorded_at=AT, base="correlation@7", calibrators={})
    from pyspark.sql import functions as F

    with pytest.raises(ValueError, match="unknown calibrator method 'spline'"):
        calibrated_confidence(F.lit(0.5), {"method": "spline"})


def test_the_whole_release_calibrator_serves_types_without_their_own(spark_session: Any) -> None:
    t = datetime(2026, 1, 5, 12, 0)
    events = spark_session.createDataFrame(
        [("e1", "ann", "d1", "c1", t), ("e2", "bob", "d1", "c1", t), ("e3", "bob", "d1", None, t)], COLUMNS
    )
    base = {
        r["correlation_type"]: r["confidence"]
        for r in correlate_v1(events, run_id="r", recorded_at=AT).collect()
    }
    pooled = {"method": "isotonic", "x": [0.0, 1.0], "y": [0.1, 0.3]}
    own = {"method": "isotonic", "x": [0.0, 1.0], "y": [0.0, 1.0]}
    mapped = correlate_calibrated(
        events,
        run_id="r",
        recorded_at=AT,
        base="correlation@1",
        calibrators={"all": pooled, "shared_card": own},
    )
    got = {r["correlation_type"]: r["confidence"] for r in mapped.collect()}
    assert got["shared_card"] == pytest.approx(base["shared_card"])  # its own map is the identity
    assert got["shared_device"] == pytest.approx(round(0.1 + 0.2 * base["shared_device"], 6))
