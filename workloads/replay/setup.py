"""Who a replay run is before anything is read: verified engines, pins, run id; and its I/O budget.

:func:`setup_replay` resolves and verifies the plan's engines, pins its inputs (reusing the
pins of an earlier run of the same plan and engines that is unfinished, awaiting approval
or published) and derives the run id. :func:`input_size` estimates what the replay reads
and :func:`check_budget` refuses a plan whose estimate is over its cap.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from lakehouse.errors import ReplayRefusedError
from lakehouse.tables import TableSize
from ledger.engines import EngineCatalog
from ledger.entries import RunStarted
from ledger.reader import LedgerReader
from workloads.replay import scope as sc
from workloads.replay.identity import ReplayEngines, pin_inputs, replay_run_id, resolve_engines
from workloads.replay.plan import CorrectionPlan
from workloads.replay.state import REPLAY_COMMAND, RESTARTABLE, run_state
from workloads.vocabulary import TableName

if TYPE_CHECKING:
    from lakehouse.tables import TableRegistry

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Setup:
    """What identifies a replay before anything is read."""

    plan: CorrectionPlan
    engines: ReplayEngines
    pins: Mapping[str, int]
    run_id: str
    bounds: tuple[datetime | None, datetime | None]
    resumed_from: str | None = None
    """The unfinished run whose pins were reused, if any."""


def _replay_runs(reader: LedgerReader, plan: CorrectionPlan, engines: ReplayEngines) -> list[str]:
    """Run ids of earlier replays of this exact plan and engines, newest first."""
    found = []
    for entry in reader.entries(kind="run_started"):
        if not isinstance(entry, RunStarted) or entry.command != REPLAY_COMMAND or entry.run_id is None:
            continue
        if entry.parameters.get("plan_digest") != plan.digest:
            continue
        if sorted(e.digest for e in entry.engines) != engines.digests():
            continue
        found.append(entry.run_id)
    return list(reversed(list(dict.fromkeys(found))))


def setup_replay(registry: TableRegistry, plan: CorrectionPlan, catalog: EngineCatalog) -> Setup:
    """Verify the engines, pin the inputs (reusing an unfinished run's pins) and derive the run id."""
    engines = resolve_engines(plan, catalog)
    reader = LedgerReader.for_registry(registry)
    bounds = sc.range_bounds(plan.range.event_from, plan.range.event_until)
    for run_id in _replay_runs(reader, plan, engines):
        state = run_state(run_id, reader.by_run(run_id))
        if state.status not in RESTARTABLE:
            log.info("plan %s resumes run %s (%s) with its pins", plan.plan, run_id, state.status)
            return Setup(plan, engines, state.pins, run_id, bounds, resumed_from=run_id)
    pins = pin_inputs(plan, registry)
    run_id = replay_run_id(plan, pins, engines)
    pinned = ", ".join(f"{name}@{version}" for name, version in sorted(pins.items()))
    log.info("plan %s is run %s (%s), inputs pinned at %s", plan.plan, run_id, engines.change, pinned)
    return Setup(plan, engines, pins, run_id, bounds)


def input_size(registry: TableRegistry, setup: Setup) -> TableSize:
    """What the replay reads: Silver in the event range, the whole answer table, Bronze feeds.

    Bytes and files count every pinned input; rows count the Silver events (the engines' input).
    """
    months = sc.month_bounds(setup.bounds)
    total = TableSize(0, 0, 0)
    for name, version in sorted(setup.pins.items()):
        table = registry.get(name)
        silver = name == TableName.SILVER_EVENTS
        first, last = months if silver else (None, None)
        size = table.size_at(
            version, partition="event_month" if silver else None, first=first, last=last, count_rows=silver
        )
        total = TableSize(total.files + size.files, total.bytes + size.bytes, total.rows + size.rows)
    log.info(
        "replay %s reads about %d bytes in %d files (%d Silver rows)",
        setup.run_id,
        total.bytes,
        total.files,
        total.rows,
    )
    return total


def check_budget(plan: CorrectionPlan, size: TableSize) -> None:
    """Refuse a replay whose estimated read exceeds the plan's I/O cap."""
    cap = plan.operations.max_bytes_read
    if size.bytes > cap:
        raise ReplayRefusedError(
            f"plan {plan.plan} would read about {size.bytes} bytes ({size.files} files), over its cap "
            f"operations.max_bytes_read = {cap}; narrow range.event_from/event_until or raise the cap"
        )
