"""Forward builds follow the engine versions in force, and never rewrite history in place.

One story on the shipped mixed-format default, built once through the product (deliveries, recorded ingest /
Silver / Gold runs, the ER v2 replay, approval, ack, publication) with the shipped
``conf/engines.yaml`` (ER v2 takes effect 2026-11-01), dates controlled by the clock:

1. 2026-10-20: the hand-written history (tests.replay_history) is built: ER v1 decides
   (v2 is not effective yet).
2. 2026-10-25: bob uses device d1 once more and dave's login is corrected to device d6.
   Gold supersedes the (bob, ann) row by its rebuilt successor ("rebuilt: 1 new input
   events in window") and retracts (dave, erin); ``asof`` before the build still answers
   with the old rows, by both routes and both readers.
3. 2026-11-10: gina and hank arrive. ER v2 is effective but restates history built by
   v1 and nothing publishing it is recorded: v1 still decides, and run_started says why.
   Then the er-v2-recorrelation replay is run, approved, acknowledged and published.
4. 2026-11-11: ann+promo orders on gina's device. Silver resolves with v2 (the order is
   ann's), Gold labels its new rows ``correlation@1;entity_resolution@2`` and leaves the
   published restatement exactly as it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lakehouse.config import LakehouseConfig
from lakehouse.errors import EngineFingerprintError
from ledger import Clock, open_ledger
from ledger.clock import FixedClock
from ledger.engines import load_engines
from ledger.entries import RunFinished, RunStarted
from ledger.reader import LedgerReader
from tests.conftest import Lakehouse, drop_all
from tests.replay_history import (
    ANN,
    BOB,
    GOLD,
    LABEL,
    LATER_EVENTS,
    PROMO,
    assert_store_invariants,
    build,
    event,
    pair,
    plan_with,
    rows,
    v1_id,
    write_deliveries,
)
from workloads.asof import PythonReader, SparkReader, asof

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
ENGINES = REPO / "conf" / "engines.yaml"
DAVE, ERIN, GINA, HANK = (v1_id(f"{n}@example.com") for n in ("dave", "erin", "gina", "hank"))
DAVE_ERIN = ("shared_device", *sorted((DAVE, ERIN)))
"""dave and erin's shared device d5, as stored (entity_a sorts before entity_b)."""
BOB_AGAIN = event("l6", "logins", "2025-03-07T10:00:00", "bob@example.com", device="d1", line=1)
DAVE_CORRECTED = (
    '{"schema_version":"1","event_id":"l2","event_time":"2025-03-03T10:00:00Z",'
    '"customer_email":"dave@example.com","device_id":"d6","ip":"10.0.0.1","success":true,"revision":2}\n'
)
PROMO_ORDER = event(
    "o4", "orders", "2025-03-10T10:00:00", "ann+promo@example.com", device="d9", card="c1", line=1
)


def day(text: str) -> FixedClock:
    return FixedClock(datetime.fromisoformat(text).replace(tzinfo=UTC), step=timedelta(seconds=1))


@dataclass(frozen=True)
class Story:
    lakehouse: Lakehouse
    gold_runs: tuple[str, ...]
    silver_runs: tuple[str, ...]
    before_rebuild: datetime
    after_rebuild: datetime
    rows_before_rebuild: dict[tuple[str, str], dict[str, Any]]
    rows_after_rebuild: dict[tuple[str, str], dict[str, Any]]
    replay_run: str
    rows_published: dict[tuple[str, str], dict[str, Any]]
    rows_after_v2: dict[tuple[str, str], dict[str, Any]]
    silver_after_v2: dict[str, dict[str, Any]]

    def started(self, run_id: str) -> RunStarted:
        (entry,) = [
            e
            for e in LedgerReader.for_registry(self.lakehouse.registry).by_run(run_id)
            if isinstance(e, RunStarted)
        ]
        return entry


def forward(lh: Lakehouse, clock: Clock, feeds: tuple[str, ...], history: Path) -> tuple[str, str]:
    """The next recorded ingest -> Silver -> Gold runs, with the shipped engines file."""
    from workloads.gold.quality import medallion_gate as gate
    from workloads.pipeline import run_gold, run_ingest, run_silver
    from workloads.silver.lateness import load_lateness_policy

    ledger = open_ledger(lh.registry, clock=clock)
    for feed in feeds:
        run_ingest(lh.registry, ledger, clock, feed=feed, source=history)
    silver = run_silver(lh.registry, ledger, clock, policy=load_lateness_policy(), gate=gate)
    gold = run_gold(lh.registry, ledger, clock, gate=gate)
    return silver.run_id, gold.run_id


