"""Numbered, idempotent migrations of the ledger table's schema.

Each module ``mNNNN_<name>.py`` defines ``VERSION`` (= NNNN), ``NAME``, ``DESCRIPTION``,
``COLUMNS`` (the columns it adds, as Spark DDL) and ``apply(table)``, which changes the
table and must be safe to run again. :func:`migrate` runs every step above the ledger's
current version and records each one *in the chain* as a ``ledger_schema`` entry written
under the new version, so the ledger's schema version is itself tamper-evident: it is the
``schema_version`` of the tip record (0 for a missing or empty table).

Rows are never rewritten: each keeps the hash formula of the version it was written under
(:data:`ledger.chain.HASHED_FIELDS`), so an upgraded ledger still verifies.

The table's schema in ``conf/lakehouse.yaml`` (``ops.ledger``) must equal
:func:`schema_ddl` of the current version; a test checks that.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from lakehouse.errors import ConfigError, LedgerSchemaError
from lakehouse.tables import Table, TableRegistry
from ledger.chain import HASHED_FIELDS
from ledger.clock import Clock
from ledger.entries import LedgerSchemaChanged
from ledger.migrations import m0001_initial, m0002_refs
from ledger.store import LEDGER_TABLE, commit_entries, ledger_table, read_tip


@dataclass(frozen=True)
class Migration:
    """One numbered step of the ledger schema."""

    version: int
    name: str
    description: str
    columns: tuple[str, ...]
    apply: Callable[[Table], None]

    def entry(self) -> LedgerSchemaChanged:
        """The ledger entry that records this step (the same for every ledger: idempotent)."""
        return LedgerSchemaChanged(
            schema_version=self.version,
            migration=self.name,
            description=self.description,
            columns_added=tuple(c.split()[0] for c in self.columns),
        )


def _load(module: ModuleType) -> Migration:
    return Migration(module.VERSION, module.NAME, module.DESCRIPTION, tuple(module.COLUMNS), module.apply)


MIGRATIONS: tuple[Migration, ...] = tuple(_load(m) for m in (m0001_initial, m0002_refs))
CURRENT_SCHEMA_VERSION = MIGRATIONS[-1].version
"""The schema version this code writes."""

if [m.version for m in MIGRATIONS] != list(range(1, len(MIGRATIONS) + 1)) or set(HASHED_FIELDS) != {
    m.version for m in MIGRATIONS
}:
    raise LedgerSchemaError("ledger migrations must be numbered 1..N, each with its hashed fields")


@dataclass(frozen=True)
class MigrationReport:
    """What :func:`migrate` did."""

    from_version: int
    to_version: int
    applied: tuple[str, ...]


def schema_ddl(version: int = CURRENT_SCHEMA_VERSION) -> str:
    """The ledger table's full column DDL at a schema version."""
    return ", ".join(c for m in MIGRATIONS if m.version <= version for c in m.columns)


def schema_version(table: Table) -> int:
    """The ledger's schema version: that of its tip record (0 if missing or empty)."""
    tip = read_tip(table)
    return tip.schema_version if tip is not None else 0


def migrate(target: TableRegistry | Table, *, clock: Clock, to_version: int | None = None) -> MigrationReport:
    """Bring the ledger to ``to_version`` (default: current); creates it if missing.

    Idempotent: a ledger already there is left alone, and a step interrupted halfway
    (table changed, entry not yet written) completes on the next run. Two processes
    migrating at once end with each step recorded once (entries are content-addressed).
    """
    table = ledger_table(target) if isinstance(target, TableRegistry) else target
    goal = CURRENT_SCHEMA_VERSION if to_version is None else to_version
    if not 0 <= goal <= CURRENT_SCHEMA_VERSION:
        raise LedgerSchemaError(
            f"ledger schema v{goal} does not exist; this code knows v1..v{CURRENT_SCHEMA_VERSION}"
        )
    start = schema_version(table)
    if start == 0 and isinstance(target, TableRegistry):
        _refuse_a_ledger_in_another_format(target)
    if start > CURRENT_SCHEMA_VERSION:
        raise LedgerSchemaError(
            f"{table.name} is at ledger schema v{start}, newer than this code (v{CURRENT_SCHEMA_VERSION}); "
            f"upgrade lakehouse-replay"
        )
    if start > goal:
        raise LedgerSchemaError(
            f"{table.name} is at ledger schema v{start}; migrations never go back to v{goal}"
        )
    applied = []
    for migration in MIGRATIONS:
        if not start < migration.version <= goal:
            continue
        migration.apply(table)
        commit_entries(
            table,
            [migration.entry()],
            clock=clock,
            schema_version=migration.version,
            expect_tip_schema=migration.version - 1,
        )
        applied.append(migration.name)
    return MigrationReport(start, max(start, goal), tuple(applied))


def _refuse_a_ledger_in_another_format(registry: TableRegistry) -> None:
    """Refuse to start a new ledger while the configured one exists in another format.

    A work dir made while ``ops`` was Delta (the default before it became Iceberg) keeps its
    ledger there; starting an empty Iceberg ledger beside it would lose every run's record.
    """
    other = registry.in_another_format(LEDGER_TABLE)
    if other is not None:
        configured = registry.spec(LEDGER_TABLE).format.value
        raise ConfigError(
            f"{LEDGER_TABLE} exists as a {other.spec.format.value} table ({other.location}) but "
            f"zone_formats.ops is {configured}: set 'zone_formats: {{ops: {other.spec.format.value}}}' "
            f"in lakehouse.yaml to keep this lakehouse, or use a new --workdir"
        )
