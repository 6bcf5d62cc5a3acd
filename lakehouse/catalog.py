"""The Iceberg catalog's connection: its URIs, their safe printing, a reachability check, and
opening it without Spark or a JVM, through pyiceberg.

Auditors and notebooks use the no-JVM path: pyiceberg's SqlCatalog reads the same SQLite (or
PostgreSQL) tables Spark's JdbcCatalog writes, as long as both use the same catalog name
and schema version V1. :func:`sqlalchemy_uri` is the one translation of the JDBC URI Spark
uses into the SQLAlchemy URI pyiceberg uses; :func:`check_catalog_reachable` is what every
session build and :func:`open_catalog` ask first, so a catalog server that is down stops a
command with one line, before Spark starts and before anything is written.
"""

from __future__ import annotations

import logging
import re
import socket
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qsl, unquote, urlsplit

from lakehouse.config import POSTGRES_JDBC_PREFIX, LakehouseConfig
from lakehouse.errors import CatalogUnreachableError, ConfigError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_SECONDS: Final = 5
"""How long the reachability check waits for the catalog's server."""

POSTGRES_PARAMETERS: Final = {
    "sslmode": "sslmode",
    "sslrootcert": "sslrootcert",
    "sslcert": "sslcert",
    "sslkey": "sslkey",
    "connectTimeout": "connect_timeout",
    "ApplicationName": "application_name",
    "options": "options",
}
"""pgJDBC URI parameters and their libpq (psycopg2) names; ``user`` and ``password`` are
read apart, any other parameter is refused by name rather than silently dropped."""

_USERINFO_PASSWORD = re.compile(r"(//[^/:@?]*:)[^@/?]*@")
_PASSWORD_PARAMETER = re.compile(r"(?i)(password=)[^&;]*")


def redact_uri(uri: str) -> str:
    """The URI with any password in it (``user:pw@`` or ``password=pw``) shown as ``***``."""
    return _PASSWORD_PARAMETER.sub(r"\1***", _USERINFO_PASSWORD.sub(r"\1***@", uri))


SQLITE_JDBC_PREFIX: Final = "jdbc:sqlite:"
"""The JDBC URI prefix of the embedded catalog."""


def sqlite_path(jdbc_uri: str) -> str | None:
    """The database file of a SQLite JDBC URI (``jdbc:sqlite:[file:]PATH[?params]``); None for
    any other URI."""
    if not jdbc_uri.startswith(SQLITE_JDBC_PREFIX):
        return None
    return jdbc_uri.removeprefix(SQLITE_JDBC_PREFIX).split("?", 1)[0].removeprefix("file:")


def sqlalchemy_uri(jdbc_uri: str, *, user: str | None = None, password: str | None = None) -> str:
    """Translate the JDBC URI Spark uses into the SQLAlchemy URI pyiceberg uses.

    ``user`` and ``password`` (``iceberg.user`` / ``iceberg.password``) win over the same
    parameters in the URI. The result holds the password: never print it (:func:`redact_uri`).
    """
    path = sqlite_path(jdbc_uri)
    if path is not None:
        return f"sqlite:///{path}"
    if jdbc_uri.startswith(POSTGRES_JDBC_PREFIX):
        return _postgres_url(jdbc_uri, user=user, password=password, driver="postgresql+psycopg2")
    raise ConfigError(
        f"iceberg.uri {redact_uri(jdbc_uri)!r}: pyiceberg can open sqlite or postgresql JDBC catalogs only"
    )


