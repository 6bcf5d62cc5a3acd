"""Ledger schema v1: the hash-chained table itself.

Columns: ``seq`` (dense from 0), ``entry_id``, ``kind``, ``run_id``, ``recorded_at``,
``body`` (canonical JSON), ``prev_hash``, ``hash``, ``schema_version``. A v1 record's
hash covers seq, kind, run_id, recorded_at, body, prev_hash and schema_version
(:data:`ledger.chain.HASHED_FIELDS`).
"""

from __future__ import annotations

import time

from lakehouse.errors import LedgerSchemaError
from lakehouse.tables import Table
from ledger.store import is_conflict, storage_for

VERSION = 1
NAME = "m0001_initial"
DESCRIPTION = "create the hash-chained ledger table"
COLUMNS: tuple[str, ...] = (
    "seq BIGINT NOT NULL",
    "entry_id STRING NOT NULL",
    "kind STRING NOT NULL",
    "run_id STRING",
    "recorded_at TIMESTAMP NOT NULL",
    "body STRING NOT NULL",
    "prev_hash STRING NOT NULL",
    "hash STRING NOT NULL",
    "schema_version INT NOT NULL",
)
ATTEMPTS = 5


def apply(table: Table) -> None:
    """Create the table with the v1 columns unless it exists (then there is nothing to do).

    A table created straight from ``conf/lakehouse.yaml`` (for example by ``lakehouse demo``)
    already has the newest columns; later steps see that and only record themselves.
    Creation uses ``CREATE TABLE IF NOT EXISTS`` rather than ``Table.create``, whose
    clean-up after a failed create would remove a table another process just created:
    two processes opening a new ledger at once both succeed here.
    """
    storage = storage_for(table)
    problem = "other processes kept conflicting"
    for attempt in range(ATTEMPTS):
        storage.refresh(table)
        if table.exists():
            return
        try:
            storage.create_if_missing(table, ", ".join(COLUMNS))
        except Exception as exc:
            problem = str(exc).strip().splitlines()[0]
            if not (is_conflict(exc) or _being_created(exc)):
                raise LedgerSchemaError(f"cannot create {table.name}: {problem}") from exc
            time.sleep(0.2 * (attempt + 1))
    storage.refresh(table)
    if not table.exists():
        raise LedgerSchemaError(f"cannot create {table.name}: {problem}; retry")


def _being_created(exc: BaseException) -> bool:
    """Delta's answer while another process has started, not finished, creating the table."""
    return "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION" in str(exc)
