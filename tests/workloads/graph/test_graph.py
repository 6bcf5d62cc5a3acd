"""The graph module against networkx on small graphs: components, label propagation, PageRank."""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from decimal import Decimal
from typing import Any

import networkx as nx
import pytest

from lakehouse.errors import GraphError, GraphParameterError
from workloads.graph import connected_components, label_propagation, pagerank

Edge = tuple[Any, Any] | tuple[Any, Any, float]


def frames(spark: Any, vertices: Iterable[Any], edges: Sequence[Edge], id_type: str = "BIGINT") -> Any:
    """``(vertices, edges)`` DataFrames; edges carry a ``weight`` when given one."""
    weighted = any(len(e) == 3 for e in edges)
    vertex_frame = spark.createDataFrame([(v,) for v in vertices], f"id {id_type}")
    schema = f"src {id_type}, dst {id_type}" + (", weight DOUBLE" if weighted else "")
    return vertex_frame, spark.createDataFrame(list(edges), schema)


def chain(n: int, seed: int = 7) -> tuple[list[int], list[Edge]]:
    """A path through ``n`` vertices whose ids are shuffled along it (no easy id order)."""
    ids = list(range(1000, 1000 + n))
    random.Random(seed).shuffle(ids)
    return sorted(ids), list(itertools.pairwise(ids))


def rings(count: int, size: int) -> tuple[list[int], list[Edge]]:
    vertices = [r * 100 + i for r in range(count) for i in range(size)]
    edges: list[Edge] = [(r * 100 + i, r * 100 + (i + 1) % size) for r in range(count) for i in range(size)]
    return vertices, edges


def star(leaves: int, centre: int = 50) -> tuple[list[int], list[Edge]]:
    """A star whose centre is not its smallest id."""
    return [centre, *range(1, leaves + 1)], [(centre, leaf) for leaf in range(1, leaves + 1)]


def messy() -> tuple[list[int], list[Edge]]:
    """Isolated vertices, self loops, duplicate and reversed edges, an edge to no vertex."""
    vertices = [1, 2, 3, 4, 5, 6, 7, 8]
    edges: list[Edge] = [(2, 3), (3, 2), (2, 3), (4, 4), (5, 6), (6, 7), (7, 5), (8, 8), (8, 99)]
    return vertices, edges


def nx_graph(vertices: Iterable[Any], edges: Iterable[Edge], *, kind: type[nx.Graph] = nx.Graph) -> nx.Graph:
    """networkx's graph of the same vertices and edges (edges to unknown vertices left out)."""
    graph = kind()
    graph.add_nodes_from(vertices)
    for edge in edges:
        if edge[0] in graph and edge[1] in graph:
            graph.add_edge(edge[0], edge[1], weight=edge[2] if len(edge) == 3 else 1.0)
    return graph


def partition(assignment: dict[Hashable, Hashable]) -> set[frozenset[Hashable]]:
    groups: dict[Hashable, set[Hashable]] = defaultdict(set)
    for vertex, group in assignment.items():
        groups[group].add(vertex)
    return {frozenset(members) for members in groups.values()}


def as_dict(frame: Any, column: str) -> dict[Any, Any]:
    return {row["id"]: row[column] for row in frame.collect()}


# -- connected components ---------------------------------------------------------------------


def side_by_side(*graphs: tuple[list[int], list[Edge]]) -> tuple[list[int], list[Edge]]:
    """One graph of several, ids moved apart (10,000 a graph), so one Spark run checks them all."""
    vertices: list[int] = []
    edges: list[Edge] = []
    for index, (vs, es) in enumerate(graphs):
        shift = 10_000 * index
        vertices += [v + shift for v in vs]
        edges += [(e[0] + shift, e[1] + shift, *e[2:]) for e in es]
    return vertices, edges


COMPONENT_CASES = {
    "chain of 200": (chain(200), 7),
    "star, disjoint rings, isolated vertices, self loops, duplicates": (
        side_by_side(star(12), rings(4, 7), messy()),
        3,
    ),
    "no edges": (([3, 1, 2], []), 0),
}


