"""Every build is a recorded run: pinned inputs and engine identities before, outputs after.

:func:`recorded_run` writes ``run_started`` (what will be read, which engines will run, with
their code fingerprints verified) before the work, and ``run_finished`` (status, versions
written, counts) after it, also when it fails. The build functions read exactly the pinned
versions recorded here.

:func:`in_force_engines` chooses the engine versions a build runs for its processing date
(:func:`processing_date`, the UTC date of its clock) with :mod:`ledger.engines.in_force`,
verifies their code, and completes their identities with the schema versions of the rows
they read (:func:`schema_version`); ``EnginesInForce.parameters()`` is the reason recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, Final

from lakehouse.digest import digest_of
from lakehouse.tables import TableRegistry
from lakehouse.tables.base import first_line, recorded_error
from ledger import EngineIdentity, InputRead, Ledger, OutputWritten, RunFinished, RunStarted
from ledger.clock import utc
from ledger.engines import EngineSpec, InForce, engines_in_force, load_engines, verify_fingerprint

log = logging.getLogger(__name__)

DEFAULT_ENGINES = Path("conf/engines.yaml")


RUN_STAMP: Final = r"\d{8}T\d{12}Z-[0-9a-f]{8}"
"""The regular expression of the tail :func:`new_run_id` gives a run id (UTC time, 8 hex): what
checks of run, training set and certificate ids match after their prefix."""


def new_run_id(command: str, at: datetime, salt: Any = None) -> str:
    """``<command>-<UTC time>-<8 hex>``: readable, sortable and unique per start."""
    stamp = at.strftime("%Y%m%dT%H%M%S%fZ")
    return f"{command}-{stamp}-{digest_of([command, stamp, salt])[:8]}"


def processing_date(moment: datetime) -> date:
    """The processing date of a build started at ``moment``: its UTC date (the engines in force)."""
    return utc(moment).date()


def schema_version(registry: TableRegistry, table: str) -> str:
    """The schema version of a table's rows: a digest of its configured schema (``sha256:<12 hex>``).

    Tables carry no version number of their own; the configured DDL is what the rows look
    like, so a column added, removed or retyped is a new schema version.
    """
    ddl = " ".join(registry.get(table).spec.schema_ddl.split())
    return "sha256:" + digest_of(ddl)[:12]


@dataclass(frozen=True)
class EnginesInForce:
    """The engines a build runs: chosen for its processing date, verified against their code.

    ``parameters()`` is what ``run_started`` records besides the identities: the processing
    date and, per engine, the version in force and why.
    """

    at: date
    chosen: Mapping[str, InForce]
    identities: tuple[EngineIdentity, ...]

    def spec(self, name: str) -> EngineSpec:
        return self.chosen[name].spec

    def parameters(self) -> dict[str, Any]:
        return {
            "processing_date": self.at.isoformat(),
            "engines_in_force": {
                name: {"engine": decision.ref, "reason": decision.reason}
                for name, decision in self.chosen.items()
            },
        }


def in_force_engines(
    ledger: Ledger,
    names: Sequence[str],
    at: date,
    engines_path: Path = DEFAULT_ENGINES,
    *,
    input_schemas: Mapping[str, Mapping[str, str]] | None = None,
    pinned: Mapping[str, int] | None = None,
) -> EnginesInForce:
    """The version of each engine in force at ``at`` (conf file + ledger), verified against its code.

    A version whose code changed without a new version is refused
    (:class:`~lakehouse.errors.EngineFingerprintError`) before anything is read or written.
    ``input_schemas`` (engine name -> table -> schema version) completes each identity;
    ``pinned`` (engine name -> version) is the operator's choice instead of the rule.
    """
    catalog = load_engines(engines_path)
    chosen = engines_in_force(catalog, ledger.reader.entries(), names, at, pinned=pinned)
    schemas = input_schemas or {}
    identities = tuple(
        verify_fingerprint(decision.spec).model_copy(update={"input_schemas": dict(schemas.get(name, {}))})
        for name, decision in chosen.items()
    )
    return EnginesInForce(at=at, chosen=chosen, identities=identities)


def pin(registry: TableRegistry, tables: Sequence[str]) -> dict[str, int | None]:
    """The current version of each input table: what the run will read, and only that."""
    pins: dict[str, int | None] = {}
    for name in tables:
        table = registry.get(name)
        pins[name] = table.current_version() if table.exists() else None
    log.debug("pinned %s", pins)
    return pins


@dataclass
class RunLog:
    """Filled in by the work inside :func:`recorded_run`: what it wrote and counted."""

    run_id: str
    outputs: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    content_hashes: dict[str, str] = field(default_factory=dict)
    """Output table -> :func:`lakehouse.digest.canonical_hash` of what the run wrote, when computed."""


@contextmanager
def recorded_run(
    ledger: Ledger,
    *,
    run_id: str,
    command: str,
    purpose: str,
    inputs: Mapping[str, int | None],
    engines: Sequence[EngineIdentity] = (),
    parameters: Mapping[str, Any] | None = None,
    ranges: Mapping[str, Mapping[str, Any]] | None = None,
) -> Iterator[RunLog]:
    """Record a run around a block of work; a failure is recorded, then re-raised."""
    ledger.writer.append(
        RunStarted(
            run_id=run_id,
            command=command,
            purpose=purpose,
            engines=tuple(engines),
            inputs={
                name: InputRead(version=version, range=dict((ranges or {}).get(name, {})))
                for name, version in sorted(inputs.items())
                if version is not None
            },
            parameters={k: _jsonable(v) for k, v in (parameters or {}).items()},
        )
    )
    log.info("run %s started: %s", run_id, command)
    run = RunLog(run_id=run_id)
    try:
        yield run
    except Exception as exc:
        ledger.writer.append(RunFinished(run_id=run_id, status="failed", error=recorded_error(exc)))
        log.info("run %s failed: %s", run_id, first_line(exc) or type(exc).__name__)
        raise
    ledger.writer.append(
        RunFinished(
            run_id=run_id,
            status="ok",
            outputs={
                name: OutputWritten(version=v, content_hash=run.content_hashes.get(name))
                for name, v in sorted(run.outputs.items())
            },
            counts=dict(sorted(run.counts.items())),
        )
    )
    log.info("run %s finished: %d output(s) written", run_id, len(run.outputs))


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return str(value)
