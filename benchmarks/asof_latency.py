"""One-entity ``asof`` latency and the share of data files read, before and after restatements.

A synthetic correlation store over two years (``--rows``, 10M for the goal) is written to
``gold.correlations`` in a fresh lakehouse, with its build recorded in the ledger and its
entity index rebuilt by the product's own :func:`refresh_entity_index` (timed). Then, for
a few sample entities, ``asof --entity`` is timed with the Spark reader and with the
pyiceberg (no JVM) reader, against a full scan of the same version; the share of data
files a lookup plans is printed: in the entity index (what asof reads), and, for
comparison, in the store itself (what it read before the index). File planning is
pyiceberg's manifest, partition and column-metrics pruning, the same pruning Spark's
Iceberg scan applies. Then every row is restated ``--restatements`` times (each time all
current rows become superseded and a new generation is appended, as a full replay would;
the index is rebuilt after each) and everything is measured again.
Goals: <= 5% of files read; latency after the restatements <= 1.5x before.

    python -m benchmarks asof --rows 10000000 --workdir /tmp/bench-asof
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

TABLE = "gold.correlations"
START = datetime(2024, 1, 1, tzinfo=UTC)


def generation(spark: Any, rows: int, entities: int, k: int, recorded: datetime) -> Any:
    """Restatement ``k`` of every correlation: same ids and pairs, confidence nudged, its own run."""
    from pyspark.sql import functions as F

    i = F.col("id")
    a = F.abs(F.xxhash64(i, F.lit("a"))) % entities
    b = (a + 1 + F.abs(F.xxhash64(i, F.lit("b"))) % (entities - 1)) % entities
    ea = F.concat(F.lit("e-"), F.lpad(F.least(a, b).cast("string"), 9, "0"))
    eb = F.concat(F.lit("e-"), F.lpad(F.greatest(a, b).cast("string"), 9, "0"))
    valid_from = F.timestamp_seconds(F.lit(int(START.timestamp())) + (i * 7919) % (730 * 86400))
    return spark.range(rows).select(
        F.sha2(i.cast("string"), 256).alias("correlation_id"),
        F.when(i % 2 == 0, F.lit("shared_card")).otherwise(F.lit("shared_device")).alias("correlation_type"),
        ea.alias("entity_a"),
        eb.alias("entity_b"),
        valid_from.alias("valid_from"),
        F.lit(None).cast("timestamp").alias("valid_to"),
        F.date_format(valid_from, "yyyy-MM").alias("valid_month"),
        F.round(F.lit(0.5) + (F.abs(F.xxhash64(i, F.lit(k))) % 1000) / 2000.0, 6).alias("confidence"),
        F.lit('{"bench":true}').alias("evidence"),
        F.lit("correlation@1").alias("engine"),
        F.lit(f"bench-{k}").alias("run_id"),
        F.lit("authoritative").alias("status"),
        F.lit(recorded).cast("timestamp").alias("recorded_at"),
        F.lit(None).cast("timestamp").alias("superseded_at"),
        F.lit(None).cast("string").alias("superseded_by"),
        F.lit(None).cast("string").alias("supersede_reason"),
    )


def record(ledger: Any, run_id: str, version: int) -> None:
    from ledger import OutputWritten, RunFinished, RunStarted

    ledger.writer.append(
        RunStarted(run_id=run_id, command="bench asof", purpose="build"),
        RunFinished(run_id=run_id, status="ok", outputs={TABLE: OutputWritten(version=version)}),
    )


def files_share(config: Any, name: str, scope: Any) -> float:
    """Data files the scope's filter plans / data files in the current snapshot (pyiceberg)."""
    from lakehouse.catalog import iceberg_identifier, open_catalog
    from lakehouse.expressions import to_pyiceberg
    from lakehouse.tables.registry import table_location, table_spec

    spec = table_spec(config, name, config.tables[name])
    table = open_catalog(config).load_table(iceberg_identifier(table_location(config, spec)))
    planned = len(list(table.scan(row_filter=to_pyiceberg(scope.expr())).plan_files()))
    total = len(list(table.scan().plan_files()))
    return planned / total


def lookup_shares(config: Any, buckets: int, entity: str) -> tuple[float, float]:
    """(share of index files a one-entity lookup plans, share of store files it planned without)."""
    from workloads.asof import Scope
    from workloads.gold.entity_index import INDEX, bucket_of

    indexed = Scope(entity, ("entity_id",), fixed=(("entity_bucket", bucket_of(entity, buckets)),))
    return files_share(config, INDEX, indexed), files_share(
        config, TABLE, Scope(entity, ("entity_a", "entity_b"))
    )


def refresh(registry: Any, ledger: Any, clock: Any) -> int:
    """Rebuild the entity index as the product does after a serving change; returns its bucket count."""
    from jobs.render import render_index_refresh
    from workloads.gold.entity_index import refresh_entity_index

    started = time.monotonic()
    done = refresh_entity_index(registry, ledger, clock)
    assert done.buckets is not None
    print(f"  {render_index_refresh(done)}: {time.monotonic() - started:.1f}s")
    return done.buckets


