"""A producer change replays through the same flow: correlation 1 -> 2.

The plan is the shipped ``conf/plans/correlation-v2-rescoring.yaml``.

The hand-written history (tests.replay_history) plus frank, a third user of dave's and
erin's device d5, built through the product under the shipped ``conf/engines.yaml`` on
2026-03-01 (ER v1 and correlation v1 decide). correlation@2 takes effect 2026-11-25; it
weighs d5 (three entities) 1/2, so the three d5 pairs fall from 0.5 to 0.333333, and it adds
``weight`` to every row's evidence: every row is restated, none is retracted.

One story on the shipped mixed-format default (module-scoped):

1. 2026-11-20, before correlation@2 takes effect: the dry run scopes the whole answer on
   the resolver in force (ER v1: v2 and v3 wait for a published restatement); a correction
   is refused before anything is recorded; a comparison runs and is never publishable.
2. 2026-11-26: the correction stops at awaiting_approval with verdict publish; approved,
   acknowledged, published.
3. 2026-11-27: the next forward Gold build runs correlation@2 (in effect, its restatement
   published) and rewrites nothing; then the publication is rolled back.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lakehouse.config import LakehouseConfig
from lakehouse.errors import ReplayRefusedError, UsageError
from ledger import open_ledger
from ledger.clock import FixedClock
from ledger.engines import load_engines
from ledger.entries import Notification, RunStarted
from ledger.reader import LedgerReader
from tests.conftest import Lakehouse, drop_all
from tests.replay_history import (
    EVENTS,
    GOLD,
    assert_store_invariants,
    event,
    ledger_of,
    pair,
    refusal,
    rows,
    v1_id,
    write_deliveries,
)
from workloads.engines.correlation import confidence, confidence_v2
from workloads.replay.identity import change_kind, resolve_engines
from workloads.replay.plan import CorrectionPlan, Purpose, load_plan
from workloads.vocabulary import ChangeKind

REPO = Path(__file__).resolve().parents[3]
PLAN = REPO / "conf" / "plans" / "correlation-v2-rescoring.yaml"
ER_PLAN = REPO / "conf" / "plans" / "er-v3-recorrelation.yaml"
ENGINES = REPO / "conf" / "engines.yaml"
BUILT = datetime(2026, 3, 1, tzinfo=UTC)
BEFORE_EFFECTIVE = datetime(2026, 11, 20, tzinfo=UTC)
EFFECTIVE = datetime(2026, 11, 26, tzinfo=UTC)
LATER = datetime(2026, 11, 27, tzinfo=UTC)
FRANK = event("l6", "logins", "2025-03-06T10:00:00", "frank@example.com", device="d5", line=4)
DAVE, ERIN, FRANK_ID = (v1_id(f"{n}@example.com") for n in ("dave", "erin", "frank"))


def plan(purpose: Purpose = Purpose.CORRECTION) -> CorrectionPlan:
    return load_plan(PLAN).with_purpose(purpose)


# -- the kind of change (no Spark) -------------------------------------------------------------


def test_the_catalog_says_which_kind_of_change_a_plan_is() -> None:
    catalog = load_engines(ENGINES)
    assert change_kind(plan(), catalog) is ChangeKind.PRODUCER
    assert change_kind(load_plan(ER_PLAN), catalog) is ChangeKind.RESOLVER


def test_a_producer_change_runs_on_the_resolver_it_is_given_and_labels_rows_like_gold() -> None:
    catalog = load_engines(ENGINES)
    on_v3 = resolve_engines(plan(), catalog, resolver=catalog.resolve("entity_resolution", 3))
    assert (on_v3.producer.ref, on_v3.change) == ("correlation@2", "correlation@1 -> correlation@2")
    assert on_v3.label == "correlation@2;entity_resolution@3"
    assert [i.ref for i in on_v3.identities] == ["correlation@1", "correlation@2", "entity_resolution@3"]
    assert [r.ref for r in on_v3.resolutions] == ["entity_resolution@3", "entity_resolution@3"]
    on_v1 = resolve_engines(plan(), catalog, resolver=catalog.resolve("entity_resolution", 1))
    assert on_v1.label == "correlation@2", "Gold labels rows on v1 entities with the producer alone"
    er = resolve_engines(load_plan(ER_PLAN), catalog)
    assert [r.ref for r in er.resolutions] == ["entity_resolution@1", "entity_resolution@3"]


def test_a_producer_change_names_no_downstream_and_needs_its_resolver() -> None:
    catalog = load_engines(ENGINES)
    raw = plan().model_dump(mode="json", by_alias=True)
    raw["engine_change"]["downstream"] = ["entity_daily"]
    with pytest.raises(UsageError, match="downstream must be empty"):
        resolve_engines(
            CorrectionPlan.model_validate(raw), catalog, resolver=catalog.resolve("entity_resolution", 1)
        )
    with pytest.raises(UsageError, match="resolver in force"):
        resolve_engines(plan(), catalog)


# -- the story on both formats (Spark) ------------------------------------------------------------


@dataclass(frozen=True)
class Story:
    lakehouse: Lakehouse
    served: dict[tuple[str, str], dict[str, Any]]
    scope: Any
    early_correction: Any
    entries_around_refusal: tuple[int, int]
    comparison: Any
    replayed: Any
    published: Any
    rows_published: dict[tuple[str, str], dict[str, Any]]
    correlations_version_published: int | None
    later_gold_started: RunStarted
    correlations_version_after_gold: int | None
    rolled_back: Any
    rows_rolled_back: dict[tuple[str, str], dict[str, Any]]


def _story(lh: Lakehouse, history: Path) -> Story:
    from workloads.gold.quality import medallion_gate as gate
    from workloads.pipeline import run_gold, run_ingest, run_silver
    from workloads.replay import ack, approve, plan_scope, publish, rollback, run_replay
    from workloads.silver.lateness import load_lateness_policy

    registry, engines = lh.registry, load_engines(ENGINES)
    clock = FixedClock(BUILT, step=timedelta(seconds=1))
    ledger = open_ledger(registry, clock=clock)
    source = write_deliveries(history, [*EVENTS, FRANK])
    for feed in ("orders", "logins"):
        run_ingest(registry, ledger, clock, feed=feed, source=source)
    run_silver(registry, ledger, clock, policy=load_lateness_policy(), gate=gate)
    run_gold(registry, ledger, clock, gate=gate)
    gold = registry.get(GOLD)
    served = rows(gold)

    def entries() -> int:
        return len(LedgerReader.for_registry(registry).records())

    early = FixedClock(BEFORE_EFFECTIVE, step=timedelta(seconds=1))
    scope = plan_scope(registry, plan(), engines=engines, clock=early)
    before = entries()
    refused = refusal(lambda: run_replay(registry, plan(), engines=engines, clock=early))
    after = entries()
    compared = run_replay(registry, plan(Purpose.COMPARISON), engines=engines, clock=early)

    clock = FixedClock(EFFECTIVE, step=timedelta(seconds=1))
    out = run_replay(registry, plan(), engines=engines, clock=clock)
    approve(registry, out.run_id, by="risk-lead", clock=clock)
    ack(registry, "fraud-ops", out.run_id, by="ops-bot", clock=clock)
    published = publish(registry, out.run_id, clock=clock)
    rows_published, version_published = rows(gold), gold.current_version()

    clock = FixedClock(LATER, step=timedelta(seconds=1))
    report = run_gold(registry, open_ledger(registry, clock=clock), clock, gate=gate)
    started = next(
        e for e in LedgerReader.for_registry(registry).by_run(report.run_id) if isinstance(e, RunStarted)
    )
    version_after_gold = gold.current_version()
    back = rollback(registry, out.run_id, clock=clock, reason="test: the producer change rolls back too")
    return Story(
        lakehouse=lh,
        served=served,
        scope=scope,
        early_correction=refused,
        entries_around_refusal=(before, after),
        comparison=compared,
        replayed=out,
        published=published,
        rows_published=rows_published,
        correlations_version_published=version_published,
        later_gold_started=started,
        correlations_version_after_gold=version_after_gold,
        rolled_back=back,
        rows_rolled_back=rows(gold),
    )


@pytest.fixture(scope="module")
def story(
    spark_session: object,
    lakehouse_config: LakehouseConfig,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Story]:
    config = lakehouse_config.model_copy(update={"instance": "prodmix"})
    env = Lakehouse(spark_session, config)
    yield _story(env, tmp_path_factory.mktemp("producer") / "history")
    drop_all(env.registry)


def _current(content: dict[tuple[str, str], dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {pair(r): r for r in content.values() if r["status"] in ("provisional", "authoritative")}


D5_PAIRS = {("shared_device", *sorted(p)) for p in ((DAVE, ERIN), (DAVE, FRANK_ID), (ERIN, FRANK_ID))}


@pytest.mark.spark
def test_the_dry_run_scopes_the_whole_answer_on_the_resolver_in_force(story: Story) -> None:
    scope, served = story.scope, _current(story.served)
    assert len(served) == 6, served.keys()
    assert scope.change_kind == "producer"
    assert scope.engine_change == "correlation@1 -> correlation@2"
    assert scope.engine_label == "correlation@2", "ER v1 is in force: v2 and v3 wait for a published replay"
    assert scope.affected_entity_count == scope.recomputed_entity_count == 7
    assert (scope.to_supersede, scope.to_retract, scope.to_insert, scope.unchanged) == (6, 0, 6, 0)


@pytest.mark.spark
def test_before_it_takes_effect_a_correction_is_refused_and_a_comparison_runs(story: Story) -> None:
    refused = story.early_correction
    assert isinstance(refused, ReplayRefusedError)
    assert "correlation@2 takes effect 2026-11-25, after this replay's date 2026-11-20" in str(refused)
    before, after = story.entries_around_refusal
    assert after == before, "a refused correction records nothing"
    compared = story.comparison
    assert (compared.purpose, compared.status) == ("comparison", "compared")
    assert compared.decision["verdict"] == "publish"
    assert compared.diff["changed"] == 6


@pytest.mark.spark
def test_the_correction_publishes_re_scored_rows_and_supersedes_every_old_one(story: Story) -> None:
    out = story.replayed
    assert (out.status, out.decision["verdict"]) == ("awaiting_approval", "publish")
    assert story.published.status == "published"
    after = story.rows_published
    assert_store_invariants(after)
    current = _current(after)
    assert set(current) == set(_current(story.served))
    for key, row in current.items():
        assert (row["engine"], row["run_id"]) == ("correlation@2", out.run_id), key
        assert '"weight":' in row["evidence"], key
        weight = 0.5 if key in D5_PAIRS else 1.0
        assert row["confidence"] == confidence_v2([weight], 1, 1), key
        assert (key in D5_PAIRS) == (row["confidence"] != confidence(1, 1, 1)), key
    old = [r for r in after.values() if r["status"] == "superseded"]
    assert len(old) == 6
    assert all(r["superseded_by"] == r["correlation_id"] for r in old), "same pair, same id, new version"
    assert all("restated under correlation@2" in r["supersede_reason"] for r in old)
    assert len(ledger_of(story.lakehouse, out.run_id, Notification)) == 2


@pytest.mark.spark
def test_the_next_gold_build_runs_the_new_producer_and_rewrites_nothing_then_rollback_restores(
    story: Story,
) -> None:
    started = story.later_gold_started
    in_force: Any = started.parameters["engines_in_force"]
    chosen = in_force["correlation"]
    assert chosen["engine"] == "correlation@2", chosen
    assert f"published by run {story.replayed.run_id}" in chosen["reason"], chosen
    assert "correlation@2" in {e.ref for e in started.engines}
    assert story.correlations_version_after_gold == story.correlations_version_published
    assert story.rolled_back.run_id == story.replayed.run_id
    assert _current(story.rows_rolled_back) == _current(story.served)
