"""The streaming and batch paths run one set of definitions (seed 004: written once).

No Spark: the functions the stream's micro-batch calls are checked to be the very objects the
batch Silver and Gold builds call (identity, not copies), and the divergence figures are
checked as plain arithmetic. The streaming behaviour itself (crash and resume, quarantine,
the four outcomes, erasure) runs through the CLI in ``tests/jobs/test_cli_history.py``.
"""

from __future__ import annotations

import ast
import inspect

import workloads.gold.build as gold_build
import workloads.pipeline as pipeline
import workloads.silver.build as silver_build
import workloads.streaming.stream as stream
from workloads.gold.provisional import divergence
from workloads.vocabulary import StreamOutcome


def test_the_stream_calls_the_batch_paths_own_silver_functions() -> None:
    for name in (
        "canonicalise",
        "assign_fates",
        "silver_rows",
        "quarantine_rows",
        "approvals_in_queue",
        "ADAPTERS",
    ):
        assert getattr(stream, name) is getattr(silver_build, name), name


def test_the_stream_resolves_and_correlates_with_the_engines_the_builds_choose() -> None:
    """``run_stream_provisional`` picks the engines with the same resolver of versions in force
    and the same producer factory as ``run_silver`` / ``run_gold``, and the stream applies the
    producer's declared function, as ``build_gold`` does."""
    source = inspect.getsource(pipeline.run_stream_provisional)
    calls = {
        n.func.id
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    assert {"in_force_engines", "_producer", "row_engine_label"} <= calls
    assert "resolver_for" in source
    assert stream.Producer is gold_build.Producer
    body = inspect.getsource(stream.correlate_batch)
    assert "producer.correlate(" in body, "the declared engine function, not a copy of it"
    assert "producer.correlate(" in inspect.getsource(gold_build.build_gold)


def test_precision_recall_and_the_flag_follow_from_the_outcome_counts() -> None:
    counts = {
        StreamOutcome.AGREE: 6,
        StreamOutcome.BATCH_STRONGER: 2,
        StreamOutcome.FALSE_POSITIVE: 2,
        StreamOutcome.MISSED: 8,
    }
    figures = divergence("shared_card", "correlation@2", counts, threshold=0.85)
    assert (figures.precision, figures.recall) == (0.8, 0.5)
    assert figures.flagged, "0.8 is below 0.85"
    assert not divergence("shared_card", "correlation@2", counts, threshold=0.8).flagged
    nothing = divergence("shared_device", "correlation@2", {StreamOutcome.MISSED: 3}, threshold=0.8)
    assert (nothing.precision, nothing.recall, nothing.flagged) == (None, 0.0, False)
