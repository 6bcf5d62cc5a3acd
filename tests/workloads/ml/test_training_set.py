"""W4 and training through the command line: point-in-time training sets, leakage, a reference.

One module history, built by the product: generate -> ingest orders, refunds, settlements ->
build Silver and Gold -> ``training-set --at T0`` (at T0). Then what the lake learns after
T0: logins (new shared devices, so new and rebuilt correlations and new daily features) and
outcomes (the labels) -> build Silver and Gold again -> ``training-set --at T0`` again,
``training-set`` (now), with 30-day and 60-day horizons, and ``train``. Along the
way, the refusals a user meets (exit 2, nothing written).

The reference test recomputes every row of a training set with plain Python loops over the
pinned table versions it recorded, written from the documented rules (not from the code).
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lakehouse.config import LakehouseConfig, load_config
from tests.cli_runner import instance_env, run_cli
from tests.conftest import drop_all

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]
CONF = REPO / "conf" / "lakehouse.yaml"
TABLE = "gold.training_sets"
REPORTS = "gold.calibration_reports"
ENGINE = "correlation@2"
UNKNOWN_SET = "training-set-20000101T000000000000Z-00000000"
"""A training set id of the right shape that names no training set."""
"""The correlation release in force for a lakehouse built today (the latest, effective 2026-11-25)."""
FEATURES = (
    "amount",
    "orders_30d",
    "order_amount_30d",
    "refunds_30d",
    "refund_amount_30d",
    "logins_30d",
    "failed_logins_30d",
    "devices_30d",
    "cards_30d",
    "chargebacks_30d",
    "fraud_labels_30d",
    "active_days_30d",
    "amount_mean_90d",
    "amount_std_90d",
    "correlations",
    "max_confidence",
)


@dataclass(frozen=True)
class Step:
    code: int
    data: Any
    stderr: str


@dataclass(frozen=True)
class History:
    steps: dict[str, Step]
    config: LakehouseConfig
    env: dict[str, str]
    t0: datetime
    ledger_rows_before_refusals: int
    ledger_rows_after_refusals: int
    before_recalibration: datetime
    engines: Path
    before_rescoring: datetime
    engines_untouched_by_refusals: bool
    deliveries: Path

    def __getitem__(self, name: str) -> Step:
        return self.steps[name]


NOTEBOOK = REPO / "notebooks" / "ml_recalibration.ipynb"


def execute_notebook(workdir: Path, env: dict[str, str]) -> list[str]:
    """Run the ML notebook on this module's lakehouse; its text outputs (raises on any error)."""
    import nbformat
    from nbclient import NotebookClient

    with pytest.MonkeyPatch.context() as patch:
        for key, value in {**env, "LAKEHOUSE_WORKDIR": str(workdir)}.items():
            patch.setenv(key, value)
        notebook = nbformat.read(NOTEBOOK, as_version=4)
        client = NotebookClient(
            notebook,
            timeout=900,
            kernel_name="python3",
            resources={"metadata": {"path": str(NOTEBOOK.parent)}},
        )
        client.execute()
    texts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            texts.append(output.get("text", "") + str(output.get("data", {}).get("text/plain", "")))
            if "image/png" in output.get("data", {}):
                texts.append("<image/png>")
    return texts


def _run(steps: dict[str, Step], workdir: Path, env: dict[str, str], name: str, *args: str) -> Step:
    argv = [*args, "--conf", str(CONF), "--workdir", str(workdir), "--quiet", "--json"]
    ran = run_cli(argv, env)
    data = json.loads(ran.stdout) if ran.code == 0 and ran.stdout.strip() else None
    step = Step(ran.code, data, ran.stderr)
    steps[name] = step
    return step


