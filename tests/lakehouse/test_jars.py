"""Environment problems name what is needed: the Java version, the jar coordinate."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from lakehouse.errors import EnvironmentProblem
from lakehouse.jars import _describe_resolution_failure, cached_jars, check_java, java_major_version


def fake_java(tmp_path: Path, version_line: str) -> Path:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return home


def test_old_java_is_refused_naming_the_needed_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = fake_java(tmp_path, 'openjdk version "11.0.2" 2019-01-15')
    monkeypatch.setenv("JAVA_HOME", str(home))
    assert java_major_version(str(home / "bin" / "java")) == 11
    with pytest.raises(EnvironmentProblem, match=r"Spark 4\.1 needs Java 17 or 21, found 11"):
        check_java()


def test_supported_java_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = fake_java(tmp_path, 'openjdk version "17.0.15" 2025-04-15')
    monkeypatch.setenv("JAVA_HOME", str(home))
    check_java()


def test_missing_java_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(EnvironmentProblem, match="Java 17 or 21"):
        check_java()


def test_unresolvable_jar_names_its_coordinate() -> None:
    stderr = "module not found: io.delta#delta-spark_4.1_2.13;4.4.1\n:: UNRESOLVED DEPENDENCIES ::"
    message = _describe_resolution_failure(["io.delta:delta-spark_4.1_2.13:4.4.1"], stderr)
    assert message.startswith(
        "cannot resolve JVM package io.delta:delta-spark_4.1_2.13:4.4.1 from Maven Central"
    )


def test_nothing_cached_means_resolution_is_needed(tmp_path: Path) -> None:
    assert cached_jars(tmp_path, ["g:a:1"]) is None
