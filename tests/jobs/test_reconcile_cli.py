"""``lakehouse reconcile`` through the CLI on the shipped mixed formats (Delta Bronze, Iceberg
Silver/Gold/ops), on the hand-written history built by the product: a planted drift in Silver
(a lost write, a changed value, a row nobody derived) is pending inside the staleness window,
then found, flagged as a step change, repaired at the rate asked, and gone on the next run;
the orphan stays. Bad input is one line and exit 2, before anything is written."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from lakehouse.config import LakehouseConfig, load_config
from lakehouse.errors import ReconcileBusyError
from ledger import RunFinished, open_ledger
from ledger.clock import FixedClock, SystemClock
from tests.cli_runner import Ran, instance_env, run_cli
from tests.conftest import REPO, Lakehouse, drop_all
from tests.replay_history import START, build
from workloads.policies import DEFAULT_POLICY_PATH
from workloads.reconciliation.pairs import resolve_pair
from workloads.reconciliation.run import load_reconcile_policy, reconcile

pytestmark = pytest.mark.spark

CONF = REPO / "conf" / "lakehouse.yaml"
ORDERS = ("bronze.orders", "silver.events", "--key", "event_id")


@dataclass(frozen=True)
class Env:
    lh: Lakehouse
    env: dict[str, str]
    workdir: Path
    prompt: Path
    """A policy file whose staleness window is 0 s (the history was committed seconds ago)."""
    lagging: Path
    """One whose window is a day: everything the source committed is still expected lag."""

    def __call__(self, *args: str, policies: Path | None = None) -> tuple[Ran, Any]:
        argv = ["reconcile", *args, "--conf", str(CONF), "--workdir", str(self.workdir), "--quiet", "--json"]
        argv += ["--policies", str(policies or self.prompt)]
        ran = run_cli(argv, self.env)
        data = json.loads(ran.stdout) if ran.stdout.strip() else None
        return ran, data


@pytest.fixture(scope="module")
def env(
    spark_session: Any, lakehouse_config: LakehouseConfig, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Env]:
    instance = f"rec{uuid.uuid4().hex[:6]}"
    shell = instance_env(instance)
    workdir = lakehouse_config.workdir_path
    config = load_config(CONF, environ=shell, overrides={"workdir": str(workdir)})
    lh = Lakehouse(spark_session, config)
    folder = tmp_path_factory.mktemp("reconcile")
    build(lh, FixedClock(START, step=timedelta(seconds=1)), folder / "history")
    policies = yaml.safe_load(DEFAULT_POLICY_PATH.read_text())
    policies["reconcile"]["staleness_seconds"] = 0
    prompt = folder / "policies.yaml"
    prompt.write_text(yaml.safe_dump(policies))
    policies["reconcile"]["staleness_seconds"] = 86_400
    lagging = folder / "lagging.yaml"
    lagging.write_text(yaml.safe_dump(policies))
    yield Env(lh, shell, workdir, prompt, lagging)
    drop_all(lh.registry)


def entries(lh: Lakehouse) -> int:
    return len(open_ledger(lh.registry, clock=SystemClock()).reader.records())


def test_bad_input_is_one_line_and_exit_2_with_nothing_written(env: Env) -> None:
    before = entries(env.lh)
    cases = {
        ("bronze.nope", "silver.events", "--key", "event_id"): "unknown table 'bronze.nope'",
        ("bronze.orders", "silver.events", "--key", "order_id"): "keyed by _event_id:event_id",
        ("silver.events", "gold.entity_daily", "--key", "nope"): "silver.events has no column 'nope'",
        ("silver.events", "gold.training_sets", "--key", "label"): "the key types differ",
        ("silver.events", "gold.entity_daily", "--key", "entity_id", "--repair"): "declares no authority",
        (
            *ORDERS,
            "--since",
            "2026-03-02T00:00:00Z",
            "--until",
            "2026-03-01T00:00:00Z",
        ): "is not before --until",
        (*ORDERS, "--since", "2026-03-02"): "--since",
        (*ORDERS, "--repair", "--max-repairs-per-second", "0"): "at least 1",
    }
    for argv, expected in cases.items():
        ran, _ = env(*argv)
        assert ran.code == 2, (argv, ran)
        lines = ran.stderr.strip().splitlines()
        assert len(lines) == 1, (argv, lines)
        assert expected in json.loads(lines[0])["error"], (argv, lines)
    assert entries(env.lh) == before
    assert not env.lh.registry.get("ops.reconcile_reports").exists()


def plant_drift(lh: Lakehouse) -> dict[str, str]:
    """A lost write, a changed value and a row nobody derived, in Silver's orders, through the
    table interface (what an operator's hand or a lost propagation leaves)."""
    from pyspark.sql import functions as F

    silver = lh.registry.get("silver.events")
    orders = sorted(r["event_id"] for r in silver.read().where(F.col("domain") == "orders").collect())
    lost, changed, template = orders[0], orders[1], orders[-1]
    silver.delete_where(f"event_id = '{lost}'", run_id="operator")
    spark, schema = silver.spark, silver.read().schema
    row = spark.createDataFrame(silver.read().where(F.col("event_id") == changed).collect(), schema)
    orphan = spark.createDataFrame(silver.read().where(F.col("event_id") == template).collect(), schema)
    silver.delete_where(f"event_id = '{changed}'", run_id="operator")
    silver.append(row.withColumn("amount", F.lit(Decimal("999.99")).cast("decimal(18,2)")), run_id="operator")
    silver.append(orphan.withColumn("event_id", F.lit("o-nobody")), run_id="operator")
    return {"missing": lost, "divergent": changed, "orphan": "o-nobody"}


def test_a_planted_drift_is_found_flagged_repaired_at_the_rate_and_gone(env: Env) -> None:
    clean, data = env(*ORDERS)
    assert clean.code == 0, clean
    assert (data["missing"], data["divergent"], data["orphan"], data["total_delta"]) == (0, 0, 0, 0)
    assert (data["ranges_compared"], data["rows_diffed"]) == (1, 0), "the root agreed: nothing refined"

    before_plant = datetime.now(UTC)
    time.sleep(1.1)  # commit timestamps have millisecond precision: the window starts after it
    planted = plant_drift(env.lh)

    pending, data = env(*ORDERS, policies=env.lagging)  # Bronze was written within the day
    assert pending.code == 4, pending  # the orphan is no lag: it has no source at all
    assert (data["missing"], data["divergent"], data["orphan"], data["pending"]) == (0, 0, 1, 2)

    found, data = env(*ORDERS)
    assert found.code == 4, found
    assert (data["missing"], data["divergent"], data["orphan"], data["pending"]) == (1, 1, 1, 0)
    assert {k: data["samples"][k] for k in planted} == {k: [v] for k, v in planted.items()}
    assert (data["step_change"], data["baseline"]) == (True, 0.5), "median of the clean and the pending run"
    assert data["ranges_compared"] > 1
    assert data["leaves_disagreeing"] == 3
    assert data["rows_diffed"] <= 4, "only the rows of the three disagreeing leaves are diffed"

    bounded, b = env(*ORDERS, "--since", before_plant.isoformat())
    assert bounded.code == 4, bounded
    assert (b["missing"], b["divergent"], b["orphan"]) == (1, 1, 1)
    assert b["until"] is not None

    started = time.monotonic()
    repaired, data = env(*ORDERS, "--repair", "--max-repairs-per-second", "1")
    elapsed = time.monotonic() - started
    assert repaired.code == 4, repaired  # the orphan is reported, never deleted
    assert (data["repaired"], data["repair_batches"], data["orphan"], data["remaining"]) == (2, 2, 1, 1)
    assert elapsed >= 1.0, "two keys at one a second: the second batch waited"
    silver = env.lh.registry.get("silver.events").read()
    assert silver.where(f"event_id = '{planted['missing']}'").count() == 1
    assert {str(r["amount"]) for r in silver.where(f"event_id = '{planted['divergent']}'").collect()} != {
        "999.99"
    }
    assert silver.where("event_id = 'o-nobody'").count() == 1

    again, data = env(*ORDERS, "--repair")
    assert (data["missing"], data["divergent"], data["repaired"], data["orphan"]) == (0, 0, 0, 1), again
    env.lh.registry.get("silver.events").delete_where("event_id = 'o-nobody'", run_id="operator")
    done, data = env(*ORDERS)
    assert (done.code, data["total_delta"]) == (0, 0), done

    ledger = open_ledger(env.lh.registry, clock=SystemClock())
    finished = [
        e
        for e in ledger.reader.entries(kind="run_finished")
        if e.run_id and e.run_id.startswith("reconcile-")
    ]
    assert [e.counts.get("repaired") for e in finished if isinstance(e, RunFinished)].count(2) == 1
    history = (
        env.lh.registry.get("ops.reconcile_reports").read().where("pair = 'bronze.orders -> silver.events'")
    )
    assert history.count() >= 8, "every run's delta is kept"
    assert ledger.reader.verify().ok


def test_the_index_pair_finds_and_repairs_a_lost_index_row(env: Env) -> None:
    index = env.lh.registry.get("gold.correlations_by_entity")
    victim = sorted(r["correlation_id"] for r in index.read().collect())[0]
    index.delete_where(f"correlation_id = '{victim}' AND entity_id = entity_a", run_id="operator")
    argv = ("gold.correlations", "gold.correlations_by_entity", "--key", "correlation_id")
    found, data = env(*argv, "--repair")
    assert found.code == 0, found
    assert (data["divergent"], data["repaired"], data["samples"]["divergent"]) == (1, 1, [victim])
    clean, data = env(*argv)
    assert (clean.code, data["total_delta"]) == (0, 0), clean


def test_two_runs_at_once_one_waits_for_none_the_second_stops_cleanly(env: Env) -> None:
    pair = resolve_pair(env.lh.config, "bronze.logins", "silver.events", "event_id")
    policy = load_reconcile_policy(env.prompt)
    holding, release = threading.Event(), threading.Event()
    results: list[object] = []

    def first() -> None:
        def progress(message: str) -> None:
            if "summarising" in message:
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
        second, _ = env("bronze.logins", "silver.events", "--key", "event_id")
    finally:
        release.set()
        thread.join(120)
    assert second.code == ReconcileBusyError.exit_code, second
    assert "another reconcile of silver.events is running" in second.stderr
    assert [getattr(r, "total_delta", None) for r in results] == [0]
    assert open_ledger(env.lh.registry, clock=SystemClock()).reader.verify().ok
