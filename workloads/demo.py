"""The demo story on the embedded default, as one function the CLI and notebooks call.

Each chapter is a library call the user could run alone (``lakehouse generate``,
``ingest``, ``build silver``, ``build gold``); the demo only strings them together and
collects what to show. Running it twice is safe: the history is deterministic and kept,
re-ingest is a no-op, and the builds rewrite the same content.
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

    from workloads.generator import FEEDS, GeneratorSettings, generate, load_lateness_policy
    from workloads.pipeline import run_gold, run_ingest, run_silver

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
    return DemoReport(tables=describe_tables(registry), chapters=chapters)
