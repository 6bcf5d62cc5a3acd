"""A point-in-time training set against a naive as-of join over the same tables (W4).

On a fresh copy of the cached benchmark lake (``--events N``, :mod:`benchmarks.lake`) or a
lakehouse built by the pipeline benchmark (``--lake``; 1M events for the recorded figures),
the product's ``training-set`` build (pins as known at T, the point-in-time rows, the
content hash, the append to ``gold.training_sets``, the ledger and the MLflow dataset) is
timed against a naive job in the same process: plain Spark SQL joining each order to the
same pinned versions of ``entity_daily``, ``gold.baselines``, ``gold.correlations`` and
the outcomes with range conditions, then written as Parquet. Both produce the same rows
(checked: same count, same positives). Goal: product <= 1.5x naive.

JVM warm-up must not land on one side: one untimed round of each runs first, then the two
are timed ``--samples`` times in alternating order, and the medians are compared.

    python -m benchmarks training-set --events 200000
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.lake import add_lake_choice, chosen_lake
from benchmarks.phases import Phases

HORIZON_DAYS = 90

NAIVE_SQL = """
WITH orders AS (
  SELECT event_id AS decision_id, entity_id, event_time AS t, CAST(amount AS DOUBLE) AS amount
  FROM silver WHERE domain = 'orders' AND entity_id IS NOT NULL
    AND event_time + make_interval(0, 0, 0, {h}) <= TIMESTAMP '{end}'
),
daily_window AS (
  SELECT o.decision_id, SUM(d.orders) AS orders_30d, SUM(d.order_amount) AS order_amount_30d,
         SUM(d.refunds) AS refunds_30d, SUM(d.refund_amount) AS refund_amount_30d,
         SUM(d.logins) AS logins_30d, SUM(d.failed_logins) AS failed_logins_30d,
         SUM(d.devices) AS devices_30d, SUM(d.cards) AS cards_30d, SUM(d.chargebacks) AS chargebacks_30d,
         SUM(d.fraud_labels) AS fraud_labels_30d, COUNT(d.day) AS active_days_30d
  FROM orders o LEFT JOIN daily d
    ON d.entity_id = o.entity_id AND d.day < to_date(o.t) AND d.day >= date_sub(to_date(o.t), 30)
  GROUP BY o.decision_id
),
baseline AS (
  SELECT decision_id, mean, stddev FROM (
    SELECT o.decision_id, b.mean, b.stddev,
           row_number() OVER (PARTITION BY o.decision_id ORDER BY b.day DESC) AS r
    FROM orders o JOIN baselines b
      ON b.entity_id = o.entity_id AND b.metric = 'order_amount' AND b.window_days = 90
     AND b.day < to_date(o.t) AND b.day >= date_sub(to_date(o.t), 30)
  ) WHERE r = 1
),
known AS (
  SELECT explode(array(entity_a, entity_b)) AS entity_id, valid_from, confidence FROM correlations
  WHERE recorded_at <= TIMESTAMP '{as_of}' AND (superseded_at IS NULL OR superseded_at > TIMESTAMP '{as_of}')
),
linked AS (
  SELECT o.decision_id, COUNT(*) AS correlations, MAX(k.confidence) AS max_confidence
  FROM orders o JOIN known k ON k.entity_id = o.entity_id AND k.valid_from <= o.t
  GROUP BY o.decision_id
),
labels AS (
  SELECT o.decision_id, MIN(s.ingest_time) AS arrived
  FROM orders o JOIN silver s
    ON s.domain = 'outcomes' AND s.order_id = o.decision_id AND s.label IN ('fraud', 'chargeback')
   AND s.ingest_time > o.t AND s.ingest_time <= o.t + make_interval(0, 0, 0, {h})
   AND s.ingest_time <= TIMESTAMP '{as_of}'
  GROUP BY o.decision_id
)
SELECT o.*, w.orders_30d, w.order_amount_30d, w.refunds_30d, w.refund_amount_30d, w.logins_30d,
       w.failed_logins_30d, w.devices_30d, w.cards_30d, w.chargebacks_30d, w.fraud_labels_30d,
       w.active_days_30d, b.mean, b.stddev, COALESCE(l.correlations, 0) AS correlations,
       l.max_confidence, CASE WHEN a.arrived IS NULL THEN 0 ELSE 1 END AS label
