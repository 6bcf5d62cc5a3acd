"""The table interface's behaviours run on both formats: Delta by path and Iceberg in the JDBC
catalog on SQLite (the embedded default). Those marked ``catalog`` exercise the Iceberg
catalog's own part (create and drop, the commits that swap the metadata pointer: a branch
fast-forwarded while readers load the table, a rollback) and run a third time, ``iceberg-pg``:
in a JDBC catalog on a real PostgreSQL server (a team's shared catalog,
``conf/cluster.example.yaml``), started on loopback for the run by ``tests/conftest.py``'s
``postgres_server``. The unmarked ones read and write
data files and metadata files only, which the catalog database never holds: running them on
PostgreSQL too would cost about as long as their Iceberg run and test nothing new.

The two Iceberg storages are two catalogs of the one shared Spark session (``lake`` and
``lakepg``), so the PostgreSQL runs cost their own table work and nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from lakehouse.config import LakehouseConfig, TableFormat


@dataclass(frozen=True)
class Storage:
    """A table format, and for Iceberg which catalog database holds its tables."""

    id: str
    format: TableFormat
    postgres: bool = False


DELTA = Storage("delta", TableFormat.DELTA)
ICEBERG = Storage("iceberg", TableFormat.ICEBERG)
ICEBERG_PG = Storage("iceberg-pg", TableFormat.ICEBERG, postgres=True)
STORAGES = (DELTA, ICEBERG, ICEBERG_PG)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``storage``: both formats, and the PostgreSQL catalog too for tests marked ``catalog``
    (a test that parametrises ``storage`` itself keeps its own list)."""
    if "storage" not in metafunc.fixturenames:
        return
    if any("storage" in str(mark.args[0]) for mark in metafunc.definition.iter_markers("parametrize")):
        return
    storages = STORAGES if metafunc.definition.get_closest_marker("catalog") else (DELTA, ICEBERG)
    metafunc.parametrize("storage", storages, ids=[s.id for s in storages])


@pytest.fixture
def storage(request: pytest.FixtureRequest) -> Storage:
    """Which storage a table behaviour runs on (parametrised by :func:`pytest_generate_tests`)."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def table_format(storage: Storage) -> TableFormat:
    return storage.format


@pytest.fixture
def catalog_config(
    storage: Storage, lakehouse_config: LakehouseConfig, request: pytest.FixtureRequest
) -> LakehouseConfig:
    """The shipped catalog on SQLite, or for ``iceberg-pg`` the one on PostgreSQL."""
    if storage.postgres:
        return request.getfixturevalue("postgres_config")  # type: ignore[no-any-return]
    return lakehouse_config
