"""One call to get a ready ledger: migrated, with its writer and reader."""

from __future__ import annotations

from dataclasses import dataclass

from lakehouse.tables import TableRegistry
from ledger.clock import Clock
from ledger.migrations import MigrationReport, migrate
from ledger.reader import LedgerReader
from ledger.store import ledger_table
from ledger.writer import LedgerWriter, lineage_of_table


@dataclass(frozen=True)
class Ledger:
    """The configured ledger, migrated and ready: a writer and a reader."""

    writer: LedgerWriter
    reader: LedgerReader
    migration: MigrationReport


def open_ledger(registry: TableRegistry, *, clock: Clock) -> Ledger:
    """Create or upgrade ``ops.ledger`` as needed (idempotent) and return its writer and reader.

    The writer sends the OpenLineage events of the runs it records (``lineage:`` in the config).
    """
    report = migrate(registry, clock=clock)
    table = ledger_table(registry)
    writer = LedgerWriter(table, clock=clock, lineage=lineage_of_table(registry, table))
    return Ledger(writer, LedgerReader(table), report)
