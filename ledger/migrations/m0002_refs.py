"""Ledger schema v2: a ``refs`` column, and entry_id and refs covered by the hash.

Why: lineage ("which run produced silver.events version 12?") and replay scoping ("what
did correlation@1 produce?") had to parse every entry's body. ``refs`` holds short labels
(``out:<table>@<version>``, ``in:<table>@<version>``, ``engine:<name>@<version>``, see
:meth:`ledger.entries.LedgerEntryBase.refs`) that Spark can filter on. Rows written under
v1 keep ``refs`` null and their v1 hashes; readers fall back to the body for them.
"""

from __future__ import annotations

from lakehouse.errors import LedgerSchemaError
from lakehouse.tables import Table
from ledger.store import storage_for, table_columns

VERSION = 2
NAME = "m0002_refs"
DESCRIPTION = "add refs (queryable table/engine labels); hash entry_id and refs"
COLUMNS: tuple[str, ...] = ("refs ARRAY<STRING>",)


def apply(table: Table) -> None:
    """Add the ``refs`` column unless it is already there (idempotent; safe to rerun)."""
    if "refs" in table_columns(table):
        return
    statement = f"ALTER TABLE {storage_for(table).sql_name(table)} ADD COLUMNS (refs ARRAY<STRING>)"
    try:
        table.spark.sql(statement)
    except Exception as exc:
        if "refs" in table_columns(table):  # another process added it first
            return
        raise LedgerSchemaError(
            f"cannot add column refs to {table.name}: {str(exc).splitlines()[0]}"
        ) from exc
