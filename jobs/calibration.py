"""``lakehouse calibration --at T``: which calibration was in force at T, and what it measured.

For auditors (W5): the release of the engine in force at T (a recalibrated release counts
from its replay's publication on), its calibrators and the MLflow model versions it pins,
the ``calibrate`` run whose fit it declares with that run's figures before and after, and
the latest measurement of the release recorded by T, flagged scopes included. Read from
the engine catalog and the ledger only; with ``--reader pyiceberg`` no JVM starts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome, add_engines_argument

NAME = "calibration"
HELP = "which calibration of an engine was in force at time T, and what had been measured of it"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--at", required=True, help="ISO-8601 instant with a zone, e.g. 2026-11-29T12:00Z")
    parser.add_argument("--engine", default="correlation", help="the engine's name (default: correlation)")
    add_engines_argument(parser)
    parser.add_argument(
        "--reader",
        choices=["spark", "pyiceberg"],
        default="spark",
        help="spark (default) or pyiceberg: no JVM (pyiceberg for Iceberg, deltalake for Delta tables)",
    )


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_calibration_at
    from lakehouse.expressions import parse_instant
    from ledger.engines import load_engines
    from workloads.asof import PythonReader, Reader, SparkReader
    from workloads.ml.calibration_at import calibration_at

    at = parse_instant(args.at, what="--at")
    catalog = load_engines(args.engines)
    catalog.resolve(args.engine)  # an undeclared engine: one line, exit 2, before any read
    reader: Reader = PythonReader(ctx.config) if args.reader == "pyiceberg" else SparkReader(ctx.registry)
    answer = calibration_at(catalog, reader.ledger_records(), at, engine=args.engine)
    return Outcome(data=answer, lines=render_calibration_at(answer))


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
