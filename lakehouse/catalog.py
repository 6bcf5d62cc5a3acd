"""Open the Iceberg catalog without Spark or a JVM, through pyiceberg.

Auditors and notebooks use this path: pyiceberg's SqlCatalog reads the same SQLite (or
PostgreSQL) tables Spark's JdbcCatalog writes, as long as both use the same catalog name
and schema version V1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakehouse.config import LakehouseConfig
from lakehouse.errors import ConfigError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog


def sqlalchemy_uri(jdbc_uri: str) -> str:
    """Translate the JDBC URI Spark uses into the SQLAlchemy URI pyiceberg uses."""
    if jdbc_uri.startswith("jdbc:sqlite:"):
        path = jdbc_uri.removeprefix("jdbc:sqlite:").split("?", 1)[0].removeprefix("file:")
        return f"sqlite:///{path}"
    if jdbc_uri.startswith("jdbc:postgresql:"):
        return "postgresql+psycopg2:" + jdbc_uri.removeprefix("jdbc:postgresql:")
    raise ConfigError(f"iceberg.uri {jdbc_uri!r}: pyiceberg can open sqlite or postgresql JDBC catalogs only")


def open_catalog(config: LakehouseConfig) -> Catalog:
    """The configured Iceberg catalog, opened with pyiceberg (no JVM)."""
    from pyiceberg.catalog.sql import SqlCatalog

    if config.iceberg.type != "jdbc":
        raise ConfigError(
            f"iceberg.type is {config.iceberg.type!r}: the no-JVM reader supports the jdbc catalog only"
        )
    properties: dict[str, Any] = {
        "uri": sqlalchemy_uri(config.iceberg_uri),
        "warehouse": config.iceberg_warehouse_uri,
        "schema_version": "v1",
    }
    return SqlCatalog(config.iceberg.name, **properties)


def iceberg_identifier(location: str) -> tuple[str, str]:
    """``catalog.namespace.table`` -> (namespace, table) for pyiceberg."""
    _catalog, namespace, table = location.split(".")
    return namespace, table
