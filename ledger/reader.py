"""Reading the ledger: entries by run or kind, the tip, lineage, and verification.

The reader never writes. Queries filter the records of the ledger's current version, which
are read once per version and process (:func:`ledger.store.current_records`); ``verify``
reads the table afresh. The logic on the rows is in the pure functions of
:mod:`ledger.chain` and :mod:`ledger.lineage`.
"""

from __future__ import annotations

from lakehouse.errors import UsageError
from lakehouse.tables import Table, TableRegistry
from ledger.chain import LedgerRecord, VerifyReport, verify_chain
from ledger.entries import KINDS, LedgerEntryBase, out_ref
from ledger.lineage import PRODUCING_KINDS, Lineage, lineage_of
from ledger.store import current_records, last_record, ledger_table, read_records


class LedgerReader:
    """Queries over the ledger table."""

    def __init__(self, table: Table) -> None:
        self.table = table

    @classmethod
    def for_registry(cls, registry: TableRegistry) -> LedgerReader:
        """The reader of the configured ledger table."""
        return cls(ledger_table(registry))

    def records(self, *, kind: str | None = None, run_id: str | None = None) -> list[LedgerRecord]:
        """Stored records (optionally of one kind and/or run), in seq order."""
        return [
            r
            for r in current_records(self.table)
            if (kind is None or r.kind == kind) and (run_id is None or r.run_id == run_id)
        ]

    def entries(self, *, kind: str | None = None, run_id: str | None = None) -> list[LedgerEntryBase]:
        """Typed entries (optionally of one kind and/or run), in seq order."""
        return [r.entry() for r in self.records(kind=kind, run_id=run_id)]

    def by_run(self, run_id: str) -> list[LedgerEntryBase]:
        """Every entry of one run, in the order recorded."""
        return self.entries(run_id=run_id)

    def by_kind(self, kind: str) -> list[LedgerEntryBase]:
        """Every entry of one kind, in the order recorded."""
        if kind not in KINDS:
            raise UsageError(f"unknown ledger entry kind {kind!r}; known kinds: {', '.join(KINDS)}")
        return self.entries(kind=kind)

    def tip(self) -> LedgerRecord | None:
        """The last record (highest seq); None for a missing or empty ledger."""
        return last_record(current_records(self.table))

    def lineage(self, table: str, version: int) -> Lineage | None:
        """Which run produced ``table`` at ``version``, its engines and input snapshots.

        None if no entry names that version (written outside any recorded run).
        """
        records = current_records(self.table)
        wanted = out_ref(table, version)
        # v1 rows have no refs: keep them and let the pure function read their bodies.
        named = [r for r in records if r.kind in PRODUCING_KINDS and (r.refs is None or wanted in r.refs)]
        found = lineage_of(named, table, version)
        if found is None:
            return None
        started = [r for r in records if r.kind == "run_started" and r.run_id == found.run_id]
        return lineage_of([*named, *started], table, version)

    def verify(self) -> VerifyReport:
        """Check the whole chain and the table history it lives in (see :func:`verify_chain`)."""
        if not self.table.exists():
            return VerifyReport(
                False,
                0,
                None,
                f"{self.table.name} does not exist; run ledger.migrate (lakehouse ledger migrate)",
            )
        records = read_records(self.table)
        return verify_chain(records, self.table.history())