@pytest.fixture(scope="module")
def history(
    spark_session: Any, lakehouse_config: LakehouseConfig, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[History]:
    from lakehouse.tables import TableRegistry

    instance = f"ml{uuid.uuid4().hex[:6]}"
    env = instance_env(instance)
    workdir = lakehouse_config.workdir_path
    config = load_config(CONF, environ=env, overrides={"workdir": str(workdir)})
    deliveries = tmp_path_factory.mktemp("ml") / "history"
    steps: dict[str, Step] = {}

    def run(name: str, *args: str) -> Step:
        return _run(steps, workdir, env, name, *args)

    run("generate", "generate", "--out", str(deliveries), "--entities", "200", "--months", "4")
    for feed in ("orders", "refunds", "settlements"):
        run(f"ingest-{feed}", "ingest", "--feed", feed, "--source", str(deliveries))
    run("build-silver", "build", "silver")
    run("build-gold", "build", "gold")
    t0 = datetime.now(UTC)
    run("set-t0", "training-set", "--at", t0.isoformat())

    ledger = TableRegistry(spark_session, config).get("ops.ledger")
    before = ledger.read().count()
    run("horizon-negative", "training-set", "--label-horizon=-5d")
    run("horizon-malformed", "training-set", "--label-horizon", "ninety")
    run("as-of-future", "training-set", "--at", (datetime.now(UTC) + timedelta(days=1)).isoformat())
    run("as-of-before-lake", "training-set", "--at", "2020-01-01T00:00:00Z")
    run("as-of-no-zone", "training-set", "--as-of", "2026-01-01T00:00:00")  # the old spelling, deprecated
    run("from-after-until", "training-set", "--from", "2025-03-01", "--until", "2025-02-01")  # deprecated
    down = {**env, "LAKEHOUSE__MLFLOW__TRACKING_URI": "http://127.0.0.1:9"}
    unreachable = ["training-set", "--conf", str(CONF), "--workdir", str(workdir), "--quiet", "--json"]
    ran = run_cli(unreachable, down)
    steps["tracking-unreachable"] = Step(ran.code, None, ran.stderr)
    run("train-unknown-set", "train", "--training-set", UNKNOWN_SET)  # well-formed, names none
    ran = run_cli(["training-set", "--workdir", str(workdir / "nowhere"), "--json"], env)
    steps["no-lakehouse"] = Step(ran.code, None, ran.stderr)
    after = ledger.read().count()

    for feed in ("logins", "outcomes"):
        run(f"ingest-{feed}", "ingest", "--feed", feed, "--source", str(deliveries))
    run("rebuild-silver", "build", "silver")
    run("rebuild-gold", "build", "gold")
    run("set-t0-again", "training-set", "--at", t0.isoformat())
    run("set-now", "training-set")
    short = run("set-30d", "training-set", "--label-horizon", "30d")
    run("train-too-few-positives", "train", "--training-set", short.data["training_set_id"])
    run("set-60d", "training-set", "--label-horizon", "60d")
    run("train", "train", "--training-set", steps["set-now"].data["training_set_id"])
    run("train-again", "train", "--training-set", steps["set-now"].data["training_set_id"])
    run("train-newest", "train")

    # W5: the correlation release in force, against the outcomes that arrived later
    run("calibrate", "calibrate", "--engine", ENGINE)
    run("calibrate-card", "calibrate", "--engine", ENGINE, "--scope", "shared_card", "--label-horizon", "60d")
    run("calibrate-undeclared", "calibrate", "--engine", "correlation@9")
    run("calibrate-malformed-engine", "calibrate", "--engine", "correlation")
    run("calibrate-not-a-correlation-engine", "calibrate", "--engine", "entity_resolution@1")
    run("calibrate-unknown-scope", "calibrate", "--engine", ENGINE, "--scope", "shared_phone")
    run("calibrate-empty-range", "calibrate", "--engine", ENGINE, "--since", "2030-01-01")
    run("calibrate-future", "calibrate", "--engine", ENGINE, "--at", "2999-01-01T00:00:00Z")
    ran = run_cli(["calibrate", "--engine", ENGINE, *unreachable[1:]], down)
    steps["calibrate-tracking-unreachable"] = Step(ran.code, None, ran.stderr)

    # recalibration: declare the calibrated release, replay history under it, publish
    engines = tmp_path_factory.mktemp("engines") / "engines.yaml"
    shutil.copy(REPO / "conf" / "engines.yaml", engines)
    recalibrate = ("--engine", ENGINE, "--declare", "--engines", str(engines))
    early = ("--effective-from", "2026-11-20")  # before correlation@2 took effect
    run("declare-before-latest", "calibrate", *recalibrate, *early)
    run("declare-from-calibrated", "calibrate", "--engine", "correlation@9", "--declare")
    declared = run("calibrate-declare", "calibrate", *recalibrate)
    before_recalibration = datetime.now(UTC)
    if declared.code == 0:
        plan = declared.data["declared"]["plan_path"]
        replayed = run("recalibrate-replay", "replay", "--plan", plan, "--engines", str(engines))
        run_id = replayed.data["run_id"] if replayed.code == 0 else "replay-missing"
        run("recalibrate-approve", "approve", run_id, "--by", "risk-lead")
        run("recalibrate-ack", "ack", "fraud-ops", run_id, "--by", "ops")
        run("recalibrate-publish", "publish", run_id)

    # a registered model as a scoring release: declare on model v1, score, retrain and rescore
    scoring = ("--engines", str(engines))
    declared_before = engines.read_bytes()
    run("declare-unknown-model", "train", "--declare", "--model-version", "99", *scoring)
    ran = run_cli(["train", "--declare", "--model-version", "1", *scoring, *unreachable[1:]], down)
    steps["declare-tracking-unreachable"] = Step(ran.code, None, ran.stderr)
    run("score-undeclared", "score", "--engine", "fraud_scoring@9", *scoring)
    untouched = engines.read_bytes() == declared_before
    first = ("--effective-from", "2026-01-01")
    run("declare-scoring", "train", "--declare", "--model-version", "1", *scoring, *first)
    run("declare-scoring-not-after", "train", "--declare", "--model-version", "2", *scoring, *first)
    scored_set = ("--training-set", steps["set-now"].data["training_set_id"])
    run("score-v1", "score", "--engine", "fraud_scoring@1", *scoring, *scored_set)
    run("score-v1-again", "score", "--engine", "fraud_scoring@1", *scoring, *scored_set)
    retrain = ("--training-set", steps["set-60d"].data["training_set_id"])
    run("train-declare", "train", "--declare", *retrain, *scoring)
    before_rescoring = datetime.now(UTC)
    run("score-v2", "score", "--engine", "fraud_scoring@2", *scoring, *scored_set)
    run("tables", "tables")
    yield History(
        steps,
        config,
        env,
        t0,
        before,
        after,
        before_recalibration,
        engines,
        before_rescoring,
        untouched,
        deliveries,
    )
    drop_all(TableRegistry(spark_session, config))


def test_every_step_of_the_ml_history_exits_0(history: History) -> None:
    failed = {n: (s.code, s.stderr[-300:]) for n, s in history.steps.items() if s.code != 0}
    refusals = {
        "horizon-negative",
        "horizon-malformed",
        "as-of-future",
        "as-of-before-lake",
        "as-of-no-zone",
        "from-after-until",
        "tracking-unreachable",
        "train-unknown-set",
        "train-too-few-positives",
        "no-lakehouse",
        "calibrate-undeclared",
        "calibrate-malformed-engine",
        "calibrate-not-a-correlation-engine",
        "calibrate-unknown-scope",
        "calibrate-empty-range",
        "calibrate-future",
        "calibrate-tracking-unreachable",
        "declare-from-calibrated",
        "declare-before-latest",
        "declare-unknown-model",
        "declare-tracking-unreachable",
        "score-undeclared",
        "declare-scoring-not-after",
    }
    unexpected = {name: failed[name] for name in set(failed) - refusals}
    assert not unexpected, unexpected
    assert set(failed) == refusals, failed


@pytest.mark.parametrize(
    ("step", "says"),
    [
        ("horizon-negative", "--label-horizon: must be a positive number of days"),
        ("horizon-malformed", "--label-horizon: expected a number of days such as 90d"),
        ("as-of-future", "is in the future"),
        ("as-of-before-lake", "did not exist yet at 2020-01-01"),
        ("as-of-no-zone", "--at '2026-01-01T00:00:00' has no time zone"),
        ("from-after-until", "--since 2025-03-01 must be before --until 2025-02-01"),
        ("tracking-unreachable", "MLflow tracking server http://127.0.0.1:9 is unreachable"),
        ("train-unknown-set", f"--training-set {UNKNOWN_SET}: no such training set"),
        ("train-too-few-positives", "are needed (a wider date range, a longer --label-horizon"),
        ("no-lakehouse", "no lakehouse in"),
        ("calibrate-undeclared", "engine correlation@9 is not declared"),
        ("calibrate-malformed-engine", "expected NAME@VERSION"),
        ("calibrate-not-a-correlation-engine", "--engine entity_resolution@1 produces silver.events"),
        ("calibrate-unknown-scope", "--scope 'shared_phone' is not a correlation type"),
        ("calibrate-empty-range", "found 0 decision(s) with a closed horizon"),
        ("calibrate-future", "--at 2999-01-01T00:00:00Z is in the future"),
        ("calibrate-tracking-unreachable", "MLflow tracking server http://127.0.0.1:9 is unreachable"),
        ("declare-from-calibrated", "engine correlation@9 is not declared"),
        (
            "declare-before-latest",
            "--declare: a new correlation release must take effect after correlation@2 (2026-11-25)",
        ),
        ("declare-unknown-model", "has no registered version 99"),
        ("declare-tracking-unreachable", "MLflow tracking server http://127.0.0.1:9 is unreachable"),
        ("score-undeclared", "engine 'fraud_scoring' is not declared in"),
        (
            "declare-scoring-not-after",
            "--declare: a new fraud_scoring release must take effect after fraud_scoring@1 (2026-01-01)",
        ),
    ],
)
def test_bad_input_is_one_line_with_exit_2(history: History, step: str, says: str) -> None:
    refused = history[step]
    assert refused.code == 2
    error = json.loads(refused.stderr.strip().splitlines()[-1])
    assert says in error["error"]
    assert "\n" not in error["error"]


def test_the_old_spellings_are_still_read_with_a_deprecation_line(history: History) -> None:
    for step, old, new in (("as-of-no-zone", "--as-of", "--at"), ("from-after-until", "--from", "--since")):
        first = json.loads(history[step].stderr.strip().splitlines()[0])
        assert first == {
            "warning": f"{old} is deprecated: use {new} (the old spelling goes in the next release)"
        }


def test_refusals_write_nothing(history: History) -> None:
    assert history.ledger_rows_after_refusals == history.ledger_rows_before_refusals


def _rows(spark: Any, config: LakehouseConfig, training_set_id: str) -> dict[str, dict[str, Any]]:
    from pyspark.sql import functions as F

    from lakehouse.tables import TableRegistry

    table = TableRegistry(spark, config).get(TABLE)
    rows = table.read().where(F.col("training_set_id") == training_set_id).collect()
    return {r["decision_id"]: r.asDict() for r in rows}


def test_a_training_set_built_later_as_of_t0_is_the_one_built_at_t0(history: History) -> None:
    """Same inputs as known at T0 -> the same rows and hash, after logins, outcomes and two
    rebuilds landed (the restated daily features and correlations do not leak back)."""
    at_t0, again = history["set-t0"].data, history["set-t0-again"].data
    assert again["content_hash"] == at_t0["content_hash"]
    assert again["inputs"] == at_t0["inputs"] | {"gold.correlations": again["inputs"]["gold.correlations"]}
    assert again["rows"] == at_t0["rows"] > 0
    assert again["training_set_id"] != at_t0["training_set_id"]


def test_what_arrived_after_t0_is_absent_from_the_t0_set_and_present_now(
    history: History, spark_session: Any
) -> None:
    early = _rows(spark_session, history.config, history["set-t0-again"].data["training_set_id"])
    now = _rows(spark_session, history.config, history["set-now"].data["training_set_id"])
    assert history["set-t0"].data["positives"] == 0, "no outcome had been ingested at T0"
    assert history["set-now"].data["positives"] >= 10
    both = early.keys() & now.keys()
    planted = [d for d in both if now[d]["label"] == 1]
    assert planted, "decisions labelled now were decision points at T0 too"
    assert all(early[d]["label"] == 0 and early[d]["label_value"] is None for d in planted)
    # logins arrived after T0: their counts and devices' correlations are in the later rows only
    assert all(early[d]["logins_30d"] == 0 for d in both)
    assert any(now[d]["logins_30d"] > 0 for d in both)
    grown = [d for d in both if now[d]["correlations"] > early[d]["correlations"]]
    assert grown, "logins' shared devices added correlations after T0"


def test_the_label_is_the_first_outcome_within_the_horizon(history: History, spark_session: Any) -> None:
    ninety = _rows(spark_session, history.config, history["set-now"].data["training_set_id"])
    sixty = _rows(spark_session, history.config, history["set-60d"].data["training_set_id"])
    assert history["set-60d"].data["positives"] < history["set-now"].data["positives"]
    for decision, row in sixty.items():
        if row["label"]:
            arrived = row["label_arrived_at"] - row["decision_time"]
            assert timedelta(0) < arrived <= timedelta(days=60)
            if decision in ninety:  # a 60-day horizon closes earlier: later decisions are in
                assert ninety[decision]["label"] == 1


def _reference_rows(spark: Any, config: LakehouseConfig, built: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every row of a training set, recomputed by brute force from the documented rules:
    decision points are orders with an entity whose t + horizon is not after the earlier of
    T and the last delivery; 30 complete days of entity_daily before t's day; the latest
    order_amount/90-day baseline of the 30 days before t's day; correlations known at T
    (recorded by T, not superseded by T) naming the entity with valid_from <= t; the label
    is the earliest fraud/chargeback outcome of the order that arrived in (t, t + horizon]
    and not after T."""
    from lakehouse.tables import TableRegistry

    registry = TableRegistry(spark, config)
    pins = built["inputs"]
    as_of = datetime.fromisoformat(built["as_of"])
    horizon = timedelta(days=built["label_horizon_days"])

    def rows(name: str) -> list[dict[str, Any]]:
        return [r.asDict() for r in registry.get(name).read(as_of=pins[name]).collect()]

    def aware(moment: datetime) -> datetime:
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment

    silver, daily = rows("silver.events"), rows("gold.entity_daily")
    baselines, correlations = rows("gold.baselines"), rows("gold.correlations")
    end = min(as_of, max(aware(r["ingest_time"]) for r in silver))
    daily_of: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in daily:
        daily_of[r["entity_id"]].append(r)
    baselines_of: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for b in baselines:
        if b["metric"] == "order_amount" and b["window_days"] == 90:
            baselines_of[b["entity_id"]].append(b)
    correlations_of: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in correlations:
        if aware(c["recorded_at"]) <= as_of and (
            c["superseded_at"] is None or aware(c["superseded_at"]) > as_of
        ):
            for side in {c["entity_a"], c["entity_b"]}:
                correlations_of[side].append(c)
    outcomes_of: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for o in silver:
        if o["domain"] == "outcomes" and o["label"] in ("fraud", "chargeback"):
            outcomes_of[o["order_id"]].append(o)
    sums = ("orders", "order_amount", "refunds", "refund_amount", "logins", "failed_logins")
    sums += ("devices", "cards", "chargebacks", "fraud_labels")
    expected: dict[str, dict[str, Any]] = {}
    for order in silver:
        if order["domain"] != "orders" or order["entity_id"] is None:
            continue
        t = aware(order["event_time"])
        if t + horizon > end:
            continue
        entity, day = order["entity_id"], t.date()
        first_day = day - timedelta(days=30)
        window = [r for r in daily_of[entity] if first_day <= r["day"] < day]
        row: dict[str, Any] = {f"{c}_30d": float(sum(r[c] or 0 for r in window)) for c in sums}
        row["active_days_30d"] = len(window)
        row["amount"] = float(order["amount"]) if order["amount"] is not None else None
        fresh = [b for b in baselines_of[entity] if first_day <= b["day"] < day]
        latest = max(fresh, key=lambda b: b["day"], default=None)
        row["amount_mean_90d"] = latest["mean"] if latest else None
        row["amount_std_90d"] = latest["stddev"] if latest else None
        known = [c for c in correlations_of[entity] if aware(c["valid_from"]) <= t]
        row["correlations"] = len(known)
        row["max_confidence"] = max((c["confidence"] for c in known), default=None)
        arrived = sorted(
            (aware(o["ingest_time"]), o["event_id"], o["label"])
            for o in outcomes_of[order["event_id"]]
            if t < aware(o["ingest_time"]) <= min(t + horizon, as_of)
        )
        row["label"] = 1 if arrived else 0
        row["label_value"] = arrived[0][2] if arrived else None
        expected[order["event_id"]] = row
    return expected


@pytest.mark.parametrize("step", ["set-t0", "set-now", "set-60d"])
def test_every_row_matches_a_brute_force_reference(history: History, spark_session: Any, step: str) -> None:
    built = history[step].data
    got = _rows(spark_session, history.config, built["training_set_id"])
    expected = _reference_rows(spark_session, history.config, built)
    assert got.keys() == expected.keys()
    assert len(got) == built["rows"]
    for decision, want in expected.items():
        row = got[decision]
        for column, value in want.items():
            if isinstance(value, float):
                assert row[column] == pytest.approx(value, rel=1e-9), (decision, column)
            else:
                assert row[column] == value, (decision, column)


def test_training_sets_are_logged_to_mlflow_with_their_exact_source(history: History) -> None:
    from mlflow.tracking import MlflowClient

    built = history["set-now"].data
    client = MlflowClient(tracking_uri=history.config.mlflow_tracking_uri)
    run = client.get_run(built["mlflow_run_id"])
    assert run.data.tags["lakehouse.run_id"] == built["run_id"]
    (dataset,) = run.inputs.dataset_inputs
    source = json.loads(dataset.dataset.source)
    assert f"VERSION AS OF {built['version']}" in source["sql"]
    assert built["training_set_id"] in source["sql"]
    tags = {t.key: t.value for t in dataset.tags}
    assert tags["table"] == TABLE
    assert tags["input.silver.events"] == str(built["inputs"]["silver.events"])


def _ledger_entries(history: History, run_id: str) -> dict[str, dict[str, Any]]:
    """``lakehouse ledger show --run RUN``: the run's entry bodies by kind (one of each here)."""
    workdir = str(history.config.workdir_path)
    argv = ["ledger", "show", "--run", run_id, "--conf", str(CONF), "--json", "--workdir", workdir]
    shown = run_cli(argv, history.env)
    assert shown.code == 0, shown.stderr
    return {e["kind"]: e["body"] for e in json.loads(shown.stdout)["entries"]}


def test_the_ledger_and_mlflow_name_each_other(history: History) -> None:
    built = history["set-now"].data
    entries = _ledger_entries(history, built["run_id"])
    started, finished = entries["run_started"], entries["run_finished"]
    assert started["parameters"]["mlflow_run_id"] == built["mlflow_run_id"]
    assert finished["outputs"][TABLE]["content_hash"] == built["content_hash"]
    assert finished["outputs"][TABLE]["version"] == built["version"]


def test_train_registers_a_measured_model_tied_to_its_training_set(history: History) -> None:
    import mlflow.sklearn
    from mlflow.tracking import MlflowClient

    trained, built = history["train"].data, history["set-now"].data
    assert trained["training_set_id"] == built["training_set_id"]
    client = MlflowClient(tracking_uri=history.config.mlflow_tracking_uri)
    run = client.get_run(trained["mlflow_run_id"])
    assert run.data.tags["lakehouse.run_id"] == trained["run_id"]
    for metric in ("roc_auc", "pr_auc", "brier", "base_rate_brier"):
        assert run.data.metrics[metric] == pytest.approx(trained["metrics"][metric])
    (dataset,) = run.inputs.dataset_inputs
    assert built["training_set_id"] in json.loads(dataset.dataset.source)["uri"]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "plots")}
    assert {"plots/roc.png", "plots/precision_recall.png"} <= artifacts
    version = client.get_model_version(trained["model_name"], str(trained["model_version"]))
    assert version.run_id == trained["mlflow_run_id"]
    mlflow.set_tracking_uri(history.config.mlflow_tracking_uri)
    model = mlflow.sklearn.load_model(trained["model_uri"])
    assert model.n_features_in_ == len(FEATURES)


