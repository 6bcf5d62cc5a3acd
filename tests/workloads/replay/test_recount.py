"""The independent recount on plain Python events (no Spark): the written rules, the scope it
finds itself, the pairs it expects, and that it shares no code with the engines under test.

The events are the hand-written history of :mod:`tests.replay_history` (ann, ann+promo,
bob, carol, dave, erin), so every expected id and pair is known.
"""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ledger.engines import EngineSpec
from tests.replay_history import ANN, BOB, CAROL, EVENTS, PROMO, v1_id
from workloads.replay import recount as rc

REPO = Path(__file__).resolve().parents[3]
GMAIL = ["gmail.com", "googlemail.com"]
PAIRS = {"max_entities_per_asset": 50, "types": ["shared_card", "shared_device"]}
DAVE, ERIN = v1_id("dave@example.com"), v1_id("erin@example.com")


def spec(name: str, version: int, parameters: dict[str, Any]) -> EngineSpec:
    return EngineSpec.model_validate(
        {
            "name": name,
            "version": version,
            "implementation": "tests.nowhere:nothing",
            "effective_from": "2024-01-01",
            "description": "test",
            "parameters": parameters,
            "code_fingerprint": "pending",
        }
    )


V1 = rc.ResolutionRule.declared(spec("entity_resolution", 1, {}))
V2 = rc.ResolutionRule.declared(
    spec("entity_resolution", 2, {"max_keys_per_card": 20, "dot_insensitive_domains": GMAIL})
)
V3 = rc.ResolutionRule.declared(spec("entity_resolution", 3, {"dot_insensitive_domains": GMAIL}))
CORRELATION = rc.PairRule.declared(spec("correlation", 1, PAIRS))


def micros(moment: datetime) -> int:
    return (
        int(moment.replace(tzinfo=UTC).timestamp() * 1_000_000)
        if moment.tzinfo is None
        else int(moment.timestamp() * 1_000_000)
    )


def silver(rows: list[tuple[Any, ...]] = EVENTS) -> list[rc.SilverEvent]:
    """The Silver rows of :mod:`tests.replay_history` as the recount reads them."""
    return [
        rc.SilverEvent(
            domain=r[1],
            event_id=r[0],
            event_time=micros(r[2]),
            customer_email=r[10],
            order_id=r[15],
            card_fingerprint=r[13],
            device_id=r[14],
        )
        for r in rows
    ]


def one(
    eid: str, domain: str, when: str, email: str | None, *, card: str | None = None, device: str | None = None
) -> rc.SilverEvent:
    at = datetime.fromisoformat(when).replace(tzinfo=UTC)
    return rc.SilverEvent(domain, eid, micros(at), email, eid if domain == "orders" else None, card, device)


def test_email_keys_follow_the_written_rules() -> None:
    assert rc.email_key(V1, "  Ann+Promo@Example.com\t") == "ann+promo@example.com"
    assert rc.email_key(V1, "   ") is None
    assert rc.email_key(V2, "A.N.N+x@GMail.com") == "ann@gmail.com"
    assert rc.email_key(V3, "a.nn+x@example.com") == "a.nn@example.com", "dots count outside gmail"
    assert rc.email_key(V3, "no-at-sign") == "no-at-sign"
    assert rc.v1_id("ann@example.com") == ANN


def test_v2_merges_ann_promo_into_ann_and_v1_keeps_them_apart() -> None:
    events = silver()
    before, after = rc.resolve(events, V1), rc.resolve(events, V2)
    assert before[("orders", "o3")] == PROMO
    assert after[("orders", "o3")] == ANN, "the merged entity keeps the smallest v1 id"
    assert after[("logins", "l1")] == CAROL
    assert rc.affected(before, after) == {ANN, PROMO}


def test_the_benchmark_rename_rule_renames_the_declared_share_by_the_ids_hash() -> None:
    """``renamed_percent`` (the replay benchmark's engines): v1's groups, an id chosen by the
    first 8 hex digits of its sha256 modulo 100 gets ``~r``; the chosen ids are exactly those."""
    import hashlib

    events = silver()
    plain = rc.resolve(events, V1)
    for percent in (0, 37, 100):
        rule = rc.ResolutionRule.declared(spec("entity_resolution", 9, {"renamed_percent": percent}))
        renamed = rc.resolve(events, rule)
        for key, entity in plain.items():
            if entity is None:
                assert renamed[key] is None
                continue
            chosen = int(hashlib.sha256(entity.encode()).hexdigest()[:8], 16) % 100 < percent
            assert renamed[key] == (entity + "~r" if chosen else entity), (percent, key)
    everyone = rc.ResolutionRule.declared(spec("entity_resolution", 9, {"renamed_percent": 100}))
    assert rc.affected(plain, rc.resolve(events, everyone)) >= {ANN, BOB, CAROL}


