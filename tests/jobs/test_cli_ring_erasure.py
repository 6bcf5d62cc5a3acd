"""Issue 37: planted fraud-ring members erased through the command line, whatever they share.

A small history of its own (generate -> ingest each feed -> build silver under ER v1 -> build
gold -> build silver under ER v2, whose card rule gives a ring one entity id), then two ring
members erased in turn, each with its dry run and its certificate verified again: one whose
own v1 id names the ring (re-keyed in the other members' rows), one who borrowed another
member's id (left in theirs); then a person outside the rings erased by entity id
(``erase --entity``), and an address made of SQL wildcards that names nobody. Apart from the
CLI history, so that both fit the suite's per-test ceiling and run on the two workers side by
side.

The history runs once per layout (``LAYOUTS``): the shipped mixed default runs the whole
subject matrix, with a subject whose late order is held in the exceptions queue too (a
household member is erased at the end of the ML history, whose 200 persons hold households:
the generator plants one per 25); all-Delta and all-Iceberg (a copy
of the shipped configuration with every zone in one format, as a user writes it) run the ring
member whose id names its ring and the wildcard address with a hostile request id, on a
smaller history. Each layout is its own scheduling unit (``tests/conftest.py`` ``unit_of``).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from lakehouse.config import LakehouseConfig, load_config
from tests.cli_runner import Runner, Step, instance_env
from tests.conftest import drop_all
from tests.erasure_search import files_naming, owners_of

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "conf" / "lakehouse.yaml"
FEEDS = ("orders", "refunds", "logins", "settlements", "outcomes")


@dataclass(frozen=True)
class RingHistory:
    """The steps by name, the configuration, the Spark session and the two ring members
    (:func:`ring_subjects`) with what Silver holds of their rings after the erasures (``after``)."""

    steps: dict[str, Step]
    config: LakehouseConfig
    spark: Any
    ring: dict[str, Any]


MIXED = "mixed"
LAYOUTS = (MIXED, "delta", "iceberg")
"""The shipped mixed default, then every zone in Delta, then every zone in Iceberg."""
SIZES = {MIXED: ("20", "2"), "delta": ("12", "1"), "iceberg": ("12", "1")}
"""Persons and months per layout."""
HOSTILE_REQUEST = "REQ-'; DROP TABLE ops.ledger; -- %_"
"""A request id the wildcard erasure records as data (quotes, SQL, LIKE wildcards)."""


def layout_conf(layout: str, folder: Path) -> Path:
    """The shipped configuration, or a copy of it with every zone in one format."""
    if layout == MIXED:
        return CONF
    shipped = yaml.safe_load(CONF.read_text())
    shipped["zone_formats"] = dict.fromkeys(shipped["zone_formats"], layout)
    conf = folder / f"lakehouse-{layout}.yaml"
    conf.write_text(yaml.safe_dump(shipped, sort_keys=False))
    return conf


@pytest.fixture(scope="module", params=LAYOUTS)
def history(
    request: pytest.FixtureRequest,
    spark_session: Any,
    lakehouse_config: LakehouseConfig,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RingHistory]:
    layout = str(request.param)
    instance = f"ring{layout[:3]}{uuid.uuid4().hex[:6]}"
    env = instance_env(instance)
    workdir = lakehouse_config.workdir_path
    folder = tmp_path_factory.mktemp(f"ring-{layout}")
    conf = layout_conf(layout, folder)
    config = load_config(conf, environ=env, overrides={"workdir": str(workdir)})
    deliveries = folder / "history"
    run = Runner(conf, workdir, env)
    entities, months = SIZES[layout]
    run("generate", "generate", "--out", str(deliveries), "--entities", entities, "--months", months)
    for feed in FEEDS:
        run(f"ingest-{feed}", "ingest", "--feed", feed, "--source", str(deliveries))
    run("build-silver", "build", "silver", "--engine", "entity_resolution@1")
    run("build-gold", "build", "gold")
    if layout == MIXED:
        run("communities", "communities")
        run("communities-again", "communities")
    silver_v1 = silver_version(spark_session, config)
    run("build-silver-er-v2", "build", "silver", "--engine", "entity_resolution@2")
    kinds = ("named", "borrowing") if layout == MIXED else ("named",)
    ring = ring_subjects(spark_session, config, deliveries, silver_v1, kinds)
    ring["layout"] = layout
    if layout == MIXED:
        known = datetime.now(UTC).isoformat()
        for reader in ("spark", "pyiceberg"):
            member = ("asof", "gold.communities", "--at", known, "--entity", ring["named"]["entity"])
            run(f"asof-communities-{reader}", *member, "--reader", reader)
    for kind, request_id in (("named", "REQ-RING-1"), ("borrowing", "REQ-RING-2"))[: len(kinds)]:
        erase_ring_member(run, ring, kind, request_id)
    ring["after"] = ring_rows(spark_session, config, ring)
    if layout == MIXED:
        # the subject given by its entity id, as a data-protection officer who holds no address does
        alone = entity_subject(spark_session, config, deliveries, ring)
        done = run("erase-by-entity", "erase", "--entity", alone["entity"], *request_args("REQ-ENT-1"))
        run("erase-by-entity-verify", "erase", "--verify", certificate_of(done))
        alone["after"] = entity_rows(spark_session, config, alone)
        ring["by_entity"] = alone
        erased = {ring[k]["email"] for k in kinds} | set(alone["emails"])
        # a person whose late order waits in the exceptions queue
        held = held_subject(spark_session, config, erased)
        done = run("erase-held", "erase", "--subject-email", held["email"], *request_args("REQ-HELD-1"))
        run("erase-held-verify", "erase", "--verify", certificate_of(done))
        held["after"] = held_rows(spark_session, config, held)
        ring["held"] = held
    erase_wildcard(run, spark_session, config, ring)
    yield RingHistory(run.steps, config, spark_session, ring)
    from lakehouse.tables import TableRegistry

    drop_all(TableRegistry(spark_session, config))


def certificate_of(done: Step) -> str:
    return str(done.data["certificate"]["certificate_id"]) if done.code == 0 else "erasure-missing"


def erase_ring_member(run: Runner, ring: dict[str, Any], kind: str, request_id: str) -> None:
    """The member's dry run, erasure and ``erase --verify`` of its certificate."""
    address = ring[kind]["email"]
    run(f"erase-ring-{kind}-dry-run", "erase", "--subject-email", address, "--dry-run")
    done = run(f"erase-ring-{kind}", "erase", "--subject-email", address, *request_args(request_id))
    run(f"erase-ring-{kind}-verify", "erase", "--verify", certificate_of(done))


