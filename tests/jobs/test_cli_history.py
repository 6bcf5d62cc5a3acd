"""Every command through the command line, on one history built by the command line.

The module builds one lakehouse with the shipped configuration (mixed formats) under its
own instance: generate -> ingest each feed -> build silver -> build gold -> replay the
shipped plan -> approve -> ack -> publish -> asof -> ledger verify -> rollback -> reindex,
and along the way the refusals a user meets (exit 2), a held publication (exit 5), a
lineage that no run produced (exit 1), a tampered Gold row (``asof`` exit 7, checked as a
real process) and a tampered ledger (``ledger verify`` exit 4). A missing Java is exit 3,
in a real process. At the end, the OpenLineage events every recorded run of the history sent
(``<workdir>/lineage/events.ndjson``) are validated against the OpenLineage JSON schema and
matched with the ledger entries. Commands run in this process through :func:`jobs.cli.main` (the Spark
session is shared), which reads the test's work dir and instance like a real run would.

Exit 6 (an injected failure) has no command-line switch: it is checked where failures are
injected, in ``tests/workloads/replay/test_replay_flow.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lakehouse.config import LakehouseConfig, load_config
from tests.cli_runner import Runner, Step, instance_env
from tests.conftest import NO_JVM_HOME, drop_all
from tests.erasure_search import files_naming, words
from tests.openlineage_schema import read_events, schema_errors

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "conf" / "lakehouse.yaml"
PLAN = REPO / "conf" / "plans" / "er-v3-recorrelation.yaml"
FEEDS = ("orders", "refunds", "logins", "settlements", "outcomes")
ML_TABLES = ("gold.training_sets", "gold.calibration_reports", "gold.fraud_scores")
"""Written by training-set, calibrate and score, which this history does not run."""
RECONCILE_TABLES = ("ops.reconcile_reports",)
"""Written by reconcile, which this history does not run (tests/jobs/test_reconcile_cli.py does)."""
COMMUNITY_TABLES = ("gold.communities",)
"""Written by communities, which this history does not run (tests/jobs/test_cli_ring_erasure.py does)."""


@dataclass(frozen=True)
class History:
    """The steps of the module's command-line history, by name, and its configuration."""

    steps: dict[str, Step]
    config: LakehouseConfig
    env: dict[str, str]
    subject: dict[str, list[str]]
    """The erased subject's identifiers, read from Silver and Gold before the erasure."""
    subject_after: dict[str, list[str]]
    """The same search after the erasure."""
    resent_lines: tuple[int, int]
    """Lines of the redelivery after the erasure: all of them, and those naming the subject."""
    delivered: dict[str, bytes]
    """The files of the extract made before the erasure, read before the erasure deleted them."""
    streamed: dict[str, dict[str, Any]]
    """The streaming tables after the crashed stream, after its resumption, after the Gold build."""
    remade: dict[str, bytes]
    """The files of the extract made again after the erasure."""

    def __getitem__(self, name: str) -> Step:
        return self.steps[name]


def history_step(run: Runner, name: str) -> Step:
    return run.steps[name]


def tamper_gold_row(spark: Any, config: LakehouseConfig) -> str:
    """Move one serving row's recorded_at to 2030 behind the product's back; returns its id."""
    from pyspark.sql import functions as F

    from lakehouse.tables import TableRegistry

    gold = TableRegistry(spark, config).get("gold.correlations")
    victim = gold.read().orderBy("correlation_id").limit(1)
    rows = spark.createDataFrame(victim.collect(), victim.schema)
    later = rows.withColumn("recorded_at", F.lit(datetime(2030, 1, 1)).cast("timestamp"))
    gold.merge(later, ["correlation_id", "run_id"], run_id="tamper")
    return str(victim.first()["correlation_id"])


def subject_identifiers(
    spark: Any, config: LakehouseConfig, email: str | None = None
) -> dict[str, list[str]]:
    """A subject with correlations (the first serving correlation's ``entity_a``, unless
    ``email`` names one): its email, order ids and entity ids in Silver, and Gold rows."""
    from pyspark.sql import functions as F

    from lakehouse.tables import TableRegistry

    registry = TableRegistry(spark, config)
    silver = registry.get("silver.events").read()
    if email is None:
        entity = registry.get("gold.correlations").read().orderBy("entity_a").first()["entity_a"]
        email = (
            silver.where(F.col("entity_id") == entity)
            .where("customer_email IS NOT NULL")
            .first()["customer_email"]
        )
    mine = silver.where(F.lower(F.trim("customer_email")) == email.strip().lower())
    orders = sorted({r[0] for r in mine.where("domain = 'orders'").select("event_id").collect()})
    own = mine.unionByName(silver.where(F.col("order_id").isin(orders or ["-"])))
    entities = sorted({r[0] for r in own.select("entity_id").collect() if r[0]})
    correlations = registry.get("gold.correlations").read()
    gold = correlations.where(
        F.col("entity_a").isin(entities or ["-"]) | F.col("entity_b").isin(entities or ["-"])
    )
    provisional = registry.get("gold.provisional_correlations").read()
    streamed = provisional.where(
        F.col("entity_a").isin(entities or ["-"]) | F.col("entity_b").isin(entities or ["-"])
    )
    ids = gold.select("correlation_id").unionByName(streamed.select("correlation_id")).distinct()
    return {
        "correlations": sorted(str(r[0]) for r in ids.collect()),
        "provisional_rows": [str(streamed.count())],
        "emails": [email.strip().lower()],
        "orders": orders,
        "entities": entities,
        "silver_rows": [str(own.distinct().count())],
        "email_less_rows": [str(own.where("customer_email IS NULL").distinct().count())],
        "gold_rows": [str(gold.count())],
        "silver_total": [str(silver.count())],
    }


