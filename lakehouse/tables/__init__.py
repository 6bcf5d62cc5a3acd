"""One table interface over Delta Lake and Apache Iceberg."""

from lakehouse.tables.base import (
    RUN_ID_KEY,
    Candidate,
    Capabilities,
    Commit,
    Table,
    TableSize,
    TableSpec,
    VersionRef,
    describe_versions,
    parse_version_ref,
)
from lakehouse.tables.delta import DeltaLakeTable
from lakehouse.tables.iceberg import IcebergTable
from lakehouse.tables.registry import FORMATS, TableRegistry, open_table, table_location, table_spec

__all__ = [
    "FORMATS",
    "RUN_ID_KEY",
    "Candidate",
    "Capabilities",
    "Commit",
    "DeltaLakeTable",
    "IcebergTable",
    "Table",
    "TableRegistry",
    "TableSize",
    "TableSpec",
    "VersionRef",
    "describe_versions",
    "open_table",
    "parse_version_ref",
    "table_location",
    "table_spec",
]
