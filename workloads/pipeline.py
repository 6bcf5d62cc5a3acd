"""The medallion path as recorded runs: ingest -> Silver -> Gold.

Each function pins its inputs, verifies the declared engines it runs, records the run in
the ledger around the build, and returns the build's report. The CLI and the demo call
these; the builds themselves (``workloads.bronze.ingest``, ``workloads.silver.build``,
``workloads.gold.build``) know nothing of the ledger.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Final

from lakehouse.errors import EngineError
from lakehouse.quality import Gate
from lakehouse.tables import TableRegistry, describe_versions
from ledger import Clock, Ledger, RunFinished, RunStarted
from ledger.engines import EngineSpec
from workloads.bronze.ingest import IngestReport, bronze_table_of, ingest_feed
from workloads.engines import correlation, entity_resolution
from workloads.gold import baselines as w1
from workloads.gold.build import GoldReport, build_gold
from workloads.gold.correlations import Producer, row_engine_label
from workloads.gold.entity_index import refresh_entity_index
from workloads.policies import StreamingPolicy
from workloads.replay.provisional import record_reconciliation
from workloads.runs import (
    DEFAULT_ENGINES,
    in_force_engines,
    new_run_id,
    pin,
    processing_date,
    recorded_run,
    schema_version,
)
from workloads.silver.adapters import ADAPTERS
from workloads.silver.build import SilverReport, build_silver
from workloads.silver.exceptions import (
    Approval,
    ExceptionDecision,
    check_decision,
    pending_exception,
    record_decision,
    utc_date,
)
from workloads.silver.lateness import LatenessRule
from workloads.streaming import StreamFailPoint, StreamReport
from workloads.streaming import run_stream as stream_bronze
from workloads.vocabulary import BRONZE_TABLES, ExceptionStatus, TableName

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
        if report.withheld:
            run.counts["lines_withheld_as_erased"] = sum(report.withheld.values())
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
    pinned: Mapping[str, int] | None = None,
) -> SilverReport:
    """Build Silver from pinned Bronze as a recorded run, resolving entities with the version
    of entity resolution in force at the build's processing date (the clock's UTC date; see
    :mod:`ledger.engines.in_force`). ``run_started`` records the version and the reason.

    The first build under a resolver other than the previous Silver build's rebuilds every
    month, whatever ``since``/``until`` say: entities are decided by one version everywhere.
    ``pinned`` (``{"entity_resolution": 1}``) is an operator's choice instead of the rule.
    """
    started = clock.now()
    in_force = in_force_engines(
        ledger,
        [entity_resolution.NAME],
        processing_date(started),
        engines_path,
        input_schemas={entity_resolution.NAME: resolver_input_schemas(registry)},
        pinned=pinned,
    )
    resolver = in_force.spec(entity_resolution.NAME)
    previous = _last_silver_resolver(ledger)
    if (since is not None or until is not None) and previous not in (None, resolver.version):
        log.warning(
            "Silver was resolved by %s@%s; the first build under %s rebuilds every month, not %s..%s",
            entity_resolution.NAME,
            previous,
            resolver.ref,
            since,
            until,
        )
        since = until = None
    run_id = new_run_id("silver", started)
    inputs = pin(registry, BRONZE_TABLES)
    window = {"since": since.isoformat() if since else None, "until": until.isoformat() if until else None}
    with recorded_run(
        ledger,
        run_id=run_id,
        command="build silver",
        purpose="build",
        inputs=inputs,
        engines=in_force.identities,
        parameters={**window, **in_force.parameters()},
    ) as run:
        report = build_silver(
            registry,
            run_id=run_id,
            policy=policy,
            since=since,
            until=until,
            inputs=inputs,
            gate=gate,
            resolver_version=str(resolver.version),
        )
        run.outputs.update(_written(report.outputs))
        for fates in report.fates.values():
            for fate, count in fates.items():
                run.counts[fate] = run.counts.get(fate, 0) + count
    log.info("recorded silver run %s: outputs %s", run_id, describe_versions(run.outputs))
    return report


def run_exception_decision(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    *,
    exception_id: str,
    decision: ExceptionStatus,
    by: str,
    reason: str | None = None,
    policy: Mapping[str, LatenessRule],
    gate: Gate | None = None,
    engines_path: Path = DEFAULT_ENGINES,
) -> ExceptionDecision:
    """Approve or reject one held fact of ``ops.exceptions`` as a recorded run (purpose
    ``exception``, the approver, decision and reason in its parameters).

    An unknown or already decided exception is refused before anything is written. An
    approval rebuilds Silver from the current Bronze under the declared entity resolution,
    with the fact admitted as an adjustment accounted on the approval's date, and only
    then marks the queue row approved: if the build fails (gate, conservation), the fact
    is still awaiting approval. A rejection only marks the row, with its reason.
    """
    check_decision(decision, by, reason)
    fact = pending_exception(registry, exception_id)
    decided_at = clock.now()
    run_id = new_run_id("exception", decided_at, exception_id)
    approving = decision is ExceptionStatus.APPROVED
    in_force = (
        in_force_engines(
            ledger,
            [entity_resolution.NAME],
            processing_date(decided_at),
            engines_path,
            input_schemas={entity_resolution.NAME: resolver_input_schemas(registry)},
        )
        if approving
        else None
    )
    engines = in_force.identities if in_force is not None else ()
    bronze = pin(registry, BRONZE_TABLES) if approving else {}
    inputs = {**bronze, **pin(registry, [TableName.EXCEPTIONS])}
    verb = "approve" if approving else "reject"
    with recorded_run(
        ledger,
        run_id=run_id,
        command=f"exceptions {verb} {exception_id}",
        purpose="exception",
        inputs=inputs,
        engines=engines,
        parameters={
            "exception_id": exception_id,
            "decision": decision,
            "by": by,
            "reason": reason,
            **(in_force.parameters() if in_force is not None else {}),
        },
    ) as run:
        silver: SilverReport | None = None
        accounting_date = utc_date(decided_at) if approving else None
        if accounting_date is not None and in_force is not None:
            silver = build_silver(
                registry,
                run_id=run_id,
                policy=policy,
                inputs=bronze,
                gate=gate,
                approving=(Approval(fact.manifest_id, fact.source_file, fact.line, accounting_date),),
                resolver_version=str(in_force.spec(entity_resolution.NAME).version),
            )
            run.outputs.update(_written(silver.outputs))
            for fates in silver.fates.values():
                for fate, count in fates.items():
                    run.counts[fate] = run.counts.get(fate, 0) + count
        version = record_decision(
            registry, fact, decision=decision, by=by, at=decided_at, reason=reason, run_id=run_id
        )
        if version is not None:
            run.outputs[TableName.EXCEPTIONS] = version
        run.counts[str(decision)] = 1
    log.info("recorded exception run %s: %s %s by %s", run_id, exception_id, decision, by)
    return ExceptionDecision(
        exception_id=exception_id,
        event_id=fact.event_id,
        domain=fact.domain,
        period=fact.period,
        decision=decision,
        decided_by=by,
        decided_at=decided_at,
        reason=reason,
        run_id=run_id,
        accounting_date=accounting_date,
        silver=silver,
    )


def run_gold(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    *,
    full: bool = False,
    gate: Gate | None = None,
    engines_path: Path = DEFAULT_ENGINES,
    pinned: Mapping[str, int] | None = None,
    streaming: StreamingPolicy | None = None,
) -> GoldReport:
    """Build Gold (features, W1 baselines, correlations) as a recorded run, with the engines
    in force at the build's processing date (``entity_daily``, ``baselines``, ``correlation``;
    versions and reasons recorded in ``run_started``). Each engine's code is verified
    against its declared fingerprint first: changed code without a new version is refused.

    With ``streaming``, the stream's provisional rows are reconciled against the build's
    correlations and the outcomes recorded (:mod:`workloads.replay.provisional`): ledger
    entries, outbox messages for streaming false positives, counts in ``run_finished``.
    """
    started = clock.now()
    silver_schema = {TableName.SILVER_EVENTS.value: schema_version(registry, TableName.SILVER_EVENTS)}
    in_force = in_force_engines(
        ledger,
        [ENTITY_DAILY, BASELINES, correlation.NAME],
        processing_date(started),
        engines_path,
        input_schemas={
            ENTITY_DAILY: silver_schema,
            BASELINES: {TableName.ENTITY_DAILY.value: schema_version(registry, TableName.ENTITY_DAILY)},
            correlation.NAME: silver_schema,
        },
        pinned=pinned,
    )
    _check_gold_code(in_force.spec(ENTITY_DAILY), in_force.spec(BASELINES))
    producer = _producer(in_force.spec(correlation.NAME))
    run_id = new_run_id("gold", started)
    inputs = pin(registry, [TableName.SILVER_EVENTS])
    with recorded_run(
        ledger,
        run_id=run_id,
        command="build gold",
        purpose="build",
        inputs=inputs,
        engines=in_force.identities,
        parameters={"full": full, **in_force.parameters()},
    ) as run:
        report = build_gold(
            registry,
            run_id=run_id,
            recorded_at=started,
            full=full,
            gate=gate,
            producer=producer,
            streaming=streaming,
        )
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
            run.counts["correlations_superseded"] = report.correlations.superseded
            run.counts["correlations_retracted"] = report.correlations.retracted
        if report.provisional is not None and streaming is not None:
            for outcome, count in report.provisional.outcomes.items():
                run.counts[f"stream_{outcome}"] = count
            run.counts["stream_notifications"] = record_reconciliation(
                registry, ledger, report.provisional, streaming
            )
    log.info("recorded gold run %s: outputs %s", run_id, describe_versions(run.outputs))
    return replace(report, entity_index=refresh_entity_index(registry, ledger, clock))


def run_stream_provisional(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    *,
    home: Path,
    lateness: Mapping[str, LatenessRule],
    streaming: StreamingPolicy,
    available_now: bool = True,
    max_files_per_batch: int | None = None,
    fail_at: StreamFailPoint | None = None,
    engines_path: Path = DEFAULT_ENGINES,
    pinned: Mapping[str, int] | None = None,
    progress: Callable[[str], None] | None = None,
) -> StreamReport:
    """The streaming provisional path as a recorded run (purpose ``stream``): the entity
    resolution and correlation versions in force at the run's processing date, exactly as a
    Silver and a Gold build would choose them (recorded in ``run_started``), applied per
    micro-batch by :func:`workloads.streaming.run_stream` over a bounded evidence window.
    ``pinned`` is an operator's choice instead of the rule, as for the builds."""
    started = clock.now()
    in_force = in_force_engines(
        ledger,
        [entity_resolution.NAME, correlation.NAME],
        processing_date(started),
        engines_path,
        input_schemas={
            entity_resolution.NAME: resolver_input_schemas(registry),
            correlation.NAME: {
                TableName.SILVER_EVENTS.value: schema_version(registry, TableName.SILVER_EVENTS)
            },
        },
        pinned=pinned,
    )
    resolver = in_force.spec(entity_resolution.NAME)
    producer = _producer(in_force.spec(correlation.NAME))
    label = row_engine_label(producer.ref, [entity_resolution.engine_label(str(resolver.version))])
    run_id = new_run_id("stream", started)
    with recorded_run(
        ledger,
        run_id=run_id,
        command="stream --available-now" if available_now else "stream",
        purpose="stream",
        inputs=pin(registry, BRONZE_TABLES),
        engines=in_force.identities,
        parameters={
            "window_days": streaming.window_days,
            "max_files_per_batch": max_files_per_batch,
            "fail_at": fail_at.value if fail_at else None,
            **in_force.parameters(),
        },
    ) as run:
        report = stream_bronze(
            registry,
            home=home,
            resolve=entity_resolution.resolver_for(str(resolver.version)),
            producer=producer,
            engine_label=label,
            lateness=lateness,
            window_days=streaming.window_days,
            run_id=run_id,
            clock=clock,
            available_now=available_now,
            max_files_per_batch=max_files_per_batch,
            fail_at=fail_at,
            progress=progress,
        )
        run.outputs.update(_written(report.outputs))
        run.counts.update(
            {
                "batches": len(report.batches),
                "batches_skipped": len(report.skipped),
                "rows_read": report.rows_read,
                "quarantined": report.quarantined,
                "provisional": report.provisional,
            }
        )
    log.info("recorded stream run %s: %d batch(es)", run_id, len(report.batches))
    return report


