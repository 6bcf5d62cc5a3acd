"""``python -m benchmarks graph --chain N --random-edges M``: connected components two ways.

The graph module's alternating large-star / small-star rounds
(:func:`workloads.graph.connected_components`) against the min-label propagation loop that
ER v2 still runs (``workloads.engines.entity_resolution_v2._components``, kept as the
baseline: moving ER v2 onto the module would change its declared fingerprint), on the same
graphs, in the same process: one untimed warm-up each, then alternating timed runs.

Two graphs, both with string ids shuffled by a hash (so the smallest id is not at an end):

* a **chain** of ``--chain`` vertices, the worst case for min-label propagation (one round per
  step of the longest path), and a **long chain** of ``--long-chain`` vertices, past the 64
  rounds the loop allows (it fails there; the module does not);
* a **random** graph of ``--random-vertices`` vertices and ``--random-edges`` edges (many small
  components and one large one, as fraud rings and households are).

Both ways must give every vertex the same component (asserted). Printed per graph: the rounds
the module took, the medians, the time per round, and the ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any


def chain(spark: Any, n: int) -> tuple[Any, Any]:
    from pyspark.sql import functions as F

    ids = spark.range(n).select(F.col("id").alias("i"), F.sha1(F.col("id").cast("string")).alias("v"))
    vertices = ids.select(F.col("v").alias("id"))
    step = ids.alias("x").join(ids.alias("y"), F.col("y.i") == F.col("x.i") + 1)
    return vertices, step.select(F.col("x.v").alias("src"), F.col("y.v").alias("dst"))


def random_graph(spark: Any, n: int, m: int, seed: int = 7) -> tuple[Any, Any]:
    from pyspark.sql import functions as F

    def vid(column: Any) -> Any:
        return F.sha1(column.cast("string"))

    vertices = spark.range(n).select(vid(F.col("id")).alias("id"))
    edges = spark.range(m).select(
        vid(F.floor(F.rand(seed) * n).cast("bigint")).alias("src"),
        vid(F.floor(F.rand(seed + 1) * n).cast("bigint")).alias("dst"),
    )
    return vertices, edges


def by_module(vertices: Any, edges: Any) -> tuple[dict[str, str], int]:
    from workloads.graph import COMPONENT, ID, connected_components

    found = connected_components(vertices, edges)
    return {r[ID]: r[COMPONENT] for r in found.frame.collect()}, found.rounds


def by_min_label_loop(vertices: Any, edges: Any) -> dict[str, str]:
    from pyspark.sql import functions as F

    from workloads.engines.entity_resolution_v2 import _components  # the baseline, on purpose

    nodes = vertices.select(F.col("id").alias("node"), F.col("id").alias("seed"))
    found = _components(nodes, edges.select(F.col("src").alias("a"), F.col("dst").alias("b")))
    return {r["node"]: r["label"] for r in found.collect()}


def compare(name: str, vertices: Any, edges: Any, samples: int) -> dict[str, Any]:
    from lakehouse.errors import LakehouseError
    from lakehouse.frames import materialize

    vertices, edges = materialize(vertices), materialize(edges)
    expected, rounds = by_module(vertices, edges)  # warm-up, untimed
    try:
        baseline = by_min_label_loop(vertices, edges)
    except LakehouseError as exc:  # one round per step of the longest path, at most 64
        print(
            f"{name}: {len(expected)} vertices, large-star/small-star in {rounds} rounds; "
            f"min-label loop: {exc}"
        )
        return {"graph": name, "vertices": len(expected), "rounds": rounds, "baseline_error": str(exc)}
    assert baseline == expected, f"{name}: the two ways disagree"
    ways = {
        "large-star/small-star": lambda: by_module(vertices, edges)[0],
        "min-label loop": lambda: by_min_label_loop(vertices, edges),
    }
    times: dict[str, list[float]] = {way: [] for way in ways}
    for sample in range(samples):
        order = list(ways) if sample % 2 == 0 else list(reversed(ways))
        for way in order:
            began = time.perf_counter()
            found = ways[way]()
            times[way].append(time.perf_counter() - began)
            assert found == expected, f"{name}: {way} found other components"
    medians = {way: statistics.median(t) for way, t in times.items()}
    ratio = medians["min-label loop"] / medians["large-star/small-star"]
    components = len(set(expected.values()))
    print(
        f"{name}: {len(expected)} vertices, {components} components; large-star/small-star "
        f"{medians['large-star/small-star']:.2f} s in {rounds} rounds "
        f"({medians['large-star/small-star'] / max(rounds, 1):.2f} s a round), min-label loop "
        f"{medians['min-label loop']:.2f} s: {ratio:.2f}x"
    )
    return {
        "graph": name,
        "vertices": len(expected),
        "components": components,
        "rounds": rounds,
        "times": times,
        "ratio": ratio,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks graph")
    parser.add_argument("--chain", type=int, default=50, help="vertices of a chain both ways can finish")
    parser.add_argument(
        "--long-chain", type=int, default=2_000, help="vertices of a chain past the loop's bound"
    )
    parser.add_argument("--random-vertices", type=int, default=100_000)
    parser.add_argument("--random-edges", type=int, default=80_000)
    parser.add_argument("--samples", type=int, default=3, help="timed runs of each way, alternating")
    parser.add_argument("--workdir", type=Path, default=Path("benchmarks/out/graph"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    from lakehouse.config import load_config
    from lakehouse.session import build_session

    spark = build_session(load_config("conf/lakehouse.yaml", overrides={"workdir": str(args.workdir)}))
    figures = [
        compare("chain", *chain(spark, args.chain), args.samples),
        compare("long chain", *chain(spark, args.long_chain), args.samples),
        compare("random", *random_graph(spark, args.random_vertices, args.random_edges), args.samples),
    ]
    if args.json:
        print(json.dumps(figures))
    return 0
