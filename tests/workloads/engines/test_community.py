"""The community engine (community@1): its parameters (pure), and its answer on small correlation
frames against networkx: communities, degrees, PageRank, valid periods and member-chosen ids."""

from __future__ import annotations

import hashlib
import math
from datetime import datetime
from typing import Any

import networkx as nx
import pytest

from lakehouse.digest import canonical_hash
from lakehouse.errors import ExitCode, GraphParameterError
from workloads.engines.community import (
    CONNECTED_COMPONENTS,
    CommunityParameters,
    communities_v1,
    community_id,
    community_parameters,
)

JAN, FEB, MAR, APR = (datetime(2025, month, 1) for month in (1, 2, 3, 4))
SCHEMA = "entity_a STRING, entity_b STRING, confidence DOUBLE, valid_from TIMESTAMP, valid_to TIMESTAMP"


def test_the_declared_parameters_are_checked_with_one_line_naming_the_first_bad_one() -> None:
    assert community_parameters({}) == CommunityParameters()
    assert community_parameters({"min_confidence": 1, "method": CONNECTED_COMPONENTS}).min_confidence == 1.0
    refusals = {
        "min_confidence must be a number from 0 to 1, not 1.5": {"min_confidence": 1.5},
        "min_confidence must be a number from 0 to 1, not -0.1": {"min_confidence": -0.1},
        "min_confidence must be a number from 0 to 1, not nan": {"min_confidence": math.nan},
        "min_confidence must be a number from 0 to 1, not True": {"min_confidence": True},
        "min_confidence must be a number from 0 to 1, not '0.5'": {"min_confidence": "0.5"},
        "method must be one of label_propagation, connected_components, not 'louvain'": {"method": "louvain"},
        "max_iter must be a whole number of at least 1, not 0": {"max_iter": 0},
        "damping must lie strictly between 0 and 1, not 1": {"damping": 1},
        "unknown community parameter 'threshold'; known: damping, max_iter, method, min_confidence": {
            "threshold": 0.5
        },
    }
    for message, declared in refusals.items():
        with pytest.raises(GraphParameterError) as refused:
            community_parameters(declared)
        assert str(refused.value) == message
        assert refused.value.exit_code == ExitCode.BAD_INPUT


def test_a_community_id_is_a_digest_of_its_sorted_members() -> None:
    expected = "cm-" + hashlib.sha256(b"e-a\ne-b\ne-c").hexdigest()[:16]
    assert community_id(["e-c", "e-a", "e-b"]) == community_id(["e-a", "e-b", "e-c"]) == expected
    assert community_id(["e-a", "e-b"]) != expected


