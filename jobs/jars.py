"""``lakehouse jars``: resolve the configured JVM packages once into the jar cache (``make jars``)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome

NAME = "jars"
HELP = "resolve the JVM jars (Delta, Iceberg, SQLite or PostgreSQL JDBC) once into the cache outside git"


@dataclass(frozen=True)
class JarsReady:
    """The local jar files every later session loads, and where they are cached."""

    cache_dir: Path
    packages: tuple[str, ...]
    jars: tuple[Path, ...]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options beyond the common ones (``--conf`` names the packages and the cache)."""


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from lakehouse.jars import cached_jars, resolve_jars

    settings = ctx.config.jars
    packages = ctx.config.jar_packages
    cache = ctx.config.jar_cache_path
    if cached_jars(cache, packages, settings.excludes) is None:
        ctx.progress(f"resolving {len(packages)} JVM packages into {cache} (once)")
    jars = resolve_jars(cache, packages, settings.excludes, settings.repository)
    ready = JarsReady(cache_dir=cache, packages=packages, jars=tuple(jars))
    return Outcome(data=ready, lines=[f"{len(jars)} jars ready in {cache}"])


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
