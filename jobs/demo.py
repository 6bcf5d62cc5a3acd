"""``lakehouse demo``: the main job on the embedded default, start to finish."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome, table_lines

NAME = "demo"
HELP = "run the demo story on the embedded default: history -> Bronze -> Silver -> Gold"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=["delta", "iceberg"], help="force one format for every table")
    parser.add_argument("--entities", type=int, default=200, help="persons in the generated history")
    parser.add_argument("--months", type=int, default=6, help="months of generated history")


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from lakehouse.quality import gate
    from workloads.demo import DemoSettings, run_demo

    settings = DemoSettings(entities=args.entities, months=args.months)
    report = run_demo(
        ctx.registry,
        ctx.ledger,
        ctx.clock,
        ctx.config.workdir_path,
        ctx.progress,
        settings=settings,
        gate=gate,
    )
    return Outcome(data=report.to_dict(), lines=_lines(ctx, report.to_dict()))


def _lines(ctx: Context, report: dict[str, Any]) -> list[str]:
    medallion = report["chapters"]["medallion"]
    lines = [
        f"lakehouse work dir: {ctx.config.workdir_path}",
        f"iceberg catalog '{ctx.config.iceberg.name}': {ctx.config.iceberg_uri}",
        "",
        "zones and tables:",
        *table_lines(report["tables"], ["name", "zone", "format", "rows", "current_version"]),
        "",
        "quarantine (feed:reason -> rows):",
        *[f"  {reason:<40} {n}" for reason, n in medallion["quarantine_reasons"].items()],
        "",
        f"exceptions awaiting approval (first {len(medallion['exceptions_awaiting_approval'])}):",
        *table_lines(medallion["exceptions_awaiting_approval"], ["event_id", "domain", "period", "status"]),
        "",
        "top correlations:",
        *table_lines(
            medallion["top_correlations"],
            ["correlation_type", "entity_a", "entity_b", "confidence", "engine"],
        ),
    ]
    return lines


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
