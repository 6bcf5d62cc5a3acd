"""``python -m benchmarks communities --entities N --noise-edges M``: the community engine, two ways.

``community@1`` (:func:`workloads.engines.community.communities_v1`) by weighted label
propagation and by connected components, on the same correlation graph, in the same process:
one untimed warm-up each, then alternating timed runs. Each way is judged against the
graph's planted truth as well as timed: different is not yet better.

The graph is a correlation store's serving rows, generated in Spark (nothing on the driver):

* **rings**: ``--rings`` groups of ``--ring-size`` entities, every pair of a ring linked with
  a confidence from 0.7 to 0.9 (shared cards and devices, as the generator plants them);
* **households**: ``--households`` pairs linked at 0.8 (a shared device, for real);
* **noise**: ``--noise-edges`` links between random entities, confidence from 0.05 to 0.6
  (a public device, a reused card: the weak links that make rings hard to see). Some
  touch ring members: that is the point.

Printed per way and threshold: the communities of two or more, the largest, the iterations
or rounds and the time per one, the medians, and the figures against the planted rings
(:func:`workloads.evaluation.communities.community_quality`: adjusted Rand index, pairwise
precision and recall over ring members, mean share captured, false communities outside
rings and households). ``--no-measure`` skips the figures (they collect one row per entity to
the driver) for the largest graphs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from workloads.engines.community import CONNECTED_COMPONENTS, LABEL_PROPAGATION


def correlation_graph(spark: Any, args: argparse.Namespace) -> Any:
    """The serving rows (``entity_a``, ``entity_b``, ``confidence``, ``valid_from``, ``valid_to``)."""
    from pyspark.sql import functions as F

    def entity(column: Any) -> Any:
        return F.concat(F.lit("e-"), F.lpad(column.cast("string"), 9, "0"))

    size = args.ring_size
    ring_members = args.rings * size
    rings = (
        spark.range(ring_members)
        .select(F.col("id").alias("a"))
        .join(spark.range(size).select(F.col("id").alias("k")))
        .select("a", (F.floor(F.col("a") / size) * size + F.col("k")).alias("b"))
        .where(F.col("a") < F.col("b"))
        .select("a", "b", (F.lit(0.7) + F.rand(args.seed) * 0.2).alias("confidence"))
    )
    first_household = ring_members
    households = spark.range(args.households).select(
        (F.col("id") * 2 + first_household).alias("a"),
        (F.col("id") * 2 + first_household + 1).alias("b"),
        F.lit(0.8).alias("confidence"),
    )
    n = args.entities
    noise = spark.range(args.noise_edges).select(
        F.floor(F.rand(args.seed + 1) * n).cast("bigint").alias("a"),
        F.floor(F.rand(args.seed + 2) * n).cast("bigint").alias("b"),
        (F.lit(0.05) + F.rand(args.seed + 3) * 0.55).alias("confidence"),
    )
    rows = rings.unionByName(households).unionByName(noise.where(F.col("a") != F.col("b")))
    return rows.select(
        entity(F.least("a", "b")).alias("entity_a"),
        entity(F.greatest("a", "b")).alias("entity_b"),
        F.round("confidence", 6).alias("confidence"),
        F.lit("2025-01-01 00:00:00").cast("timestamp").alias("valid_from"),
        F.lit(None).cast("timestamp").alias("valid_to"),
    )


def truth(args: argparse.Namespace) -> tuple[dict[str, list[str]], list[list[str]]]:
    """The planted rings (ring -> entities) and households, as the truth names them."""

    def name(i: int) -> str:
        return f"e-{i:09d}"

    size = args.ring_size
    rings = {f"R{r:04d}": [name(r * size + k) for k in range(size)] for r in range(args.rings)}
    first = args.rings * size
    households = [[name(first + 2 * h), name(first + 2 * h + 1)] for h in range(args.households)]
    return rings, households


def run_way(correlations: Any, method: str, threshold: float) -> tuple[Any, float]:
    """One run of the engine and its wall time (its answer comes back computed: materialized)."""
    from workloads.engines.community import communities_v1

    began = time.perf_counter()
    answer = communities_v1(correlations, min_confidence=threshold, method=method)
    return answer, time.perf_counter() - began


def measure(answer: Any, args: argparse.Namespace, label: str) -> dict[str, Any]:
    from workloads.evaluation.communities import community_quality

    rings, households = truth(args)
    community_of = {
        r["entity_id"]: r["community_id"] for r in answer.frame.select("entity_id", "community_id").collect()
    }
    entity_of = {entity: entity for entity in community_of}
    for members in rings.values():
        entity_of.update({m: m for m in members})
    return community_quality(label, community_of, entity_of, rings, households).row()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks communities")
    parser.add_argument("--entities", type=int, default=20_000, help="entities the noise links draw from")
    parser.add_argument("--rings", type=int, default=50)
    parser.add_argument("--ring-size", type=int, default=5)
    parser.add_argument("--households", type=int, default=500)
    parser.add_argument("--noise-edges", type=int, default=20_000)
    parser.add_argument("--thresholds", default="0.5", help="comma-separated min_confidence values")
    parser.add_argument("--samples", type=int, default=3, help="timed runs of each way, alternating")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-measure", dest="measure", action="store_false")
    parser.add_argument("--workdir", type=Path, default=Path("benchmarks/out/communities"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    from pyspark.sql import functions as F

    from lakehouse.config import load_config
    from lakehouse.frames import materialize
    from lakehouse.session import build_session

    spark = build_session(load_config("conf/lakehouse.yaml", overrides={"workdir": str(args.workdir)}))
    spark.sparkContext.setLogLevel("ERROR")
    correlations = materialize(correlation_graph(spark, args))
    edges = correlations.count()
    print(
        f"correlation graph: {edges} correlations ({args.rings} rings of {args.ring_size}, "
        f"{args.households} households, {args.noise_edges} noise links over {args.entities} entities)",
        flush=True,
    )
    figures = []
    for threshold in (float(t) for t in args.thresholds.split(",")):
        ways: dict[str, list[float]] = {LABEL_PROPAGATION: [], CONNECTED_COMPONENTS: []}
        answers = {way: run_way(correlations, way, threshold)[0] for way in ways}  # warm-up, untimed
        for sample in range(args.samples):
            for way in list(ways) if sample % 2 == 0 else list(reversed(ways)):
                answers[way], took = run_way(correlations, way, threshold)
                ways[way].append(took)
        for way, times in ways.items():
            answer = answers[way]
            median = statistics.median(times)
            sizes = answer.frame.groupBy("community_id").count().where("count >= 2")
            row = sizes.agg(F.count("*").alias("n"), F.max("count").alias("largest")).first()
            found = {
                "method": way,
                "threshold": threshold,
                "correlations": edges,
                "communities": int(row["n"]),
                "largest": int(row["largest"] or 0),
                "iterations": answer.iterations,
                "settled": answer.settled,
                "pagerank_iterations": answer.pagerank_iterations,
                "median_s": round(median, 2),
                "times": [round(t, 2) for t in times],
            }
            if args.measure:
                found["quality"] = measure(answer, args, f"{way}@{threshold}")
            figures.append(found)
            print(
                f"{way} at {threshold}: {found['communities']} communities of 2+ "
                f"(largest {found['largest']}); "
                f"{answer.iterations} {'iterations' if way == LABEL_PROPAGATION else 'rounds'}, PageRank "
                f"{answer.pagerank_iterations}; median {median:.2f} s "
                f"({median / max(answer.iterations + answer.pagerank_iterations, 1):.2f} s per iteration)"
                + (f"; {found['quality']}" if args.measure else ""),
                flush=True,
            )
    if args.json:
        print(json.dumps(figures))
    return 0
