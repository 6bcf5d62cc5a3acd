"""``lakehouse maintain``: retention and compaction as a recorded run that breaks nothing.

Routine maintenance is what platform teams run on a schedule; done with the formats' own
procedures it is blind to the ledger (see :mod:`workloads.replay.protection`). This run reads
the ledger first: the versions it protects, the open legal holds, and each table's open
candidates, then :func:`workloads.maintenance.plan.decide` says per table what may be expired
and whether its small files may be compacted. The Iceberg tags are brought up to date before
anything is expired (they are what keeps a protected snapshot), and the protections follow
the compacted versions afterwards.

A real run is recorded: ``run_started`` (the plan), one ``maintenance`` entry (per table what
was done, what was kept and why, files and bytes before and after) and ``run_finished`` whose
outputs are the compacted versions, so the timeline and ``asof`` know readers were served
them from then on. A dry run reads the same facts, writes nothing and records nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from lakehouse.tables import Table, TableRegistry
from ledger import Ledger, MaintenanceDone, TableMaintained
from workloads.compliance.holds import open_holds
from workloads.maintenance.plan import Guard, TableDecision, TableFacts, decide
from workloads.policies import MaintenancePolicy, ProtectionPolicy, RetentionPolicy
from workloads.replay.protection import Protection, protect, required_protections, sync_protections
from workloads.runs import new_run_id, pin, recorded_run

log = logging.getLogger(__name__)

COMMAND = "maintain"
Progress = Callable[[str], None]


@dataclass(frozen=True)
class TableMaintenance:
    """One table's maintenance: the decision, and the files and bytes before and after."""

    table: str
    zone: str
    format: str
    owner: str
    """Who answers for the table's layout: its declared ``owner``, or the policy's."""
    compact: bool
    """Compaction was decided (``compacted_to`` says whether the format found work)."""
    compacted_to: int | None
    expire_before: datetime | None
    kept: tuple[str, ...]
    live_files_before: int
    stored_files_before: int
    stored_bytes_before: int
    live_files_after: int | None = None
    """None in a dry run."""
    stored_files_after: int | None = None
    stored_bytes_after: int | None = None


@dataclass(frozen=True)
class MaintenanceReport:
    """What ``lakehouse maintain`` did (or, in a dry run, would do)."""

    owner: str
    """The policy's owner: of every table that declares none."""
    dry_run: bool
    holds: tuple[str, ...]
    tables: tuple[TableMaintenance, ...]
    run_id: str | None = None
    seconds: float = 0.0

    @property
    def stored_bytes_freed(self) -> int:
        return sum(
            t.stored_bytes_before - t.stored_bytes_after
            for t in self.tables
            if t.stored_bytes_after is not None
        )


