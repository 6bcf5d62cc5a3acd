"""The W2 replay flow end to end on real tables.

The history is tiny and written by hand, so every expected row is known. The dry run and
the whole correction (approval, acks, publication, rollback, re-publication) are asserted
on the shared :class:`~tests.replay_history.Lifecycle`, built once per format through the
product; failure injection and comparisons change their history, so they seed their own on
the shipped mixed-format default:

* ``ann@example.com`` (o1: device d1, card c1) and ``bob@example.com`` (o2: device d1) share
  device d1: v1 correlation (bob, ann), January. Under ER v2 it is unchanged (ann keeps her
  v1 id, the smaller of her two keys; nothing of ann+promo touches d1): no churn.
* ``ann+promo@example.com`` (o3: device d2, card c1) is a second entity under v1 and merges
  into ann under v2 (plus-tag and shared card). v1's (ann, ann+promo) shared_card row of
  February is retracted: both sides are one entity now.
* ``carol@example.com`` (l1: device d2) shares d2 with ann+promo: v1's (ann+promo, carol) of
  February is superseded by v2's (ann, carol).
* dave and erin (l2, l3) share device d5 in March: untouched.

Affected entities are exactly ann and ann+promo; partitions in scope 2025-01 and 2025-02;
only 2025-02 is rewritten.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from lakehouse.digest import canonical_hash
from lakehouse.errors import InjectedFailure, PublicationHeldError, ReplayRefusedError
from ledger.clock import FixedClock
from ledger.engines import EngineCatalog
from ledger.entries import (
    CommunitiesMeasured,
    Notification,
    Publication,
    ReconciliationDecision,
    Rollback,
)
from tests.replay_history import (
    ANN,
    BOB,
    CAROL,
    EVENTS,
    GOLD,
    LABEL,
    PROMO,
    START,
    Lifecycle,
    assert_store_invariants,
    current_pairs,
    declared_engines,
    device,
    ledger_of,
    missed_pairs,
    naive,
    pair,
    plan_with,
    reconciled_view,
    recorded_outcomes,
    rows,
    seed,
    stream_notices,
    v1_id,
    view_outcomes,
    write_claims,
)
from workloads.replay import (
    FailPoint,
    ProducingRun,
    ack,
    approve,
    publish,
    run_candidates,
    run_replay,
)
from workloads.replay.candidate import WHEN_COLUMNS
from workloads.replay.outbox import ACKS, OUTBOX
from workloads.replay.plan import Purpose

pytestmark = pytest.mark.spark


@pytest.fixture
def engines(tmp_path: Path) -> EngineCatalog:
    """ER v1 and v2 and correlation v1, declared with their real code fingerprints."""
    return declared_engines(tmp_path)


def test_dry_run_lists_exactly_the_affected_scope_and_writes_nothing(lifecycle: Lifecycle) -> None:
    assert isinstance(lifecycle.cap_refusal, ReplayRefusedError)
    assert "over its cap operations.max_bytes_read = 1" in str(lifecycle.cap_refusal)
    scope = lifecycle.scope

    assert scope.affected_entities == tuple(sorted((ANN, PROMO)))
    assert scope.old_entities == tuple(sorted((ANN, PROMO)))
    assert scope.new_entities == (ANN,)
    assert scope.recomputed_entity_count == 2
    assert scope.partitions == ("2025-01", "2025-02")
    assert scope.changed_partitions == ("2025-02",)
    counts = (scope.serving_rows_in_scope, scope.new_rows, scope.unchanged)
    assert counts == (3, 2, 1)
    assert (scope.to_supersede, scope.to_retract, scope.to_insert) == (1, 1, 1)
    gold_run = lifecycle.built.gold_run
    assert scope.producing_runs == (ProducingRun(gold_run, 2, ("correlation@1",), in_ledger=True),)
    assert scope.inputs == {"events": 4, "scored": 4, "rejected": 0, "held": 0}
    assert scope.estimate.rows_to_read == len(EVENTS)
    assert scope.estimate.rows_to_write == 3
    assert 0 < scope.estimate.bytes_to_read <= scope.estimate.max_bytes_read
    assert scope.engine_label == LABEL
    # a dry run writes nothing: no table version, no ledger entry, no outbox
    before, after = lifecycle.versions_around_dry_run
    assert after == before
    entries_before, entries_after = lifecycle.ledger_entries_around_dry_run
    assert entries_after == entries_before
    assert lifecycle.outbox_after_replay is False


def test_a_correction_waits_for_approval_and_acks_publishes_once_and_rolls_back(lifecycle: Lifecycle) -> None:
    lakehouse, registry, out = lifecycle.lakehouse, lifecycle.registry, lifecycle.replayed
    served = lifecycle.served
    assert out.status == "awaiting_approval"
    assert out.decision["verdict"] == "publish"
    assert out.decision["owner"] == "risk-analytics"
    assert out.partitions == ("2025-02",)
    assert (out.diff["added"], out.diff["removed"], out.diff["changed"]) == (1, 2, 0)
    assert [(h["kind"], h["old_id"]) for h in out.high_impact] == [
        ("retracted", next(k[0] for k, r in served.items() if pair(r) == ("shared_card", ANN, PROMO)))
    ]
    assert {n["consumer"] for n in out.notifications_planned} == {"fraud-ops", "analytics"}
    assert lifecycle.outbox_after_replay is False, "a replay writes nothing to the live outbox"
    assert lifecycle.rows_after_replay == served, "the candidate is invisible to readers"

    assert isinstance(lifecycle.unapproved_publish, ReplayRefusedError)
    assert "is not approved" in str(lifecycle.unapproved_publish)
    assert isinstance(lifecycle.stranger_approval, ReplayRefusedError)
    assert "may not approve" in str(lifecycle.stranger_approval)
    assert isinstance(lifecycle.held_publish, PublicationHeldError)
    assert "fraud-ops" in str(lifecycle.held_publish)
    assert lifecycle.rows_while_held == served
    assert lifecycle.repeated_ack.recorded is False, "a second ack of the same consumer records nothing"
    acks = sorted((r["consumer"], r["run_id"]) for r in registry.get(ACKS).read().collect())
    assert acks == [("analytics", out.run_id), ("fraud-ops", out.run_id)]

    result, after = lifecycle.published, lifecycle.rows_published
    assert result.status == "published"
    assert_store_invariants(after)
    effective = naive(result.effective_at)
    gold_run = lifecycle.built.gold_run
    by_pair = {(pair(r), r["run_id"]): r for r in after.values()}
    new = by_pair[(("shared_device", ANN, CAROL), out.run_id)]
    assert (new["status"], new["engine"], new["recorded_at"]) == ("authoritative", LABEL, effective)
    retracted = by_pair[(("shared_card", ANN, PROMO), gold_run)]
    assert retracted["status"] == "retracted"
    assert retracted["superseded_by"] is None
    assert "both entities resolve to one entity" in retracted["supersede_reason"]
    assert out.run_id in retracted["supersede_reason"]
    superseded = by_pair[(("shared_device", PROMO, CAROL), gold_run)]
    assert (superseded["status"], superseded["superseded_by"]) == ("superseded", new["correlation_id"])
    assert retracted["superseded_at"] == superseded["superseded_at"] == effective
    untouched = by_pair[(("shared_device", BOB, ANN), gold_run)]
    assert untouched == served[(untouched["correlation_id"], gold_run)], "no churn"

    first, second = ledger_of(lakehouse, out.run_id, Publication)
    assert first.effective_at == result.effective_at
    assert first.tables == {GOLD: result.version}
    assert second.effective_at == lifecycle.republished.effective_at
    again = lifecycle.published_again
    assert (again.status, again.notifications_written) == ("already_published", 0)

    back = lifecycle.rolled_back
    assert back.to_version == first.previous[GOLD]
    assert lifecycle.rows_rolled_back == served
    assert len(ledger_of(lakehouse, out.run_id, Rollback)) == 1

    assert lifecycle.republished.status == "published"
    content = lifecycle.rows_republished
    assert_store_invariants(content)
    assert {k for k in content if k[1] == out.run_id} == {k for k in after if k[1] == out.run_id}
    outbox = registry.get(OUTBOX).read().collect()
    assert sorted(r["consumer"] for r in outbox) == ["analytics", "fraud-ops"], "one per consumer and run"
    assert {r["decision_version"] for r in outbox} == {out.run_id}
    assert len(ledger_of(lakehouse, out.run_id, Notification)) == 2

    assert isinstance(lifecycle.late_rollback, ReplayRefusedError)
    assert "outside its rollback window of 30 days" in str(lifecycle.late_rollback)
    assert rows(registry.get(GOLD)) == content


@pytest.mark.slow
def test_a_failure_at_each_step_then_reruns_publish_once_notify_once_and_keep_a_late_row(
    shipped_lakehouse: Any, engines: Any
) -> None:
    gold = seed(shipped_lakehouse)
    registry, plan = shipped_lakehouse.registry, plan_with()
    clock = FixedClock(START, step=timedelta(seconds=1))
    served, version = rows(gold), gold.current_version()

    with pytest.raises(InjectedFailure, match="after_candidate"):
        run_replay(registry, plan, engines=engines, clock=clock, fail_at=FailPoint.AFTER_CANDIDATE)
    with pytest.raises(InjectedFailure, match="after_diff"):
        run_replay(registry, plan, engines=engines, clock=clock, fail_at="after_diff")
    assert (gold.current_version(), rows(gold)) == (version, served)
    out = run_replay(registry, plan, engines=engines, clock=clock)
    assert out.resumed, "the candidate written before the first failure is reused"
    assert out.status == "awaiting_approval"
    assert len(run_candidates(gold, out.run_id)) == 1

    approve(registry, out.run_id, by="risk-lead", clock=clock)
    ack(registry, "fraud-ops", out.run_id, by="ops-bot", clock=clock)
    # a late event built into serving while the replay waited, in the month it rewrites
    late = (
        gold.read()
        .where("valid_month = '2025-03'")
        .withColumn("correlation_id", F.lit("late-1"))
        .withColumn("valid_month", F.lit("2025-02"))
        .withColumn("run_id", F.lit("gold-late"))
    )
    gold.append(late, run_id="gold-late")
    served, version = rows(gold), gold.current_version()
    with pytest.raises(InjectedFailure, match="during_publish"):
        publish(registry, out.run_id, clock=clock, fail_at=FailPoint.DURING_PUBLISH)
    assert (gold.current_version(), rows(gold)) == (version, served), "serving untouched"
    with pytest.raises(InjectedFailure, match="after_publish_before_notify"):
        publish(registry, out.run_id, clock=clock, fail_at=FailPoint.AFTER_PUBLISH_BEFORE_NOTIFY)
    published = rows(gold)
    assert any(k[1] == out.run_id for k in published), "serving fully published"
    assert published[("late-1", "gold-late")] == served[("late-1", "gold-late")], "the late row is kept"
    assert_store_invariants(published)
    assert ledger_of(shipped_lakehouse, out.run_id, Publication) == []
    assert not registry.get(OUTBOX).exists() or registry.get(OUTBOX).read().count() == 0

    result = publish(registry, out.run_id, clock=clock)
    assert rows(gold) == published, "the rerun recognised the publication: nothing published twice"
    publications = ledger_of(shipped_lakehouse, out.run_id, Publication)
    assert len(publications) == 1
    stamped = {r["recorded_at"] for r in published.values() if r["run_id"] == out.run_id}
    assert stamped == {naive(publications[0].effective_at)}, "the intent's effective time was kept"
    assert result.effective_at == publications[0].effective_at

    rerun = run_replay(registry, plan, engines=engines, clock=clock)
    assert (rerun.run_id, rerun.status) == (out.run_id, "published")
    publish(registry, out.run_id, clock=clock)
    assert len(ledger_of(shipped_lakehouse, out.run_id, Publication)) == 1
    notices = ledger_of(shipped_lakehouse, out.run_id, Notification)
    assert sorted(n.consumer for n in notices) == ["analytics", "fraud-ops"]
    outbox = registry.get(OUTBOX).read().collect()
    assert sorted(r["consumer"] for r in outbox) == ["analytics", "fraud-ops"]


@pytest.mark.slow
def test_a_comparison_reruns_identically_never_publishes_and_a_tampered_candidate_is_caught(
    shipped_lakehouse: Any, engines: Any
) -> None:
    gold = seed(shipped_lakehouse)
    registry = shipped_lakehouse.registry
    clock = FixedClock(START, step=timedelta(seconds=1))
    served = rows(gold)
    comparison = plan_with(Purpose.COMPARISON)

    first = run_replay(registry, comparison, engines=engines, clock=clock)
    assert (first.status, first.decision["verdict"]) == ("compared", "publish")
    assert run_candidates(gold, first.run_id) == [], "a comparison keeps no candidate to publish"
    with pytest.raises(ReplayRefusedError, match="comparison"):
        publish(registry, first.run_id, clock=clock)
    with pytest.raises(ReplayRefusedError, match="comparison"):
        approve(registry, first.run_id, by="risk-lead", clock=clock)

    # the same plan again, rebuilt from scratch: the identical candidate
    with pytest.raises(InjectedFailure):
        run_replay(
            registry, comparison, engines=engines, clock=clock, rebuild=True, fail_at="after_candidate"
        )
    (staged,) = run_candidates(gold, first.run_id)
    assert canonical_hash(gold.read_candidate(staged), exclude=WHEN_COLUMNS) == first.candidate_hash

    # break it: a second current row for one of its correlation ids
    twin = (
        gold.read_candidate(staged)
        .where(F.col("run_id") == first.run_id)
        .limit(1)
        .withColumn("run_id", F.lit("tampered"))
    )
    gold.append(twin, candidate=staged, run_id="tampered")
    broken = run_replay(registry, comparison, engines=engines, clock=clock)
    assert broken.resumed
    assert broken.decision["verdict"] == "repair"
    assert broken.decision["failed_invariant"] == "one_current_row_per_id"
    assert broken.decision["first_bad_partition"] == "2025-02"
    decisions = ledger_of(shipped_lakehouse, first.run_id, ReconciliationDecision)
    assert [d.verdict for d in decisions] == ["publish", "repair"]
    assert rows(gold) == served
    assert not registry.get(OUTBOX).exists()


def test_communities_follow_the_published_restatement_superseding_and_retracting(
    lifecycle: Lifecycle,
) -> None:
    """Issue 43 on each format: communities over the v1 correlations, then over the ER v2
    correlations once published. ann+promo merged into ann: its row is retracted; ann, bob and
    carol move to the community of the three (their earlier rows superseded, pointing to it);
    dave and erin stay together and are rescored (one vertex fewer moves every PageRank)."""
    from workloads.engines.community import community_id

    dave, erin = (v1_id(f"{name}@example.com") for name in ("dave", "erin"))
    before, after = lifecycle.communities_before, lifecycle.communities_after
    assert (before.inserted, before.communities, before.largest) == (6, 2, 4)
    assert before.quality is None, "the hand-written history has no labelled truth"
    first = {e: versions[-1]["community_id"] for e, versions in lifecycle.community_rows_before.items()}
    assert first == {
        **dict.fromkeys((ANN, BOB, PROMO, CAROL), community_id([ANN, BOB, PROMO, CAROL])),
        **dict.fromkeys((dave, erin), community_id([dave, erin])),
    }

    assert (after.inserted, after.regrouped, after.retracted, after.unchanged) == (0, 5, 1, 0)
    rows = lifecycle.community_rows_after
    (promo,) = rows[PROMO]
    assert (promo["status"], promo["superseded_by"]) == ("retracted", None)
    assert promo["supersede_reason"] == f"not in the correlation graph under community@1 (run {after.run_id})"
    three = community_id([ANN, BOB, CAROL])
    for entity in (ANN, BOB, CAROL):
        old, new = rows[entity]
        assert (old["status"], old["superseded_by"], new["status"]) == ("superseded", three, "authoritative")
        assert old["supersede_reason"] == f"moved to {three} under community@1 (run {after.run_id})"
        assert (new["community_id"], new["size"], new["run_id"]) == (three, 3, after.run_id)
    for entity in (dave, erin):
        old, new = rows[entity]
        assert old["community_id"] == new["community_id"] == community_id([dave, erin])
        assert old["supersede_reason"].startswith("rescored under community@1")
        assert new["pagerank"] == pytest.approx(1 / 5) != old["pagerank"]
    measured = ledger_of(lifecycle.lakehouse, after.run_id, CommunitiesMeasured)
    assert [(m.basis, m.report) for m in measured] == [("none", {})]


def test_a_publication_reconciles_the_waiting_provisional_rows_into_the_four_outcomes(
    shipped_lakehouse: Any, engines: Any
) -> None:
    """Issue 38: the stream's provisional rows waiting when a correction is published are
    reconciled against what the publication serves, each of the four outcomes by name and count.

    The stream (ER v1, as the history was decided) claimed three pairs before the replay's
    publication, written with the stream's own function: (bob, ann), which the restatement
    keeps with the same confidence (agree); (dave, erin) at another confidence (batch stronger);
    and (ann+promo, carol), which ER v2 restates as (ann, carol) (a false positive once
    published). The published (ann, carol) row is the stream's recall gap (missed)."""
    from workloads.policies import load_streaming_policy

    gold = seed(shipped_lakehouse)
    registry, plan = shipped_lakehouse.registry, plan_with()
    clock = FixedClock(START, step=timedelta(seconds=1))
    out = run_replay(registry, plan, engines=engines, clock=clock)
    approve(registry, out.run_id, by="risk-lead", clock=clock)
    ack(registry, "fraud-ops", out.run_id, by="ops-bot", clock=clock)

    served = current_pairs(gold)

    agree, stronger = device(BOB, ANN), device(v1_id("dave@example.com"), v1_id("erin@example.com"))
    restated, gap = device(PROMO, CAROL), device(ANN, CAROL)
    assert {agree, stronger, restated} <= set(served), sorted(served)
    claimed = [served[p]["correlation_id"] for p in (agree, stronger, restated)]
    claims = gold.read().where(F.col("correlation_id").isin(*claimed))
    stronger_id = served[stronger]["correlation_id"]
    claims = claims.withColumn(
        "confidence",
        F.when(F.col("correlation_id") == stronger_id, F.lit(0.01)).otherwise(F.col("confidence")),
    )
    write_claims(shipped_lakehouse, claims)

    result = publish(registry, out.run_id, clock=clock)
    assert result.status == "published"
    published = current_pairs(gold)
    assert {agree, stronger} <= set(published)
    assert restated not in published
    missed = missed_pairs(published, {agree, stronger, restated})
    assert missed == {gap}, sorted(missed)
    expected = {"agree": 1, "batch_stronger": 1, "false_positive": 1, "missed": 1}
    assert result.provisional is not None
    assert dict(result.provisional.outcomes) == expected
    assert result.provisional.run_id == out.run_id

    reconciled = reconciled_view(agree=agree, stronger=stronger, retracted=restated, missed=missed)
    assert view_outcomes(shipped_lakehouse) == reconciled
    assert recorded_outcomes(shipped_lakehouse, out.run_id) == expected
    # the retracted claim is announced to each streaming consumer, once, with counts and no id
    streaming = load_streaming_policy()
    notices = stream_notices(shipped_lakehouse, out.run_id)
    assert sorted(m.consumer for m in notices) == sorted(streaming.consumers)
    assert all(json.loads(m.payload)["retracted"] == 1 for m in notices)
    assert not any(i in m.payload for m in notices for i in (PROMO, CAROL)), "counts only, no identifier"
    # a rerun of the publication reconciles nothing twice and announces nothing again
    again = publish(registry, out.run_id, clock=clock)
    assert again.provisional is None
    assert stream_notices(shipped_lakehouse, out.run_id) == notices
    assert view_outcomes(shipped_lakehouse) == reconciled
