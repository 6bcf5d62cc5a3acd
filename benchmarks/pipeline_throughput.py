"""Ingest -> Silver -> Gold throughput against a bare Spark job doing the same transformations.

The product path adds manifests and checksums, quarantine, dedupe rules, lateness, quality
gates, commit metadata, incremental diffs and ledger entries. The baseline, run in the same
process on the same history, is what a hand-written job would do: read the raw files,
parse them, drop duplicates by event id and write a Silver-like table; then, on the
product's Silver, the same Gold transformations (the product's own pure functions: daily
features, W1 baselines, correlation v1) written as plain Parquet, with no gates, merges or
ledger. The figure that matters is the ratio (goal: product <= 1.3x baseline).

    python -m benchmarks --events 1000000 --workdir /tmp/bench
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path
from typing import Any

from lakehouse.config import load_config
from lakehouse.session import build_session
from lakehouse.tables import TableRegistry


def bare_spark_job(spark: Any, history: Path, out: Path) -> int:
    """What a hand-written job would do: parse, dedupe, write Silver, aggregate Gold."""
    from pyspark.sql import functions as F

    frames = []
    for feed in ("orders", "refunds", "logins", "outcomes"):
        raw = spark.read.json(str(history / feed / "*" / "*.jsonl"))
        email = F.coalesce(*[F.col(c) for c in ("customer_email", "email") if c in raw.columns], F.lit(None))
        frames.append(
            raw.select(
                F.col("event_id"),
                F.lit(feed).alias("domain"),
                F.try_to_timestamp(F.col("event_time")).alias("event_time"),
                F.lower(F.trim(email)).alias("entity"),
            )
        )
    csv = spark.read.option("header", True).csv(str(history / "settlements" / "*" / "*.csv"))
    frames.append(
        csv.select(
            "event_id",
            F.lit("settlements").alias("domain"),
            F.try_to_timestamp(F.col("event_time")).alias("event_time"),
            F.lit(None).cast("string").alias("entity"),
        )
    )
    events = frames[0]
    for frame in frames[1:]:
        events = events.unionByName(frame)
    silver = events.where(F.col("event_id").isNotNull()).dropDuplicates(["event_id"])
    silver = silver.withColumn("event_date", F.to_date("event_time"))
    silver.write.mode("overwrite").partitionBy("domain").parquet(str(out / "silver"))
    return int(spark.read.parquet(str(out / "silver")).count())


def bare_gold(silver: Any, out: Path) -> None:
    """The Gold transformations on a Silver DataFrame, written as plain Parquet."""
    from datetime import UTC, datetime

    from workloads.engines.correlation import correlate_v1
    from workloads.gold import baselines
    from workloads.gold.features import daily_features, only_attributed

    daily = only_attributed(daily_features(silver)).localCheckpoint(eager=True)
    daily.write.mode("overwrite").partitionBy("month").parquet(str(out / "entity_daily"))
    baselines.baselines(daily).write.mode("overwrite").partitionBy("month").parquet(str(out / "baselines"))
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    correlate_v1(silver, run_id="bare", recorded_at=moment).write.mode("overwrite").parquet(
        str(out / "correlations")
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--events", type=int, default=200_000, help="approximate events to generate")
    parser.add_argument("--workdir", type=Path, default=Path("benchmarks/out"))
    args = parser.parse_args(argv)

    from ledger import SystemClock, open_ledger
    from workloads.gold.quality import medallion_gate as gate
    from workloads.pipeline import run_gold, run_ingest, run_silver
    from workloads.synthetic.demo import create_zones
    from workloads.synthetic.generator import FEEDS, GeneratorSettings, generate, load_lateness_policy

    shutil.rmtree(args.workdir, ignore_errors=True)
    # ~22 events per person per month (measured on the generator): persons = events / (22 * 12)
    persons = max(50, args.events // (22 * 12))
    history = args.workdir / "history"
    started = time.monotonic()
    summary = generate(history, GeneratorSettings(entities=persons, months=12))
    print(f"generated {summary.total_events} events in {time.monotonic() - started:.1f}s")

    config = load_config("conf/lakehouse.yaml", overrides={"workdir": str(args.workdir / "lake")})
    spark = build_session(config)
    registry = TableRegistry(spark, config)
    clock = SystemClock()

    started = time.monotonic()
    bare_rows = bare_spark_job(spark, history, args.workdir / "bare")
    bare_silver = time.monotonic() - started

    create_zones(registry, lambda _m: None)
    ledger = open_ledger(registry, clock=clock)
    policy = load_lateness_policy()
    started = time.monotonic()
    for feed in FEEDS:
        run_ingest(registry, ledger, clock, feed=feed, source=history)
    ingest = time.monotonic() - started
    run_silver(registry, ledger, clock, policy=policy, gate=gate)
    silver = time.monotonic() - started - ingest
    run_gold(registry, ledger, clock, gate=gate)
    product = time.monotonic() - started
    print(
        f"lakehouse-replay: {product:.1f}s (ingest {ingest:.1f}s, silver {silver:.1f}s, "
        f"gold {product - ingest - silver:.1f}s; {summary.total_events / product:,.0f} events/s)"
    )
    started = time.monotonic()
    bare_gold(registry.get("silver.events").read(), args.workdir / "bare")
    bare = bare_silver + time.monotonic() - started
    print(
        f"bare Spark job: {bare:.1f}s (raw -> silver {bare_silver:.1f}s, {bare_rows} rows; "
        f"gold {bare - bare_silver:.1f}s; {summary.total_events / bare:,.0f} events/s)"
    )
    print(f"ratio product / bare = {product / bare:.2f}x (goal <= 1.3x)")
    print(
        f"ratio per stage: raw -> silver {(ingest + silver) / bare_silver:.2f}x, "
        f"gold {(product - ingest - silver) / (bare - bare_silver):.2f}x"
    )
    spark.stop()
    return 0
