"""pyiceberg (no JVM) opens the catalog Spark writes and reads the same rows: on SQLite and on
a real PostgreSQL server (the auditor's path on a team's shared catalog)."""

from __future__ import annotations

from typing import Any

import pytest

from lakehouse.catalog import iceberg_identifier, open_catalog, redact_uri, sqlalchemy_uri
from lakehouse.config import LakehouseConfig
from lakehouse.errors import CatalogUnreachableError, ConfigError
from tests.lakehouse.conftest import ICEBERG, ICEBERG_PG

pytestmark = pytest.mark.spark


def test_jdbc_uri_translation() -> None:
    assert sqlalchemy_uri("jdbc:sqlite:/w/cat.db?journal_mode=WAL") == "sqlite:////w/cat.db"
    assert sqlalchemy_uri("jdbc:postgresql://db:5433/iceberg") == "postgresql+psycopg2://db:5433/iceberg"
    assert (
        sqlalchemy_uri("jdbc:postgresql://db/iceberg?sslmode=require&user=u", password="p@ss/w:rd")
        == "postgresql+psycopg2://u:p%40ss%2Fw%3Ard@db/iceberg?sslmode=require"
    )
    assert sqlalchemy_uri("jdbc:postgresql:iceberg", user="me") == "postgresql+psycopg2://me@/iceberg"
    with pytest.raises(ConfigError, match="JDBC parameter 'loginTimeout'") as refused:
        sqlalchemy_uri("jdbc:postgresql://db/iceberg?password=hunter2&loginTimeout=3")
    assert "hunter2" not in str(refused.value)


def test_a_password_in_a_uri_is_never_shown() -> None:
    assert redact_uri("jdbc:postgresql://db/x?user=u&password=hunter2&ssl=true") == (
        "jdbc:postgresql://db/x?user=u&password=***&ssl=true"
    )
    assert redact_uri("postgresql+psycopg2://u:hunter2@db:5432/x") == "postgresql+psycopg2://u:***@db:5432/x"
    assert redact_uri("jdbc:postgresql://db:5432/x") == "jdbc:postgresql://db:5432/x"


def test_the_no_jvm_reader_names_a_catalog_server_that_is_down(lakehouse_config: LakehouseConfig) -> None:
    from local_services.ports import free_port

    uri = f"jdbc:postgresql://127.0.0.1:{free_port()}/iceberg"
    down = lakehouse_config.model_copy(
        update={"iceberg": lakehouse_config.iceberg.model_copy(update={"uri": uri, "user": "iceberg"})}
    )
    with pytest.raises(CatalogUnreachableError, match=f"Iceberg catalog 'lake' at {uri} is unreachable"):
        open_catalog(down)
    assert CatalogUnreachableError.exit_code == 3


@pytest.mark.parametrize("storage", [ICEBERG, ICEBERG_PG], ids=["iceberg", "iceberg-pg"])
def test_pyiceberg_reads_what_spark_wrote(
    make_table: Any, spark_session: Any, catalog_config: LakehouseConfig
) -> None:
    table = make_table("id INT NOT NULL, part STRING NOT NULL, value INT", partition_by=("part",))
    table.append(
        spark_session.createDataFrame([(1, "a", 10), (2, "b", None)], "id INT, part STRING, value INT"),
        run_id="spark-run",
    )
    first = table.current_version()
    table.append(spark_session.createDataFrame([(3, "a", 30)], "id INT, part STRING, value INT"))

    catalog = open_catalog(catalog_config)
    assert catalog.name == catalog_config.iceberg.name
    loaded = catalog.load_table(iceberg_identifier(table.location))
    assert sorted(loaded.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "part": "a", "value": 10},
        {"id": 2, "part": "b", "value": None},
        {"id": 3, "part": "a", "value": 30},
    ]
    assert loaded.current_snapshot().snapshot_id == table.current_version()
    at_first = loaded.scan(snapshot_id=first).to_arrow().to_pylist()
    assert sorted(r["id"] for r in at_first) == [1, 2]
    summaries = [s.summary.additional_properties for s in loaded.snapshots()]
    assert any(p.get("lakehouse.run-id") == "spark-run" for p in summaries)