def test_the_model_is_judged_against_its_references(history: History) -> None:
    metrics = history["train"].data["metrics"]
    assert metrics["positives"] > 0
    assert 0.0 <= metrics["brier"] <= 1.0
    assert metrics["roc_auc"] is not None
    better = metrics["brier"] < metrics["base_rate_brier"] and (
        metrics["confidence_roc_auc"] is None or metrics["roc_auc"] > metrics["confidence_roc_auc"]
    )
    assert history["train"].data["better_than_references"] is better


def test_training_twice_on_the_same_set_gives_the_same_model(history: History) -> None:
    import mlflow.sklearn
    import numpy as np

    first, second = history["train"].data, history["train-again"].data
    assert second["metrics"] == first["metrics"]
    assert second["model_version"] == first["model_version"] + 1
    mlflow.set_tracking_uri(history.config.mlflow_tracking_uri)
    probe = np.linspace(0.0, 5.0, 3 * len(FEATURES)).reshape(3, len(FEATURES))
    one, two = (mlflow.sklearn.load_model(t["model_uri"]).predict_proba(probe) for t in (first, second))
    assert (one == two).all()


def test_train_without_a_set_takes_the_newest(history: History) -> None:
    assert history["train-newest"].data["training_set_id"] == history["set-60d"].data["training_set_id"]


