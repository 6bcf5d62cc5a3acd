"""Resolve the JVM packages once into a cache outside git, then run offline.

Spark's own resolver (Ivy, the same one ``spark-submit --packages`` uses on a cluster)
resolves the configured Maven coordinates once, in a child process, into
``jars.cache_dir``. The list of resolved jar files is written next to them; every later
session loads those files with ``spark.jars`` and never touches the network. ``lakehouse
jars`` (``make jars``) runs the resolution ahead of the first session.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from lakehouse.errors import EnvironmentProblem

SUPPORTED_JAVA = (17, 21)

log = logging.getLogger(__name__)

_RESOLVE_SCRIPT = r"""
import json, sys
from pathlib import Path
from pyspark.sql import SparkSession
packages, excludes, ivy, settings, out = sys.argv[1:6]
spark = (SparkSession.builder.master("local[1]").appName("lakehouse-jar-resolve")
         .config("spark.jars.packages", packages).config("spark.jars.excludes", excludes)
         .config("spark.jars.ivy", ivy).config("spark.jars.ivySettings", settings)
         .config("spark.ui.enabled", "false").getOrCreate())
jars = spark.sparkContext.getConf().get("spark.jars", "")
spark.stop()
Path(out).write_text(json.dumps([j for j in jars.split(",") if j]))
"""


# One repository only, so that a half-filled ~/.m2 (POMs without jars) cannot break resolution.
_IVY_SETTINGS = """<ivysettings>
  <settings defaultResolver="central"/>
  <caches defaultCacheDir="{cache}"/>
  <resolvers>
    <ibiblio name="central" m2compatible="true" root="{repository}"/>
  </resolvers>
</ivysettings>
"""


def manifest_path(cache_dir: Path, packages: Sequence[str], excludes: Sequence[str] = ()) -> Path:
    """Where the resolved jar list for exactly these coordinates is kept."""
    key = "\n".join(sorted(packages)) + "\n--\n" + "\n".join(sorted(excludes))
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_dir / f"resolved-{digest}.json"


def cached_jars(cache_dir: Path, packages: Sequence[str], excludes: Sequence[str] = ()) -> list[Path] | None:
    """The resolved jars, if they were resolved before and are all still on disk."""
    manifest = manifest_path(cache_dir, packages, excludes)
    if not manifest.is_file():
        return None
    jars = [Path(p) for p in json.loads(manifest.read_text())["jars"]]
    return jars if jars and all(j.is_file() for j in jars) else None


def resolve_jars(
    cache_dir: Path,
    packages: Sequence[str],
    excludes: Sequence[str] = (),
    repository: str = "https://repo1.maven.org/maven2/",
) -> list[Path]:
    """Return local jar files for ``packages``, resolving them first if needed."""
    cached = cached_jars(cache_dir, packages, excludes)
    if cached is not None:
        return cached
    check_java()
    log.debug("resolving %s from %s (once, into %s)", ", ".join(packages), repository, cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    settings = cache_dir / "ivysettings.xml"
    settings.write_text(_IVY_SETTINGS.format(cache=cache_dir / "cache", repository=repository))
    # the child writes the resolved list to a file: its stdout and stderr are Spark's and Ivy's
    resolved = cache_dir / f"resolving-{os.getpid()}.json"
    resolved.unlink(missing_ok=True)
    args = [",".join(packages), ",".join(excludes), str(cache_dir), str(settings), str(resolved)]
    proc = subprocess.run(
        [sys.executable, "-c", _RESOLVE_SCRIPT, *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0 or not resolved.is_file():
        raise EnvironmentProblem(_describe_resolution_failure(packages, proc.stderr))
    uris = json.loads(resolved.read_text())
    resolved.unlink()
    jars = [Path(uri.removeprefix("file://").removeprefix("file:")) for uri in uris]
    missing = [str(j) for j in jars if not j.is_file()]
    if missing:
        raise EnvironmentProblem(f"resolved jars are missing on disk: {', '.join(missing)}")
    manifest_path(cache_dir, packages, excludes).write_text(
        json.dumps({"packages": sorted(packages), "jars": [str(j) for j in jars]}, indent=2)
    )
    log.debug("resolved %d jars: %s", len(jars), ", ".join(j.name for j in jars))
    return jars


def _describe_resolution_failure(packages: Sequence[str], stderr: str) -> str:
    for coordinate in packages:
        group, artifact, _version = [*coordinate.split(":"), "", ""][:3]
        if f"{group}#{artifact}" in stderr and "not found" in stderr:
            return (
                f"cannot resolve JVM package {coordinate} from Maven Central; check the "
                f"coordinate in jars.packages and that the machine can reach the registry"
            )
    tail = " | ".join(line.strip() for line in stderr.strip().splitlines()[-3:])
    return f"cannot resolve JVM packages {', '.join(packages)}: {tail or 'no output'}"


def java_major_version(java: str) -> int | None:
    """The major version of the ``java`` executable, or None if it cannot be run."""
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    except OSError:
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', proc.stderr + proc.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def check_java() -> None:
    """Fail early, with the fix, if the JVM Spark would start is missing or unsupported."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if java is None:
        raise EnvironmentProblem(
            "Java is not installed: Spark 4.1 needs Java 17 or 21 (set JAVA_HOME or put java on PATH)"
        )
    major = java_major_version(java)
    if major not in SUPPORTED_JAVA:
        raise EnvironmentProblem(
            f"Spark 4.1 needs Java 17 or 21, found {major or 'an unreadable version'} at {java}; "
            f"set JAVA_HOME to a Java 17 or 21 installation"
        )
