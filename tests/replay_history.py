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
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from lakehouse.tables import Table
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


def seed(lh: Any) -> Table:
    """Silver (ER v1), the Bronze rows it came from, and Gold correlations built by v1."""
    spark, registry, tables = lh.spark, lh.registry, lh.config.tables
    silver = registry.get("silver.events")
    silver.create()
    silver.append(
        resolve_v1(spark.createDataFrame(EVENTS, tables["silver.events"].schema_ddl)), run_id="silver-1"
    )
    for domain in ("orders", "logins"):
        bronze = registry.get(f"bronze.{domain}")
        bronze.create()
        raw = [
            (f"raw {e[0]}", e[0], e[2], e[5], e[5].date(), "test", "1", e[22], e[23], e[24], "ingest-1")
            for e in EVENTS
            if e[1] == domain
        ]
        bronze.append(spark.createDataFrame(raw, tables[f"bronze.{domain}"].schema_ddl), run_id="ingest-1")
    gold = registry.get(GOLD)
    gold.create()
    built = correlate_v1(silver.read(), run_id="gold-1", recorded_at=GOLD_RECORDED)
    write_correlations(gold, built, engine=ENGINE, run_id="gold-1")
    return gold


def declared_engines(tmp_path: Path) -> EngineCatalog:
    """ER v1 and v2 and correlation v1, declared with their real code fingerprints."""
    implementations = [
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
