"""The demo story on the embedded default, as one function the CLI and notebooks call.

Each chapter is a library call the user could run alone (``lakehouse generate``,
``ingest``, ``build silver``, ``build gold``, ``replay``, ``approve``, ``ack``,
``publish``, ``rollback``); the demo only strings them together and collects what to show.
Running it twice is safe: the history is deterministic and kept, re-ingest is a no-op,
the builds rewrite the same content, and a restatement that was already published is
shown, not repeated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakehouse.tables import TableRegistry
from ledger import Clock, Ledger

Progress = Callable[[str], None]
Gate = Callable[[str, Any], None]


@dataclass(frozen=True)
class DemoSettings:
    """Size of the demo history (small enough for a laptop, big enough to show everything)."""

    entities: int = 200
    months: int = 6
    seed: int = 7
    restate: bool = True
    """Continue with the ER v2 restatement (replay, approve, publish, rollback, re-publish)."""


@dataclass(frozen=True)
class DemoReport:
    """What the demo did, chapter by chapter, as plain data."""

    tables: list[dict[str, Any]]
    chapters: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"tables": self.tables, "chapters": self.chapters}


def create_zones(registry: TableRegistry, progress: Progress) -> None:
    """Create every configured table that does not exist yet."""
    for table in registry:
        if not table.exists():
            progress(f"creating {table.name} ({table.format.value})")
            table.create(if_not_exists=True)


def describe_tables(registry: TableRegistry) -> list[dict[str, Any]]:
    """Every table with its zone, format, location, version and row count."""
    described = []
    for table in registry:
        exists = table.exists()
        described.append(
            {
                "name": table.name,
                "zone": table.spec.zone.value,
                "format": table.format.value,
                "location": table.location,
                "current_version": table.current_version() if exists else None,
                "rows": table.read().count() if exists else None,
            }
        )
    return described


def medallion(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    history: Path,
    settings: DemoSettings,
    progress: Progress,
    gate: Gate | None,
) -> dict[str, Any]:
    """generate -> ingest every feed -> Silver -> Gold; returns what to show."""
    from pyspark.sql import functions as F

    from workloads.pipeline import run_gold, run_ingest, run_silver
    from workloads.synthetic.generator import FEEDS, GeneratorSettings, generate, load_lateness_policy

    policy = load_lateness_policy()
    if not (history / "_ground_truth.json").is_file():
        progress(f"generating {settings.months} months of history for {settings.entities} persons")
        generate(
            history,
            GeneratorSettings(entities=settings.entities, months=settings.months, seed=settings.seed),
            policy=policy,
        )
    ingested = {}
    for feed in FEEDS:
        progress(f"ingesting {feed}")
        report = run_ingest(registry, ledger, clock, feed=feed, source=history)
        ingested[feed] = {"new_manifests": len(report.ingested), "rows": report.rows_written}
    progress("building Silver (canonicalise, quarantine, dedupe, lateness, entity resolution v1)")
    silver = run_silver(registry, ledger, clock, policy=policy, gate=gate)
    progress("building Gold (daily features, W1 baselines, correlations v1)")
    gold = run_gold(registry, ledger, clock, gate=gate)

    quarantine = registry.get("ops.quarantine").read()
    reasons = {
        f"{r['feed']}:{r['reason']}": r["count"]
        for r in quarantine.groupBy("feed", "reason").count().orderBy("feed", "reason").collect()
    }
    exceptions = [
        {k: r[k] for k in ("event_id", "domain", "period", "status", "reason")}
        for r in registry.get("ops.exceptions").read().orderBy("event_id").limit(10).collect()
    ]
    correlations = [
        {k: r[k] for k in ("correlation_type", "entity_a", "entity_b", "confidence", "engine", "status")}
        for r in registry.get("gold.correlations")
        .read()
        .orderBy(F.desc("confidence"), "correlation_id")
        .limit(5)
        .collect()
    ]
    return {
        "ingest": ingested,
        "silver": {"run_id": silver.run_id, "restated_periods": len(silver.restated_periods)},
        "gold": {"run_id": gold.run_id, "events": gold.events},
        "quarantine_reasons": reasons,
        "exceptions_awaiting_approval": exceptions,
        "top_correlations": correlations,
    }


DEMO_PLAN = Path("conf/plans/er-v2-recorrelation.yaml")
DEMO_ENGINES = Path("conf/engines.yaml")


def _superseded_example(registry: TableRegistry, run_id: str) -> dict[str, Any] | None:
    """One correlation the replay retired, with its successor if it has one.

    A superseded row is preferred (it has a successor to show); a retracted one otherwise.
    """
    from pyspark.sql import functions as F

    rows = registry.get("gold.correlations").read()
    old = (
        rows.where(
            F.col("status").isin("superseded", "retracted") & F.col("supersede_reason").contains(run_id)
        )
        .orderBy(F.col("status").desc(), "correlation_id", "run_id")
        .limit(1)
        .collect()
    )
    if not old:
        return None
    columns = ("correlation_id", "correlation_type", "entity_a", "entity_b", "confidence", "engine", "status")
    before = {k: old[0][k] for k in (*columns, "superseded_at", "superseded_by", "supersede_reason")}
    after = (
        rows.where((F.col("correlation_id") == before["superseded_by"]) & (F.col("run_id") == run_id))
        .limit(1)
        .collect()
    )
    return {"superseded": before, "successor": {k: after[0][k] for k in columns} if after else None}


def restatement(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    progress: Progress,
    *,
    plan_path: Path = DEMO_PLAN,
    engines_path: Path = DEMO_ENGINES,
) -> dict[str, Any]:
    """Declare ER v2 -> dry run -> replay -> approve -> ack -> publish -> rollback -> re-publish.

    If the plan's engine change was already published (a second demo run), the chapter
    shows that publication instead of restating again.
    """
    from ledger.engines import load_engines
    from workloads.replay import ack, approve, plan_scope, publish, rollback, run_replay
    from workloads.replay.plan import load_plan
    from workloads.replay.state import AWAITING_APPROVAL

    plan = load_plan(plan_path)
    engines = load_engines(engines_path)
    change = plan.engine_change
    new_engine = engines.resolve(change.engine, int(change.to_version))
    progress(f"declaring {new_engine.ref} effective from {new_engine.effective_from} in the ledger")
    ledger.writer.append(new_engine.declared_entry())

    progress(f"dry run of plan {plan.plan}: exact scope, nothing written")
    scope = plan_scope(registry, plan, engines=engines)
    chapter: dict[str, Any] = {"plan": plan.plan, "dry_run": scope.lines()}
    progress(f"replaying {scope.affected_entity_count} affected entities into a candidate")
    outcome = run_replay(registry, plan, engines=engines, clock=clock)
    chapter["replay"] = outcome.lines()
    chapter["run_id"] = outcome.run_id
    if outcome.status != AWAITING_APPROVAL:
        chapter["stopped"] = f"replay {outcome.run_id} is {outcome.status}: nothing to approve or publish"
        return chapter

    approver = plan.publication.approvers[0]
    progress(f"approving as {approver}")
    chapter["approval"] = approve(registry, outcome.run_id, by=approver, clock=clock).to_dict()
    for consumer in plan.publication.consumers:
        if consumer.required:
            progress(f"acknowledging for required consumer {consumer.name}")
            ack(registry, consumer.name, outcome.run_id, by=f"{consumer.name}-oncall", clock=clock)
    progress("publishing atomically (supersession, stamping, notifications)")
    chapter["publication"] = publish(registry, outcome.run_id, clock=clock).lines()
    chapter["example"] = _superseded_example(registry, outcome.run_id)
    progress("rolling back the publication, then publishing it again")
    back = rollback(registry, outcome.run_id, clock=clock, reason="demo: show that rollback works")
    chapter["rollback"] = back.to_dict()
    chapter["republication"] = publish(registry, outcome.run_id, clock=clock).lines()
    return chapter


def run_demo(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    workdir: Path,
    progress: Progress,
    *,
    settings: DemoSettings = DemoSettings(),
    gate: Gate | None = None,
) -> DemoReport:
    """The whole story, in order."""
    create_zones(registry, progress)
    chapters = {
        "medallion": medallion(registry, ledger, clock, workdir / "history", settings, progress, gate)
    }
    if settings.restate:
        chapters["restatement"] = restatement(registry, ledger, clock, progress)
    return DemoReport(tables=describe_tables(registry), chapters=chapters)