def erase_wildcard(run: Runner, spark: Any, config: LakehouseConfig, ring: dict[str, Any]) -> None:
    """LIKE's wildcards are plain characters of an address: ``%@<domain>`` names nobody. Its
    request id is hostile too, and is recorded as data."""
    wildcard = f"%@{common_domain(spark, config)}"
    before = table_rows(spark, config)
    run("erase-wildcard", "erase", "--subject-email", wildcard, *request_args(HOSTILE_REQUEST))
    ring["wildcard"] = {"address": wildcard, "before": before, "after": table_rows(spark, config)}


def mixed_only(history: RingHistory) -> None:
    if history.ring["layout"] != MIXED:
        pytest.skip("the whole subject matrix runs on the shipped mixed layout")


def test_the_history_before_the_erasures_exits_0(history: RingHistory) -> None:
    names = [*(f"ingest-{feed}" for feed in FEEDS), "generate", "build-silver", "build-gold"]
    assert {n: history.steps[n].code for n in names} == dict.fromkeys(names, 0), {
        n: history.steps[n].stderr[-1500:] for n in names if history.steps[n].code
    }


def test_communities_find_the_planted_rings_measured_recorded_and_stable_on_a_rerun(
    history: RingHistory,
) -> None:
    """Issue 43: ``lakehouse communities`` over the history's correlations groups each planted
    ring's observed members into one community with no outsider, measured against the
    generator's truth and recorded in the ledger (figures only); the same graph again writes
    nothing and gives the same hash; ``asof`` answers a member's community by both routes."""
    mixed_only(history)
    names = ("communities", "communities-again", "asof-communities-spark", "asof-communities-pyiceberg")
    assert {n: history.steps[n].code for n in names} == dict.fromkeys(names, 0), {
        n: history.steps[n].stderr[-1500:] for n in names if history.steps[n].code
    }
    first, again = history.steps["communities"].data, history.steps["communities-again"].data
    assert first["entities"] == first["inserted"] > 0
    quality = first["quality"]
    assert quality is not None, first["quality_note"]
    assert quality["ring_members"] >= 2
    assert quality["adjusted_rand_index"] == 1.0
    assert all(r["captured"] == r["members"] and r["outsiders"] == 0 for r in quality["rings"]), quality
    assert quality["false_communities"] == 0, "households aside, no community outside the rings"
    assert (again["inserted"], again["regrouped"], again["retracted"]) == (0, 0, 0)
    assert again["unchanged"] == first["entities"]
    assert (again["content_hash"], again["version"]) == (first["content_hash"], first["version"])

    from lakehouse.tables import TableRegistry
    from ledger.entries import CommunitiesMeasured
    from ledger.reader import LedgerReader

    registry = TableRegistry(history.spark, history.config)
    measured = [
        e
        for e in LedgerReader.for_registry(registry).entries(kind="communities_measured")
        if isinstance(e, CommunitiesMeasured) and e.run_id == first["run_id"]
    ]
    assert [(m.basis, m.engine, m.report["adjusted_rand_index"]) for m in measured] == [
        ("ground_truth", "community@1", 1.0)
    ]
    assert {r["best_community"] for r in measured[0].report["rings"]} == {""}, "no community name"

    member = history.ring["named"]["entity"]
    for reader in ("spark", "pyiceberg"):
        answer = history.steps[f"asof-communities-{reader}"].data
        assert answer["routes_agree"], reader
        assert [r["entity_id"] for r in answer["rows"]] == [member], reader
        assert answer["rows"][0]["community_id"].startswith("cm-")
        assert answer["rows"][0]["size"] >= 2, "a ring member's community holds its ring"


