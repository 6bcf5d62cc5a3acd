"""A tiny hand-written history for replay and time-travel tests (every expected row is known).

* ``ann@example.com`` (o1: device d1, card c1) and ``bob@example.com`` (o2: device d1) share
  device d1: v1 correlation (bob, ann), January. Under ER v2 it is unchanged (ann keeps her
  v1 id, the smaller of her two keys; nothing of ann+promo touches d1): no churn.
* ``ann+promo@example.com`` (o3: device d2, card c1) is a second entity under v1 and merges
  into ann under v2 (plus-tag and shared card). v1's (ann, ann+promo) shared_card row of
  February is retracted: both sides are one entity now.
* ``carol@example.com`` (l1: device d2) shares d2 with ann+promo: v1's (ann+promo, carol) of
  February is superseded by v2's (ann, carol).
* dave and erin (l2, l3) share device d5 in March: untouched.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from lakehouse.errors import LakehouseError
from lakehouse.tables import Table
from ledger import Clock, open_ledger
from ledger.clock import FixedClock
from ledger.engines import EngineCatalog, fingerprint, load_engines
from ledger.reader import LedgerReader
from workloads.engines.correlation import ENGINE, correlate_v1
from workloads.engines.entity_resolution import resolve_v1
from workloads.gold.correlations import write_correlations
from workloads.replay.plan import CorrectionPlan, Purpose, load_plan

REPO = Path(__file__).resolve().parents[1]
PLAN = REPO / "conf" / "plans" / "er-v2-recorrelation.yaml"
GOLD = "gold.correlations"
LABEL = "correlation@1;entity_resolution@2"
START = datetime(2026, 3, 1, tzinfo=UTC)
GOLD_RECORDED = datetime(2025, 4, 1, tzinfo=UTC)


def v1_id(email: str) -> str:
    return "e1-" + hashlib.sha256(email.encode()).hexdigest()[:16]


ANN, PROMO, BOB, CAROL = (v1_id(f"{n}@example.com") for n in ("ann", "ann+promo", "bob", "carol"))
assert ANN < PROMO, "the merged entity keeps ann's id"


def event(
    eid: str,
    domain: str,
    when: str,
    email: str,
    *,
    device: str | None = None,
    card: str | None = None,
    line: int,
) -> tuple[Any, ...]:
    """One ``silver.events`` row (entity filled by ER v1 when written)."""
    at = datetime.fromisoformat(when).replace(tzinfo=UTC)
    day = at.date()
    order = domain == "orders"
    return (
        eid,
        domain,
        at,
        day,
        day.strftime("%Y-%m"),
        at + timedelta(hours=1),
        day,
        "on_time",
        "1",
        1,
        email,
        None,
        None,
        card,
        device,
        eid if order else None,
        Decimal("10.00") if order else None,
        "EUR" if order else None,
        None,
        None,
        True if domain == "logins" else None,
        None,
        "m-1",
        f"{domain}.jsonl",
        line,
    )


EVENTS = [
    event("o1", "orders", "2025-01-05T10:00:00", "ann@example.com", device="d1", card="c1", line=1),
    event("o2", "orders", "2025-01-06T10:00:00", "bob@example.com", device="d1", card="c2", line=2),
    event("o3", "orders", "2025-02-10T10:00:00", "ann+promo@example.com", device="d2", card="c1", line=3),
    event("l1", "logins", "2025-02-11T10:00:00", "carol@example.com", device="d2", line=1),
    event("l2", "logins", "2025-03-03T10:00:00", "dave@example.com", device="d5", line=2),
    event("l3", "logins", "2025-03-04T10:00:00", "erin@example.com", device="d5", line=3),
]


RAW_TEMPLATES = {
    "orders": (
        '{{"schema_version":"2","event_id":"{eid}","event_time":"{at}Z","customer_email":"{email}",'
        '"card_fingerprint":"{card}","device_id":"{device}","amount":10.00,"currency":"EUR",'
        '"merchant_id":"m-1","revision":1}}'
    ),
    "logins": (
        '{{"schema_version":"1","event_id":"{eid}","event_time":"{at}Z","customer_email":"{email}",'
        '"device_id":"{device}","ip":"10.0.0.1","success":true,"revision":1}}'
    ),
}


def write_deliveries(root: Path, events: list[tuple[Any, ...]] = EVENTS) -> Path:
    """Events as partner deliveries: one JSONL file per feed and day, delivered the day after."""
    for e in events:
        eid, domain, at, card, device = e[0], e[1], e[2], e[13], e[14]
        folder = root / domain / (at.date() + timedelta(days=1)).isoformat()
        folder.mkdir(parents=True, exist_ok=True)
        line = RAW_TEMPLATES[domain].format(
            eid=eid, at=at.strftime("%Y-%m-%dT%H:%M:%S"), email=e[10], card=card, device=device
        )
        with (folder / f"{domain}-{folder.name}-1.jsonl").open("a", encoding="utf-8") as out:
            out.write(line + "\n")
    return root


@dataclass(frozen=True)
class Built:
    """A history built through the product: the Gold table and the run that built it."""

    gold: Table
    gold_run: str
    silver_version: int


def build(lh: Any, clock: Clock, history: Path, *, pin_v1: bool = False) -> Built:
    """EVENTS delivered, ingested, built into Silver (ER v1) and Gold (correlation v1) by the
    product's recorded runs (``workloads.pipeline``): every ledger entry is the product's own.

    ``pin_v1``: Silver is built with ER v1 as an operator pin (``--engine entity_resolution@1``),
    for a clock on which a later version is already in force on a fresh lakehouse."""
    from workloads.gold.quality import medallion_gate as gate
    from workloads.pipeline import run_gold, run_ingest, run_silver
    from workloads.silver.lateness import load_lateness_policy

    registry = lh.registry
    ledger = open_ledger(registry, clock=clock)
    source = write_deliveries(history)
    for feed in ("orders", "logins"):
        run_ingest(registry, ledger, clock, feed=feed, source=source)
    pinned = {"entity_resolution": 1} if pin_v1 else None
    run_silver(registry, ledger, clock, policy=load_lateness_policy(), gate=gate, pinned=pinned)
    gold_report = run_gold(registry, ledger, clock, gate=gate)
    silver_version = registry.get("silver.events").current_version()
    assert silver_version is not None
    return Built(gold=registry.get(GOLD), gold_run=gold_report.run_id, silver_version=silver_version)


LATER_EVENTS = [
    event("l4", "logins", "2025-03-05T10:00:00", "gina@example.com", device="d9", line=4),
    event("l5", "logins", "2025-03-06T10:00:00", "hank@example.com", device="d9", line=5),
]
"""Arriving after the first build: gina and hank share device d9, touching no one before."""
GINA = v1_id("gina@example.com")


def seed_inputs(lh: Any, events: list[tuple[Any, ...]] = EVENTS) -> None:
    """Silver rows (ER v1) and the Bronze rows they came from, written directly: test input,
    no recorded run (for the tests that change their history and want it cheap)."""
    spark, registry, tables = lh.spark, lh.registry, lh.config.tables
    silver = registry.get("silver.events")
    silver.create(if_not_exists=True)
    rows = resolve_v1(spark.createDataFrame(events, tables["silver.events"].schema_ddl))
    silver.append(rows, run_id="silver-1")
    for domain in ("orders", "logins"):
        bronze = registry.get(f"bronze.{domain}")
        bronze.create(if_not_exists=True)
        raw = [
            (f"raw {e[0]}", e[0], e[2], e[5], e[5].date(), "test", "1", e[22], e[23], e[24], "ingest-1")
            for e in events
            if e[1] == domain
        ]
        if raw:
            schema = tables[f"bronze.{domain}"].schema_ddl
            bronze.append(spark.createDataFrame(raw, schema), run_id="ingest-1")


def gold_build(lh: Any, clock: Clock, *, refresh_index: bool = True) -> Built:
    """The product's recorded Gold build (``workloads.pipeline.run_gold``) of the Silver there is.

    ``refresh_index=False``: the job dies after its recorded build, before it rebuilds the
    entity index (the index then lags the store until ``reindex``).
    """
    from unittest import mock

    from workloads.gold.quality import medallion_gate as gate
    from workloads.pipeline import run_gold

    ledger = open_ledger(lh.registry, clock=clock)
    if refresh_index:
        report = run_gold(lh.registry, ledger, clock, gate=gate)
    else:
        with mock.patch("workloads.pipeline.refresh_entity_index", return_value=None):
            report = run_gold(lh.registry, ledger, clock, gate=gate)
    silver_version = lh.registry.get("silver.events").current_version()
    assert silver_version is not None
    return Built(gold=lh.registry.get(GOLD), gold_run=report.run_id, silver_version=silver_version)


def seed(lh: Any) -> Table:
    """Silver and Bronze (:func:`seed_inputs`) and Gold correlations built by v1, all written
    directly (run ``gold-1``, unknown to the ledger), for replay tests that change their history."""
    seed_inputs(lh)
    gold = lh.registry.get(GOLD)
    gold.create()
    built = correlate_v1(lh.registry.get("silver.events").read(), run_id="gold-1", recorded_at=GOLD_RECORDED)
    write_correlations(gold, built, engine=ENGINE, run_id="gold-1")
    return gold


ER_V2_PARAMETERS: dict[str, Any] = {
    "max_keys_per_card": 20,
    "dot_insensitive_domains": ["gmail.com", "googlemail.com"],
}
"""ER v2's parameters as ``conf/engines.yaml`` declares them: the written rule the independent
recount (``workloads.replay.recount``) reads."""


def declared_engines(
    tmp_path: Path, extra: tuple[tuple[str, int, str, str, dict[str, Any]], ...] = ()
) -> EngineCatalog:
    """ER v1 and v2 and correlation v1, declared with their real code fingerprints, then
    ``extra`` versions ``(name, version, implementation, effective_from, parameters)``."""
    implementations = [
        ("entity_resolution", 1, "workloads.engines.entity_resolution:resolve_v1", "2024-01-01", {}),
        (
            "entity_resolution",
            2,
            "workloads.engines.entity_resolution_v2:resolve_v2",
            "2026-01-01",
            ER_V2_PARAMETERS,
        ),
        (
            "correlation",
            1,
            "workloads.engines.correlation:correlate_v1",
            "2024-01-01",
            {"max_entities_per_asset": 50, "types": ["shared_card", "shared_device"]},
        ),
        *extra,
    ]
    items = [
        {
            "name": name,
            "version": version,
            "implementation": implementation,
            "effective_from": effective,
            "description": f"{name} version {version}",
            "parameters": parameters,
            "code_fingerprint": fingerprint(implementation),
        }
        for name, version, implementation, effective, parameters in implementations
    ]
    path = tmp_path / "engines.yaml"
    path.write_text(yaml.safe_dump({"engines": items}, sort_keys=False), encoding="utf-8")
    return load_engines(path)


def plan_with(purpose: Purpose = Purpose.CORRECTION, **operations: Any) -> CorrectionPlan:
    raw = load_plan(PLAN).with_purpose(purpose).model_dump(mode="json", by_alias=True)
    raw["operations"].update(operations)
    return CorrectionPlan.model_validate(raw)


def rows(table: Table) -> dict[tuple[str, str], dict[str, Any]]:
    """Rows by identity (correlation_id, run_id)."""
    return {(r["correlation_id"], r["run_id"]): r.asDict() for r in table.read().collect()}


def pair(row: dict[str, Any]) -> tuple[str, str, str]:
    return row["correlation_type"], row["entity_a"], row["entity_b"]


def naive(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(tzinfo=None)


def assert_store_invariants(content: dict[tuple[str, str], dict[str, Any]]) -> None:
    """No id with two current rows; every superseded row points to an existing successor."""
    current = [
        r["correlation_id"] for r in content.values() if r["status"] in ("provisional", "authoritative")
    ]
    assert len(current) == len(set(current)), "a correlation id has two current rows"
    ids = {r["correlation_id"] for r in content.values()}
    for r in content.values():
        if r["status"] == "superseded":
            assert r["superseded_by"] in ids, r
        assert r["entity_a"] < r["entity_b"]


def ledger_of(lh: Any, run_id: str, kind: type[Any]) -> list[Any]:
    return [e for e in LedgerReader.for_registry(lh.registry).by_run(run_id) if isinstance(e, kind)]


def refusal(call: Callable[[], object]) -> LakehouseError:
    """The error a refused step raised (the step must be refused)."""
    try:
        call()
    except LakehouseError as exc:
        return exc
    raise AssertionError(f"{call} was not refused")


@dataclass(frozen=True)
class Lifecycle:
    """One history per format, built once through the product and never changed by a test.

    Delivered -> ingested -> Silver -> Gold (recorded runs), then the ER v2 correction:
    dry run -> replay -> (refused publish, refused approver) -> approve -> ack analytics ->
    (publication held) -> ack fraud-ops twice -> publish -> publish again -> rollback ->
    re-publish -> (rollback refused outside its window). What each step returned, and the
    store's rows after it, are kept here for the tests to assert on; so are the asof answers
    an auditor got at the moments that pass (before the replay, right after publication).
    """

    lakehouse: Any
    built: Built
    before_replay: datetime
    served: dict[tuple[str, str], dict[str, Any]]
    answer_before_replay: Any
    cap_refusal: LakehouseError
    scope: Any
    versions_around_dry_run: tuple[dict[str, int | None], dict[str, int | None]]
    ledger_entries_around_dry_run: tuple[int, int]
    replayed: Any
    rows_after_replay: dict[tuple[str, str], dict[str, Any]]
    outbox_after_replay: bool
    unapproved_publish: LakehouseError
    stranger_approval: LakehouseError
    held_publish: LakehouseError
    rows_while_held: dict[tuple[str, str], dict[str, Any]]
    repeated_ack: Any
    published: Any
    rows_published: dict[tuple[str, str], dict[str, Any]]
    answer_at_publication: Any
    published_again: Any
    rolled_back: Any
    rows_rolled_back: dict[tuple[str, str], dict[str, Any]]
    republished: Any
    rows_republished: dict[tuple[str, str], dict[str, Any]]
    late_rollback: LakehouseError
    communities_before: Any
    """``lakehouse communities`` over the v1 correlations, before the replay (and its rows)."""
    community_rows_before: dict[str, list[dict[str, Any]]]
    communities_after: Any
    """The same over the republished ER v2 correlations (and every row version by entity)."""
    community_rows_after: dict[str, list[dict[str, Any]]]

    @property
    def registry(self) -> Any:
        return self.lakehouse.registry

    @property
    def run_id(self) -> str:
        return str(self.replayed.run_id)


def live_lifecycle(lh: Any, engines: EngineCatalog, history: Path) -> Lifecycle:
    """Build the :class:`Lifecycle` of ``lh`` (see there) with a fixed clock."""
    from workloads.asof import SparkReader, asof
    from workloads.replay import ack, approve, plan_scope, publish, rollback, run_replay
    from workloads.replay.outbox import OUTBOX

    registry = lh.registry
    clock = FixedClock(START, step=timedelta(seconds=1))
    built = build(lh, clock, history)
    gold = built.gold
    known = sorted(lh.config.tables)
    communities_before = communities_run(lh, clock)
    community_rows_before = community_rows(lh)
    before_replay = clock.now()
    served = rows(gold)
    answer_before = asof(SparkReader(registry), GOLD, before_replay, known_tables=known, entity=PROMO)

    def versions() -> dict[str, int | None]:
        return {t.name: t.current_version() for t in registry if t.exists()}

    def entries() -> int:
        return len(LedgerReader.for_registry(registry).records())

    cap = refusal(lambda: plan_scope(registry, plan_with(max_bytes_read=1), engines=engines))
    versions_before, entries_before = versions(), entries()
    scope = plan_scope(registry, plan_with(), engines=engines)
    versions_after, entries_after = versions(), entries()

    plan = plan_with()
    out = run_replay(registry, plan, engines=engines, clock=clock)
    after_replay = rows(gold)
    outbox_after_replay = registry.get(OUTBOX).exists()
    unapproved = refusal(lambda: publish(registry, out.run_id, clock=clock))
    stranger = refusal(lambda: approve(registry, out.run_id, by="mallory", clock=clock))
    approve(registry, out.run_id, by="risk-lead", clock=clock)
    ack(registry, "analytics", out.run_id, by="bi-team", clock=clock)
    held = refusal(lambda: publish(registry, out.run_id, clock=clock))
    while_held = rows(gold)
    ack(registry, "fraud-ops", out.run_id, by="ops-bot", clock=clock)
    repeated = ack(registry, "fraud-ops", out.run_id, by="ops-bot", clock=clock)

    published = publish(registry, out.run_id, clock=clock)
    rows_published = rows(gold)
    answer_at_publication = asof(
        SparkReader(registry), GOLD, published.effective_at, known_tables=known, entity=ANN
    )
    again = publish(registry, out.run_id, clock=clock)
    back = rollback(registry, out.run_id, clock=clock)
    rows_back = rows(gold)
    republished = publish(registry, out.run_id, clock=clock)
    rows_republished = rows(gold)
    late_clock = FixedClock(republished.effective_at + timedelta(days=31))
    late = refusal(lambda: rollback(registry, out.run_id, clock=late_clock))
    communities_after = communities_run(lh, clock)
    return Lifecycle(
        lakehouse=lh,
        built=built,
        before_replay=before_replay,
        served=served,
        answer_before_replay=answer_before,
        cap_refusal=cap,
        scope=scope,
        versions_around_dry_run=(versions_before, versions_after),
        ledger_entries_around_dry_run=(entries_before, entries_after),
        replayed=out,
        rows_after_replay=after_replay,
        outbox_after_replay=outbox_after_replay,
        unapproved_publish=unapproved,
        stranger_approval=stranger,
        held_publish=held,
        rows_while_held=while_held,
        repeated_ack=repeated,
        published=published,
        rows_published=rows_published,
        answer_at_publication=answer_at_publication,
        published_again=again,
        rolled_back=back,
        rows_rolled_back=rows_back,
        republished=republished,
        rows_republished=rows_republished,
        late_rollback=late,
        communities_before=communities_before,
        community_rows_before=community_rows_before,
        communities_after=communities_after,
        community_rows_after=community_rows(lh),
    )


def communities_run(lh: Any, clock: Clock) -> Any:
    """``lakehouse communities`` under the shipped ``community@1`` as connected components at
    threshold 0 (every correlation of the tiny history is an edge, so every group is known
    in advance), as a recorded run."""
    from ledger.engines.catalog import EngineSpec
    from workloads.communities import run_communities

    spec = load_engines(REPO / "conf" / "engines.yaml").resolve("community", 1)
    parameters = {**spec.parameters, "min_confidence": 0.0, "method": "connected_components"}
    spec = EngineSpec.model_validate({**spec.model_dump(), "parameters": parameters})
    return run_communities(lh.registry, open_ledger(lh.registry, clock=clock), clock, spec)


def community_rows(lh: Any) -> dict[str, list[dict[str, Any]]]:
    """Every row version of ``gold.communities`` by entity, oldest first."""
    found: dict[str, list[dict[str, Any]]] = {}
    for row in lh.registry.get("gold.communities").read().orderBy("recorded_at").collect():
        found.setdefault(row["entity_id"], []).append(row.asDict())
    return found


PROVISIONAL = "gold.provisional_correlations"
STREAM_WINDOW = (datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 4, 1, tzinfo=UTC))
"""The event-time window the stream's claims in these tests cover: the whole history."""


