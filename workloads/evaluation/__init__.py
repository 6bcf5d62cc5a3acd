"""Is a new engine version better? Its quality against labelled truth, old and new side by side.

:mod:`~workloads.evaluation.metrics` (pairwise precision, recall and F1 of entity
resolution; precision and recall of correlations against the true shared-asset pairs),
:mod:`~workloads.evaluation.communities` (communities against the true fraud rings:
adjusted Rand index, pairwise precision and recall, the share of each ring its best
community captures, false communities),
:mod:`~workloads.evaluation.truth` (the labelled truth file format and where it is found)
and :mod:`~workloads.evaluation.report` (the report a replay records). Plain values in,
plain values out: no Spark, no tables; the replay collects what a version produced and
hands it over. Nothing here knows the synthetic generator: its ``_ground_truth.json`` is
read as any labelled truth file.
"""

from workloads.evaluation.communities import (
    CommunityQuality,
    RingCapture,
    adjusted_rand_index,
    community_quality,
    person_entities,
)
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
    "CommunityQuality",
    "CorrelationQuality",
    "LabelledTruth",
    "PairQuality",
    "QualityReport",
    "RingCapture",
    "TruthSearch",
    "VersionEvidence",
    "VersionQuality",
    "adjusted_rand_index",
    "community_quality",
    "compare_versions",
    "correlation_quality",
    "find_truth",
    "group_pairs",
    "load_truth",
    "pairwise_quality",
    "person_entities",
    "unmeasured",
]
