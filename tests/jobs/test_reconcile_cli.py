"""``lakehouse reconcile`` through the CLI.

Bad input (an undeclared pair, a declaration of ``reconcile.pairs`` naming what is not
there or keys of two types, a budget <= 0, ``--repair`` of a report-only pair) is refused by the
real process in one line, exit 2, with a ``java`` that refuses to start (no Spark here: these
run in ``make check``).

The rest is marked ``spark`` (by the session fixture) and kept small, at most a few minutes
in all: a few hundred orders delivered, ingested into Bronze and built into Silver by the
product's recorded runs (no Gold); a clean run compares in one job while a second run on
the same pair stops on the lock; then a drift of 2,000 orphans across every range (the
reverted walk listed every one of its leaves) plus a lost write and a changed value, walked
under a tight row budget, a spent time budget, and resumed to the end, each run inside its
budgets and its per-level range bound.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobs.reconcile import reconcile_exit_code
from lakehouse.config import LakehouseConfig, load_config
from lakehouse.errors import ReconcileBusyError
from ledger import open_ledger
from ledger.clock import FixedClock, SystemClock
from tests.cli_runner import Ran, instance_env, run_cli
from tests.conftest import NO_JVM_HOME, REPO, Lakehouse, drop_all
from tests.replay_history import START, event, write_deliveries
from workloads.policies import DEFAULT_POLICY_PATH
from workloads.reconciliation.pairs import resolve_pair
from workloads.reconciliation.run import ReconcileReport, load_reconcile_policy, reconcile
from workloads.reconciliation.summaries import END

CONF = REPO / "conf" / "lakehouse.yaml"
ORDERS = ("bronze.orders", "silver.events")
ORDER_COUNT = 300
ORPHANS = 2000
MAX_RANGES = 256
"""The test policy's bound: 16 ranges first, each split once into 256 (the default is 65,536)."""
ROW_BUDGET = 1200
"""Rows (both sides) the first drifted run may list: about half of the ~2,600 there are."""


# -- bad input: one line, exit 2, no JVM --------------------------------------------------------

PROVISIONAL = ("gold.correlations", "gold.provisional_correlations")
DECLARED = {"source": PROVISIONAL[0], "derived": PROVISIONAL[1], "key": "correlation_id"}
"""A declaration of the provisional pair, for a configuration that extends the shipped one."""