def test_planted_ring_members_are_erased_and_verified_whatever_they_share(history: RingHistory) -> None:
    """Issue 37, under ER v2 (a ring is one entity): erasing a ring member exits 0 and verifies.
    The member whose own v1 id names the ring: that id is found nowhere afterwards, and the
    other members keep their rows under one new ``rk-`` id. The member who borrowed another
    member's id: that id stays theirs, on the same rows (mixed layout only; the named member
    on every layout)."""
    kinds = [k for k in ("named", "borrowing") if k in history.ring]
    steps = [f"erase-ring-{k}{s}" for k in kinds for s in ("-dry-run", "", "-verify")]
    assert {n: history.steps[n].code for n in ("build-silver-er-v2", *steps)} == dict.fromkeys(
        ("build-silver-er-v2", *steps), 0
    ), {
        name: (history.steps[name].stderr[-1500:], json.dumps(history.steps[name].data, default=str)[-3000:])
        for name in steps
        if history.steps[name].code
    }
    named = history.ring["named"]
    after = history.ring["after"]

    dry = history.steps["erase-ring-named-dry-run"].data["places"]["identifiers"]
    assert dry["shared_entities"] >= 1, "the ring's id is the subject's own: re-keyed in the others' rows"
    certificate = history.steps["erase-ring-named"].data["certificate"]
    assert certificate["verification"]["hits"] == []
    assert history.steps["erase-ring-named-verify"].data["hits"] == []
    assert "entity_id" in certificate["tables"]["silver.events"]["redacted"]
    if history.ring["layout"] == MIXED:
        assert "gold.communities" in certificate["tables"], "the member's community row went too"
    assert after["named"]["subject_rows"] == 0
    assert after["named"]["rows_under_entity"] == 0, "the old id is gone from Silver"
    assert after["named"]["daily_under_entity"] == 0, "and from Gold (a shared entity's daily rows go)"
    assert after["named"]["others_rows"] == named["before"]["others_rows"], "the others' rows stay"
    new_ids = after["named"]["others_entities"]
    assert len(new_ids) == 1, new_ids
    assert new_ids[0].startswith("rk-"), "one new id for the whole rest of the ring"
    from lakehouse.tables import TableRegistry

    registry = TableRegistry(history.spark, history.config)
    assert files_naming(registry, [named["email"], named["entity"]]) == []
    if "borrowing" not in history.ring:
        return
    borrowing = history.ring["borrowing"]

    dry = history.steps["erase-ring-borrowing-dry-run"].data["places"]["identifiers"]
    assert dry["borrowed_entities"] >= 1, "another member's own id is not the subject's identifier"
    certificate = history.steps["erase-ring-borrowing"].data["certificate"]
    assert certificate["verification"]["hits"] == []
    assert history.steps["erase-ring-borrowing-verify"].data["hits"] == []
    assert after["borrowing"]["subject_rows"] == 0
    assert after["borrowing"]["others_rows"] == borrowing["before"]["others_rows"]
    assert after["borrowing"]["others_entities"] == [borrowing["entity"]], "the borrowed id stays theirs"
    under = after["borrowing"]["rows_under_entity"]
    assert borrowing["before"]["others_rows"] <= under < borrowing["before"]["rows_under_entity"]
    assert files_naming(registry, [borrowing["email"]]) == []


