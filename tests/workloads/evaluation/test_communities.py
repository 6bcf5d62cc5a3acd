"""Communities against the true rings, on hand-made groupings whose answers are known by
counting; the adjusted Rand index also against scikit-learn's."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from sklearn.metrics import adjusted_rand_score

from workloads.evaluation import (
    CommunityQuality,
    adjusted_rand_index,
    community_quality,
    load_truth,
    person_entities,
)

# Two rings, one household, three persons in neither; each person has an entity of their own.
RINGS = {"R1": ["a", "b", "c"], "R2": ["d", "e"]}
HOUSEHOLDS = [["h1", "h2"]]
PERSONS = ["a", "b", "c", "d", "e", "h1", "h2", "x", "y", "z"]
ENTITY_OF = {person: f"E_{person}" for person in PERSONS}


def grouped(*groups: tuple[str, ...]) -> dict[str, str]:
    """``entity -> community`` putting each group of persons' entities in one community."""
    return {f"E_{person}": f"c{n}" for n, group in enumerate(groups, 1) for person in group}


def measure(community_of: dict[str, str], entity_of: dict[str, str] = ENTITY_OF) -> CommunityQuality:
    return community_quality("community@1", community_of, entity_of, RINGS, HOUSEHOLDS)


def shares(quality: CommunityQuality) -> dict[str, float]:
    return {ring.ring: ring.share for ring in quality.rings}


def test_perfect_recovery_scores_one_everywhere() -> None:
    quality = measure(grouped(("a", "b", "c"), ("d", "e"), ("h1", "h2")))
    assert quality.adjusted_rand_index == 1.0
    assert (quality.pairs.precision, quality.pairs.recall) == (1.0, 1.0)
    assert shares(quality) == {"R1": 1.0, "R2": 1.0}
    assert quality.mean_share == 1.0
    captures = [(r.best_community, r.captured, r.outsiders) for r in quality.rings]
    assert captures == [("c1", 3, 0), ("c2", 2, 0)]
    assert (quality.false_communities, quality.false_community_persons, quality.stray_persons) == (0, 0, 0)
    # x, y, z are not vertices of the graph: each is a community of its own
    assert (quality.persons, quality.communities, quality.ring_members) == (10, 6, 5)


def test_everything_in_one_community_finds_every_ring_at_the_price_of_outsiders() -> None:
    quality = measure(dict.fromkeys(ENTITY_OF.values(), "all"))
    assert quality.adjusted_rand_index == 0.0
    # 10 claimed pairs among the 5 ring members, 4 true ones (3 in R1, 1 in R2)
    assert (quality.pairs.claimed_pairs, quality.pairs.true_pairs, quality.pairs.correct_pairs) == (10, 4, 4)
    assert (quality.pairs.precision, quality.pairs.recall) == (0.4, 1.0)
    assert quality.mean_share == 1.0
    assert [r.outsiders for r in quality.rings] == [7, 8]
    # the one community holds ring members: not false; x, y and z are grouped with others
    assert (quality.false_communities, quality.stray_persons) == (0, 3)


def test_every_person_alone_finds_nothing() -> None:
    quality = measure({})
    assert quality.adjusted_rand_index == 0.0
    assert (quality.pairs.precision, quality.pairs.recall) == (1.0, 0.0)
    assert shares(quality) == {"R1": pytest.approx(1 / 3), "R2": 0.5}
    assert quality.mean_share == pytest.approx(5 / 12)
    assert (quality.false_communities, quality.stray_persons, quality.communities) == (0, 0, 10)


def test_a_ring_split_in_two() -> None:
    quality = measure(grouped(("a", "b"), ("d", "e"), ("c",)))
    # pairs together on both sides 2, in one ring 4, in one community 2, of 10 pairs:
    # ARI = 2 (2*10 - 4*2) / ((4 + 2) * 10 - 2*4*2) = 24 / 44
    assert quality.adjusted_rand_index == pytest.approx(6 / 11)
    assert (quality.pairs.precision, quality.pairs.recall) == (1.0, 0.5)
    assert shares(quality) == {"R1": pytest.approx(2 / 3), "R2": 1.0}
    assert quality.rings[0].best_community == "c1"
    assert quality.mean_share == pytest.approx(5 / 6)


def test_two_rings_in_one_community_cost_precision() -> None:
    quality = measure(grouped(("a", "b", "c", "d", "e")))
    assert (quality.pairs.precision, quality.pairs.recall) == (0.4, 1.0)
    assert [(r.captured, r.outsiders) for r in quality.rings] == [(3, 2), (2, 3)]


