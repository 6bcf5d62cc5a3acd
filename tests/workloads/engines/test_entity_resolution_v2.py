"""Entity resolution v2: plus-tags, gmail dots, shared cards; ids stable where nothing changed."""

from __future__ import annotations

from typing import Any

import pytest

from workloads.engines.entity_resolution import resolve_v1
from workloads.engines.entity_resolution_v2 import MAX_KEYS_PER_CARD, resolve_v2

pytestmark = pytest.mark.spark

# `label` is a Silver column too (outcome labels): the engine must not trip over it.
COLUMNS = (
    "event_id STRING, domain STRING, customer_email STRING, card_fingerprint STRING, order_id STRING, "
    "label STRING"
)


def entities(df: Any) -> dict[str, str | None]:
    return {r["event_id"]: r["entity_id"] for r in df.select("event_id", "entity_id").collect()}


def test_v2_merges_what_v1_splits_and_keeps_untouched_ids(spark_session: Any) -> None:
    rows = [
        ("o1", "orders", " Alice.Smith@Gmail.com", "cf_a", None, None),
        ("o2", "orders", "alicesmith+shop@gmail.com", "cf_b", None, None),
        ("o3", "orders", "bob@example.com", "cf_shared", None, None),
        ("o4", "orders", "robert@example.com", "cf_shared", None, None),
        ("o5", "orders", "carol@example.com", "cf_c", None, None),
        ("o6", "orders", "c.a.r.o.l@example.com", "cf_d", None, None),
        ("s1", "settlements", None, None, "o4", None),
        ("x1", "outcomes", None, None, "o4", "fraud"),
        ("l1", "logins", "   ", None, None, None),
    ]
    events = spark_session.createDataFrame(rows, COLUMNS)
    v1 = entities(resolve_v1(events))
    v2 = entities(resolve_v2(events))

    assert v1["o1"] != v1["o2"]
    assert v2["o1"] == v2["o2"], "gmail dots and plus-tags are one mailbox"
    assert v2["o3"] == v2["o4"] == v2["s1"] == v2["x1"], (
        "a shared card joins two keys; others follow the order"
    )
    assert v2["o3"] == min(v1["o3"], v1["o4"]), "a merged entity takes the smallest v1 id"
    assert v2["o5"] == v1["o5"], "an entity v2 does not change keeps its v1 id"
    assert v2["o6"] != v2["o5"], "dots matter outside gmail"
    assert v2["l1"] is None
    assert {r["resolver"] for r in resolve_v2(events).collect()} == {"entity_resolution@2"}


def test_cards_shared_by_too_many_keys_join_nobody(spark_session: Any) -> None:
    rows = [
        (f"o{i}", "orders", f"user{i}@example.com", "cf_office", None, None)
        for i in range(MAX_KEYS_PER_CARD + 1)
    ]
    resolved = entities(resolve_v2(spark_session.createDataFrame(rows, COLUMNS)))
    assert len(set(resolved.values())) == MAX_KEYS_PER_CARD + 1


def test_transitive_chains_become_one_component(spark_session: Any) -> None:
    rows = [
        ("o1", "orders", "a@x.com", "cf_1", None, None),
        ("o2", "orders", "b@x.com", "cf_1", None, None),
        ("o3", "orders", "b@x.com", "cf_2", None, None),
        ("o4", "orders", "c@x.com", "cf_2", None, None),
        ("o5", "orders", "c@x.com", "cf_3", None, None),
        ("o6", "orders", "d@x.com", "cf_3", None, None),
    ]
    resolved = entities(resolve_v2(spark_session.createDataFrame(rows, COLUMNS)))
    assert len(set(resolved.values())) == 1
    again = entities(resolve_v2(spark_session.createDataFrame(list(reversed(rows)), COLUMNS)))
    assert again == resolved, "deterministic whatever the input order"