def _reports(spark: Any, config: LakehouseConfig, run_id: str) -> dict[str, dict[str, Any]]:
    from pyspark.sql import functions as F

    from lakehouse.tables import TableRegistry

    rows = TableRegistry(spark, config).get(REPORTS).read().where(F.col("report_id") == run_id).collect()
    return {r["scope"]: r.asDict() for r in rows}


def _reference_outcomes(
    spark: Any, config: LakehouseConfig, result: dict[str, Any]
) -> dict[str, tuple[int, int, int]]:
    """Per scope (decisions, confirmed, still open), by brute force from the documented rule:
    the release's row versions recorded by T, one per (correlation, confidence), confirmed
    when a fraud/chargeback outcome of an order on one of its evidence's assets arrived in
    (valid_from, valid_from + horizon] and not after T; open when valid_from + horizon is
    after the earlier of T and the last delivery."""
    from lakehouse.tables import TableRegistry

    registry = TableRegistry(spark, config)
    pins = result["inputs"]
    as_of = datetime.fromisoformat(result["as_of"])
    horizon = timedelta(days=result["label_horizon_days"])

    def aware(moment: datetime) -> datetime:
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment

    silver = [r.asDict() for r in registry.get("silver.events").read(as_of=pins["silver.events"]).collect()]
    rows = registry.get("gold.correlations").read(as_of=pins["gold.correlations"]).collect()
    end = min(as_of, max(aware(r["ingest_time"]) for r in silver))
    column = {"shared_device": "device_id", "shared_card": "card_fingerprint"}
    orders_on: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in silver:
        if r["domain"] == "orders":
            for scope, name in column.items():
                if r[name] is not None:
                    orders_on[(scope, r[name])].append(r["event_id"])
    arrivals: dict[str, list[datetime]] = defaultdict(list)
    for r in silver:
        if r["domain"] == "outcomes" and r["label"] in ("fraud", "chargeback"):
            arrivals[r["order_id"]].append(aware(r["ingest_time"]))
    earliest: dict[tuple[str, float], Any] = {}
    for r in rows:
        if ENGINE in r["engine"].split(";") and aware(r["recorded_at"]) <= as_of:
            key = (r["correlation_id"], r["confidence"])
            if key not in earliest or (r["recorded_at"], r["run_id"]) < (
                earliest[key]["recorded_at"],
                earliest[key]["run_id"],
            ):
                earliest[key] = r
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for r in earliest.values():
        scope, start = r["correlation_type"], aware(r["valid_from"])
        if start + horizon > end:
            counts[scope][2] += 1
            continue
        assets = json.loads(r["evidence"]).get("assets", [])
        confirmed = any(
            start < arrived <= min(start + horizon, as_of)
            for asset in assets
            for order in orders_on[(scope, asset)]
            for arrived in arrivals[order]
        )
        counts[scope][0] += 1
        counts[scope][1] += int(confirmed)
    per_type = {scope: (d, p, o) for scope, (d, p, o) in counts.items()}
    if len(per_type) > 1:  # the whole release, pooled
        per_type["all"] = tuple(sum(c[i] for c in per_type.values()) for i in range(3))  # type: ignore[assignment]
    return per_type