def maintain(
    registry: TableRegistry,
    ledger: Ledger,
    retention: RetentionPolicy,
    policy: MaintenancePolicy,
    protection: ProtectionPolicy,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> MaintenanceReport:
    """Apply the retention and compaction policies to every configured table that exists."""
    started = time.monotonic()
    say = progress or (lambda _: None)
    records = ledger.reader.records()
    ledger_now = ledger.writer.clock.now()
    guards = _guards(required_protections(records, protection, ledger_now))
    holds = tuple(f"{h.hold_id} (placed by {h.by})" for h in open_holds(ledger).values())
    now = datetime.now(UTC)
    names = [n for n in sorted(registry.config.tables) if registry.get(n).exists()]
    planned: list[tuple[Table, TableDecision, TableFacts, int, int]] = []
    for index, name in enumerate(names, start=1):
        say(f"reading {name} ({index}/{len(names)})")
        table = registry.get(name)
        facts = _facts(table, policy)
        decision = decide(facts, guards.get(name, ()), holds, retention, policy, now)
        stored = table.stored_size()
        planned.append((table, decision, facts, stored.files, stored.bytes))
    if dry_run:
        tables = tuple(_result(d, f, files, size) for _, d, f, files, size in planned)
        return MaintenanceReport(policy.owner, True, holds, tables, seconds=time.monotonic() - started)
    if any(d.expire_before is not None for _, d, *_ in planned):
        protect(registry, records, protection, ledger_now, properties=False)  # tags keep protected snapshots
    run_id = new_run_id(COMMAND, ledger_now)
    done: list[TableMaintenance] = []
    with recorded_run(
        ledger,
        run_id=run_id,
        command=COMMAND,
        purpose="maintenance",
        inputs=pin(registry, names),
        parameters={
            "owner": policy.owner,
            "owners": {f.name: f.owner for _, _, f, *_ in planned},
            "retention": retention.model_dump(),
            "holds": list(holds),
            "plan": {
                d.table: {"compact": d.compact, "expire_before": d.expire_before, "kept": list(d.kept)}
                for _, d, *_ in planned
            },
        },
    ) as run:
        for index, (table, decision, facts, files, size) in enumerate(planned, start=1):
            result = _apply(table, decision, facts, files, size, run_id, say, f"({index}/{len(planned)})")
            if result.compacted_to is not None:
                run.outputs[table.name] = result.compacted_to
            done.append(result)
        ledger.writer.append(
            MaintenanceDone(run_id=run_id, owner=policy.owner, tables={t.table: _entry(t) for t in done})
        )
        run.counts.update(
            {
                "tables": len(done),
                "compacted": sum(t.compacted_to is not None for t in done),
                "expired": sum(t.expire_before is not None for t in done),
                "stored_files_before": sum(t.stored_files_before for t in done),
                "stored_files_after": sum(t.stored_files_after or 0 for t in done),
            }
        )
    if run.outputs:
        sync_protections(registry, ledger.writer.clock, protection)
    report = MaintenanceReport(policy.owner, False, holds, tuple(done), run_id, time.monotonic() - started)
    log.info(
        "maintain %s: %d tables, %d compacted, %d expired, %d bytes freed in %.1f s",
        run_id,
        len(done),
        run.counts["compacted"],
        run.counts["expired"],
        report.stored_bytes_freed,
        report.seconds,
    )
    return report


def _guards(protections: Sequence[Protection]) -> dict[str, list[Guard]]:
    found: dict[str, list[Guard]] = {}
    for item in protections:
        until = f"until {item.until.date().isoformat()}" if item.until else "while it can resume"
        what = f"{item.reason.value} by run {item.run_id} {until} ({item.rule})"
        found.setdefault(item.table, []).append(Guard(item.version, item.until, item.reason, what))
    return found


def _facts(table: Table, policy: MaintenancePolicy) -> TableFacts:
    sizes = table.data_file_sizes()
    target = table.spec.target_file_bytes or policy.target_file_bytes
    return TableFacts(
        name=table.name,
        zone=table.spec.zone.value,
        format=table.format.value,
        version_tags=table.capabilities.version_tags,
        versions=table.version_times(),
        candidates=tuple(table.list_candidates()),
        small_files=sum(size < policy.small_below(target) for size in sizes),
        live_files=len(sizes),
        owner=table.spec.owner or policy.owner,
        target_file_bytes=target,
    )


def _result(decision: TableDecision, facts: TableFacts, files: int, size: int) -> TableMaintenance:
    return TableMaintenance(
        table=facts.name,
        zone=facts.zone,
        format=facts.format,
        owner=facts.owner,
        compact=decision.compact,
        compacted_to=None,
        expire_before=decision.expire_before,
        kept=decision.kept,
        live_files_before=facts.live_files,
        stored_files_before=files,
        stored_bytes_before=size,
    )


def _apply(
    table: Table,
    decision: TableDecision,
    facts: TableFacts,
    files: int,
    size: int,
    run_id: str,
    say: Progress,
    counter: str,
) -> TableMaintenance:
    compacted_to = None
    if decision.compact:
        say(f"compacting {table.name} {counter}: {facts.live_files} data files, for {facts.owner}")
        compacted_to = table.compact(facts.target_file_bytes, run_id=run_id)
    if decision.expire_before is not None:
        say(f"expiring {table.name} {counter}: history before {decision.expire_before.isoformat()}")
        table.expire(decision.expire_before)
    after = table.stored_size()
    result = _result(decision, facts, files, size)
    return TableMaintenance(
        **{
            **result.__dict__,
            "compacted_to": compacted_to,
            "live_files_after": len(table.data_file_sizes()),
            "stored_files_after": after.files,
            "stored_bytes_after": after.bytes,
        }
    )


def _entry(result: TableMaintenance) -> TableMaintained:
    return TableMaintained(
        zone=result.zone,
        format=result.format,
        owner=result.owner,
        compacted_to=result.compacted_to,
        expired_before=result.expire_before,
        kept=result.kept,
        live_files_before=result.live_files_before,
        live_files_after=result.live_files_after or 0,
        stored_files_before=result.stored_files_before,
        stored_files_after=result.stored_files_after or 0,
        stored_bytes_before=result.stored_bytes_before,
        stored_bytes_after=result.stored_bytes_after or 0,
    )