@pytest.mark.parametrize(
    ("argv", "pairs", "expected"),
    [
        (("silver.events", "gold.entity_daily", "--key", "entity_id"), None, "is not a declared pair"),
        (("gold.correlations", "silver.events"), None, "is not a declared pair"),
        (("silver.events", "gold.training_sets", "--key", "label"), None, "the key types differ"),
        ((*ORDERS, "--max-rows", "0"), None, "--max-rows must be more than 0"),
        ((*ORDERS, "--max-seconds", "-5"), None, "--max-seconds must be more than 0"),
        ((*ORDERS, "--max-seconds", "0"), None, "--max-seconds must be more than 0"),
        ((*ORDERS, "--max-repairs-per-second", "0"), None, "--max-repairs-per-second must be at least 1"),
        (
            (*PROVISIONAL, "--repair"),
            None,
            "the pair gold.correlations -> gold.provisional_correlations is report-only",
        ),
        (
            PROVISIONAL,
            {**DECLARED, "key": "correlation_id:stream_batch"},
            "key 'reconcile.pairs.provisional.key' has invalid value 'correlation_id:stream_batch': "
            "the key types differ",
        ),
        (
            ORDERS,
            {**DECLARED, "projection": "provisional_copies"},
            "key 'reconcile.pairs.provisional.projection' has invalid value 'provisional_copies'",
        ),
        (
            PROVISIONAL,
            {**DECLARED, "derived": "gold.provisional"},
            "key 'reconcile.pairs.provisional.derived'",
        ),
        (PROVISIONAL, {**DECLARED, "projecton": "x"}, "unknown key 'reconcile.pairs.provisional.projecton'"),
    ],
    ids=[
        "undeclared-key",
        "undeclared",
        "key-types",
        "max-rows",
        "max-seconds-negative",
        "max-seconds-zero",
        "repair-rate",
        "report-only",
        "declared-key-types",
        "projection",
        "table",
        "misspelt",
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_spark_starts(
    argv: tuple[str, ...], pairs: dict[str, str] | None, expected: str, tmp_path: Path
) -> None:
    """Refused by the real process, whose ``java`` refuses to start (``tests/no_jvm``): nothing
    here may reach a JVM."""
    conf = CONF
    if pairs is not None:  # the shipped configuration with the provisional pair declared otherwise
        conf = tmp_path / "lakehouse.yaml"
        conf.write_text(
            yaml.safe_dump({"extends": str(CONF), "reconcile": {"pairs": {"provisional": pairs}}})
        )
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "jobs", "reconcile", *argv, "--conf", str(conf), "--workdir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, "JAVA_HOME": str(NO_JVM_HOME)},
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: "), lines
    assert expected in lines[0]
    assert "java" not in lines[0].lower(), "no JVM was asked for"
    assert time.monotonic() - started < 60, "no JVM was started"
    assert not (tmp_path / "warehouse").exists(), "nothing was written"


def report(**changes: Any) -> ReconcileReport:
    """A report of a whole, clean run, with ``changes``."""
    clean = ReconcileReport(
        run_id="r", pair="p", key="k", authority="source", source="s", derived="d", source_version=1,
        derived_version=1, measured_at=datetime(2026, 3, 1, tzinfo=UTC), since=None, until=None,
        staleness_seconds=0, missing=0, divergent=0, orphan=0, pending=0, repaired=0, repair_batches=0,
        repaired_version=None, ranges_compared=16, compared_per_level=(16,), disagreeing_per_level=(0,),
        ranges_listed=0, rows_diffed=0, jobs=1, covered_from=0, resume_from=None, stopped_by=None,
        max_rows=10, max_seconds=10.0, baseline=None, step_change=False,
    )  # fmt: skip
    return replace(clean, **changes)


def test_the_exit_code_says_clean_drifted_or_not_finished() -> None:
    assert reconcile_exit_code(report()) == 0
    assert reconcile_exit_code(report(orphan=1)) == 4
    assert reconcile_exit_code(report(missing=2, repaired=2)) == 0, "repaired: nothing remains"
    assert reconcile_exit_code(report(step_change=True)) == 4
    stopped = {"resume_from": 99, "stopped_by": "max_rows"}
    assert reconcile_exit_code(report(**stopped)) == 5, "not finished, nothing found so far"
    assert reconcile_exit_code(report(divergent=1, **stopped)) == 4, "drift found outranks not finished"
    resumed = report(covered_from=99)
    assert (resumed.complete, reconcile_exit_code(resumed)) == (False, 0), "the rest, compared, is clean"
    assert report(**stopped).covered == 99 / END


# -- a small history, a large drift -----------------------------------------------------------


@dataclass(frozen=True)
class Env:
    lh: Lakehouse
    env: dict[str, str]
    workdir: Path
    policies: Path
    """Staleness 0 s (the history was committed seconds ago) and a bound of 256 ranges."""

    def __call__(self, *args: str) -> tuple[Ran, Any]:
        argv = ["reconcile", *ORDERS, *args, "--conf", str(CONF), "--workdir", str(self.workdir)]
        ran = run_cli([*argv, "--policies", str(self.policies), "--quiet", "--json"], self.env)
        return ran, json.loads(ran.stdout) if ran.stdout.strip() else None


@pytest.fixture(scope="module")
def env(
    spark_session: Any, lakehouse_config: LakehouseConfig, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Env]:
    from workloads.gold.quality import medallion_gate
    from workloads.pipeline import run_ingest, run_silver
    from workloads.silver.lateness import load_lateness_policy

    instance = f"rec{uuid.uuid4().hex[:6]}"
    shell = instance_env(instance)
    workdir = lakehouse_config.workdir_path
    config = load_config(CONF, environ=shell, overrides={"workdir": str(workdir)})
    lh = Lakehouse(spark_session, config)
    folder = tmp_path_factory.mktemp("reconcile")
    orders = [
        event(
            f"o{i:04d}",
            "orders",
            f"2025-01-{1 + i % 28:02d}T{i % 24:02d}:00:00",
            f"buyer{i % 60}@example.com",
            device=f"d{i % 40}",
            card=f"c{i % 50}",
            line=i + 1,
        )
        for i in range(ORDER_COUNT)
    ]
    clock = FixedClock(START, step=timedelta(seconds=1))
    ledger = open_ledger(lh.registry, clock=clock)
    run_ingest(lh.registry, ledger, clock, feed="orders", source=write_deliveries(folder / "in", orders))
    run_silver(lh.registry, ledger, clock, policy=load_lateness_policy(), gate=medallion_gate)
    policies = yaml.safe_load(DEFAULT_POLICY_PATH.read_text())
    policies["reconcile"].update(staleness_seconds=0, max_ranges_per_level=MAX_RANGES, list_rows=64)
    path = folder / "policies.yaml"
    path.write_text(yaml.safe_dump(policies))
    yield Env(lh, shell, workdir, path)
    drop_all(lh.registry)


def reports(lh: Lakehouse) -> int:
    table = lh.registry.get("ops.reconcile_reports")
    return table.read().count() if table.exists() and table.current_version() is not None else 0


def test_since_last_clean_before_any_clean_run_is_refused_and_writes_nothing(env: Env) -> None:
    refused, _ = env("--since", "last-clean")
    assert refused.code == 2, refused
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    said = "--since last-clean: the pair bronze.orders -> silver.events has no clean, complete run yet"
    assert said in lines[0]
    assert "lakehouse reconcile bronze.orders silver.events once without --since" in lines[0]
    assert reports(env.lh) == 0


def test_a_clean_pair_compares_in_one_job_and_a_second_run_stops_on_the_lock(env: Env) -> None:
    pair = resolve_pair(env.lh.config, *ORDERS, None)
    policy = load_reconcile_policy(env.policies)
    holding, release = threading.Event(), threading.Event()
    results: list[object] = []

    def first() -> None:
        def progress(message: str) -> None:
            if "pinned" in message:  # the lock is held from here on
                holding.set()
                release.wait(120)

        ledger = open_ledger(env.lh.registry, clock=SystemClock())
        results.append(
            reconcile(env.lh.registry, ledger, SystemClock(), pair, policy=policy, progress=progress)
        )

    thread = threading.Thread(target=first)
    thread.start()
    assert holding.wait(120)
    try:
        second, _ = env()
        assert reports(env.lh) == 0, "the second run wrote nothing"
    finally:
        release.set()
        thread.join(120)
    assert second.code == ReconcileBusyError.exit_code, second
    assert "another reconcile of silver.events is running" in second.stderr
    (clean,) = results
    assert getattr(clean, "total_delta", None) == 0
    assert (getattr(clean, "jobs", None), getattr(clean, "complete", None)) == (1, True), "one job: all agree"
    assert reports(env.lh) == 1
    assert open_ledger(env.lh.registry, clock=SystemClock()).reader.verify().ok


def plant_drift(lh: Lakehouse) -> dict[str, str]:
    """A lost write, a changed value and 2,000 rows nobody derived, in Silver's orders,
    through the table interface (what a lost propagation or an operator's hand leaves)."""
    from pyspark.sql import functions as F

    silver = lh.registry.get("silver.events")
    rows = silver.read().where(F.col("domain") == "orders")
    lost, changed, template = "o0000", "o0001", "o0002"
    assert rows.where(F.col("event_id").isin(lost, changed, template)).count() == 3
    kept = rows.where(F.col("event_id") == changed).localCheckpoint()
    orphans = (
        rows.where(F.col("event_id") == template)
        .crossJoin(lh.spark.range(ORPHANS))
        .withColumn("event_id", F.format_string("zz%05d", "id"))
        .drop("id")
        .localCheckpoint()
    )
    silver.delete_where(f"event_id IN ('{lost}', '{changed}')", run_id="operator")
    silver.append(
        kept.withColumn("amount", F.lit(Decimal("999.99")).cast("decimal(18,2)")), run_id="operator"
    )
    silver.append(orphans, run_id="operator")
    return {"missing": lost, "divergent": changed}


def test_a_large_drift_stays_inside_its_budgets_and_the_next_runs_resume_to_the_end(env: Env) -> None:
    planted = plant_drift(env.lh)

    tight, a = env("--max-rows", str(ROW_BUDGET))
    assert tight.code == 4, tight  # differences were found: 4 wins over "not finished"
    assert a["rows_diffed"] <= ROW_BUDGET, "inside the row budget"
    assert (a["stopped_by"], a["covered_from"], a["complete"]) == ("max_rows", 0, False)
    assert a["resume_from"] > 0
    assert 0 < a["orphan"] < ORPHANS
    assert max(a["compared_per_level"]) <= MAX_RANGES, "no level held more than the bound"
    assert a["jobs"] <= 4, "a job per level (16, then 256 ranges, rarely one more) and one list job"

    spent, t = env("--max-seconds", "0.001")  # spent before the first job: nothing is compared
    assert spent.code == 5, spent
    assert (t["stopped_by"], t["jobs"], t["rows_diffed"], t["total_delta"]) == ("max_seconds", 0, 0, 0)
    assert t["covered_from"] == t["resume_from"] == a["resume_from"], "it started where the last stopped"

    rest, b = env()
    assert rest.code == 4, rest
    assert (b["covered_from"], b["resume_from"], b["stopped_by"]) == (a["resume_from"], None, None)
    assert b["complete"] is False, "this run covered the rest of the key space, not all of it"
    assert a["orphan"] + b["orphan"] == ORPHANS, "the two runs together found every orphan, once"
    for kind, key in planted.items():
        assert a[kind] + b[kind] == 1, kind
        assert key in a["samples"].get(kind, []) + b["samples"].get(kind, [])

    whole, w = env("--from-start", "--repair", "--max-repairs-per-second", "1000")
    assert whole.code == 4, whole  # the orphans are reported, never deleted
    assert (w["covered_from"], w["complete"], w["orphan"], w["repaired"]) == (0, True, ORPHANS, 2)
    silver = env.lh.registry.get("silver.events").read()
    assert silver.where(f"event_id = '{planted['missing']}'").count() == 1
    assert {str(r["amount"]) for r in silver.where(f"event_id = '{planted['divergent']}'").collect()} != {
        "999.99"
    }
    assert reports(env.lh) == 5, "every run's report is kept, the stopped ones with their resume point"
    assert open_ledger(env.lh.registry, clock=SystemClock()).reader.verify().ok


def test_since_last_clean_compares_what_changed_since_the_pair_last_agreed(env: Env) -> None:
    """After the drift and its repair (the previous test), ``--since last-clean`` is bounded
    mode from the first test's clean run: it finds the orphans still there (never deleted)
    and nothing else (the lost write and the changed value were repaired since)."""
    from pyspark.sql import functions as F

    reports_table = env.lh.registry.get("ops.reconcile_reports").read()
    clean = reports_table.orderBy("measured_at").select(
        "total_delta", "resume_from", F.unix_micros("measured_at").alias("at")
    )
    first = clean.first()
    assert first is not None
    assert (first["total_delta"], first["resume_from"]) == (0, None), "the first test's clean run"
    ran, r = env("--since", "last-clean")
    assert ran.code == 4, ran  # the orphans
    since = datetime.fromisoformat(r["since"])
    assert round(since.timestamp() * 1_000_000) == first["at"], "bounded from that run"
    assert (r["orphan"], r["missing"], r["divergent"]) == (ORPHANS, 0, 0)
    assert r["complete"] is True
