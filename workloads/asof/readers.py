"""Two ways to read the tables and the ledger for ``lakehouse asof``: Spark, or no JVM at all.

Both readers answer the same three questions, so every route runs on either:

* ``ledger_records()``: every ledger record;
* ``rows(table, scope, version=None)``: the rows of a table (now, or at a version) that
  match a :class:`Scope`, as plain dicts with aware UTC datetimes;
* ``columns(table)``: the table's filterable columns and their simple types.

:class:`SparkReader` uses the lakehouse's own table classes. :class:`PythonReader` starts no
JVM: Iceberg tables through pyiceberg on the same JDBC (SQLite) catalog, Delta tables (Bronze by
default, and the ledger when the ``ops`` zone is Delta) through the ``deltalake`` package.
A version that no longer exists (snapshots expired, files vacuumed) raises
:class:`VersionGoneError`, never an obscure storage error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote, urlparse

from lakehouse.config import LakehouseConfig, TableFormat
from lakehouse.errors import UnknownTableError, VersionGoneError, VersionNotFoundError
from lakehouse.expressions import (
    And,
    Comparison,
    Expr,
    IsNull,
    Or,
    matches,
    to_pyiceberg,
    to_spark_column,
)
from lakehouse.tables.registry import table_location, table_spec
from ledger import LedgerRecord
from ledger.store import LEDGER_TABLE

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.tables import TableRegistry
    from lakehouse.tables.base import TableSpec


@dataclass(frozen=True)
class Scope:
    """Which rows to read: an entity, a user filter, and (route a) what was known at an instant."""

    entity: str | None = None
    entity_columns: tuple[str, ...] = ()
    where: Expr | None = None
    known_at: datetime | None = None
    """Only rows recorded at or before this instant and not superseded by then."""
    fixed: tuple[tuple[str, int], ...] = ()
    """Integer columns pinned to one value (an index's bucket), so the files are pruned."""

    def expr(self) -> Expr | None:
        """The whole scope as one filter expression (values bound, never spliced into SQL)."""
        parts: list[Expr] = [Comparison(column, "=", value, "int") for column, value in self.fixed]
        if self.entity is not None:
            equal: list[Expr] = [Comparison(c, "=", self.entity, "string") for c in self.entity_columns]
            parts.append(equal[0] if len(equal) == 1 else Or(tuple(equal)))
        if self.where is not None:
            parts.append(self.where)
        if self.known_at is not None:
            parts.append(Comparison("recorded_at", "<=", self.known_at, "timestamp"))
            not_yet = Comparison("superseded_at", ">", self.known_at, "timestamp")
            parts.append(Or((IsNull("superseded_at", False, "timestamp"), not_yet)))
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else And(tuple(parts))


_SIMPLE_TYPES = {
    "STRING": "string",
    "INT": "int",
    "BIGINT": "int",
    "SMALLINT": "int",
    "DOUBLE": "double",
    "FLOAT": "double",
    "BOOLEAN": "boolean",
    "TIMESTAMP": "timestamp",
    "DATE": "date",
}


def ddl_fields(schema_ddl: str) -> list[tuple[str, str]]:
    """Each column of a configured schema, in order, with its type as written (``DECIMAL(18,2)``)."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, char in enumerate(schema_ddl):
        if char in "(<":
            depth += 1
        elif char in ")>":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(schema_ddl[start:i])
            start = i + 1
    parts.append(schema_ddl[start:])
    return [(tokens[0], tokens[1]) for tokens in (part.split() for part in parts) if len(tokens) >= 2]


def simple_columns(schema_ddl: str) -> dict[str, str]:
    """Column -> simple type of a configured schema; nested and decimal columns are left out."""
    columns: dict[str, str] = {}
    for name, written in ddl_fields(schema_ddl):
        kind = _SIMPLE_TYPES.get(re.split(r"[(<]", written.upper())[0])
        if kind is not None:
            columns[name] = kind
    return columns


def as_utc(value: Any) -> Any:
    """Datetimes become aware UTC (a naive one from Spark is in the process's local time)."""
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    return value


def plain_row(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: as_utc(v) for k, v in row.items()}


def in_scope(row: Mapping[str, Any], scope: Scope) -> bool:
    """The Python meaning of a :class:`Scope` (the readers push the same filter down)."""
    expr = scope.expr()
    return expr is None or matches(expr, row)


class Reader(Protocol):
    name: str

    def ledger_records(self) -> list[LedgerRecord]: ...

    def columns(self, table: str) -> dict[str, str]: ...

    def rows(self, table: str, scope: Scope, version: int | None = None) -> list[dict[str, Any]]: ...

    def current_version(self, table: str) -> int | None: ...


def _spec(config: LakehouseConfig, table: str) -> TableSpec:
    settings = config.tables.get(table)
    if settings is None:
        known = ", ".join(sorted(config.tables))
        raise UnknownTableError(f"unknown table {table!r}; configured tables: {known}")
    return table_spec(config, table, settings)


def _record(row: Mapping[str, Any]) -> LedgerRecord:
    refs = row.get("refs")
    return LedgerRecord(
        seq=int(row["seq"]),
        entry_id=row["entry_id"],
        kind=row["kind"],
        run_id=row["run_id"],
        recorded_at=as_utc(row["recorded_at"]),
        body=row["body"],
        prev_hash=row["prev_hash"],
        hash=row["hash"],
        schema_version=int(row["schema_version"]),
        refs=tuple(refs) if refs is not None else None,
    )


# -- Spark ----------------------------------------------------------------------------------------------


class SparkReader:
    """Reads through the lakehouse's table classes on a Spark session."""

    name = "spark"

    def __init__(self, registry: TableRegistry) -> None:
        self.registry = registry

    def ledger_records(self) -> list[LedgerRecord]:
        from ledger import LedgerReader

        return LedgerReader.for_registry(self.registry).records()

    def columns(self, table: str) -> dict[str, str]:
        return simple_columns(self.registry.spec(table).schema_ddl)

    def current_version(self, table: str) -> int | None:
        return self.registry.get(table).current_version()

    def rows(self, table: str, scope: Scope, version: int | None = None) -> list[dict[str, Any]]:
        handle = self.registry.get(table)
        try:
            frame = handle.read(version) if version is not None else handle.read()
            return [plain_row(r.asDict()) for r in _filtered(frame, scope).collect()]
        except VersionNotFoundError as exc:
            raise VersionGoneError(f"{table} version {version} is no longer in the format's history") from exc
        except Exception as exc:
            if version is not None and _gone(exc):
                raise VersionGoneError(
                    f"{table} version {version}: its files are gone ({type(exc).__name__})"
                ) from exc
            raise


def _gone(exc: Exception) -> bool:
    text = str(exc)
    return any(
        marker in text
        for marker in ("FileNotFound", "does not exist", "No such file", "Cannot find snapshot", "not found")
    )


def _filtered(frame: DataFrame, scope: Scope) -> DataFrame:
    expr = scope.expr()
    return frame if expr is None else frame.where(to_spark_column(expr))


# -- no JVM ---------------------------------------------------------------------------------------------


class PythonReader:
    """Reads with pyiceberg (Iceberg tables) and deltalake (Delta tables); never starts a JVM."""

    name = "pyiceberg"

    def __init__(self, config: LakehouseConfig) -> None:
        self.config = config
        self._catalog: Any = None

    def _iceberg(self, spec: TableSpec) -> Any:
        from lakehouse.catalog import iceberg_identifier, open_catalog

        if self._catalog is None:
            self._catalog = open_catalog(self.config)
        return self._catalog.load_table(iceberg_identifier(table_location(self.config, spec)))

    def _delta_path(self, spec: TableSpec) -> str:
        location = table_location(self.config, spec)
        parsed = urlparse(location)
        return unquote(parsed.path) if parsed.scheme == "file" else location

    def ledger_records(self) -> list[LedgerRecord]:
        rows = self.rows(LEDGER_TABLE, Scope())
        return [_record(r) for r in sorted(rows, key=lambda r: int(r["seq"]))]

    def run_records(self, run_id: str) -> list[LedgerRecord]:
        """One run's ledger records, in ledger order; files whose statistics cannot hold the
        run are not read."""
        rows = self.rows(LEDGER_TABLE, Scope(run_id, ("run_id",)))
        return [_record(r) for r in sorted(rows, key=lambda r: int(r["seq"]))]

    def kind_records(self, kind: str) -> list[LedgerRecord]:
        """The ledger records of one kind (``legal_hold``, ``erasure_certificate``), in ledger order."""
        rows = self.rows(LEDGER_TABLE, Scope(kind, ("kind",)))
        return [_record(r) for r in sorted(rows, key=lambda r: int(r["seq"]))]

    def columns(self, table: str) -> dict[str, str]:
        return simple_columns(_spec(self.config, table).schema_ddl)

    def current_version(self, table: str) -> int | None:
        spec = _spec(self.config, table)
        if spec.format is TableFormat.ICEBERG:
            snapshot = self._iceberg(spec).current_snapshot()
            return int(snapshot.snapshot_id) if snapshot is not None else None
        from deltalake import DeltaTable

        return int(DeltaTable(self._delta_path(spec)).version())

    def rows(self, table: str, scope: Scope, version: int | None = None) -> list[dict[str, Any]]:
        spec = _spec(self.config, table)
        if spec.format is TableFormat.ICEBERG:
            found = self._iceberg_rows(spec, scope, version)
        else:
            found = self._delta_rows(spec, scope, version)
        return [row for row in (plain_row(r) for r in found) if in_scope(row, scope)]

    def _iceberg_rows(self, spec: TableSpec, scope: Scope, version: int | None) -> list[dict[str, Any]]:
        handle = self._iceberg(spec)
        if version is not None and handle.snapshot_by_id(version) is None:
            raise VersionGoneError(f"{spec.name} snapshot {version} is no longer in the table's metadata")
        expr = scope.expr()
        options: dict[str, Any] = {"snapshot_id": version}
        if expr is not None:
            options["row_filter"] = to_pyiceberg(expr)
        try:
            scan = handle.scan(**options)
            return list(scan.to_arrow().to_pylist())
        except FileNotFoundError as exc:
            raise VersionGoneError(f"{spec.name} snapshot {version}: its files are gone") from exc

    def _delta_rows(self, spec: TableSpec, scope: Scope, version: int | None) -> list[dict[str, Any]]:
        from deltalake import DeltaTable

        try:
            handle = DeltaTable(self._delta_path(spec), version=version)
            dataset = handle.to_pyarrow_dataset()
            prefilter = _equalities(scope.expr())
            table = dataset.to_table(filter=prefilter) if prefilter is not None else dataset.to_table()
            return list(table.to_pylist())
        except Exception as exc:
            if version is not None and _gone(exc):
                raise VersionGoneError(f"{spec.name} version {version} is no longer readable") from exc
            raise


def _equalities(expr: Expr | None) -> Any:
    """The top-level ``column = value`` conjuncts of ``expr`` (string and int columns) as a
    pyarrow filter: a sound pre-filter that prunes partitions and row groups; the whole
    scope is still applied to what it lets through."""
    import pyarrow.compute as pc

    conjuncts = expr.operands if isinstance(expr, And) else (expr,) if expr is not None else ()
    equal = [
        pc.field(c.column) == c.value
        for c in conjuncts
        if isinstance(c, Comparison) and c.op == "=" and c.column_type in ("string", "int")
    ]
    if not equal:
        return None
    combined = equal[0]
    for more in equal[1:]:
        combined = combined & more
    return combined


def jsonable(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [jsonable(v) for v in value]
    return value


__all__ = [
    "PythonReader",
    "Reader",
    "Scope",
    "SparkReader",
    "VersionGoneError",
    "as_utc",
    "in_scope",
    "jsonable",
    "simple_columns",
]