def live_story(lh: Lakehouse, history: Path) -> Story:
    from workloads.replay import ack, approve, publish, run_replay

    registry = lh.registry
    first = build(lh, day("2026-10-20T08:00:00"), history)
    ledger = LedgerReader.for_registry(registry)
    first_silver = next(
        e.run_id
        for e in ledger.entries(kind="run_started")
        if isinstance(e, RunStarted) and e.command == "build silver"
    )
    before = datetime(2026, 10, 24, tzinfo=UTC)
    served = rows(registry.get(GOLD))

    write_deliveries(history, [BOB_AGAIN])
    correction = history / "logins" / "2025-03-09"
    correction.mkdir(parents=True)
    (correction / "logins-2025-03-09-1.jsonl").write_text(DAVE_CORRECTED, encoding="utf-8")
    rebuild_clock = day("2026-10-25T08:00:00")
    second_silver, second_gold = forward(lh, rebuild_clock, ("logins",), history)
    after = rebuild_clock.now()
    rebuilt = rows(registry.get(GOLD))

    write_deliveries(history, LATER_EVENTS)
    clock = day("2026-11-10T08:00:00")
    third_silver, third_gold = forward(lh, clock, ("logins",), history)
    engines = load_engines(ENGINES)
    out = run_replay(registry, plan_with(), engines=engines, clock=clock)
    assert (out.status, out.decision["verdict"]) == ("awaiting_approval", "publish")
    approve(registry, out.run_id, by="risk-lead", clock=clock)
    ack(registry, "fraud-ops", out.run_id, by="ops-bot", clock=clock)
    publish(registry, out.run_id, clock=clock)
    published = rows(registry.get(GOLD))

    write_deliveries(history, [PROMO_ORDER])
    fourth_silver, fourth_gold = forward(lh, day("2026-11-11T08:00:00"), ("orders",), history)
    silver = {r["event_id"]: r.asDict() for r in registry.get("silver.events").read().collect()}
    return Story(
        lakehouse=lh,
        gold_runs=(first.gold_run, second_gold, third_gold, fourth_gold),
        silver_runs=(str(first_silver), second_silver, third_silver, fourth_silver),
        before_rebuild=before,
        after_rebuild=after,
        rows_before_rebuild=served,
        rows_after_rebuild=rebuilt,
        replay_run=out.run_id,
        rows_published=published,
        rows_after_v2=rows(registry.get(GOLD)),
        silver_after_v2=silver,
    )


@pytest.fixture(scope="module")
def story(
    spark_session: object,
    lakehouse_config: LakehouseConfig,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Story]:
    config = lakehouse_config.model_copy(update={"instance": "forcemix"})
    env = Lakehouse(spark_session, config)
    yield live_story(env, tmp_path_factory.mktemp("in-force") / "history")
    drop_all(env.registry)


def in_force(entry: RunStarted) -> dict[str, dict[str, str]]:
    value = entry.parameters["engines_in_force"]
    assert isinstance(value, dict)
    return value  # type: ignore[return-value]


def test_builds_before_the_effective_date_and_before_the_publication_keep_er_v1(story: Story) -> None:
    first = story.started(story.silver_runs[0])
    assert first.parameters["processing_date"] == "2026-10-20"
    assert [e.ref for e in first.engines] == ["entity_resolution@1"]
    reason = in_force(first)["entity_resolution"]["reason"]
    assert "latest version effective on 2026-10-20" in reason
    assert "entity_resolution@2 takes effect 2026-11-01" in reason
    schemas = first.engines[0].input_schemas
    assert schemas["silver.events"].startswith("sha256:")
    assert schemas["source:orders"] == "1,2"

    waiting = story.started(story.silver_runs[2])
    assert waiting.parameters["processing_date"] == "2026-11-10"
    assert [e.ref for e in waiting.engines] == ["entity_resolution@1"]
    reason = in_force(waiting)["entity_resolution"]["reason"]
    assert (
        "not in force yet: entity_resolution@2 (effective 2026-11-01) restates history built by "
        "entity_resolution@1 and waits for a replay publishing it"
    ) in reason


def test_after_the_publication_the_next_days_build_resolves_with_er_v2(story: Story) -> None:
    started = story.started(story.silver_runs[3])
    assert [e.ref for e in started.engines] == ["entity_resolution@2"]
    assert f"was published by run {story.replay_run}" in in_force(started)["entity_resolution"]["reason"]
    assert {r["resolver"] for r in story.silver_after_v2.values()} == {"entity_resolution@2"}
    assert story.silver_after_v2["o4"]["entity_id"] == ANN, "ann+promo's new order is ann's under v2"

    gold = story.started(story.gold_runs[3])
    assert [e.ref for e in gold.engines] == ["entity_daily@1", "baselines@1", "correlation@1"]
    assert all(e.input_schemas for e in gold.engines)
    assert "correlation@2 takes effect 2026-11-25" in in_force(gold)["correlation"]["reason"]

    after, published = story.rows_after_v2, story.rows_published
    assert_store_invariants(after)
    assert {k: v for k, v in after.items() if k in published} == published, "the restatement stands"
    new = {pair(r): r for k, r in after.items() if k not in published}
    assert set(new) == {("shared_device", *sorted((ANN, other))) for other in (GINA, HANK)}
    assert {r["engine"] for r in new.values()} == {LABEL}
    current = [r for r in after.values() if r["status"] in ("provisional", "authoritative")]
    assert PROMO not in {r["entity_a"] for r in current} | {r["entity_b"] for r in current}


