"""Quality metrics on tiny hand-made groupings whose answers are known by counting."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from lakehouse.errors import ConfigError
from workloads.evaluation import (
    PairQuality,
    QualityReport,
    VersionEvidence,
    compare_versions,
    correlation_quality,
    find_truth,
    group_pairs,
    load_truth,
    pairwise_quality,
    unmeasured,
)
from workloads.evaluation.metrics import dominant_entity, persons_of_entities
from workloads.vocabulary import QualityBasis

# Three persons: ann has three spellings, bob two, cy one.
PERSON_OF = {"ann": "A", "Ann": "A", "ann+x": "A", "bob": "B", "b.ob": "B", "cy": "C"}


def test_a_perfect_grouping_scores_one() -> None:
    grouping = {"ann": "e1", "Ann": "e1", "ann+x": "e1", "bob": "e2", "b.ob": "e2", "cy": "e3"}
    quality = pairwise_quality(grouping, PERSON_OF)
    assert (quality.claimed_pairs, quality.true_pairs, quality.correct_pairs) == (4, 4, 4)
    assert (quality.precision, quality.recall, quality.f1) == (1.0, 1.0, 1.0)


def test_splitting_a_person_costs_recall_only() -> None:
    # ann split in two (ann+Ann | ann+x), bob split in two: claimed 1 pair, 4 true pairs.
    grouping = {"ann": "e1", "Ann": "e1", "ann+x": "e2", "bob": "e3", "b.ob": "e4", "cy": "e5"}
    quality = pairwise_quality(grouping, PERSON_OF)
    assert (quality.claimed_pairs, quality.true_pairs, quality.correct_pairs) == (1, 4, 1)
    assert quality.precision == 1.0
    assert quality.recall == 0.25
    assert quality.f1 == pytest.approx(0.4)


def test_merging_two_persons_costs_precision_only() -> None:
    # bob and cy merged: claimed = C(3,2) [ann] + C(3,2) [bob, b.ob, cy] = 6; correct 4.
    grouping = {"ann": "e1", "Ann": "e1", "ann+x": "e1", "bob": "e2", "b.ob": "e2", "cy": "e2"}
    quality = pairwise_quality(grouping, PERSON_OF)
    assert (quality.claimed_pairs, quality.true_pairs, quality.correct_pairs) == (6, 4, 4)
    assert quality.precision == pytest.approx(4 / 6)
    assert quality.recall == 1.0
    assert quality.f1 == pytest.approx(0.8)


def test_only_identities_both_sides_know_are_measured() -> None:
    grouping = {"ann": "e1", "Ann": "e1", "stranger": "e1"}
    quality = pairwise_quality(grouping, PERSON_OF)
    assert (quality.claimed_pairs, quality.true_pairs, quality.correct_pairs) == (1, 1, 1)


def test_singletons_and_no_pairs_follow_the_documented_conventions() -> None:
    singles = {"x": "P1", "y": "P2"}
    assert dataclasses.asdict(pairwise_quality({"x": "e1", "y": "e2"}, singles)) == {
        "claimed_pairs": 0,
        "true_pairs": 0,
        "correct_pairs": 0,
        "precision": 1.0,
        "recall": 1.0,
        "f1": 1.0,
    }
    # nothing claimed, something to find: precision vacuous, recall 0, F1 0
    nothing = pairwise_quality({"ann": "e1", "Ann": "e2"}, PERSON_OF)
    assert (nothing.precision, nothing.recall, nothing.f1) == (1.0, 0.0, 0.0)
    # everything wrong: both 0, F1 defined as 0
    assert PairQuality(claimed_pairs=2, true_pairs=3, correct_pairs=0).f1 == 0.0
    assert pairwise_quality({}, {}).f1 == 1.0
    with pytest.raises(ValueError, match="correct pairs"):
        PairQuality(claimed_pairs=1, true_pairs=5, correct_pairs=2)


def test_group_pairs_are_every_pair_of_distinct_members_among_the_seen() -> None:
    groups = [("A", "B", "C"), ("D", "E"), ("F",)]
    assert group_pairs(groups) == {("A", "B"), ("A", "C"), ("B", "C"), ("D", "E")}
    assert group_pairs(groups, among={"A", "C", "D"}) == {("A", "C")}
    assert group_pairs([]) == frozenset()


def test_correlations_are_judged_as_person_pairs() -> None:
    persons = {"e1": frozenset({"A"}), "e2": frozenset({"B"}), "e3": frozenset({"A"}), "e4": frozenset({"C"})}
    true_pairs = frozenset({("A", "B"), ("B", "C")})
    links = [("e1", "e2"), ("e3", "e2"), ("e1", "e3"), ("e2", "e9")]
    quality = correlation_quality(links, persons, true_pairs)
    # (A,B) twice counts once; (A,A) is a self link (a split person); e9 is unmapped; (B,C) missed.
    assert (quality.pairs.claimed_pairs, quality.pairs.true_pairs, quality.pairs.correct_pairs) == (2, 2, 1)
    assert (quality.pairs.precision, quality.pairs.recall) == (0.5, 0.5)
    assert (quality.self_links, quality.unmapped_correlations) == (1, 1)


def test_a_merged_entity_erases_the_pair_inside_it() -> None:
    # ring A, B, C; the resolver merged A and B into one entity: (A, B) can no longer be linked.
    persons = {"x": frozenset({"A", "B"}), "y": frozenset({"C"})}
    true_pairs = group_pairs([("A", "B", "C")])
    quality = correlation_quality([("x", "y")], persons, true_pairs)
    assert (quality.pairs.claimed_pairs, quality.pairs.correct_pairs, quality.pairs.true_pairs) == (2, 2, 3)
    assert quality.pairs.recall == pytest.approx(2 / 3)
    assert correlation_quality([], persons, frozenset()).pairs.precision == 1.0


def test_dominant_entity_and_persons_of_entities() -> None:
    rows = [("ann", "e2", 3), ("ann", "e1", 3), ("ann", "e3", 1), ("bob", "e5", 1)]
    assert dominant_entity(rows) == {"ann": "e1", "bob": "e5"}
    assert persons_of_entities({"ann": "e1", "bob": "e1", "zed": "e2"}, PERSON_OF) == {
        "e1": frozenset({"A", "B"})
    }


def truth_file(tmp_path: Path, document: object, name: str = "truth.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


TRUTH = {
    "identities": {"ann": "A", " Ann ": "A", "ann+x": "A", "bob": "B", "cy": "C"},
    "rings": {"R1": ["A", "B"]},
    "households": {"dev_1": ["B", "C"]},
    "faults": [{"ignored": True}],
}


def test_a_labelled_truth_file_is_loaded_with_other_keys_ignored(tmp_path: Path) -> None:
    truth = load_truth(truth_file(tmp_path, TRUTH))
    assert truth.person(" Ann ") == "A"  # spelt as delivered: padding is part of the spelling
    assert truth.person("Ann") is None
    assert truth.groups == {"rings/R1": ("A", "B"), "households/dev_1": ("B", "C")}
    assert len(truth.digest) == 64


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"rings": {}}, "missing key 'identities'"),
        ({"identities": {}}, "key 'identities'"),
        ({"identities": {"a": "A"}, "rings": {"R": "A"}}, "key 'rings.R'"),
        ({"identities": {" ": "A"}}, "must not be blank"),
        ([1, 2], "JSON object"),
    ],
)
def test_a_bad_truth_file_is_one_line_naming_file_and_key(
    tmp_path: Path, document: object, message: str
) -> None:
    path = truth_file(tmp_path, document)
    with pytest.raises(ConfigError, match=message) as caught:
        load_truth(path)
    assert str(path) in str(caught.value)
    assert "\n" not in str(caught.value)
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="not JSON"):
        load_truth(tmp_path / "broken.json")
    with pytest.raises(ConfigError, match="not found"):
        load_truth(tmp_path / "missing.json")


def test_truth_is_found_beside_the_ingested_deliveries(tmp_path: Path) -> None:
    root = tmp_path / "history"
    (root / "orders").mkdir(parents=True)
    assert find_truth(None, []).truth is None
    missing = find_truth(None, [str(root)])
    assert missing.truth is None
    assert missing.note.startswith("no ground truth")
    truth_file(root, TRUTH, "_ground_truth.json")
    assert find_truth(None, [str(root)]).truth is not None
    assert find_truth(None, [str(root / "orders"), str(root)]).truth is not None  # a feed folder: its parent
    other = tmp_path / "other"
    other.mkdir()
    truth_file(other, TRUTH, "_ground_truth.json")
    several = find_truth(None, [str(root), str(other)])
    assert several.truth is None
    assert "several" in several.note
    given = load_truth(truth_file(tmp_path, TRUTH))
    assert find_truth(given, [str(root), str(other)]).truth is given


def test_compare_versions_reports_old_and_new_side_by_side(tmp_path: Path) -> None:
    truth = load_truth(truth_file(tmp_path, TRUTH))
    # old: ann split (e1: ann, Ann | e2: ann+x) and correlated with herself; bob-cy linked
    old = VersionEvidence(
        engine="entity_resolution@1",
        identity_events=(
            ("ann", "e1", 2),
            (" Ann ", "e1", 1),
            ("ann+x", "e2", 1),
            ("bob", "e3", 4),
            ("cy", "e4", 1),
        ),
        links=(("e1", "e2"), ("e3", "e4")),
    )
    # new: ann whole, and linked to bob (ring) and bob to cy (household)
    new = VersionEvidence(
        engine="entity_resolution@3",
        identity_events=(
            ("ann", "e1", 3),
            (" Ann ", "e1", 1),
            ("ann+x", "e1", 1),
            ("bob", "e3", 4),
            ("cy", "e4", 1),
            ("zed", "e9", 1),
        ),
        links=(("e1", "e3"), ("e3", "e4")),
    )
    report = compare_versions(truth, old, new, note="given")
    assert report.basis is QualityBasis.GROUND_TRUTH
    assert (report.identities, report.unlabelled_identities, report.persons) == (5, 1, 3)
    assert report.old is not None
    assert report.new is not None
    assert report.old.entity_resolution.recall == pytest.approx(1 / 3, abs=1e-6)
    assert report.new.entity_resolution.f1 == 1.0
    assert (report.old.correlations.pairs.precision, report.old.correlations.pairs.recall) == (0.5, 0.5)
    assert report.old.correlations.self_links == 1
    assert (report.new.correlations.pairs.precision, report.new.correlations.pairs.recall) == (1.0, 1.0)
    assert QualityReport.from_dict(json.loads(json.dumps(report.to_dict()))) == report
    assert [(r["side"], r["engine"], r["er_f1"]) for r in report.rows()] == [
        ("old", "entity_resolution@1", 0.5),
        ("new", "entity_resolution@3", 1.0),
    ]


def test_data_without_labels_is_reported_not_failed(tmp_path: Path) -> None:
    truth = load_truth(truth_file(tmp_path, TRUTH))
    strangers = VersionEvidence("entity_resolution@1", (("x@y", "e1", 1),), ())
    report = compare_versions(truth, strangers, strangers, note="given")
    assert report.basis is QualityBasis.NONE
    assert not report.measured
    assert "labels none of the 1 identities" in report.note
    none = unmeasured("no ground truth: real feeds")
    assert none.rows() == []
    assert QualityReport.from_dict(none.to_dict()) == none
