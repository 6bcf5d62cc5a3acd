"""The community engine: groups of entities over the correlation graph, and each entity's place in it.

What (``community@1``): the vertices are the entities of the current correlations (both
sides; a side redacted by an erasure is no entity and is left out), the edges the
correlations with a confidence of at least ``min_confidence``, weighted by it (the rows of
one pair, over types and months, add up). Over that graph, per entity:

* its **community**: weighted label propagation (``method: label_propagation``) or the
  connected components of the kept edges (``method: connected_components``),
  :mod:`workloads.graph`; an entity without a kept edge is a community of one;
* its **degree**: how many distinct entities its kept edges reach;
* its **PageRank** over the kept edges (undirected, weighted), rounded to
  :data:`PAGERANK_DIGITS` places so that the same graph gives the same digits;
* the **valid period** of its community: from the earliest ``valid_from`` of its members'
  correlations to the latest ``valid_to`` (open, null, while any of them is open).

A community's id is chosen from its members, not from the order Spark met them in:
``cm-`` and the first 16 hex of the sha256 of its sorted member ids, one per line
(:func:`community_id`). So the same graph and the same engine identity give the same rows
and the same canonical hash on any run; a community that gains or loses a member is a new
community with a new id.

Why: fraud rings share cards and devices across several persons; seen one pair at a time
they are many weak links, seen as a graph they are one dense group. Community detection is
global (seed 004): it is recomputed over the whole current graph, never patched pair by pair.

The function is pure over its input frame (no table, no ledger); the wiring that reads
``gold.correlations`` and keeps ``gold.communities`` bitemporal is in
:mod:`workloads.communities`.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from lakehouse.errors import GraphParameterError
from lakehouse.frames import materialize
from workloads.graph import (
    COMPONENT,
    DST,
    ID,
    LABEL,
    PAGERANK,
    SRC,
    connected_components,
    label_propagation,
    pagerank,
)
from workloads.graph.parameters import open_fraction, positive_count
from workloads.vocabulary import REDACTED_PREFIX

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "CONTENT_COLUMNS",
    "ENGINE",
    "METHODS",
    "NAME",
    "CommunityAnswer",
    "CommunityParameters",
    "communities_v1",
    "community_id",
    "community_parameters",
]

log = logging.getLogger(__name__)

NAME: Final = "community"
VERSION: Final = "1"
ENGINE: Final = f"{NAME}@{VERSION}"

LABEL_PROPAGATION: Final = "label_propagation"
CONNECTED_COMPONENTS: Final = "connected_components"
METHODS: Final[tuple[str, ...]] = (LABEL_PROPAGATION, CONNECTED_COMPONENTS)

PAGERANK_DIGITS: Final = 9
COMMUNITY_PREFIX: Final = "cm-"
COMMUNITY_HEX: Final = 16

CONTENT_COLUMNS: Final[tuple[str, ...]] = (
    "entity_id",
    "community_id",
    "size",
    "degree",
    "pagerank",
    "valid_from",
    "valid_to",
)
"""What one row of the answer asserts about one entity (its identity is ``entity_id``)."""


@dataclass(frozen=True)
class CommunityParameters:
    """The engine's declared parameters, checked (:func:`community_parameters`)."""

    min_confidence: float = 0.5
    method: str = LABEL_PROPAGATION
    max_iter: int = 20
    damping: float = 0.85


def community_parameters(declared: Mapping[str, Any]) -> CommunityParameters:
    """The declared parameters of a community release, refused with one line naming the first
    bad one (:class:`~lakehouse.errors.GraphParameterError`, exit 2): pure, no JVM."""
    known = {"min_confidence", "method", "max_iter", "damping"}
    unknown = sorted(set(declared) - known)
    if unknown:
        known_list = ", ".join(sorted(known))
        raise GraphParameterError(f"unknown community parameter {unknown[0]!r}; known: {known_list}")
    defaults = CommunityParameters()
    threshold = declared.get("min_confidence", defaults.min_confidence)
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, int | float)
        or not math.isfinite(threshold)
        or not 0 <= threshold <= 1
    ):
        raise GraphParameterError(f"min_confidence must be a number from 0 to 1, not {threshold!r}")
    method = declared.get("method", defaults.method)
    if method not in METHODS:
        raise GraphParameterError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    max_iter = positive_count("max_iter", declared.get("max_iter", defaults.max_iter))
    damping = open_fraction("damping", declared.get("damping", defaults.damping))
    return CommunityParameters(float(threshold), str(method), max_iter, damping)


def community_id(members: Iterable[str]) -> str:
    """A community's id from its members: ``cm-`` and 16 hex of the sha256 of the sorted ids,
    one per line (the same as the Spark column :func:`_community_id_column` computes)."""
    text = "\n".join(sorted(members))
    return COMMUNITY_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()[:COMMUNITY_HEX]


