"""Reading the ledger: entries by run or kind, the tip, lineage, and verification.

The reader never writes. Each method is one or two Spark queries over ``ops.ledger``; the
logic on the rows is in the pure functions of :mod:`ledger.chain` and :mod:`ledger.lineage`.
"""

from __future__ import annotations

from lakehouse.errors import UsageError
from lakehouse.tables import Table, TableRegistry
from ledger.chain import LedgerRecord, VerifyReport, verify_chain
from ledger.entries import KINDS, LedgerEntryBase, out_ref
from ledger.lineage import PRODUCING_KINDS, Lineage, lineage_of
from ledger.store import ledger_table, read_records, storage_for, table_columns


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


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
        if not self.table.exists():
            return []
        conditions = []
        if kind is not None:
            conditions.append(f"kind = {_quote(kind)}")
        if run_id is not None:
            conditions.append(f"run_id = {_quote(run_id)}")
        return read_records(self.table, where=" AND ".join(conditions) or None)

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
        if not self.table.exists():
            return None
        found = read_records(
            self.table, where=f"seq = (SELECT max(seq) FROM {storage_for(self.table).sql_name(self.table)})"
        )
        return found[-1] if found else None

    def lineage(self, table: str, version: int) -> Lineage | None:
        """Which run produced ``table`` at ``version``, its engines and input snapshots.

        None if no entry names that version (written outside any recorded run).
        """
        if not self.table.exists():
            return None
        columns = table_columns(self.table)
        kinds = ", ".join(_quote(k) for k in PRODUCING_KINDS)
        condition = f"kind IN ({kinds})"
        if "refs" in columns:
            # v1 rows have no refs: keep them and let the pure function read their bodies.
            condition += f" AND (refs IS NULL OR array_contains(refs, {_quote(out_ref(table, version))}))"
        named = read_records(self.table, where=condition, columns=columns)
        found = lineage_of(named, table, version)
        if found is None:
            return None
        started = read_records(
            self.table,
            where=f"kind = 'run_started' AND run_id = {_quote(found.run_id)}",
            columns=columns,
        )
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
