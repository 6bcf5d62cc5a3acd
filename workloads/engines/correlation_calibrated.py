"""A correlation release with recalibrated confidence: the base engine's pairs, calibrated scores.

What: the rows of a base correlation release (``correlation@1`` or ``correlation@2``,
parameter ``base``), with each row's ``confidence`` mapped through the calibrator fitted for
its correlation type by ``lakehouse calibrate`` (parameter ``calibrators``: type -> map; the
map under :data:`WHOLE_RELEASE` was fitted on every type pooled and serves the types without
their own). Types without any calibrator keep the base confidence. Pairs, ids, ``valid_from`` and evidence
are the base release's, so a replay under this release supersedes exactly the rows whose
confidence moved, with the reason "recalibrated under ...".

The maps are declared *as parameters* (their learnt numbers), not loaded from MLflow at run
time: the engine stays a pure function of Silver and its declaration, its config digest
changes with every refit, and the registered model versions it came from are pinned in the
release's ``model_versions`` (``conf/engines.yaml``). Two kinds of map:

* ``{"method": "platt", "slope": a, "intercept": b, "clip": c}``:
  ``sigmoid(a * logit(clip(p, c, 1 - c)) + b)``;
* ``{"method": "isotonic", "x": [...], "y": [...]}``: piecewise-linear between the fitted
  thresholds, constant outside them (scikit-learn's ``IsotonicRegression`` with
  ``out_of_bounds="clip"``).

The result is rounded to 6 places and kept in ``[0, 0.999999]``, as the base releases do.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from workloads.engines.correlation import MAX_ENTITIES_PER_ASSET, correlate_v1, correlate_v2

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "BASES",
    "CALIBRATORS",
    "WHOLE_RELEASE",
    "calibrated_confidence",
    "correlate_calibrated",
    "is_recalibrated",
]

BASES: Final = {"correlation@1": correlate_v1, "correlation@2": correlate_v2}
"""The base releases a calibrated release can stand on."""
TOP: Final = 0.999999
WHOLE_RELEASE: Final = "all"
"""The key of the calibrator fitted on every correlation type pooled (the fallback)."""
CALIBRATORS: Final = "calibrators"
"""The parameter holding a recalibrated release's maps (type -> map)."""


def is_recalibrated(parameters: Mapping[str, Any]) -> bool:
    """Whether a correlation release's declared parameters make it a recalibrated release."""
    return CALIBRATORS in parameters


def _platt(p: Column, calibrator: Mapping[str, Any]) -> Column:
    from pyspark.sql import functions as F

    clip = float(calibrator["clip"])
    q = F.least(F.greatest(p, F.lit(clip)), F.lit(1.0 - clip))
    z = F.lit(float(calibrator["slope"])) * F.log(q / (F.lit(1.0) - q)) + F.lit(
        float(calibrator["intercept"])
    )
    return F.lit(1.0) / (F.lit(1.0) + F.exp(-z))


def _isotonic(p: Column, calibrator: Mapping[str, Any]) -> Column:
    from pyspark.sql import functions as F

    xs, ys = [float(x) for x in calibrator["x"]], [float(y) for y in calibrator["y"]]
    result = F.when(p <= F.lit(xs[0]), F.lit(ys[0]))
    for i in range(1, len(xs)):
        x0, y0, x1, y1 = xs[i - 1], ys[i - 1], xs[i], ys[i]
        step = F.lit(y1) if x1 == x0 else F.lit(y0) + (p - F.lit(x0)) * F.lit((y1 - y0) / (x1 - x0))
        result = result.when(p <= F.lit(x1), step)
    return result.otherwise(F.lit(ys[-1]))


def calibrated_confidence(p: Column, calibrator: Mapping[str, Any]) -> Column:
    """``p`` mapped through one declared calibrator, rounded to 6 places, in ``[0, 0.999999]``."""
    from pyspark.sql import functions as F

    method = calibrator.get("method")
    if method == "platt":
        mapped = _platt(p, calibrator)
    elif method == "isotonic":
        mapped = _isotonic(p, calibrator)
    else:
        raise ValueError(f"unknown calibrator method {method!r}: expected platt or isotonic")
    return F.least(F.greatest(F.round(mapped, 6), F.lit(0.0)), F.lit(TOP))


def correlate_calibrated(
    silver: DataFrame,
    *,
    run_id: str,
    recorded_at: datetime,
    base: str,
    calibrators: Mapping[str, Mapping[str, Any]],
    max_entities_per_asset: int = MAX_ENTITIES_PER_ASSET,
) -> DataFrame:
    """The base release's correlations with each type's confidence recalibrated."""
    from pyspark.sql import functions as F

    if base not in BASES:
        raise ValueError(f"base {base!r} is not a correlation release; known: {', '.join(sorted(BASES))}")
    rows = BASES[base](
        silver, run_id=run_id, recorded_at=recorded_at, max_entities_per_asset=max_entities_per_asset
    )
    fallback = calibrators.get(WHOLE_RELEASE)
    confidence = (
        F.col("confidence") if fallback is None else calibrated_confidence(F.col("confidence"), fallback)
    )
    for kind, calibrator in sorted(calibrators.items()):
        if kind == WHOLE_RELEASE:
            continue
        confidence = F.when(
            F.col("correlation_type") == kind, calibrated_confidence(F.col("confidence"), calibrator)
        ).otherwise(confidence)
    return rows.withColumn("confidence", confidence.cast("double"))