@pytest.mark.parametrize("case", COMPONENT_CASES)
def test_components_are_networkx_s_named_by_their_smallest_vertex(spark_session: Any, case: str) -> None:
    (vertices, edges), rounds = COMPONENT_CASES[case]
    found = connected_components(*frames(spark_session, vertices, edges))
    got = as_dict(found.frame, "component")
    expected = {v: min(c) for c in nx.connected_components(nx_graph(vertices, edges)) for v in c}
    assert got == expected
    assert found.rounds == rounds, "a chain of 200 takes 7, where min-label propagation would take 199"
    if not edges:
        assert got == {v: v for v in vertices}, "without edges every vertex is its own component"


def test_components_that_do_not_settle_within_the_bound_are_an_error(spark_session: Any) -> None:
    with pytest.raises(GraphError, match=r"^connected components did not settle in 1 rounds$"):
        connected_components(*frames(spark_session, *chain(20)), max_rounds=1)


def test_components_of_string_ids_match_er_v2_s_min_label_loop(spark_session: Any) -> None:
    """ER v2's keys and seeds: the module's components, labelled by their smallest seed, are
    exactly what the engine's own loop finds (the ground for moving the engine onto the module)."""
    from pyspark.sql import functions as F

    from workloads.engines.entity_resolution_v2 import _components

    keys = [f"k{i:02d}@x.com" for i in range(12)]
    seeds = {key: f"ent_{(7 * i) % 12:02d}" for i, key in enumerate(keys)}  # seed order is not key order
    pairs = [(keys[i], keys[i + 1]) for i in range(5)] + [(keys[7], keys[6]), (keys[9], keys[8])]
    nodes = spark_session.createDataFrame(list(seeds.items()), "node STRING, seed STRING")
    edges = spark_session.createDataFrame(pairs, "a STRING, b STRING")

    found = connected_components(
        nodes.select(F.col("node").alias("id")),
        edges.select(F.col("a").alias("src"), F.col("b").alias("dst")),
    ).frame
    labelled = found.join(nodes.withColumnRenamed("node", "id"), "id")
    smallest = labelled.groupBy("component").agg(F.min("seed").alias("label"))
    via_module = as_dict(labelled.join(smallest, "component"), "label")
    loop = {row["node"]: row["label"] for row in _components(nodes, edges).collect()}
    assert via_module == loop
    assert len(set(loop.values())) == 12 - 7


# -- label propagation ------------------------------------------------------------------------


