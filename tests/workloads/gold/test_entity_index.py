"""The correlation store's entity index, on real tables once per format.

What users rely on: the index holds exactly the store's rows, each under both of its
entities and in the right bucket; the ledger says which index version mirrors which store
version; a one-entity ``asof`` through it gives the same answer as reading the store
itself while reading one bucket; a stale index is never used; a wrong one is never
recorded. Gold is built by the product's recorded Gold runs, so the ledger holds only what
the product writes.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
from pyspark.sql import functions as F

from lakehouse.config import TableFormat
from lakehouse.errors import IndexMismatchError, UsageError
from ledger import open_ledger
from ledger.clock import FixedClock
from tests.replay_history import (
    ANN,
    BOB,
    CAROL,
    EVENTS,
    GINA,
    GOLD,
    GOLD_RECORDED,
    LATER_EVENTS,
    PROMO,
    START,
    gold_build,
    seed_inputs,
)
from tests.workloads.asof.test_asof import content, known
from workloads.asof import PythonReader, SparkReader, asof, entity_history
from workloads.engines.correlation import correlate_v1
from workloads.engines.entity_resolution import resolve_v1
from workloads.gold.entity_index import (
    INDEX,
    bucket_column,
    bucket_of,
    fingerprint,
    index_versions,
    project,
    refresh_entity_index,
    verify_index,
)

pytestmark = pytest.mark.spark


def test_python_and_spark_agree_on_every_bucket(spark_session: Any) -> None:
    ids = [
        "",
        "e1-0",
        "e1-ffff",
        ANN,
        PROMO,
        "ünïcødé-ø",
        "x' OR '1'='1",
        *[f"e-{i:09d}" for i in range(200)],
    ]
    frame = spark_session.createDataFrame([(i,) for i in ids], "entity_id STRING")
    for buckets in (1, 7, 32):
        spark = {
            r["entity_id"]: r["b"]
            for r in frame.select("entity_id", bucket_column("entity_id", buckets).alias("b")).collect()
        }
        assert spark == {i: bucket_of(i, buckets) for i in ids}, buckets
    assert len({bucket_of(f"e-{i:09d}", 32) for i in range(200)}) == 32, "ids spread over every bucket"


def test_a_wrong_index_is_refused_before_it_is_recorded(spark_session: Any, lakehouse_config: Any) -> None:
    events = spark_session.createDataFrame(EVENTS, lakehouse_config.tables["silver.events"].schema_ddl)
    source = correlate_v1(resolve_v1(events), run_id="gold-1", recorded_at=GOLD_RECORDED).cache()
    columns = source.columns
    expected = fingerprint(source, columns)
    good = project(source, 32).cache()
    assert expected.rows >= 3
    assert verify_index(expected, columns, good, 32) == 2 * expected.rows
    with pytest.raises(IndexMismatchError, match="rows for"):
        verify_index(expected, columns, good.limit(good.count() - 1), 32)
    changed = good.withColumn("confidence", F.col("confidence") + F.lit(0.001))
    with pytest.raises(IndexMismatchError, match="checksums differ"):
        verify_index(expected, columns, changed, 32)
    misfiled = good.withColumn("entity_bucket", (F.col("entity_bucket") + 1) % 32)
    with pytest.raises(IndexMismatchError, match="wrong entity or bucket"):
        verify_index(expected, columns, misfiled, 32)
    swapped = good.withColumn("entity_id", F.when(F.col("entity_id") == F.col("entity_a"), F.lit("someone")))
    with pytest.raises(IndexMismatchError, match=f"{2 * expected.rows} rows are filed under a wrong entity"):
        verify_index(expected, columns, swapped, 32)


def planned_files(lakehouse: Any, table_format: Any, bucket: int, entity: str) -> tuple[int, int]:
    """(index files a one-entity lookup plans, index files in all), as the no-JVM readers prune."""
    config = lakehouse.config
    if table_format is TableFormat.ICEBERG:
        from pyiceberg.expressions import And, EqualTo

        from lakehouse.catalog import iceberg_identifier, open_catalog
        from lakehouse.tables.registry import table_location, table_spec

        spec = table_spec(config, INDEX, config.tables[INDEX])
        table = open_catalog(config).load_table(iceberg_identifier(table_location(config, spec)))
        lookup = And(EqualTo("entity_bucket", bucket), EqualTo("entity_id", entity))
        return len(list(table.scan(row_filter=lookup).plan_files())), len(list(table.scan().plan_files()))
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    location = urlparse(lakehouse.registry.get(INDEX).location)
    path = unquote(location.path) if location.scheme == "file" else location.geturl()
    dataset = DeltaTable(path).to_pyarrow_dataset()
    lookup = (pc.field("entity_bucket") == bucket) & (pc.field("entity_id") == entity)
    return len(list(dataset.get_fragments(filter=lookup))), len(list(dataset.get_fragments()))


def same_rows(lakehouse: Any, at: Any, entities: tuple[str, ...], *, via: str) -> None:
    """Through the index and reading the store itself, both readers give the same answer
    (Spark for the first two entities: the readers' agreement is checked in test_asof)."""
    tables = known(lakehouse)
    spark, python = SparkReader(lakehouse.registry), PythonReader(lakehouse.config)
    for reader, asked in ((spark, entities[:2]), (python, entities)):
        for entity in asked:
            indexed = asof(reader, GOLD, at, known_tables=tables, entity=entity)
            plain = asof(reader, GOLD, at, known_tables=tables, entity=entity, use_index=False)
            assert indexed.routes_agree is True, (reader.name, entity, indexed.first_difference)
            assert content(indexed) == content(plain), (reader.name, at, entity)
            assert via in indexed.route_a.note, indexed.route_a.note
            assert "by_entity" not in plain.route_a.note + plain.route_b.note


def test_the_index_mirrors_the_store_and_answers_exactly_like_it(lakehouse: Any, table_format: Any) -> None:
    clock = FixedClock(START, step=timedelta(seconds=1))
    seed_inputs(lakehouse)
    gold = gold_build(lakehouse, clock).gold
    ledger = open_ledger(lakehouse.registry, clock=clock)
    index = lakehouse.registry.get(INDEX)
    (by_the_build,) = index_versions(ledger.reader.records())
    assert (by_the_build.source_version, by_the_build.buckets) == (gold.current_version(), 1)

    # rebuilt from the store's version, recorded, and a no-op when nothing changed
    done = refresh_entity_index(lakehouse.registry, ledger, clock, buckets=32)
    assert (done.status, done.source_version, done.index_version) == (
        "rebuilt",
        gold.current_version(),
        index.current_version(),
    )
    store = gold.read().collect()
    rows = index.read().collect()
    assert len(rows) == 2 * len(store) == done.rows
    for row in rows:
        assert row["entity_id"] in (row["entity_a"], row["entity_b"])
        assert row["entity_bucket"] == bucket_of(row["entity_id"], 32)
    under = {(r["correlation_id"], r["entity_id"]) for r in rows}
    assert under == {(r["correlation_id"], side) for r in store for side in (r["entity_a"], r["entity_b"])}
    mirror = index_versions(ledger.reader.records())[-1]
    assert (mirror.source_version, mirror.index_version, mirror.buckets) == (
        gold.current_version(),
        index.current_version(),
        32,
    )
    assert refresh_entity_index(lakehouse.registry, ledger, clock, buckets=32).status == "current"
    assert len(index_versions(ledger.reader.records())) == 2, "no rebuild, no ledger entry"

    # a lookup plans one file: its bucket's
    assert planned_files(lakehouse, table_format, bucket_of(ANN, 32), ANN) == (
        1,
        len({bucket_of(r["entity_id"], 32) for r in rows}),
    )

    # another bucket count is a rebuild; asof through it answers exactly like the store
    at_build = clock.now()
    assert refresh_entity_index(lakehouse.registry, ledger, clock, buckets=1).status == "rebuilt"
    same_rows(
        lakehouse, at_build, (ANN, PROMO, CAROL, "nobody"), via="read through gold.correlations_by_entity"
    )

    # a recorded Gold build whose job died before it rebuilt the index: the index is not used
    seed_inputs(lakehouse, LATER_EVENTS)
    later = gold_build(lakehouse, clock, refresh_index=False)
    stale_at = clock.now()
    for reader in (SparkReader(lakehouse.registry), PythonReader(lakehouse.config)):
        answer = asof(reader, GOLD, stale_at, known_tables=known(lakehouse), entity=GINA)
        assert "does not mirror" in answer.route_a.note, reader.name
        assert {r["run_id"] for r in answer.rows} == {later.gold_run}, "the current store is what answers"
        assert answer.routes_agree is True

    # caught up: both routes read it again, at the new point and at the old one
    assert refresh_entity_index(lakehouse.registry, ledger, clock).status == "rebuilt"
    assert index_versions(ledger.reader.records())[-1].buckets == 1, "a tiny store gets one bucket"
    same_rows(lakehouse, stale_at, (GINA, CAROL, BOB), via="read through gold.correlations_by_entity")
    old = asof(PythonReader(lakehouse.config), GOLD, at_build, known_tables=known(lakehouse), entity=GINA)
    assert "read through" in old.route_b.note, "the published version at the build has its own mirror"
    assert old.routes_agree is True
    assert old.rows == (), "gina was not known at the first build"
    for reader in (SparkReader(lakehouse.registry), PythonReader(lakehouse.config)):
        story = entity_history(reader, GOLD, CAROL, known_tables=known(lakehouse))
        assert (
            story.versions
            == entity_history(reader, GOLD, CAROL, known_tables=known(lakehouse), use_index=False).versions
        )
    with pytest.raises(UsageError, match="Gold tables only"):
        asof(SparkReader(lakehouse.registry), INDEX, stale_at, known_tables=known(lakehouse))
