"""The medallion path as recorded runs: ingest -> Silver -> Gold.

Each function pins its inputs, verifies the declared engines it runs, records the run in
the ledger around the build, and returns the build's report. The CLI and the demo call
these; the builds themselves (``workloads.bronze.ingest``, ``workloads.silver.build``,
``workloads.gold.build``) know nothing of the ledger.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import date
from pathlib import Path

from lakehouse.quality import Gate
from lakehouse.tables import TableRegistry
from ledger import Clock, Ledger
from workloads.bronze.ingest import IngestReport, bronze_table_of, ingest_feed
from workloads.engines import correlation, entity_resolution
from workloads.gold.build import GoldReport, build_gold
from workloads.gold.entity_index import refresh_entity_index
from workloads.runs import DEFAULT_ENGINES, new_run_id, pin, recorded_run, verified_engines
from workloads.silver.build import SilverReport, build_silver
from workloads.silver.lateness import LatenessRule
from workloads.vocabulary import BRONZE_TABLES, TableName

log = logging.getLogger(__name__)


def _written(outputs: Mapping[str, int | None]) -> dict[str, int]:
    return {name: version for name, version in outputs.items() if version is not None}


def run_ingest(
    registry: TableRegistry, ledger: Ledger, clock: Clock, *, feed: str, source: Path
) -> IngestReport:
    """Ingest one feed's new deliveries as a recorded run."""
    run_id = new_run_id(f"ingest-{feed}", clock.now(), str(source))
    inputs = pin(registry, [bronze_table_of(feed), TableName.MANIFESTS])
    with recorded_run(
        ledger,
        run_id=run_id,
        command=f"ingest --feed {feed}",
        purpose="ingest",
        inputs=inputs,
        parameters={"feed": feed, "source": str(source)},
    ) as run:
        report = ingest_feed(registry, feed, source, run_id=run_id)
        run.outputs.update(_written(report.outputs))
        run.counts["rows_written"] = report.rows_written
        run.counts["manifests_ingested"] = len(report.ingested)
    log.info("recorded ingest run %s: %d rows written", run_id, report.rows_written)
    return report


def run_silver(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    *,
    policy: Mapping[str, LatenessRule],
    since: date | None = None,
    until: date | None = None,
    gate: Gate | None = None,
    engines_path: Path = DEFAULT_ENGINES,
) -> SilverReport:
    """Build Silver from pinned Bronze under the declared entity resolution, as a recorded run."""
    version = int(entity_resolution.VERSION)
    engines = verified_engines([(entity_resolution.NAME, version)], engines_path)
    run_id = new_run_id("silver", clock.now())
    inputs = pin(registry, BRONZE_TABLES)
    window = {"since": since.isoformat() if since else None, "until": until.isoformat() if until else None}
    with recorded_run(
        ledger,
        run_id=run_id,
        command="build silver",
        purpose="build",
        inputs=inputs,
        engines=engines,
        parameters=window,
    ) as run:
        report = build_silver(
            registry, run_id=run_id, policy=policy, since=since, until=until, inputs=inputs, gate=gate
        )
        run.outputs.update(_written(report.outputs))
        for fates in report.fates.values():
            for fate, count in fates.items():
                run.counts[fate] = run.counts.get(fate, 0) + count
    log.info("recorded silver run %s: outputs %s", run_id, dict(run.outputs))
    return report


def run_gold(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    *,
    full: bool = False,
    gate: Gate | None = None,
    engines_path: Path = DEFAULT_ENGINES,
) -> GoldReport:
    """Build Gold (features, W1 baselines, correlations) as a recorded run."""
    engines = verified_engines([(correlation.NAME, int(correlation.VERSION))], engines_path)
    started = clock.now()
    run_id = new_run_id("gold", started)
    inputs = pin(registry, [TableName.SILVER_EVENTS])
    with recorded_run(
        ledger,
        run_id=run_id,
        command="build gold",
        purpose="build",
        inputs=inputs,
        engines=engines,
        parameters={"full": full},
    ) as run:
        report = build_gold(registry, run_id=run_id, recorded_at=started, full=full, gate=gate)
        run.outputs.update(_written(report.outputs))
        run.counts.update(
            {
                "events": report.events,
                "unattributed_events": report.unattributed_events,
                "entities_recomputed": report.entities_recomputed,
            }
        )
        if report.correlations is not None:
            run.counts["correlations_inserted"] = report.correlations.inserted
            run.counts["correlations_updated"] = report.correlations.updated
    log.info("recorded gold run %s: outputs %s", run_id, dict(run.outputs))
    return replace(report, entity_index=refresh_entity_index(registry, ledger, clock))
