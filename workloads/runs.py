"""Every build is a recorded run: pinned inputs and engine identities before, outputs after.

:func:`recorded_run` writes ``run_started`` (what will be read, which engines will run, with
their code fingerprints verified) before the work, and ``run_finished`` (status, versions
written, counts) after it, also when it fails. The build functions read exactly the pinned
versions recorded here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from lakehouse.digest import digest_of
from lakehouse.tables import TableRegistry
from lakehouse.tables.base import first_line
from ledger import EngineIdentity, InputRead, Ledger, OutputWritten, RunFinished, RunStarted
from ledger.engines import load_engines, verify_fingerprint

log = logging.getLogger(__name__)

DEFAULT_ENGINES = Path("conf/engines.yaml")


def new_run_id(command: str, at: datetime, salt: Any = None) -> str:
    """``<command>-<UTC time>-<8 hex>``: readable, sortable and unique per start."""
    stamp = at.strftime("%Y%m%dT%H%M%S%fZ")
    return f"{command}-{stamp}-{digest_of([command, stamp, salt])[:8]}"


def verified_engines(
    refs: Sequence[tuple[str, int]], engines_path: Path = DEFAULT_ENGINES
) -> tuple[EngineIdentity, ...]:
    """Identities of the declared engines a run uses, refusing any whose code changed."""
    catalog = load_engines(engines_path)
    return tuple(verify_fingerprint(catalog.resolve(name, version)) for name, version in refs)


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
        ledger.writer.append(
            RunFinished(run_id=run_id, status="failed", error=first_line(exc) or type(exc).__name__)
        )
        log.info("run %s failed: %s", run_id, first_line(exc) or type(exc).__name__)
        raise
    ledger.writer.append(
        RunFinished(
            run_id=run_id,
            status="ok",
            outputs={name: OutputWritten(version=v) for name, v in sorted(run.outputs.items())},
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