def reference_labels(vertices: Iterable[Any], edges: Iterable[Edge], max_iter: int = 20) -> dict[Any, Any]:
    """The documented rule, one vertex at a time in Python: each takes the label of largest total
    weight among its neighbours' and its own (weighing as its strongest edge), ties to the smallest."""
    adjacent: dict[Any, dict[Any, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for edge in edges:
        weight = Decimal(str(edge[2])) if len(edge) == 3 else Decimal(1)
        adjacent[edge[0]][edge[1]] += weight
        if edge[0] != edge[1]:
            adjacent[edge[1]][edge[0]] += weight
    labels = {v: v for v in vertices}
    for _ in range(max_iter):
        new = dict(labels)
        for vertex, neighbours in adjacent.items():
            scores: dict[Any, Decimal] = defaultdict(Decimal)
            for neighbour, weight in neighbours.items():
                scores[labels[neighbour]] += weight
            scores[labels[vertex]] += max(neighbours.values())
            new[vertex] = min(scores, key=lambda label: (-scores[label], label))
        if new == labels:
            break
        labels = new
    return labels


def test_label_propagation_finds_networkx_s_communities_where_they_are_clear(spark_session: Any) -> None:
    """Cliques in a ring joined by single edges, cavemen, two cliques joined by one edge, a star:
    networkx's label propagation finds these communities too. The four graphs go through one
    Spark run, side by side."""
    parts = [
        nx.ring_of_cliques(4, 5),
        nx.connected_caveman_graph(3, 6),
        nx.barbell_graph(5, 0),
        nx.star_graph(6),
    ]
    graph = nx.disjoint_union_all(parts)
    found = label_propagation(*frames(spark_session, graph.nodes, list(graph.edges)))
    assert found.settled
    expected = {frozenset(c) for c in nx.community.label_propagation_communities(graph)}
    assert partition(as_dict(found.frame, "label")) == expected


def test_label_propagation_follows_its_rule_on_weights_ties_and_messy_edges(spark_session: Any) -> None:
    """The karate club (unweighted), a weighted graph whose totals tie only as decimals
    (0.1 + 0.2 = 0.3), and the messy graph: exactly the reference rule, labels included."""
    karate = nx.convert_node_labels_to_integers(nx.karate_club_graph(), first_label=100)
    weighted: list[Edge] = [(1, 2, 0.1), (1, 3, 0.2), (1, 4, 0.3), (3, 2, 0.05), (5, 4, 0.9), (6, 6, 0.4)]
    vertices = [*karate.nodes, 1, 2, 3, 4, 5, 6]
    edges: list[Edge] = [(a, b, 1.0) for a, b in karate.edges] + weighted
    found = label_propagation(*frames(spark_session, vertices, edges), weight="weight")
    assert as_dict(found.frame, "label") == reference_labels(vertices, edges)
    for members in partition(as_dict(found.frame, "label")):
        assert any(members <= c for c in nx.connected_components(nx_graph(vertices, edges))), (
            "a community never spans two components"
        )

    messy_vertices, messy_edges = messy()
    found = label_propagation(*frames(spark_session, messy_vertices, messy_edges), max_iter=1)
    assert found.iterations == 1
    assert as_dict(found.frame, "label") == reference_labels(messy_vertices, messy_edges[:-1], max_iter=1)


# -- PageRank ---------------------------------------------------------------------------------


TOL = 1e-4
"""A loose tolerance keeps the iterations few; networkx is given the same one, and since the
module iterates as networkx does, both stop at the same iteration with the same ranks."""


def assert_ranks_match(got: dict[Any, float], expected: dict[Any, float]) -> None:
    assert got.keys() == expected.keys()
    worst = max(abs(got[v] - expected[v]) for v in got)
    assert worst < 1e-9, f"largest difference from networkx: {worst:.2e}"
    assert sum(got.values()) == pytest.approx(1.0, abs=1e-9)


def directed_case() -> tuple[list[int], list[Edge]]:
    """A directed chain, a star pointing in, dangling and isolated vertices, a self loop,
    duplicate edges, an edge to no vertex."""
    vertices = list(range(1, 21))
    edges: list[Edge] = [(i, i + 1) for i in range(1, 8)]  # 8 is dangling
    edges += [(leaf, 10) for leaf in range(11, 16)] + [(10, 1)]
    edges += [(16, 16), (17, 18), (17, 18), (18, 17), (19, 99)]  # 19 dangling, 20 isolated
    return vertices, edges


def test_pagerank_matches_networkx_with_dangling_vertices(spark_session: Any) -> None:
    vertices, edges = directed_case()
    found = pagerank(*frames(spark_session, vertices, edges), tol=TOL)
    expected = nx.pagerank(nx_graph(vertices, edges, kind=nx.MultiDiGraph), tol=TOL)
    assert_ranks_match(as_dict(found.frame, "pagerank"), expected)

    with pytest.raises(GraphError, match=r"^pagerank did not converge in 3 iterations"):
        pagerank(*frames(spark_session, vertices, edges), max_iter=3)
    with pytest.raises(GraphParameterError, match=r"^damping must lie strictly between 0 and 1"):
        pagerank(*frames(spark_session, vertices, edges), damping=1.0)


def test_pagerank_undirected_and_weighted_matches_networkx(spark_session: Any) -> None:
    vertices, edges = messy()
    weighted: list[Edge] = [(a, b, 0.5 + (a + b) % 3) for a, b, *_ in edges]
    found = pagerank(
        *frames(spark_session, vertices, weighted), weight="weight", directed=False, damping=0.7, tol=TOL
    )
    expected = nx.pagerank(nx_graph(vertices, weighted, kind=nx.MultiGraph), alpha=0.7, tol=TOL)
    assert_ranks_match(as_dict(found.frame, "pagerank"), expected)


def test_pagerank_of_no_edges_is_uniform_and_of_no_vertices_empty(spark_session: Any) -> None:
    found = pagerank(*frames(spark_session, [1, 2, 3, 4], []))
    assert as_dict(found.frame, "pagerank") == pytest.approx(dict.fromkeys((1, 2, 3, 4), 0.25))
    assert pagerank(*frames(spark_session, [], [])).frame.count() == 0