def current_pairs(table: Table) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The store's current rows by pair."""
    from workloads.vocabulary import CURRENT_STATUSES

    return {pair(r): r.asDict() for r in table.read().collect() if r["status"] in CURRENT_STATUSES}


def write_claims(lh: Any, claims: Any) -> None:
    """``claims`` (rows of ``gold.correlations``) written as one stream batch over
    :data:`STREAM_WINDOW`, with the stream's own function."""
    from workloads.gold.provisional import write_provisional

    start, end = STREAM_WINDOW
    view = lh.registry.get(PROVISIONAL)
    write_provisional(
        view, claims, batch_id=0, run_id="stream-0", window_start=start, window_end=end, recorded_at=START
    )


def missed_pairs(current: dict[tuple[str, str, str], dict[str, Any]], claimed: set[Any]) -> set[Any]:
    """The current pairs in :data:`STREAM_WINDOW` (bounds included) the stream did not claim."""
    start, end = STREAM_WINDOW
    return {p for p, r in current.items() if start <= r["valid_from"].replace(tzinfo=UTC) <= end} - claimed


def device(a: str, b: str) -> tuple[str, str, str]:
    """A ``shared_device`` pair as the store orders it (``entity_a < entity_b``)."""
    low, high = sorted((a, b))
    return ("shared_device", low, high)


