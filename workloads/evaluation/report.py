"""The quality report of an engine change: old and new version side by side (pure).

:func:`compare_versions` measures both versions of a replay against one labelled truth
(:mod:`workloads.evaluation.metrics` for what is measured); :func:`unmeasured` is the
report when the data has no labelled truth. Either is recorded in the ledger (a
``quality_report`` entry) and shown with the replay's outcome.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from workloads.evaluation.metrics import (
    VersionQuality,
    correlation_quality,
    dominant_entity,
    group_pairs,
    pairwise_quality,
    persons_of_entities,
)
from workloads.evaluation.truth import LabelledTruth
from workloads.vocabulary import QualityBasis

__all__ = ["QualityReport", "VersionEvidence", "compare_versions", "unmeasured"]


@dataclass(frozen=True)
class VersionEvidence:
    """What one version produced, as plain values: how it grouped identities and what it linked."""

    engine: str
    """The resolver's ``name@version``."""
    identity_events: tuple[tuple[str, str, int], ...]
    """``(identity as spelt, entity, events)`` for every identity in the data."""
    links: tuple[tuple[str, str], ...]
    """``(entity_a, entity_b)`` of every current correlation the version's answer holds."""


@dataclass(frozen=True)
class QualityReport:
    """Quality of the old and the new version against one labelled truth, or why there is none."""

    basis: QualityBasis
    note: str
    source: str | None = None
    source_digest: str | None = None
    identities: int = 0
    """Labelled identities seen in the data (the ones measured)."""
    unlabelled_identities: int = 0
    """Identities in the data the truth does not label (not measured)."""
    persons: int = 0
    """True persons behind the measured identities."""
    old: VersionQuality | None = None
    new: VersionQuality | None = None

    @property
    def measured(self) -> bool:
        return self.old is not None and self.new is not None

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON values (what the ledger records; :meth:`from_dict` reads it back)."""
        data: dict[str, Any] = json.loads(json.dumps(asdict(self)))
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QualityReport:
        old, new = data.get("old"), data.get("new")
        return cls(
            basis=QualityBasis(str(data["basis"])),
            note=str(data.get("note", "")),
            source=data.get("source"),
            source_digest=data.get("source_digest"),
            identities=int(data.get("identities", 0)),
            unlabelled_identities=int(data.get("unlabelled_identities", 0)),
            persons=int(data.get("persons", 0)),
            old=VersionQuality.from_dict(old) if isinstance(old, Mapping) else None,
            new=VersionQuality.from_dict(new) if isinstance(new, Mapping) else None,
        )

    def rows(self) -> list[dict[str, Any]]:
        """One row per version: the figures a table shows."""
        rows = []
        for side, version in (("old", self.old), ("new", self.new)):
            if version is None:
                continue
            rows.append(
                {
                    "side": side,
                    "engine": version.engine,
                    "er_precision": round(version.entity_resolution.precision, 3),
                    "er_recall": round(version.entity_resolution.recall, 3),
                    "er_f1": round(version.entity_resolution.f1, 3),
                    "correlation_precision": round(version.correlations.pairs.precision, 3),
                    "correlation_recall": round(version.correlations.pairs.recall, 3),
                }
            )
        return rows


def unmeasured(note: str) -> QualityReport:
    """The report of data without labelled truth: says why, measures nothing."""
    return QualityReport(basis=QualityBasis.NONE, note=note)


def _version(
    evidence: VersionEvidence, truth: LabelledTruth, observed_persons: set[str], person_of: Mapping[str, str]
) -> VersionQuality:
    entity_of = dominant_entity(evidence.identity_events)
    true_pairs = group_pairs(truth.groups.values(), among=observed_persons)
    return VersionQuality(
        engine=evidence.engine,
        entity_resolution=pairwise_quality(entity_of, person_of),
        correlations=correlation_quality(
            evidence.links, persons_of_entities(entity_of, person_of), true_pairs
        ),
    )


def compare_versions(
    truth: LabelledTruth, old: VersionEvidence, new: VersionEvidence, *, note: str
) -> QualityReport:
    """Both versions measured against ``truth`` over the identities the data holds.

    Data whose identities the truth labels none of (labels of another history) is
    reported as unmeasured, with that reason, rather than as perfect or zero figures.
    """
    seen = _identities(old.identity_events) | _identities(new.identity_events)
    person_of = {i: p for i in seen if (p := truth.person_of.get(i)) is not None}
    if not person_of:
        return unmeasured(
            f"no ground truth: {truth.source} labels none of the {len(seen)} identities in the data"
        )
    observed = set(person_of.values())
    return QualityReport(
        basis=QualityBasis.GROUND_TRUTH,
        note=note,
        source=truth.source,
        source_digest=truth.digest,
        identities=len(person_of),
        unlabelled_identities=len(seen) - len(person_of),
        persons=len(observed),
        old=_version(old, truth, observed, person_of),
        new=_version(new, truth, observed, person_of),
    )


def _identities(rows: Iterable[tuple[str, str, int]]) -> set[str]:
    return {i for i, _, _ in rows}
