"""``lakehouse calibration-at --at T``: which calibration was in force at T, and what it measured.

For auditors (W5): the release of the engine in force at T (a recalibrated release counts
from its replay's publication on), its calibrators and the MLflow model versions it pins,
the ``calibrate`` run whose fit it declares with that run's figures before and after, and
the latest measurement of the release recorded by T, flagged scopes included. Read from
the engine catalog and the ledger only; with ``--reader pyiceberg`` no JVM starts.

Named ``calibration`` until this release (still accepted, with a deprecation line): too close
to ``calibrate``, which measures and fits; this command only reads.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import (
    Context,
    EngineRelease,
    Outcome,
    add_engine_argument,
    add_engines_argument,
    resolve_release,
)

NAME = "calibration-at"
HELP = "which calibration of an engine was in force at time T, and what had been measured of it"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--at", required=True, metavar="T", help="ISO-8601 instant with a zone, e.g. 2026-11-29T12:00Z"
    )
    add_engine_argument(
        parser,
        "only NAME is taken here: which of its releases was in force at T is the answer "
        "(default: correlation)",
        name_alone="the version in force at T",
        default=EngineRelease("correlation"),
        metavar="NAME",
    )
    add_engines_argument(parser)
    parser.add_argument(
        "--reader",
        choices=["spark", "pyiceberg"],
        default="spark",
        help="spark (default) or pyiceberg: no JVM (pyiceberg for Iceberg, deltalake for Delta tables)",
    )


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_calibration_at
    from lakehouse.errors import UsageError
    from lakehouse.expressions import parse_instant
    from ledger.engines import load_engines
    from workloads.asof import PythonReader, Reader, SparkReader
    from workloads.ml.calibration_at import calibration_at

    at = parse_instant(args.at, what="--at")
    if args.engine.version is not None:
        raise UsageError(
            f"--engine {args.engine}: calibration-at answers which release of {args.engine.name} was in "
            f"force at T; give NAME alone (--engine {args.engine.name})"
        )
    catalog = load_engines(args.engines)
    resolve_release(catalog, args.engine, name_alone=True)  # undeclared: one line, exit 2, before any read
    ctx.require_lakehouse()
    reader: Reader = PythonReader(ctx.config) if args.reader == "pyiceberg" else SparkReader(ctx.registry)
    answer = calibration_at(catalog, reader.ledger_records(), at, engine=args.engine.name)
    return Outcome(data=answer, lines=render_calibration_at(answer))


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