def measure(
    label: str, registry: Any, config: Any, at: datetime, entities: list[str], buckets: int
) -> dict[str, float]:
    from pyspark.sql import functions as F

    from workloads.asof import PythonReader, SparkReader, asof

    known = sorted(config.tables)
    spark_reader, python_reader = SparkReader(registry), PythonReader(config)
    timings: dict[str, list[float]] = {"spark": [], "pyiceberg": [], "full scan": []}
    shares, store_shares = [], []
    for n, entity in enumerate(entities):
        for name, reader in (("spark", spark_reader), ("pyiceberg", python_reader)):
            started = time.monotonic()
            answer = asof(reader, TABLE, at, known_tables=known, entity=entity)
            timings[name].append(time.monotonic() - started)
            assert answer.routes_agree is True, answer.first_difference
            assert "read through" in answer.route_a.note, answer.route_a.note
            if n == 0 and name == "pyiceberg":
                plain = asof(reader, TABLE, at, known_tables=known, entity=entity, use_index=False)
                assert [r["correlation_id"] for r in plain.rows] == [r["correlation_id"] for r in answer.rows]
        started = time.monotonic()
        # the same question without pruning: every row of the version is read and tested
        registry.get(TABLE).read().where(
            F.concat(F.col("entity_a"), F.lit("|"), F.col("entity_b")).contains(entity)
        ).count()
        timings["full scan"].append(time.monotonic() - started)
        share, store_share = lookup_shares(config, buckets, entity)
        shares.append(share)
        store_shares.append(store_share)
    result = {name: statistics.median(values) for name, values in timings.items()}
    result["files share"] = statistics.median(shares)
    print(
        f"{label}: one-entity asof median spark {result['spark']:.2f}s, "
        f"pyiceberg {result['pyiceberg']:.2f}s, "
        f"full scan (spark) {result['full scan']:.2f}s; files read {100 * result['files share']:.1f}% "
        f"of the entity index (goal <= 5%); {100 * statistics.median(store_shares):.1f}% of the store "
        f"if it were read without the index"
    )
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks asof")
    parser.add_argument("--rows", type=int, default=200_000, help="correlations per generation")
    parser.add_argument("--restatements", type=int, default=5)
    parser.add_argument("--samples", type=int, default=3, help="entities asked about")
    parser.add_argument("--workdir", type=Path, default=Path("benchmarks/out-asof"))
    args = parser.parse_args(argv)

    from lakehouse.config import load_config
    from lakehouse.session import build_session
    from lakehouse.tables import TableRegistry
    from ledger import FixedClock, open_ledger

    shutil.rmtree(args.workdir, ignore_errors=True)
    config = load_config("conf/lakehouse.yaml", overrides={"workdir": str(args.workdir)})
    spark = build_session(config)
    registry = TableRegistry(spark, config)
    table = registry.get(TABLE)
    table.create()
    entities = max(100, args.rows // 20)
    clock = FixedClock(datetime(2026, 1, 1, tzinfo=UTC), step=timedelta(seconds=1))
    ledger = open_ledger(registry, clock=clock)

    started = time.monotonic()
    table.append(generation(spark, args.rows, entities, 0, clock.now()), run_id="bench-0")
    record(ledger, "bench-0", table.current_version() or 0)
    print(f"wrote {args.rows} correlations over 24 months in {time.monotonic() - started:.1f}s")
    buckets = refresh(registry, ledger, clock)
    sample = [
        r["entity_a"]
        for r in table.read().select("entity_a").distinct().orderBy("entity_a").limit(args.samples).collect()
    ]
    before = measure("before restatements", registry, config, clock.now(), sample, buckets)

    for k in range(1, args.restatements + 1):
        started = time.monotonic()
        at = clock.now()
        spark.sql(
            f"UPDATE {table.sql_name} "
            f"SET status = 'superseded', superseded_at = TIMESTAMP '{at.strftime('%Y-%m-%d %H:%M:%S')}', "
            f"superseded_by = correlation_id, supersede_reason = 'bench restatement {k}' "
            f"WHERE status = 'authoritative'"
        )
        table.append(generation(spark, args.rows, entities, k, at), run_id=f"bench-{k}")
        record(ledger, f"bench-{k}", table.current_version() or 0)
        print(f"restatement {k}: {time.monotonic() - started:.1f}s")
        buckets = refresh(registry, ledger, clock)
    after = measure(f"after {args.restatements} restatements", registry, config, clock.now(), sample, buckets)
    for name in ("spark", "pyiceberg"):
        print(f"ratio after / before ({name}) = {after[name] / before[name]:.2f}x (goal <= 1.5x)")
        print(f"ratio asof / full scan ({name}, after) = {after[name] / after['full scan']:.2f}x")
    spark.stop()
    return 0
