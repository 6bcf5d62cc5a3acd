"""Appending entries to the ledger: one batch, one commit, one linear chain."""

from __future__ import annotations

from lakehouse.tables import Table, TableRegistry
from ledger.clock import Clock
from ledger.entries import LedgerEntryBase
from ledger.migrations import CURRENT_SCHEMA_VERSION
from ledger.openlineage_events import LineageEmitter, emitter_for
from ledger.store import (
    DEFAULT_MAX_ATTEMPTS,
    AppendResult,
    AttemptHook,
    commit_entries,
    current_records,
    ledger_table,
)


class LedgerWriter:
    """Appends typed entries to ``ops.ledger`` (see :mod:`ledger.store` for how it stays linear).

    ``clock`` gives ``recorded_at``: pass :class:`ledger.clock.SystemClock` in jobs and a
    :class:`ledger.clock.FixedClock` in tests. The ledger must be at the current schema
    version (run :func:`ledger.migrations.migrate` first; :func:`ledger.open_ledger` does).
    ``lineage`` sends the OpenLineage events of the run entries each append wrote
    (:mod:`ledger.openlineage_events`); :meth:`for_registry` and :func:`ledger.open_ledger`
    set it from the configuration.
    """

    def __init__(
        self,
        table: Table,
        *,
        clock: Clock,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        on_attempt: AttemptHook | None = None,
        lineage: LineageEmitter | None = None,
    ) -> None:
        self.table = table
        self.clock = clock
        self.max_attempts = max_attempts
        self.on_attempt = on_attempt
        self.lineage = lineage

    @classmethod
    def for_registry(
        cls,
        registry: TableRegistry,
        *,
        clock: Clock,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        on_attempt: AttemptHook | None = None,
    ) -> LedgerWriter:
        """The writer of the configured ledger table, sending the configured lineage events."""
        table = ledger_table(registry)
        return cls(
            table,
            clock=clock,
            max_attempts=max_attempts,
            on_attempt=on_attempt,
            lineage=lineage_of_table(registry, table),
        )

    def append(
        self, *entries: LedgerEntryBase, run_id: str | None = None, deduplicate: bool = True
    ) -> AppendResult:
        """Append ``entries`` atomically, in order, in one commit.

        ``run_id`` labels the commit in the table's history (default: the entries' run id,
        if they share one). With ``deduplicate`` (the default) entries the ledger already
        holds (same content address, :meth:`LedgerEntryBase.entry_id`) are skipped, so a
        rerun that records the same facts again appends nothing.
        """
        result = commit_entries(
            self.table,
            entries,
            clock=self.clock,
            schema_version=CURRENT_SCHEMA_VERSION,
            expect_tip_schema=CURRENT_SCHEMA_VERSION,
            run_id=run_id,
            deduplicate=deduplicate,
            max_attempts=self.max_attempts,
            on_attempt=self.on_attempt,
        )
        if self.lineage is not None:
            self.lineage.emit_records(result.records)
        return result


def lineage_of_table(registry: TableRegistry, table: Table) -> LineageEmitter | None:
    """The configured OpenLineage emitter of the ledger ``table`` (None: lineage disabled)."""
    return emitter_for(
        registry.config, lambda run_id: [r for r in current_records(table) if r.run_id == run_id]
    )
