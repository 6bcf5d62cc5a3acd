"""Communities by label propagation, on DataFrames, the same on every run.

Every vertex starts with its own id as its label. In each iteration, every vertex at once
takes the label with the largest total weight among the labels of its neighbours (edges
undirected) and its own current label, which counts as one more neighbour with the weight of
the vertex's strongest edge. Ties go to the smallest label. Counting the vertex's own label
is what keeps two neighbours, or a star's centre and its leaves, from swapping labels forever
as they do when every vertex updates at once from its neighbours alone.

Weights are summed as decimals (:data:`~workloads.graph.edges.WEIGHT_TYPE`), so equal totals
are equal whatever order Spark adds them in: the communities depend only on the graph. The
iterations stop when no label changes, or after ``max_iter``; label propagation need not
settle, so the answer says whether it did.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from lakehouse.frames import materialize
from workloads.graph.edges import DST, ID, SRC, WEIGHT, vertex_ids, weighted_links
from workloads.graph.parameters import positive_count

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

LABEL: Final = "label"
MAX_ITER: Final = 20


@dataclass(frozen=True)
class Communities:
    """The answer: ``frame`` holds ``(id, label)`` for every vertex (a community is the vertices
    sharing a label, itself one of their ids); ``iterations`` run; ``settled`` if the last one
    changed no label."""

    frame: DataFrame
    iterations: int
    settled: bool


def label_propagation(
    vertices: DataFrame, edges: DataFrame, *, weight: str | None = None, max_iter: int = MAX_ITER
) -> Communities:
    """Every vertex with its community's label, after at most ``max_iter`` iterations.

    ``weight`` names the edges' weight column (every edge weighs 1 without one); parallel
    edges add up, edges with a null or non-positive weight are left out.
    """
    from pyspark.sql import functions as F

    positive_count("max_iter", max_iter)
    ids = vertex_ids(vertices)
    links = weighted_links(ids, edges, weight, directed=False)
    own_votes = materialize(links.groupBy(F.col(SRC).alias(ID)).agg(F.max(WEIGHT).alias(WEIGHT)))
    labels = materialize(ids.select(ID, F.col(ID).alias(LABEL)))
    for iteration in range(1, max_iter + 1):
        labels = materialize(relabel(labels, links, own_votes))
        changed = labels.where(F.col("changed")).count()
        labels = labels.drop("changed")
        log.debug("label propagation: iteration %d changed %d labels", iteration, changed)
        if changed == 0:
            log.info("label propagation settled after %d iterations", iteration)
            return Communities(labels, iteration, settled=True)
    log.info("label propagation stopped after %d iterations without settling", max_iter)
    return Communities(labels, max_iter, settled=False)


def relabel(labels: DataFrame, links: DataFrame, own_votes: DataFrame) -> DataFrame:
    """One iteration: ``(id, label, changed)``, each vertex with its best-weighted label."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    neighbours = links.join(labels.withColumnRenamed(ID, DST), DST).select(
        F.col(SRC).alias(ID), LABEL, WEIGHT
    )
    own = own_votes.join(labels, ID).select(ID, LABEL, WEIGHT)
    scores = neighbours.unionByName(own).groupBy(ID, LABEL).agg(F.sum(WEIGHT).alias("score"))
    ranked = Window.partitionBy(ID).orderBy(F.col("score").desc(), F.col(LABEL).asc())
    best = scores.withColumn("rank", F.row_number().over(ranked)).where(F.col("rank") == 1)
    return labels.join(best.select(ID, F.col(LABEL).alias("best")), ID, "left").select(
        ID,
        F.coalesce(F.col("best"), F.col(LABEL)).alias(LABEL),
        (F.col("best").isNotNull() & (F.col("best") != F.col(LABEL))).alias("changed"),
    )