def view_outcomes(lh: Any) -> dict[tuple[tuple[str, str, str], str], str]:
    """The provisional view's rows: (pair, status) -> outcome."""
    return {(pair(r), r["status"]): r["outcome"] for r in lh.registry.get(PROVISIONAL).read().collect()}


def reconciled_view(
    *,
    agree: tuple[str, str, str],
    stronger: tuple[str, str, str],
    retracted: tuple[str, str, str],
    missed: set[tuple[str, str, str]],
) -> dict[tuple[tuple[str, str, str], str], str]:
    """What :func:`view_outcomes` holds after one reconciliation of these claims: every streaming
    row kept (superseded or retracted) and the batch's row beside each pair it holds."""
    return {
        (agree, "superseded"): "agree",
        (agree, "authoritative"): "agree",
        (stronger, "superseded"): "batch_stronger",
        (stronger, "authoritative"): "batch_stronger",
        (retracted, "retracted"): "false_positive",
        **{(p, "authoritative"): "missed" for p in missed},
    }


def recorded_outcomes(lh: Any, run_id: str) -> dict[str, int]:
    """The ledger's supersessions of the provisional view by ``run_id``: outcome -> count."""
    from ledger.entries import Supersession

    return {
        e.key.split(" ")[0].removeprefix("outcome="): e.count
        for e in ledger_of(lh, run_id, Supersession)
        if e.table == PROVISIONAL
    }


def stream_notices(lh: Any, run_id: str) -> list[Any]:
    """The outbox messages of ``run_id`` that announce retracted streaming claims."""
    from workloads.replay.outbox import OUTBOX, messages_of
    from workloads.replay.provisional import STREAM_PLAN

    return [m for m in messages_of(lh.registry.get(OUTBOX), run_id) if m.plan == STREAM_PLAN]