def test_a_subject_given_by_entity_id_is_erased_and_verified(history: RingHistory) -> None:
    """``erase --entity ID`` of a person outside the rings whose ER v2 entity is theirs alone:
    exits 0, its certificate's scan and ``erase --verify`` find nothing, no row of Silver or
    Gold is under the id afterwards, no file names the id or the person's addresses, and every
    other entity keeps its Silver rows."""
    mixed_only(history)
    steps = ("erase-by-entity", "erase-by-entity-verify")
    assert {n: history.steps[n].code for n in steps} == dict.fromkeys(steps, 0), {
        n: (history.steps[n].stderr[-1500:], json.dumps(history.steps[n].data, default=str)[-3000:])
        for n in steps
        if history.steps[n].code
    }
    alone = history.ring["by_entity"]
    certificate = history.steps["erase-by-entity"].data["certificate"]
    assert certificate["verification"]["hits"] == []
    assert history.steps["erase-by-entity-verify"].data["hits"] == []
    assert "silver.events" in certificate["tables"], "the subject's Silver rows were erased"
    assert alone["before"]["rows_under_entity"] > 0
    assert alone["after"]["rows_under_entity"] == 0
    assert alone["after"]["daily_under_entity"] == 0
    assert alone["after"]["others_rows"] == alone["before"]["others_rows"], (
        "every other entity keeps its rows"
    )
    from lakehouse.tables import TableRegistry

    registry = TableRegistry(history.spark, history.config)
    assert files_naming(registry, [alone["entity"], *alone["emails"]]) == []


def test_an_address_of_sql_wildcards_is_bound_as_data_and_erases_nothing(history: RingHistory) -> None:
    """Issue 37, hostile subjects on the product path: ``%@<the commonest domain>`` would match
    every address of that domain as a LIKE pattern. As an address it names nobody: exit 0, a
    certificate that erased no table, a clean scan, and every table (the ledger aside, which
    records the request) holds exactly the rows it held. Its request id, quotes, SQL and
    wildcards included, is recorded as it was given: bound as data, on every layout."""
    step = history.steps["erase-wildcard"]
    assert step.code == 0, step.stderr[-1500:]
    assert step.data["certificate"]["request_id"] == HOSTILE_REQUEST
    wildcard = history.ring["wildcard"]
    assert wildcard["address"].startswith("%@")
    certificate = step.data["certificate"]
    assert certificate["tables"] == {}
    assert certificate["verification"]["hits"] == []
    assert not any(t["versions"] or t["candidates"] for t in step.data["places"]["tables"])
    assert wildcard["after"] == wildcard["before"]
    assert sum(wildcard["before"].values()) > 0


