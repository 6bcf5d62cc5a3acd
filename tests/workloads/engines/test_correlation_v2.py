"""Correlation v2: the same pairs and ids as v1, confidence weighted by how rare a shared asset is."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from lakehouse.digest import canonical_hash
from workloads.engines.correlation import (
    ENGINE_V2,
    confidence,
    confidence_v2,
    correlate_v1,
    correlate_v2,
)

pytestmark = pytest.mark.spark

COLUMNS = "event_id STRING, entity_id STRING, device_id STRING, card_fingerprint STRING, event_time TIMESTAMP"
AT = datetime(2026, 12, 1, tzinfo=UTC)


def _events(spark: Any) -> Any:
    t = datetime(2026, 1, 5, 12, 0)
    rows = [
        # ann and bob share a card nobody else uses
        ("e1", "ann", None, "card_ab", t),
        ("e2", "bob", None, "card_ab", t),
        # a kiosk device used by ann, bob and four more
        *[
            (f"k{i}", who, "kiosk", None, t)
            for i, who in enumerate(["ann", "bob", "cy", "dee", "eve", "fay"])
        ],
        # cy and dee share a tablet only they use
        ("t1", "cy", "tablet", None, t),
        ("t2", "dee", "tablet", None, t),
    ]
    return spark.createDataFrame(rows, COLUMNS)


def _by_pair(df: Any) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(r["correlation_type"], r["entity_a"], r["entity_b"]): r.asDict() for r in df.collect()}


def test_v2_weighs_rare_assets_above_popular_ones_and_keeps_v1_ids(spark_session: Any) -> None:
    events = _events(spark_session)
    v1 = _by_pair(correlate_v1(events, run_id="r1", recorded_at=AT))
    v2 = _by_pair(correlate_v2(events, run_id="r2", recorded_at=AT))

    assert set(v1) == set(v2), "v2 links exactly the pairs v1 links"
    assert {k: r["correlation_id"] for k, r in v1.items()} == {k: r["correlation_id"] for k, r in v2.items()}
    assert {r["engine"] for r in v2.values()} == {ENGINE_V2}

    exclusive = v2[("shared_device", "cy", "dee")]  # kiosk (6 entities) + tablet (2)
    popular_only = v2[("shared_device", "ann", "cy")]  # kiosk only
    card = v2[("shared_card", "ann", "bob")]
    # v1 scores one shared asset the same whoever else uses it; v2 does not
    assert v1[("shared_device", "ann", "cy")]["confidence"] == v1[("shared_card", "ann", "bob")]["confidence"]
    assert popular_only["confidence"] < card["confidence"]
    assert exclusive["confidence"] > popular_only["confidence"]

    evidence = json.loads(popular_only["evidence"])
    assert evidence["weight"] == pytest.approx(1 / 5)
    assert popular_only["confidence"] == confidence_v2([1 / 5], 1, 1)
    assert exclusive["confidence"] == confidence_v2([1 / 5, 1.0], 2, 2)
    assert card["confidence"] == confidence_v2([1.0], 1, 1) == confidence(1, 1, 1)


def test_v2_is_deterministic(spark_session: Any) -> None:
    events = _events(spark_session)
    first = canonical_hash(correlate_v2(events, run_id="r", recorded_at=AT))
    again = canonical_hash(
        correlate_v2(events.orderBy("event_id", ascending=False), run_id="r", recorded_at=AT)
    )
    assert first == again
