"""``lakehouse verify-publication RUN``: the check after publication (seed 000's ``rollback`` verdict).

Recounts a published replay independently against what readers see now
(:func:`workloads.replay.verify.verify_publication`) and records the verdict: exit 0 when
serving still holds what was published (``publish``), exit 4 with the failed check and the
first bad partition when it does not (``rollback``; the rollback itself is ``lakehouse
rollback RUN``).

Named ``verify`` until this release (still accepted, with a deprecation line): "verify" also
names ``ledger verify`` (the hash chain) and ``erase --verify`` (an erasure's certificate).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome, add_engines_argument
from lakehouse.errors import ExitCode

NAME = "verify-publication"
HELP = "check a published replay again against serving now (verdict publish or rollback)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN", help="the published replay run id (replay-...)")
    add_engines_argument(parser)


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from ledger.engines import load_engines
    from workloads.replay.verify import verify_publication
    from workloads.vocabulary import Verdict

    # Bad input is refused before Spark starts (ctx.registry starts it).
    engines = load_engines(args.engines)
    ctx.require_replay_run(args.run_id)
    result = verify_publication(ctx.registry, args.run_id, engines=engines, clock=ctx.clock)
    line = (
        f"run {result.run_id} on {result.table}@{result.serving_version}: verdict {result.verdict} "
        f"(failed check: {result.failed_check or 'none'}; first bad partition: "
        f"{result.first_bad_partition or '-'}); {result.check.detail}"
    )
    if result.verdict is Verdict.PUBLISH:
        return Outcome(data=result, lines=[line])
    error = (
        f"run {result.run_id}: serving disagrees with its publication ({result.failed_check}, first bad "
        f"partition {result.first_bad_partition}); roll it back: lakehouse rollback {result.run_id}"
    )
    return Outcome(data=result, lines=[line], exit_code=ExitCode.CHECK_FAILED, error=error)


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
