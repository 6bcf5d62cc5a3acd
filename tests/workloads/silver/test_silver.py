"""The Silver build: quarantine, dedupe, lateness, entity resolution v1, conservation.

Three tiers:

* pure tests (no Spark): conservation arithmetic, month ranges, adapters vs the generator;
* small Spark tests on inline rows (no tables, so format-independent): canonicalisation
  edge cases and entity resolution v1;
* one end-to-end test on the shipped mixed-format default with a generated history, checked line by line
  against the generator's ground truth (read from disk and re-derived here, not through
  the Silver code): every planted fault, nothing else quarantined, conservation, entities,
  pinned inputs and identical output for identical inputs.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from jobs.output import plain
from lakehouse.digest import canonical_hash
from lakehouse.errors import ConservationError, DataQualityError, UsageError
from workloads.bronze.ingest import ingest_feed, ingest_history
from workloads.engines import entity_resolution
from workloads.silver.adapters import ADAPTERS, canonicalise
from workloads.silver.build import RestatedPeriod, SilverPartition, build_silver, month_scope
from workloads.silver.columns import SILVER_COLUMNS
from workloads.silver.conservation import ManifestBalance, balance_manifests, check_conservation
from workloads.silver.lateness import load_lateness_policy
from workloads.synthetic.generator import SCHEMAS, GeneratorSettings, generate
from workloads.vocabulary import TableName

POLICY = load_lateness_policy()
SILVER, QUARANTINE, EXCEPTIONS = TableName.SILVER_EVENTS, TableName.QUARANTINE, TableName.EXCEPTIONS
BRONZE_SCHEMA = (
    "_raw STRING, _event_id STRING, _ingest_time TIMESTAMP, "
    "_manifest_id STRING, _source_file STRING, _line BIGINT"
)


# --------------------------------------------------------------------------------------
# Pure
# --------------------------------------------------------------------------------------


def test_conservation_balances_per_manifest_and_names_the_broken_one() -> None:
    bronze = {"m1": ("orders", 10), "m2": ("logins", 4)}
    outcomes = {
        ("m1", "silver"): 6,
        ("m1", "duplicate"): 1,
        ("m1", "corrected"): 1,
        ("m1", "quarantine"): 1,
        ("m1", "exceptions"): 1,
        ("m2", "silver"): 4,
    }
    balances = balance_manifests(bronze, outcomes)
    assert balances == [
        ManifestBalance("m1", "orders", 10, silver=6, duplicate=1, corrected=1, quarantined=1, held=1),
        ManifestBalance("m2", "logins", 4, silver=4),
    ]
    check_conservation(balances)
    assert plain(balances[0])["balanced"] is True

    lost = balance_manifests(bronze, {**outcomes, ("m2", "silver"): 3})
    with pytest.raises(ConservationError) as info:
        check_conservation(lost)
    message = str(info.value)
    assert "manifest m2 (logins): Bronze has 4 rows but Silver accounts for 3" in message
    assert "nothing was written" in message
    assert "\n" not in message

    invented = balance_manifests(bronze, {**outcomes, ("m3", "silver"): 1})
    with pytest.raises(ConservationError, match=r"manifest m3 .*Bronze has 0 rows but Silver accounts for 1"):
        check_conservation(invented)
    with pytest.raises(UsageError, match="unknown fate 'lost'"):
        balance_manifests(bronze, {("m1", "lost"): 1})


def test_ranges_widen_to_whole_months() -> None:
    assert month_scope(None, None) == (None, None)
    assert month_scope(date(2025, 2, 14), None) == ("2025-02", None)
    assert month_scope(date(2025, 2, 1), date(2025, 3, 1)) == ("2025-02", "2025-03")
    assert month_scope(date(2025, 2, 1), date(2025, 3, 2)) == ("2025-02", "2025-04")
    assert month_scope(None, date(2025, 12, 31)) == (None, "2026-01")
    with pytest.raises(UsageError, match="empty range"):
        month_scope(date(2025, 3, 5), date(2025, 3, 1))


def test_adapters_accept_exactly_what_the_generator_writes() -> None:
    assert set(ADAPTERS) == set(SCHEMAS)
    for feed, versions in SCHEMAS.items():
        adapter = ADAPTERS[feed]
        assert adapter.accepted_versions == tuple(versions), feed
        for schema in adapter.schemas:
            assert schema.names == versions[schema.version], (feed, schema.version)


def test_unknown_resolver_version_is_refused() -> None:
    assert entity_resolution.resolver_for("1") is entity_resolution.resolve_v1
    with pytest.raises(UsageError, match="entity_resolution has no version '7'; known versions: 1"):
        entity_resolution.resolver_for("7")


# --------------------------------------------------------------------------------------
# Spark on inline rows
# --------------------------------------------------------------------------------------

ORDER_V2 = {
    "schema_version": "2",
    "event_id": "o1",
    "event_time": "2025-01-01T10:00:00Z",
    "customer_email": "A@x.com",
    "card_fingerprint": "c",
    "device_id": "d",
    "amount": 12.5,
    "currency": "EUR",
    "merchant_id": "m",
    "revision": 1,
}


def order(**changes: Any) -> str:
    record = {**ORDER_V2, **changes}
    return json.dumps({k: v for k, v in record.items() if v is not ...}, separators=(",", ":"))


def bronze_frame(spark: Any, feed: str, lines: list[str]) -> Any:
    from datetime import datetime

    ingest = datetime(2025, 1, 2)
    rows = [(text, None, ingest, "m", f"{feed}/f", n) for n, text in enumerate(lines, start=1)]
    return spark.createDataFrame(rows, BRONZE_SCHEMA)


@pytest.mark.spark
def test_canonicalise_is_strict_about_shape_and_types(spark_session: Any) -> None:
    v1 = (
        '{"schema_version":"1","event_id":"o2","event_time":"2025-01-01T10:00:00+01:00","email":" B@x.com",'
        '"card_fingerprint":"c","device_id":"d","amount_cents":1250,"currency":"EUR","merchant_id":"m",'
        '"revision":2}\r'
    )
    orders = [
        order(extra="ignored"),  # 1 undeclared keys are ignored
        v1,  # 2 v1: email and amount_cents; CR and offset accepted
        order() + " x",  # 3 trailing garbage
        '{"event_id":"a","event_id":"b"}',  # 4 duplicate key
        "[1,2]",  # 5 not an object
        order(schema_version=...),  # 6 no version
        order(schema_version="9"),  # 7 unknown version
        order(schema_version=2),  # 8 version is not a string
        order(event_id=None),  # 9 null id
        order(event_id="  "),  # 10 blank id
        order(amount="12.5"),  # 11 number as a string
        order(revision=1.5),  # 12 not an integer
        order(card_fingerprint=...),  # 13 declared field absent
        order(event_time="2025-02-30T00:00:00Z"),  # 14 impossible date
        v1.replace('"amount_cents":1250', '"amount_cents":12.5'),  # 15 cents must be whole
        order(currency=None),  # 16 JSON null is a wrong type
        order(event_id=...),  # 17 absent id
        "",  # 18 empty line
    ]
    logins = [
        '{"schema_version":"1","event_id":"l1","event_time":"2025-01-01T10:00:00Z","customer_email":"a@x.com",'
        '"device_id":"d","ip":"1.2.3.4","success":true,"revision":1}',
        '{"schema_version":"1","event_id":"l2","event_time":"2025-01-01T10:00:00Z","customer_email":"a@x.com",'
        '"device_id":"d","ip":"1.2.3.4","success":"yes","revision":1}',
    ]
    settlements = [
        '1,s1,2025-01-01T10:00:00Z,o1,12.50,"EUR",1',  # 1 quoted cell
        "1,s1,2025-01-01T10:00:00Z,o1,12.50,EUR,1,EXTRA",  # 2 extra column
        "1;s1;2025-01-01T10:00:00Z;o1;12.50;EUR;1",  # 3 wrong separator
        "1,s2,2025-01-01T10:00:00Z,o1,,EUR,1",  # 4 empty amount
        "1,,2025-01-01T10:00:00Z,o1,1.00,EUR,1",  # 5 empty id
        "9,s3,2025-01-01T10:00:00Z,o1,1.00,EUR,1",  # 6 unknown version
        '1,s4,2025-01-01T10:00:00Z,"o,1",1.00,EUR,1\r',  # 7 comma inside quotes, CR
        "1,s5,2025-01-01T10:00:00Z,o1,twelve,EUR,1",  # 8 not a number
        "1,s6,2025-01-01T1",  # 9 truncated
    ]
    frames = [
        canonicalise(bronze_frame(spark_session, feed, lines), ADAPTERS[feed])
        for feed, lines in (("orders", orders), ("logins", logins), ("settlements", settlements))
    ]
    union = frames[0].unionByName(frames[1]).unionByName(frames[2])
    got = {(r["domain"], r["_line"]): r.asDict() for r in union.collect()}

    def reason(feed: str, line: int) -> tuple[str | None, str | None]:
        row = got[(feed, line)]
        return row["_reason"], row["_detail"]

    good = got[("orders", 1)]
    assert reason("orders", 1) == (None, None)
    assert (good["event_id"], good["order_id"], str(good["amount"]), good["customer_email"]) == (
        "o1",
        "o1",
        "12.50",
        "A@x.com",
    )
    old = got[("orders", 2)]
    assert reason("orders", 2) == (None, None)
    assert (old["schema_version"], str(old["amount"]), old["customer_email"], old["revision"]) == (
        "1",
        "12.50",
        " B@x.com",
        2,
    )
    assert old["event_time"].hour == 9  # +01:00 read as UTC (session time zone UTC)
    expected = {
        3: ("malformed", "not exactly one JSON object"),
        4: ("malformed", "not exactly one JSON object"),
        5: ("malformed", "not exactly one JSON object"),
        6: ("unknown_schema_version", "schema_version is absent"),
        7: ("unknown_schema_version", "schema_version '9' is not accepted for orders (accepted: 1, 2)"),
        8: ("wrong_type", "field schema_version is a JSON bigint, expected a string"),
        9: ("missing_event_id", "event_id is null"),
        10: ("missing_event_id", "event_id is empty"),
        11: ("wrong_type", "field amount is a JSON string, expected a decimal number"),
        12: ("wrong_type", "field revision is a JSON decimal, expected an integer"),
        13: ("malformed", "field card_fingerprint is absent"),
        14: ("wrong_type", "field event_time is a JSON string, expected an ISO-8601 timestamp with zone"),
        15: ("wrong_type", "field amount_cents is a JSON decimal, expected an integer number of cents"),
        16: ("wrong_type", "field currency is null, expected a string"),
        17: ("missing_event_id", "event_id is absent"),
        18: ("malformed", "not exactly one JSON object"),
    }
    assert {line: reason("orders", line) for line in expected} == expected
    assert got[("orders", 11)]["event_id"] is None  # quarantined rows carry no canonical values

    assert reason("logins", 1) == (None, None)
    assert got[("logins", 1)]["success"] is True
    assert reason("logins", 2) == ("wrong_type", "field success is a JSON string, expected a boolean")

    assert reason("settlements", 1) == (None, None)
    assert got[("settlements", 1)]["currency"] == "EUR"
    assert {line: reason("settlements", line)[0] for line in range(2, 10)} == {
        2: "malformed",
        3: "malformed",
        4: "wrong_type",
        5: "missing_event_id",
        6: "unknown_schema_version",
        7: None,
        8: "wrong_type",
        9: "malformed",
    }
    assert reason("settlements", 2)[1] == "CSV row has 8 columns; accepted layouts have 7"
    assert reason("settlements", 4)[1] == "field amount is empty, expected a decimal number"
    assert reason("settlements", 8)[1] == "field amount is 'twelve', expected a decimal number"
    assert got[("settlements", 7)]["order_id"] == "o,1"
    assert got[("settlements", 7)]["revision"] == 1


def entity_by_hand(email: str) -> str:
    return "e1-" + hashlib.sha256(email.strip().lower().encode()).hexdigest()[:16]


@pytest.mark.spark
def test_entity_resolution_v1_exact_normalised_email_and_order_inheritance(spark_session: Any) -> None:
    rows = [
        ("orders", "o1", " Alice.Smith@Gmail.com ", "o1", 1),
        ("orders", "o2", "alice.smith@gmail.com", "o2", 2),
        ("orders", "o3", "alicesmith@gmail.com", "o3", 3),  # v1 keeps gmail dots apart
        ("logins", "l1", "ALICE.SMITH@GMAIL.COM\t", None, 4),
        ("settlements", "s1", None, "o3", 5),  # no email: entity of its order
        ("refunds", "r1", "   ", "o1", 6),  # blank email: entity of its order
        ("outcomes", "x1", None, "o-held", 7),  # order not in the input: unresolved
    ]
    events = spark_session.createDataFrame(
        rows, "domain STRING, event_id STRING, customer_email STRING, order_id STRING, n INT"
    )
    first = {r["event_id"]: r.asDict() for r in entity_resolution.resolve_v1(events).collect()}
    second = {r["event_id"]: r.asDict() for r in entity_resolution.resolve_v1(events).collect()}

    alice = entity_by_hand("alice.smith@gmail.com")
    assert first == second
    assert len(first) == len(rows)
    assert {e: r["entity_id"] for e, r in first.items()} == {
        "o1": alice,
        "o2": alice,
        "o3": entity_by_hand("alicesmith@gmail.com"),
        "l1": alice,
        "s1": entity_by_hand("alicesmith@gmail.com"),
        "r1": alice,
        "x1": None,
    }
    assert {r["resolver"] for r in first.values()} == {"entity_resolution@1"}
    assert [first[e]["n"] for e in ("o1", "s1", "x1")] == [1, 5, 7]  # other columns pass through


# --------------------------------------------------------------------------------------
# End to end on a generated history, both formats
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class History:
    root: Path
    truth: dict[str, Any]
    lines: dict[tuple[str, int], str]
    """(file relative to root, 1-based line) -> text, for every data line."""


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    root = tmp_path_factory.mktemp("silver-history") / "out"
    generate(root, GeneratorSettings(entities=50, months=3, seed=11))
    lines: dict[tuple[str, int], str] = {}
    for path in sorted(root.glob("*/*/*")):
        relative = path.relative_to(root).as_posix()
        parts = path.read_bytes().decode("utf-8").split("\n")
        if parts[-1] == "":
            parts.pop()
        first = 2 if path.suffix == ".csv" else 1
        for offset, text in enumerate(parts[first - 1 :]):
            lines[(relative, first + offset)] = text
    truth = json.loads((root / "_ground_truth.json").read_text(encoding="utf-8"))
    return History(root, truth, lines)


def collect(table: Any) -> list[dict[str, Any]]:
    return [r.asDict() for r in table.read().collect()]


def coordinates(row: dict[str, Any]) -> tuple[str, int]:
    return (row["_source_file"], row["_line"])


@pytest.mark.spark
@pytest.mark.slow
def test_silver_from_a_generated_history(shipped_lakehouse: Any, history: History, tmp_path: Path) -> None:
    registry = shipped_lakehouse.registry
    ingested = ingest_history(registry, history.root, run_id="ingest-1")
    assert sum(r.rows_written for r in ingested) == len(history.lines)

    first = build_silver(registry, run_id="silver-1", policy=POLICY)
    silver = collect(registry.get(SILVER))
    quarantine = collect(registry.get(QUARANTINE))
    exceptions = collect(registry.get(EXCEPTIONS))

    # -- conservation, per manifest -----------------------------------------------------
    manifests = {m.manifest_id for r in ingested for m in r.manifests}
    assert {b.manifest_id for b in first.conservation} == manifests
    assert all(b.balanced for b in first.conservation)
    assert sum(b.bronze for b in first.conservation) == len(history.lines)
    assert sum(b.silver for b in first.conservation) == len(silver)
    dumped = json.loads(json.dumps(plain(first)))
    assert dumped["conservation"][0]["balanced"] is True
    assert dumped["range"] == {"since_month": None, "until_month_exclusive": None}
    assert all(set(p) == {"domain", "event_month"} for p in dumped["partitions_written"])
    assert set(first.inputs) == {f"bronze.{feed}" for feed in SCHEMAS}

    # -- every planted fault ends where the ground truth says ---------------------------
    faults = {(f["file"], f["line"]): f for f in history.truth["faults"]}
    by_coordinates = {coordinates(r): r for r in silver}
    by_event: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in silver:
        by_event[(row["domain"], row["event_id"])].append(row)
    assert all(len(rows) == 1 for rows in by_event.values()), "Silver is deduplicated by event id"
    quarantined = {coordinates(r): r for r in quarantine}
    held = {coordinates(r): r for r in exceptions}

    for where, fault in faults.items():
        fate = fault["expected_fate"]
        if fate.startswith("quarantine:"):
            row = quarantined[where]
            assert row["reason"] == fate.split(":", 1)[1], fault
            assert row["_raw"] == history.lines[where]
            if fault["kind"] == "wrong_type":
                assert f"field {fault['field']} " in row["detail"], fault
            continue
        if fate in ("duplicate", "corrected"):
            assert where not in by_coordinates, fault
            assert where not in quarantined, fault
            assert where not in held, fault
            (kept,) = by_event[(fault["feed"], fault["event_id"])]
            if fate == "duplicate":  # the kept copy is byte-identical
                assert history.lines[coordinates(kept)] == history.lines[where], fault
            else:  # the kept row is the correcting line
                winner = next(
                    c
                    for c, f in faults.items()
                    if f["event_id"] == fault["event_id"] and f["expected_fate"] == "silver"
                )
                assert coordinates(kept) == winner, fault
            continue
        if fate == "exceptions":
            row = held[where]
            assert (row["event_id"], row["status"]) == (fault["event_id"], "awaiting_approval")
            assert row["period"] == fault["event_id"][4:8] + "-" + fault["event_id"][8:10]
            assert (fault["feed"], fault["event_id"]) not in by_event
            continue
        row = by_coordinates[where]
        delivery = date.fromisoformat(fault["file"].split("/")[1])
        if fate == "silver:adjustment":
            assert row["lateness"] == "adjustment", fault
            assert row["accounting_date"] == delivery
            assert row["event_date"] < delivery
        elif fate == "silver:reopen":
            assert row["lateness"] == "reopen", fault
            assert row["accounting_date"] == row["event_date"]
            assert RestatedPeriod(row["domain"], row["event_month"]) in first.restated_periods
        else:
            assert fate == "silver", fault
            assert row["lateness"] == ("late" if fault["kind"] == "late_event" else "on_time"), fault

    # -- and nothing else: every other line is an on-time Silver row --------------------
    assert set(quarantined) == {c for c, f in faults.items() if f["expected_fate"].startswith("quarantine:")}
    assert set(held) == {c for c, f in faults.items() if f["expected_fate"] == "exceptions"}
    dropped = {c for c, f in faults.items() if not f["expected_fate"].startswith("silver")}
    assert set(by_coordinates) == set(history.lines) - dropped
    assert {r["lateness"] for c, r in by_coordinates.items() if c not in faults} == {"on_time"}
    assert {r["run_id"] for r in quarantine} == {"silver-1"}
    assert first.exceptions_added == len(held)

    # -- entity resolution v1 against the true persons ----------------------------------
    identities: dict[str, str] = history.truth["identities"]
    orders = {r["event_id"]: r for r in silver if r["domain"] == "orders"}
    persons_of_entity: dict[str, set[str]] = defaultdict(set)
    entities_of_key: dict[str, set[str]] = defaultdict(set)
    for row in silver:
        assert row["resolver"] == "entity_resolution@1"
        email = row["customer_email"]
        if email is not None:
            assert row["entity_id"] == entity_by_hand(email)
            entities_of_key[email.strip().lower()].add(row["entity_id"])
            persons_of_entity[row["entity_id"]].add(identities[email])
        elif row["order_id"] in orders:
            source = orders[row["order_id"]]
            assert row["entity_id"] == source["entity_id"]
            persons_of_entity[row["entity_id"]].add(identities[source["customer_email"]])
        else:  # its order is held in ops.exceptions: unresolved
            assert row["entity_id"] is None
            assert any(r["event_id"] == row["order_id"] for r in exceptions)
    assert all(len(e) == 1 for e in entities_of_key.values()), "one entity per normalised email"
    assert all(len(p) == 1 for p in persons_of_entity.values()), "an entity never spans two persons"
    assert any(r["entity_id"] is None for r in silver)  # the held order's followers

    silver_hash = canonical_hash(registry.get(SILVER).read())
    quarantine_hash = canonical_hash(registry.get(QUARANTINE).read(), exclude=["run_id"])

    # -- Bronze moves on: a range build writes only its month ---------------------------
    extra = tmp_path / "extra"
    login = (
        '{"schema_version":"1","event_id":"lgn-20250701-999999","event_time":"2025-07-01T10:00:00Z",'
        '"customer_email":"late@example.com","device_id":"dev_1","ip":"1.2.3.4","success":true,"revision":1}'
    )
    (extra / "logins" / "2025-07-02").mkdir(parents=True)
    (extra / "logins" / "2025-07-02" / "logins-2025-07-02-1.jsonl").write_text(login + "\n", encoding="utf-8")
    ingest_feed(registry, "logins", extra, run_id="ingest-2")
    ranged = build_silver(registry, run_id="silver-2", policy=POLICY, since=date(2025, 7, 1))
    assert ranged.partitions_written == (SilverPartition("logins", "2025-07"),)
    assert ranged.inputs["bronze.logins"] != first.inputs["bronze.logins"]
    after = collect(registry.get(SILVER))
    assert len(after) == len(silver) + 1
    assert any(r["event_id"] == "lgn-20250701-999999" for r in after)

    # -- a failing quality gate stops every write ---------------------------------------
    versions = {name: registry.get(name).current_version() for name in (SILVER, QUARANTINE, EXCEPTIONS)}
    seen: list[tuple[str, list[str]]] = []

    def refuse(table: str, rows: Any) -> None:
        seen.append((table, rows.columns))
        raise DataQualityError(f"{table}: refused by the test gate")

    with pytest.raises(DataQualityError):
        build_silver(registry, run_id="silver-x", policy=POLICY, inputs=first.inputs, gate=refuse)
    assert seen == [(SILVER, list(SILVER_COLUMNS))]
    assert {name: registry.get(name).current_version() for name in versions} == versions

    # -- the first build's pinned inputs again: identical Silver, later append absent ---
    again = build_silver(registry, run_id="silver-3", policy=POLICY, inputs=first.inputs)
    assert again.inputs == first.inputs
    assert again.partitions_removed == (SilverPartition("logins", "2025-07"),)
    assert canonical_hash(registry.get(SILVER).read()) == silver_hash
    assert canonical_hash(registry.get(QUARANTINE).read(), exclude=["run_id"]) == quarantine_hash
    assert again.exceptions_added == 0
    assert len(collect(registry.get(EXCEPTIONS))) == len(held)
    history_run_ids = [c.run_id for c in registry.get(SILVER).history()]
    assert "silver-3" in history_run_ids
    assert "silver-x" not in history_run_ids