FROM orders o
LEFT JOIN daily_window w USING (decision_id)
LEFT JOIN baseline b USING (decision_id)
LEFT JOIN linked l USING (decision_id)
LEFT JOIN labels a USING (decision_id)
"""


def naive(
    spark: Any, registry: Any, pins: dict[str, int], as_of: datetime, out: Path
) -> tuple[float, int, int]:
    """The same training rows by a plain SQL as-of join on the same pinned versions, to Parquet."""
    from pyspark.sql import functions as F

    started = time.monotonic()
    for view, table in (
        ("silver", "silver.events"),
        ("daily", "gold.entity_daily"),
        ("baselines", "gold.baselines"),
        ("correlations", "gold.correlations"),
    ):
        registry.get(table).read(as_of=pins[table]).createOrReplaceTempView(view)
    last = spark.table("silver").agg(F.max("ingest_time")).first()[0].replace(tzinfo=UTC)
    end = min(as_of, last)
    sql = NAIVE_SQL.format(
        h=HORIZON_DAYS, end=end.strftime("%Y-%m-%d %H:%M:%S"), as_of=as_of.strftime("%Y-%m-%d %H:%M:%S.%f")
    )
    shutil.rmtree(out, ignore_errors=True)
    spark.sql(sql).write.parquet(str(out))
    written = spark.read.parquet(str(out))
    counted = written.agg(F.count("*"), F.sum("label")).first()
    return time.monotonic() - started, int(counted[0]), int(counted[1] or 0)


LAST: list[Phases] = []
"""The phases of the last product run: where its time goes."""


def product(registry: Any, ledger: Any, clock: Any, tracking: Any, as_of: datetime) -> tuple[float, Any]:
    from workloads.ml.point_in_time import TrainingWindow
    from workloads.ml.training_set import build_training_set

    phases = Phases("pins and the MLflow run")
    built = build_training_set(
        registry,
        ledger,
        clock,
        TrainingWindow(as_of, HORIZON_DAYS),
        tracking,
        progress=lambda message: phases(message.split(" ")[0]),
    )
    elapsed = phases.end()
    LAST[:] = [phases]
    return elapsed, built


def phase_lines() -> list[str]:
    """Seconds per phase of the last product run (each phase runs until the next message)."""
    return [f"  {name:<28} {seconds:6.1f}s" for name, seconds in LAST[0].seconds().items()]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks training-set")
    add_lake_choice(parser)
    parser.add_argument("--samples", type=int, default=3, help="timed runs of each side (alternating)")
    args = parser.parse_args(argv)

    from lakehouse.config import load_config
    from lakehouse.session import build_session
    from lakehouse.tables import TableRegistry
    from ledger import SystemClock, open_ledger
    from workloads.ml.tracking import open_tracking
    from workloads.ml.training_set import pin_inputs

    lake = chosen_lake(args)
    config = load_config("conf/lakehouse.yaml", overrides={"workdir": str(lake)})
    spark = build_session(config)
    registry = TableRegistry(spark, config)
    clock = SystemClock()
    ledger = open_ledger(registry, clock=clock)
    tracking = open_tracking(config)
    as_of = datetime.now(UTC)
    pins = pin_inputs(registry, as_of)
    out = lake.parent / "naive_training_set"

    _, built = product(registry, ledger, clock, tracking, as_of)  # warm-up, both sides
    _, rows, positives = naive(spark, registry, pins, as_of, out)
    print(
        f"same rows: product {built.rows} ({built.positives} positive), naive {rows} ({positives} positive)"
    )
    if (rows, positives) != (built.rows, built.positives):
        print("the two sides disagree: the comparison is void")
        return 1
    timed: dict[str, list[float]] = {"product": [], "naive": []}
    for sample in range(args.samples):
        order = ("product", "naive") if sample % 2 == 0 else ("naive", "product")
        for side in order:
            if side == "product":
                timed[side].append(product(registry, ledger, clock, tracking, as_of)[0])
            else:
                timed[side].append(naive(spark, registry, pins, as_of, out)[0])
    p, n = statistics.median(timed["product"]), statistics.median(timed["naive"])
    print(
        f"training set of {built.rows} decision points: product {p:.1f}s, naive as-of join {n:.1f}s (medians)"
    )
    print(f"ratio product / naive = {p / n:.2f}x (goal <= 1.5x)")
    print("the last product run, by phase (computing: pins read, rows, censored count, hash and counts;")
    print("writing: the append, the MLflow dataset and parameters, the ledger's run_finished):")
    print("\n".join(phase_lines()))
    spark.stop()
    return 0