def test_a_subject_whose_late_order_is_held_is_erased_from_the_exceptions_queue(history: RingHistory) -> None:
    """Issue 37, a subject with a held exception (a late order waiting for approval): exits 0
    and verifies; the exceptions queue loses the held line naming them and nothing else."""
    mixed_only(history)
    steps = ("erase-held", "erase-held-verify")
    assert {n: history.steps[n].code for n in steps} == dict.fromkeys(steps, 0), {
        n: (history.steps[n].stderr[-1500:], json.dumps(history.steps[n].data, default=str)[-3000:])
        for n in steps
        if history.steps[n].code
    }
    held = history.ring["held"]
    certificate = history.steps["erase-held"].data["certificate"]
    assert certificate["verification"]["hits"] == []
    assert history.steps["erase-held-verify"].data["hits"] == []
    assert "ops.exceptions" in certificate["tables"]
    before, after = held["before"], held["after"]
    assert before["exceptions_naming"] >= 1
    assert (after["exceptions_naming"], after["silver_rows"]) == (0, 0)
    assert after["exceptions"] == before["exceptions"] - before["exceptions_naming"]
    from lakehouse.tables import TableRegistry

    registry = TableRegistry(history.spark, history.config)
    assert files_naming(registry, [held["email"]]) == []


def common_domain(spark: Any, config: LakehouseConfig) -> str:
    """The domain most of Silver's addresses share."""
    from pyspark.sql import functions as F

    from lakehouse.tables import TableRegistry

    silver = TableRegistry(spark, config).get("silver.events").read()
    domain = F.substring_index(F.lower(F.trim("customer_email")), "@", -1).alias("domain")
    rows = silver.where(F.col("customer_email").isNotNull()).groupBy(domain).count()
    return str(rows.orderBy(F.desc("count"), "domain").first()["domain"])


def table_rows(spark: Any, config: LakehouseConfig) -> dict[str, int]:
    """Every existing table's rows, the ledger aside."""
    from lakehouse.tables import TableRegistry

    registry = TableRegistry(spark, config)
    return {
        t.name: t.read().count()
        for t in registry
        if t.name != "ops.ledger" and t.exists() and t.current_version() is not None
    }


def request_args(request: str) -> tuple[str, ...]:
    return ("--request", request, "--reason", "GDPR art. 17")


def entity_subject(
    spark: Any, config: LakehouseConfig, deliveries: Path, ring: dict[str, Any]
) -> dict[str, Any]:
    """A person outside every planted ring whose current (ER v2) entity id holds their own
    addresses only, with Silver rows: the id, the addresses, and the rows before the erasure."""
    truth = json.loads((deliveries / "_ground_truth.json").read_text())
    in_rings = {p for members in truth["rings"].values() for p in members}
    owners = owners_of(spark, config)
    erased = {ring[k]["email"] for k in ("named", "borrowing")}
    for person in sorted(truth["persons"]):
        if person in in_rings:
            continue
        emails = {e.strip().lower() for e in truth["persons"][person]["emails"]}
        if emails & erased:
            continue
        entities = [e for e, vs in sorted(owners.items()) if vs & emails]
        if len(entities) == 1 and owners[entities[0]] <= emails:
            found: dict[str, Any] = {"entity": entities[0], "emails": sorted(owners[entities[0]])}
            found["before"] = entity_rows(spark, config, found)
            return found
    raise AssertionError("no person outside the rings has an entity of their own")


def entity_rows(spark: Any, config: LakehouseConfig, subject: dict[str, Any]) -> dict[str, int]:
    """Silver and Gold daily rows under the subject's entity id, and Silver rows of every other entity."""
    from pyspark.sql import functions as F

    from lakehouse.tables import TableRegistry

    registry = TableRegistry(spark, config)
    silver = registry.get("silver.events").read()
    mine = F.col("entity_id") == subject["entity"]
    return {
        "rows_under_entity": silver.where(mine).count(),
        "daily_under_entity": registry.get("gold.entity_daily").read().where(mine).count(),
        "others_rows": silver.where(~mine | F.col("entity_id").isNull()).count(),
    }


def silver_version(spark: Any, config: LakehouseConfig) -> int:
    from lakehouse.tables import TableRegistry

    version = TableRegistry(spark, config).get("silver.events").current_version()
    assert version is not None
    return version


