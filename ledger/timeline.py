"""What the ledger says about a table over knowledge time (pure functions over ledger records).

From the ledger alone: which version of a table readers were served at any instant
(:meth:`Timeline.serving_at`), when each run's rows became visible
(:meth:`Timeline.visible_from`), which runs were published and later rolled back, and each
run's provenance (command, purpose, engine identities, pinned inputs).

**Serving epochs.** A table version becomes what readers see through exactly three kinds of
entries: a build's ``run_finished`` that names it as an output written to serving (not to
a candidate), a replay's ``publication``, and a ``rollback``. The version serving at ``T``
is the one named by the last such entry effective at or before ``T``. Commits the ledger
does not name (a candidate branch, a Delta shadow table, an unpublished write) are never
an answer, which is why route (b) goes through here rather than "newest commit before T".

**When a run's rows became visible.** A build's at its ``run_finished`` (its rows carry the
build's start time as ``recorded_at``, a little earlier); a replay's at its publication's
``effective_at`` (with which the publication stamps them). A row is known at ``T`` when both
its ``recorded_at`` and its run's visibility are at or before ``T`` and it was not yet
superseded at ``T``.

**Rolled-back windows.** Between a publication and its rollback readers saw the run's rows;
the rollback removed them from the table, so the bitemporal columns alone cannot say what
was known inside that window. :meth:`Timeline.rolled_back_at` reports it and the caller
answers from the format's time travel, or says that it cannot.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ledger import LedgerRecord
from ledger.clock import utc
from ledger.entries import ErasureCertificate, LegalHold, Publication, Rollback, RunFinished, RunStarted

BUILD, PUBLICATION, ROLLBACK = "build", "publication", "rollback"


@dataclass(frozen=True)
class ServingEpoch:
    """From ``effective_at`` on (until the next epoch), readers of the table saw ``version``."""

    version: int
    effective_at: datetime
    run_id: str
    kind: str
    """``build``, ``publication`` or ``rollback``."""
    seq: int
    """The ledger entry that says so."""


@dataclass(frozen=True)
class RunFacts:
    """A run's provenance as the ledger records it."""

    run_id: str
    command: str | None = None
    purpose: str | None = None
    engines: tuple[str, ...] = ()
    """``name@version#fingerprint[:12]`` of every engine the run declared."""
    inputs: Mapping[str, int] = field(default_factory=dict)
    """Pinned input table -> version/snapshot read."""
    published_at: datetime | None = None
    """When its rows in the table became visible to readers: a build's finish or a
    publication (None: never, in this table)."""


@dataclass(frozen=True)
class RolledBack:
    """A publication that readers saw from ``published_at`` until its rollback at ``rolled_back_at``."""

    run_id: str
    version: int
    published_at: datetime
    rolled_back_at: datetime


@dataclass(frozen=True)
class Timeline:
    """One table's serving history and the provenance of the runs that wrote it."""

    table: str
    epochs: tuple[ServingEpoch, ...]
    runs: Mapping[str, RunFacts]
    rollbacks: tuple[RolledBack, ...] = ()

    def serving_at(self, at: datetime) -> ServingEpoch | None:
        """The epoch readers were in at ``at`` (None: the table had no published version yet)."""
        moments = [e.effective_at for e in self.epochs]
        index = bisect_right(moments, utc(at))
        return self.epochs[index - 1] if index else None

    def visible_from(self, run_id: str) -> datetime | None:
        facts = self.runs.get(run_id)
        return facts.published_at if facts else None

    def rolled_back_at(self, at: datetime) -> RolledBack | None:
        """The rolled-back publication readers were seeing at ``at``, if any."""
        moment = utc(at)
        return next((r for r in self.rollbacks if r.published_at <= moment < r.rolled_back_at), None)

    def published_points(self) -> list[datetime]:
        """Every instant at which the served version changed."""
        return [e.effective_at for e in self.epochs]


