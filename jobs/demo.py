"""``lakehouse demo``: the main job on the embedded default, start to finish."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Block, Context, Outcome, TableView, positive_int
from jobs.output import plain
from lakehouse.catalog import redact_uri

if TYPE_CHECKING:
    from workloads.synthetic import demo
    from workloads.synthetic.demo import DemoReport

NAME = "demo"
HELP = (
    "run the demo story on the embedded default: history -> Bronze -> Silver -> Gold, "
    "then the ER v3 restatement (replay with both versions' quality, approve, publish, rollback, re-publish) "
    "and the correlation v2 re-scoring (published once correlation@2 is in effect, compared before), "
    "then the ML path (a point-in-time training set, the fraud model, calibration against later outcomes, "
    "the serving release recalibrated and published) "
    "and a data subject's erasure (dry run, erase, certificate, verify again, asof)"
)
QUALITY_GATES = True
"""It validates with Great Expectations: GX is imported while the JVM starts."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--entities", type=positive_int, default=200, help="persons in the generated history (default 200)"
    )
    parser.add_argument(
        "--months", type=positive_int, default=6, help="months of generated history (default 6)"
    )
    parser.add_argument(
        "--no-restate",
        action="store_true",
        help="stop after Gold (skip the ER v3 restatement and the correlation v2 re-scoring)",
    )


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from workloads.gold.quality import medallion_gate as gate
    from workloads.synthetic.demo import DemoSettings, run_demo

    settings = DemoSettings(entities=args.entities, months=args.months, restate=not args.no_restate)
    report = run_demo(
        ctx.registry,
        ctx.ledger,
        ctx.clock,
        ctx.config.workdir_path,
        ctx.progress,
        settings=settings,
        gate=gate,
    )
    return Outcome(data=report, lines=render_demo(ctx, report))


HIGH_IMPACT_SHOWN = 5
"""High-impact changes the demo lists (all are in the review file)."""


def render_demo(ctx: Context, report: DemoReport) -> list[Block]:
    """Where the demo wrote, every table, what the medallion holds, then the restatement."""
    from jobs.render import render_divergence, render_stream

    medallion = report.chapters.medallion
    exceptions = medallion.exceptions_awaiting_approval
    lines: list[Block] = [
        f"lakehouse work dir: {ctx.config.workdir_path}",
        f"iceberg catalog '{ctx.config.iceberg.name}': {redact_uri(ctx.config.iceberg_uri)}",
        "",
        "zones and tables:",
        TableView([plain(t) for t in report.tables], ["name", "zone", "format", "rows", "current_version"]),
        "",
        "quarantine (feed:reason -> rows):",
        *[f"  {reason:<40} {n}" for reason, n in medallion.quarantine_reasons.items()],
        "",
        f"exceptions awaiting approval (first {len(exceptions)}):",
        TableView(exceptions, ["event_id", "domain", "period", "status"]),
        "",
        "top correlations:",
        TableView(
            medallion.top_correlations,
            ["correlation_type", "entity_a", "entity_b", "confidence", "engine"],
        ),
    ]
    if medallion.stalled_feed is not None:
        lines += _stalled_feed(medallion.stalled_feed)
    if medallion.stream is not None:
        lines += [
            "",
            "the stream (provisional view), before the batch builds:",
            *render_stream(medallion.stream),
        ]
    if medallion.divergence is not None:
        lines += ["", "batch reconciled the provisional rows:", *render_divergence(medallion.divergence)]
    drift = report.chapters.drift
    if drift is not None:
        lines += _drift(drift)
    restated = report.chapters.restatement
    if restated is not None:
        lines += _restatement(restated)
    rescored = report.chapters.rescoring
    if rescored is not None:
        lines += _rescoring(rescored)
    grouped = report.chapters.communities
    if grouped is not None:
        from jobs.render import indented, render_communities

        lines += ["", "communities of the correlation graph:", *indented(render_communities(grouped))]
    learnt = report.chapters.machine_learning
    if learnt is not None:
        lines += _machine_learning(learnt)
    erased = report.chapters.erasure
    if erased is not None:
        lines += _erasure(erased)
    return lines


def _stalled_feed(stall: demo.StalledFeed) -> list[Block]:
    from jobs.render import render_progress

    held = stall.held
    last = held.last_delivered.isoformat() if held.last_delivered else "never"
    return [
        "",
        f"a feed stops delivering: the last {len(held.deliveries)} deliveries of {held.feed} held back "
        f"({', '.join(held.deliveries)}; its last delivery {last}):",
        *render_progress(stall.stalled),
        "",
        f"they arrive late: {stall.late.rows_written} rows ingested from "
        f"{len(stall.late.ingested)} deliveries; progress at the same instant:",
        *render_progress(stall.resumed),
    ]


