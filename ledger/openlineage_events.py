"""OpenLineage RunEvents of the runs the ledger records (docs/reference/openlineage.md).

The hook is the ledger writer: every ``run_started``, ``run_finished``, ``publication`` and
``rollback`` entry it actually appends (a deduplicated rerun appends nothing, so it emits
nothing) becomes OpenLineage RunEvents, sent through the ``openlineage-python`` client after
the commit. Every writer of a run (``recorded_run``, the replay flow, publish, rollback, and
any later one) is covered without a hook of its own, and nothing is emitted that the ledger
does not hold. It sits in ``ledger`` because it only translates ledger entries; it needs
nothing from ``workloads``.

=====================  ======================================================================
ledger entry           events
=====================  ======================================================================
``run_started``        START of a run of job ``<command>``; inputs: the pinned versions read
``run_finished`` ok    COMPLETE of the run its last ``run_started`` opened; outputs: versions
``run_finished`` fail  FAIL of that run, with the error (``errorMessage`` facet)
``publication``        COMPLETE of the publish run its intent (``run_started``) opened
``rollback``           START and COMPLETE of a ``rollback`` run: the restored version read,
                       the new serving version written
=====================  ======================================================================

How ledger and events name each other: the OpenLineage run id is
``uuid5(LEDGER_RUN_NAMESPACE, "<ledger run id>/<entry id>")`` of the entry that opened the run
(its ``run_started``, or the ``rollback``), see :func:`openlineage_run_id`; every event carries
the ledger run id and that entry id in its ``lakehouse_run`` run facet, with the command,
purpose, plan and engine identities (name, version, code fingerprint, config digest). A
replay and its publication share one ledger run id but are two OpenLineage runs (jobs
``replay`` and ``publish``); the entry id keeps a republication apart from the first.

Datasets: namespace = the warehouse URI the table's format stores it under, name = the
table's catalog name (``silver.events``; ``silver_<instance>.events`` with an instance),
facets ``version`` (the Delta version or Iceberg snapshot id) and ``storage``. Library code:
a failure to emit is logged as a warning and never fails the run.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from importlib import metadata
from typing import TYPE_CHECKING, Any

from lakehouse.config import LakehouseConfig
from ledger.chain import LedgerRecord
from ledger.entries import LedgerEntryBase, Publication, Rollback, RunFinished, RunStarted

if TYPE_CHECKING:
    from openlineage.client import OpenLineageClient
    from openlineage.client.event_v2 import InputDataset, OutputDataset, RunEvent

log = logging.getLogger(__name__)

LEDGER_RUN_NAMESPACE = uuid.UUID("6f1c1f0e-3b7a-5d8e-9a52-6c2b1d0e4a17")
"""The uuid5 namespace of OpenLineage run ids derived from ledger runs (fixed forever)."""

FACET = "lakehouse_run"
"""Name of the custom run facet: ledger run id, opening entry, command, engines."""

SCHEMA_URL = "urn:lakehouse-replay:openlineage:LakehouseRunFacet"
"""Our custom facet's ``_schemaURL`` (a URI the spec requires; the facet is documented in the
docs/reference/openlineage.md, and published nowhere)."""

OPENING_KINDS = ("run_started", "rollback")
EMITTING_KINDS = ("run_started", "run_finished", "publication", "rollback")


def openlineage_run_id(ledger_run_id: str, entry_id: str) -> str:
    """The OpenLineage run id of the run opened by ledger entry ``entry_id`` of run ``ledger_run_id``."""
    return str(uuid.uuid5(LEDGER_RUN_NAMESPACE, f"{ledger_run_id}/{entry_id}"))


@dataclass(frozen=True)
class DatasetName:
    """Where OpenLineage finds one table: namespace, name, and how it is stored."""

    namespace: str
    name: str
    storage: str


def dataset_name(config: LakehouseConfig, table: str) -> DatasetName:
    """A table's OpenLineage identity: its warehouse URI and its catalog name (see module doc)."""
    settings = config.tables.get(table)
    zone, _, short = table.partition(".")
    if settings is None:
        return DatasetName(config.warehouse_uri, table, "unknown")
    schema = f"{zone}_{config.instance}" if config.instance else zone
    return DatasetName(
        config.warehouse_of(settings).rstrip("/"), f"{schema}.{short}", config.format_of(settings).value
    )


@dataclass(frozen=True)
class Opened:
    """The entry that opened an OpenLineage run, and its id."""

    entry: RunStarted | Rollback
    entry_id: str

    @property
    def run_id(self) -> str:
        return openlineage_run_id(str(self.entry.run_id), self.entry_id)

    @property
    def job(self) -> str:
        return self.entry.command if isinstance(self.entry, RunStarted) else "rollback"