def test_a_rebuild_supersedes_or_retracts_instead_of_updating_in_place(story: Story) -> None:
    before, after = story.rows_before_rebuild, story.rows_after_rebuild
    first, second = story.gold_runs[:2]
    assert_store_invariants(after)
    assert set(before) <= set(after), "no row version is lost"
    old = after[next(k for k, r in before.items() if pair(r) == ("shared_device", BOB, ANN))]
    assert old["run_id"] == first
    assert old["status"] == "superseded"
    assert old["superseded_at"] is not None
    assert old["supersede_reason"].startswith("rebuilt: 1 new input events in window")
    (successor,) = [r for k, r in after.items() if k not in before and pair(r) == ("shared_device", BOB, ANN)]
    assert (successor["correlation_id"], successor["run_id"], successor["status"]) == (
        old["superseded_by"],
        second,
        "authoritative",
    )
    gone = after[next(k for k, r in before.items() if pair(r) == DAVE_ERIN)]
    assert (gone["status"], gone["superseded_by"]) == ("retracted", None)
    assert gone["supersede_reason"].startswith("retracted: no longer produced by correlation@1")
    (finished,) = [
        e
        for e in LedgerReader.for_registry(story.lakehouse.registry).by_run(second)
        if isinstance(e, RunFinished)
    ]
    counts = finished.counts  # the run's counts say the same
    assert (counts["correlations_superseded"], counts["correlations_retracted"]) == (1, 1)


def test_asof_before_the_rebuild_still_answers_with_the_old_rows_by_both_routes(story: Story) -> None:
    lh = story.lakehouse
    tables = sorted(lh.config.tables)
    old_evidence = {pair(r): r["evidence"] for r in story.rows_before_rebuild.values()}
    for reader in (SparkReader(lh.registry), PythonReader(lh.config)):
        then = asof(reader, GOLD, story.before_rebuild, known_tables=tables, entity=BOB)
        assert then.routes_agree is True, (reader.name, then.first_difference)
        assert [(pair(r), r["evidence"], r["status_at"]) for r in then.rows] == [
            (("shared_device", BOB, ANN), old_evidence[("shared_device", BOB, ANN)], "current")
        ]
        assert then.rows[0]["since"]["status"] == "superseded", "and what became of it since"
        gone = asof(reader, GOLD, story.before_rebuild, known_tables=tables, entity=DAVE)
        assert gone.routes_agree is True
        assert [pair(r) for r in gone.rows] == [DAVE_ERIN]

        now = asof(reader, GOLD, story.after_rebuild, known_tables=tables, entity=BOB)
        assert now.routes_agree is True
        assert [r["provenance"]["run_id"] for r in now.rows] == [story.gold_runs[1]]
        assert asof(reader, GOLD, story.after_rebuild, known_tables=tables, entity=DAVE).rows == ()


def test_a_build_whose_engine_code_changed_without_a_new_version_is_refused(
    story: Story, tmp_path: Path
) -> None:
    from workloads.pipeline import run_gold, run_silver
    from workloads.silver.lateness import load_lateness_policy

    registry = story.lakehouse.registry
    shipped = ENGINES.read_text(encoding="utf-8")
    clock = day("2026-11-12T08:00:00")
    ledger = open_ledger(registry, clock=clock)
    entries = len(ledger.reader.records())
    versions = {t.name: t.current_version() for t in registry if t.exists()}
    policy = load_lateness_policy()
    tampered = {}
    for engine, version in (("entity_resolution", 2), ("baselines", 1)):
        declared = load_engines(ENGINES).resolve(engine, version)
        tampered[engine] = tmp_path / f"{engine}.yaml"
        tampered[engine].write_text(shipped.replace(declared.code_fingerprint, "ab" * 32), encoding="utf-8")
    silver_engines, gold_engines = tampered["entity_resolution"], tampered["baselines"]
    with pytest.raises(EngineFingerprintError, match="entity_resolution@2's code changed"):
        run_silver(registry, ledger, clock, policy=policy, engines_path=silver_engines)
    with pytest.raises(EngineFingerprintError, match="baselines@1's code changed"):
        run_gold(registry, ledger, clock, engines_path=gold_engines)
    assert len(ledger.reader.records()) == entries, "refused before anything was recorded"
    assert {t.name: t.current_version() for t in registry if t.exists()} == versions
