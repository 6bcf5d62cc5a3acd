"""Results as people read them (:mod:`jobs.render`) and as ``--json`` dumps them (their fields)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from jobs.output import TableView, plain, render_plain
from jobs.render import (
    indented,
    render_asof,
    render_communities,
    render_maintenance,
    render_replay,
    render_scope,
)
from workloads.asof import AsOfAnswer, Route
from workloads.maintenance import MaintenanceReport, TableMaintenance
from workloads.replay import ReplayOutcome
from workloads.replay.scope import Estimate, ProducingRun, ReplayScope

AT = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def scope(bytes_to_read: int = 10, cap: int = 100) -> ReplayScope:
    return ReplayScope(
        run_id="replay-1",
        plan="er-v2",
        purpose="correction",
        table="gold.correlations",
        engine_change="entity_resolution 1 -> 2",
        engine_label="correlation@1+entity_resolution@2",
        pins={"silver.events": 3},
        event_range=(None, None),
        affected_entity_count=12,
        affected_entities=tuple(f"e{i:02}" for i in range(12)),
        old_entities=("e00",),
        new_entities=("e01",),
        recomputed_entity_count=13,
        partitions=("2025-01",),
        changed_partitions=("2025-01",),
        serving_rows_in_scope=4,
        new_rows=5,
        to_supersede=1,
        to_retract=1,
        to_insert=2,
        unchanged=2,
        producing_runs=(ProducingRun("gold-1", 4, ("correlation@1",), True),),
        estimate=Estimate(bytes_to_read, 40, 2, 5, cap),
    )


def test_a_dry_run_dumps_its_budget_verdict_and_lists_ten_entities() -> None:
    dumped = plain(scope())
    assert dumped["estimate"]["within_budget"] is True
    assert plain(scope(bytes_to_read=101))["estimate"]["within_budget"] is False
    assert dumped["pins"] == {"silver.events": 3}
    lines = render_scope(scope())
    assert lines[0] == "replay replay-1 of plan er-v2 (correction) on gold.correlations"
    assert lines[3] == "inputs from: the current versions"
    assert lines[4] == "affected entities: 12: e00, e01, e02, e03, e04, e05, e06, e07, e08, e09 (+2 more)"
    assert lines[-1] == "estimate: read 10 bytes / 40 rows in 2 files (cap 100), write 5 rows"


def test_a_replay_shows_its_high_impact_changes_as_a_table_cut_where_asked() -> None:
    changes = tuple(
        {
            "kind": "superseded",
            "old_id": f"o{i}",
            "new_id": None,
            "old_confidence": 0.9,
            "new_confidence": 0.1,
        }
        for i in range(7)
    )
    outcome = ReplayOutcome(
        run_id="replay-1",
        plan="er-v2",
        purpose="correction",
        status="awaiting_approval",
        table="gold.correlations",
        candidate="cand",
        base_version=3,
        partitions=("2025-01",),
        diff={"added": 1},
        decision={"verdict": "publish", "owner": "risk"},
        high_impact=changes,
        scope=scope(),
    )
    dumped = json.loads(json.dumps(plain(outcome)))
    assert (dumped["run_id"], dumped["status"], dumped["decision"]["verdict"]) == (
        "replay-1",
        "awaiting_approval",
        "publish",
    )
    assert dumped["scope"]["estimate"]["within_budget"] is True

    blocks = render_replay(outcome, high_impact_shown=5)
    table = next(b for b in blocks if isinstance(b, TableView))
    assert [r["old"] for r in table.rows] == ["o0", "o1", "o2", "o3", "o4"]
    assert table.rows[0]["new"] == "-"
    assert "... 2 more high-impact changes in the review file" in blocks
    assert blocks[-1] == "next: lakehouse approve replay-1 --by NAME, then lakehouse publish replay-1"
    nested = render_plain(["replay:", *indented(blocks)])
    assert "  replay replay-1 of plan er-v2 (correction): awaiting_approval" in nested
    assert len(render_replay(outcome)[6].rows) == 7  # type: ignore[union-attr]


def test_a_replays_steps_are_one_line_and_dumped_with_their_jobs() -> None:
    from jobs.render import render_steps
    from lakehouse.meter import StepCost

    steps = (StepCost("setup", 1.25, 3), StepCost("analyse", 8.5, 127))
    assert render_steps(steps) == (
        "steps: setup 1.2 s (3 jobs), analyse 8.5 s (127 jobs); in all 9.8 s, 130 Spark jobs"
    )
    dumped = json.loads(json.dumps(plain(steps)))
    assert dumped[1] == {"step": "analyse", "seconds": 8.5, "spark_jobs": 127}


def test_an_asof_answer_dumps_route_row_counts_and_says_when_routes_disagree() -> None:
    row = {
        "correlation_id": "c1",
        "run_id": "gold-1",
        "recorded_at": AT,
        "provenance": {
            "run_id": "gold-1",
            "command": "build gold",
            "engines": ("correlation@1",),
            "inputs": {"silver.events": 3},
            "published_at": AT,
        },
    }
    answer = AsOfAnswer(
        table="gold.correlations",
        at=AT,
        entity=None,
        where=None,
        reader="spark",
        routes={"a": Route("a", True, 1, 7, ""), "b": Route("b", True, 2, 6, "build of run gold-1")},
        routes_agree=False,
        first_difference={"key": {"correlation_id": "c1", "run_id": "gold-1"}},
        rows=(row,),
    )
    dumped = json.loads(json.dumps(plain(answer)))
    assert dumped["routes"]["a"] == {"route": "a", "available": True, "rows": 1, "version": 7, "note": ""}
    assert dumped["routes_agree"] is False
    assert dumped["rows"][0]["provenance"]["published_at"] == AT.isoformat()
    assert answer.exit_code == 7
    lines = render_asof(answer)
    assert lines[1:3] == [
        "  route a: 1 rows (version 7)",
        "  route b: 2 rows (version 6); build of run gold-1",
    ]
    assert lines[3].startswith("  !!! ROUTES DISAGREE")
    assert (
        "    by run gold-1 (build gold), engines correlation@1, published 2026-11-29T12:00:00+00:00" in lines
    )


def test_maintenance_shows_each_tables_action_and_sizes_and_what_was_kept() -> None:
    kept = ("version 3: published by run r-1 until 2027-01-01 (protection.audit_window_days = 90)",)
    done = TableMaintenance(
        table="silver.events",
        zone="silver",
        format="iceberg",
        owner="events-team",
        compact=True,
        compacted_to=42,
        expire_before=AT,
        kept=kept,
        live_files_before=9,
        stored_files_before=30,
        stored_bytes_before=3_000_000,
        live_files_after=2,
        stored_files_after=4,
        stored_bytes_after=1_000_000,
    )
    report = MaintenanceReport(
        "data-platform", False, ("LH-1 (placed by counsel)",), (done,), "maintain-1", 2.0
    )
    text = render_plain(render_maintenance(report))
    assert "maintenance run maintain-1, owner data-platform: 2.00 MB freed" in text
    assert "compacted, expired before 2026-11-29" in text
    assert "9 -> 2" in text
    assert "30 -> 4" in text
    assert "legal holds placed: LH-1 (placed by counsel)" in text
    assert f"silver.events: {kept[0]}" in text
    planned = MaintenanceReport("data-platform", True, (), (replace(done, compacted_to=None),))
    assert "dry run, nothing written" in render_plain(render_maintenance(planned))


def test_the_changes_table_shows_the_answer_tables_own_impact_figure() -> None:
    from jobs.render import _changes_table, impact_column

    assert impact_column("gold.correlations") == "confidence", "the declaration's impact column"
    view = _changes_table(
        [{"kind": "superseded", "old_id": "a", "new_id": "b", "old_score": 0.2, "new_score": 0.7}], "score"
    )
    assert view.columns == ["kind", "old", "new", "score"]
    assert view.rows[0]["score"] == "0.2 -> 0.7"


def test_the_demo_draws_the_stalled_feed_and_the_repaired_drift() -> None:
    """``lakehouse demo``'s operations blocks, from their records: the feed held back and both
    progress judgements, the late ingest, the planted keys and both reconcile runs."""
    from datetime import date, timedelta

    from jobs.demo import _drift, _stalled_feed
    from tests.jobs.test_reconcile_cli import report
    from workloads.bronze.ingest import IngestReport, ManifestStatus
    from workloads.operations import FeedStats, load_progress_policy, source_progress
    from workloads.silver.lateness import load_lateness_policy
    from workloads.synthetic.demo import DriftRepair, StalledFeed
    from workloads.synthetic.holdback import HeldFeed

    policy, lateness = load_progress_policy(), load_lateness_policy()

    def judged(last_orders: datetime) -> Any:
        stats = [FeedStats("orders", 10, 0, last_orders, last_orders), FeedStats("logins", 5, 5, AT, AT)]
        return source_progress(stats, lateness, policy, AT)

    held = HeldFeed("orders", ("2026-11-28", "2026-11-29"), date(2026, 11, 25), date(2026, 11, 29))
    late = IngestReport(
        feed="orders",
        run_id="ingest-1",
        manifests=(ManifestStatus("m1", "2026-11-28", ("a.jsonl",), 4, "ingested"),),
        rows_written=4,
    )
    stall = StalledFeed(held, judged(AT - timedelta(days=4)), late, judged(AT - timedelta(hours=6)))
    text = render_plain(_stalled_feed(stall))
    assert (
        "the last 2 deliveries of orders held back (2026-11-28, 2026-11-29; its last delivery 2026-11-25)"
        in text
    )
    assert "STALLED: orders: no delivery for 96 h (expected within 48 h)" in text
    assert "they arrive late: 4 rows ingested from 1 deliveries" in text
    assert text.count("STALLED: orders") == 1, "cleared in the second judgement"

    drift = DriftRepair(
        {"missing": "o1", "divergent": "o2"},
        report(missing=1, divergent=1, repaired=2, samples={"missing": ("o1",), "divergent": ("o2",)}),
        report(),
    )
    text = render_plain(_drift(drift))
    assert "planted by hand in silver.events (missing o1, divergent o2)" in text
    assert "reconcile again:" in text
    assert text.count("reconcile p by k") == 2


def test_communities_say_what_was_found_written_and_measured_or_why_not() -> None:
    from workloads.communities import CommunityBuild
    from workloads.evaluation.communities import community_quality

    quality = community_quality(
        "community@1",
        {"e1": "cm-1", "e2": "cm-1", "e3": "cm-2", "e4": "cm-2"},
        {"p1": "e1", "p2": "e2", "p3": "e3", "p4": "e4"},
        {"R1": ["p1", "p2"]},
    )
    built = CommunityBuild(
        run_id="communities-1",
        engine="community@1",
        method="label_propagation",
        min_confidence=0.5,
        correlations_version=7,
        table="gold.communities",
        version=3,
        entities=4,
        communities=2,
        largest=2,
        iterations=3,
        settled=True,
        pagerank_iterations=7,
        inserted=1,
        regrouped=2,
        retracted=1,
        unchanged=1,
        content_hash="ab" * 32,
        quality=quality,
        quality_note="labelled truth t.json",
    )
    lines = render_communities(built)
    assert lines[0].startswith("communities run communities-1 (community@1, label_propagation over ")
    assert "4 entities, 2 communities of 2 or more (largest 2); 3 iterations, PageRank in 7" in lines[0]
    assert lines[1] == (
        "gold.communities@3: 1 inserted, 2 regrouped or rescored (earlier rows superseded), "
        "1 retracted, 1 unchanged; content hash abababababababab"
    )
    assert lines[2].startswith("against the true rings (2 ring members): adjusted Rand index 1.000")
    assert "1 false communities (2 persons)" in lines[2], "p3 and p4 together, outside every ring"
    unmeasured = render_communities(
        replace(built, quality=None, quality_note="no labelled truth"),
    )
    assert unmeasured[2] == "against the true rings: not measured (no labelled truth)"
    assert "(not settled)" in render_communities(replace(built, settled=False))[0]
    nothing = replace(built, version=None, entities=0, inserted=0, regrouped=0, retracted=0, unchanged=0)
    assert render_communities(nothing)[1].startswith("gold.communities@(empty): 0 inserted")
