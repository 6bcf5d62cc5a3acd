"""Which run produced a version of a table, with what engines, from which inputs (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ledger.chain import LedgerRecord
from ledger.entries import LedgerEntryBase, Publication, Rollback, RunFinished, RunStarted
from ledger.identity import EngineIdentity, InputRead

PRODUCING_KINDS = ("run_finished", "publication", "rollback")
"""Entry kinds that name a table version as produced or made current."""


@dataclass(frozen=True)
class Lineage:
    """The provenance of one table version."""

    table: str
    version: int
    run_id: str
    """The run that wrote the version (for a publication: the run that built the candidate)."""
    produced_by: tuple[str, ...]
    """Kinds of the entries naming this version, in ledger order (e.g. run_finished, publication)."""
    command: str | None = None
    purpose: str | None = None
    engines: tuple[EngineIdentity, ...] = ()
    inputs: Mapping[str, InputRead] = field(default_factory=dict)
    """Input identity of the run: table -> version/snapshot read and range."""
    effective_at: datetime | None = None
    """When the version became what readers see (from the publication entry), if published."""
    evidence: tuple[int, ...] = ()
    """Seqs of the ledger entries this answer rests on."""


def _producing_run(entry: LedgerEntryBase, table: str, version: int) -> str | None:
    if isinstance(entry, RunFinished):
        out = entry.outputs.get(table)
        return entry.run_id if entry.status == "ok" and out is not None and out.version == version else None
    if isinstance(entry, Publication):
        if entry.tables.get(table) == version:
            return entry.built_by_run or entry.run_id
        return None
    if isinstance(entry, Rollback) and entry.table == table and entry.new_version == version:
        return entry.run_id
    return None


def lineage_of(records: Sequence[LedgerRecord], table: str, version: int) -> Lineage | None:
    """The lineage of ``table`` at ``version`` from any superset of the relevant records.

    The producing run is the first one whose entry names the version (a run's own
    ``run_finished`` comes before the ``publication`` of its candidate); None if no entry
    names it.
    """
    ordered = sorted(records, key=lambda r: r.seq)
    named: list[tuple[LedgerRecord, LedgerEntryBase, str]] = []
    for record in ordered:
        if record.kind not in PRODUCING_KINDS:
            continue
        entry = record.entry()
        run = _producing_run(entry, table, version)
        if run is not None:
            named.append((record, entry, run))
    if not named:
        return None
    run_id = named[0][2]
    started = next(
        (
            (r, e)
            for r in ordered
            if r.kind == "run_started" and r.run_id == run_id
            for e in [r.entry()]
            if isinstance(e, RunStarted)
        ),
        None,
    )
    effective = next((e.effective_at for _, e, _ in named if isinstance(e, Publication)), None)
    evidence = [r.seq for r, _, _ in named]
    if started is not None:
        evidence.append(started[0].seq)
    start_entry = started[1] if started is not None else None
    return Lineage(
        table=table,
        version=version,
        run_id=run_id,
        produced_by=tuple(e.kind for _, e, _ in named),
        command=start_entry.command if start_entry else None,
        purpose=start_entry.purpose if start_entry else None,
        engines=start_entry.engines if start_entry else (),
        inputs=dict(start_entry.inputs) if start_entry else {},
        effective_at=effective,
        evidence=tuple(sorted(evidence)),
    )
