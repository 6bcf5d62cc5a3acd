"""Communities against the true fraud rings: pure functions over plain values.

A community engine groups *entities* (the vertices of the correlation graph); the labelled
truth (:mod:`~workloads.evaluation.truth`) groups *persons* into rings and households. The
measure joins them through two mappings, both inputs:

* ``entity_of``: person -> the one entity that stands for them (:func:`person_entities`
  builds it from what a resolver produced: the entity holding most of the person's events,
  ties to the smallest id, so a person split over several entities is counted once).
  Persons not in it are *unobserved* (no events in the data): they are left out of every
  figure, and the ring members among them are counted apart, since no engine can find them.
* ``community_of``: entity -> community id (the label propagation frame, collected). An
  entity absent from it is a community of its own (a vertex with no edge is alone).

A person's community is the community of their entity, so an entity that merged several
persons puts each of them in its community: two persons in one entity are always
together, whatever the community engine does. Only observed persons count, in the figures
below as everywhere in this module:

* **ring members**: the observed persons of the rings. A person in two rings is refused
  (``ValueError``): rings must partition their members for the adjusted Rand index.
* **adjusted Rand index** over the ring members: the partition by ring against the
  partition by community, from the contingency table (Hubert and Arabie; the same value as
  ``sklearn.metrics.adjusted_rand_score``). 1.0 when the two partitions are the same
  (which covers no ring members, one member, and all members alone on both sides); 0.0 is
  what chance gives; it can be negative.
* **pairwise precision and recall** over the ring members (a
  :class:`~workloads.evaluation.metrics.PairQuality`, with its conventions for empty sets):
  a pair of ring members is true when both are in one ring, claimed when both are in one
  community.
* **share captured**, per ring: the most members one community holds (its *best
  community*; ties to the smallest community id, an entity alone after every
  community of ``community_of``), divided by the ring's observed members.
  Its *outsiders* are the persons of that community not in the ring (members of other
  rings or not in any ring): a community holding everyone captures every ring whole, and
  this says at what price. The **mean share** is over the rings with at least two observed
  members (a ring of one is captured whole by any grouping: it is listed, with share 1.0,
  but it does not lift the mean); with no such ring the mean is 1.0, nothing to find.
* **false communities** among the persons outside rings, households excluded: communities
  of at least two observed persons none of whom is a ring member or a household member
  (households share a device for real: grouping them is right). Counted, with the persons
  in them. **Stray persons** counts more widely: observed persons in no ring and no
  household who share their community with anyone, whether a false community, a ring's
  or a household's.

Nothing here knows Spark or the generator; the wiring collects the frames and the truth.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from workloads.evaluation.metrics import PairQuality, dominant_entity, pairwise_quality

__all__ = [
    "CommunityQuality",
    "RingCapture",
    "adjusted_rand_index",
    "community_quality",
    "person_entities",
]

_FOUND, _ALONE = "c:", "e:"
"""How this module keys a community: ``c:<id>`` from ``community_of``, ``e:<entity>`` for an
entity alone, so that an entity id never collides with a community id (and sorts after)."""


def adjusted_rand_index(true_of: Mapping[str, str], found_of: Mapping[str, str]) -> float:
    """The adjusted Rand index of two partitions of the same items (``item -> group``).

    From the contingency table: with ``index`` the pairs together on both sides, ``a`` and
    ``b`` the pairs together on each side and ``n`` all pairs,
    ``ARI = (index - a*b/n) / ((a + b)/2 - a*b/n)``, computed in integers until the last
    division. The denominator is 0 only when both sides put every item alone or both put
    every item together (then they agree): 1.0, as for fewer than two items.
    """
    if set(true_of) != set(found_of):
        raise ValueError("the two partitions must cover the same items")
    return _ari(pairwise_quality(found_of, true_of), len(true_of))


def _ari(pairs: PairQuality, items: int) -> float:
    """:func:`adjusted_rand_index` from the pair counts of the contingency table."""
    index, a, b = pairs.correct_pairs, pairs.true_pairs, pairs.claimed_pairs
    n = items * (items - 1) // 2
    denominator = (a + b) * n - 2 * a * b
    if denominator == 0:
        return 1.0
    return 2 * (index * n - a * b) / denominator


def person_entities(
    identity_events: Iterable[tuple[str, str, int]], person_of: Mapping[str, str]
) -> dict[str, str]:
    """``person -> entity`` from ``(identity, entity, events)`` rows and the truth's
    ``identity -> person``: the entity holding most of the person's events, over all their
    labelled identities (ties: the smallest entity id). Unlabelled identities are left out."""
    events: Counter[tuple[str, str]] = Counter()
    for identity, entity, n in identity_events:
        person = person_of.get(identity)
        if person is not None:
            events[(person, entity)] += n
    return dominant_entity((person, entity, n) for (person, entity), n in events.items())


@dataclass(frozen=True)
class RingCapture:
    """One ring against its best community (module docstring)."""

    ring: str
    members: int
    """The ring's observed members."""
    best_community: str
    """The community holding most of them (an entity's id when that entity is alone)."""
    captured: int
    """Members in the best community."""
    outsiders: int
    """Persons in the best community who are not in the ring."""

    @property
    def share(self) -> float:
        return self.captured / self.members

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "share": self.share}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RingCapture:
        return cls(
            str(data["ring"]),
            int(data["members"]),
            str(data["best_community"]),
            int(data["captured"]),
            int(data["outsiders"]),
        )