@dataclass(frozen=True)
class CommunityAnswer:
    """The rows (:data:`CONTENT_COLUMNS`, one per entity) and how the algorithms ran."""

    frame: DataFrame
    iterations: int
    """Label propagation iterations, or connected-components rounds."""
    settled: bool
    pagerank_iterations: int


def communities_v1(
    correlations: DataFrame,
    *,
    min_confidence: float = 0.5,
    method: str = LABEL_PROPAGATION,
    max_iter: int = 20,
    damping: float = 0.85,
) -> CommunityAnswer:
    """Every entity of the current ``correlations`` with its community, degree and PageRank
    (module docstring). ``correlations`` holds the serving rows (``entity_a``, ``entity_b``,
    ``confidence``, ``valid_from``, ``valid_to``)."""
    from pyspark.sql import functions as F

    checked = community_parameters(
        {"min_confidence": min_confidence, "method": method, "max_iter": max_iter, "damping": damping}
    )
    pairs = materialize(
        correlations.select("entity_a", "entity_b", "confidence", "valid_from", "valid_to").where(
            ~F.col("entity_a").startswith(REDACTED_PREFIX) & ~F.col("entity_b").startswith(REDACTED_PREFIX)
        )
    )
    vertices = materialize(_periods(pairs, ID))
    edges = pairs.where(F.col("confidence") >= F.lit(checked.min_confidence)).select(
        F.col("entity_a").alias(SRC), F.col("entity_b").alias(DST), F.col("confidence").alias("weight")
    )
    if checked.method == LABEL_PROPAGATION:
        found = label_propagation(vertices, edges, weight="weight", max_iter=checked.max_iter)
        groups = found.frame.select(ID, F.col(LABEL).alias("group"))
        iterations, settled = found.iterations, found.settled
    else:
        components = connected_components(vertices, edges)
        groups = components.frame.select(ID, F.col(COMPONENT).alias("group"))
        iterations, settled = components.rounds, True
    ranks = pagerank(vertices, edges, weight="weight", directed=False, damping=checked.damping)
    members = groups.join(vertices, ID)
    per_group = members.groupBy("group").agg(
        _community_id_column(F.collect_list(ID)).alias("community_id"),
        F.count("*").cast("int").alias("size"),
        F.min("valid_from").alias("group_from"),
        _latest_or_open("valid_to").alias("group_to"),
    )
    rows = (
        members.join(per_group, "group")
        .join(_degrees(edges), ID, "left")
        .join(ranks.frame, ID)
        .select(
            F.col(ID).alias("entity_id"),
            "community_id",
            "size",
            F.coalesce(F.col("degree"), F.lit(0)).cast("int").alias("degree"),
            F.round(F.col(PAGERANK), PAGERANK_DIGITS).alias("pagerank"),
            F.col("group_from").alias("valid_from"),
            F.col("group_to").alias("valid_to"),
        )
    )
    answer = materialize(rows)
    log.info(
        "%s: communities by %s over edges of confidence >= %s (%d %s, %s); pagerank in %d iterations",
        ENGINE,
        checked.method,
        checked.min_confidence,
        iterations,
        "iterations" if checked.method == LABEL_PROPAGATION else "rounds",
        "settled" if settled else "not settled",
        ranks.iterations,
    )
    return CommunityAnswer(answer, iterations, settled, ranks.iterations)


def _periods(pairs: DataFrame, key: str) -> DataFrame:
    """Per entity of either side of ``pairs`` (as ``key``): the earliest ``valid_from`` and the
    latest ``valid_to`` of its correlations (open while any is open)."""
    from pyspark.sql import functions as F

    sides = pairs.select(F.col("entity_a").alias(key), "valid_from", "valid_to").unionByName(
        pairs.select(F.col("entity_b").alias(key), "valid_from", "valid_to")
    )
    return sides.groupBy(key).agg(
        F.min("valid_from").alias("valid_from"), _latest_or_open("valid_to").alias("valid_to")
    )


def _latest_or_open(column: str) -> Any:
    """Spark aggregate: the latest of ``column``, or null (open) if any row's is null."""
    from pyspark.sql import functions as F

    return F.when(F.count(F.when(F.col(column).isNull(), 1)) > 0, F.lit(None)).otherwise(F.max(column))


def _degrees(edges: DataFrame) -> DataFrame:
    """``(id, degree)``: the distinct other vertices each vertex's edges reach (undirected)."""
    from pyspark.sql import functions as F

    links = edges.where(F.col(SRC) != F.col(DST)).select(SRC, DST)
    both = links.unionByName(links.select(F.col(DST).alias(SRC), F.col(SRC).alias(DST)))
    return both.groupBy(F.col(SRC).alias(ID)).agg(F.count_distinct(DST).alias("degree"))


def _community_id_column(members: Any) -> Any:
    """Spark: :func:`community_id` of an array of member ids."""
    from pyspark.sql import functions as F

    digest = F.sha2(F.concat_ws("\n", F.array_sort(members)), 256)
    return F.concat(F.lit(COMMUNITY_PREFIX), F.substring(digest, 1, COMMUNITY_HEX))
