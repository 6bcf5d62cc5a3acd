"""PageRank on DataFrames, computed as networkx computes it.

Each iteration, every vertex passes ``damping`` times its rank along its out-edges in
proportion to their weights; the rank of the vertices without out-edges (dangling) is spread
over all vertices, as is the ``1 - damping`` share of every vertex (uniform teleport), so the
ranks keep summing to 1. Ranks start at ``1/N``. With a tolerance the iterations stop when
the ranks changed by less than ``N * tol`` in total (networkx's criterion), and not reaching
it within ``max_iter`` is an error, as in networkx; without one, exactly ``max_iter``
iterations run.

Ranks are doubles: two runs agree to the last few bits, not bit for bit (Spark may add the
terms of a sum in another order); round them before hashing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from lakehouse.errors import GraphError
from lakehouse.frames import materialize
from workloads.graph.edges import DST, ID, SRC, WEIGHT, vertex_ids, weighted_links
from workloads.graph.parameters import open_fraction, positive_count, positive_tolerance, ranks_converged

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

PAGERANK: Final = "pagerank"
DAMPING: Final = 0.85
MAX_ITER: Final = 100
TOL: Final = 1e-6


@dataclass(frozen=True)
class Ranks:
    """The answer: ``frame`` holds ``(id, pagerank)`` for every vertex (summing to 1);
    ``iterations`` run; ``change``, the summed absolute change of the ranks in the last one."""

    frame: DataFrame
    iterations: int
    change: float


def pagerank(
    vertices: DataFrame,
    edges: DataFrame,
    *,
    damping: float = DAMPING,
    max_iter: int = MAX_ITER,
    tol: float | None = TOL,
    weight: str | None = None,
    directed: bool = True,
) -> Ranks:
    """The PageRank of every vertex; edges run ``src -> dst`` (both ways with ``directed=False``).

    ``weight`` names the edges' weight column (1 without one); parallel edges add up. Raises
    :class:`~lakehouse.errors.GraphError` if ``tol`` is not reached within ``max_iter``.
    """
    from pyspark.sql import functions as F

    open_fraction("damping", damping)
    positive_count("max_iter", max_iter)
    positive_tolerance("tol", tol)
    ids = vertex_ids(vertices)
    count = ids.count()
    if count == 0:
        return Ranks(ids.select(ID, F.lit(0.0).alias(PAGERANK)), 0, 0.0)
    links = weighted_links(ids, edges, weight, directed=directed)
    out = links.groupBy(SRC).agg(F.sum(WEIGHT).alias("out"))
    shares = materialize(
        links.join(out, SRC).select(
            SRC, DST, (F.col(WEIGHT).cast("double") / F.col("out").cast("double")).alias("share")
        )
    )
    ranks = materialize(
        ids.join(out.select(F.col(SRC).alias(ID)), ID, "left_anti")
        .select(ID, F.lit(True).alias("dangling"))
        .unionByName(out.select(F.col(SRC).alias(ID), F.lit(False).alias("dangling")))
        .withColumn(PAGERANK, F.lit(1.0 / count))
    )
    dangling = ranks.where("dangling").count() / count
    change, iteration = 0.0, 0
    for iteration in range(1, max_iter + 1):
        ranks = materialize(step(ranks, shares, damping=damping, dangling=dangling, count=count))
        totals = ranks.agg(
            F.sum(F.abs(F.col(PAGERANK) - F.col("before"))).alias("change"),
            F.sum(F.when(F.col("dangling"), F.col(PAGERANK))).alias("dangling"),
        ).first()
        assert totals is not None  # an aggregate without grouping has one row
        change, dangling = float(totals["change"] or 0.0), float(totals["dangling"] or 0.0)
        ranks = ranks.drop("before")
        log.debug("pagerank: iteration %d changed the ranks by %g", iteration, change)
        if ranks_converged(change, count, tol):
            log.info("pagerank converged after %d iterations", iteration)
            return Ranks(ranks.select(ID, PAGERANK), iteration, change)
    if tol is not None:
        raise GraphError(
            f"pagerank did not converge in {max_iter} iterations (change {change:.3g}, "
            f"needed below {count * tol:.3g}); raise max_iter or tol"
        )
    return Ranks(ranks.select(ID, PAGERANK), iteration, change)


def step(ranks: DataFrame, shares: DataFrame, *, damping: float, dangling: float, count: int) -> DataFrame:
    """One iteration: ``(id, dangling, pagerank, before)`` from ``(id, dangling, pagerank)``."""
    from pyspark.sql import functions as F

    received = (
        shares.join(ranks.select(F.col(ID).alias(SRC), PAGERANK), SRC)
        .groupBy(F.col(DST).alias(ID))
        .agg(F.sum(F.col(PAGERANK) * F.col("share")).alias("received"))
    )
    spread = (damping * dangling + 1.0 - damping) / count
    return ranks.join(received, ID, "left").select(
        ID,
        "dangling",
        (F.lit(damping) * F.coalesce(F.col("received"), F.lit(0.0)) + F.lit(spread)).alias(PAGERANK),
        F.col(PAGERANK).alias("before"),
    )
