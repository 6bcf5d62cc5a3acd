"""The reconciliation's Bronze trace (``workloads.replay.reconcile.trace_to_bronze``) on frames
made here: each sampled key's events on the pair's shared asset must be in Bronze, by their
coordinates (manifest, file, line), under the resolution that made the pair."""

from __future__ import annotations

from typing import Any

from workloads.replay.reconcile import trace_to_bronze

KEYS = "key STRING, side STRING, correlation_type STRING, entity_a STRING, entity_b STRING"
EVENTS = (
    "old_entity STRING, new_entity STRING, domain STRING, _manifest_id STRING, _source_file STRING, "
    "_line BIGINT, card_fingerprint STRING, device_id STRING"
)
BRONZE = "_manifest_id STRING, _source_file STRING, _line BIGINT"


def frames(spark: Any, logins: list[tuple[str, str, int]]) -> tuple[Any, Any, dict[str, Any]]:
    """Two changed keys: a new pair A-B on card k1 (orders), an old pair C-D on device d1 (logins)."""
    keys = spark.createDataFrame(
        [("c1@new", "new", "shared_card", "A", "B"), ("c2@old", "old", "shared_device", "C", "D")], KEYS
    )
    events = spark.createDataFrame(
        [
            ("x1", "A", "orders", "m1", "f1", 1, "k1", None),
            ("x2", "B", "orders", "m1", "f1", 2, "k1", None),
            ("x1", "A", "orders", "m1", "f1", 3, "k9", None),  # A's other card: not the pair's
            ("C", "y1", "logins", "m2", "f2", 1, None, "d1"),
            ("D", "y2", "logins", "m2", "f2", 2, None, "d1"),
        ],
        EVENTS,
    )
    bronze = {
        "orders": spark.createDataFrame([("m1", "f1", 1), ("m1", "f1", 2)], BRONZE),
        "logins": spark.createDataFrame(logins, BRONZE),
    }
    return keys, events, bronze


def test_every_sampled_key_traces_to_its_bronze_lines(spark_session: Any) -> None:
    check = trace_to_bronze(*frames(spark_session, [("m2", "f2", 1), ("m2", "f2", 2)]))
    assert check.passed, check
    assert check.detail == "2 of 2 sampled keys traced to Bronze"


def test_a_key_whose_event_is_missing_from_bronze_fails_the_trace_naming_it(spark_session: Any) -> None:
    check = trace_to_bronze(*frames(spark_session, [("m2", "f2", 1)]))
    assert not check.passed
    assert check.violations == 1
    assert check.detail == "1 of 2 sampled keys traced to Bronze"
    assert check.examples == ("c2@old: 1 of 2 events found in Bronze",)


def test_no_changed_key_passes_without_reading(spark_session: Any) -> None:
    keys, events, bronze = frames(spark_session, [])
    check = trace_to_bronze(keys.limit(0), events, bronze)
    assert check.passed
    assert check.detail == "no changed keys to trace"
