"""Building a run's candidate: staging it beside serving and writing the run's changes into it.

A candidate is an Iceberg branch or a Delta shadow table named after the run and the
serving version it was staged from (:func:`~workloads.replay.identity.candidate_name`).
:func:`build_candidate` resumes a candidate that already holds this run's rows (a build
interrupted after writing), unless asked to rebuild.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from lakehouse.errors import ReplayError
from lakehouse.tables import Candidate, Table
from workloads.replay import candidate as cand
from workloads.replay.analysis import Analysis
from workloads.replay.answer import RUN, SUPERSEDE_REASON, AnswerTable, ReasonTemplate
from workloads.replay.identity import candidate_name, run_candidates
from workloads.replay.setup import Setup

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)


def _stage(table: Table, run_id: str) -> Candidate:
    """Stage a fresh candidate of ``run_id`` from current serving (named after its base)."""
    for _ in range(3):
        base = table.current_version()
        name = candidate_name(run_id, base)
        staged = table.stage_candidate(name)
        if staged.base_version == base:
            return staged
        table.drop_candidate(staged)  # serving moved between reading the version and staging
    raise ReplayError(f"{table.name} kept changing while staging the candidate of {run_id}; rerun the replay")


def _holds_run(
    table: Table, candidate: Candidate, run_id: str, months: Sequence[str], answer: AnswerTable
) -> bool:
    """Whether a staged candidate already holds this run's build (its rows or retirements)."""
    from pyspark.sql import functions as F

    rows = cand.restrict_months(table.read_candidate(candidate), months, answer)
    marked = rows.where(
        (F.col(RUN) == run_id) | F.col(SUPERSEDE_REASON).contains(ReasonTemplate.run_marker(run_id))
    )
    return not marked.isEmpty()


def build_candidate(
    table: Table, setup: Setup, analysis: Analysis, *, built_at: datetime, rebuild: bool
) -> tuple[Candidate, bool]:
    """The run's candidate with its changes written; returns it and whether it was resumed."""
    answer = setup.answer
    months = cand.months_of(analysis.changes, answer)
    existing = run_candidates(table, setup.run_id)
    if existing and not rebuild and _holds_run(table, existing[-1], setup.run_id, months, answer):
        for stale in existing[:-1]:
            table.drop_candidate(stale)
        log.info("run %s resumes its candidate %s", setup.run_id, existing[-1].name)
        return existing[-1], True
    for stale in existing:
        table.drop_candidate(stale)
    staged = _stage(table, setup.run_id)
    if months:
        base = cand.restrict_months(table.read_candidate(staged), months, answer)
        content = cand.apply_changes(
            base, analysis.changes, run_id=setup.run_id, effective_at=built_at, answer=answer
        )
        table.overwrite_partitions(
            content,
            run_id=setup.run_id,
            metadata={"lakehouse.replay-step": "build"},
            candidate=staged,
        )
    log.info(
        "run %s built candidate %s of %s in %d partitions", setup.run_id, staged.name, table.name, len(months)
    )
    return staged, False


def read_base(table: Table, version: int | None) -> DataFrame:
    """Serving as of ``version`` (an empty frame of the table's schema for None)."""
    if version is None:
        return table.read().limit(0)
    return table.read(as_of=version)
