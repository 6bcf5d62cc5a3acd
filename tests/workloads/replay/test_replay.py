"""Replay building blocks on inline rows: run identity, engine refusal, scope, classification,
re-applying changes, the verdict, a run's state from the ledger, outbox keys.

The whole flow on real Delta and Iceberg tables is in ``test_replay_flow.py`` beside this file.
"""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from lakehouse.config import load_config
from lakehouse.digest import canonical_hash
from lakehouse.errors import ConfigError, EngineFingerprintError
from lakehouse.frames import materialize
from lakehouse.tables import TableRegistry
from ledger.clock import FixedClock
from ledger.engines import fingerprint, load_engines
from ledger.entries import (
    Approval,
    DiffManifest,
    Notification,
    Publication,
    ReconciliationDecision,
    Rollback,
    RunFinished,
    RunStarted,
)
from workloads.replay import candidate as cand
from workloads.replay import reconcile as rec
from workloads.replay import scope as sc
from workloads.replay.flow import run_replay
from workloads.replay.identity import candidate_name, replay_run_id, resolve_engines
from workloads.replay.outbox import idempotency_key
from workloads.replay.plan import CorrectionPlan, Purpose, load_plan
from workloads.replay.state import run_state

REPO = Path(__file__).resolve().parents[3]
PLAN = REPO / "conf" / "plans" / "er-v2-recorrelation.yaml"
SCHEMA = load_config(REPO / "conf" / "lakehouse.yaml", environ={}).tables["gold.correlations"].schema_ddl
RUN = "replay-0123456789abcdef"
BUILT = datetime(2026, 3, 1, tzinfo=UTC)
EFFECTIVE = datetime(2026, 3, 2, 12, tzinfo=UTC)
LABEL = "correlation@1;entity_resolution@2"
REASONS = cand.Reasons.of(
    plan="p",
    run_id=RUN,
    change="entity_resolution@1 -> entity_resolution@2",
    new_engine="entity_resolution@2",
)

ENGINES = [
    ("entity_resolution", 1, "workloads.engines.entity_resolution:resolve_v1", "2024-01-01", {}),
    ("entity_resolution", 2, "workloads.engines.entity_resolution_v2:resolve_v2", "2026-01-01", {}),
    (
        "correlation",
        1,
        "workloads.engines.correlation:correlate_v1",
        "2024-01-01",
        {"max_entities_per_asset": 50, "types": ["shared_card", "shared_device"]},
    ),
]


def write_engines(path: Path, *, stale: str | None = None) -> Path:
    """An engines file declaring ER v1, v2 and correlation v1 with their real fingerprints.

    ``stale`` (``name@version``) gets a fingerprint that no longer matches its code, as if
    the code had been edited without declaring a new version.
    """
    items = []
    for name, version, implementation, effective, parameters in ENGINES:
        declared = fingerprint(implementation)
        if stale == f"{name}@{version}":
            declared = fingerprint("workloads.engines.entity_resolution:normalise_email_v1")
        items.append(
            {
                "name": name,
                "version": version,
                "implementation": implementation,
                "effective_from": effective,
                "description": f"{name} version {version}",
                "parameters": parameters,
                "code_fingerprint": declared,
            }
        )
    path.write_text(yaml.safe_dump({"engines": items}, sort_keys=False), encoding="utf-8")
    return path


# -- identity and engines (no Spark) ---------------------------------------------------------------


def test_run_id_is_the_digest_of_plan_pins_and_engines(tmp_path: Path) -> None:
    plan = load_plan(PLAN)
    engines = resolve_engines(plan, load_engines(write_engines(tmp_path / "engines.yaml")))
    pins = {"silver.events": 3, "gold.correlations": 7}
    run_id = replay_run_id(plan, pins, engines)

    assert run_id == replay_run_id(plan, dict(reversed(pins.items())), engines)
    assert run_id.startswith("replay-")
    assert len(run_id) == len("replay-") + 16
    assert run_id != replay_run_id(plan, {**pins, "gold.correlations": 8}, engines)
    assert run_id != replay_run_id(plan.with_purpose(Purpose.COMPARISON), pins, engines)
    assert engines.label == LABEL
    assert candidate_name(run_id, 7) == run_id.replace("-", "_") + "_v7"