def test_the_recount_expects_exactly_the_v2_pairs_of_the_affected_entities() -> None:
    result = rc.recount(silver(), old=V1, new=V2, pairs=CORRELATION)
    assert result.scope == {ANN, PROMO}
    expected = {(k, rc.month_of(v)) for k, v in result.expected().items()}
    assert expected == {
        (("shared_device", ANN, BOB) if ANN < BOB else ("shared_device", BOB, ANN), "2025-01"),
        (("shared_device", ANN, CAROL) if ANN < CAROL else ("shared_device", CAROL, ANN), "2025-02"),
    }
    # dave and erin are outside the scope ...
    assert not any(DAVE in k or ERIN in k for k in result.expected())
    # ... unless the run changed their pair: then it is compared too
    dave_erin = ("shared_device", min(DAVE, ERIN), max(DAVE, ERIN))
    widened = rc.recount(silver(), old=V1, new=V2, pairs=CORRELATION, changed=[dave_erin])
    assert rc.month_of(widened.expected()[dave_erin]) == "2025-03"


def test_a_card_shared_by_too_many_keys_merges_nothing_and_v3_ignores_cards() -> None:
    events = [
        one("o1", "orders", "2025-01-01T00:00:00", "a@x.com", card="c"),
        one("o2", "orders", "2025-01-02T00:00:00", "b@x.com", card="c"),
        one("o3", "orders", "2025-01-03T00:00:00", "c@x.com", card="c"),
    ]
    merged = rc.resolve(events, V2)
    assert len(set(merged.values())) == 1
    limited = rc.ResolutionRule.declared(spec("entity_resolution", 9, {"max_keys_per_card": 2}))
    assert len(set(rc.resolve(events, limited).values())) == 3
    assert len(set(rc.resolve(events, V3).values())) == 3


def test_an_event_without_email_takes_the_entity_of_its_order_in_the_same_input() -> None:
    order = one("o1", "orders", "2025-01-01T00:00:00", "a@x.com")
    settled = rc.SilverEvent("settlements", "s1", order.event_time + 1, None, "o1", None, "d1")
    orphan = rc.SilverEvent("settlements", "s2", order.event_time + 2, " ", "o9", None, "d1")
    resolved = rc.resolve([order, settled, orphan], V1)
    assert resolved[("settlements", "s1")] == rc.v1_id("a@x.com")
    assert resolved[("settlements", "s2")] is None


def test_a_crowding_flip_brings_every_entity_on_the_asset_into_scope() -> None:
    crowded = rc.PairRule.declared(spec("correlation", 1, {**PAIRS, "max_entities_per_asset": 2}))
    events = [
        one("l1", "logins", "2025-01-01T00:00:00", "a+1@x.com", device="d"),
        one("l2", "logins", "2025-01-02T00:00:00", "a+2@x.com", device="d"),
        one("l3", "logins", "2025-01-03T00:00:00", "z@x.com", device="d"),
    ]
    result = rc.recount(events, old=V1, new=V3, pairs=crowded)
    z = rc.v1_id("z@x.com")
    assert z in result.scope, "three entities on d under v1 (crowded), two under v3"
    assert [k for k in result.expected() if z in k] == [
        ("shared_device", *sorted([rc.v1_id("a+1@x.com"), z]))
    ]


@pytest.mark.parametrize(
    ("name", "parameters", "message"),
    [
        ("entity_resolution", {"phonetic_names": True}, "no written rule for parameter 'phonetic_names'"),
        ("correlation", PAIRS, "written rule for entity_resolution only"),
    ],
)
def test_a_declaration_without_a_written_rule_is_refused_not_guessed(
    name: str, parameters: dict[str, Any], message: str
) -> None:
    with pytest.raises(rc.NoWrittenRule, match=message):
        rc.ResolutionRule.declared(spec(name, 7, parameters))


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)} | {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }


def test_the_recount_and_reconciliation_share_no_code_with_any_engine() -> None:
    recount = _imports(REPO / "workloads" / "replay" / "recount.py")
    assert not {m for m in recount if m.startswith(("workloads", "tests"))}, recount
    assert {m for m in recount if m.startswith("ledger")} <= {"ledger.engines"}, "the declarations only"
    reconcile = _imports(REPO / "workloads" / "replay" / "reconcile.py")
    assert {m for m in reconcile if m.startswith("workloads")} <= {
        "workloads.vocabulary",
        "workloads.replay.recount",
    }, reconcile