@pytest.mark.parametrize("step", ["calibrate", "calibrate-card"])
def test_decisions_and_outcomes_match_a_brute_force_reference(
    history: History, spark_session: Any, step: str
) -> None:
    result = history[step].data
    expected = _reference_outcomes(spark_session, history.config, result)
    got = {s["scope"]: (s["decisions"], s["positives"], s["censored"]) for s in result["scopes"]}
    if step == "calibrate-card":
        expected = {k: v for k, v in expected.items() if k == "shared_card"}
    assert got == expected
    assert sum(d for d, _, _ in got.values()) > 0


def test_calibration_reports_are_stored_flagged_and_tracked(history: History, spark_session: Any) -> None:
    from mlflow.tracking import MlflowClient

    result = history["calibrate"].data
    stored = _reports(spark_session, history.config, result["run_id"])
    assert set(stored) == {s["scope"] for s in result["scopes"]} == {"shared_card", "shared_device", "all"}
    client = MlflowClient(tracking_uri=history.config.mlflow_tracking_uri)
    run = client.get_run(result["mlflow_run_id"])
    assert run.data.tags["lakehouse.run_id"] == result["run_id"]
    plots = {a.path for a in client.list_artifacts(run.info.run_id, "plots")}
    for scope in result["scopes"]:
        row = stored[scope["scope"]]
        before = scope["before"]
        assert row["brier"] == pytest.approx(before["brier"])
        assert row["ece_uniform"] == pytest.approx(before["ece_uniform"])
        assert row["ece_quantile"] == pytest.approx(before["ece_quantile"])
        assert row["flagged"] is (before["ece_uniform"] > row["ece_threshold"]) is scope["flagged"]
        bins = json.loads(row["bins"])
        assert len(bins) == 10
        assert sum(b["count"] for b in bins) == row["decisions"]
        assert run.data.metrics[f"{scope['scope']}.ece_uniform"] == pytest.approx(before["ece_uniform"])
        png = Path(scope["figure"])
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"plots/{png.name}" in plots


