"""Tests of the commerce-risk history generator (pure Python, no Spark).

What: determinism, the planted fault catalogue, the validity of every other line, the
identity and fraud-ring ground truth, and the timing of derived feeds.

Why: Silver and Gold tests trust `_ground_truth.json`, so these tests re-derive what each
fault means from the raw files and the policy YAML with their own code instead of reusing
the generator's helpers: a bug in the generator cannot hide behind the same bug here.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from workloads.synthetic.faults import closed_period_fate
from workloads.synthetic.generator import (
    FATES,
    FAULT_KINDS,
    GeneratorSettings,
    LatenessRule,
    expected_fate,
    generate,
    load_lateness_policy,
)

REPO = Path(__file__).resolve().parents[3]
POLICY_FILE = REPO / "conf" / "policies.yaml"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"

# Written from the brief, not imported from the generator.
KINDS_AND_FATES: dict[str, set[str]] = {
    "exact_duplicate": {"duplicate"},
    "resent_correction": {"corrected", "silver"},
    "late_event": {"silver"},
    "backdated_closed_period": {"silver:reopen", "silver:adjustment", "exceptions"},
    "malformed_line": {"quarantine:malformed"},
    "wrong_type": {"quarantine:wrong_type"},
    "missing_id": {"quarantine:missing_event_id"},
    "unknown_schema_version": {"quarantine:unknown_schema_version"},
    "truncated_file": {"quarantine:malformed"},
}
ACTION_FATES = {"reopen": "silver:reopen", "adjust": "silver:adjustment", "hold": "exceptions"}
SETTLEMENT_COLUMNS = [
    "schema_version",
    "event_id",
    "event_time",
    "order_id",
    "amount",
    "currency",
    "revision",
]
# feed -> schema_version -> {field: type tag}
EXPECTED_SCHEMAS: dict[str, dict[str, dict[str, str]]] = {
    "orders": {
        "1": {
            "schema_version": "str",
            "event_id": "str",
            "event_time": "time",
            "email": "str",
            "card_fingerprint": "str",
            "device_id": "str",
            "amount_cents": "int",
            "currency": "str",
            "merchant_id": "str",
            "revision": "int",
        },
        "2": {
            "schema_version": "str",
            "event_id": "str",
            "event_time": "time",
            "customer_email": "str",
            "card_fingerprint": "str",
            "device_id": "str",
            "amount": "number",
            "currency": "str",
            "merchant_id": "str",
            "revision": "int",
        },
    },
    "refunds": {
        "1": {
            "schema_version": "str",
            "event_id": "str",
            "event_time": "time",
            "order_id": "str",
            "customer_email": "str",
            "amount": "number",
            "currency": "str",
            "revision": "int",
        },
    },
    "logins": {
        "1": {
            "schema_version": "str",
            "event_id": "str",
            "event_time": "time",
            "customer_email": "str",
            "device_id": "str",
            "ip": "str",
            "success": "bool",
            "revision": "int",
        },
    },
    "settlements": {
        "1": {
            "schema_version": "str",
            "event_id": "str",
            "event_time": "time",
            "order_id": "str",
            "amount": "number",
            "currency": "str",
            "revision": "int",
        },
    },
    "outcomes": {
        "1": {
            "schema_version": "str",
            "event_id": "str",
            "event_time": "time",
            "order_id": "str",
            "label": "str",
            "revision": "int",
        },
    },
}
ID_PREFIX = {"orders": "ord-", "refunds": "ref-", "logins": "lgn-", "settlements": "stl-", "outcomes": "out-"}


# --------------------------------------------------------------------------------------
# Independent readers
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """One raw line of a delivered file, with where it sits."""

    feed: str
    delivery: date
    file: str
    number: int
    text: str
    terminated: bool


@dataclass(frozen=True)
class Tree:
    """A generated history read back from disk."""

    root: Path
    truth: dict[str, Any]
    lines: list[Line]

    def at(self, file: str, number: int) -> Line:
        for line in self.lines:
            if line.file == file and line.number == number:
                return line
        raise KeyError((file, number))


def read_tree(root: Path) -> Tree:
    truth = json.loads((root / "_ground_truth.json").read_text(encoding="utf-8"))
    lines: list[Line] = []
    for path in sorted(root.glob("*/*/*")):
        feed, folder, name = path.relative_to(root).parts
        assert name.startswith(f"{feed}-{folder}-")
        text = path.read_bytes().decode("utf-8")
        parts = text.split("\n")
        ends_clean = text.endswith("\n")
        if ends_clean:
            parts.pop()
        first = 1
        if name.endswith(".csv"):
            assert parts[0] == ",".join(SETTLEMENT_COLUMNS)
            parts = parts[1:]
            first = 2
        for offset, raw in enumerate(parts):
            last = offset == len(parts) - 1
            lines.append(
                Line(
                    feed,
                    date.fromisoformat(folder),
                    path.relative_to(root).as_posix(),
                    first + offset,
                    raw,
                    ends_clean or not last,
                )
            )
    return Tree(root, truth, lines)


def parse(line: Line) -> dict[str, Any] | None:
    """The record on a line, or None when the line is not parseable at all."""
    if line.file.endswith(".csv"):
        rows = list(csv.reader([line.text]))
        if len(rows) != 1 or len(rows[0]) != len(SETTLEMENT_COLUMNS):
            return None
        return dict(zip(SETTLEMENT_COLUMNS, rows[0], strict=True))
    try:
        value = json.loads(line.text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def type_ok(tag: str, value: Any, csv_line: bool) -> bool:
    """Whether a field value has the documented type (CSV values are all text)."""
    if tag == "time":
        if not isinstance(value, str):
            return False
        try:
            datetime.strptime(value, TIME_FORMAT)
        except ValueError:
            return False
        return True
    if csv_line:
        text = str(value)
        try:
            if tag == "int":
                int(text)
            elif tag == "number":
                float(text)
        except ValueError:
            return False
        return tag != "bool"
    if tag == "str":
        return isinstance(value, str)
    if tag == "bool":
        return isinstance(value, bool)
    if tag == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, int | float) and not isinstance(value, bool)


def event_time(record: dict[str, Any]) -> datetime:
    return datetime.strptime(str(record["event_time"]), TIME_FORMAT).replace(tzinfo=UTC)


@functools.cache
def raw_policy() -> dict[str, dict[str, Any]]:
    yaml = pytest.importorskip("yaml")
    document = yaml.safe_load(POLICY_FILE.read_text(encoding="utf-8"))
    return dict(document["lateness"])


def fate_by_hand(feed: str, when: datetime, delivery: date) -> str:
    """The lateness policy, re-derived from the YAML text and the conf comment."""
    rule = raw_policy()[feed]
    ingest = datetime(delivery.year, delivery.month, delivery.day, tzinfo=UTC)
    if ingest - when <= timedelta(days=rule["allowed_lateness_days"]):
        return "silver"
    year, month = (when.year + 1, 1) if when.month == 12 else (when.year, when.month + 1)
    closes = datetime(year, month, 1, tzinfo=UTC) + timedelta(days=rule["period_close_grace_days"])
    if ingest > closes:
        return ACTION_FATES[rule["closed_period_action"]]
    return "silver"


def fault_positions(tree: Tree) -> dict[tuple[str, int], dict[str, Any]]:
    return {(f["file"], f["line"]): f for f in tree.truth["faults"]}


def valid_records(tree: Tree, feed: str) -> Iterator[tuple[Line, dict[str, Any]]]:
    """Lines that reach Silver in some form (neither quarantined nor a duplicate copy)."""
    faults = fault_positions(tree)
    for line in tree.lines:
        if line.feed != feed:
            continue
        fault = faults.get((line.file, line.number))
        if fault is not None and (
            fault["expected_fate"].startswith("quarantine:") or fault["expected_fate"] == "duplicate"
        ):
            continue
        record = parse(line)
        assert record is not None, line
        yield line, record


def tree_hashes(root: Path) -> dict[str, str]:
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def lakehouse_generate(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``lakehouse generate`` (``python -m jobs generate``) from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "jobs", "generate", *args, "--quiet"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )


# --------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------

SMALLEST = GeneratorSettings(entities=50, months=3, seed=11)


@pytest.fixture(scope="module", params=["smallest", "default"])
def tree(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Tree:
    settings = SMALLEST if request.param == "smallest" else GeneratorSettings()
    root = tmp_path_factory.mktemp(f"history-{request.param}")
    summary = generate(root / "out", settings)
    assert summary.total_events > 0
    return read_tree(root / "out")


# --------------------------------------------------------------------------------------
# Determinism
# --------------------------------------------------------------------------------------


def test_same_seed_gives_byte_identical_tree(tmp_path: Path) -> None:
    settings = GeneratorSettings(entities=50, months=3, seed=3)
    first = generate(tmp_path / "a", settings)
    second = generate(tmp_path / "b", settings)
    hashes_a = tree_hashes(tmp_path / "a")
    assert hashes_a == tree_hashes(tmp_path / "b")
    assert len(hashes_a) == first.files_written + 1  # + the ground truth
    assert first.total_events == second.total_events


def test_different_seed_gives_different_tree(tmp_path: Path) -> None:
    generate(tmp_path / "a", GeneratorSettings(entities=50, months=3, seed=3))
    generate(tmp_path / "b", GeneratorSettings(entities=50, months=3, seed=4))
    hashes_a = tree_hashes(tmp_path / "a")
    hashes_b = tree_hashes(tmp_path / "b")
    assert hashes_a != hashes_b
    shared = set(hashes_a) & set(hashes_b)
    assert sum(hashes_a[p] == hashes_b[p] for p in shared) < len(shared) / 10


def test_output_does_not_depend_on_the_process(tmp_path: Path) -> None:
    """A fresh interpreter with another hash seed writes the same bytes (no hash(), no sets)."""
    settings = GeneratorSettings(entities=50, months=3, seed=8)
    generate(tmp_path / "here", settings)
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    lakehouse_generate(
        "--out", str(tmp_path / "there"), "--entities", "50", "--months", "3", "--seed", "8", env=env
    )
    assert tree_hashes(tmp_path / "here") == tree_hashes(tmp_path / "there")


def test_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "stale.txt").write_text("x", encoding="utf-8")
    with pytest.raises(FileExistsError):
        generate(tmp_path, SMALLEST)


def test_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="entities"):
        GeneratorSettings(entities=0)
    with pytest.raises(ValueError, match="fault_rate"):
        GeneratorSettings(fault_rate=0.9)


# --------------------------------------------------------------------------------------
# Fault catalogue
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "settings",
    [
        GeneratorSettings(entities=50, months=3, seed=1),
        GeneratorSettings(entities=50, months=3, seed=2),
        GeneratorSettings(entities=50, months=3, seed=99, start=date(2024, 12, 15)),
        GeneratorSettings(entities=50, months=3, seed=5, fault_rate=0.0),
    ],
    ids=["seed1", "seed2", "mid-month-start", "no-random-faults"],
)
def test_every_fault_kind_occurs_for_the_smallest_size(settings: GeneratorSettings, tmp_path: Path) -> None:
    summary = generate(tmp_path / "out", settings)
    assert all(summary.faults_per_kind[kind] >= 1 for kind in KINDS_AND_FATES), summary
    truth = json.loads((tmp_path / "out" / "_ground_truth.json").read_text(encoding="utf-8"))
    backdated = {
        (f["feed"], f["expected_fate"]) for f in truth["faults"] if f["kind"] == "backdated_closed_period"
    }
    assert ("orders", "exceptions") in backdated
    assert ("logins", "silver:reopen") in backdated
    assert backdated & {("refunds", "silver:adjustment"), ("settlements", "silver:adjustment")}


def test_fault_kinds_and_fates_match_the_catalogue(tree: Tree) -> None:
    faults = tree.truth["faults"]
    assert {f["kind"] for f in faults} == set(KINDS_AND_FATES)
    for fault in faults:
        assert fault["expected_fate"] in KINDS_AND_FATES[fault["kind"]], fault
        assert fault["detail"]
    corrections = Counter(f["expected_fate"] for f in faults if f["kind"] == "resent_correction")
    assert corrections["corrected"] == corrections["silver"] >= 1


def test_each_fault_line_holds_what_the_ground_truth_says(tree: Tree) -> None:
    policy = raw_policy()
    earlier_texts: dict[str, list[Line]] = defaultdict(list)
    for line in tree.lines:
        earlier_texts[line.feed].append(line)
    for fault in tree.truth["faults"]:
        line = tree.at(fault["file"], fault["line"])
        assert line.feed == fault["feed"]
        kind = fault["kind"]
        record = parse(line)
        if kind in ("malformed_line", "truncated_file"):
            assert record is None, fault
            if kind == "truncated_file":
                assert not line.terminated, fault
                last = max(ln.number for ln in tree.lines if ln.file == line.file)
                assert line.number == last
            else:
                assert line.terminated
            continue
        assert line.terminated
        assert record is not None, fault
        if kind == "wrong_type":
            field = fault["field"]
            assert field in record
            schema = EXPECTED_SCHEMAS[line.feed][str(record["schema_version"])]
            assert not type_ok(schema[field], record[field], line.file.endswith(".csv")), fault
        elif kind == "missing_id":
            assert record.get("event_id") in (None, ""), fault
        elif kind == "unknown_schema_version":
            assert record["schema_version"] == "9"
        elif kind == "exact_duplicate":
            assert record["event_id"] == fault["event_id"]
            earlier = [
                other
                for other in earlier_texts[line.feed]
                if other.text == line.text
                and (other.delivery, other.file, other.number) < (line.delivery, line.file, line.number)
            ]
            assert earlier, fault
        elif kind in ("late_event", "backdated_closed_period"):
            assert record["event_id"] == fault["event_id"]
            when = event_time(record)
            ingest = datetime(line.delivery.year, line.delivery.month, line.delivery.day, tzinfo=UTC)
            allowed = policy[line.feed]["allowed_lateness_days"]
            assert ingest - when > timedelta(days=allowed), fault  # late either way
            fate = fate_by_hand(line.feed, when, line.delivery)
            assert fate == fault["expected_fate"]
            if kind == "late_event":
                assert fate == "silver"
            else:
                assert fate != "silver"
        elif kind == "resent_correction":
            assert record["event_id"] == fault["event_id"]
        else:  # pragma: no cover - the catalogue test guards the kinds
            pytest.fail(f"unexpected kind {kind}")


def test_corrections_supersede_with_a_higher_revision(tree: Tree) -> None:
    pairs: dict[tuple[str, str], dict[str, tuple[Line, dict[str, Any]]]] = defaultdict(dict)
    for fault in tree.truth["faults"]:
        if fault["kind"] != "resent_correction":
            continue
        line = tree.at(fault["file"], fault["line"])
        record = parse(line)
        assert record is not None
        pairs[(fault["feed"], fault["event_id"])][fault["expected_fate"]] = (line, record)
    assert pairs
    for key, pair in pairs.items():
        assert set(pair) == {"corrected", "silver"}, key
        old_line, old = pair["corrected"]
        new_line, new = pair["silver"]
        assert int(new["revision"]) > int(old["revision"])
        assert new_line.delivery > old_line.delivery
        changed = {k for k in old if old[k] != new[k]} - {"revision"}
        assert len(changed) == 1, (key, changed)
        assert fate_by_hand(key[0], event_time(new), new_line.delivery) == "silver"


# --------------------------------------------------------------------------------------
# Everything else is valid
# --------------------------------------------------------------------------------------


def test_every_other_line_is_a_valid_silver_record(tree: Tree) -> None:
    faults = fault_positions(tree)
    seen_ids: dict[str, set[str]] = defaultdict(set)
    previous: dict[str, tuple[str, str]] = {}
    for line in tree.lines:
        if (line.file, line.number) in faults:
            continue
        assert line.terminated, line
        record = parse(line)
        assert record is not None, line
        version = record.get("schema_version")
        assert version in EXPECTED_SCHEMAS[line.feed], line
        schema = EXPECTED_SCHEMAS[line.feed][str(version)]
        assert set(record) == set(schema), line
        for field, tag in schema.items():
            assert type_ok(tag, record[field], line.file.endswith(".csv")), (line, field)
        assert str(record["event_id"]).startswith(ID_PREFIX[line.feed])
        assert int(record["revision"]) == 1
        assert record["event_id"] not in seen_ids[line.feed], line
        seen_ids[line.feed].add(record["event_id"])
        assert fate_by_hand(line.feed, event_time(record), line.delivery) == "silver", line
        key = (str(record["event_time"]), str(record["event_id"]))
        if line.file in previous:
            assert previous[line.file] <= key, line
        previous[line.file] = key


def test_counts_in_ground_truth_match_the_files(tree: Tree) -> None:
    per_feed = Counter(line.feed for line in tree.lines)
    silver_faults = Counter(f["feed"] for f in tree.truth["faults"] if f["expected_fate"] == "silver")
    faulty = Counter(f["feed"] for f in tree.truth["faults"])
    for feed, counts in tree.truth["counts"].items():
        assert counts["lines"] == per_feed[feed]
        assert sum(counts["fates"].values()) == per_feed[feed]
        clean = per_feed[feed] - faulty[feed]
        assert counts["fates"]["silver"] == clean + silver_faults[feed]
    folders = {(line.feed, line.delivery) for line in tree.lines}
    files = {line.file for line in tree.lines}
    assert len(files) <= 2 * len(folders)


def test_events_per_entity_month_are_in_the_target_range(tree: Tree) -> None:
    settings = tree.truth["settings"]
    per_entity_month = len(tree.lines) / (settings["entities"] * settings["months"])
    assert 15 <= per_entity_month <= 40


def test_both_order_schema_versions_occur(tree: Tree) -> None:
    versions = Counter(record["schema_version"] for _, record in valid_records(tree, "orders"))
    assert versions["1"] > 0
    assert versions["2"] > versions["1"]


# --------------------------------------------------------------------------------------
# Identities and fraud rings
# --------------------------------------------------------------------------------------


def v2_key(email: str) -> str:
    local, domain = email.strip().lower().split("@")
    local = local.split("+", 1)[0]
    if domain in ("gmail.com", "googlemail.com"):
        local = local.replace(".", "")
    return f"{local}@{domain}"


def test_identities_cover_every_email_and_v1_v2_disagree(tree: Tree) -> None:
    identities: dict[str, str] = tree.truth["identities"]
    persons: dict[str, dict[str, Any]] = tree.truth["persons"]
    assert len(persons) == tree.truth["settings"]["entities"]
    for feed, field in (
        ("orders", "customer_email"),
        ("orders", "email"),
        ("refunds", "customer_email"),
        ("logins", "customer_email"),
    ):
        for _, record in valid_records(tree, feed):
            if field in record:
                assert record[field] in identities, record
    split_by_v1 = [
        pid
        for pid, person in persons.items()
        if len({email.strip().lower() for email in person["emails"]}) > 1
    ]
    assert split_by_v1
    assert any(email != email.strip() for email in identities)
    assert any(email.strip() != email.strip().lower() for email in identities)
    v2_owner: dict[str, str] = {}
    for pid, person in persons.items():
        keys = {v2_key(email) for email in person["emails"]}
        assert len(keys) == 1, (pid, person["emails"])
        key = keys.pop()
        assert key not in v2_owner, (pid, v2_owner.get(key))
        v2_owner[key] = pid
        for email in person["emails"]:
            assert identities[email] == pid


def test_rings_share_devices_and_cards_and_households_share_a_device(tree: Tree) -> None:
    persons: dict[str, dict[str, Any]] = tree.truth["persons"]
    rings: dict[str, list[str]] = tree.truth["rings"]
    assert len(rings) == tree.truth["settings"]["ring_count"]
    for ring_id, members in rings.items():
        assert 3 <= len(members) <= 6
        assert all(persons[m]["ring"] == ring_id for m in members)
        assert set.intersection(*(set(persons[m]["devices"]) for m in members))
        assert set.intersection(*(set(persons[m]["cards"]) for m in members))
    # The sharing is visible in the records too: some device used by two ring members.
    identities: dict[str, str] = tree.truth["identities"]
    users: dict[str, set[str]] = defaultdict(set)
    for _, record in valid_records(tree, "orders"):
        email = str(record.get("customer_email", record.get("email")))
        users[record["device_id"]].add(identities[email])
    ring_of = {pid: p["ring"] for pid, p in persons.items()}
    assert any(len(people) >= 2 and all(ring_of[p] is not None for p in people) for people in users.values())
    # Outside rings, no card is shared, and a device only within a household of two.
    owners: dict[str, set[str]] = defaultdict(set)
    for pid, person in persons.items():
        for asset in (*person["devices"], *person["cards"]):
            owners[asset].add(pid)
    households: dict[str, list[str]] = tree.truth["households"]
    assert len(households) == len(persons) // 25
    for asset, people in owners.items():
        if len(people) > 1 and None in {ring_of[p] for p in people}:
            assert households.get(asset) == sorted(people), asset
            assert len(people) == 2
            assert all(ring_of[p] is None for p in people)
        elif len(people) > 1:
            assert len({ring_of[p] for p in people}) == 1


# --------------------------------------------------------------------------------------
# Derived feeds
# --------------------------------------------------------------------------------------


def test_derived_feeds_follow_their_orders(tree: Tree) -> None:
    orders = {record["event_id"]: event_time(record) for _, record in valid_records(tree, "orders")}
    settled: Counter[str] = Counter()
    settlement_ids: set[str] = set()
    for _, record in valid_records(tree, "settlements"):
        assert record["order_id"] in orders
        if record["event_id"] not in settlement_ids:
            settlement_ids.add(record["event_id"])
            settled[record["order_id"]] += 1
        gap = (event_time(record).date() - orders[record["order_id"]].date()).days
        assert 1 <= gap <= 3
    assert set(settled) == set(orders)
    assert set(settled.values()) == {1}
    for _, record in valid_records(tree, "refunds"):
        gap = (event_time(record).date() - orders[record["order_id"]].date()).days
        assert 1 <= gap <= 20


def test_outcomes_arrive_30_to_90_days_after_their_order(tree: Tree) -> None:
    orders = {record["event_id"]: event_time(record) for _, record in valid_records(tree, "orders")}
    outcomes = list(valid_records(tree, "outcomes"))
    assert outcomes
    labels = Counter(record["label"] for _, record in outcomes)
    assert set(labels) <= {"fraud", "chargeback"}
    for line, record in outcomes:
        ordered = orders[record["order_id"]].date()
        assert 30 <= (event_time(record).date() - ordered).days <= 90
        assert 30 <= (line.delivery - ordered).days <= 90


def test_ring_orders_get_fraud_outcomes_more_often(tree: Tree) -> None:
    identities: dict[str, str] = tree.truth["identities"]
    ring_of = {pid: p["ring"] for pid, p in tree.truth["persons"].items()}
    order_owner = {
        record["event_id"]: identities[str(record.get("customer_email", record.get("email")))]
        for _, record in valid_records(tree, "orders")
    }
    with_outcome = {record["order_id"] for _, record in valid_records(tree, "outcomes")}
    rates: dict[bool, list[int]] = {True: [0, 0], False: [0, 0]}
    for order_id, pid in order_owner.items():
        bucket = rates[ring_of[pid] is not None]
        bucket[0] += order_id in with_outcome
        bucket[1] += 1
    assert rates[True][1] > 0
    assert rates[True][0] / rates[True][1] > 3 * rates[False][0] / rates[False][1]


# --------------------------------------------------------------------------------------
# Policy and command line
# --------------------------------------------------------------------------------------


def test_policy_loader_reads_the_repository_policy() -> None:
    pytest.importorskip("yaml")
    policy = load_lateness_policy(POLICY_FILE)
    assert policy["orders"] == LatenessRule(3, 5, "hold")
    assert policy["logins"].closed_period_action == "reopen"
    assert policy["refunds"].closed_period_action == "adjust"
    assert set(policy) >= {"orders", "refunds", "logins", "settlements", "outcomes"}


def test_expected_fate_boundaries() -> None:
    rule = LatenessRule(3, 5, "hold")
    when = datetime(2025, 1, 31, 23, 0, tzinfo=UTC)
    assert expected_fate(rule, when, date(2025, 1, 31)) == "silver"  # before the event
    assert expected_fate(rule, when, date(2025, 2, 6)) == "silver"  # late, period open
    assert expected_fate(rule, when, date(2025, 2, 7)) == "exceptions"  # closed
    on_time = datetime(2025, 1, 28, 0, 0, tzinfo=UTC)
    assert expected_fate(LatenessRule(3, 0, "adjust"), on_time, date(2025, 1, 31)) == "silver"
    assert expected_fate(LatenessRule(3, 0, "adjust"), on_time, date(2025, 2, 2)) == ("silver:adjustment")


def test_fate_and_kind_strings_are_the_documented_ones() -> None:
    """Built from workloads.vocabulary, the strings stay exactly those written above."""
    assert list(FAULT_KINDS) == list(KINDS_AND_FATES)
    assert set(FATES) == set().union(*KINDS_AND_FATES.values())
    assert len(FATES) == len(set(FATES))
    for action, fate in ACTION_FATES.items():
        assert closed_period_fate(action) == fate
    assert all(type(fate) is str for fate in FATES)


def test_command_line_prints_the_summary(tmp_path: Path) -> None:
    out = tmp_path / "cli"
    done = lakehouse_generate(
        "--out", str(out), "--entities", "50", "--months", "3", "--seed", "5", "--start", "2025-03-01"
    )
    assert done.returncode == 0
    assert "total events" in done.stdout
    assert "truncated_file" in done.stdout
    truth = json.loads((out / "_ground_truth.json").read_text(encoding="utf-8"))
    assert truth["settings"]["start"] == "2025-03-01"
    assert truth["settings"]["seed"] == 5
