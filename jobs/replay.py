"""``lakehouse replay --plan P [--dry-run] [--purpose comparison]``: rebuild history under a new engine.

A dry run prints the exact scope and cost and writes nothing. Without it, the replay builds
the candidate beside serving, diffs and reconciles it, and stops at ``awaiting_approval``
(a correction) or ``compared`` (a comparison, which can never be published). Rerunning the
same plan against the same inputs resumes the same run instead of starting a second one.
Both engine versions' quality is reported side by side when the history has labelled truth
(``--truth PATH``, or the ``_ground_truth.json`` beside the ingested deliveries); without
it the report says "no ground truth".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome, add_engines_argument, add_policies_argument

if TYPE_CHECKING:
    from ledger.engines import EngineCatalog
    from workloads.replay.plan import CorrectionPlan

NAME = "replay"
HELP = "replay history under a correction plan: dry-run scope, or candidate + diff + reconciliation"


QUALITY_GATES = True
"""It validates with Great Expectations: GX is imported while the JVM starts."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--plan", type=Path, required=True, help="correction plan (conf/plans/*.yaml)")
    parser.add_argument("--dry-run", action="store_true", help="print the scope and cost; write nothing")
    parser.add_argument(
        "--purpose",
        choices=["correction", "comparison"],
        help="override the plan's purpose (comparison: diff only, never published)",
    )
    add_engines_argument(parser)
    parser.add_argument(
        "--rebuild",
        action="store_true",
        help="drop this run's candidate and build it again (a run whose pinned inputs maintenance "
        "removed: start a new run pinned at the current versions)",
    )
    parser.add_argument(
        "--truth",
        type=Path,
        help="labelled truth file to measure both versions against (default: the _ground_truth.json "
        "beside the ingested deliveries, if any)",
    )
    add_policies_argument(parser)


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_already_published, render_replay, render_scope
    from ledger.engines import load_engines
    from workloads.evaluation import load_truth
    from workloads.policies import load_protection_policy
    from workloads.replay import AlreadyPublished, run_replay, scope_or_published
    from workloads.replay.plan import Purpose, load_plan

    # every argument is checked before Spark starts: one line, exit 2
    plan = load_plan(args.plan)
    if args.purpose:
        plan = plan.with_purpose(Purpose(args.purpose))
    engines = load_engines(args.engines)
    check_plan_engines(args.plan, plan, engines)
    truth = load_truth(args.truth) if args.truth is not None else None
    policy = load_protection_policy(args.policies)
    ctx.require_lakehouse()
    if args.dry_run:
        ctx.progress(f"scoping plan {plan.plan} (dry run: nothing is written)")
        answer = scope_or_published(
            ctx.registry, plan, engines=engines, clock=ctx.clock, rebuild=args.rebuild
        )
        if isinstance(answer, AlreadyPublished):
            return Outcome(data=answer, lines=render_already_published(answer))
        return Outcome(data=answer, lines=render_scope(answer))
    ctx.progress(f"replaying plan {plan.plan} ({plan.purpose.value}): candidate, diff, reconciliation")
    outcome = run_replay(
        ctx.registry, plan, engines=engines, clock=ctx.clock, rebuild=args.rebuild, truth=truth, policy=policy
    )
    return Outcome(data=outcome, lines=render_replay(outcome))


def check_plan_engines(path: Path, plan: CorrectionPlan, engines: EngineCatalog) -> None:
    """The plan's engine change names two versions declared in the engines file (the replay
    resolves and fingerprints them again, with the resolver in force, once Spark runs)."""
    from lakehouse.errors import UnknownEngineError, UsageError

    change = plan.engine_change
    for key, version in (("from", change.from_version), ("to", change.to_version)):
        if not version.isdigit():
            raise UsageError(f"--plan {path}: engine_change.{key} {version!r} is not a version number")
        try:
            engines.resolve(change.engine, int(version))
        except UnknownEngineError as exc:
            raise UnknownEngineError(f"--plan {path}: engine_change.{key}: {exc}") from None


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
