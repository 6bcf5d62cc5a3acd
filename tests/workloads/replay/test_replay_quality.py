"""Is the new version better? Replays report both versions' quality and record it in the ledger.

One small generated history on the shipped mixed-format default, built by the product's
recorded runs (generate -> ingest every feed -> Silver -> Gold, under ER v1), then:

* the ER v3 plan as a comparison, with no truth named: the replay finds the generator's
  ``_ground_truth.json`` beside the ingested deliveries; v3 must beat v1 on ER F1 and be
  no worse on correlation recall, and the ledger's ``quality_comparison`` holds the same
  figures; a rerun returns the recorded report;
* the ER v2 plan as a comparison with ``--truth PATH``: v2's card rule merges ring
  members, which costs ER precision;
* the hand-written lifecycle history (no truth file) reports "no ground truth" and its
  replay works as before;
* a bad ``--truth`` file is refused before Spark starts, naming the file.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lakehouse.config import LakehouseConfig
from tests.cli_runner import instance_env, run_cli
from tests.conftest import drop_all

REPO = Path(__file__).resolve().parents[3]
CONF = REPO / "conf" / "lakehouse.yaml"
PLAN_V2 = REPO / "conf" / "plans" / "er-v2-recorrelation.yaml"
PLAN_V3 = REPO / "conf" / "plans" / "er-v3-recorrelation.yaml"
FEEDS = ("orders", "refunds", "logins", "settlements", "outcomes")
BUILT_AT = datetime(2026, 3, 1, tzinfo=UTC)
"""The processing date of the builds: before ER v2 and v3 take effect, so v1 is in force."""


def cli(workdir: Path, instance: str, *args: str, debug: bool = False) -> tuple[int, Any, str]:
    """``lakehouse ARGS --json`` in this process (the Spark session is shared); ``debug``
    adds the traceback of a failure to stderr."""
    argv = [*args, "--conf", str(CONF), "--workdir", str(workdir), "--quiet", "--json"]
    argv += ["--debug"] if debug else []
    ran = run_cli(argv, instance_env(instance))
    text = ran.stdout
    return ran.code, json.loads(text) if ran.code == 0 and text.strip() else text, ran.stderr


@dataclass(frozen=True)
class Measured:
    """A generated history, built, and the quality reports of its replays (as ``--json`` shows them)."""

    truth: Path
    v3: dict[str, Any]
    v3_again: dict[str, Any]
    v2: dict[str, Any]
    ledger: list[Any]


@pytest.fixture(scope="module")
def measured(
    spark_session: Any,
    lakehouse_config: LakehouseConfig,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Measured]:
    """Generated, ingested and built by the product's recorded runs at a processing date
    before ER v2 and v3 take effect (so Silver and Gold are v1's, as in production before
    a restatement); then the v3 plan twice and the v2 plan through the command line."""
    from jobs.output import plain
    from lakehouse.tables import TableRegistry
    from ledger import open_ledger
    from ledger.clock import FixedClock
    from ledger.engines import load_engines
    from ledger.reader import LedgerReader
    from workloads.gold.quality import medallion_gate as gate
    from workloads.pipeline import run_gold, run_ingest, run_silver
    from workloads.replay import run_replay
    from workloads.replay.plan import Purpose, load_plan
    from workloads.silver.lateness import load_lateness_policy
    from workloads.synthetic.generator import GeneratorSettings, generate

    instance = f"q{uuid.uuid4().hex[:6]}"
    config = lakehouse_config.model_copy(update={"instance": instance})
    registry = TableRegistry(spark_session, config)
    folder = tmp_path_factory.mktemp("quality") / "history"
    generate(folder, GeneratorSettings(entities=30, months=2), policy=load_lateness_policy())
    clock = FixedClock(BUILT_AT, step=timedelta(seconds=1))
    ledger = open_ledger(registry, clock=clock)
    for feed in FEEDS:
        run_ingest(registry, ledger, clock, feed=feed, source=folder)
    run_silver(registry, ledger, clock, policy=load_lateness_policy(), gate=gate)
    run_gold(registry, ledger, clock, gate=gate)

    engines = load_engines(REPO / "conf" / "engines.yaml")
    plan = load_plan(PLAN_V3).with_purpose(Purpose.COMPARISON)
    v3 = plain(run_replay(registry, plan, engines=engines, clock=clock))
    v3_again = plain(run_replay(registry, plan, engines=engines, clock=clock))
    truth = folder / "_ground_truth.json"
    argv = ("replay", "--plan", str(PLAN_V2), "--purpose", "comparison", "--truth", str(truth))
    code, v2, err = cli(lakehouse_config.workdir_path, instance, *argv, debug=True)
    assert code == 0, err
    recorded = LedgerReader.for_registry(registry).entries(kind="quality_comparison")
    yield Measured(truth, v3, v3_again, v2, recorded)
    drop_all(registry)


@pytest.mark.spark
@pytest.mark.slow
def test_the_replay_finds_the_truth_beside_the_deliveries_and_v3_is_better(measured: Measured) -> None:
    quality = measured.v3["quality"]
    assert quality["basis"] == "ground_truth"
    assert Path(quality["source"]) == measured.truth.resolve()
    assert quality["identities"] > 30  # 30 persons, most with several spellings
    old, new = quality["old"], quality["new"]
    assert (old["engine"], new["engine"]) == ("entity_resolution@1", "entity_resolution@3")
    assert new["entity_resolution"]["f1"] > old["entity_resolution"]["f1"]
    assert new["entity_resolution"]["f1"] == 1.0  # email rules alone find every person
    assert new["correlations"]["pairs"]["recall"] >= old["correlations"]["pairs"]["recall"]
    assert new["correlations"]["pairs"]["precision"] >= old["correlations"]["pairs"]["precision"]
    assert old["correlations"]["self_links"] > 0  # v1 links a split person to themselves
    assert new["correlations"]["self_links"] == 0


@pytest.mark.spark
@pytest.mark.slow
def test_the_ledger_records_the_report_and_a_rerun_returns_it(measured: Measured) -> None:
    recorded = {e.run_id: e for e in measured.ledger}
    v3 = recorded[measured.v3["run_id"]]
    assert v3.basis == "ground_truth"
    assert (v3.old_engine, v3.new_engine) == ("entity_resolution@1", "entity_resolution@3")
    assert v3.report == measured.v3["quality"]
    assert measured.v3_again["run_id"] == measured.v3["run_id"]
    assert measured.v3_again["resumed"] is True
    assert measured.v3_again["quality"] == measured.v3["quality"]
    assert recorded[measured.v2["run_id"]].new_engine == "entity_resolution@2"


@pytest.mark.spark
@pytest.mark.slow
def test_v2s_card_rule_merges_ring_members(measured: Measured) -> None:
    quality = measured.v2["quality"]
    assert quality["basis"] == "ground_truth"
    assert quality["note"].endswith("(given)")
    new = quality["new"]
    assert new["engine"] == "entity_resolution@2"
    assert new["entity_resolution"]["precision"] < 1.0
    assert new["entity_resolution"]["recall"] == 1.0
    assert (
        new["correlations"]["pairs"]["recall"]
        < measured.v3["quality"]["new"]["correlations"]["pairs"]["recall"]
    )


@pytest.mark.spark
@pytest.mark.slow
def test_a_history_without_truth_reports_so_and_replays_as_before(lifecycle: Any) -> None:
    from ledger.entries import QualityComparison
    from ledger.reader import LedgerReader
    from workloads.vocabulary import QualityBasis

    quality = lifecycle.replayed.quality
    assert quality is not None
    assert quality.basis is QualityBasis.NONE
    assert quality.note.startswith("no ground truth")
    assert quality.old is None
    assert lifecycle.published.run_id == lifecycle.run_id  # the replay still went all the way
    recorded = [
        e
        for e in LedgerReader.for_registry(lifecycle.registry).by_run(lifecycle.run_id)
        if isinstance(e, QualityComparison)
    ]
    assert [e.basis for e in recorded] == ["none"]


def test_a_bad_truth_file_is_refused_before_spark_starts(tmp_path: Path) -> None:
    broken = tmp_path / "truth.json"
    broken.write_text(json.dumps({"rings": {}}), encoding="utf-8")
    for path, message in ((broken, "missing key 'identities'"), (tmp_path / "nope.json", "not found")):
        code, _, err = cli(
            tmp_path, "x", "replay", "--plan", str(PLAN_V3), "--purpose", "comparison", "--truth", str(path)
        )
        assert code == 2
        assert err.count("\n") == 1, err  # one JSON line (--json), nothing else: Spark never started
        error = json.loads(err)
        assert error["exit_code"] == 2
        assert str(path) in error["error"]
        assert message in error["error"]