def _inputs_of(entry: RunStarted | Rollback) -> dict[str, int]:
    """Input versions an opening entry names (table -> version)."""
    if isinstance(entry, RunStarted):
        return {t: i.version for t, i in entry.inputs.items()}
    return {entry.table: entry.to_version}


@dataclass
class EventBuilder:
    """Turns ledger entries into RunEvents (pure: no I/O; see :class:`LineageEmitter`)."""

    config: LakehouseConfig

    def _datasets(self, versions: Mapping[str, int], kind: type[Any]) -> list[Any]:
        from openlineage.client.facet_v2 import dataset_version_dataset, storage_dataset

        found = []
        for table, version in sorted(versions.items()):
            where = dataset_name(self.config, table)
            facets = {
                "version": dataset_version_dataset.DatasetVersionDatasetFacet(
                    datasetVersion=str(version), producer=producer()
                ),
                "storage": storage_dataset.StorageDatasetFacet(
                    storageLayer=where.storage, fileFormat="parquet", producer=producer()
                ),
            }
            found.append(kind(namespace=where.namespace, name=where.name, facets=facets))
        return found

    def inputs(self, versions: Mapping[str, int]) -> list[InputDataset]:
        from openlineage.client.event_v2 import InputDataset

        return self._datasets(versions, InputDataset)

    def outputs(self, versions: Mapping[str, int]) -> list[OutputDataset]:
        from openlineage.client.event_v2 import OutputDataset

        return self._datasets(versions, OutputDataset)

    def event(
        self,
        state: str,
        opened: Opened,
        at: datetime,
        *,
        outputs: Mapping[str, int] | None = None,
        error: str | None = None,
    ) -> RunEvent:
        """One RunEvent of the run ``opened`` started: ``state`` START, COMPLETE or FAIL."""
        from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
        from openlineage.client.facet_v2 import error_message_run, job_type_job, processing_engine_run

        run_facets: dict[str, Any] = {
            FACET: _lakehouse_facet(opened),
            "processing_engine": processing_engine_run.ProcessingEngineRunFacet(
                version=_version_of("lakehouse-replay"),
                name="lakehouse-replay",
                openlineageAdapterVersion=_version_of("openlineage-python"),
                producer=producer(),
            ),
        }
        if error is not None:
            run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
                message=error, programmingLanguage="python", producer=producer()
            )
        job_facets: dict[str, Any] = {
            "jobType": job_type_job.JobTypeJobFacet(
                processingType="BATCH", integration="LAKEHOUSE_REPLAY", jobType="JOB", producer=producer()
            )
        }
        return RunEvent(
            eventType=RunState(state),
            eventTime=at.isoformat(),
            producer=producer(),
            run=Run(runId=opened.run_id, facets=run_facets),
            job=Job(namespace=self.config.lineage_namespace, name=opened.job, facets=job_facets),
            inputs=self.inputs(_inputs_of(opened.entry)),
            outputs=self.outputs(outputs or {}),
        )

    def events_of(
        self, record: LedgerRecord, entry: LedgerEntryBase, opened: Opened | None
    ) -> list[RunEvent]:
        """The events one appended entry stands for; ``opened``: the run it ends (None: unknown)."""
        at = record.recorded_at
        if isinstance(entry, RunStarted):
            return [self.event("START", Opened(entry, record.entry_id), at)]
        if isinstance(entry, Rollback):
            rollback = Opened(entry, record.entry_id)
            return [
                self.event("START", rollback, at),
                self.event("COMPLETE", rollback, at, outputs={entry.table: entry.new_version}),
            ]
        if opened is None:
            log.warning(
                "no run_started of run %s found: its %s is not sent to OpenLineage", entry.run_id, entry.kind
            )
            return []
        if isinstance(entry, RunFinished):
            if entry.status == "failed":
                return [self.event("FAIL", opened, at, error=entry.error)]
            return [
                self.event("COMPLETE", opened, at, outputs={t: o.version for t, o in entry.outputs.items()})
            ]
        if isinstance(entry, Publication):
            return [self.event("COMPLETE", opened, at, outputs=entry.tables)]
        return []


def producer() -> str:
    """The events' producer URI: ``urn:lakehouse-replay:<version>``."""
    return f"urn:lakehouse-replay:{_version_of('lakehouse-replay')}"


