"""``lakehouse submit-args``: the spark-submit arguments a cluster needs for the configured catalogs."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome
from lakehouse.session import submit_args

NAME = "submit-args"
HELP = "print the --packages and --conf arguments spark-submit needs on a cluster"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    arguments = submit_args(ctx.config)
    return Outcome(data={"args": arguments}, lines=[shlex.join(arguments)])


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