def test_a_calibrator_is_registered_only_with_enough_outcomes_and_a_better_brier(history: History) -> None:
    import mlflow.sklearn
    import numpy as np

    from workloads.evaluation.calibration import MIN_OUTCOMES_PER_CLASS, MIN_OUTCOMES_PER_SCOPE

    scopes = history["calibrate"].data["scopes"]
    fitted = [s for s in scopes if s["after"]]
    counts = {s["scope"]: (s["decisions"], s["positives"]) for s in scopes}
    assert fitted, f"the history has enough outcomes for at least one scope: {counts}"
    mlflow.set_tracking_uri(history.config.mlflow_tracking_uri)
    for scope in scopes:
        n, positives = scope["decisions"], scope["positives"]
        enough = n >= MIN_OUTCOMES_PER_SCOPE and min(positives, n - positives) >= MIN_OUTCOMES_PER_CLASS
        better = enough and scope["after"]["brier"] < scope["before"]["brier"]
        assert (scope["calibrator"] is not None) is better
        if not enough:
            assert "too few outcomes" in scope["refused"]
            continue
        if not better:
            assert "does not beat the uncalibrated" in scope["refused"]
            continue
        calibrator = scope["calibrator"]
        assert scope["after"]["brier"] == pytest.approx(calibrator["cv_brier"][calibrator["method"]])
        model = mlflow.sklearn.load_model(f"models:/{calibrator['model']}/{calibrator['model_version']}")
        grid = np.linspace(0.01, 0.99, 50)
        if calibrator["method"] == "isotonic":
            mapped = model.predict(grid)
        else:  # Platt's single feature is logit(p)
            mapped = model.predict_proba(np.log(grid / (1 - grid)).reshape(-1, 1))[:, 1]
        assert np.all(np.diff(mapped) >= 0), "a calibrator keeps the order of confidences"
        assert mapped.min() >= 0.0
        assert mapped.max() <= 1.0


def test_the_ledger_records_the_measurement_and_its_flags(history: History) -> None:
    result = history["calibrate"].data
    entries = _ledger_entries(history, result["run_id"])
    measured, started = entries["calibration_measured"], entries["run_started"]
    assert started["parameters"]["mlflow_run_id"] == result["mlflow_run_id"]
    assert measured["engine"] == ENGINE
    assert sorted(measured["flagged"]) == sorted(s["scope"] for s in result["scopes"] if s["flagged"])
    for scope in result["scopes"]:
        assert measured["scopes"][scope["scope"]]["ece_uniform"] == pytest.approx(
            scope["before"]["ece_uniform"]
        )


def _declared_map(p: float, calibrator: dict[str, Any]) -> float:
    """A declared calibrator applied by hand (numpy), rounded as the release rounds."""
    import numpy as np

    if calibrator["method"] == "platt":
        q = min(max(p, calibrator["clip"]), 1 - calibrator["clip"])
        mapped = 1 / (1 + np.exp(-(calibrator["slope"] * np.log(q / (1 - q)) + calibrator["intercept"])))
    else:
        mapped = float(np.interp(p, calibrator["x"], calibrator["y"]))
    return min(max(round(float(mapped), 6), 0.0), 0.999999)


def test_a_declared_recalibration_pins_its_calibrators_and_replays_history(
    history: History, spark_session: Any
) -> None:
    from pyspark.sql import functions as F

    from lakehouse.tables import TableRegistry
    from ledger.engines import load_engines

    declared = history["calibrate-declare"].data
    assert history["recalibrate-publish"].code == 0, history["recalibrate-publish"].stderr
    release = load_engines(history.engines).resolve(
        "correlation", int(declared["declared"]["engine"].split("@")[1])
    )
    registered = {
        s["calibrator"]["model"]: str(s["calibrator"]["model_version"])
        for s in declared["scopes"]
        if s["calibrator"]
    }
    assert dict(release.model_versions) == registered
    maps = dict(release.parameters["calibrators"])
    assert maps == {s["scope"]: s["calibrator"]["map"] for s in declared["scopes"] if s["calibrator"]}
    rows = TableRegistry(spark_session, history.config).get("gold.correlations").read()
    retired = rows.where(F.col("supersede_reason").startswith(f"recalibrated under {release.ref}")).collect()
    assert retired, "the recalibration superseded rows"
    successors = {(r["correlation_id"], r["run_id"]): r for r in rows.collect()}
    moved = 0
    for old in retired:
        new = successors[(old["superseded_by"], history["recalibrate-replay"].data["run_id"])]
        assert new["engine"].startswith(f"{release.ref};")
        calibrator = maps.get(old["correlation_type"], maps.get("all"))
        expected = _declared_map(old["confidence"], calibrator) if calibrator else old["confidence"]
        assert new["confidence"] == pytest.approx(expected, abs=1e-6)
        moved += new["confidence"] != old["confidence"]
    assert moved > 0


def test_asof_before_the_recalibration_still_answers_with_the_old_confidences(
    history: History, spark_session: Any
) -> None:
    from pyspark.sql import functions as F

    from lakehouse.tables import TableRegistry

    rows = TableRegistry(spark_session, history.config).get("gold.correlations").read()
    retired = (
        rows.where(F.col("supersede_reason").startswith("recalibrated under"))
        .orderBy("correlation_id")
        .first()
    )
    assert retired is not None
    workdir = str(history.config.workdir_path)
    common = ["--conf", str(CONF), "--json", "--workdir", workdir]
    at = history.before_recalibration.isoformat()
    before = run_cli(
        ["asof", "gold.correlations", "--at", at, "--entity", retired["entity_a"], *common], history.env
    )
    assert before.code == 0, before.stderr
    answered = {r["correlation_id"]: r for r in json.loads(before.stdout)["rows"]}
    assert answered[retired["correlation_id"]]["confidence"] == retired["confidence"]
    release = history["calibrate-declare"].data["declared"]["engine"]
    assert not any(r["engine"].startswith(f"{release};") for r in answered.values())
    story = run_cli(
        ["asof", "gold.correlations", "--history", "--entity", retired["entity_a"], *common], history.env
    )
    assert story.code == 0, story.stderr
    assert "recalibrated under" in story.stdout
    assert history["recalibrate-replay"].data["run_id"] in story.stdout


