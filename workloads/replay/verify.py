"""The check after publication: does serving still hold what the run published?

Seed 000: ``rollback`` is the verdict when a check run after publication disagrees with
what was published. :func:`verify_publication` runs the answer table's independent check
(its declaration's :attr:`~workloads.replay.answer.AnswerTable.independent_check`: for
``gold.correlations`` the recount of :mod:`workloads.replay.recount`) again, at the run's
pins and under the written rules of its engines, against the table readers see *now*, on
the recount's universe (pairs touching the entities it finds affected, and every pair the
publication inserted). Agreement is verdict ``publish``; any difference is verdict
``rollback``, naming the failed check and the first bad partition.

The result is recorded as a ``reconciliation_decision`` of the run with
``checks.after_publication`` (the serving version checked and the publication's effective
time). It names no diff manifest, so it never replaces the decision on the candidate
(:attr:`workloads.replay.state.RunState.decision`): a run's status stays what its
publication made it, and rolling back remains the operator's act (``lakehouse rollback``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from lakehouse.errors import ReplayRefusedError
from ledger.api import open_ledger
from ledger.clock import Clock
from ledger.engines import EngineCatalog
from ledger.entries import ReconciliationDecision
from workloads.replay import reconcile as rec
from workloads.replay.answer import RUN
from workloads.replay.recount import Recount
from workloads.replay.setup import setup_replay
from workloads.replay.status import load_state
from workloads.vocabulary import Verdict

if TYPE_CHECKING:
    from lakehouse.tables import TableRegistry

log = logging.getLogger(__name__)

AFTER_PUBLICATION = "after_publication"
"""The key of ``checks`` that marks a decision taken after publication."""


@dataclass(frozen=True)
class Verification:
    """A check after publication: the verdict and what it was taken on."""

    run_id: str
    table: str
    serving_version: int | None
    verdict: Verdict
    failed_check: str | None
    first_bad_partition: str | None
    check: rec.Check


def verify_publication(
    registry: TableRegistry, run_id: str, *, engines: EngineCatalog, clock: Clock
) -> Verification:
    """Recount a published run against serving now; ``publish`` if they agree, else ``rollback``.

    Refused for a run that is not published (live) and when the engines file no longer
    declares the run's engines as they were (the recount would check another rule).
    """
    from pyspark.sql import functions as F

    state = load_state(registry, run_id)
    live = state.live_publication
    if live is None:
        raise ReplayRefusedError(
            f"run {run_id} is not published ({state.status}); there is nothing to verify"
        )
    setup = setup_replay(registry, state.plan, engines, clock=clock)
    if setup.run_id != run_id:
        raise ReplayRefusedError(
            f"run {run_id}: the engines file declares its engines differently now (the plan would be run "
            f"{setup.run_id}); verify it with the engines file it was built with"
        )
    table = registry.get(state.table)
    version = table.current_version()
    serving = table.read(as_of=version)
    recount: Recount | str = setup.answer.recount()(registry, setup, serving.where(F.col(RUN) == run_id))
    plan = state.plan
    pairs = (
        rec.expected_pairs_check(
            serving, serving, recount, max_residual=plan.checks.max_residual_delta, bounds=setup.bounds
        )
        if isinstance(recount, Recount)
        else rec.no_recount_check(recount)
    )
    check = pairs.check
    verdict = Verdict.PUBLISH if check.passed else Verdict.ROLLBACK
    failed = None if check.passed else check.name
    decision = ReconciliationDecision(
        run_id=run_id,
        table=table.name,
        verdict=verdict.value,
        affected_range={"partitions": sorted(check.counts.get("per_partition", {}))},
        candidate_total=Decimal(pairs.serving_in_scope),
        expected_delta=Decimal(pairs.expected_in_scope - pairs.serving_in_scope),
        first_bad_partition=check.first_bad_partition,
        failed_invariant=failed,
        owner=plan.answer.authority,
        checks={
            check.name: check.recorded(),  # its examples are printed, never recorded
            AFTER_PUBLICATION: {
                "serving_version": version,
                "published_version": live.tables.get(table.name),
                "effective_at": live.effective_at.isoformat(),
            },
        },
    )
    open_ledger(registry, clock=clock).writer.append(decision)
    log.info(
        "run %s checked after publication on %s@%s: %s (failed check: %s; first bad partition: %s)",
        run_id,
        table.name,
        version,
        verdict,
        failed or "none",
        check.first_bad_partition or "none",
    )
    return Verification(
        run_id=run_id,
        table=table.name,
        serving_version=version,
        verdict=verdict,
        failed_check=failed,
        first_bad_partition=check.first_bad_partition,
        check=check,
    )