@cache
def _version_of(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


def _lakehouse_facet(opened: Opened) -> Any:
    """The custom run facet: the ledger run and entry that name this run, and the engines it ran."""
    from openlineage.client.generated.base import RunFacet

    entry = opened.entry
    started = entry if isinstance(entry, RunStarted) else None
    facet = RunFacet(producer=producer()).with_additional_properties(
        ledgerRunId=entry.run_id,
        ledgerEntryId=opened.entry_id,
        ledgerKind=entry.kind,
        command=opened.job,
        purpose=started.purpose if started else None,
        plan=started.plan if started else None,
        engines=[
            {
                "name": e.name,
                "version": e.version,
                "codeFingerprint": e.code_fingerprint,
                "configDigest": e.config_digest,
            }
            for e in (started.engines if started else ())
        ],
    )
    facet._schemaURL = SCHEMA_URL
    return facet


RecordsOfRun = Callable[[str], Sequence[LedgerRecord]]
"""Every stored record of one ledger run (to find a run started by another process)."""


@dataclass
class LineageEmitter:
    """Sends the events of appended ledger records through the configured OpenLineage transport.

    Remembers the runs it saw open, so an end in the same process needs no ledger read; an
    end whose start another process recorded is looked up with ``records_of_run``.
    """

    config: LakehouseConfig
    records_of_run: RecordsOfRun | None = None
    _client: OpenLineageClient | None = None
    _open: dict[str, Opened] = field(default_factory=dict)

    @property
    def enabled(self) -> bool:
        """Off with ``transport: none`` or the client's own ``OPENLINEAGE_DISABLED=true``."""
        off = os.environ.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true"
        return self.config.lineage.transport != "none" and not off

    def emit_records(self, records: Iterable[LedgerRecord]) -> None:
        """Emit the events of ``records`` (just appended). Never raises: failures are warnings."""
        if not self.enabled:
            return
        for record in records:
            if record.kind not in EMITTING_KINDS:
                continue
            try:
                self._emit_record(record)
            except Exception as exc:  # lineage must never fail a run
                log.warning(
                    "OpenLineage event of %s %s not sent (%s): %s",
                    record.kind,
                    record.run_id,
                    self.config.lineage.transport,
                    f"{type(exc).__name__}: {exc}".splitlines()[0],
                )

    def _emit_record(self, record: LedgerRecord) -> None:
        entry = record.entry()
        builder = EventBuilder(self.config)
        opened = None if record.kind in OPENING_KINDS else self._opened(str(record.run_id), record.seq)
        if isinstance(entry, RunStarted):
            self._open[str(entry.run_id)] = Opened(entry, record.entry_id)
        client = self.client()
        for event in builder.events_of(record, entry, opened):
            client.emit(event)

    def _opened(self, run_id: str, before_seq: int) -> Opened | None:
        """The last ``run_started`` of ``run_id`` (remembered, or read from the ledger)."""
        if run_id in self._open:
            return self._open[run_id]
        if self.records_of_run is None:
            return None
        starts = [r for r in self.records_of_run(run_id) if r.kind == "run_started" and r.seq < before_seq]
        if not starts:
            return None
        entry = starts[-1].entry()
        assert isinstance(entry, RunStarted)
        return Opened(entry, starts[-1].entry_id)

    def client(self) -> OpenLineageClient:
        if self._client is None:
            self._client = make_client(self.config)
        return self._client


def transport_config(config: LakehouseConfig) -> dict[str, Any]:
    """The openlineage-python transport configuration of ``config.lineage``."""
    lineage = config.lineage
    if lineage.transport == "http":
        http: dict[str, Any] = {
            "type": "http",
            "url": lineage.url,
            "endpoint": lineage.endpoint,
            "timeout": lineage.timeout_seconds,
            # one quick retry: an unreachable consumer delays each run by seconds, not minutes
            "retry": {"total": 1, "connect": 1, "read": 1, "backoff_factor": 0.2},
        }
        if lineage.api_key:
            http["auth"] = {"type": "api_key", "apiKey": lineage.api_key}
        return http
    if lineage.transport == "console":
        return {"type": "console"}
    path = config.lineage_path
    path.parent.mkdir(parents=True, exist_ok=True)
    return {"type": "file", "log_file_path": str(path), "append": True}


def make_client(config: LakehouseConfig) -> OpenLineageClient:
    """An OpenLineage client sending to the configured transport."""
    from openlineage.client import OpenLineageClient

    return OpenLineageClient(config={"transport": transport_config(config)})


_EMITTERS: dict[str, LineageEmitter] = {}


def emitter_for(config: LakehouseConfig, records_of_run: RecordsOfRun | None = None) -> LineageEmitter | None:
    """The process's emitter for ``config`` (one client per configuration); None when disabled."""
    if config.lineage.transport == "none":
        return None
    key = config.lineage.model_dump_json() + str(config.workdir_path) + config.instance
    found = _EMITTERS.get(key)
    if found is None:
        found = _EMITTERS[key] = LineageEmitter(config, records_of_run)
    elif found.records_of_run is None:
        found.records_of_run = records_of_run
    return found
