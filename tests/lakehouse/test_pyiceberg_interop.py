"""pyiceberg (no JVM) opens the catalog Spark writes and reads the same rows."""

from __future__ import annotations

from typing import Any

import pytest

from lakehouse.catalog import iceberg_identifier, open_catalog, sqlalchemy_uri
from lakehouse.config import LakehouseConfig, TableFormat

pytestmark = pytest.mark.spark


def test_jdbc_uri_translation() -> None:
    assert sqlalchemy_uri("jdbc:sqlite:/w/cat.db?journal_mode=WAL") == "sqlite:////w/cat.db"


@pytest.mark.parametrize("table_format", [TableFormat.ICEBERG], ids=["iceberg"])
def test_pyiceberg_reads_what_spark_wrote(
    make_table: Any, spark_session: Any, lakehouse_config: LakehouseConfig
) -> None:
    table = make_table("id INT NOT NULL, part STRING NOT NULL, value INT", partition_by=("part",))
    table.append(
        spark_session.createDataFrame([(1, "a", 10), (2, "b", None)], "id INT, part STRING, value INT"),
        run_id="spark-run",
    )
    first = table.current_version()
    table.append(spark_session.createDataFrame([(3, "a", 30)], "id INT, part STRING, value INT"))

    catalog = open_catalog(lakehouse_config)
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