ENTITY_DAILY: Final = "entity_daily"
BASELINES: Final = "baselines"
_GOLD_CODE: Final[dict[str, str]] = {
    ENTITY_DAILY: "workloads.gold.features:daily_features",
    BASELINES: "workloads.gold.baselines:baselines",
}
"""The code the Gold build runs for its per-entity engines (one version each so far)."""


def resolver_input_schemas(registry: TableRegistry) -> dict[str, str]:
    """What entity resolution reads: the Silver row schema and the source versions accepted."""
    schemas = {TableName.SILVER_EVENTS.value: schema_version(registry, TableName.SILVER_EVENTS)}
    for feed, adapter in sorted(ADAPTERS.items()):
        schemas[f"source:{feed}"] = ",".join(adapter.accepted_versions)
    return schemas


def _last_silver_resolver(ledger: Ledger) -> int | None:
    """The entity-resolution version of the last Silver build that finished ok, if any."""
    started: dict[str, int] = {}
    last: int | None = None
    for entry in ledger.reader.entries():
        if isinstance(entry, RunStarted) and entry.command == "build silver" and entry.run_id:
            versions = [e.version for e in entry.engines if e.name == entity_resolution.NAME]
            if versions:
                started[entry.run_id] = versions[0]
        elif isinstance(entry, RunFinished) and entry.status == "ok" and entry.run_id in started:
            last = started[entry.run_id]
    return last