@pytest.fixture(scope="module")
def history(
    spark_session: Any, lakehouse_config: LakehouseConfig, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[History]:
    instance = f"cli{uuid.uuid4().hex[:6]}"
    env = instance_env(instance)
    workdir = lakehouse_config.workdir_path
    config = load_config(CONF, environ=env, overrides={"workdir": str(workdir)})
    folder = tmp_path_factory.mktemp("cli")
    deliveries = folder / "history"
    run = Runner(CONF, workdir, env)

    run("tables-before", "tables")
    run("generate", "generate", "--out", str(deliveries), "--entities", "20", "--months", "2")
    run("generate-again", "generate", "--out", str(deliveries), "--entities", "20", "--months", "2")
    for feed in FEEDS:
        run(f"ingest-{feed}", "ingest", "--feed", feed, "--source", str(deliveries))
    run("ingest-orders-again", "ingest", "--feed", "orders", "--source", str(deliveries))
    run("ingest-unknown-feed", "ingest", "--feed", "nope", "--source", str(deliveries))
    # the streaming provisional path over the deliveries, before any batch build: a crash after
    # the first micro-batch's write, the rerun that resumes it, and a run with nothing new
    run("stream-unknown-fail-point", "stream", "--available-now", "--fail-at", "nope")
    er_v1 = ("--engine", "entity_resolution@1")  # as the Silver build below
    run("stream-crash", "stream", "--available-now", *er_v1, "--fail-at", "after_sink_write")
    after_crash = stream_tables(spark_session, config)
    run("stream", "stream", "--available-now", *er_v1)
    resumed = stream_tables(spark_session, config)
    run("stream-caught-up", "stream", "--available-now", *er_v1)
    # the history was decided by ER v1 (what the shipped er-v3 plan restates): a fresh
    # lakehouse would otherwise start under the latest effective resolver
    run("build-silver-unknown-pin", "build", "silver", "--engine", "entity_resolution@9")
    run("build-silver-malformed-pin", "build", "silver", "--engine", "entity_resolution")
    silver = run("build-silver", "build", "silver", "--engine", "entity_resolution@1")
    if silver.code == 0:
        run("ledger-show-silver", "ledger", "show", "--run", silver.data["run_id"])
    run("build-gold", "build", "gold")
    reconciled = stream_tables(spark_session, config)
    run("divergence", "divergence", json_out=False)
    run("divergence-json", "divergence")
    run("lineage-gold", "ledger", "lineage", "gold.correlations")
    run("lineage-unknown-version", "ledger", "lineage", "gold.correlations", "--version", "999999")
    engines = folder / "engines.yaml"
    shutil.copy(REPO / "conf" / "engines.yaml", engines)
    run("engines-list", "engines", "list")
    run("engines-declare-incomplete", "engines", "declare", "--engines", str(engines), "--name", "x")
    run(
        "engines-declare",
        "engines",
        "declare",
        "--engines",
        str(engines),
        "--name",
        "correlation",
        "--implementation",
        "workloads.engines.correlation:correlate_v1",
        "--effective-from",
        "2027-01-01",
        "--description",
        "the same code declared again, as a test",
        "--param",
        "max_entities_per_asset=50",
    )
    run("dry-run", "replay", "--plan", str(PLAN), "--dry-run")
    replayed = run("replay", "replay", "--plan", str(PLAN))
    run_id = replayed.data["run_id"] if replayed.code == 0 else "replay-missing"
    run("publish-unapproved", "publish", run_id)
    run("approve-stranger", "approve", run_id, "--by", "mallory")
    # the same refusals in a real process whose java refuses: checked on the ledger read without a JVM
    no_jvm = {**os.environ, **env, "JAVA_HOME": str(NO_JVM_HOME)}
    for name, args in (
        ("approve-stranger-no-jvm", ("approve", run_id, "--by", "mallory")),
        ("ack-stranger-no-jvm", ("ack", "nobody", run_id)),
    ):
        process = [sys.executable, "-m", "jobs", *args, "--conf", str(CONF), "--workdir", str(workdir)]
        done = subprocess.run(
            process, cwd=REPO, env=no_jvm, capture_output=True, text=True, timeout=300, check=False
        )
        run.steps[name] = Step(tuple(process), done.returncode, None, done.stderr)
    run("approve", "approve", run_id, "--by", "risk-lead")
    run("publish-held", "publish", run_id)
    run("ack", "ack", "fraud-ops", run_id, "--by", "ops")
    run("publish", "publish", run_id)
    published = history_step(run, "publish")
    at = str(published.data["effective_at"]) if published.code == 0 else datetime.now(UTC).isoformat()
    run("asof-spark", "asof", "gold.correlations", "--at", at)
    run("asof-pyiceberg", "asof", "gold.correlations", "--at", at, "--reader", "pyiceberg")
    run("asof-now", "asof", "gold.correlations", "--at", datetime.now(UTC).isoformat())
    run("asof-naive-time", "asof", "gold.correlations", "--at", "2026-03-01T00:00:00")
    run("ledger-verify", "ledger", "verify")
    run("ledger-show", "ledger", "show", "--run", run_id)
    run("lineage-published", "ledger", "lineage", "gold.correlations")
    run("rollback", "rollback", run_id, "--reason", "cli test")
    run("reindex", "reindex")
    run("reindex-zero-buckets", "reindex", "--buckets", "0")
    run("submit-args", "submit-args")
    run("tables-after", "tables")
    run("ledger-verify-before-tamper", "ledger", "verify")

    # a data subject's erasure (W6), after the correction's publication and rollback
    subject = subject_identifiers(spark_session, config)
    email = subject["emails"][0]
    # a redacted audit extract as known at the publication (route (b): it was rolled back since)
    extracts = workdir / f"extracts-{instance}"
    made = run(
        "extract",
        "extract",
        "gold.correlations",
        "--at",
        at,
        "--where",
        "confidence >= 0",
        "--out",
        str(extracts / "q4"),
    )
    run("extract-over-existing", "extract", "gold.correlations", "--at", at, "--out", str(extracts / "q4"))
    delivered = {p.name: p.read_bytes() for p in (extracts / "q4").iterdir()} if made.code == 0 else {}
    run("erase-no-request", "erase", "--subject-email", email, "--reason", "art. 17")
    run("erase-not-an-address", "erase", "--subject-email", "nobody", "--dry-run")
    run("erase-dry-run", "erase", "--subject-email", f" {email.upper()} ", "--dry-run")
    served_before_erasure = datetime.now(UTC).isoformat()  # the rollback's version, which held the subject
    run("hold-add-no-reason", "hold", "add", "LH-1", "--subject-email", email, "--by", "counsel")
    run(
        "hold-add",
        "hold",
        "add",
        "LH-1",
        "--subject-email",
        email.upper(),
        "--by",
        "counsel",
        "--reason",
        "case 14",
    )
    run("hold-list", "hold", "list")
    run("erase-held", "erase", "--subject-email", f" {email} ", "--request", "REQ-0", "--reason", "art. 17")
    run("hold-release-unknown", "hold", "release", "LH-9", "--by", "counsel", "--reason", "closed")
    run("hold-release", "hold", "release", "LH-1", "--by", "counsel", "--reason", "case 14 closed")
    run("hold-list-after", "hold", "list")
    erased = run("erase", "erase", "--subject-email", email, "--request", "REQ-1", "--reason", "GDPR art. 17")
    certificate = erased.data["certificate"]["certificate_id"] if erased.code == 0 else "erasure-missing"
    run("erase-verify", "erase", "--verify", certificate)
    run("erase-verify-unknown", "erase", "--verify", "erasure-nope")
    unknown = ("--subject-email", "nobody@nowhere.example", "--request", "REQ-2", "--reason", "art. 17")
    run("erase-unknown-subject", "erase", *unknown)
    run("asof-before-erase", "asof", "gold.correlations", "--at", served_before_erasure)
    after_erasure = str(extracts / "after-erasure")
    run(
        "extract-after-erase",
        "extract",
        "gold.correlations",
        "--at",
        served_before_erasure,
        "--out",
        after_erasure,
    )
    # read now: a later erasure deletes the extracts that may hold its subject
    remade = (
        {p.name: p.read_bytes() for p in Path(after_erasure).iterdir()}
        if Path(after_erasure).is_dir()
        else {}
    )
    # no resurrection: the original deliveries again (a manifest already ingested), a rebuild
    run("ingest-after-erase", "ingest", "--feed", "orders", "--source", str(deliveries))
    # ... and the subject's order lines delivered again under a new name, in a new delivery
    redelivered, resent_lines = redeliver_orders(deliveries, folder / "redelivered", subject)
    run("ingest-redelivered-after-erase", "ingest", "--feed", "orders", "--source", str(redelivered))
    run("build-silver-after-erase", "build", "silver", "--engine", "entity_resolution@1")
    run("replay-after-erase", "replay", "--plan", str(PLAN), "--purpose", "comparison")
    run("ledger-verify-after-erase", "ledger", "verify", "--history")
    run("asof-after-erase", "asof", "gold.correlations", "--at", datetime.now(UTC).isoformat())
    subject_after = subject_identifiers(spark_session, config, email=email)

    # behind the product's back: a serving row, then the ledger
    at = datetime.now(UTC).isoformat()
    tamper_gold_row(spark_session, config)
    process = [sys.executable, "-m", "jobs", "asof", "gold.correlations", "--at", at, "--reader"]
    process += ["pyiceberg", "--conf", str(CONF), "--workdir", str(workdir), "--json"]
    disagree = subprocess.run(
        process, cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True, timeout=600, check=False
    )
    data = json.loads(disagree.stdout) if disagree.stdout.strip() else None
    run.steps["asof-tampered-process"] = Step(tuple(process), disagree.returncode, data, disagree.stderr)
    from lakehouse.tables import TableRegistry

    TableRegistry(spark_session, config).get("ops.ledger").delete_where("seq = 3")
    run("ledger-verify-tampered", "ledger", "verify")

    streamed = {"after_crash": after_crash, "resumed": resumed, "reconciled": reconciled}
    yield History(run.steps, config, env, subject, subject_after, resent_lines, delivered, streamed, remade)
    drop_all(TableRegistry(spark_session, config))


def stream_tables(spark: Any, config: LakehouseConfig) -> dict[str, Any]:
    """The provisional view by row key and status, and the committed stream batches."""
    from lakehouse.tables import TableRegistry

    registry = TableRegistry(spark, config)
    view = registry.get("gold.provisional_correlations")
    rows = view.read().collect() if view.exists() else []
    batches = registry.get("ops.stream_batches")
    quarantine = registry.get("ops.quarantine")
    return {
        "keys": sorted((r["correlation_id"], r["run_id"]) for r in rows),
        "status": sorted((r["status"], r["outcome"] or "-") for r in rows),
        "rows": [r.asDict() for r in rows],
        "batches": sorted(r["batch_id"] for r in batches.read().collect()) if batches.exists() else [],
        "quarantine": quarantine.read().count() if quarantine.exists() else 0,
    }


def redeliver_orders(
    deliveries: Path, root: Path, subject: dict[str, list[str]]
) -> tuple[Path, tuple[int, int]]:
    """Every orders file naming the subject, copied under new names into one new delivery
    folder of a new history root; returns the root and (lines, lines naming the subject)."""
    identifiers = {*subject["emails"], *subject["orders"]}
    files = sorted((deliveries / "orders").glob("*/*"))
    naming = [f for f in files if any(words(line) & identifiers for line in f.read_text().splitlines())]
    assert naming, "the subject has orders in the deliveries"
    target = root / "orders" / (date.fromisoformat(files[-1].parent.name) + timedelta(days=1)).isoformat()
    target.mkdir(parents=True)
    lines = named = 0
    for i, source in enumerate(naming):
        text = source.read_text()
        (target / f"resent-{i}{source.suffix}").write_text(text)
        rows = text.splitlines()[1:] if source.suffix == ".csv" else text.splitlines()
        lines += len(rows)
        named += sum(1 for line in rows if words(line) & identifiers)
    return root, (lines, named)


def codes(history: History, *names: str) -> dict[str, int]:
    return {name: history[name].code for name in names}


def test_every_command_of_the_cli_history_exits_0(history: History) -> None:
    ok = [
        "tables-before",
        "generate",
        *(f"ingest-{feed}" for feed in FEEDS),
        "ingest-orders-again",
        "stream",
        "stream-caught-up",
        "build-silver",
        "build-gold",
        "lineage-gold",
        "engines-list",
        "engines-declare",
        "dry-run",
        "replay",
        "approve",
        "ack",
        "publish",
        "asof-spark",
        "asof-pyiceberg",
        "ledger-verify",
        "ledger-show",
        "lineage-published",
        "rollback",
        "reindex",
        "submit-args",
        "tables-after",
        "ledger-verify-before-tamper",
    ]
    failed = {name: (history[name].code, history[name].stderr[-500:]) for name in ok if history[name].code}
    assert failed == {}


def test_the_cli_runs_in_the_tests_work_dir_and_instance(history: History) -> None:
    before = {t["name"]: t for t in history["tables-before"].data["tables"]}
    after = {t["name"]: t for t in history["tables-after"].data["tables"]}
    assert not any(t["exists"] for t in before.values()), "a fresh instance: nothing exists yet"
    # the ML tables are made by the ML commands (tests/workloads/ml/test_training_set.py checks them)
    made_elsewhere = (*ML_TABLES, *RECONCILE_TABLES, *COMMUNITY_TABLES)
    made_here = {n: t for n, t in after.items() if n not in made_elsewhere}
    assert all(t["exists"] for t in made_here.values()), [n for n, t in made_here.items() if not t["exists"]]
    workdir = str(history.config.workdir_path)
    instance = history.env["LAKEHOUSE__INSTANCE"]
    for name, table in after.items():
        assert workdir in table["location"] or table["format"] == "iceberg", (name, table["location"])
        assert instance in table["location"], (name, table["location"])
    formats = {name: t["format"] for name, t in after.items()}
    assert formats["bronze.orders"] == "delta", "the shipped zone formats"
    assert formats["silver.events"] == formats["gold.correlations"] == formats["ops.ledger"] == "iceberg"


def test_generate_ingest_and_builds_report_what_they_wrote(history: History) -> None:
    generated = history["generate"].data
    lines = {feed: sum(fates.values()) for feed, fates in generated["fates_per_feed"].items()}
    for feed in FEEDS:
        report = history[f"ingest-{feed}"].data
        assert report["rows_written"] == lines[feed], feed
    again = history["ingest-orders-again"].data
    assert again["rows_written"] == 0, "a manifest already ingested is a no-op"
    assert history["generate-again"].code == 2, "generate refuses a folder that is not empty"
    assert history["ingest-unknown-feed"].code == 2
    assert codes(history, "build-silver-unknown-pin", "build-silver-malformed-pin") == {
        "build-silver-unknown-pin": 2,
        "build-silver-malformed-pin": 2,
    }
    assert "entity_resolution@9 is not declared" in history["build-silver-unknown-pin"].stderr
    (started,) = [e for e in history["ledger-show-silver"].data["entries"] if e["kind"] == "run_started"]
    resolver = started["body"]["parameters"]["engines_in_force"]["entity_resolution"]
    assert resolver["engine"] == "entity_resolution@1"
    # the stream ran first under the same pin, so the history was already decided by ER v1: the
    # rule itself keeps v1 until a replay publishes the later version
    assert "not in force yet: entity_resolution@3" in resolver["reason"]
    assert "restates history built by entity_resolution@1" in resolver["reason"]
    silver, gold = history["build-silver"].data, history["build-gold"].data
    assert silver["run_id"].startswith("silver-")
    assert gold["run_id"].startswith("gold-")
    assert gold["events"] > 0
    lineage = history["lineage-gold"].data
    assert lineage["run_id"] == gold["run_id"], "the ledger names the build that produced Gold"
    assert history["lineage-unknown-version"].code == 4, "no run produced it: a check found a problem"


def test_the_correction_is_refused_held_then_published_and_rolled_back_through_the_cli(
    history: History,
) -> None:
    dry, replayed = history["dry-run"].data, history["replay"].data
    assert dry["affected_entity_count"] > 0
    assert replayed["status"] == "awaiting_approval"
    run_id = replayed["run_id"]
    assert codes(history, "publish-unapproved", "approve-stranger", "publish-held") == {
        "publish-unapproved": 2,
        "approve-stranger": 2,
        "publish-held": 5,
    }
    for name, named in (
        ("approve-stranger-no-jvm", "its approvers are"),
        ("ack-stranger-no-jvm", "its consumers are"),
    ):
        refused = history[name]
        assert refused.code == 2, refused.stderr
        assert named in refused.stderr, refused.stderr
        assert "Java" not in refused.stderr, "refused on the ledger read, before a JVM"
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert history["approve"].data["decision"] == "approved"
    assert history["ack"].data["recorded"] is True
    published = history["publish"].data
    assert (published["run_id"], published["status"]) == (run_id, "published")
    assert history["lineage-published"].data["run_id"] == run_id, "the published version is the replay's"
    kinds = {e["kind"] for e in history["ledger-show"].data["entries"]}
    assert {"approval", "publication"} <= kinds, kinds
    back = history["rollback"].data
    assert back["run_id"] == run_id
    assert back["to_version"] != back["from_version"]
    assert history["reindex"].data["status"] == "current", "the rollback rebuilt the index itself"


def test_asof_answers_by_both_routes_with_both_readers_and_refuses_a_naive_time(history: History) -> None:
    assert history["publish"].code == 0
    spark, python = history["asof-spark"].data, history["asof-pyiceberg"].data
    assert spark["routes_agree"] is True
    assert python["routes_agree"] is True
    assert spark["rows"]
    assert [{k: v for k, v in r.items() if k != "since"} for r in spark["rows"]] == [
        {k: v for k, v in r.items() if k != "since"} for r in python["rows"]
    ]
    assert history["asof-naive-time"].code == 2
    now = history["asof-now"].data
    assert now["routes_agree"] is True
    assert [r["correlation_id"] for r in now["rows"]] == [r["correlation_id"] for r in spark["rows"]], (
        "nothing was published between the publication and now"
    )


def test_tampering_is_caught_with_its_exit_codes(history: History) -> None:
    assert history["ledger-verify"].data["ok"] is True
    disagree = history["asof-tampered-process"]
    assert disagree.code == 7, disagree.stderr[-2000:]
    assert disagree.data["routes_agree"] is False
    tampered = history["ledger-verify-tampered"]
    assert tampered.code == 4
    assert tampered.data["ok"] is False
    assert tampered.data["first_broken_seq"] == 3


def test_engines_usage_and_submit_args_through_the_cli(history: History) -> None:
    listed = {e["engine"]: e["code"] for e in history["engines-list"].data["engines"]}
    assert set(listed.values()) == {"ok"}
    declared = history["engines-declare"].data
    assert declared["engine"]["name"] == "correlation"
    assert history["engines-declare-incomplete"].code == 2
    assert history["reindex-zero-buckets"].code == 2
    assert "--packages" in history["submit-args"].data["args"]


def test_a_missing_java_is_exit_3_in_a_real_process(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(Path(sys.executable).parent)  # python, no java
    result = subprocess.run(
        [sys.executable, "-m", "jobs", "tables", "--workdir", str(tmp_path), "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 3, result.stderr
    assert json.loads(result.stderr.strip().splitlines()[-1])["exit_code"] == 3


def test_a_subject_is_located_erased_and_verified_through_the_cli(history: History) -> None:
    assert codes(history, "erase-dry-run", "erase", "erase-verify", "erase-unknown-subject") == dict.fromkeys(
        ("erase-dry-run", "erase", "erase-verify", "erase-unknown-subject"), 0
    )
    assert codes(history, "erase-no-request", "erase-not-an-address", "erase-verify-unknown") == {
        "erase-no-request": 2,
        "erase-not-an-address": 2,
        "erase-verify-unknown": 2,
    }
    assert "--request is missing" in history["erase-no-request"].stderr
    subject = history.subject
    assert int(subject["silver_rows"][0]) > 0
    assert int(subject["gold_rows"][0]) > 0, "the chosen subject has correlations"

    dry = {t["table"]: t for t in history["erase-dry-run"].data["places"]["tables"]}
    assert dry["silver.events"]["current_rows"] == int(subject["silver_rows"][0])
    assert sum(dry["gold.correlations"]["versions"].values()) >= int(subject["gold_rows"][0])
    # every raw line of each order: a redelivered or corrected order has two lines, one Silver row
    assert dry["bronze.orders"]["current_rows"] >= len(subject["orders"]) > 0
    found = history["erase-dry-run"].data["places"]["identifiers"]
    assert found["emails"] == 1
    assert found["orders"] == len(subject["orders"])
    assert found["entities"] >= len(subject["entities"]), "every engine version's ids, the serving ones too"
    assert found["correlations"] >= len(subject["correlations"]) > 0, "every version's correlation ids"

    certificate = history["erase"].data["certificate"]
    assert certificate["verification"]["hits"] == []
    assert certificate["verification"]["files_scanned"] > 0
    assert certificate["tables"]["silver.events"]["rows"] == int(subject["silver_rows"][0])
    assert int(subject["email_less_rows"][0]) > 0, "events of the subject's orders that carry no email"
    assert certificate["tables"]["silver.events"]["versions_purged"]
    assert int(subject["provisional_rows"][0]) > 0, "the subject was in the provisional view"
    assert certificate["tables"]["gold.provisional_correlations"]["rows"] == int(
        subject["provisional_rows"][0]
    )
    assert certificate["request_id"] == "REQ-1"
    assert history["erase-verify"].data["hits"] == []
    unknown = history["erase-unknown-subject"].data
    assert unknown["places"]["tables"], "every table was searched"
    assert not any(t["versions"] or t["candidates"] for t in unknown["places"]["tables"])
    assert unknown["certificate"]["tables"] == {}


def test_a_legal_hold_refuses_the_subjects_erasure_until_it_is_released(history: History) -> None:
    assert codes(
        history, "hold-add", "hold-list", "hold-release", "hold-list-after", "erase"
    ) == dict.fromkeys(("hold-add", "hold-list", "hold-release", "hold-list-after", "erase"), 0)
    assert codes(history, "hold-add-no-reason", "hold-release-unknown", "erase-held") == {
        "hold-add-no-reason": 2,
        "hold-release-unknown": 2,
        "erase-held": 2,
    }
    assert "--reason is missing" in history["hold-add-no-reason"].stderr
    held = history["erase-held"].stderr
    assert "legal hold LH-1" in held
    assert "nothing was erased" in held
    assert [h["hold_id"] for h in history["hold-list"].data] == ["LH-1"]
    assert history["hold-list-after"].data == []
    placed = history["hold-add"].data
    assert placed["action"] == "placed"
    assert not any(i in json.dumps(placed) for i in history.subject["emails"]), (
        "the ledger gets a digest only"
    )


def test_after_the_erasure_no_table_ledger_or_work_file_names_the_subject(history: History) -> None:
    """Also after the original deliveries were ingested again, Silver was rebuilt and a replay
    ran (its candidate and review files are searched too)."""
    assert codes(history, "ingest-after-erase", "build-silver-after-erase", "replay-after-erase") == {
        "ingest-after-erase": 0,
        "build-silver-after-erase": 0,
        "replay-after-erase": 0,
    }
    assert history["replay-after-erase"].data["status"] == "compared"
    after = history.subject_after
    assert after["silver_rows"] == ["0"]
    assert after["email_less_rows"] == ["0"], "found by their order ids, and erased"
    assert after["gold_rows"] == ["0"]
    assert after["provisional_rows"] == ["0"], "the provisional view is redacted like the store"
    expected = int(history.subject["silver_total"][0]) - int(history.subject["silver_rows"][0])
    assert int(after["silver_total"][0]) == expected, "every other subject's rows stay"
    subject = history.subject
    assert subject["correlations"], "the subject's correlation ids (a digest of its entity ids)"
    identifiers = {*subject["emails"], *subject["orders"], *subject["entities"], *subject["correlations"]}
    from lakehouse.tables import TableRegistry

    leftovers = files_naming(TableRegistry(_spark(), history.config), identifiers)
    assert leftovers == []


def test_a_redelivery_of_the_subjects_lines_under_new_names_is_ingested_without_them(
    history: History,
) -> None:
    resent = history["ingest-redelivered-after-erase"]
    assert resent.code == 0, resent.stderr
    lines, named = history.resent_lines
    certificate = history["erase"].data["certificate"]["certificate_id"]
    assert named > 0
    assert resent.data["withheld"] == {certificate: named}
    assert resent.data["rows_written"] == lines - named, "every other subject's lines are ingested"
    assert [m["status"] for m in resent.data["manifests"]] == ["ingested"]


def test_the_ledger_verifies_after_the_erasure_and_its_certificate_holds_digests_only(
    history: History,
) -> None:
    verified = history["ledger-verify-after-erase"]
    assert verified.code == 0, verified.stderr
    purged = verified.data["history"]["purged"]
    certificate = history["erase"].data["certificate"]["certificate_id"]
    assert purged, "the versions the erasure purged are listed, not reported gone"
    assert all(certificate in p["note"] for p in purged)
    before = history["asof-before-erase"]
    assert before.code == 0
    assert before.data["routes"]["a"]["available"] is True, "route (a) still answers for that time"
    assert before.data["routes"]["b"]["available"] is False
    assert f"history purged by erasure certificate {certificate}" in before.data["routes"]["b"]["note"]
    redacted = before.data["redacted"]
    assert set(redacted) == {certificate}, "route (a) shows the subject's correlations as redacted"
    assert redacted[certificate] > 0
    assert any(f"redacted under erasure certificate {certificate}" in note for note in before.data["notes"])
    shown = [r for r in before.data["rows"] if f"redacted:{certificate}" in (r["entity_a"], r["entity_b"])]
    assert len(shown) == redacted[certificate]
    assert all(r["evidence"] == f"redacted:{certificate}" for r in shown)
    erased_in = history["erase"].data["certificate"]["tables"]["gold.correlations"]
    assert erased_in["redacted"] == ["entity_a", "entity_b", "evidence", "correlation_id", "superseded_by"]
    assert history["asof-after-erase"].code == 0
    body = json.dumps(history["erase"].data["certificate"])
    assert not any(i in body for i in {*history.subject["emails"], *history.subject["entities"]})


def _spark() -> Any:
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def test_an_extract_is_pseudonymised_manifested_and_recorded_in_the_ledger(history: History) -> None:
    import hashlib

    import pyarrow as pa
    import pyarrow.parquet as pq

    from lakehouse.tables import TableRegistry
    from ledger import AuditExtract, LedgerReader, RunStarted

    made = history["extract"]
    assert made.code == 0, made.stderr
    manifest = made.data["manifest"]
    asked = history["asof-spark"].data
    assert manifest["table"] == "gold.correlations"
    assert manifest["where"] == "confidence >= 0"
    assert manifest["rows"] == len(asked["rows"]) > 0, "the answer asof gave at T, every row"
    assert manifest["route"] == "b", "at T readers saw the publication, rolled back since"
    assert manifest["version"] == asked["routes"]["b"]["version"]
    assert manifest["pseudonymised"] == ["correlation_id", "entity_a", "entity_b", "evidence"]
    folder = Path(made.data["folder"])
    files = history.delivered
    assert sorted(files) == sorted([*manifest["files"], "manifest.json"]), "nothing else in the folder"
    assert json.loads(files["manifest.json"]) == manifest
    rows = []
    for name, listed in manifest["files"].items():
        assert hashlib.sha256(files[name]).hexdigest() == listed["sha256"]
        rows += pq.read_table(pa.BufferReader(files[name])).to_pylist()
    assert sum(f["rows"] for f in manifest["files"].values()) == len(rows) == manifest["rows"]
    clear = {r[c] for r in asked["rows"] for c in ("correlation_id", "entity_a", "entity_b", "evidence")}
    written = json.dumps(rows, default=str)
    assert not [value for value in clear if value in written], "no identifier in clear"
    assert all(r["entity_a"].startswith("ps-") for r in rows)
    assert sorted(r["confidence"] for r in rows) == sorted(r["confidence"] for r in asked["rows"])
    refused = history["extract-over-existing"]
    assert refused.code == 2
    assert str(folder) in refused.stderr
    assert "not empty" in refused.stderr

    reader = LedgerReader.for_registry(TableRegistry(_spark(), history.config))
    recorded = [e for e in reader.entries(kind="audit_extract") if isinstance(e, AuditExtract)]
    mine = next(e for e in recorded if e.manifest.extract_id == manifest["extract_id"])
    assert mine.manifest.model_dump(mode="json") == manifest, "the ledger holds the manifest as written"
    assert mine.manifest_sha256 == made.data["manifest_sha256"]
    started = [e for e in reader.entries(kind="run_started") if isinstance(e, RunStarted)]
    run = next(e for e in started if e.run_id == mine.run_id == manifest["extract_id"])
    assert run.command == "extract"
    assert run.inputs["gold.correlations"].version == manifest["version"]


def test_a_later_erasure_deletes_the_extracts_that_may_hold_the_subject_and_lists_them(
    history: History,
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    made = history["extract"].data
    extract_id, folder = made["manifest"]["extract_id"], Path(made["folder"])
    relative = str(folder.relative_to(history.config.workdir_path.resolve()))
    assert history["erase-dry-run"].data["places"]["extracts"] == {extract_id: relative}
    assert folder.exists() is False
    certificate = history["erase"].data["certificate"]
    assert certificate["extracts"] == {extract_id: relative}
    # made again after the erasure: the subject's redacted correlations are left out
    again = history["extract-after-erase"]
    assert again.code == 0, again.stderr
    manifest = again.data["manifest"]
    redacted = history["asof-before-erase"].data["redacted"]
    assert manifest["withheld"] == redacted, "route (b)'s purged version brings nothing back"
    assert manifest["route"] == "a"
    assert manifest["rows"] == len(history["asof-before-erase"].data["rows"]) - sum(redacted.values())
    rows = pq.read_table(pa.BufferReader(history.remade["part-00000.parquet"])).to_pylist()
    assert "redacted:" not in json.dumps(rows, default=str)


def test_every_recorded_run_sent_valid_openlineage_events_that_name_its_ledger_entries(
    history: History, spark_session: Any
) -> None:
    from lakehouse.tables import TableRegistry
    from ledger.entries import Publication, Rollback, RunFinished, RunStarted
    from ledger.openlineage_events import FACET, OPENING_KINDS, dataset_name, openlineage_run_id
    from ledger.reader import LedgerReader

    config = history.config
    events = [
        e for e in read_events(config.lineage_path) if e["job"]["namespace"] == config.lineage_namespace
    ]
    assert {i: errors for i, e in enumerate(events) if (errors := schema_errors(e))} == {}
    records = LedgerReader.for_registry(TableRegistry(spark_session, config)).records()
    opened = {openlineage_run_id(str(r.run_id), r.entry_id): r for r in records if r.kind in OPENING_KINDS}
    runs: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        runs.setdefault(event["run"]["runId"], []).append(event)
    # one OpenLineage run per ledger entry that opened a run: START, then COMPLETE or FAIL
    assert set(runs) == set(opened)
    assert {tuple(e["eventType"] for e in run) for run in runs.values()} <= {
        ("START", "COMPLETE"),
        ("START", "FAIL"),
    }
    jobs = {e["job"]["name"] for e in events}
    assert {f"ingest --feed {feed}" for feed in FEEDS} | {"build silver", "build gold", "replay"} <= jobs
    assert {"publish", "rollback", "index gold.correlations", "erase"} <= jobs

    def versions(datasets: list[dict[str, Any]]) -> dict[str, int]:
        return {d["name"]: int(d["facets"]["version"]["datasetVersion"]) for d in datasets}

    def named(tables: dict[str, int]) -> dict[str, int]:
        return {dataset_name(config, t).name: v for t, v in tables.items()}

    written: set[tuple[str, str, int]] = set()
    for ol_run_id, record in opened.items():
        start, end = runs[ol_run_id]
        for event in (start, end):  # the events name the ledger run and entry that opened them
            facet = event["run"]["facets"][FACET]
            assert (facet["ledgerRunId"], facet["ledgerEntryId"]) == (record.run_id, record.entry_id)
        entry = record.entry()
        if isinstance(entry, RunStarted):  # inputs: exactly the pinned versions
            assert start["job"]["name"] == entry.command
            assert versions(start["inputs"]) == named({t: i.version for t, i in entry.inputs.items()})
            assert [e["name"] for e in start["run"]["facets"][FACET]["engines"]] == [
                e.name for e in entry.engines
            ]
        written |= {(str(record.run_id), name, v) for name, v in versions(end["outputs"]).items()}
    for record in records:  # outputs: every version a run wrote or made current
        entry = record.entry()
        if isinstance(entry, RunFinished):
            tables = {t: o.version for t, o in entry.outputs.items()}
        elif isinstance(entry, Publication):
            tables = entry.tables
        elif isinstance(entry, Rollback):
            tables = {entry.table: entry.new_version}
        else:
            continue
        assert {(str(record.run_id), n, v) for n, v in named(tables).items()} <= written, record.kind
    shown = [e for e in history["ledger-show"].data["entries"] if e["kind"] == "run_started"]
    assert shown
    assert all(e["openlineage_run_id"] in runs for e in shown)


def test_the_stream_resumes_a_crashed_batch_from_its_checkpoint_and_lands_it_exactly_once(
    history: History,
) -> None:
    """A crash after the first micro-batch's write (exit 6): the rerun resumes batch 0 from the
    checkpoint and lands the same rows under the same keys, once; then nothing is left to do."""
    assert codes(history, "stream-unknown-fail-point", "stream-crash") == {
        "stream-unknown-fail-point": 2,
        "stream-crash": 6,
    }
    assert "unknown fail point 'nope'" in history["stream-unknown-fail-point"].stderr
    crashed, resumed = history.streamed["after_crash"], history.streamed["resumed"]
    assert crashed["keys"], "the crashed batch had written its provisional rows"
    assert crashed["batches"] == [], "... but not its commit record"
    report = history["stream"].data
    assert [b["batch_id"] for b in report["batches"]] == [0], "the same batch, resumed"
    assert resumed["batches"] == [0]
    assert resumed["keys"] == crashed["keys"], "the same keys again: no duplicate"
    assert len(set(resumed["keys"])) == len(resumed["keys"])
    assert {s for s, _ in resumed["status"]} == {"provisional"}
    assert report["batches"][0]["provisional"] == len(resumed["keys"])
    assert history["stream-caught-up"].data["batches"] == []
    engines = {r["engine"] for r in resumed["rows"]}
    assert engines == {report["engine"]}, "decided by the engines in force"


def test_a_malformed_delivery_reaching_the_stream_is_quarantined_as_in_batch(history: History) -> None:
    """The generator plants malformed lines: the stream quarantines each once (merged by its
    Bronze coordinates, also when the crashed batch is applied again), and the batch Silver
    build finds exactly the same ones."""
    streamed = history["stream"].data["batches"][0]["quarantined"]
    assert streamed > 0
    assert history.streamed["resumed"]["quarantine"] == streamed
    silver = history["build-silver"].data
    assert sum(sum(r.values()) for r in silver["quarantine_reasons"].values()) == streamed


def test_the_gold_build_reconciles_the_provisional_rows_into_the_four_outcomes(history: History) -> None:
    """Every provisional row is superseded (agree, batch stronger) or retracted (false positive),
    never deleted; the pairs the stream missed are inserted; the figures are in divergence."""
    resumed = history.streamed["resumed"]
    view = history.streamed["reconciled"]
    outcomes = history["build-gold"].data["provisional"]["outcomes"]
    assert set(outcomes) == {"agree", "batch_stronger", "false_positive", "missed"}
    streaming = outcomes["agree"] + outcomes["batch_stronger"] + outcomes["false_positive"]
    assert streaming == len(resumed["keys"]), "every provisional row has an outcome"
    assert set(resumed["keys"]) <= set(view["keys"]), "streaming rows are kept, never deleted"
    by_key = {(r["correlation_id"], r["run_id"]): r for r in view["rows"]}
    for key in resumed["keys"]:
        row = by_key[key]
        expected = "retracted" if row["outcome"] == "false_positive" else "superseded"
        assert row["status"] == expected, row
        assert row["supersede_reason"], row
    assert not [r for r in view["rows"] if r["status"] == "provisional"]
    promoted = [r for r in view["rows"] if r["status"] == "authoritative"]
    assert len(promoted) == outcomes["agree"] + outcomes["batch_stronger"] + outcomes["missed"]
    assert all(r["run_id"] == history["build-gold"].data["run_id"] for r in promoted)

    figures = history["divergence-json"].data
    assert figures["run_id"] == history["build-gold"].data["run_id"]
    totals = {k: sum(s[k] for s in figures["scopes"]) for k in outcomes}
    assert totals == outcomes
    for scope in figures["scopes"]:
        found = scope["agree"] + scope["batch_stronger"]
        if found + scope["false_positive"]:
            assert scope["precision"] == round(found / (found + scope["false_positive"]), 6)
        assert scope["flagged"] == (
            scope["precision"] is not None and scope["precision"] < scope["threshold"]
        )
    flagged = any(s["flagged"] for s in figures["scopes"])
    assert history["divergence"].code == (4 if flagged else 0)
    assert "streaming against batch" in history["divergence"].data