def _engine_ref(engine: Any) -> str:
    return f"{engine.name}@{engine.version}#{engine.code_fingerprint[:12]}"


def timeline(records: Iterable[LedgerRecord], table: str) -> Timeline:
    """Build the :class:`Timeline` of ``table`` from ledger records (any order; sorted by seq)."""
    started: dict[str, RunStarted] = {}
    visible: dict[str, datetime] = {}
    epochs: list[ServingEpoch] = []
    publications: dict[str, list[tuple[datetime, int]]] = {}
    rollbacks: list[RolledBack] = []
    for record in sorted(records, key=lambda r: r.seq):
        if record.kind not in ("run_started", "run_finished", "publication", "rollback"):
            continue
        entry = record.entry()
        if isinstance(entry, RunStarted):
            started.setdefault(entry.run_id, entry)  # a run's first start: its publish records another
        elif isinstance(entry, RunFinished):
            out = entry.outputs.get(table)
            if entry.status == "ok" and out is not None and out.candidate is None:
                moment = utc(record.recorded_at)
                epochs.append(ServingEpoch(out.version, moment, entry.run_id, BUILD, record.seq))
                visible.setdefault(entry.run_id, moment)
        elif isinstance(entry, Publication) and table in entry.tables:
            moment = utc(entry.effective_at)
            epochs.append(ServingEpoch(entry.tables[table], moment, entry.run_id, PUBLICATION, record.seq))
            visible.setdefault(entry.run_id, moment)
            publications.setdefault(entry.run_id, []).append((moment, entry.tables[table]))
        elif isinstance(entry, Rollback) and entry.table == table:
            moment = utc(record.recorded_at)
            epochs.append(ServingEpoch(entry.new_version, moment, entry.run_id, ROLLBACK, record.seq))
            live = [p for p in publications.get(entry.run_id, []) if p[1] == entry.from_version]
            if live:
                rollbacks.append(RolledBack(entry.run_id, entry.from_version, live[-1][0], moment))
    epochs.sort(key=lambda e: (e.effective_at, e.seq))
    runs = {
        run_id: RunFacts(
            run_id=run_id,
            command=start.command,
            purpose=start.purpose,
            engines=tuple(_engine_ref(e) for e in start.engines),
            inputs={name: read.version for name, read in sorted(start.inputs.items())},
            published_at=visible.get(run_id),
        )
        for run_id, start in started.items()
    }
    for run_id, moment in visible.items():
        runs.setdefault(run_id, RunFacts(run_id=run_id, published_at=moment))
    return Timeline(table=table, epochs=tuple(epochs), runs=runs, rollbacks=tuple(rollbacks))


def legal_holds(records: Iterable[LedgerRecord]) -> dict[str, LegalHold]:
    """Every legal hold as its last entry says (placed or released), by hold id."""
    holds: dict[str, LegalHold] = {}
    for record in records:
        if record.kind == "legal_hold":
            entry = record.entry()
            if isinstance(entry, LegalHold):
                holds[entry.hold_id] = entry
    return holds


def erasure_certificates(records: Iterable[LedgerRecord]) -> tuple[ErasureCertificate, ...]:
    """Every erasure certificate in the ledger, in the order recorded."""
    return tuple(
        entry
        for entry in (record.entry() for record in records if record.kind == "erasure_certificate")
        if isinstance(entry, ErasureCertificate)
    )


def purged_by_erasure(records: Iterable[LedgerRecord]) -> dict[tuple[str, int], str]:
    """(table, version) -> the erasure certificate that purged it, from the ledger."""
    purged: dict[tuple[str, int], str] = {}
    for record in records:
        if record.kind != "erasure_certificate":
            continue
        entry = record.entry()
        if isinstance(entry, ErasureCertificate):
            for table, erased in entry.tables.items():
                purged.update({(table, v): entry.certificate_id for v in erased.versions_purged})
    return purged
