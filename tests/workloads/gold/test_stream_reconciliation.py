"""Issue 38: a batch Gold build reconciles the stream's provisional rows into the four outcomes.

The tiny hand-written history (:mod:`tests.replay_history`) delivered, ingested and built into
Silver and Gold by the product's recorded runs. The stream's claims over it are then written
with the stream's own function (:func:`workloads.gold.provisional.write_provisional`): one pair
the batch holds at the same confidence (agree), one at another confidence (batch stronger) and
one the batch never found (a streaming false positive). The next Gold build, given the
``streaming:`` policy as ``lakehouse build gold`` gives it, decides each outcome by name and
count (the batch's other pairs in the window are the stream's recall gap, missed), keeps every
streaming row, records the outcomes in the ledger and in its ``run_finished`` counts, and
announces the retracted claim to each streaming consumer through the outbox, once.
(After a replay's publication: ``tests/workloads/replay/test_replay_flow.py``.)
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from ledger import open_ledger
from ledger.clock import FixedClock
from ledger.entries import RunFinished
from tests.replay_history import (
    ANN,
    BOB,
    CAROL,
    PROMO,
    START,
    build,
    current_pairs,
    device,
    ledger_of,
    missed_pairs,
    reconciled_view,
    recorded_outcomes,
    stream_notices,
    v1_id,
    view_outcomes,
    write_claims,
)
from workloads.gold.quality import medallion_gate
from workloads.pipeline import run_gold
from workloads.policies import load_streaming_policy

pytestmark = pytest.mark.spark


def test_the_gold_build_decides_each_outcome_by_name_and_count_and_announces_the_retraction(
    shipped_lakehouse: Any, tmp_path: Path
) -> None:
    lh = shipped_lakehouse
    clock = FixedClock(START, step=timedelta(seconds=1))
    built = build(lh, clock, tmp_path / "history")
    served = current_pairs(built.gold)
    agree, stronger = device(BOB, ANN), device(v1_id("dave@example.com"), v1_id("erin@example.com"))
    assert {agree, stronger} <= set(served), sorted(served)
    nobody = v1_id("nobody@example.com")
    rows = built.gold.read().where(
        F.col("correlation_id").isin(served[agree]["correlation_id"], served[stronger]["correlation_id"])
    )
    claims = rows.withColumn(
        "confidence",
        F.when(F.col("correlation_id") == served[stronger]["correlation_id"], F.lit(0.01)).otherwise(
            F.col("confidence")
        ),
    ).unionByName(
        rows.where(F.col("correlation_id") == served[agree]["correlation_id"]).withColumns(
            {
                "correlation_id": F.lit("stream-only"),
                "entity_a": F.lit(min(BOB, nobody)),
                "entity_b": F.lit(max(BOB, nobody)),
            }
        )
    )
    invented = device(BOB, nobody)
    assert invented not in served
    write_claims(lh, claims)

    ledger = open_ledger(lh.registry, clock=clock)
    streaming = load_streaming_policy()
    report = run_gold(lh.registry, ledger, clock, gate=medallion_gate, streaming=streaming)

    batch = current_pairs(built.gold)
    assert batch.keys() == served.keys(), "the same Silver gives the same pairs"
    missed = missed_pairs(batch, {agree, stronger})
    assert missed == {("shared_card", *sorted((ANN, PROMO))), device(PROMO, CAROL)}, sorted(missed)
    expected = {"agree": 1, "batch_stronger": 1, "false_positive": 1, "missed": len(missed)}
    assert report.provisional is not None
    assert dict(report.provisional.outcomes) == expected

    # every streaming row is kept, superseded or retracted; the batch's rows beside them
    by_pair = view_outcomes(lh)
    assert by_pair == reconciled_view(agree=agree, stronger=stronger, retracted=invented, missed=missed)
    assert recorded_outcomes(lh, report.run_id) == expected
    (finished,) = ledger_of(lh, report.run_id, RunFinished)
    assert {k: finished.counts[f"stream_{k}"] for k in expected} == expected
    assert finished.counts["stream_notifications"] == len(streaming.consumers)

    notices = stream_notices(lh, report.run_id)
    assert sorted(m.consumer for m in notices) == sorted(streaming.consumers)
    payloads = [json.loads(m.payload) for m in notices]
    assert all(p["retracted"] == 1 and p["reconciled_by"] == report.run_id for p in payloads)
    assert not any(nobody in m.payload or BOB in m.payload for m in notices), "counts only, no identifier"

    # the next build finds nothing waiting: nothing decided or announced again
    again = run_gold(lh.registry, ledger, clock, gate=medallion_gate, streaming=streaming)
    assert again.provisional is None
    assert stream_notices(lh, again.run_id) == []
    assert view_outcomes(lh) == by_pair