def ring_subjects(
    spark: Any,
    config: LakehouseConfig,
    deliveries: Path,
    v1_version: int,
    kinds: tuple[str, ...] = ("named", "borrowing"),
) -> dict[str, Any]:
    """Addresses of planted ring members (the generator's ground truth) with Silver rows, each
    sharing its ER v2 entity id with other addresses' rows, one per kind of ``kinds``: ``named``
    (the ring's id is its own v1 id, the smallest) and ``borrowing`` (another ring's member named
    it), with that id and the other addresses that hold it."""
    from pyspark.sql import functions as F

    from lakehouse.tables import TableRegistry

    truth = json.loads((deliveries / "_ground_truth.json").read_text())
    silver = TableRegistry(spark, config).get("silver.events")
    key = F.lower(F.trim("customer_email"))
    pairs = [key.alias("v"), F.col("entity_id").alias("e")]
    v1 = {r["v"]: r["e"] for r in silver.read(v1_version).select(*pairs).distinct().collect() if r["v"]}
    v2 = {r["v"]: r["e"] for r in silver.read().select(*pairs).distinct().collect() if r["v"]}
    found: dict[str, dict[str, Any]] = {}
    for ring in sorted(truth["rings"]):
        members = {e.strip().lower() for p in truth["rings"][ring] for e in truth["persons"][p]["emails"]}
        present = sorted(members & set(v2))
        for address in present:
            others = sorted(a for a in present if a != address and v2[a] == v2[address])
            if not others or v2[address] is None:
                continue
            kind = "named" if v1.get(address) == v2[address] else "borrowing"
            if kind in kinds and kind not in found and ring not in {f["ring"] for f in found.values()}:
                found[kind] = {"ring": ring, "email": address, "entity": v2[address], "others": others}
    assert set(found) == set(kinds), f"a ring with a shared ER v2 id per kind of {kinds}: {found}"
    before = ring_rows(spark, config, found)
    for kind in found:
        found[kind]["before"] = before[kind]
    return found


def ring_rows(spark: Any, config: LakehouseConfig, ring: dict[str, Any]) -> dict[str, Any]:
    """Per erased ring member: the other addresses' Silver rows and their entity ids, the rows
    under the member's shared id, and the Gold daily rows under it."""
    from pyspark.sql import functions as F

    from lakehouse.tables import TableRegistry

    registry = TableRegistry(spark, config)
    silver = registry.get("silver.events").read()
    daily = registry.get("gold.entity_daily").read()
    out: dict[str, Any] = {}
    for kind in (k for k in ("named", "borrowing") if k in ring):
        others = silver.where(F.lower(F.trim("customer_email")).isin(ring[kind]["others"]))
        entity = ring[kind]["entity"]
        out[kind] = {
            "others_rows": others.count(),
            "others_entities": sorted({r[0] for r in others.select("entity_id").distinct().collect()}),
            "rows_under_entity": silver.where(F.col("entity_id") == entity).count(),
            "daily_under_entity": daily.where(F.col("entity_id") == entity).count(),
            "subject_rows": silver.where(F.lower(F.trim("customer_email")) == ring[kind]["email"]).count(),
        }
    return out


ADDRESS = re.compile(r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]+")


def held_subject(spark: Any, config: LakehouseConfig, erased: set[str]) -> dict[str, Any]:
    """The address in a late order line held in the exceptions queue, with what names it."""
    from lakehouse.tables import TableRegistry

    exceptions = TableRegistry(spark, config).get("ops.exceptions").read()
    for row in exceptions.where("status = 'awaiting_approval'").orderBy("exception_id").collect():
        addresses = sorted(set(ADDRESS.findall(str(row["record"]).lower())) - erased)
        if addresses:
            found: dict[str, Any] = {"email": addresses[0], "exception_id": row["exception_id"]}
            found["before"] = held_rows(spark, config, found)
            return found
    raise AssertionError("no held exception names an address")


def held_rows(spark: Any, config: LakehouseConfig, subject: dict[str, Any]) -> dict[str, int]:
    """Exceptions rows naming the subject's address, its Silver rows, every exceptions row."""
    from pyspark.sql import functions as F

    from lakehouse.tables import TableRegistry

    registry = TableRegistry(spark, config)
    naming = F.when(F.lower("record").contains(subject["email"]), 1).otherwise(0)
    counted = registry.get("ops.exceptions").read().agg(F.count("*"), F.sum(naming)).first()
    assert counted is not None
    silver = registry.get("silver.events").read()
    return {
        "exceptions_naming": int(counted[1] or 0),
        "exceptions": int(counted[0]),
        "silver_rows": silver.where(F.lower(F.trim("customer_email")) == subject["email"]).count(),
    }
