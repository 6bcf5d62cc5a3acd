"""``lakehouse generate``: write a seeded, faulty commerce-risk history as partner deliveries."""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome
from lakehouse.errors import UsageError

NAME = "generate"
HELP = "generate a seeded history of raw deliveries (orders, refunds, logins, settlements, outcomes)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, help="output folder, new or empty (default: <workdir>/history)")
    parser.add_argument("--entities", type=int, default=200, help="true persons (default 200)")
    parser.add_argument("--months", type=int, default=6, help="months of history (default 6)")
    parser.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    parser.add_argument("--start", type=date.fromisoformat, default=date(2025, 1, 1), help="first day")


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from workloads.silver.lateness import load_lateness_policy
    from workloads.synthetic.generator import GeneratorSettings, generate

    out = args.out or ctx.config.workdir_path / "history"
    try:
        settings = GeneratorSettings(
            entities=args.entities, months=args.months, seed=args.seed, start=args.start
        )
        summary = generate(out, settings, ctx.progress, policy=load_lateness_policy())
    except (ValueError, FileExistsError) as exc:
        raise UsageError(f"generate: {exc}") from None
    return Outcome(data=summary, lines=summary.describe().splitlines())


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