def test_a_run_whose_engine_code_changed_without_a_version_bump_is_refused(
    tmp_path: Path, spark_session: Any, lakehouse_config: Any
) -> None:
    plan = load_plan(PLAN)
    catalog = load_engines(write_engines(tmp_path / "engines.yaml", stale="entity_resolution@2"))
    with pytest.raises(EngineFingerprintError, match=r"entity_resolution@2's code changed"):
        resolve_engines(plan, catalog)
    # the run itself stops there, before reading or writing any table
    registry = TableRegistry(spark_session, lakehouse_config.model_copy(update={"instance": "never"}))
    with pytest.raises(EngineFingerprintError, match="declare a new version"):
        run_replay(registry, plan, engines=catalog, clock=FixedClock(BUILT))
    assert not any(table.exists() for table in registry)


def test_reconciliation_never_imports_the_correlation_engine() -> None:
    tree = ast.parse((REPO / "workloads" / "replay" / "reconcile.py").read_text(encoding="utf-8"))
    imported = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)} | {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    # Only the shared words (statuses, verdicts), which import nothing themselves, and the
    # independent recount (which imports nothing of workloads: test_recount.py).
    assert {name for name in imported if name.startswith("workloads")} <= {
        "workloads.vocabulary",
        "workloads.replay.recount",
    }, imported
    vocabulary = ast.parse((REPO / "workloads" / "vocabulary.py").read_text(encoding="utf-8"))
    assert not any(
        isinstance(node, ast.ImportFrom) and (node.module or "").startswith("workloads")
        for node in ast.walk(vocabulary)
    )


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "rollback_window_days: 30",
            "rollback_window_dayz: 30",
            "unknown key 'publication.rollback_window_dayz'; remove it or check its spelling",
        ),
        ("  authority: risk-analytics\n", "", "missing key 'answer.authority'"),
        (
            "max_changed_ratio: 1.0",
            "max_changed_ratio: 2.0",
            "key 'checks.max_changed_ratio' has invalid value 2.0",
        ),
        ("plan: er-v2-recorrelation", "plan: [er", "is not valid YAML"),
    ],
    ids=["unknown-key", "missing-key", "invalid-value", "not-yaml"],
)
def test_an_invalid_plan_is_refused_naming_the_file_and_the_key(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    shipped = PLAN.read_text(encoding="utf-8")
    assert old in shipped
    path = tmp_path / "plan.yaml"
    path.write_text(shipped.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_plan(path)
    assert str(caught.value).startswith(f"{path}:")
    assert message in str(caught.value)
    with pytest.raises(ConfigError, match="plan file not found"):
        load_plan(tmp_path / "missing.yaml")


def test_outbox_key_is_one_per_consumer_plan_and_run() -> None:
    key = idempotency_key("fraud-ops", "plan", RUN)
    assert key == idempotency_key("fraud-ops", "plan", RUN)
    assert (
        len({key, idempotency_key("analytics", "plan", RUN), idempotency_key("fraud-ops", "plan", "r2")}) == 3
    )


# -- the verdict and a run's state (no Spark) -------------------------------------------------------


def test_verdict_names_the_first_failed_check() -> None:
    ok = [rec.Check(name=n, passed=True) for n in (*rec.STRUCTURAL, *rec.QUANTITATIVE)]

    def failing(name: str) -> list[rec.Check]:
        return [c if c.name != name else rec.Check(name=name, passed=False, violations=1) for c in ok]

    assert rec.decide(ok, changes=3) == ("publish", None)
    assert rec.decide(ok, changes=0) == ("suppress", None)
    assert rec.decide(failing("one_current_row_per_id"), changes=3) == ("repair", "one_current_row_per_id")
    assert rec.decide(failing("quality_gate"), changes=3) == ("repair", "quality_gate")
    assert rec.decide(failing("expected_pairs"), changes=3) == ("investigate", "expected_pairs")
    both = [
        c if c.name not in ("bronze_trace", "entity_order") else rec.Check(name=c.name, passed=False)
        for c in ok
    ]
    assert rec.decide(both, changes=3) == ("repair", "entity_order"), "structural failures come first"


def _plan(purpose: Purpose = Purpose.CORRECTION) -> CorrectionPlan:
    return load_plan(PLAN).with_purpose(purpose)


def _entries(plan: CorrectionPlan, verdict: str = "publish") -> list[Any]:
    started = RunStarted(
        run_id=RUN,
        command="replay",
        purpose=plan.purpose.value,
        parameters={"plan": plan.model_dump(mode="json", by_alias=True)},
        plan=plan.plan,
    )
    manifest = DiffManifest(
        run_id=RUN, table="gold.correlations", candidate="c", base_version=1, counts={}, manifest_digest="m1"
    )
    decision = ReconciliationDecision(
        run_id=RUN,
        table="gold.correlations",
        verdict=verdict,  # type: ignore[arg-type]
        owner="risk-analytics",
        checks={"manifest_digest": "m1"},
    )
    return [started, manifest, decision, RunFinished(run_id=RUN, status="ok")]


def test_run_state_follows_the_ledger_entries() -> None:
    plan = _plan()
    entries = _entries(plan)
    assert run_state(RUN, entries[:1]).status == "building"
    assert run_state(RUN, entries).status == "awaiting_approval"
    assert run_state(RUN, _entries(plan, "investigate")).status == "blocked"
    assert run_state(RUN, _entries(_plan(Purpose.COMPARISON))).status == "compared"
    rebuilt = [*entries, entries[1].model_copy(update={"manifest_digest": "m2"})]
    assert run_state(RUN, rebuilt).status == "building", "a decision on an earlier candidate does not count"

    approval = Approval(run_id=RUN, approver="risk-lead", decision="approved", scope="p", approved_at=BUILT)
    intent = RunStarted(
        run_id=RUN,
        command="publish",
        purpose="correction",
        parameters={"effective_at": EFFECTIVE.isoformat(), "candidate": "c", "previous": 1},
        plan=plan.plan,
    )
    publication = Publication(
        run_id=RUN, tables={"gold.correlations": 2}, previous={"gold.correlations": 1}, effective_at=EFFECTIVE
    )
    notes = [
        Notification(
            run_id=RUN,
            consumer=c,
            table="gold.correlations",
            version=2,
            decision_version=RUN,
            idempotency_key=c,
        )
        for c in ("fraud-ops", "analytics")
    ]
    back = Rollback(
        run_id=RUN, table="gold.correlations", from_version=2, to_version=1, new_version=3, reason="r"
    )
    state = run_state(RUN, [*entries, approval, intent])
    assert state.status == "approved"
    assert state.open_intent is not None
    assert state.open_intent.effective_at == EFFECTIVE
    assert run_state(RUN, [*entries, approval, intent, publication]).status == "published_unnotified"
    published = run_state(RUN, [*entries, approval, intent, publication, *notes])
    assert published.status == "published"
    assert published.open_intent is None
    assert run_state(RUN, [*entries, approval, intent, publication, *notes, back]).status == "rolled_back"


# -- scope, classification and re-applying (Spark, no tables) ---------------------------------------

EVENTS = (
    "domain STRING, event_id STRING, event_time TIMESTAMP, old_entity STRING, new_entity STRING, "
    "device_id STRING, card_fingerprint STRING"
)


def _at(day: int) -> datetime:
    return datetime(2025, 1, day, tzinfo=UTC)


def _ids(df: Any, column: str = "entity_id") -> set[str]:
    return {str(r[0]) for r in df.select(column).collect()}


def test_affected_entities_and_crowding_flips(spark_session: Any) -> None:
    rows = [
        ("orders", "1", _at(1), "p", "p", "dx", None),
        ("orders", "2", _at(2), "q", "q", "dx", None),
        ("orders", "3", _at(3), "r", "q", "dx", None),  # r merges into q
        ("orders", "4", _at(4), "s", "s", "dy", "c1"),
        ("orders", "5", _at(5), "t", "t", "dy", None),
    ]
    events = spark_session.createDataFrame(rows, EVENTS)
    affected = sc.affected_entities(events)
    by_id = {r["entity_id"]: (r["old_side"], r["new_side"]) for r in affected.collect()}
    assert by_id == {"r": (True, False), "q": (True, True)}, "r vanished; q exists under both"

    # dx had 3 entities (crowded at max 2) and now 2: p's pairs on it appear, p is recomputed
    flips = sc.crowding_flips(events, affected, max_entities=2)
    assert _ids(flips) == {"p", "q", "r"}
    assert _ids(sc.crowding_flips(events, affected, max_entities=5)) == set()
    assert _ids(sc.recomputed_entities(affected, flips)) == {"p", "q", "r"}


def test_scoped_recomputation_equals_recomputing_everything(spark_session: Any) -> None:
    from workloads.engines.correlation import correlate_v1

    rows = [
        ("orders", "1", _at(1), "a", "a", "d1", "c1"),
        ("orders", "2", _at(2), "b", "b", "d1", "c9"),
        ("orders", "3", _at(3), "a2", "a", "d1", None),  # a2 merges into a: d1 no longer crowded
        ("logins", "4", _at(4), "a2", "a", "d2", None),
        ("logins", "5", _at(5), "c", "c", "d2", None),
        ("orders", "6", _at(6), "x", "x", None, "c9"),  # b's other pair, on an asset of b only
        ("orders", "7", _at(7), "f", "f", "d4", None),
        ("orders", "8", _at(8), "g", "g", "d4", None),  # untouched pair
    ]
    events = spark_session.createDataFrame(rows, EVENTS)
    affected = sc.affected_entities(events)
    recompute = sc.recomputed_entities(affected, sc.crowding_flips(events, affected, max_entities=2))

    def run(frame: Any) -> Any:
        return sc.involving(
            correlate_v1(frame, run_id=RUN, recorded_at=BUILT, max_entities_per_asset=2), recompute
        )

    assert _ids(recompute) == {"a", "a2", "b"}, "b is on d1, whose crowding flips"
    full = events.withColumnRenamed("new_entity", "entity_id").drop("old_entity")
    scoped = run(sc.scoped_events(events, recompute))
    assert canonical_hash(scoped) == canonical_hash(run(full))
    assert {(r["entity_a"], r["entity_b"]) for r in scoped.collect()} == {("a", "b"), ("a", "c"), ("b", "x")}


SILVER = (
    "domain STRING, event_id STRING, event_time TIMESTAMP, customer_email STRING, order_id STRING, "
    "card_fingerprint STRING, device_id STRING, amount DOUBLE"
)
SILVER_ROWS = [
    # ann's two variants merge under v2/v3 (plus-tag); her settlement has no email
    ("orders", "o1", _at(1), "ann@x.com", "o1", "c1", "d1", 1.0),
    ("orders", "o2", _at(2), "Ann+shop@x.com", "o2", None, "d2", 2.0),
    ("settlements", "s1", _at(3), None, "o2", "c9", None, 2.0),
    ("orders", "o3", _at(4), "bob@x.com", "o3", "c1", None, 3.0),  # bob shares ann's card c1
    ("logins", "l1", _at(5), "cy@x.com", None, None, "d2", None),  # cy shares ann's device d2
    ("orders", "o4", _at(6), "cy@x.com", "o4", "c4", "d4", 4.0),  # cy's other assets
    ("orders", "o5", _at(7), "dan@x.com", "o5", "c4", None, 5.0),
    ("orders", "o6", _at(8), "  ", "o6", None, "d9", 6.0),  # a blank email
    ("refunds", "r6", _at(9), "eve@x.com", "o6", None, None, 6.0),
    ("orders", "o7", _at(10), "far@x.com", "o7", None, "d7", 7.0),  # far from everything changed
    ("orders", "o8", _at(11), "near@x.com", "o8", None, "d7", 8.0),
]


@pytest.mark.parametrize("new_version", [2, 3])
def test_scoping_before_resolving_finds_what_resolving_everything_finds_and_reads_less(
    spark_session: Any, new_version: int
) -> None:
    """The identity-level scope and the neighbourhood's resolution equal whole-history resolution
    (affected ids, every neighbourhood event's entities, the recomputed pairs), and an event
    on no asset of a recomputed entity is not read."""
    from workloads.engines.correlation import correlate_v1
    from workloads.engines.entity_resolution import resolve_v1, resolver_for

    silver = spark_session.createDataFrame(SILVER_ROWS, SILVER)
    resolve_new = resolver_for(str(new_version))
    given = silver.select(*sc.RESOLUTION_INPUT)
    whole = materialize(sc.pair_resolutions(silver, resolve_v1(given), resolve_new(given)))
    recompute = materialize(
        sc.recomputed_entities(
            sc.affected_entities(whole), sc.crowding_flips(whole, sc.affected_entities(whole), 1)
        )
    )

    identity = materialize(sc.identities(silver))
    rows = sc.identity_rows(identity)
    identities = materialize(sc.pair_identities(identity, resolve_v1(rows), resolve_new(rows)))
    affected = sc.affected_entities(identities)
    assert sorted(map(tuple, affected.collect())) == sorted(map(tuple, sc.affected_entities(whole).collect()))

    subset = materialize(sc.neighbourhood(silver, identities, recompute))
    both = subset.select(*sc.RESOLUTION_INPUT).unionByName(rows)
    scoped = materialize(sc.pair_resolutions(subset, resolve_v1(both), resolve_new(both)))
    keys = list(sc.EVENT_KEY)
    assert canonical_hash(scoped) == canonical_hash(whole.join(subset.select(*keys), keys, "left_semi"))
    read = {r["event_id"] for r in subset.collect()}
    assert {"o1", "o2", "s1", "o3", "l1"} <= read, "own events, order-linked, on shared assets"
    assert not read & {"o7", "o8"}, "nothing on an asset no recomputed entity used"

    def pairs(events: Any) -> Any:
        frame = sc.scoped_events(events, recompute)
        return sc.involving(
            correlate_v1(frame, run_id=RUN, recorded_at=BUILT, max_entities_per_asset=1), recompute
        )

    assert canonical_hash(pairs(scoped)) == canonical_hash(pairs(whole))


def test_the_recount_reads_only_around_its_scope_and_counts_what_reading_everything_counts(
    spark_session: Any,
) -> None:
    """The independent recount's own scoped read (identities, then the events around its scope)
    expects exactly the pairs a recount over every event expects, without the far events."""
    from workloads.replay import recount as rc

    silver = spark_session.createDataFrame(SILVER_ROWS, SILVER)
    rules = {
        "old": rc.ResolutionRule(ref="entity_resolution@1"),
        "new": rc.ResolutionRule(ref="entity_resolution@3", email_variants=True),
        "pairs": rc.PairRule(
            ref="correlation@1", types=("shared_card", "shared_device"), max_entities_per_asset=1
        ),
    }
    everything = rc.recount(rc.read_events(silver), **rules)
    read: set[str] = set()
    around = rc.read_around(silver)

    def reading(emails: set[str]) -> Any:
        events = around(emails)
        read.update(e.event_id for e in events)
        return events

    scoped = rc.recount_around(rc.read_identities(silver), reading, **rules)
    assert scoped.scope == everything.scope
    assert scoped.scope, "ann and her neighbours are in scope"
    assert scoped.expected() == everything.expected()
    assert scoped.events_read < everything.events_read
    assert not read & {"o7", "o8"}, "nothing on an asset no entity in scope used"


def _row(
    cid: str,
    a: str,
    b: str,
    day: int,
    *,
    kind: str = "shared_device",
    month: int = 1,
    confidence: float = 0.5,
    run: str = "gold-1",
    engine: str = "correlation@1",
    status: str = "authoritative",
    recorded: datetime = datetime(2025, 4, 1, tzinfo=UTC),
) -> tuple[Any, ...]:
    at = datetime(2025, month, day, tzinfo=UTC)
    return (
        cid,
        kind,
        a,
        b,
        at,
        None,
        at.strftime("%Y-%m"),
        confidence,
        "{}",
        engine,
        run,
        status,
        recorded,
        None,
        None,
        None,
    )


def _new(cid: str, a: str, b: str, day: int, **kw: Any) -> tuple[Any, ...]:
    return _row(cid, a, b, day, run=RUN, engine=LABEL, recorded=BUILT, **kw)


def _by_id(df: Any) -> dict[tuple[str, str], Any]:
    return {(r["correlation_id"], r["run_id"]): r for r in df.collect()}


def test_classify_keeps_unchanged_rows_supersedes_and_retracts(spark_session: Any) -> None:
    serving = spark_session.createDataFrame(
        [
            _row("x1", "e0", "e1", 6),  # unchanged under the new resolution
            _row("x2", "e1", "e2", 10, kind="shared_card", month=2),  # e2 merges into e1
            _row("x3", "e2", "e3", 11, month=2),  # successor (e1, e3)
            _row("x4", "e2", "e4", 12, month=2),  # no successor
            _row("x5", "e1", "e5", 3, month=3),  # same id, new evidence
        ],
        SCHEMA,
    )
    recomputed = spark_session.createDataFrame(
        [
            _new("x1", "e0", "e1", 6),
            _new("y3", "e1", "e3", 11, month=2),
            _new("x5", "e1", "e5", 3, month=3, confidence=0.8),
            _new("y6", "e1", "e6", 9, month=3),
        ],
        SCHEMA,
    )
    mapping = spark_session.createDataFrame(
        [("e0", "e0"), ("e1", "e1"), ("e2", "e1"), ("e3", "e3"), ("e4", "e4"), ("e5", "e5")],
        "old_entity STRING, new_entity STRING",
    )
    result = cand.classify(serving, recomputed, mapping, reasons=REASONS, built_at=BUILT)

    assert _ids(result.unchanged_ids, "correlation_id") == {"x1"}
    assert _ids(result.inserted, "correlation_id") == {"y3", "x5", "y6"}
    retired = _by_id(result.retired)
    assert {k[0]: (r["status"], r["superseded_by"], r["kind"]) for k, r in retired.items()} == {
        "x2": ("retracted", None, "merged"),
        "x3": ("superseded", "y3", "superseded"),
        "x4": ("retracted", None, "no_longer"),
        "x5": ("superseded", "x5", "superseded"),
    }
    assert retired[("x2", "gold-1")]["supersede_reason"] == REASONS.merged
    assert "both entities resolve to one entity" in REASONS.merged
    assert RUN in REASONS.merged
    assert retired[("x4", "gold-1")]["supersede_reason"] == REASONS.no_longer
    assert all(r["superseded_at"] == BUILT.replace(tzinfo=None) for r in retired.values())
    transitions = {
        (r["kind"], r["old_id"], r["new_id"]): r["confidence_delta"] for r in result.transitions.collect()
    }
    assert transitions == {
        ("retracted", "x2", None): -0.5,
        ("superseded", "x3", "y3"): 0.0,
        ("retracted", "x4", None): -0.5,
        ("superseded", "x5", "x5"): pytest.approx(0.3),
        ("inserted", None, "y6"): 0.5,
    }


def test_changes_reapplied_keep_rows_that_arrived_meanwhile_and_carry_the_effective_time(
    spark_session: Any,
) -> None:
    base = [_row("x2", "e1", "e2", 10, month=2), _row("x3", "e2", "e3", 11, month=2)]
    retired = [
        (
            *r[:11],
            "retracted" if r[0] == "x2" else "superseded",
            r[12],
            BUILT,
            None if r[0] == "x2" else "y3",
            "why",
        )
        for r in base
    ]
    candidate = spark_session.createDataFrame([*retired, _new("y3", "e1", "e3", 11, month=2)], SCHEMA)
    before = spark_session.createDataFrame([*base, _row("x9", "e7", "e8", 1, month=3)], SCHEMA)
    changes = cand.extract_changes(candidate, before, RUN)
    assert _by_id(changes).keys() == {("x2", "gold-1"), ("x3", "gold-1"), ("y3", RUN)}

    # serving moved: a late row arrived in February, and x3 was rewritten by another run
    moved = spark_session.createDataFrame(
        [
            base[0],
            _row("x3", "e2", "e3", 11, month=2, run="gold-2"),
            _row("late", "e7", "e9", 20, month=2, run="gold-late"),
            _row("x9", "e7", "e8", 1, month=3),
        ],
        SCHEMA,
    )
    content = _by_id(cand.apply_changes(moved, changes, run_id=RUN, effective_at=EFFECTIVE))
    stamp = EFFECTIVE.replace(tzinfo=None)
    assert set(content) == {("x2", "gold-1"), ("x3", "gold-2"), ("late", "gold-late"), ("y3", RUN)}
    assert content[("x2", "gold-1")]["status"] == "retracted"
    assert content[("x2", "gold-1")]["superseded_at"] == stamp
    assert content[("y3", RUN)]["recorded_at"] == stamp
    assert content[("late", "gold-late")]["status"] == "authoritative", "keep_serving: left as it is"
    assert content[("x3", "gold-2")]["status"] == "authoritative", "a vanished row is not resurrected"
    assert cand.current_duplicates(spark_session.createDataFrame(list(content.values()), SCHEMA)).isEmpty()