def test_calibration_at_names_the_release_in_force_and_what_was_measured_before_and_after(
    history: History,
) -> None:
    """``lakehouse calibration-at --at T``: before the recalibration's publication the base
    release, uncalibrated, with the measurement that led to it; after it the recalibrated
    release, its calibrators and pinned models, and the figures of the run that fitted them.
    Both readers answer alike; the shipped catalog, which lacks the published release, is
    refused (it would otherwise name the base release)."""
    workdir = str(history.config.workdir_path)
    common = ["--conf", str(CONF), "--json", "--workdir", workdir]
    declared = history["calibrate-declare"].data
    release = declared["declared"]["engine"]

    def calibration(*args: str) -> tuple[int, Any, str]:
        ran = run_cli(["calibration-at", *args, *common], history.env)
        return ran.code, json.loads(ran.stdout) if ran.code == 0 else None, ran.stderr

    code, before, err = calibration(
        "--at", history.before_recalibration.isoformat(), "--engines", str(history.engines)
    )
    assert code == 0, err
    assert (before["engine"], before["calibrated"]) == (ENGINE, False)
    assert before["last_measured"]["run_id"] == declared["run_id"], "the measurement behind the declaration"
    assert set(before["last_measured"]["flagged"]) == {s["scope"] for s in declared["scopes"] if s["flagged"]}

    now = datetime.now(UTC).isoformat()
    code, after, err = calibration("--at", now, "--engines", str(history.engines))
    assert code == 0, err
    assert (after["engine"], after["calibrated"], after["base"]) == (release, True, ENGINE)
    fitted = [s for s in declared["scopes"] if s["calibrator"]]
    assert after["methods"] == {s["scope"]: s["calibrator"]["map"]["method"] for s in fitted}
    assert after["model_versions"] == {
        s["calibrator"]["model"]: str(s["calibrator"]["model_version"]) for s in fitted
    }
    assert after["fitted_by"]["run_id"] == declared["run_id"]
    for scope in fitted:
        figures = after["fitted_by"]["scopes"][scope["scope"]]
        assert figures["decisions"] == scope["decisions"]
        assert figures["calibrated_ece_uniform"] is not None
    assert after["last_measured"] is None, "the recalibrated release itself was never measured"

    code, read_without_jvm, err = calibration(
        "--at", now, "--engines", str(history.engines), "--reader", "pyiceberg"
    )
    assert code == 0, err
    assert read_without_jvm == after

    for args, says in [
        (("--at", "2026-01-01T00:00:00", "--engines", str(history.engines)), "--at"),
        (("--at", now, "--engine", "scoring", "--engines", str(history.engines)), "scoring"),
        (("--at", now), f"records output of {release}, which this file does not declare"),
    ]:
        code, _, err = calibration(*args)
        assert code == 2, (args, err)
        assert says in json.loads(err.strip().splitlines()[-1])["error"]


SCORES = "gold.fraud_scores"


def test_a_scoring_release_pins_a_registered_model_version(history: History) -> None:
    from ledger.engines import load_engines

    assert history.engines_untouched_by_refusals, "a refused declaration changed the engines file"
    catalog = load_engines(history.engines)
    first, second = catalog.versions("fraud_scoring")
    model = history["train"].data["model_name"]
    retrained = history["train-declare"].data
    assert first.model_versions == {model: "1"}
    assert second.model_versions == {model: str(retrained["trained"]["model_version"])}
    assert retrained["model_version"] == str(retrained["trained"]["model_version"]) != "1"
    assert first.identity().digest != second.identity().digest
    assert second.produces == (SCORES,)
    assert second.consumes == (TABLE,)
    shipped = load_engines(REPO / "conf" / "engines.yaml")
    assert "fraud_scoring" not in shipped.names(), "the shipped catalog is never edited"


def test_same_training_set_and_release_give_the_same_scores(history: History) -> None:
    once, again = history["score-v1"].data, history["score-v1-again"].data
    rows = history["set-now"].data["rows"]
    assert once["scored"] == once["inserted"] == rows > 0
    assert again["content_hash"] == once["content_hash"]
    assert (again["inserted"], again["rescored"], again["unchanged"]) == (0, 0, rows)
    assert again["version"] == once["version"], "a rerun writes nothing"


def test_a_retrained_model_rescores_history_superseding_with_its_release(
    history: History, spark_session: Any
) -> None:
    from pyspark.sql import functions as F

    from lakehouse.tables import TableRegistry

    v1, v2 = history["score-v1"].data, history["score-v2"].data
    assert v2["content_hash"] != v1["content_hash"]
    assert v2["rescored"] > 0
    assert v2["rescored"] + v2["unchanged"] == v1["scored"]
    rows = TableRegistry(spark_session, history.config).get(SCORES).read()
    model = history["train"].data["model_name"]
    version = history["train-declare"].data["model_version"]
    reason = f"rescored under fraud_scoring@2 (model {model} v{version}, run {v2['run_id']})"
    retired = rows.where(F.col("status") == "superseded")
    assert retired.count() == v2["rescored"]
    assert {r[0] for r in retired.select("supersede_reason").distinct().collect()} == {reason}
    current = rows.where(F.col("status") == "authoritative")
    assert current.count() == v1["scored"], "one current score per decision"
    example = retired.orderBy("decision_id").first()
    assert example is not None
    assert example["engine"] == "fraud_scoring@1"
    workdir = str(history.config.workdir_path)
    common = ["--conf", str(CONF), "--json", "--workdir", workdir]
    entity = ["--entity", example["entity_id"]]
    at = history.before_rescoring.isoformat()
    before = run_cli(["asof", SCORES, "--at", at, *entity, *common], history.env)
    assert before.code == 0, before.stderr
    answered = {r["decision_id"]: r for r in json.loads(before.stdout)["rows"]}
    assert answered[example["decision_id"]]["score"] == example["score"]
    assert {r["engine"] for r in answered.values()} == {"fraud_scoring@1"}
    story = run_cli(["asof", SCORES, "--history", *entity, *common], history.env)
    assert story.code == 0, story.stderr
    assert reason in story.stdout