def _drift(drift: demo.DriftRepair) -> list[Block]:
    from jobs.render import render_reconcile

    planted = ", ".join(f"{kind} {key}" for kind, key in drift.planted.items())
    return [
        "",
        f"a drift between Bronze and Silver, planted by hand in silver.events ({planted}):",
        *render_reconcile(drift.repair),
        "",
        "reconcile again:",
        *render_reconcile(drift.recheck),
    ]


def _machine_learning(learnt: demo.MachineLearning) -> list[Block]:
    """The ML chapter: the training set, the model against its references, each release's
    calibration, the recalibration."""
    from jobs.render import render_model_measures

    built = learnt.training_set
    lines: list[Block] = [
        "",
        f"for ML teams (W4, W5): training set {built.training_set_id} as known at {built.as_of.isoformat()}: "
        f"{built.rows} decision points ({built.positives} with an outcome within {built.label_horizon_days} "
        f"days, {built.censored} censored), {built.table}@{built.version}",
    ]
    if learnt.model is not None:
        model = learnt.model
        lines.append(
            f"model {model.model_name} v{model.model_version}: "
            + render_model_measures(model.metrics, model.better_than_references)
        )
    else:
        lines.append(f"model not trained: {learnt.model_refused}")
    rows: list[dict[str, Any]] = []
    for calibration in learnt.calibrations:
        for s in calibration.scopes:
            rows.append(
                {
                    "release": calibration.engine,
                    "scope": s.scope,
                    "decisions": s.decisions,
                    "confirmed": s.positives,
                    "brier": f"{s.before.brier:.4f}",
                    "ece": f"{s.before.ece_uniform:.4f}",
                    "flagged": "yes" if s.flagged else "no",
                    "calibrated brier": f"{s.after.brier:.4f}" if s.after else "-",
                    "calibrated ece": f"{s.after.ece_uniform:.4f}" if s.after else "-",
                    "calibrator": (
                        f"{s.calibrator['model']} v{s.calibrator['model_version']} ({s.calibrator['method']})"
                        if s.calibrator
                        else "refused"
                    ),
                }
            )
    columns = ["release", "scope", "decisions", "confirmed", "brier", "ece", "flagged"]
    columns += ["calibrated brier", "calibrated ece", "calibrator"]
    lines += ["", "calibration against later outcomes (ECE on equal-width bins; after = out-of-fold):"]
    lines.append(TableView(rows, columns))
    for calibration in learnt.calibrations:
        for s in calibration.scopes:
            if s.refused:
                lines.append(f"  {calibration.engine} {s.scope}: {s.refused}")
            lines.append(f"  reliability diagram {calibration.engine} {s.scope}: {s.figure}")
    for release, why in learnt.not_calibrated.items():
        lines.append(f"  {release} not calibrated: {why}")
    if learnt.scoring is not None:
        lines += _scoring(learnt.scoring)
    if learnt.recalibration is not None:
        lines += _recalibration(learnt.recalibration)
    lines.append(f"MLflow UI: {learnt.mlflow_ui}")
    return lines


def _scoring(scored: demo.Scored) -> list[Block]:
    """The model as a scoring release, and the decisions scored (or rescored) under it."""
    from jobs.render import render_model_measures

    run = scored.run
    verb = "declared" if scored.declared else "in force"
    lines: list[Block] = [
        f"scoring: {scored.engine} {verb} ({scored.model} v{scored.model_version} pinned); "
        f"{run.scored} decisions scored, run {run.run_id}: {run.inserted} inserted, {run.rescored} "
        f"rescored (earlier scores superseded), {run.unchanged} unchanged"
    ]
    if run.measures is not None:
        measured = render_model_measures(run.measures, run.measures.better_than_references())
        lines.append(f"  on the later decisions: {measured}")
    if scored.waiting:
        lines.append(f"  {scored.waiting}")
    return lines


