"""Is the new version better? The replay's quality report, old and new version side by side.

Every comparison or correction replay measures both engine versions against the labelled
truth of its input history (:mod:`workloads.evaluation`) and records the result as a
``quality_comparison`` ledger entry, next to its reconciliation decision:

* the truth is located before anything is built (:func:`locate_truth`): the one given
  (``lakehouse replay --truth PATH``), else the labelled truth file beside the delivery
  folders the lakehouse's recorded ingest runs read. Real feeds have none: the report
  then says so (basis ``none``) and the replay goes on as before;
* the evidence is collected from what the replay computed anyway (:func:`measure`): how
  each version grouped the identities (the analysis resolved every distinct identity under
  both) and which
  entity pairs each answer links (serving's current correlations for the old version,
  the candidate's for the new one). Only distinct ``(identity, entity)`` counts and
  distinct entity pairs reach the driver, and only when there is truth to measure against.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ledger.entries import LedgerEntryBase, QualityComparison, RunStarted
from ledger.reader import LedgerReader
from workloads.evaluation import (
    LabelledTruth,
    QualityReport,
    TruthSearch,
    VersionEvidence,
    compare_versions,
    find_truth,
    unmeasured,
)
from workloads.replay import candidate as cand
from workloads.replay import scope as sc
from workloads.vocabulary import QualityBasis

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.tables import TableRegistry
    from workloads.replay.setup import Setup

log = logging.getLogger(__name__)

INGEST_PURPOSE = "ingest"
"""The purpose of the recorded runs whose ``source`` parameter says where deliveries came from."""

__all__ = ["locate_truth", "measure", "quality_entry", "recorded_quality"]


def ingested_sources(registry: TableRegistry) -> list[str]:
    """The folders the lakehouse's recorded ingest runs read their deliveries from."""
    sources = set()
    for entry in LedgerReader.for_registry(registry).entries(kind="run_started"):
        if isinstance(entry, RunStarted) and entry.purpose == INGEST_PURPOSE:
            source = entry.parameters.get("source")
            if isinstance(source, str) and source:
                sources.add(source)
    return sorted(sources)


def locate_truth(registry: TableRegistry, given: LabelledTruth | None = None) -> TruthSearch:
    """The labelled truth a replay measures against, or why there is none (module docs)."""
    search = find_truth(given, [] if given is not None else ingested_sources(registry))
    log.info("quality: %s", search.note)
    return search


def _identity_events(identities: DataFrame, column: str) -> tuple[tuple[str, str, int], ...]:
    from pyspark.sql import functions as F

    rows = (
        identities.where(F.col(column).isNotNull())
        .groupBy("customer_email", column)
        .agg(F.sum("events").alias("n"))
        .collect()
    )
    return tuple(sorted((str(r["customer_email"]), str(r[column]), int(r["n"])) for r in rows))


def _links(answer: DataFrame, subjects: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    first, second = subjects
    rows = answer.where(cand.is_current()).select(first, second).distinct().collect()
    return tuple(sorted((str(r[first]), str(r[second])) for r in rows))


def measure(
    search: TruthSearch, setup: Setup, identities: DataFrame, serving: DataFrame, candidate: DataFrame
) -> QualityReport:
    """Old and new version against the located truth (``identities``: the analysis' distinct
    identity tuples with their event counts under both versions; ``serving``/``candidate``:
    the answer table before and after)."""
    if search.truth is None:
        return unmeasured(search.note)
    engines, subjects = setup.engines, setup.answer.subjects
    old = VersionEvidence(engines.old.ref, _identity_events(identities, sc.OLD), _links(serving, subjects))
    new = VersionEvidence(engines.new.ref, _identity_events(identities, sc.NEW), _links(candidate, subjects))
    report = compare_versions(search.truth, old, new, note=search.note)
    if report.old is not None and report.new is not None:
        log.info(
            "run %s quality: ER F1 %.3f -> %.3f, correlation precision %.3f -> %.3f, recall %.3f -> %.3f",
            setup.run_id,
            report.old.entity_resolution.f1,
            report.new.entity_resolution.f1,
            report.old.correlations.pairs.precision,
            report.new.correlations.pairs.precision,
            report.old.correlations.pairs.recall,
            report.new.correlations.pairs.recall,
        )
    return report


def quality_entry(setup: Setup, table: str, report: QualityReport) -> QualityComparison:
    """The ledger entry recording ``report`` for the run."""
    return QualityComparison(
        run_id=setup.run_id,
        table=table,
        basis="ground_truth" if report.basis is QualityBasis.GROUND_TRUTH else "none",
        old_engine=setup.engines.old.ref,
        new_engine=setup.engines.new.ref,
        report=report.to_dict(),
    )


def recorded_quality(entries: Sequence[LedgerEntryBase]) -> QualityReport | None:
    """The latest quality report among a run's ledger entries (None for runs recorded before
    replays measured quality)."""
    found = [e for e in entries if isinstance(e, QualityComparison)]
    return QualityReport.from_dict(found[-1].report) if found else None
