"""``lakehouse demo``: the main job on the embedded default, start to finish."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome, table_lines

NAME = "demo"
HELP = "run the demo story on the embedded default (creates every zone and shows it)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=["delta", "iceberg"], help="force one format for every table")


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from workloads.demo import run_demo

    report = run_demo(ctx.registry, ctx.progress)
    lines = [
        f"lakehouse work dir: {ctx.config.workdir_path}",
        f"iceberg catalog '{ctx.config.iceberg.name}': {ctx.config.iceberg_uri}",
        "",
        "zones and tables:",
        *table_lines(report.tables, ["name", "zone", "format", "current_version", "location"]),
    ]
    return Outcome(data=report.to_dict(), lines=lines)


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
