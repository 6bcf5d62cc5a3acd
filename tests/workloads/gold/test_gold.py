"""Gold: daily features, W1 baselines (incremental == full), correlation engine v1.

Builds run on the shipped mixed-format default (``shipped_lakehouse``, see tests/conftest.py); pure transforms
run on a handful of inline rows. Silver input is written by hand, never by the Silver
build, so these tests only depend on the ``silver.events`` schema.
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from lakehouse.digest import canonical_hash, canonical_json
from lakehouse.tables import RUN_ID_KEY
from workloads.engines.correlation import ENGINE, confidence, correlation_id
from workloads.gold.baselines import affected_days, baselines
from workloads.gold.build import GOLD_TABLES, GoldReport, build_gold
from workloads.vocabulary import TableName

pytestmark = pytest.mark.spark

SILVER = TableName.SILVER_EVENTS
ENTITY_DAILY, BASELINES, CORRELATIONS = TableName.ENTITY_DAILY, TableName.BASELINES, TableName.CORRELATIONS
RECORDED = datetime(2026, 3, 1, tzinfo=UTC)
NOT_WHAT = ("run_id", "recorded_at")


def event(
    event_id: str,
    domain: str,
    when: str,
    entity: str | None = None,
    *,
    device: str | None = None,
    card: str | None = None,
    order: str | None = None,
    amount: str | None = None,
    success: bool | None = None,
    label: str | None = None,
) -> dict[str, Any]:
    """One ``silver.events`` row; only what Gold reads varies, the rest is plausible filler."""
    at = datetime.fromisoformat(when).replace(tzinfo=UTC)
    day = at.date()
    return {
        "event_id": event_id,
        "domain": domain,
        "event_time": at,
        "event_date": day,
        "event_month": day.strftime("%Y-%m"),
        "ingest_time": at + timedelta(hours=1),
        "accounting_date": day,
        "lateness": "on_time",
        "schema_version": "1",
        "revision": 1,
        "entity_id": entity,
        "resolver": "entity_resolution@1" if entity else None,
        "card_fingerprint": card,
        "device_id": device,
        "order_id": order if order is not None else (event_id if domain == "orders" else None),
        "amount": Decimal(amount) if amount is not None else None,
        "currency": "EUR" if amount is not None else None,
        "success": success,
        "label": label,
        "_manifest_id": "m-1",
        "_source_file": "f-1",  # Bronze coordinates (named _file before Iceberg's reserved names bit)
        "_file": "f-1",
        "_line": 1,
    }


def silver_frame(lh: Any, rows: list[dict[str, Any]]) -> Any:
    """Rows in the configured Silver schema (columns the row does not name are null)."""
    schema = lh.spark.createDataFrame([], lh.config.tables[SILVER].schema_ddl).schema
    return lh.spark.createDataFrame([tuple(r.get(f.name) for f in schema.fields) for r in rows], schema)


def write_silver(lh: Any, rows: list[dict[str, Any]]) -> Any:
    silver = lh.registry.get(SILVER)
    silver.create(if_not_exists=True)
    silver.append(silver_frame(lh, rows), run_id="silver-test")
    return silver


def gold_hashes(lh: Any) -> dict[str, str]:
    return {name: canonical_hash(lh.registry.get(name).read(), exclude=NOT_WHAT) for name in GOLD_TABLES}


def build(lh: Any, run_id: str, **kw: Any) -> GoldReport:
    return build_gold(lh.registry, run_id=run_id, recorded_at=RECORDED, **kw)


# -- entity_daily ----------------------------------------------------------------------

FEATURE_ROWS = [
    event("o1", "orders", "2026-01-05T10:00:00", "alice", device="d1", card="c1", amount="10.50"),
    event("o2", "orders", "2026-01-05T12:00:00", "alice", device="d2", card="c1", amount="5.25"),
    event("l1", "logins", "2026-01-05T09:00:00", "alice", device="d1", success=True),
    event("l2", "logins", "2026-01-05T09:01:00", "alice", device="d3", success=False),
    event("l3", "logins", "2026-01-05T09:02:00", "alice", success=None),
    event("r1", "refunds", "2026-01-06T08:00:00", "alice", order="o1", amount="10.50"),
    # an outcome names only its order: attributed to the order's entity, on its own day
    event("x1", "outcomes", "2026-02-20T00:00:00", order="o1", label="chargeback"),
    # no entity and no known order: excluded and counted
    event("x2", "outcomes", "2026-02-21T00:00:00", order="o-unknown", label="fraud"),
    event("l4", "logins", "2026-01-05T11:00:00", device="d1", success=True),
    event("b1", "orders", "2026-01-05T13:00:00", "bob", device="d9", amount="7.00"),
    # settlements carry no feature
    event("s1", "settlements", "2026-01-07T00:00:00", order="o1", amount="10.50"),
]


def test_entity_daily_features_exclude_and_count_events_without_entity(shipped_lakehouse: Any) -> None:
    silver = write_silver(shipped_lakehouse, FEATURE_ROWS)
    gated: list[tuple[str, list[str]]] = []
    report = build(shipped_lakehouse, "run-1", gate=lambda name, df: gated.append((name, df.columns)))

    daily = {
        (r["entity_id"], r["day"]): r.asDict()
        for r in shipped_lakehouse.registry.get(ENTITY_DAILY).read().collect()
    }
    assert set(daily) == {
        ("alice", date(2026, 1, 5)),
        ("alice", date(2026, 1, 6)),
        ("alice", date(2026, 2, 20)),
        ("bob", date(2026, 1, 5)),
    }
    first = daily[("alice", date(2026, 1, 5))]
    assert (first["orders"], first["order_amount"], first["logins"], first["failed_logins"]) == (
        2,
        Decimal("15.75"),
        3,
        1,
    )
    assert (first["devices"], first["cards"], first["refunds"], first["refund_amount"]) == (
        3,
        1,
        0,
        Decimal("0"),
    )
    assert (first["month"], first["resolver"]) == ("2026-01", "entity_resolution@1")
    refund = daily[("alice", date(2026, 1, 6))]
    assert (refund["refunds"], refund["refund_amount"], refund["orders"]) == (1, Decimal("10.50"), 0)
    outcome = daily[("alice", date(2026, 2, 20))]
    assert (outcome["chargebacks"], outcome["fraud_labels"], outcome["month"]) == (1, 0, "2026-02")
    bob = daily[("bob", date(2026, 1, 5))]
    assert (bob["orders"], bob["order_amount"], bob["devices"], bob["cards"]) == (1, Decimal("7.00"), 1, 0)

    assert (report.events, report.unattributed_events, report.daily_rows) == (10, 2, 4)
    assert report.inputs[SILVER] == silver.current_version()
    assert set(report.outputs) == set(GOLD_TABLES)
    # every daily row has 10 metrics x 4 windows of baselines
    assert shipped_lakehouse.registry.get(BASELINES).read().count() == 4 * 10 * 4
    # the quality hook saw each write's rows before it happened (no correlation here)
    assert [name for name, _ in gated] == [BASELINES, ENTITY_DAILY]
    assert gated[1][1] == shipped_lakehouse.registry.get(ENTITY_DAILY).read().columns
    commits = shipped_lakehouse.registry.get(ENTITY_DAILY).history()
    assert commits[-1].run_id == "run-1"
    assert commits[-1].version == report.outputs[ENTITY_DAILY]
    assert RUN_ID_KEY in commits[-1].metadata


# -- baselines (pure) --------------------------------------------------------------------

DAILY_DDL = (
    "entity_id STRING, day DATE, month STRING, orders BIGINT, order_amount DECIMAL(18,2), chargebacks BIGINT"
)


def test_baselines_mean_stddev_and_weekday_factor_by_hand(spark_session: Any) -> None:
    d = date.fromisoformat
    rows = [  # 2026-01-01 is a Thursday; every other day is a zero
        ("e", d("2026-01-01"), "2026-01", 2, Decimal("10.50"), 0),
        ("e", d("2026-01-08"), "2026-01", 4, Decimal("0"), 0),
        ("e", d("2026-01-10"), "2026-01", 3, Decimal("0"), 0),
        ("e", d("2026-02-09"), "2026-02", 1, Decimal("0"), 0),
    ]
    daily = spark_session.createDataFrame(rows, DAILY_DDL)
    metrics = {"orders": 1, "order_amount": 100, "chargebacks": 1}
    got = {
        (r["day"].isoformat(), r["metric"], r["window_days"]): r
        for r in baselines(daily, metrics=metrics, windows=(30, 90)).collect()
    }
    assert len(got) == 4 * 3 * 2

    # 2026-01-10, 30 days: the window is clipped to the 10 days since the first day
    sat = got[("2026-01-10", "orders", 30)]
    assert sat["observations"] == 10
    assert sat["mean"] == pytest.approx(0.9)
    assert sat["stddev"] == pytest.approx(math.sqrt(29 / 10 - 0.81))
    # Saturdays in the window: 01-10 (3) and 01-03 (0): mean 1.5 against 0.9 overall
    assert sat["dow_factor"] == pytest.approx(1.5 / 0.9)
    thu = got[("2026-01-08", "orders", 30)]
    assert (thu["observations"], thu["mean"], thu["dow_factor"]) == (
        8,
        pytest.approx(0.75),
        pytest.approx(4.0),
    )
    # 40 days after the first day: the 30-day window holds one order in 30 zero-filled days
    late = got[("2026-02-09", "orders", 30)]
    assert (late["observations"], late["mean"]) == (30, pytest.approx(1 / 30))
    assert late["stddev"] == pytest.approx(math.sqrt(1 / 30 - 1 / 900))
    assert (got[("2026-02-09", "orders", 90)]["observations"], got[("2026-02-09", "orders", 90)]["mean"]) == (
        40,
        pytest.approx(10 / 40),
    )
    # amounts keep their unit; a single day has no spread; an all-zero window has factor 1
    first = got[("2026-01-01", "order_amount", 30)]
    assert (first["mean"], first["stddev"], first["observations"]) == (pytest.approx(10.5), 0.0, 1)
    assert got[("2026-01-10", "chargebacks", 30)]["dow_factor"] == 1.0


def test_affected_days_reach_729_days_after_a_change_and_only_changed_entities(spark_session: Any) -> None:
    d0 = date(2024, 1, 1)
    days = [0, 10, 100, 739, 740]
    keys = spark_session.createDataFrame(
        [("e", d0 + timedelta(days=n)) for n in days] + [("other", d0)], "entity_id STRING, day DATE"
    )
    changed = spark_session.createDataFrame([("e", d0 + timedelta(days=10))], "entity_id STRING, day DATE")
    got = sorted((r["entity_id"], (r["day"] - d0).days) for r in affected_days(keys, changed).collect())
    assert got == [("e", 10), ("e", 100), ("e", 739)]


# -- incremental == full -----------------------------------------------------------------

HISTORY = [
    event("a1", "orders", "2026-01-03T10:00:00", "A", device="dA", amount="20.00"),
    event("a2", "logins", "2026-01-20T10:00:00", "A", device="dA", success=True),
    event("a3", "orders", "2026-02-04T10:00:00", "A", device="dA", amount="30.00"),
    event("b1", "orders", "2026-01-04T10:00:00", "B", device="dB", amount="15.00"),
    event("b2", "logins", "2026-02-01T10:00:00", "B", device="dB", success=False),
    event("c1", "orders", "2026-01-05T10:00:00", "C", device="dC", amount="5.00"),
    event("c2", "logins", "2026-01-21T10:00:00", "C", device="dC", success=True),
    event("c3", "orders", "2026-02-10T10:00:00", "C", device="dC", amount="8.00"),
    event("d1", "orders", "2026-01-06T10:00:00", "D", device="dD", amount="9.00"),
    event("d2", "orders", "2026-02-11T10:00:00", "D", device="dD", amount="9.00"),
]


def test_incremental_build_equals_full_recompute_and_recomputes_only_affected(shipped_lakehouse: Any) -> None:
    from pyspark.sql import functions as F

    silver = write_silver(shipped_lakehouse, HISTORY)
    first = build(shipped_lakehouse, "run-1")
    assert (first.daily_added, first.entities_recomputed) == (10, 4)
    untouched = F.col("entity_id").isin("A", "D")
    before = sorted(
        tuple(r) for r in shipped_lakehouse.registry.get(BASELINES).read().where(untouched).collect()
    )

    # Silver changes for B (a new day) and C (a day disappears); A and D are unaffected
    new_b = [event("b3", "orders", "2026-01-25T10:00:00", "B", device="dB", amount="40.00")]
    silver.append(silver_frame(shipped_lakehouse, new_b), run_id="silver-change")
    silver.delete_where("event_id = 'c2'", run_id="silver-change")

    second = build(shipped_lakehouse, "run-2")
    assert second.inputs[SILVER] == silver.current_version()
    assert (second.daily_added, second.daily_changed, second.daily_removed) == (1, 0, 1)
    assert second.entities_recomputed == 2
    # B's days from 01-25 on (01-25, 02-01) and C's from 01-21 on (02-10): 3 days x 10 x 4
    assert second.baseline_rows_recomputed == 3 * 10 * 4
    assert second.months_rewritten[ENTITY_DAILY] == ("2026-01",)
    after = sorted(
        tuple(r) for r in shipped_lakehouse.registry.get(BASELINES).read().where(untouched).collect()
    )
    assert after == before
    incremental = gold_hashes(shipped_lakehouse)

    full = build(shipped_lakehouse, "run-3", full=True)
    assert full.entities_recomputed == 4
    assert gold_hashes(shipped_lakehouse) == incremental


# -- correlations --------------------------------------------------------------------------

SHARING = [
    event("o1", "orders", "2026-01-05T10:00:00", "alice", device="d1", amount="10.00"),
    event("l1", "logins", "2026-01-07T09:00:00", "bob", device="d1", success=True),
    event("l2", "logins", "2026-01-08T09:00:00", "bob", device="d1", success=True),
    event("l3", "logins", "2026-01-08T10:00:00", "carol", device="d2", success=True),
    event("l4", "logins", "2026-01-08T11:00:00", None, device="d1", success=True),
]


def test_shared_device_gives_one_correlation_and_a_rerun_writes_nothing(shipped_lakehouse: Any) -> None:
    write_silver(shipped_lakehouse, SHARING)
    first = build(shipped_lakehouse, "run-1")

    rows = shipped_lakehouse.registry.get(CORRELATIONS).read().collect()
    assert len(rows) == 1
    row = rows[0].asDict()
    valid_from = datetime(2026, 1, 7, 9, 0, tzinfo=UTC)
    assert row["correlation_id"] == correlation_id("shared_device", "alice", "bob", valid_from)
    assert (row["correlation_type"], row["entity_a"], row["entity_b"]) == ("shared_device", "alice", "bob")
    assert row["valid_from"].astimezone(UTC) == valid_from  # collected naive, in local time
    assert (row["valid_to"], row["valid_month"], row["status"], row["engine"]) == (
        None,
        "2026-01",
        "authoritative",
        ENGINE,
    )
    evidence = {"assets": ["d1"], "events_a": 1, "events_b": 2, "shared_assets": 1}
    assert row["evidence"] == canonical_json(evidence)
    assert row["confidence"] == confidence(1, 1, 2) == 0.5
    assert (row["run_id"], row["superseded_at"], row["superseded_by"]) == ("run-1", None, None)
    assert first.correlations is not None
    assert first.correlations.inserted == 1

    second = build_gold(shipped_lakehouse.registry, run_id="run-2", recorded_at=RECORDED + timedelta(days=1))
    rows = shipped_lakehouse.registry.get(CORRELATIONS).read().collect()
    assert [(r["correlation_id"], r["run_id"]) for r in rows] == [(row["correlation_id"], "run-1")]
    assert second.correlations is not None
    assert (second.correlations.inserted, second.correlations.unchanged) == (0, 1)
    # nothing changed in Silver: no Gold table got a new version
    assert second.outputs == first.outputs
    assert (second.daily_added, second.daily_changed, second.daily_removed, second.entities_recomputed) == (
        0,
    ) * 4


def test_confidence_grows_with_evidence_and_stays_inside_zero_one() -> None:
    values = [confidence(1, 1, 1), confidence(1, 4, 8), confidence(2, 4, 8), confidence(3, 10**6, 10**6)]
    assert values == sorted(values)
    assert len(set(values)) == len(values)
    assert all(0 < v < 1 for v in values)


# -- determinism ---------------------------------------------------------------------------


@pytest.mark.slow
def test_same_silver_twice_gives_identical_gold_hashes(shipped_lakehouse: Any) -> None:
    shared = event("z1", "logins", "2026-01-22T10:00:00", "B", device="dA", success=True)
    write_silver(shipped_lakehouse, [*HISTORY, shared])
    build(shipped_lakehouse, "run-1")
    first = gold_hashes(shipped_lakehouse)
    assert shipped_lakehouse.registry.get(CORRELATIONS).read().count() == 1  # A and B share dA

    for name in GOLD_TABLES:
        shipped_lakehouse.registry.get(name).drop()
    build_gold(shipped_lakehouse.registry, run_id="run-again", recorded_at=RECORDED + timedelta(days=7))
    assert gold_hashes(shipped_lakehouse) == first
