"""``lakehouse calibrate --engine NAME@VERSION``: a release's confidence against later outcomes (W5).

Per scope (correlation type): reliability diagram, Brier, ECE (equal-width and equal-mass
bins), log loss and per-bin counts with Wilson intervals; a flag where the ECE passes its
threshold; a calibrator (isotonic or Platt) fitted and registered in MLflow where there are
enough outcomes. Stored in ``gold.calibration_reports`` and the ledger.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from datetime import UTC, date, datetime
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import (
    Context,
    Outcome,
    add_engine_argument,
    add_engines_argument,
    add_policies_argument,
    add_renamed_argument,
    resolve_release,
)

NAME = "calibrate"
HELP = "measure an engine release's confidence against later outcomes per scope; fit and register calibrators"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_engine_argument(parser, "the declared release whose decisions to judge", required=True)
    parser.add_argument("--scope", help="one correlation type only (default: every type, each its own scope)")
    add_renamed_argument(
        parser, "--since", "--from", dest="since", type=date.fromisoformat, help="first valid_from date"
    )
    parser.add_argument("--until", type=date.fromisoformat, help="valid_from date to stop before")
    add_renamed_argument(
        parser,
        "--at",
        "--as-of",
        dest="as_of",
        metavar="T",
        help="what the lake knew at this instant (ISO-8601 with a zone; default: now)",
    )
    parser.add_argument(
        "--label-horizon",
        dest="label_horizon",
        help="how long after valid_from an outcome still counts, e.g. 90d (default: the policy's)",
    )
    add_engines_argument(parser)
    parser.add_argument(
        "--declare",
        action="store_true",
        help="declare the next correlation release with the registered calibrators (model versions "
        "pinned) in --engines, and write the plan that replays history under it",
    )
    parser.add_argument(
        "--effective-from",
        dest="effective_from",
        type=date.fromisoformat,
        help="--declare: the date the recalibrated release takes effect (default: today; after every "
        "declared version of the engine)",
    )
    parser.add_argument(
        "--plan-template",
        type=Path,
        default=Path("conf/plans/correlation-v2-rescoring.yaml"),
        help="--declare: the plan whose answer, checks and publication rules the replay plan takes",
    )
    add_policies_argument(parser)


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from lakehouse.errors import UsageError
    from lakehouse.expressions import parse_instant
    from ledger.engines import load_engines
    from workloads.engines.correlation import ASSETS
    from workloads.ml.calibrate import check_declarable
    from workloads.ml.point_in_time import label_horizon_days
    from workloads.ml.tracking import check_reachable, tracking_for
    from workloads.policies import load_calibration_policy

    catalog = load_engines(args.engines)
    spec = resolve_release(catalog, args.engine)
    decided = "gold.correlations"
    if not any(p.split(":")[0] == decided for p in spec.produces):
        raise UsageError(
            f"--engine {spec.ref} produces {', '.join(spec.produces) or 'nothing'}, not {decided}"
        )
    effective = args.effective_from or datetime.now(UTC).date()
    if args.declare:
        check_declarable(catalog, spec, effective)
        if not args.plan_template.is_file():
            raise UsageError(f"--plan-template {args.plan_template}: no such file")
    if args.scope is not None and args.scope not in ASSETS:
        raise UsageError(
            f"--scope {args.scope!r} is not a correlation type; known: {', '.join(sorted(ASSETS))}"
        )
    policy = load_calibration_policy(args.policies)
    horizon = label_horizon_days(args.label_horizon) if args.label_horizon else policy.label_horizon_days
    now = datetime.now(UTC)
    as_of = parse_instant(args.as_of, what="--at") if args.as_of else None
    if as_of is not None and as_of > now:
        raise UsageError(f"--at {args.as_of} is in the future (now {now.isoformat(timespec='seconds')})")
    if args.since and args.until and args.since >= args.until:
        raise UsageError(f"--since {args.since} must be before --until {args.until}")
    check_reachable(tracking_for(ctx.config))
    ctx.require_lakehouse()

    from workloads.ml.calibrate import calibrate
    from workloads.ml.tracking import open_tracking

    tracking = open_tracking(ctx.config)
    result = calibrate(
        ctx.registry,
        ctx.ledger,
        ctx.clock,
        tracking,
        spec.ref,
        policy,
        figures=ctx.config.workdir_path / "calibration",
        as_of=as_of,
        horizon_days=horizon,
        scope=args.scope,
        since=args.since,
        until=args.until,
        progress=ctx.progress,
    )
    lines: list[str] = [
        f"calibration {result.run_id} of {result.engine} as known at {result.as_of.isoformat()} "
        f"(outcomes within {result.label_horizon_days} days), MLflow run {result.mlflow_run_id}",
    ]
    for s in result.scopes:
        flag = (
            f"FLAGGED: ECE above {s.ece_threshold}"
            if s.flagged
            else f"within ECE threshold {s.ece_threshold}"
        )
        lines.append(
            f"{s.scope}: {s.decisions} decisions ({s.positives} confirmed, {s.censored} still open); "
            f"Brier {s.before.brier:.4f}, ECE {s.before.ece_uniform:.4f} "
            f"(equal-mass {s.before.ece_quantile:.4f}), log loss {s.before.log_loss:.4f}: {flag}"
        )
        if s.after is not None and s.calibrator is not None:
            lines.append(
                f"  calibrator {s.calibrator['method']} registered as {s.calibrator['model']} "
                f"version {s.calibrator['model_version']}: Brier {s.after.brier:.4f}, "
                f"ECE {s.after.ece_uniform:.4f} (out-of-fold)"
            )
        else:
            lines.append(f"  no calibrator: {s.refused}")
        lines.append(f"  reliability diagram: {s.figure}")
    lines.append(f"report: {result.reports_table}@{result.reports_version}")
    if not args.declare:
        return Outcome(data=result, lines=lines)

    from workloads.ml.calibrate import declare_recalibration

    declared, entry = declare_recalibration(
        args.engines,
        spec,
        result,
        effective_from=effective,
        template=args.plan_template,
        plans=ctx.config.workdir_path / "plans",
    )
    ctx.ledger.writer.append(entry)
    lines += [
        f"declared {declared.engine} in {args.engines}: {declared.base} with the calibrators "
        + ", ".join(f"{name} v{version}" for name, version in sorted(declared.model_versions.items())),
        f"replay history under it: lakehouse replay --plan {declared.plan_path}",
    ]
    return Outcome(data=replace(result, declared=declared), lines=lines)


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