def _recalibration(recalibrated: demo.Recalibrated) -> list[Block]:
    """The serving release recalibrated: the declared release, its replay and publication."""
    from jobs.render import indented, render_publication, render_replay

    lines: list[Block] = [""]
    declared = recalibrated.declared
    if declared is not None:
        models = ", ".join(f"{name} v{version}" for name, version in sorted(declared.model_versions.items()))
        lines.append(
            f"recalibration: {declared.engine} declared as {declared.base} with the calibrators {models}; "
            f"plan {declared.plan_path}"
        )
    if recalibrated.replay is not None:
        replayed = render_replay(recalibrated.replay, high_impact_shown=HIGH_IMPACT_SHOWN)
        lines += ["replay:", *indented(replayed)]
    if recalibrated.publication is not None:
        lines += ["", "publication:", *indented(render_publication(recalibrated.publication))]
    if recalibrated.example:
        lines += _example(recalibrated.example)
    if recalibrated.waiting is not None:
        lines.append(f"recalibration of {recalibrated.serving}: {recalibrated.waiting}")
    return lines


def _erasure(erased: demo.Erasure) -> list[Block]:
    """The erasure chapter: the dry run, the certificate, the check again, asof before it."""
    from jobs.render import render_asof, render_certificate, render_erasure, render_erasure_check
    from workloads.compliance import ErasureResult

    certificate = erased.certificate
    return [
        "",
        f"compliance erasure (W6), request {erased.request_id}: where the subject is (dry run)",
        *render_erasure(ErasureResult(places=erased.dry_run, dry_run=True)),
        "",
        *render_certificate(certificate),
        "",
        f"lakehouse erase --verify {certificate.certificate_id}:",
        *render_erasure_check(certificate.certificate_id, erased.recheck),
        "",
        "the subject's correlations as known before the erasure (asof):",
        *render_asof(erased.asof),
    ]


def _rescoring(rescored: demo.Rescoring) -> list[Block]:
    """The producer change: the same dry run and replay views, then publication or why not."""
    from jobs.render import indented, render_publication, render_replay, render_scope

    lines: list[Block] = [
        "",
        f"re-scoring under plan {rescored.plan} ({rescored.change}, rows labelled {rescored.label}):",
        "",
        "dry run:",
        *indented(render_scope(rescored.dry_run)),
        "",
        "replay:",
        *indented(render_replay(rescored.replay, high_impact_shown=HIGH_IMPACT_SHOWN)),
    ]
    if rescored.approval is not None:
        approval = rescored.approval
        lines += ["", f"approved by {approval.approver} at {approval.approved_at.isoformat()}"]
    if rescored.publication is not None:
        lines += ["", "publication:", *indented(render_publication(rescored.publication))]
    if rescored.waiting is not None:
        lines += ["", f"not published: {rescored.waiting}"]
    return lines


def _restatement(restated: demo.Restatement | demo.StoppedRestatement) -> list[Block]:
    from jobs.render import indented, render_publication, render_replay, render_scope
    from workloads.synthetic.demo import StoppedRestatement

    lines: list[Block] = ["", f"restatement under plan {restated.plan}:", "", "dry run:"]
    lines += indented(render_scope(restated.dry_run))
    lines += ["", "replay:"]
    lines += indented(render_replay(restated.replay, high_impact_shown=HIGH_IMPACT_SHOWN))
    if isinstance(restated, StoppedRestatement):
        return [*lines, "", restated.stopped]
    approval = restated.approval
    lines += ["", f"approved by {approval.approver} at {approval.approved_at.isoformat()}"]
    lines += ["", "publication:", *indented(render_publication(restated.publication))]
    if restated.example:
        lines += _example(restated.example)
    back = restated.rollback
    lines += [
        "",
        f"rolled back: {back.table} restored to the content of version {back.to_version} "
        f"as version {back.new_version}",
        "re-published:",
        *indented(render_publication(restated.republication)),
    ]
    return lines


def _example(example: Mapping[str, Any]) -> list[Block]:
    """A correlation the replay retired, why, and its successor."""
    old, new = example["superseded"], example["successor"] or {}
    superseded_at = old["superseded_at"]
    lines: list[Block] = [
        "",
        f"a {old['status']} correlation:",
        f"  {old['correlation_type']} {old['entity_a']} ~ {old['entity_b']} "
        f"confidence {old['confidence']} ({old['engine']})",
        f"  status {old['status']} at {plain(superseded_at)}, successor {old['superseded_by'] or '-'}",
        f"  reason: {old['supersede_reason']}",
    ]
    if new:
        lines.append(
            f"  successor: {new.get('entity_a')} ~ {new.get('entity_b')} confidence "
            f"{new.get('confidence')} ({new.get('engine')}, {new.get('status')})"
        )
    return lines


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
