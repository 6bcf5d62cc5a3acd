"""Is a new engine version better? Its quality against labelled truth, old and new side by side.

:mod:`~workloads.evaluation.metrics` (pairwise precision, recall and F1 of entity
resolution; precision and recall of correlations against the true shared-asset pairs),
:mod:`~workloads.evaluation.truth` (the labelled truth file format and where it is found)
and :mod:`~workloads.evaluation.report` (the report a replay records). Plain values in,
plain values out: no Spark, no tables; the replay collects what a version produced and
hands it over. Nothing here knows the synthetic generator: its ``_ground_truth.json`` is
read as any labelled truth file.
"""

from workloads.evaluation.metrics import (
    CorrelationQuality,
    PairQuality,
    VersionQuality,
    correlation_quality,
    group_pairs,
    pairwise_quality,
)
from workloads.evaluation.report import QualityReport, VersionEvidence, compare_versions, unmeasured
from workloads.evaluation.truth import TRUTH_FILE, LabelledTruth, TruthSearch, find_truth, load_truth

__all__ = [
    "TRUTH_FILE",
    "CorrelationQuality",
    "LabelledTruth",
    "PairQuality",
    "QualityReport",
    "TruthSearch",
    "VersionEvidence",
    "VersionQuality",
    "compare_versions",
    "correlation_quality",
    "find_truth",
    "group_pairs",
    "load_truth",
    "pairwise_quality",
    "unmeasured",
]