def _check_gold_code(*specs: EngineSpec) -> None:
    """The in-force versions of Gold's per-entity engines must be the code this build runs."""
    for spec in specs:
        expected = _GOLD_CODE[spec.name]
        if spec.implementation != expected:
            raise EngineError(
                f"engine {spec.ref} is in force but declares {spec.implementation}; the Gold build runs "
                f"{expected}: add that version's code path to workloads.gold.build"
            )
    baselines = next(s for s in specs if s.name == BASELINES)
    declared = {"windows": list(w1.WINDOWS), "metrics": dict(w1.METRICS)}
    if dict(baselines.parameters) != declared:
        raise EngineError(
            f"engine {baselines.ref} declares parameters {dict(baselines.parameters)} but its code uses "
            f"{declared}; declare a new version with the code's parameters"
        )


def _producer(spec: EngineSpec) -> Producer:
    """The correlation engine of ``spec``: its declared function and declared parameters."""
    module = importlib.import_module(spec.module)
    function = getattr(module, spec.function, None)
    if not callable(function):
        raise EngineError(
            f"engine {spec.ref}: {spec.implementation} is not a function; fix conf/engines.yaml"
        )
    accepted = inspect.signature(function).parameters
    return Producer(spec.ref, function, {k: v for k, v in spec.parameters.items() if k in accepted})
