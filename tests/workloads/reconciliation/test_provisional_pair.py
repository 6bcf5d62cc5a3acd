"""The declared pair published batch correlations -> the provisional (streaming) view.

On the shipped mixed-format lakehouse (the pair's logic sits above the table interface): the
v1 correlation store written directly (``seed``), one stream batch written with the
product's own function (a pair batch agrees with, one batch finds stronger, one false
positive; the store's other rows are missed), the view reconciled and recorded as a replay's
publication does (:func:`workloads.replay.provisional.reconcile_and_record`: the reconciliation
and the recording a Gold build runs one after the other): each of the four outcomes by name and
count, on the view's rows, in the ledger and, for the retracted claim, in the outbox. The pair
then finds nothing, and a tampered copy is found as divergent while a tampered streaming row
(outside the part the pair covers) is not.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from ledger import open_ledger
from ledger.clock import SystemClock
from ledger.entries import Notification, Supersession
from tests.conftest import Lakehouse
from tests.replay_history import seed
from workloads.gold.provisional import write_provisional
from workloads.policies import load_streaming_policy
from workloads.reconciliation.pairs import resolve_pair
from workloads.reconciliation.run import load_reconcile_policy, reconcile
from workloads.replay import outbox
from workloads.replay.provisional import STREAM_PLAN, reconcile_and_record

pytestmark = pytest.mark.spark

VIEW = "gold.provisional_correlations"
POLICY = load_reconcile_policy().model_copy(
    update={"staleness_seconds": 0, "max_ranges_per_level": 256, "list_rows": 16}
)


def test_a_reconciled_view_agrees_with_the_store_and_a_tampered_copy_is_found(
    shipped_lakehouse: Lakehouse,
) -> None:
    from pyspark.sql import functions as F

    lh = shipped_lakehouse
    pair = resolve_pair(lh.config, "gold.correlations", VIEW, None)
    gold = seed(lh)
    batch = gold.read().orderBy("correlation_id")
    agree, stronger = (r["correlation_id"] for r in batch.limit(2).collect())
    streamed = (
        batch.where(F.col("correlation_id") == agree)
        .unionByName(batch.where(F.col("correlation_id") == stronger).withColumn("confidence", F.lit(0.01)))
        .unionByName(
            batch.where(F.col("correlation_id") == agree).withColumns(
                {"correlation_id": F.lit("stream-only"), "entity_b": F.lit("nobody")}
            )
        )
    )
    bounds = batch.agg(F.min("valid_from"), F.max("valid_from")).collect()[0]
    now = datetime.now(UTC)
    view = lh.registry.get(VIEW)
    write_provisional(
        view,
        streamed,
        batch_id=0,
        run_id="stream-test-0",
        window_start=bounds[0] - timedelta(days=1),
        window_end=bounds[1] + timedelta(days=1),
        recorded_at=now,
    )
    clock = SystemClock()
    ledger = open_ledger(lh.registry, clock=clock)
    streaming = load_streaming_policy()
    reconciled = reconcile_and_record(
        lh.registry, ledger, run_id="gold-test", recorded_at=now, policy=streaming
    )
    assert reconciled is not None
    ids = [r["correlation_id"] for r in batch.select("correlation_id").collect()]
    missed = sorted(set(ids) - {agree, stronger})
    outcomes = {"agree": 1, "batch_stronger": 1, "false_positive": 1, "missed": len(missed)}
    assert missed
    assert dict(reconciled.outcomes) == outcomes
    # each streaming row by its id: superseded (agree, batch stronger) or retracted (false positive)
    by_row = {
        (r["correlation_id"], r["status"]): r["outcome"]
        for r in view.read().select("correlation_id", "status", "outcome").collect()
    }
    assert by_row == {
        (agree, "superseded"): "agree",
        (stronger, "superseded"): "batch_stronger",
        ("stream-only", "retracted"): "false_positive",
        (agree, "authoritative"): "agree",
        (stronger, "authoritative"): "batch_stronger",
        **{(cid, "authoritative"): "missed" for cid in missed},
    }
    recorded = {
        e.key.split(" ")[0]: e.count
        for e in ledger.reader.entries(kind="supersession", run_id="gold-test")
        if isinstance(e, Supersession) and e.table == VIEW
    }
    assert recorded == {f"outcome={outcome}": count for outcome, count in outcomes.items()}
    # the retracted claim is announced once to each streaming consumer, with counts and no id
    (notice,) = outbox.messages_of(lh.registry.get(outbox.OUTBOX), "gold-test")
    assert list(streaming.consumers) == ["fraud-ops"]
    assert (notice.consumer, notice.plan, notice.table_name) == ("fraud-ops", STREAM_PLAN, VIEW)
    assert notice.published_version == reconciled.versions[VIEW]
    scope = batch.where(F.col("correlation_id") == agree).first()["correlation_type"]
    assert json.loads(notice.payload) == {
        "table": VIEW,
        "version": notice.published_version,
        "retracted": 1,
        "reconciled_by": "gold-test",
        "scopes": {scope: 1},
    }
    (told,) = ledger.reader.entries(kind="notification", run_id="gold-test")
    assert isinstance(told, Notification)
    assert told.idempotency_key == notice.idempotency_key

    clean = reconcile(lh.registry, ledger, clock, pair, policy=POLICY)
    assert (clean.total_delta, clean.pending, clean.complete) == (0, 0, True), clean

    rows = view.read()
    copy = rows.where((F.col("correlation_id") == agree) & (F.col("status") == "authoritative"))
    retracted = rows.where(F.col("status") == "retracted")
    assert (copy.count(), retracted.count()) == (1, 1)
    # Halved, not set to a constant: one shared asset used once by each side gives v1's
    # confidence 0.5 exactly (workloads.engines.correlation), so a constant can leave it as it was.
    halved = F.col("confidence") / 2
    tampered = copy.withColumn("confidence", halved).unionByName(retracted.withColumn("confidence", halved))
    tampered = tampered.localCheckpoint()
    before = {r["status"]: r["confidence"] for r in copy.unionByName(retracted).collect()}
    after = {r["status"]: r["confidence"] for r in tampered.collect()}
    assert all(after[status] != before[status] for status in before), (before, after)
    view.delete_where(
        f"(correlation_id = '{agree}' AND status = 'authoritative') OR status = 'retracted'",
        run_id="operator",
    )
    view.append(tampered, run_id="operator")

    found = reconcile(lh.registry, ledger, clock, pair, policy=POLICY)
    assert (found.divergent, found.missing, found.orphan) == (1, 0, 0), found
    assert found.samples == {"divergent": (agree,)}, "the tampered copy, and nothing else"
    assert found.authority == "source"
    # the copy found differs from its batch row in the tampered column only
    (stored,) = (
        view.read().where(F.col("correlation_id") == agree).where("status = 'authoritative'").collect()
    )
    (published,) = gold.read().where(F.col("correlation_id") == agree).collect()
    assert pair.columns is not None
    assert "confidence" in pair.columns
    differing = {c: (stored[c], published[c]) for c in pair.columns if stored[c] != published[c]}
    assert differing == {"confidence": (published["confidence"] / 2, published["confidence"])}
