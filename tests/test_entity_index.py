"""The correlation store's entity index, on real tables once per format.

What users rely on: the index holds exactly the store's rows, each under both of its
entities and in the right bucket; the ledger says which index version mirrors which store
version; a one-entity ``asof`` through it gives the same answer as reading the store
itself while reading one bucket; a stale index is never used; a wrong one is never
recorded.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
from pyspark.sql import functions as F

from lakehouse.config import TableFormat
from lakehouse.errors import IndexMismatchError, UsageError
from ledger import OutputWritten, RunFinished, RunStarted, open_ledger
from ledger.clock import FixedClock
from tests.replay_history import ANN, BOB, CAROL, GOLD, PROMO, START
from tests.test_asof import built, content, known
from workloads.asof import PythonReader, SparkReader, asof, entity_history
from workloads.entity_index import (
    INDEX,
    bucket_column,
    bucket_of,
    buckets_for,
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


def test_refresh_mirrors_the_store_and_records_which_version(lakehouse: Any) -> None:
    clock = FixedClock(START, step=timedelta(seconds=1))
    gold = built(lakehouse, clock)
    ledger = open_ledger(lakehouse.registry, clock=clock)

    done = refresh_entity_index(lakehouse.registry, ledger, clock, buckets=32)
    assert done.status == "rebuilt"
    assert done.source_version == gold.current_version()
    index = lakehouse.registry.get(INDEX)
    assert done.index_version == index.current_version()

    store = gold.read().collect()
    rows = index.read().collect()
    assert len(rows) == 2 * len(store) == done.rows
    for row in rows:
        assert row["entity_id"] in (row["entity_a"], row["entity_b"])
        assert row["entity_bucket"] == bucket_of(row["entity_id"], 32)
    under = {(r["correlation_id"], r["entity_id"]) for r in rows}
    assert under == {(r["correlation_id"], side) for r in store for side in (r["entity_a"], r["entity_b"])}

    (mirror,) = index_versions(ledger.reader.records())
    assert (mirror.source_version, mirror.index_version, mirror.buckets) == (
        gold.current_version(),
        index.current_version(),
        32,
    )
    again = refresh_entity_index(lakehouse.registry, ledger, clock, buckets=32)
    assert again.status == "current", "nothing changed: no rebuild, no ledger entry"
    assert len(index_versions(ledger.reader.records())) == 1


def test_small_stores_get_few_buckets_large_ones_at_most_32() -> None:
    assert [buckets_for(n) for n in (0, 1, 250_000, 250_001, 2_000_000, 8_000_000, 10**9)] == [
        1,
        1,
        1,
        2,
        8,
        32,
        32,
    ]


def test_a_wrong_index_is_refused_before_it_is_recorded(lakehouse: Any) -> None:
    clock = FixedClock(START, step=timedelta(seconds=1))
    gold = built(lakehouse, clock)
    source = gold.read()
    good = project(source, 32)
    assert verify_index(source, good, 32) == 2 * source.count()
    with pytest.raises(IndexMismatchError, match="rows for"):
        verify_index(source, good.limit(good.count() - 1), 32)
    changed = good.withColumn("confidence", F.col("confidence") + F.lit(0.001))
    with pytest.raises(IndexMismatchError, match="checksums differ"):
        verify_index(source, changed, 32)
    misfiled = good.withColumn("entity_bucket", (F.col("entity_bucket") + 1) % 32)
    with pytest.raises(IndexMismatchError, match="wrong entity or bucket"):
        verify_index(source, misfiled, 32)


def test_one_entity_asof_through_the_index_equals_reading_the_store(
    lakehouse: Any, table_format: Any
) -> None:
    clock = FixedClock(START, step=timedelta(seconds=1))
    gold = built(lakehouse, clock)
    ledger = open_ledger(lakehouse.registry, clock=clock)
    at_build = clock.now()
    refresh_entity_index(lakehouse.registry, ledger, clock)
    # a second build: a new row for carol; the index is rebuilt for it
    extra = (
        gold.read()
        .where(F.col("entity_b") == CAROL)
        .limit(1)
        .withColumn("correlation_id", F.lit("later-1"))
        .withColumn("run_id", F.lit("gold-2"))
        .withColumn("recorded_at", F.lit(clock.now()).cast("timestamp"))
    )
    gold.append(lakehouse.spark.createDataFrame(extra.collect(), extra.schema), run_id="gold-2")
    ledger.writer.append(
        RunStarted(run_id="gold-2", command="build gold", purpose="build"),
        RunFinished(
            run_id="gold-2", status="ok", outputs={GOLD: OutputWritten(version=gold.current_version())}
        ),
    )
    refresh_entity_index(lakehouse.registry, ledger, clock)
    at_second = clock.now()

    tables = known(lakehouse)
    for reader in (SparkReader(lakehouse.registry), PythonReader(lakehouse.config)):
        for at in (at_build, at_second):
            for entity in (ANN, PROMO, BOB, CAROL, "nobody"):
                indexed = asof(reader, GOLD, at, known_tables=tables, entity=entity)
                plain = asof(reader, GOLD, at, known_tables=tables, entity=entity, use_index=False)
                assert indexed.routes_agree is True, (reader.name, entity, indexed.first_difference)
                assert content(indexed) == content(plain), (reader.name, at, entity)
                assert "read through gold.correlations_by_entity" in indexed.route_a.note
                assert "read through gold.correlations_by_entity" in indexed.route_b.note
                assert "by_entity" not in plain.route_a.note + plain.route_b.note
        assert "later-1" in {
            r["correlation_id"] for r in asof(reader, GOLD, at_second, known_tables=tables, entity=CAROL).rows
        }
        story = entity_history(reader, GOLD, CAROL, known_tables=tables)
        assert (
            story.versions
            == entity_history(reader, GOLD, CAROL, known_tables=tables, use_index=False).versions
        )
    with pytest.raises(UsageError, match="Gold tables only"):
        asof(SparkReader(lakehouse.registry), INDEX, at_second, known_tables=tables)


def test_a_stale_index_is_not_used(lakehouse: Any) -> None:
    clock = FixedClock(START, step=timedelta(seconds=1))
    gold = built(lakehouse, clock)
    ledger = open_ledger(lakehouse.registry, clock=clock)
    refresh_entity_index(lakehouse.registry, ledger, clock)
    # a write the index has not caught up with (say the job died before rebuilding it)
    victim = gold.read().where(F.col("entity_b") == CAROL).limit(1)
    rows = lakehouse.spark.createDataFrame(victim.collect(), victim.schema)
    gold.merge(rows.withColumn("confidence", F.lit(0.01)), ["correlation_id", "run_id"], run_id="late")
    ledger.writer.append(
        RunStarted(run_id="late", command="build gold", purpose="build"),
        RunFinished(
            run_id="late", status="ok", outputs={GOLD: OutputWritten(version=gold.current_version())}
        ),
    )
    for reader in (SparkReader(lakehouse.registry), PythonReader(lakehouse.config)):
        answer = asof(reader, GOLD, clock.now(), known_tables=known(lakehouse), entity=CAROL)
        assert "does not mirror" in answer.route_a.note, reader.name
        assert 0.01 in {r["confidence"] for r in answer.rows}, "the current store is what answers"
        assert answer.routes_agree is True


def test_a_lookup_plans_one_bucket_of_the_index(lakehouse: Any, table_format: Any) -> None:
    clock = FixedClock(START, step=timedelta(seconds=1))
    built(lakehouse, clock)
    ledger = open_ledger(lakehouse.registry, clock=clock)
    refresh_entity_index(lakehouse.registry, ledger, clock, buckets=32)
    config = lakehouse.config
    bucket = bucket_of(ANN, 32)
    if table_format is TableFormat.ICEBERG:
        from pyiceberg.expressions import And, EqualTo

        from lakehouse.catalog import iceberg_identifier, open_catalog
        from lakehouse.tables.registry import table_location, table_spec

        spec = table_spec(config, INDEX, config.tables[INDEX])
        table = open_catalog(config).load_table(iceberg_identifier(table_location(config, spec)))
        planned = list(
            table.scan(
                row_filter=And(EqualTo("entity_bucket", bucket), EqualTo("entity_id", ANN))
            ).plan_files()
        )
        every = list(table.scan().plan_files())
    else:
        import pyarrow.compute as pc
        from deltalake import DeltaTable

        location = urlparse(lakehouse.registry.get(INDEX).location)
        path = unquote(location.path) if location.scheme == "file" else location.geturl()
        dataset = DeltaTable(path).to_pyarrow_dataset()
        planned = list(
            dataset.get_fragments(
                filter=(pc.field("entity_bucket") == bucket) & (pc.field("entity_id") == ANN)
            )
        )
        every = list(dataset.get_fragments())
    assert len(planned) == 1, "one sorted file per bucket"
    assert len(every) > 1
