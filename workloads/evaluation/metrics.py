"""Quality of an engine version against labelled truth: pure functions over plain values.

Two questions, both answered as precision and recall over *pairs* (so that a merge of two
people and a split of one person are both counted, and the figures do not depend on
how the entity ids are spelt):

* **Entity resolution** (:func:`pairwise_quality`): take every pair of labelled
  identities (email spellings) seen in the data. The resolver *claims* a pair when it
  gives both the same entity; the truth *holds* a pair when both belong to the same
  person. Precision = correct claims / claims (merging two people costs precision),
  recall = correct claims / true pairs (leaving one person split costs recall).
* **Correlations** (:func:`correlation_quality`): every correlation links two entities;
  mapped back to the true persons behind them (an entity stands for the persons of its
  labelled identities), it claims one or more *person pairs*. The truth holds the pairs
  of persons that really share an asset: the members of a fraud ring pairwise, the two
  persons of a household (:func:`group_pairs`). A correlation between two entities of
  the *same* person claims that person paired with themselves: always wrong (a split
  identity made to look like two people sharing a card). Pairs are counted once
  however many correlations (types, validity windows) claim them. Truth pairs are
  restricted to persons seen in the data: a ring member with no events cannot be found.

Conventions for empty sets, so every figure is defined: with nothing claimed, precision
is 1.0 (nothing was claimed wrongly); with nothing to find, recall is 1.0; F1 is the
harmonic mean, 0.0 when precision and recall are both 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

PersonPair = tuple[str, str]
"""Two person ids, ordered (``a <= b``); ``a == b`` is a person paired with themselves."""

__all__ = [
    "CorrelationQuality",
    "PairQuality",
    "PersonPair",
    "VersionQuality",
    "correlation_quality",
    "dominant_entity",
    "group_pairs",
    "pairwise_quality",
    "persons_of_entities",
]


def _pairs(n: int) -> int:
    return n * (n - 1) // 2


@dataclass(frozen=True)
class PairQuality:
    """Claimed pairs against true pairs: the counts, and precision, recall and F1 computed
    from them (fields, so that every report, JSON and ledger entry carries them)."""

    claimed_pairs: int
    true_pairs: int
    correct_pairs: int
    precision: float = field(init=False)
    recall: float = field(init=False)
    f1: float = field(init=False)

    def __post_init__(self) -> None:
        claimed, true, correct = self.claimed_pairs, self.true_pairs, self.correct_pairs
        if not 0 <= correct <= min(claimed, true):
            raise ValueError(f"correct pairs {correct} must be within 0..min(claimed, true)")
        precision = correct / claimed if claimed else 1.0
        recall = correct / true if true else 1.0
        object.__setattr__(self, "precision", precision)
        object.__setattr__(self, "recall", recall)
        object.__setattr__(
            self, "f1", 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PairQuality:
        return cls(int(data["claimed_pairs"]), int(data["true_pairs"]), int(data["correct_pairs"]))


def pairwise_quality(entity_of: Mapping[str, str], person_of: Mapping[str, str]) -> PairQuality:
    """Pairwise precision/recall of a grouping of identities (``identity -> entity``) against
    the true persons (``identity -> person``), over the identities both know.

    Counted from the contingency of (entity, person) cells, never by listing pairs, so it
    is linear in the number of identities.
    """
    shared = [i for i in entity_of if i in person_of]
    by_entity = Counter(entity_of[i] for i in shared)
    by_person = Counter(person_of[i] for i in shared)
    by_cell = Counter((entity_of[i], person_of[i]) for i in shared)
    return PairQuality(
        claimed_pairs=sum(_pairs(n) for n in by_entity.values()),
        true_pairs=sum(_pairs(n) for n in by_person.values()),
        correct_pairs=sum(_pairs(n) for n in by_cell.values()),
    )


def group_pairs(
    groups: Iterable[Iterable[str]], *, among: Iterable[str] | None = None
) -> frozenset[PersonPair]:
    """Every ordered pair of distinct persons in the same group (a ring, a household).

    ``among`` keeps only persons in it (the persons seen in the data).
    """
    seen = None if among is None else set(among)
    found: set[PersonPair] = set()
    for group in groups:
        members = sorted({p for p in group if seen is None or p in seen})
        found.update(combinations(members, 2))
    return frozenset(found)


def dominant_entity(counts: Iterable[tuple[str, str, int]]) -> dict[str, str]:
    """``identity -> entity`` from ``(identity, entity, events)`` rows: the entity holding
    most of the identity's events (ties: the smallest id). A resolver gives one entity per
    identity; this only keeps the figures defined should one ever give several."""
    best: dict[str, tuple[int, str]] = {}
    for identity, entity, n in counts:
        current = best.get(identity)
        if current is None or (-n, entity) < (-current[0], current[1]):
            best[identity] = (n, entity)
    return {identity: entity for identity, (_, entity) in best.items()}


def persons_of_entities(
    entity_of: Mapping[str, str], person_of: Mapping[str, str]
) -> dict[str, frozenset[str]]:
    """``entity -> persons`` of its labelled identities (entities with none are left out)."""
    found: dict[str, set[str]] = {}
    for identity, entity in entity_of.items():
        person = person_of.get(identity)
        if person is not None:
            found.setdefault(entity, set()).add(person)
    return {entity: frozenset(persons) for entity, persons in found.items()}


@dataclass(frozen=True)
class CorrelationQuality:
    """Correlations mapped to person pairs, against the true shared-asset pairs."""

    pairs: PairQuality
    self_links: int
    """Person pairs claimed between two entities of one person (counted in ``pairs``)."""
    unmapped_correlations: int
    """Correlations with an entity no labelled identity maps to (not counted at all)."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CorrelationQuality:
        return cls(
            PairQuality.from_dict(data["pairs"]), int(data["self_links"]), int(data["unmapped_correlations"])
        )


def correlation_quality(
    links: Iterable[tuple[str, str]],
    persons_of: Mapping[str, frozenset[str]],
    true_pairs: frozenset[PersonPair],
) -> CorrelationQuality:
    """Precision/recall of correlation ``links`` (entity pairs) mapped to persons (module docs)."""
    claimed: set[PersonPair] = set()
    unmapped = 0
    for a, b in links:
        left, right = persons_of.get(a), persons_of.get(b)
        if not left or not right:
            unmapped += 1
            continue
        claimed.update((min(p, q), max(p, q)) for p in left for q in right)
    return CorrelationQuality(
        pairs=PairQuality(
            claimed_pairs=len(claimed), true_pairs=len(true_pairs), correct_pairs=len(claimed & true_pairs)
        ),
        self_links=sum(1 for p, q in claimed if p == q),
        unmapped_correlations=unmapped,
    )


@dataclass(frozen=True)
class VersionQuality:
    """One engine version's figures: entity resolution and the correlations built on it."""

    engine: str
    entity_resolution: PairQuality
    correlations: CorrelationQuality

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VersionQuality:
        return cls(
            engine=str(data["engine"]),
            entity_resolution=PairQuality.from_dict(data["entity_resolution"]),
            correlations=CorrelationQuality.from_dict(data["correlations"]),
        )
