"""``python -m benchmarks reconcile --rows N --changed 0.001``: range checksums against a full join.

Two tables of the same schema through the table interface: a source of ``--rows`` rows and a
derived copy in which ``--changed`` of the keys drifted (a third lost, a third changed, a third
of that many orphans added). Both ways run in the same process on the same pinned versions,
after one untimed warm-up each, in alternating order:

* **range checksums** (what ``lakehouse reconcile`` does): the bounded walk, one job per level
  over the ranges still in disagreement, then the row diff of the listed ranges in one job
  (:mod:`workloads.reconciliation.compare`);
* **full outer join**: every row of both sides joined on the key, every column compared.

Both must find exactly the same differences (asserted); the ratio of the medians is printed.

``--bounded`` measures bounded mode instead (``lakehouse reconcile --since``): both tables start
equal (the pair's last clean run pins them), then a change of ``--changed`` of the keys arrives
as new keys at the end of the key space (a day's deliveries): the source appends them, the
derived table appends them with the same drift (a third lost, a third changed, a third of that
many orphans). Bounded mode (the keys of the files a commit added or removed since the pins,
:meth:`~lakehouse.tables.Table.changed_keys`, then the walk over those keys only,
:func:`~workloads.reconciliation.run.only_keys`) against a full outer join of both tables.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

SCHEMA = "k STRING, a BIGINT, b STRING, c DOUBLE"
COLUMNS = ("a", "b", "c")


def _rows(ids: Any, changed: Any = None) -> Any:
    """The benchmark's rows for the ids of ``ids`` (a ``spark.range``), ``a`` off by one where
    ``changed`` holds."""
    from pyspark.sql import functions as F

    a = F.col("id") * 7
    return ids.select(
        F.format_string("k%010d", "id").alias("k"),
        (F.when(changed, a + 1).otherwise(a) if changed is not None else a).alias("a"),
        F.sha1(F.col("id").cast("string")).alias("b"),
        (F.col("id") / 3.0).alias("c"),
    )


def _orphans(spark: Any, count: int) -> Any:
    """``count`` rows of keys no source row has."""
    from pyspark.sql import functions as F

    return spark.range(count).select(
        F.format_string("orphan%08d", "id").alias("k"),
        F.lit(0).cast("bigint").alias("a"),
        F.lit("x").alias("b"),
        F.lit(0.0).alias("c"),
    )


def build(
    spark: Any, config: Any, rows: int, changed: float, table_format: str | None
) -> tuple[Any, Any, int]:
    from pyspark.sql import functions as F

    drift = max(3, int(rows * changed))
    step = rows // drift
    picked = F.col("id") % step == 0
    third = F.floor(F.col("id") / step) % 3
    derived_rows = _rows(spark.range(rows).where(~(picked & (third == 0))), picked & (third == 1))
    source, derived = _tables(spark, config, table_format)
    source.append(_rows(spark.range(rows)))
    derived.append(derived_rows.unionByName(_orphans(spark, drift // 3)))
    return source, derived, drift


def _tables(spark: Any, config: Any, table_format: str | None) -> tuple[Any, Any]:
    from lakehouse.config import TableFormat, Zone
    from lakehouse.tables import TableSpec, open_table

    def table(role: str) -> Any:
        spec = TableSpec(
            name=f"silver.bench_{role}_{uuid.uuid4().hex[:6]}",
            zone=Zone.SILVER,
            format=TableFormat(table_format or "iceberg"),
            schema_ddl=SCHEMA,
        )
        made = open_table(spark, config, spec)
        made.create()
        return made

    return table("source"), table("derived")


def build_bounded(
    spark: Any, config: Any, rows: int, changed: float, table_format: str | None
) -> tuple[Any, Any, tuple[int, int], int]:
    """Two equal tables, pinned (the clean run), then the change: returns both tables, the pins
    and the number of new keys (about a third of them lost in the derived table, a third
    changed, and a third of that many orphans beside them)."""
    from pyspark.sql import functions as F

    source, derived = _tables(spark, config, table_format)
    n = max(3, int(rows * changed))
    base = _rows(spark.range(rows)).repartition(8).sortWithinPartitions("k")
    source.append(base)
    derived.append(base)
    pins = (source.current_version(), derived.current_version())
    source.append(_rows(spark.range(rows, rows + n)))
    third = F.col("id") % 3
    drifted = _rows(spark.range(rows, rows + n).where(third != 0), third == 1)
    derived.append(drifted.unionByName(_orphans(spark, n // 3)))
    return source, derived, pins, n


def bounded(
    source: Any, derived: Any, pins: tuple[int, int], max_ranges: int, list_rows: int
) -> tuple[set[tuple[str, str]], dict[str, int]]:
    """What ``lakehouse reconcile --since <the clean run>`` compares: the keys of the files the
    commits since the pins added or removed, then the walk over those keys only."""
    from workloads.reconciliation.run import only_keys, union_keys

    now = (source.current_version(), derived.current_version())
    keys = union_keys(
        [source.changed_keys(pins[0], now[0], ["k"]), derived.changed_keys(pins[1], now[1], ["k"])], "k"
    )
    src, der = only_keys(source.read(now[0]), derived.read(now[1]), "k", keys)
    return _walked(src, der, max_ranges, list_rows)


def ranged(
    source: Any, derived: Any, max_ranges: int, list_rows: int
) -> tuple[set[tuple[str, str]], dict[str, int]]:
    """What ``lakehouse reconcile`` compares: the walk over both whole tables."""

    src, der = source.read(source.current_version()), derived.read(derived.current_version())
    return _walked(src, der, max_ranges, list_rows)


def _walked(
    src: Any, der: Any, max_ranges: int, list_rows: int
) -> tuple[set[tuple[str, str]], dict[str, int]]:
    """The bounded walk over two frames: the differences found and the walk's figures."""
    from workloads.reconciliation.compare import CLASS, both_sides, walk
    from workloads.reconciliation.summaries import Budget

    budget = Budget(max_rows=10**12, max_seconds=10**6)
    found = walk(
        both_sides(src, der, "k", COLUMNS),
        "k",
        start=0,
        max_ranges=max_ranges,
        list_rows=list_rows,
        budget=budget,
    )
    rows = [r for frame in found.found for r in frame.collect()]
    return {(r["k"], r[CLASS]) for r in rows}, {
        "ranges": sum(found.trace.compared),
        "jobs": found.trace.jobs,
        "listed": found.ranges_listed,
        "rows_diffed": found.rows_diffed,
    }


