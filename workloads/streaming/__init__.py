"""The streaming provisional path (``lakehouse stream``): Bronze as a streaming source, the
Silver and Gold definitions applied per micro-batch, provisional correlations written once."""

from workloads.streaming.divergence import DivergenceView, read_divergence
from workloads.streaming.stream import (
    StreamBatch,
    StreamFailPoint,
    StreamReport,
    committed_batches,
    correlate_batch,
    run_stream,
    stream_fail_point,
    stream_home,
)

__all__ = [
    "DivergenceView",
    "StreamBatch",
    "StreamFailPoint",
    "StreamReport",
    "committed_batches",
    "correlate_batch",
    "read_divergence",
    "run_stream",
    "stream_fail_point",
    "stream_home",
]
