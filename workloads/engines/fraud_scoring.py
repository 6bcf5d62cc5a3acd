"""The fraud scoring engine: a registered ``fraud-score`` model applied to decision points.

What: one score per decision point (an order at its event time ``t``, with the features known
then: a ``gold.training_sets`` row), the probability of a confirmed outcome that the model
pinned by the release gives it. The model is *not* a parameter: it is a registered MLflow
model version named in the release's ``model_versions`` (``conf/engines.yaml``), part of the
engine's identity, so a retrained model is a new release of this engine, and scores of the
same decision under two releases sit side by side in ``gold.fraud_scores``, the older
superseded with the reason naming the newer (:mod:`workloads.ml.scoring`).

Why a pure function of a loaded model: the caller loads exactly the pinned version from the
registry (``models:/<name>/<version>``, never an alias or "latest"), and this function does
no I/O. A ``HistGradientBoostingClassifier``'s prediction is deterministic, and the score is
rounded to 6 places, so the same rows and the same release give the same scores (and the
same output hash) on any run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["NAME", "SCORE_DIGITS", "score_v1"]

NAME: Final = "fraud_scoring"
SCORE_DIGITS: Final = 6
"""Scores are rounded to this many places, as correlation confidences are."""


def score_v1(decisions: pd.DataFrame, *, model: Any, features: Sequence[str]) -> pd.DataFrame:
    """``decision_id`` and ``score`` for every row of ``decisions``, in its order.

    ``features`` are the declared feature columns in the order the model was fitted on
    (missing values stay NaN: the model handles them as "not known then").
    """
    import pandas as pd

    matrix = decisions.loc[:, list(features)].astype("float64").to_numpy()
    scores = model.predict_proba(matrix)[:, 1] if len(decisions) else np.empty(0)
    return pd.DataFrame(
        {
            "decision_id": decisions["decision_id"].astype(str).to_numpy(),
            "score": np.round(np.clip(scores.astype("float64"), 0.0, 1.0), SCORE_DIGITS),
        }
    )