def correlations(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    return spark.createDataFrame(rows, SCHEMA)


def two_rings_and_a_weak_link() -> list[tuple[Any, ...]]:
    """Ring r1 (a, b, c: a triangle of strong links), ring r2 (d, e, f, g: a square with one
    diagonal), one weak link c - d between them, a pair (h, i) of one weak link only, and a
    side redacted by an erasure."""
    strong = [("a", "b"), ("b", "c"), ("a", "c"), ("d", "e"), ("e", "f"), ("f", "g"), ("g", "d"), ("d", "f")]
    rows: list[tuple[Any, ...]] = [(x, y, 0.9, JAN, FEB) for x, y in strong]
    rows.append(("a", "b", 0.6, FEB, None))  # a second type or month of one pair: weights add up
    rows.append(("c", "d", 0.3, MAR, APR))
    rows.append(("h", "i", 0.2, JAN, FEB))
    rows.append(("redacted:erasure-1", "a", 0.9, JAN, FEB))
    return rows


def answer_rows(answer: Any) -> dict[str, dict[str, Any]]:
    return {r["entity_id"]: r.asDict() for r in answer.frame.collect()}


def test_communities_degrees_ranks_and_periods_are_networkx_s_on_the_kept_edges(spark_session: Any) -> None:
    rows = two_rings_and_a_weak_link()
    answer = communities_v1(correlations(spark_session, rows), min_confidence=0.5)
    found = answer_rows(answer)

    assert set(found) == set("abcdefghi"), "every entity of a current correlation, none redacted"
    community = {entity: row["community_id"] for entity, row in found.items()}
    groups = {frozenset(e for e in found if community[e] == community[x]) for x in found}
    assert groups == {frozenset("abc"), frozenset("defg"), frozenset("h"), frozenset("i")}
    for members in groups:
        for entity in members:
            assert found[entity]["community_id"] == community_id(members)
            assert found[entity]["size"] == len(members)
    assert answer.settled

    kept = nx.Graph()
    kept.add_nodes_from("abcdefghi")
    for x, y, confidence, *_ in rows:
        if confidence >= 0.5 and not x.startswith("redacted:"):
            weight = kept.get_edge_data(x, y, {"weight": 0.0})["weight"]
            kept.add_edge(x, y, weight=weight + confidence)
    ranks = nx.pagerank(kept, weight="weight")
    for entity, row in found.items():
        assert row["degree"] == kept.degree(entity), entity
        assert row["pagerank"] == pytest.approx(ranks[entity], abs=1e-6), entity
    assert found["d"]["pagerank"] > found["e"]["pagerank"], "d holds the diagonal"

    assert (found["a"]["valid_from"], found["a"]["valid_to"]) == (JAN, None), "a - b stays open"
    assert (found["e"]["valid_from"], found["e"]["valid_to"]) == (JAN, APR), "d's weak link to c runs on"
    assert (found["h"]["valid_from"], found["h"]["valid_to"]) == (JAN, FEB)


def test_connected_components_join_what_a_kept_weak_link_joins_label_propagation_does_not(
    spark_session: Any,
) -> None:
    frame = correlations(spark_session, two_rings_and_a_weak_link())
    low = answer_rows(communities_v1(frame, min_confidence=0.25, method=CONNECTED_COMPONENTS))
    assert low["a"]["community_id"] == low["g"]["community_id"] == community_id("abcdefg")
    assert low["h"]["community_id"] != low["i"]["community_id"], "0.2 is below 0.25"
    everything = answer_rows(communities_v1(frame, min_confidence=0.0, method=CONNECTED_COMPONENTS))
    assert everything["h"]["community_id"] == everything["i"]["community_id"] == community_id("hi")
    assert everything["a"]["community_id"] == community_id("abcdefg")
    # label propagation weighs the links: one weak link does not merge two dense groups
    weighed = answer_rows(communities_v1(frame, min_confidence=0.0))
    assert weighed["c"]["community_id"] == community_id("abc")
    assert weighed["d"]["community_id"] == community_id("defg")
    assert weighed["h"]["community_id"] == community_id("hi")


def test_the_same_graph_gives_the_same_rows_and_hash_whatever_its_row_order(spark_session: Any) -> None:
    rows = two_rings_and_a_weak_link()
    first = communities_v1(correlations(spark_session, rows), min_confidence=0.5)
    again = communities_v1(correlations(spark_session, rows[::-1]).repartition(3), min_confidence=0.5)
    assert canonical_hash(first.frame) == canonical_hash(again.frame)


def test_a_graph_with_no_edges_is_an_empty_answer_not_an_error(spark_session: Any) -> None:
    answer = communities_v1(correlations(spark_session, []), min_confidence=0.5)
    assert answer.frame.count() == 0
    only_weak = answer_rows(communities_v1(correlations(spark_session, [("h", "i", 0.2, JAN, None)])))
    assert {e: (r["size"], r["degree"]) for e, r in only_weak.items()} == {"h": (1, 0), "i": (1, 0)}


def test_bad_parameters_are_refused_before_any_spark_job(spark_session: Any) -> None:
    tracker = spark_session.sparkContext.statusTracker()
    before = len(tracker.getJobIdsForGroup())
    with pytest.raises(GraphParameterError, match="min_confidence must be a number from 0 to 1"):
        communities_v1(correlations(spark_session, two_rings_and_a_weak_link()), min_confidence=2.0)
    assert len(tracker.getJobIdsForGroup()) == before
