"""Provenance: engine versions, runs, input/output identity, supersessions, publications.

The ledger is an append-only, hash-chained lakehouse table (``ops.ledger``) of typed
entries (:mod:`ledger.entries`). :class:`LedgerWriter` appends, :class:`LedgerReader`
queries and verifies, :func:`migrate` creates and upgrades the table, and
:mod:`ledger.engines` holds the declared engine versions of ``conf/engines.yaml``.
``ledger`` imports only ``lakehouse``.

The names below are re-exported for convenience; each also lives in its submodule
(``ledger.api.open_ledger``, ``ledger.writer.LedgerWriter``, ...), which is what the
tests import.
"""

from __future__ import annotations

from ledger.api import Ledger, open_ledger
from ledger.chain import GENESIS_HASH, LedgerRecord, VerifyReport, verify_chain
from ledger.clock import Clock, FixedClock, SystemClock
from ledger.entries import (
    KINDS,
    Approval,
    AuditExtract,
    DiffManifest,
    EngineDeclared,
    ErasedIn,
    ErasureCertificate,
    ErasureProgress,
    ErasureVerification,
    ExtractFile,
    ExtractManifest,
    LedgerEntry,
    LedgerEntryBase,
    LedgerSchemaChanged,
    LegalHold,
    MaintenanceDone,
    Notification,
    Publication,
    ReconciliationDecision,
    Rollback,
    RunFinished,
    RunStarted,
    Supersession,
    TableMaintained,
    parse_entry,
)
from ledger.identity import EngineIdentity, InputRead, OutputWritten
from ledger.lineage import Lineage, lineage_of
from ledger.migrations import CURRENT_SCHEMA_VERSION, MigrationReport, migrate
from ledger.reader import LedgerReader
from ledger.store import LEDGER_TABLE, AppendResult
from ledger.writer import LedgerWriter

__all__ = [
    "CURRENT_SCHEMA_VERSION",
    "GENESIS_HASH",
    "KINDS",
    "LEDGER_TABLE",
    "AppendResult",
    "Approval",
    "AuditExtract",
    "Clock",
    "DiffManifest",
    "EngineDeclared",
    "EngineIdentity",
    "ErasedIn",
    "ErasureCertificate",
    "ErasureProgress",
    "ErasureVerification",
    "ExtractFile",
    "ExtractManifest",
    "FixedClock",
    "InputRead",
    "Ledger",
    "LedgerEntry",
    "LedgerEntryBase",
    "LedgerReader",
    "LedgerRecord",
    "LedgerSchemaChanged",
    "LedgerWriter",
    "LegalHold",
    "Lineage",
    "MaintenanceDone",
    "MigrationReport",
    "Notification",
    "OutputWritten",
    "Publication",
    "ReconciliationDecision",
    "Rollback",
    "RunFinished",
    "RunStarted",
    "Supersession",
    "SystemClock",
    "TableMaintained",
    "VerifyReport",
    "lineage_of",
    "migrate",
    "open_ledger",
    "parse_entry",
    "verify_chain",
]
