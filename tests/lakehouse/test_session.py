"""The driver JVM's stderr: its start-up lines reach the terminal only with ``--verbose``.

No JVM starts here: pyspark's launcher is replaced by a shell that writes what a JVM writes.
"""

from __future__ import annotations

import io
import logging
import subprocess
import threading
from typing import Any

import pytest

from lakehouse.session import forward_jvm_stderr, is_jvm_noise, launch_jvm

STARTUP = [
    "WARNING: Using incubator modules: jdk.incubator.vector",
    "WARNING: A terminally deprecated method in sun.misc.Unsafe has been called",
    "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties",
    'Setting default log level to "WARN".',
    "To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).",
    "26/12/05 04:25:19 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform",
    "04:25:19 WARN SparkSession: Using an existing Spark session",
    "04:25:19 INFO SparkContext: Running Spark version 4.1.4",
]
FOR_PEOPLE = [
    "04:25:19 ERROR Executor: Exception in task 0.0 in stage 1.0 (TID 1)",
    "Error: Could not find or load main class org.apache.spark.launcher.Main",
    'Exception in thread "main" java.lang.OutOfMemoryError: Java heap space',
]


@pytest.mark.parametrize("line", STARTUP)
def test_start_up_lines_and_log4j_below_error_are_noise(line: str) -> None:
    assert is_jvm_noise(line)


@pytest.mark.parametrize("line", FOR_PEOPLE)
def test_errors_are_not_noise(line: str) -> None:
    assert not is_jvm_noise(line)


def test_noise_goes_to_the_debug_log_and_the_rest_to_stderr(caplog: pytest.LogCaptureFixture) -> None:
    stream = io.BytesIO(
        b"WARNING: Using incubator modules: jdk.incubator.vector\n"
        b"04:25:19 WARN Foo: slow\n"
        b"\tat org.example.Foo.bar(Foo.java:1)\n"
        b"Caused by: java.io.IOException: x\n"
        b"04:25:20 ERROR Bar: broken\n"
        b"\tat org.example.Bar.baz(Bar.java:2)\n"
    )
    written: list[bytes] = []
    with caplog.at_level(logging.DEBUG, logger="lakehouse.session"):
        forward_jvm_stderr(stream, written.append)
    assert written == [b"04:25:20 ERROR Bar: broken\n", b"\tat org.example.Bar.baz(Bar.java:2)\n"]
    assert [r.getMessage() for r in caplog.records] == [
        "JVM: WARNING: Using incubator modules: jdk.incubator.vector",
        "JVM: 04:25:19 WARN Foo: slow",
        "JVM: \tat org.example.Foo.bar(Foo.java:1)",
        "JVM: Caused by: java.io.IOException: x",
    ]


def test_the_jvm_is_launched_with_its_stderr_through_the_filter(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """pyspark's launch_gateway gets the settings and a pipe for stderr; the JVM (a shell
    here) writes its banner and an error: only the error reaches stderr."""
    import pyspark.java_gateway
    from pyspark import SparkContext

    launched: dict[str, Any] = {}

    def fake_launch(conf: Any, popen_kwargs: dict[str, Any]) -> object:
        launched["conf"] = dict(conf.getAll())
        script = 'echo "WARNING: Using incubator modules: jdk.incubator.vector" >&2; echo "JVM error" >&2'
        subprocess.run(["sh", "-c", script], stderr=popen_kwargs["stderr"], check=True)
        return "gateway"

    initialized: list[object] = []
    monkeypatch.setattr(pyspark.java_gateway, "launch_gateway", fake_launch)
    monkeypatch.setattr(SparkContext, "_gateway", None)
    monkeypatch.setattr(SparkContext, "_ensure_initialized", lambda gateway: initialized.append(gateway))
    launch_jvm({"spark.master": "local[1]", "spark.driver.memory": "1g"})
    for thread in threading.enumerate():
        if thread.name == "jvm-stderr":
            thread.join(timeout=10)
    assert launched["conf"] == {"spark.master": "local[1]", "spark.driver.memory": "1g"}
    assert initialized == ["gateway"]
    assert capfd.readouterr().err == "JVM error\n"