@dataclass(frozen=True)
class CommunityQuality:
    """How well one engine version's communities recover the true rings (module docstring)."""

    engine: str
    """The community engine's ``name@version``."""
    persons: int
    """Observed persons (the ones measured)."""
    communities: int
    """Communities the observed persons fall in (an entity alone counts as one)."""
    ring_members: int
    """Observed ring members."""
    unobserved_ring_members: int
    """Ring members with no entity: in no figure."""
    adjusted_rand_index: float
    pairs: PairQuality
    """Pairwise precision and recall over the ring members."""
    rings: tuple[RingCapture, ...]
    """Every ring with an observed member, by ring id."""
    false_communities: int
    false_community_persons: int
    stray_persons: int

    @property
    def mean_share(self) -> float:
        """The mean share captured over the rings of at least two observed members (1.0 with none)."""
        shares = [ring.share for ring in self.rings if ring.members >= 2]
        return sum(shares) / len(shares) if shares else 1.0

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON values (what a ledger entry records; :meth:`from_dict` reads it
        back). Derived figures (precision, recall, shares, the mean) are written too."""
        data = {
            **{key: value for key, value in asdict(self).items() if key != "rings"},
            "rings": [ring.to_dict() for ring in self.rings],
            "mean_share": self.mean_share,
        }
        result: dict[str, Any] = json.loads(json.dumps(data))
        return result

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CommunityQuality:
        return cls(
            engine=str(data["engine"]),
            persons=int(data["persons"]),
            communities=int(data["communities"]),
            ring_members=int(data["ring_members"]),
            unobserved_ring_members=int(data["unobserved_ring_members"]),
            adjusted_rand_index=float(data["adjusted_rand_index"]),
            pairs=PairQuality.from_dict(data["pairs"]),
            rings=tuple(RingCapture.from_dict(ring) for ring in data["rings"]),
            false_communities=int(data["false_communities"]),
            false_community_persons=int(data["false_community_persons"]),
            stray_persons=int(data["stray_persons"]),
        )

    def row(self) -> dict[str, Any]:
        """The headline figures, rounded: one row of a table (README, demo, report)."""
        return {
            "engine": self.engine,
            "ring_members": self.ring_members,
            "ari": round(self.adjusted_rand_index, 3),
            "pair_precision": round(self.pairs.precision, 3),
            "pair_recall": round(self.pairs.recall, 3),
            "mean_share": round(self.mean_share, 3),
            "outsiders": sum(ring.outsiders for ring in self.rings),
            "false_communities": self.false_communities,
            "false_community_persons": self.false_community_persons,
            "stray_persons": self.stray_persons,
        }


def community_quality(
    engine: str,
    community_of: Mapping[str, str],
    entity_of: Mapping[str, str],
    rings: Mapping[str, Iterable[str]],
    households: Iterable[Iterable[str]] = (),
) -> CommunityQuality:
    """The communities ``community_of`` (entity -> community) measured against ``rings``
    (ring id -> persons), with ``entity_of`` (person -> entity) joining the two and
    ``households`` (groups of persons) excluded from the false communities; every figure
    as the module docstring defines it."""
    community = {
        person: _FOUND + community_of[entity] if entity in community_of else _ALONE + entity
        for person, entity in entity_of.items()
    }
    ring_of: dict[str, str] = {}
    unobserved = 0
    for ring, members in rings.items():
        for person in set(members):
            if person in ring_of:
                raise ValueError(f"person {person} is in two rings ({ring_of[person]} and {ring})")
            ring_of[person] = ring
            unobserved += person not in community
    observed_ring = {person: ring for person, ring in ring_of.items() if person in community}
    in_household = {person for group in households for person in group}

    persons_in: dict[str, list[str]] = defaultdict(list)
    for person, found in community.items():
        persons_in[found].append(person)

    found_of = {person: community[person] for person in observed_ring}
    pairs = pairwise_quality(found_of, observed_ring)
    by_cell = Counter((ring, found_of[person]) for person, ring in observed_ring.items())

    captures = []
    for ring, size in sorted(Counter(observed_ring.values()).items()):
        captured, best = min((-n, found) for (r, found), n in by_cell.items() if r == ring)
        outsiders = sum(1 for person in persons_in[best] if observed_ring.get(person) != ring)
        captures.append(RingCapture(ring, size, _name(best), -captured, outsiders))

    outside = {person for person in community if person not in ring_of and person not in in_household}
    false = [
        members
        for members in persons_in.values()
        if len(members) >= 2 and all(person in outside for person in members)
    ]
    return CommunityQuality(
        engine=engine,
        persons=len(community),
        communities=len(persons_in),
        ring_members=len(observed_ring),
        unobserved_ring_members=unobserved,
        adjusted_rand_index=_ari(pairs, len(observed_ring)),
        pairs=pairs,
        rings=tuple(captures),
        false_communities=len(false),
        false_community_persons=sum(len(members) for members in false),
        stray_persons=sum(1 for person in outside if len(persons_in[community[person]]) >= 2),
    )


def _name(community: str) -> str:
    return community.split(":", 1)[1]