def joined(source: Any, derived: Any) -> set[tuple[str, str]]:
    from pyspark.sql import functions as F

    s = source.read(source.current_version()).alias("s")
    d = derived.read(derived.current_version()).alias("d")
    same = F.lit(True)
    for c in COLUMNS:
        same = same & F.col(f"s.{c}").eqNullSafe(F.col(f"d.{c}"))
    kind = (
        F.when(F.col("d.k").isNull(), "missing")
        .when(F.col("s.k").isNull(), "orphan")
        .when(~same, "divergent")
    )
    rows = (
        s.join(d, F.col("s.k") == F.col("d.k"), "full_outer")
        .select(F.coalesce("s.k", "d.k").alias("k"), kind.alias("kind"))
        .where(F.col("kind").isNotNull())
        .collect()
    )
    return {(r["k"], r["kind"]) for r in rows}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks reconcile")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--changed", type=float, default=0.001, help="fraction of keys that drifted")
    parser.add_argument(
        "--bounded",
        action="store_true",
        help="bounded mode after a change of --changed of the keys, against a full outer join",
    )
    parser.add_argument("--samples", type=int, default=3, help="timed runs of each way, alternating")
    parser.add_argument(
        "--max-ranges", type=int, default=65_536, help="range summaries per level (the driver's bound)"
    )
    parser.add_argument("--list-rows", type=int, default=4096, help="list a range of at most this many rows")
    parser.add_argument(
        "--format", choices=["delta", "iceberg"], help="the two tables' format (default iceberg)"
    )
    parser.add_argument("--workdir", type=Path, default=Path("benchmarks/out/reconcile"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    from lakehouse.config import load_config
    from lakehouse.session import build_session

    config = load_config("conf/lakehouse.yaml", overrides={"workdir": str(args.workdir)})
    spark = build_session(config)
    started = time.perf_counter()
    if args.bounded:
        source, derived, pins, drift = build_bounded(spark, config, args.rows, args.changed, args.format)
        way = "bounded mode"

        def ours() -> tuple[set[tuple[str, str]], dict[str, int]]:
            return bounded(source, derived, pins, args.max_ranges, args.list_rows)
    else:
        source, derived, drift = build(spark, config, args.rows, args.changed, args.format)
        way = "range checksums"

        def ours() -> tuple[set[tuple[str, str]], dict[str, int]]:
            return ranged(source, derived, args.max_ranges, args.list_rows)

    print(f"built {args.rows} rows, {drift} drifted keys, in {time.perf_counter() - started:.1f} s")
    try:
        expected, walk_figures = ours()  # warm-up, untimed
        assert joined(source, derived) == expected, "the two ways disagree"
        times: dict[str, list[float]] = {way: [], "full outer join": []}
        for sample in range(args.samples):
            order = [way, "full outer join"]
            for name in order if sample % 2 == 0 else reversed(order):
                began = time.perf_counter()
                found = ours()[0] if name == way else joined(source, derived)
                times[name].append(time.perf_counter() - began)
                assert found == expected, f"{name} found other differences"
        medians = {name: statistics.median(t) for name, t in times.items()}
        ratio = medians["full outer join"] / medians[way]
        counts = {
            kind: sum(1 for _, k in expected if k == kind) for kind in ("missing", "divergent", "orphan")
        }
        print(f"differences (both ways, identical): {counts}; walk: {walk_figures}")
        for name, t in times.items():
            runs = ", ".join(f"{x:.2f}" for x in t)
            print(f"{name}: median {medians[name]:.2f} s over {len(t)} runs ({runs})")
        goal = "at least 10x" if args.bounded else "at least 3x"
        print(f"full join / {way} = {ratio:.2f}x (goal: {goal})")
        if args.json:
            print(
                json.dumps(
                    {
                        "rows": args.rows,
                        "mode": way,
                        "drift": drift,
                        "counts": counts,
                        "walk": walk_figures,
                        "times": times,
                        "ratio": ratio,
                    }
                )
            )
    finally:
        source.drop()
        derived.drop()
    return 0