def test_a_household_merged_with_a_ring_member() -> None:
    # by the resolver: h1 shares a's entity, so h1 is in a's community whatever the graph says
    merged = {**ENTITY_OF, "h1": "E_a"}
    quality = measure(grouped(("a", "b", "c"), ("d", "e")), merged)
    assert quality.adjusted_rand_index == 1.0
    assert (quality.pairs.precision, quality.pairs.recall) == (1.0, 1.0)
    assert [(r.ring, r.captured, r.outsiders) for r in quality.rings] == [("R1", 3, 1), ("R2", 2, 0)]
    # a household member is never stray, and h2, left alone, is no false community
    assert (quality.false_communities, quality.stray_persons) == (0, 0)
    # by the community engine: the same figures
    same = measure(grouped(("a", "b", "c", "h1"), ("d", "e")))
    assert same.to_dict() == quality.to_dict()


def test_false_communities_are_made_only_of_persons_in_no_ring_and_no_household() -> None:
    quality = measure(grouped(("a", "b", "c"), ("d", "e"), ("x", "y"), ("h1", "h2", "z")))
    # {x, y} is false; {h1, h2, z} holds a household: not false, but z is stray
    assert (quality.false_communities, quality.false_community_persons) == (1, 2)
    assert quality.stray_persons == 3
    # two persons in one entity are one community of two persons
    merged = measure(grouped(("a", "b", "c"), ("d", "e")), {**ENTITY_OF, "y": "E_x"})
    assert (merged.false_communities, merged.false_community_persons, merged.stray_persons) == (1, 2, 2)


def test_a_stray_person_in_a_ring_community() -> None:
    quality = measure(grouped(("a", "b", "c", "x"), ("d", "e")))
    assert quality.rings[0].outsiders == 1
    assert (quality.false_communities, quality.stray_persons) == (0, 1)


def test_empty_inputs_give_defined_figures() -> None:
    quality = community_quality("community@1", {}, {}, {})
    assert quality.adjusted_rand_index == 1.0
    assert (quality.pairs.precision, quality.pairs.recall) == (1.0, 1.0)
    assert (quality.rings, quality.mean_share) == ((), 1.0)
    assert (quality.persons, quality.communities, quality.false_communities) == (0, 0, 0)
    assert CommunityQuality.from_dict(quality.to_dict()) == quality
    # rings whose members have no entity: nothing to find, and counted as unobserved
    unseen = community_quality("community@1", {}, {"x": "E_x"}, RINGS, HOUSEHOLDS)
    assert (unseen.ring_members, unseen.unobserved_ring_members, unseen.rings) == (0, 5, ())
    assert unseen.adjusted_rand_index == 1.0


def test_unobserved_ring_members_are_in_no_figure() -> None:
    seen = {p: e for p, e in ENTITY_OF.items() if p != "c"}
    quality = measure(grouped(("a", "b"), ("d", "e")), seen)
    assert (quality.ring_members, quality.unobserved_ring_members) == (4, 1)
    assert shares(quality) == {"R1": 1.0, "R2": 1.0}
    assert quality.adjusted_rand_index == 1.0


def test_a_ring_of_one_member_is_listed_but_does_not_lift_the_mean() -> None:
    rings = {**RINGS, "R3": ["s"]}
    entity_of = {**ENTITY_OF, "s": "E_s"}
    quality = community_quality("community@1", grouped(("a", "b"), ("c",), ("d", "e")), entity_of, rings)
    assert [(r.ring, r.members, r.share) for r in quality.rings][-1] == ("R3", 1, 1.0)
    assert quality.mean_share == pytest.approx((2 / 3 + 1) / 2)
    # alone, it agrees with the truth; put with another ring, it costs precision
    alone = community_quality("community@1", grouped(("a", "b", "c"), ("d", "e")), entity_of, rings)
    assert alone.adjusted_rand_index == 1.0
    joined = community_quality("community@1", grouped(("a", "b", "c", "s"), ("d", "e")), entity_of, rings)
    assert joined.pairs.precision == pytest.approx(4 / 7)
    assert joined.adjusted_rand_index < 1.0


def test_an_entity_alone_is_never_taken_for_a_community_of_the_same_name() -> None:
    # entity "c1" has no community; the community "c1" holds a and b
    entity_of = {"a": "E_a", "b": "E_b", "c": "c1"}
    quality = community_quality("community@1", {"E_a": "c1", "E_b": "c1"}, entity_of, {"R1": ["a", "b", "c"]})
    assert (quality.rings[0].captured, quality.communities) == (2, 2)
    assert quality.pairs.claimed_pairs == 1


