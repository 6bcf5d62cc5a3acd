"""Resolve logical table names (``<zone>.<name>``) from the configuration to tables."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from lakehouse.config import LakehouseConfig, TableFormat, TableSettings
from lakehouse.errors import UnknownTableError
from lakehouse.tables.base import Table, TableSpec
from lakehouse.tables.delta import DeltaLakeTable
from lakehouse.tables.iceberg import IcebergTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMATS: dict[TableFormat, type[Table]] = {
    TableFormat.DELTA: DeltaLakeTable,
    TableFormat.ICEBERG: IcebergTable,
}


def table_spec(config: LakehouseConfig, name: str, settings: TableSettings) -> TableSpec:
    """The spec of a configured table, with its format decided (forced, declared or zone default)."""
    return TableSpec(
        name=name,
        zone=settings.zone,
        format=config.format_of(settings),
        schema_ddl=settings.schema_ddl,
        partition_by=settings.partition_by,
        sort_by=settings.sort_by,
        properties=dict(settings.properties),
        personal_columns=settings.personal,
        history_days=config.history_days,
        owner=settings.owner,
        target_file_bytes=settings.target_file_bytes,
    )


def table_location(config: LakehouseConfig, spec: TableSpec) -> str:
    """A Delta table's path, or an Iceberg table's ``catalog.namespace.table`` identifier."""
    namespace = f"{spec.namespace}_{config.instance}" if config.instance else spec.namespace
    if spec.format is TableFormat.ICEBERG:
        return f"{config.iceberg.name}.{namespace}.{spec.short_name}"
    return f"{config.warehouse_uri.rstrip('/')}/delta/{namespace}/{spec.short_name}"


def open_table(spark: SparkSession, config: LakehouseConfig, spec: TableSpec) -> Table:
    """Bind a spec to the session, choosing the implementation by the spec's format."""
    return FORMATS[spec.format](spark, spec, table_location(config, spec))


class TableRegistry:
    """Every configured table, by logical name."""

    def __init__(self, spark: SparkSession, config: LakehouseConfig) -> None:
        self.spark = spark
        self.config = config

    def names(self) -> list[str]:
        return sorted(self.config.tables)

    def spec(self, name: str) -> TableSpec:
        settings = self.config.tables.get(name)
        if settings is None:
            known = ", ".join(self.names()) or "none configured"
            raise UnknownTableError(f"unknown table {name!r}; known tables: {known}")
        return table_spec(self.config, name, settings)

    def get(self, name: str) -> Table:
        return open_table(self.spark, self.config, self.spec(name))

    def in_another_format(self, name: str) -> Table | None:
        """The table ``name`` as it exists in a format other than the configured one, if it does.

        A lakehouse keeps one format per table: a work dir made before ``zone_formats`` (or
        its default) changed still holds the table in the old format, and creating it again
        in the new one would silently start an empty twin beside it.
        """
        spec = self.spec(name)
        for other in TableFormat:
            if other is not spec.format:
                table = open_table(self.spark, self.config, replace(spec, format=other))
                if table.exists():
                    return table
        return None

    def __iter__(self) -> Iterator[Table]:
        return (self.get(name) for name in self.names())
