"""The command line as a user meets it: help, one-line errors, JSON, spark-submit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
LAKEHOUSE = [sys.executable, "-m", "jobs"]


def run(*args: str, cwd: Path = REPO, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LAKEHOUSE, *args], cwd=cwd, capture_output=True, text=True, env=env, check=False, timeout=600
    )


def test_help_lists_the_commands() -> None:
    result = run("--help")
    assert result.returncode == 0
    for command in ("demo", "tables", "submit-args", "replay", "approve", "ack", "publish", "rollback"):
        assert command in result.stdout
    for command in (
        "engines",
        "asof",
        "ledger",
        "reindex",
        "reconcile",
        "protect",
        "maintain",
        "progress",
        "erase",
        "hold",
        "extract",
    ):
        assert command in result.stdout


def test_engines_list_checks_every_fingerprint_without_spark(tmp_path: Path) -> None:
    result = run("engines", "list", "--json")
    assert result.returncode == 0, result.stderr
    listed = {e["engine"]: e["code"] for e in json.loads(result.stdout)["engines"]}
    assert listed == {
        "entity_resolution@1": "ok",
        "entity_resolution@2": "ok",
        "entity_resolution@3": "ok",
        "correlation@1": "ok",
        "correlation@2": "ok",
        "entity_daily@1": "ok",
        "baselines@1": "ok",
    }
    assert "starting Spark" not in result.stderr

    shipped = (REPO / "conf" / "engines.yaml").read_text(encoding="utf-8")
    first = shipped.index("\n    code_fingerprint: ") + len("\n    code_fingerprint: ")
    tampered = tmp_path / "engines.yaml"
    tampered.write_text(shipped[:first] + "ab" * 32 + shipped[first + 64 :], encoding="utf-8")
    result = run("engines", "list", "--engines", str(tampered), "--json")
    assert result.returncode == 1
    codes = {e["engine"]: e["code"] for e in json.loads(result.stdout)["engines"]}
    assert [engine for engine, code in codes.items() if code != "ok"] == ["entity_resolution@1"]
    assert codes["entity_resolution@1"].startswith("CHANGED")


def test_an_invalid_plan_is_refused_with_the_key_before_spark_starts(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    shipped = (REPO / "conf" / "plans" / "er-v2-recorrelation.yaml").read_text(encoding="utf-8")
    plan.write_text(shipped.replace("rollback_window_days: 30", "rollback_window_dayz: 30"), encoding="utf-8")
    result = run("replay", "--plan", str(plan), "--dry-run")
    assert result.returncode == 2
    assert result.stderr.startswith("error: ")
    assert result.stderr.count("\n") == 1, result.stderr
    assert "rollback_window_dayz" in result.stderr
    assert "starting Spark" not in result.stderr


def test_reconcile_refuses_different_key_types_before_spark_starts(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run(
        "reconcile", "silver.events", "gold.training_sets", "--key", "label", "--workdir", str(tmp_path)
    )
    assert result.returncode == 2, result.stderr
    assert "key types differ" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert time.monotonic() - started < 60, "no JVM was started"
    assert not (tmp_path / "warehouse").exists()


def test_reindex_refuses_a_bucket_count_below_one_before_spark_starts() -> None:
    result = run("reindex", "--buckets", "0")
    assert result.returncode == 2
    assert result.stderr.startswith("error: ")
    assert result.stderr.count("\n") == 1, result.stderr
    assert "--buckets must be at least 1" in result.stderr
    assert "starting Spark" not in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("verify", "not-a-run"), "RUN 'not-a-run' is not a replay run id"),
        (("verify", "replay-0123456789abcdef", "--engines", "missing-engines.yaml"), "missing-engines.yaml"),
    ],
    ids=["run-id", "engines-file"],
)
def test_verify_refuses_bad_input_before_spark_starts(args: tuple[str, ...], message: str) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert result.stderr.startswith("error: ")
    assert result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr
    assert "starting Spark" not in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("erase", "--subject-email", "a@example.org", "--dry-run"),
        ("hold", "list"),
        ("hold", "add", "LH-1", "--subject-email", "a@example.org", "--by", "counsel", "--reason", "case"),
        ("maintain", "--dry-run"),
        ("extract", "gold.correlations", "--at", "2026-11-29T12:00:00Z", "--out", "x"),
    ],
    ids=["erase", "hold-list", "hold-add", "maintain", "extract"],
)
def test_a_work_dir_without_a_lakehouse_says_how_to_make_one_before_spark_starts(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    result = run(*args, "--workdir", str(tmp_path / "empty"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "no lakehouse in" in result.stderr
    assert "lakehouse demo, or generate + ingest + build" in result.stderr
    assert "starting Spark" not in result.stderr
    assert not (tmp_path / "empty" / "warehouse").exists(), "nothing was created"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda text: text.replace("  owner: data-platform", "  owner: ''"), "maintenance.owner"),
        (lambda text: text.replace("  silver_days: 2555", "  silver_days: -1"), "retention.silver_days"),
        (
            lambda text: text.replace("compact_min_small_files: 8", "compact_min_small_files: many"),
            "compact_min",
        ),
    ],
    ids=["owner", "retention", "threshold"],
)
def test_maintain_refuses_a_bad_policy_naming_the_key_before_spark_starts(
    tmp_path: Path, edit: Any, message: str
) -> None:
    policies = tmp_path / "policies.yaml"
    shipped = (REPO / "conf" / "policies.yaml").read_text(encoding="utf-8")
    policies.write_text(edit(shipped), encoding="utf-8")
    assert policies.read_text(encoding="utf-8") != shipped
    result = run("maintain", "--policies", str(policies), "--workdir", str(tmp_path / "empty"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr
    assert str(policies) in result.stderr
    assert "starting Spark" not in result.stderr


def test_missing_config_is_one_line_and_nonzero(tmp_path: Path) -> None:
    result = run("tables", "--conf", str(tmp_path / "missing.yaml"))
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "missing.yaml: configuration file not found" in result.stderr


def test_bad_key_in_config_is_one_line_naming_the_key(tmp_path: Path) -> None:
    conf = tmp_path / "bad.yaml"
    conf.write_text("sparkk: {}\n")
    result = run("demo", "--conf", str(conf))
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: {conf}: unknown key 'sparkk'; remove it or check its spelling"


def test_submit_args_json_names_packages_and_catalogs() -> None:
    result = run("submit-args", "--json")
    assert result.returncode == 0, result.stderr
    args = json.loads(result.stdout)["args"]
    packages = args[args.index("--packages") + 1]
    assert "io.delta:delta-spark_4.1_2.13" in packages
    assert "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13" in packages
    confs = [args[i + 1] for i, a in enumerate(args) if a == "--conf"]
    assert "spark.sql.catalog.lake=org.apache.iceberg.spark.SparkCatalog" in confs
    assert "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog" in confs


SECRET = "n0t-shown-7f3a"


def catalog_env(uri: str, password: str = SECRET) -> dict[str, str]:
    """The environment of a user whose Iceberg catalog is JDBC on PostgreSQL."""
    return {
        **os.environ,
        "LAKEHOUSE__ICEBERG__URI": uri,
        "LAKEHOUSE__ICEBERG__USER": "iceberg",
        "LAKEHOUSE__ICEBERG__PASSWORD": password,
    }


def test_a_catalog_server_that_is_down_is_one_line_exit_3_and_nothing_written(tmp_path: Path) -> None:
    """PostgreSQL down: ``ingest`` would write Bronze (Delta, no catalog needed) before the ledger
    (Iceberg): the command stops before Spark starts, so neither a Bronze table nor a ledger
    entry nor the work dir itself exists afterwards."""
    from local_services.ports import free_port

    deliveries = tmp_path / "history"
    made = run("generate", "--out", str(deliveries), "--entities", "3", "--months", "1", "--quiet")
    assert made.returncode == 0, made.stderr
    assert any((deliveries / "orders").iterdir())
    uri = f"jdbc:postgresql://127.0.0.1:{free_port()}/iceberg"  # nothing listens, as after a server stops
    workdir = tmp_path / "lake"
    for args in (
        ("ingest", "--feed", "orders", "--source", str(deliveries)),
        ("build", "silver"),
    ):
        result = run(
            *args, "--workdir", str(workdir), "--quiet", env=catalog_env(uri + f"?password={SECRET}")
        )
        assert result.returncode == 3, (args, result.stderr)
        assert result.stderr.count("\n") == 1, result.stderr
        assert result.stderr.startswith(f"error: Iceberg catalog 'lake' at {uri}?password=*** is unreachable")
        assert "Connection refused" in result.stderr
        assert SECRET not in result.stderr + result.stdout
        assert not workdir.exists(), f"{args[0]} wrote {sorted(workdir.rglob('*'))}"


def test_a_refused_catalog_password_is_exit_3_naming_the_uri_not_the_password(
    tmp_path: Path, postgres_server: Any
) -> None:
    result = run(
        "tables", "--workdir", str(tmp_path / "lake"), "--json", env=catalog_env(postgres_server.jdbc_uri)
    )
    assert result.returncode == 3, result.stderr
    error = json.loads(result.stderr.strip())
    assert error["exit_code"] == 3
    assert postgres_server.jdbc_uri in error["error"]
    assert 'password authentication failed for user "iceberg"' in error["error"]
    assert SECRET not in result.stderr
    assert postgres_server.password not in result.stderr
    assert not (tmp_path / "lake").exists()


def test_submit_args_for_a_postgresql_catalog_add_its_driver_and_never_the_password() -> None:
    result = run("submit-args", "--json", env=catalog_env("jdbc:postgresql://catalog-db:5432/iceberg"))
    assert result.returncode == 0, result.stderr
    args = json.loads(result.stdout)["args"]
    assert any(
        p.startswith("org.postgresql:postgresql:") for p in args[args.index("--packages") + 1].split(",")
    )
    assert "spark.sql.catalog.lake.uri=jdbc:postgresql://catalog-db:5432/iceberg" in args
    assert "spark.sql.catalog.lake.jdbc.user=iceberg" in args
    assert SECRET not in result.stdout
    assert "password" not in result.stdout


@pytest.mark.slow
@pytest.mark.spark
def test_a_job_runs_under_spark_submit_with_the_cli_arguments(tmp_path: Path) -> None:
    """`spark-submit jobs/tables.py ...` behaves like `lakehouse tables ...`."""
    submit = Path(sys.executable).with_name("spark-submit")
    args = json.loads(run("submit-args", "--json", "--workdir", str(tmp_path)).stdout)["args"]
    # The packages are already in the local cache; pass them as jars so no network is needed.
    from lakehouse.config import load_config
    from lakehouse.jars import cached_jars

    config = load_config(REPO / "conf" / "lakehouse.yaml", environ={})
    jars = cached_jars(config.jar_cache_path, config.jars.packages, config.jars.excludes)
    assert jars, "run `make jars` first"
    confs = [a for i, a in enumerate(args) if i > 0 and args[i - 1] == "--conf"]
    command = [str(submit), "--master", "local[1]", "--jars", ",".join(map(str, jars))]
    for conf in confs:
        command += ["--conf", conf]
    command += ["jobs/tables.py", "--json", "--workdir", str(tmp_path)]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    result = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, env=env, timeout=600, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    tables = json.loads(result.stdout)["tables"]
    assert {t["name"] for t in tables} >= {"bronze.orders", "silver.events", "gold.correlations"}
    assert all(t["exists"] is False for t in tables)


def _unused_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_master_is_one_line_naming_it_and_exit_3_before_spark_starts(tmp_path: Path) -> None:
    url = f"spark://127.0.0.1:{_unused_port()}"
    env = {**os.environ, "LAKEHOUSE__SPARK__MASTER": url}
    result = run("tables", "--json", "--workdir", str(tmp_path), env=env)
    assert result.returncode == 3, result.stderr
    (line,) = result.stderr.strip().splitlines()
    error = json.loads(line)
    assert error["exit_code"] == 3
    assert error["error"].startswith(f"the Spark master {url} is unreachable ("), error