def test_ties_for_the_best_community_go_to_the_smallest_id() -> None:
    quality = community_quality(
        "community@1", {"E_a": "k2", "E_b": "k1"}, {"a": "E_a", "b": "E_b"}, {"R1": ["a", "b"]}
    )
    assert quality.rings[0].best_community == "k1"


def test_a_person_in_two_rings_is_refused() -> None:
    with pytest.raises(ValueError, match="person a is in two rings"):
        community_quality("community@1", {}, ENTITY_OF, {"R1": ["a", "b"], "R2": ["a"]})


def test_the_figures_round_trip_through_json() -> None:
    quality = measure(grouped(("a", "b"), ("d", "e", "x"), ("c",)))
    data = quality.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["mean_share"] == pytest.approx(5 / 6)
    assert data["rings"][0]["share"] == pytest.approx(2 / 3)
    assert data["pairs"]["precision"] == 1.0
    assert CommunityQuality.from_dict(data) == quality
    assert quality.row() == {
        "engine": "community@1",
        "ring_members": 5,
        "ari": round(6 / 11, 3),
        "pair_precision": 1.0,
        "pair_recall": 0.5,
        "mean_share": round(5 / 6, 3),
        "outsiders": 1,
        "false_communities": 0,
        "false_community_persons": 0,
        "stray_persons": 1,
    }


def test_adjusted_rand_index_agrees_with_scikit_learn() -> None:
    rng = random.Random(43)
    for _ in range(200):
        items = [f"p{i}" for i in range(rng.randint(0, 30))]
        true_of = {i: rng.choice("ABCD"[: rng.randint(1, 4)]) for i in items}
        found_of = {i: f"k{rng.randrange(rng.randint(1, 12))}" for i in items}
        expected = adjusted_rand_score([true_of[i] for i in items], [found_of[i] for i in items])
        assert adjusted_rand_index(true_of, found_of) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    ("true_of", "found_of", "expected"),
    [
        ({}, {}, 1.0),
        ({"p": "A"}, {"p": "k1"}, 1.0),
        ({"p": "A", "q": "A"}, {"p": "k1", "q": "k1"}, 1.0),
        ({"p": "A", "q": "B"}, {"p": "k1", "q": "k2"}, 1.0),
        ({"p": "A", "q": "A"}, {"p": "k1", "q": "k2"}, 0.0),
        ({"p": "A", "q": "A", "r": "B", "s": "B"}, {"p": "k1", "q": "k2", "r": "k1", "s": "k2"}, -0.5),
    ],
    ids=["empty", "one", "together", "alone", "split", "crossed"],
)
def test_adjusted_rand_index_edge_cases(
    true_of: dict[str, str], found_of: dict[str, str], expected: float
) -> None:
    assert adjusted_rand_index(true_of, found_of) == expected
    if true_of:
        items = sorted(true_of)
        assert adjusted_rand_score([true_of[i] for i in items], [found_of[i] for i in items]) == expected


def test_adjusted_rand_index_refuses_partitions_of_different_items() -> None:
    with pytest.raises(ValueError, match="same items"):
        adjusted_rand_index({"p": "A"}, {"q": "A"})


def test_person_entities_puts_a_split_person_with_the_entity_holding_most_events() -> None:
    person_of = {"ann": "A", "Ann": "A", "bob": "B"}
    rows = [("ann", "e1", 2), ("Ann", "e2", 3), ("bob", "e2", 1), ("stranger", "e9", 5)]
    assert person_entities(rows, person_of) == {"A": "e2", "B": "e2"}
    # equal events: the smallest entity id
    assert person_entities([("ann", "e2", 1), ("Ann", "e1", 1)], person_of) == {"A": "e1"}
    assert person_entities([], person_of) == {}


def test_labelled_truth_gives_rings_and_households_apart(tmp_path: Path) -> None:
    path = tmp_path / "truth.json"
    path.write_text(
        json.dumps(
            {
                "identities": {"a@x": "a"},
                "rings": {"R001": ["a", "b"]},
                "households": {"dev_1": ["h1", "h2"]},
            }
        )
    )
    truth = load_truth(path)
    assert truth.rings() == {"R001": ("a", "b")}
    assert truth.households() == {"dev_1": ("h1", "h2")}
