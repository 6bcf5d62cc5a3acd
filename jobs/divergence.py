"""``lakehouse divergence``: streaming precision and recall against batch, per scope and release.

Shows the newest reconciliation's rows of ``ops.stream_divergence`` (outcome counts,
precision, recall, the scope's declared threshold). A scope whose streaming precision fell
below its threshold (``streaming:`` in ``conf/policies.yaml``) is named and makes the exit
code 4 (a check failed), as a stalled feed does for ``progress``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome
from lakehouse.errors import ExitCode

NAME = "divergence"
HELP = (
    "streaming vs batch: precision and recall per scope and release; exit 4 when a scope is below threshold"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # the common flags only


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    del args
    from jobs.render import render_divergence
    from workloads.streaming import read_divergence

    ctx.require_lakehouse()
    view = read_divergence(ctx.registry)
    return Outcome(
        data=view,
        lines=render_divergence(view),
        exit_code=ExitCode.CHECK_FAILED if view.flagged else ExitCode.DONE,
    )


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
