"""What every algorithm of the package reads, cleaned one way: vertex ids and weighted edges.

A graph is two DataFrames: ``vertices`` with a column ``id`` (any orderable type: strings,
integers), ``edges`` with ``src`` and ``dst`` of the same type, and optionally a weight
column. Rows with a null id or endpoint, and edges whose endpoints are not both vertices,
are left out. Edges form a multigraph: parallel rows add their weights (a row without a
weight column weighs 1), as in GraphFrames.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lakehouse.frames import materialize

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

ID: Final = "id"
SRC: Final = "src"
DST: Final = "dst"
WEIGHT: Final = "weight"

WEIGHT_TYPE: Final = "decimal(38,12)"
"""Weights are summed as decimals: a sum does not depend on the order Spark adds its terms in,
so equal totals tie exactly and a tie is broken the same way on every run and layout."""


def vertex_ids(vertices: DataFrame) -> DataFrame:
    """The distinct non-null vertex ids (``id``), computed once."""
    from pyspark.sql import functions as F

    return materialize(vertices.select(ID).where(F.col(ID).isNotNull()).distinct())


def known_edges(ids: DataFrame, edges: DataFrame, weight: str | None = None) -> DataFrame:
    """``(src, dst, weight)``: the edges between two vertices of ``ids``, with a positive weight
    (``weight`` column; 1 without one). Null or non-positive weights drop the edge."""
    from pyspark.sql import functions as F

    value = F.col(weight).cast(WEIGHT_TYPE) if weight is not None else F.lit(1).cast(WEIGHT_TYPE)
    rows = edges.select(F.col(SRC), F.col(DST), value.alias(WEIGHT)).where(
        F.col(SRC).isNotNull() & F.col(DST).isNotNull() & (F.col(WEIGHT) > 0)
    )
    rows = rows.join(ids.select(F.col(ID).alias(SRC)), SRC, "left_semi")
    return rows.join(ids.select(F.col(ID).alias(DST)), DST, "left_semi")


def weighted_links(ids: DataFrame, edges: DataFrame, weight: str | None, *, directed: bool) -> DataFrame:
    """``(src, dst, weight)``, one row per ordered pair, parallel edges summed, computed once.

    Undirected, every edge counts both ways (a self loop once), as networkx reads a ``Graph``.
    """
    from pyspark.sql import functions as F

    rows = known_edges(ids, edges, weight)
    if not directed:
        reverse = rows.where(F.col(SRC) != F.col(DST)).select(
            F.col(DST).alias(SRC), F.col(SRC).alias(DST), WEIGHT
        )
        rows = rows.unionByName(reverse)
    return materialize(rows.groupBy(SRC, DST).agg(F.sum(WEIGHT).cast(WEIGHT_TYPE).alias(WEIGHT)))
