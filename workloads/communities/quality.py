"""The communities of a run against the labelled truth's rings: the evidence collected from
Spark (which entity stands for each labelled person, which community holds each entity) and
the figures of :mod:`workloads.evaluation.communities`.

Only distinct ``(identity, entity, events)`` rows and ``(entity, community)`` pairs reach the
driver, and only when there is truth to measure against. What the ledger records
(:func:`recorded_report`) holds figures and ring names only: the best community of a ring
is left out, since a community of one is named by a digest of its one entity id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workloads.evaluation.communities import CommunityQuality, community_quality, person_entities

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from workloads.evaluation import LabelledTruth

__all__ = ["measure", "recorded_report"]


def measure(engine: str, truth: LabelledTruth, events: DataFrame, communities: DataFrame) -> CommunityQuality:
    """``communities`` (``entity_id``, ``community_id``) against ``truth``'s rings, persons
    joined to entities through the Silver ``events`` (``customer_email``, ``entity_id``)."""
    from pyspark.sql import functions as F

    counted = (
        events.where(F.col("customer_email").isNotNull() & F.col("entity_id").isNotNull())
        .groupBy("customer_email", "entity_id")
        .count()
        .collect()
    )
    identity_events = sorted(
        (str(r["customer_email"]), str(r["entity_id"]), int(r["count"])) for r in counted
    )
    entity_of = person_entities(identity_events, truth.person_of)
    community_of = {
        str(r["entity_id"]): str(r["community_id"])
        for r in communities.select("entity_id", "community_id").collect()
    }
    return community_quality(engine, community_of, entity_of, truth.rings(), truth.households().values())


def recorded_report(quality: CommunityQuality) -> dict[str, Any]:
    """The figures as the ledger keeps them (module docstring: no community names)."""
    report = quality.to_dict()
    for ring in report["rings"]:
        ring["best_community"] = ""
    return report
