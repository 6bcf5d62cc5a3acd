"""One call to get a ready ledger: migrated, with its writer and reader."""

from __future__ import annotations

from dataclasses import dataclass

from lakehouse.tables import TableRegistry
from ledger.clock import Clock
from ledger.migrations import MigrationReport, migrate
from ledger.reader import LedgerReader
from ledger.store import ledger_table
from ledger.writer import LedgerWriter


@dataclass(frozen=True)
class Ledger:
    """The configured ledger, migrated and ready: a writer and a reader."""

    writer: LedgerWriter
    reader: LedgerReader
    migration: MigrationReport


def open_ledger(registry: TableRegistry, *, clock: Clock) -> Ledger:
    """Create or upgrade ``ops.ledger`` as needed (idempotent) and return its writer and reader."""
    report = migrate(registry, clock=clock)
    table = ledger_table(registry)
    return Ledger(LedgerWriter(table, clock=clock), LedgerReader(table), report)
