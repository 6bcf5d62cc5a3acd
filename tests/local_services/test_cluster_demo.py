"""The cluster demo's own parts that need no cluster: the distributable, the cluster's
configuration, and reading what spark-submit printed and what an event log recorded.
``make cluster-demo`` (run by ``.ci/run``) is the end-to-end test on a real cluster."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from lakehouse.config import load_config
from local_services.cluster_demo import (
    build_py_files,
    json_documents,
    read_event_log,
    ring_member_email,
    subject_email,
    write_config,
)


def test_the_py_files_zip_holds_the_four_packages_and_is_the_same_twice(tmp_path: Path) -> None:
    first = build_py_files(tmp_path / "a.zip")
    second = build_py_files(tmp_path / "b.zip")
    assert first.read_bytes() == second.read_bytes()
    names = zipfile.ZipFile(first).namelist()
    assert {"lakehouse/session.py", "ledger/__init__.py", "workloads/vocabulary.py", "jobs/cli.py"} <= set(
        names
    )
    assert "lakehouse/log4j2.properties" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert {n.split("/")[0] for n in names} == {"lakehouse", "ledger", "workloads", "jobs"}


def test_the_cluster_configuration_is_the_shipped_one_with_its_work_dir_and_overrides(tmp_path: Path) -> None:
    conf = write_config(
        tmp_path / "cluster.yaml", tmp_path / "lake", {"iceberg.uri": "jdbc:postgresql://127.0.0.1:1/iceberg"}
    )
    config = load_config(conf, environ={})
    shipped = load_config(Path(__file__).resolve().parents[2] / "conf" / "lakehouse.yaml", environ={})
    assert config.workdir_path == (tmp_path / "lake").resolve()
    assert config.spark.shuffle_partitions == 2
    assert config.iceberg_uri == "jdbc:postgresql://127.0.0.1:1/iceberg"
    assert config.tables == shipped.tables


def test_json_documents_finds_the_result_and_the_error_among_spark_submits_lines() -> None:
    printed = "\n".join(
        [
            ":: loading settings :: file = /root/.cache/ivysettings.xml",
            json.dumps({"run_id": "silver-1", "rows": [1, 2]}, indent=2),
            "26/12/04 02:02:02 WARN Something: {not json}",
            '{"error": "the Spark master spark://127.0.0.1:9 is unreachable", "exit_code": 3}',
            "",
        ]
    )
    assert json_documents(printed) == [
        {"run_id": "silver-1", "rows": [1, 2]},
        {"error": "the Spark master spark://127.0.0.1:9 is unreachable", "exit_code": 3},
    ]
    assert json_documents("no json here\n") == []


def test_an_event_log_gives_executors_and_tasks_per_executor(tmp_path: Path) -> None:
    def task(executor: str, failed: bool = False) -> dict[str, object]:
        return {"Event": "SparkListenerTaskEnd", "Task Info": {"Executor ID": executor, "Failed": failed}}

    events = [
        {"Event": "SparkListenerExecutorAdded", "Executor ID": "0"},
        task("0"),
        task("0"),
        task("0", failed=True),
        {"Event": "SparkListenerExecutorRemoved", "Executor ID": "0", "Removed Reason": "worker lost"},
        {"Event": "SparkListenerExecutorAdded", "Executor ID": "1"},
        task("1"),
    ]
    log = tmp_path / "app-1"
    log.write_text("\n".join(json.dumps(e) for e in events) + '\n{"Event": "SparkListenerTaskEnd", "Ta')
    read = read_event_log(log)
    assert read == {
        "executors": ("0", "1"),
        "removed": ("0: worker lost",),
        "tasks": {"0": 2, "1": 1},
        "failed": 1,
    }
    assert read_event_log(tmp_path / "missing")["executors"] == ()


def test_the_two_erased_subjects_are_an_ordinary_customer_and_a_ring_member(tmp_path: Path) -> None:
    truth = {
        "persons": {
            "p1": {"emails": ["ann@example.org", "ann.2@example.org"]},
            "p2": {"emails": ["bob@example.org"]},
            "p3": {"emails": ["cy@example.org"]},
            "p4": {"emails": ["dee@example.org"]},
        },
        "rings": {"ring-2": ["p1"], "ring-1": ["p4", "p3"]},
    }
    (tmp_path / "_ground_truth.json").write_text(json.dumps(truth))
    assert subject_email(tmp_path) == "bob@example.org", "the first person outside every ring"
    assert ring_member_email(tmp_path) == "cy@example.org", "ring-1's first member, first address"
