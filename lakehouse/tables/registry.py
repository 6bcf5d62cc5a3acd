"""Resolve logical table names (``<zone>.<name>``) from the configuration to tables."""

from __future__ import annotations

from collections.abc import Iterator
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

    def __iter__(self) -> Iterator[Table]:
        return (self.get(name) for name in self.names())