def test_the_ledger_names_the_model_version_of_each_scoring_run(history: History) -> None:
    model = history["train"].data["model_name"]
    for step, release, version in (
        ("score-v1", "fraud_scoring@1", "1"),
        ("score-v2", "fraud_scoring@2", history["train-declare"].data["model_version"]),
    ):
        scored = history[step].data
        entries = _ledger_entries(history, scored["run_id"])
        (identity,) = entries["run_started"]["engines"]
        assert f"{identity['name']}@{identity['version']}" == release
        assert identity["model_versions"] == {model: version}
        output = entries["run_finished"]["outputs"][SCORES]
        assert output["content_hash"] == scored["content_hash"]


def test_two_model_versions_are_judged_on_the_same_later_outcomes(
    history: History, spark_session: Any
) -> None:
    """Each run's ROC AUC and Brier, recomputed from the table's rows and the set's labels."""
    from pyspark.sql import functions as F
    from sklearn.metrics import brier_score_loss, roc_auc_score

    from lakehouse.tables import TableRegistry

    registry = TableRegistry(spark_session, history.config)
    labels = {
        r["decision_id"]: (r["decision_time"], r["label"])
        for r in registry.get(TABLE)
        .read()
        .where(F.col("training_set_id") == history["set-now"].data["training_set_id"])
        .collect()
    }
    cut = sorted(time for time, _ in labels.values())[int(len(labels) * 0.8)]
    scores = registry.get(SCORES).read()
    for step in ("score-v1", "score-v2"):
        run = history[step].data
        rows = scores.where(F.col("run_id") == run["run_id"]).collect()
        if step == "score-v2":  # unchanged decisions keep v1's row: read those from v1's run
            kept = scores.where(F.col("run_id") == history["score-v1"].data["run_id"])
            rows += kept.where(F.col("status") == "authoritative").collect()
        later = [
            (labels[r["decision_id"]][1], r["score"]) for r in rows if labels[r["decision_id"]][0] >= cut
        ]
        y, p = [label for label, _ in later], [score for _, score in later]
        measured = run["measures"]
        assert measured["rows"] == len(later)
        assert measured["roc_auc"] == pytest.approx(roc_auc_score(y, p))
        assert measured["brier"] == pytest.approx(brier_score_loss(y, p))
    one, two = history["score-v1"].data["measures"], history["score-v2"].data["measures"]
    assert one["rows"] == two["rows"]
    assert one["positives"] == two["positives"]


@pytest.mark.notebook
def test_the_ml_notebook_walks_the_path_on_this_history(history: History) -> None:
    """Near the end of the module: it builds one more training set (only the household
    member's erasure runs after it)."""
    text = "\n".join(execute_notebook(history.config.workdir_path, history.env))
    assert "JVM started: False" in text
    assert "rows read back without Spark:" in text
    assert "better than both references:" in text
    assert text.count("<image/png>") >= 1, "a reliability diagram is shown"
    assert "training-set  training-set-" in text or "training-set training-set-" in text
    assert "dataset: SELECT * FROM" in text
    assert f"recalibration {history['recalibrate-replay'].data['run_id']} published" in text
    assert "the answer for D is unchanged: True" in text


def test_the_ml_tables_live_in_this_instance(history: History) -> None:
    tables = {t["name"]: t for t in history["tables"].data["tables"]}
    instance = history.env["LAKEHOUSE__INSTANCE"]
    for name in (TABLE, REPORTS):
        assert tables[name]["exists"], name
        assert instance in tables[name]["location"], tables[name]["location"]
        assert tables[name]["format"] == "iceberg", "Gold is Iceberg in the shipped zone formats"


@dataclass(frozen=True)
class HouseholdErasure:
    subject: dict[str, Any]
    erased: Step
    verified: Step


@pytest.fixture(scope="module")
def household_erasure(history: History, spark_session: Any) -> HouseholdErasure:
    """Issue 37: a household member with training-set rows and scores, erased through the
    command line after every other test of the module has read the history (the erasure
    purges the versions that held the subject)."""
    from tests.erasure_search import household_subject, person_rows

    holds = ("gold.training_sets", "gold.fraud_scores")
    home = household_subject(spark_session, history.config, history.deliveries, set(), holds)
    steps: dict[str, Step] = {}
    workdir = history.config.workdir_path
    request = ("--request", "REQ-HOME-1", "--reason", "GDPR art. 17")
    erased = _run(steps, workdir, history.env, "erase", "erase", "--subject-email", home["email"], *request)
    certificate = erased.data["certificate"]["certificate_id"] if erased.code == 0 else "erasure-missing"
    verified = _run(steps, workdir, history.env, "verify", "erase", "--verify", certificate)
    home["after"] = person_rows(spark_session, history.config, home)
    return HouseholdErasure(home, erased, verified)


def test_a_household_member_with_training_rows_and_scores_is_erased_and_the_other_keeps_theirs(
    household_erasure: HouseholdErasure, spark_session: Any, history: History
) -> None:
    """Last in the module (it erases). Two persons outside the rings share a family device,
    never an entity: erasing one exits 0 and verifies; their Silver rows, correlations,
    training-set rows and scores are gone and no file names their addresses or entity; the
    other person keeps every row, their entity ids and their rows on the shared device."""
    from lakehouse.tables import TableRegistry
    from tests.erasure_search import files_naming

    erased, verified = household_erasure.erased, household_erasure.verified
    assert (erased.code, verified.code) == (0, 0), (erased.stderr[-1500:], verified.stderr[-1500:])
    home = household_erasure.subject
    certificate = erased.data["certificate"]
    assert certificate["verification"]["hits"] == []
    assert verified.data["hits"] == []
    before, after = home["before"], home["after"]
    assert before["subject_rows"] > 0
    assert before["gold.training_sets"] > 0, "the subject's decisions were in a training set"
    assert before["gold.fraud_scores"] > 0, "and were scored"
    assert {"gold.training_sets", "gold.fraud_scores"} <= set(certificate["tables"])
    gone = ("subject_rows", "subject_correlations", "gold.training_sets", "gold.fraud_scores")
    assert {k: after[k] for k in gone} == dict.fromkeys(gone, 0)
    assert before["other_on_device"] > 0
    assert after["other_rows"] == before["other_rows"]
    assert after["other_entities"] == before["other_entities"], "no id of theirs was re-keyed"
    assert after["other_on_device"] == before["other_on_device"], "the shared device stays on their rows"
    registry = TableRegistry(spark_session, history.config)
    assert files_naming(registry, [*home["emails"], home["entity"]]) == []