def _postgres_url(jdbc_uri: str, *, user: str | None, password: str | None, driver: str) -> str:
    """``jdbc:postgresql://host:port/db?params`` (or ``jdbc:postgresql:db``) as a URL for ``driver``."""
    from sqlalchemy.engine import URL

    rest = jdbc_uri.removeprefix(POSTGRES_JDBC_PREFIX)
    parts = urlsplit(rest if rest.startswith("//") else "///" + rest.lstrip("/"))
    query: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == "user":
            user = user or value
        elif key == "password":
            password = password or value
        elif key in POSTGRES_PARAMETERS:
            query[POSTGRES_PARAMETERS[key]] = value
        else:
            raise ConfigError(
                f"iceberg.uri {redact_uri(jdbc_uri)!r}: JDBC parameter {key!r} has no equivalent for "
                f"pyiceberg's PostgreSQL connection (known: user, password, {', '.join(POSTGRES_PARAMETERS)})"
            )
    url = URL.create(
        drivername=driver,
        username=user,
        password=password,
        host=parts.hostname or None,
        port=parts.port,
        database=unquote(parts.path.lstrip("/")) or None,
        query=query,
    )
    return url.render_as_string(hide_password=False)


def catalog_password(config: LakehouseConfig) -> str | None:
    """The configured catalog password in clear (for connections only, never for output)."""
    secret = config.iceberg.password
    return secret.get_secret_value() if secret is not None else None


def check_catalog_reachable(
    config: LakehouseConfig, *, timeout_seconds: float = CONNECT_TIMEOUT_SECONDS
) -> None:
    """Connect once to a catalog on a server (JDBC on PostgreSQL) and fail with one line if it
    cannot be reached or refuses the credentials. A SQLite catalog is a local file: no check.

    Raises :class:`CatalogUnreachableError` (exit code 3) naming the URI, password masked.
    """
    if not config.iceberg_on_postgres:
        return
    uri = config.iceberg_uri
    libpq = _postgres_url(
        uri, user=config.iceberg.user, password=catalog_password(config), driver="postgresql"
    )
    try:
        import psycopg2
    except ImportError:  # a cluster image without pyiceberg's sql-postgres extra: the port at least
        _check_port(config, libpq, timeout_seconds)
        return
    try:
        psycopg2.connect(libpq, connect_timeout=max(1, int(timeout_seconds))).close()
    except psycopg2.Error as exc:
        raise _unreachable(config, str(exc)) from None
    log.debug("Iceberg catalog %s reachable at %s", config.iceberg.name, redact_uri(uri))


def _check_port(config: LakehouseConfig, libpq: str, timeout_seconds: float) -> None:
    parts = urlsplit(libpq)
    try:
        socket.create_connection((parts.hostname or "localhost", parts.port or 5432), timeout_seconds).close()
    except OSError as exc:
        raise _unreachable(config, str(exc)) from None


def _unreachable(config: LakehouseConfig, reason: str) -> CatalogUnreachableError:
    first = next((line.strip() for line in reason.splitlines() if line.strip()), "no answer")
    password = catalog_password(config)
    if password:
        first = first.replace(password, "***")
    return CatalogUnreachableError(
        f"Iceberg catalog '{config.iceberg.name}' at {redact_uri(config.iceberg_uri)} is unreachable: "
        f"{redact_uri(first)} (is the PostgreSQL server up? check iceberg.uri, iceberg.user and "
        f"LAKEHOUSE__ICEBERG__PASSWORD)"
    )


def open_catalog(config: LakehouseConfig) -> Catalog:
    """The configured Iceberg catalog, opened with pyiceberg (no JVM)."""
    from pyiceberg.catalog.sql import SqlCatalog

    if config.iceberg.type != "jdbc":
        raise ConfigError(
            f"iceberg.type is {config.iceberg.type!r}: the no-JVM reader supports the jdbc catalog only"
        )
    check_catalog_reachable(config)
    properties: dict[str, Any] = {
        "uri": sqlalchemy_uri(
            config.iceberg_uri, user=config.iceberg.user, password=catalog_password(config)
        ),
        "warehouse": config.iceberg_warehouse_uri,
        "schema_version": "v1",
    }
    return SqlCatalog(config.iceberg.name, **properties)


def iceberg_identifier(location: str) -> tuple[str, str]:
    """``catalog.namespace.table`` -> (namespace, table) for pyiceberg."""
    _catalog, namespace, table = location.split(".")
    return namespace, table
