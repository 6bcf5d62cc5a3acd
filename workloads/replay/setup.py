"""Who a replay run is before anything is read: verified engines, pins, run id; and its I/O budget.

:func:`setup_replay` resolves and verifies the plan's engines (for a producer change, with
the entity resolver in force at the processing date), pins its inputs (reusing the pins of
an earlier run of the same plan and engines that is unfinished, awaiting approval or
published) and derives the run id. :func:`check_effective` refuses a correction whose new
version has not taken effect yet. :func:`input_size` estimates what the replay reads
and :func:`check_budget` refuses a plan whose estimate is over its cap.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING

from lakehouse.errors import PinnedInputGoneError, ReplayRefusedError, UsageError
from lakehouse.tables import TableSize, describe_versions
from ledger.clock import Clock
from ledger.engines import EngineCatalog, EngineSpec, engines_in_force
from ledger.entries import RunStarted
from ledger.reader import LedgerReader
from workloads.replay import scope as sc
from workloads.replay.answer import AnswerTable
from workloads.replay.identity import (
    ReplayEngines,
    change_kind,
    pin_inputs,
    replay_run_id,
    resolve_engines,
    upstream_resolver,
)
from workloads.replay.plan import CorrectionPlan, Purpose
from workloads.replay.state import REPLAY_COMMAND, RESTARTABLE, run_state
from workloads.vocabulary import ChangeKind, TableName

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
    """The earlier run of this plan whose pins were reused, if any."""
    processing_date: date | None = None
    """The UTC date the resolver in force was chosen for (producer changes only)."""
    resumed_status: str | None = None
    """That run's status (``published`` means there is nothing left to replay)."""
    abandoned: str | None = None
    """An earlier run that could not resume because maintenance removed its pinned inputs
    (``rebuild`` then pins afresh)."""

    @property
    def answer(self) -> AnswerTable:
        """The declaration of the table the plan restates."""
        return self.plan.answer.declaration

    @property
    def inputs_route(self) -> str:
        """Where the inputs' versions come from, for the dry run."""
        if self.resumed_from is not None:
            return f"the pins of run {self.resumed_from} ({self.resumed_status}), resumed"
        if self.abandoned is not None:
            return (
                f"the current versions: the pins of run {self.abandoned} are gone, and the current "
                f"version's bitemporal rows hold what its expired versions held"
            )
        return "the current versions"


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


def resolver_in_force(
    reader: LedgerReader, catalog: EngineCatalog, producer: EngineSpec, at: date
) -> EngineSpec:
    """The entity resolver in force at ``at`` (the rule Silver builds follow), for a producer change.

    Serving's rows were decided on its entities (after an ER restatement is published, on
    the new resolver's, even before Silver is rebuilt), so both producer versions run on them.
    """
    name = upstream_resolver(catalog, producer)
    chosen = engines_in_force(catalog, reader.entries(), [name], at)[name]
    log.info("a change of %s runs on %s, in force at %s (%s)", producer.name, chosen.ref, at, chosen.reason)
    return chosen.spec


def setup_replay(
    registry: TableRegistry,
    plan: CorrectionPlan,
    catalog: EngineCatalog,
    *,
    clock: Clock | None = None,
    resolver: EngineSpec | None = None,
    rebuild: bool = False,
) -> Setup:
    """Verify the engines, pin the inputs (reusing an unfinished run's pins) and derive the run id.

    ``clock`` gives the processing date a producer change chooses its resolver for (read
    once, and only for a producer change). ``resolver`` fixes that resolver instead (to
    set up a recorded run again, with the resolver its ``run_started`` names).

    A run that would resume but whose pinned inputs maintenance removed is refused
    (:class:`~lakehouse.errors.PinnedInputGoneError`, naming the table, the version and
    what removed it); with ``rebuild`` a new run pins the current versions instead. A
    published run's pins are not checked: nothing reads them again.
    """
    reader = LedgerReader.for_registry(registry)
    today: date | None = None
    if resolver is None and change_kind(plan, catalog) is ChangeKind.PRODUCER:
        if clock is None:
            raise UsageError(f"plan {plan.plan}: a producer change needs the processing clock")
        today = clock.now().date()
        resolver = resolver_in_force(reader, catalog, catalog.resolve(plan.engine_change.engine), today)
    engines = resolve_engines(plan, catalog, resolver=resolver)
    bounds = sc.range_bounds(plan.range.event_from, plan.range.event_until)
    abandoned = None
    for run_id in _replay_runs(reader, plan, engines):
        state = run_state(run_id, reader.by_run(run_id))
        if state.status in RESTARTABLE:
            continue
        gone = [] if state.publications else _gone_pins(registry, state.pins)
        if gone and rebuild:
            log.warning("run %s cannot resume (%s); a new run pins the current versions", run_id, gone)
            abandoned = run_id
            break
        if gone:
            raise PinnedInputGoneError(
                f"run {run_id} cannot resume: its pinned {'input' if len(gone) == 1 else 'inputs'} "
                f"{'; '.join(gone)}. Rerun with --rebuild to start a new run pinned at the current versions"
            )
        log.info("plan %s resumes run %s (%s) with its pins", plan.plan, run_id, state.status)
        return Setup(
            plan,
            engines,
            state.pins,
            run_id,
            bounds,
            resumed_from=run_id,
            processing_date=today,
            resumed_status=state.status,
        )
    pins = pin_inputs(plan, registry)
    run_id = replay_run_id(plan, pins, engines)
    log.info(
        "plan %s is run %s (%s), inputs pinned at %s",
        plan.plan,
        run_id,
        engines.change,
        describe_versions(pins),
    )
    return Setup(plan, engines, pins, run_id, bounds, processing_date=today, abandoned=abandoned)


def _gone_pins(registry: TableRegistry, pins: Mapping[str, int]) -> list[str]:
    """``table@version is gone: what removed it`` for each pinned input that cannot be read."""
    gone = []
    for name, version in sorted(pins.items()):
        table = registry.get(name)
        if not table.exists():
            gone.append(f"{name}@{version} is gone: {name} does not exist any more")
        elif not table.readable(version):
            gone.append(f"{name}@{version} is gone: {table.removal_note(version)}")
    return gone


def check_effective(setup: Setup, at: date) -> None:
    """Refuse a correction whose new version does not take effect by ``at`` (its processing date).

    A published restatement is what puts a restating version in force, but only from its
    ``effective_from`` (:mod:`ledger.engines.in_force`): published earlier, the next
    forward build would still run the old version and rebuild every restated row back, so
    the correction would be silently undone. A comparison (never published) and a dry run
    may run any time: measuring a version before it takes effect is what they are for.
    """
    new = setup.engines.new
    if setup.plan.purpose is not Purpose.CORRECTION or new.effective_from <= at:
        return
    raise ReplayRefusedError(
        f"plan {setup.plan.plan}: {new.ref} takes effect {new.effective_from}, after this replay's "
        f"date {at}; published now, the next build would still run {setup.engines.old.ref} and undo "
        f"it. Run it with --purpose comparison now, or as a correction from {new.effective_from}"
    )


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
