"""``lakehouse demo``: the main job on the embedded default, start to finish."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Block, Context, Outcome, TableView
from jobs.output import plain

NAME = "demo"
HELP = (
    "run the demo story on the embedded default: history -> Bronze -> Silver -> Gold, "
    "then the ER v2 restatement (replay, approve, publish, rollback, re-publish)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--entities", type=int, default=200, help="persons in the generated history")
    parser.add_argument("--months", type=int, default=6, help="months of generated history")
    parser.add_argument(
        "--no-restate", action="store_true", help="stop after Gold (skip the ER v2 restatement)"
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
    return Outcome(data=report, lines=_lines(ctx, plain(report)))


def _lines(ctx: Context, report: dict[str, Any]) -> list[Block]:
    medallion = report["chapters"]["medallion"]
    lines: list[Block] = [
        f"lakehouse work dir: {ctx.config.workdir_path}",
        f"iceberg catalog '{ctx.config.iceberg.name}': {ctx.config.iceberg_uri}",
        "",
        "zones and tables:",
        TableView(report["tables"], ["name", "zone", "format", "rows", "current_version"]),
        "",
        "quarantine (feed:reason -> rows):",
        *[f"  {reason:<40} {n}" for reason, n in medallion["quarantine_reasons"].items()],
        "",
        f"exceptions awaiting approval (first {len(medallion['exceptions_awaiting_approval'])}):",
        TableView(medallion["exceptions_awaiting_approval"], ["event_id", "domain", "period", "status"]),
        "",
        "top correlations:",
        TableView(
            medallion["top_correlations"],
            ["correlation_type", "entity_a", "entity_b", "confidence", "engine"],
        ),
    ]
    restated = report["chapters"].get("restatement")
    if restated:
        lines += ["", f"restatement under plan {restated['plan']}:", "", "dry run:"]
        lines += [f"  {line}" for line in restated["dry_run"]]
        lines += ["", "replay:", *[f"  {line}" for line in _shortened(restated["replay"])]]
        if "stopped" in restated:
            lines += ["", restated["stopped"]]
            return lines
        approval = restated["approval"]
        lines += ["", f"approved by {approval['approver']} at {approval['approved_at']}"]
        lines += ["", "publication:", *[f"  {line}" for line in restated["publication"]]]
        example = restated.get("example")
        if example:
            old, new = example["superseded"], example["successor"] or {}
            lines += [
                "",
                f"a {old['status']} correlation:",
                f"  {old['correlation_type']} {old['entity_a']} ~ {old['entity_b']} "
                f"confidence {old['confidence']} ({old['engine']})",
                f"  status {old['status']} at {old['superseded_at']}, "
                f"successor {old['superseded_by'] or '-'}",
                f"  reason: {old['supersede_reason']}",
            ]
            if new:
                lines.append(
                    f"  successor: {new.get('entity_a')} ~ {new.get('entity_b')} confidence "
                    f"{new.get('confidence')} ({new.get('engine')}, {new.get('status')})"
                )
        back = restated["rollback"]
        lines += [
            "",
            f"rolled back: {back['table']} restored to the content of version {back['to_version']} "
            f"as version {back['new_version']}",
            "re-published:",
            *[f"  {line}" for line in restated["republication"]],
        ]
    return lines


HIGH_IMPACT_SHOWN = 5


def _shortened(lines: list[str]) -> list[str]:
    """The replay's lines with only the first few high-impact changes (all are in the review file)."""
    flagged = [line for line in lines if line.startswith("  ! ")]
    if len(flagged) <= HIGH_IMPACT_SHOWN:
        return lines
    hidden = set(flagged[HIGH_IMPACT_SHOWN:])
    kept = [line for line in lines if line not in hidden]
    at = kept.index(flagged[HIGH_IMPACT_SHOWN - 1]) + 1
    return [*kept[:at], f"  ! ... {len(hidden)} more in the review file", *kept[at:]]


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
