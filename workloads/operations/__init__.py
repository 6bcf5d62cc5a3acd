"""The operational view of the pipeline: progress per source (``lakehouse progress``)."""

from workloads.operations.progress import (
    ACTIVE,
    NEVER_DELIVERED,
    STALLED,
    FeedStats,
    ProgressPolicy,
    ProgressReport,
    SourceProgress,
    load_progress_policy,
    read_feed_stats,
    source_progress,
)

__all__ = [
    "ACTIVE",
    "NEVER_DELIVERED",
    "STALLED",
    "FeedStats",
    "ProgressPolicy",
    "ProgressReport",
    "SourceProgress",
    "load_progress_policy",
    "read_feed_stats",
    "source_progress",
]
