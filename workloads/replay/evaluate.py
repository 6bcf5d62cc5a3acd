"""Judging a built candidate: per-key diff, diff manifest, independent reconciliation, decision.

:func:`evaluate` diffs candidate-current against serving-current by the answer table's key
(``correlation_id``; :func:`diff_candidate`), writes the review (:mod:`workloads.replay.review`), records the
``diff_manifest``, reconciles independently (:mod:`workloads.replay.reconcile`) with the
Great Expectations gate on the rewritten partitions, and records the
``reconciliation_decision`` and ``run_finished``. A comparison's candidate, and one whose
verdict is ``suppress``, is dropped afterwards: it can never be published.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Final

from lakehouse import quality
from lakehouse.digest import canonical_hash, digest_of
from lakehouse.frames import materialize
from lakehouse.meter import StepMeter
from lakehouse.tables import Candidate, Table
from ledger.entries import DiffManifest, ReconciliationDecision, RunFinished
from ledger.writer import LedgerWriter
from workloads.evaluation import QualityReport, TruthSearch
from workloads.gold.quality import MEDALLION_SUITES
from workloads.replay import candidate as cand
from workloads.replay import reconcile as rec
from workloads.replay import recount as rc
from workloads.replay.analysis import Analysis
from workloads.replay.answer import CORRELATIONS, RUN, AnswerTable
from workloads.replay.build import read_base
from workloads.replay.diff import CHANGED, REMOVED, UNCHANGED, diff_by_key, summarize
from workloads.replay.faults import FailPoint, maybe_fail
from workloads.replay.identity import BRONZE_PREFIX
from workloads.replay.plan import Purpose
from workloads.replay.quality import measure, quality_entry
from workloads.replay.review import add_to_review, review_dir, review_lists, write_review
from workloads.replay.scope import ReplayScope, in_range
from workloads.replay.setup import Setup
from workloads.vocabulary import CorrelationStatus, TableName, Verdict

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.tables import TableRegistry

log = logging.getLogger(__name__)

COMPARE: Final[tuple[str, ...]] = CORRELATIONS.compared
"""Columns the per-key diff of ``gold.correlations`` compares (:attr:`AnswerTable.compared`)."""


@dataclass(frozen=True)
class DiffResult:
    """The per-key diff of a candidate and the run's changes in it."""

    counts: Mapping[str, int]
    per_key: DataFrame
    changes: DataFrame
    changes_hash: str
    changes_rows: int


def diff_candidate(
    table: Table,
    candidate: Candidate,
    run_id: str,
    months: Sequence[str],
    answer: AnswerTable = CORRELATIONS,
) -> tuple[DiffResult, DataFrame, DataFrame]:
    """Per-key diff of candidate-current vs serving-current (at the candidate's base) in ``months``.

    Returns the result, the whole candidate and the whole base (for reconciliation).
    """
    from pyspark.sql import functions as F

    whole = table.read_candidate(candidate)
    base = read_base(table, candidate.base_version)
    new_cur = cand.restrict_months(whole, months, answer).where(cand.is_current())
    old_cur = cand.restrict_months(base, months, answer).where(cand.is_current())
    per_key = materialize(diff_by_key(old_cur, new_cur, [answer.key], answer.compared))
    summary = summarize(per_key)
    outside = base.where(cand.is_current() & ~F.col(answer.partition).isin(*months)) if months else base
    unchanged_outside = int(outside.where(cand.is_current()).count())
    counts = asdict(summary)  # the diff manifest's counts: added, removed, changed, unchanged, totals
    counts[UNCHANGED] += unchanged_outside
    counts["serving_total"] += unchanged_outside
    counts["candidate_total"] += unchanged_outside
    changes = cand.extract_changes(
        cand.restrict_months(whole, months, answer),
        cand.restrict_months(base, months, answer),
        run_id,
        answer,
    )
    changes = materialize(changes)
    return (
        DiffResult(
            counts=counts,
            per_key=per_key,
            changes=changes,
            changes_hash=canonical_hash(changes, exclude=cand.WHEN_COLUMNS),
            changes_rows=int(changes.count()),
        ),
        whole,
        base,
    )


def trace_keys(changes: DataFrame, run_id: str, size: int, answer: AnswerTable = CORRELATIONS) -> DataFrame:
    """The first ``size`` changed keys by id; new rows trace under the new resolution, old under the old.

    ``(key, side, <kind>, <subjects>)``: for ``gold.correlations`` what
    :func:`~workloads.replay.reconcile.trace_to_bronze` reads."""
    from pyspark.sql import functions as F

    side = F.when(F.col(RUN) == run_id, F.lit("new")).otherwise(F.lit("old"))
    return (
        changes.select(
            F.concat_ws("@", answer.key, side).alias("key"),
            side.alias("side"),
            answer.kind,
            *answer.subjects,
        )
        .orderBy("key")
        .limit(size)
    )


def layout(answer: AnswerTable) -> rec.Layout:
    """The columns of the declaration the reconciliation's structural checks read."""
    first, second = answer.subjects
    return rec.Layout(
        key=answer.key, identity=answer.identity, partition=answer.partition, subjects=(first, second)
    )


def pinned_bronze(registry: TableRegistry, pins: Mapping[str, int]) -> dict[str, DataFrame]:
    """Domain -> the pinned Bronze table of that feed."""
    return {
        name[len(BRONZE_PREFIX) :]: registry.get(name).read(as_of=version)
        for name, version in sorted(pins.items())
        if name.startswith(BRONZE_PREFIX)
    }


def independent_recount(registry: TableRegistry, setup: Setup, changes: DataFrame) -> rc.Recount | str:
    """What the new version's answer must hold, from pinned Silver and the written rules alone.

    Reads Silver at the run's pin in the plan's range (the engines' own input, not their
    output): its distinct identities, then only the events around the entities in scope
    (:func:`~workloads.replay.recount.recount_around`); and the pair keys the run changed
    (to widen the comparison). The rules come
    from the declarations of the old and new version and the producer. A declaration
    without a written rule gives the reason instead (the check then fails).
    """
    from pyspark.sql import functions as F

    engines = setup.engines
    # The two resolutions the answer's rows are decided on: the changed resolver's old and
    # new version, or (a producer change) the resolver in force twice.
    resolutions = engines.resolutions
    try:
        old = rc.ResolutionRule.declared(resolutions[0])
        new = rc.ResolutionRule.declared(resolutions[1])
        pairs = rc.PairRule.declared(engines.producer)
    except rc.NoWrittenRule as exc:
        log.warning("run %s: no independent recount: %s", setup.run_id, exc)
        return str(exc)
    silver = registry.get(TableName.SILVER_EVENTS).read(as_of=setup.pins[TableName.SILVER_EVENTS])
    silver = silver.where(in_range(F.col("event_time"), setup.bounds))
    changed = [
        (str(r[0]), str(r[1]), str(r[2]))
        for r in changes.select("correlation_type", "entity_a", "entity_b").distinct().collect()
    ]
    return rc.recount_around(
        rc.read_identities(silver), rc.read_around(silver), old=old, new=new, pairs=pairs, changed=changed
    )


def gate_check(rows: DataFrame, table_name: str) -> rec.Check:
    """The table's Great Expectations suite on the rewritten rows, as a reconciliation check.

    Without failing rows' values: the check goes into the ledger's reconciliation decision,
    which is immutable, so a value there (an entity id, say) could never be erased."""
    result = quality.validate(rows, MEDALLION_SUITES[table_name])
    return rec.Check(
        name="quality_gate",
        passed=result.success,
        violations=len(result.failures),
        detail=result.message(samples=0),
        examples=tuple(f.describe(samples=0) for f in result.failures[:3]),
    )


@dataclass(frozen=True)
class Evaluation:
    """What :func:`evaluate` recorded about a candidate."""

    counts: Mapping[str, int]
    decision: ReconciliationDecision
    sample: tuple[Mapping[str, Any], ...]
    high_impact: tuple[Mapping[str, Any], ...]
    review_location: str
    candidate_hash: str
    quality: QualityReport | None = None
    """Old and new version against labelled truth (or why not measured)."""
    examples: Mapping[str, list[str]] = field(default_factory=dict)
    """Each failed check's examples: in the outcome and the review file, not the ledger."""


def evaluate(
    registry: TableRegistry,
    setup: Setup,
    table: Table,
    writer: LedgerWriter,
    analysis: Analysis,
    scope: ReplayScope,
    candidate: Candidate,
    chosen: FailPoint | None,
    truth: TruthSearch | None,
    meter: StepMeter,
) -> Evaluation:
    """Diff, review, manifest, reconciliation and decision of a built candidate (module docstring).

    ``truth`` (located before the build) is what both versions' quality is measured
    against; the report is recorded with the decision (:mod:`workloads.replay.quality`).
    ``meter`` is marked at each step (``diff``, ``gate``, ``recount``, ``reconcile``,
    ``decision``).
    """
    plan, run_id, answer = setup.plan, setup.run_id, setup.answer
    meter.mark("diff")
    months = list(scope.changed_partitions)
    diff, whole, base = diff_candidate(table, candidate, run_id, months, answer)
    counts = {
        **diff.counts,
        CorrelationStatus.SUPERSEDED.value: scope.to_supersede,
        CorrelationStatus.RETRACTED.value: scope.to_retract,
        "inserted": scope.to_insert,
        "changes": diff.changes_rows,
        **scope.inputs,
    }
    sample, high = review_lists(
        analysis.classified.transitions,
        threshold=plan.checks.high_impact_confidence_delta,
        sample_size=plan.checks.sample_size,
        answer=answer,
    )
    candidate_hash = canonical_hash(whole, exclude=cand.WHEN_COLUMNS)
    location = write_review(
        review_dir(registry, run_id),
        diff.per_key,
        analysis.classified.transitions,
        {"sample": sample, "high_impact": high, "candidate_hash": candidate_hash, "counts": counts},
    )
    manifest_digest = digest_of(
        {
            "diff": canonical_hash(diff.per_key),
            "changes": diff.changes_hash,
            "partitions": months,
            "counts": counts,
        }
    )
    manifest = DiffManifest(
        run_id=run_id,
        table=table.name,
        candidate=candidate.name,
        base_version=candidate.base_version,
        counts=counts,
        partitions=tuple(months),
        manifest_digest=manifest_digest,
        location=location,
    )
    # Not deduplicated: every evaluation asserts its manifest anew, so the latest manifest
    # is always the one of the current candidate (see RunState.decision).
    writer.append(manifest, deduplicate=False)
    log.info(
        "run %s diff: %s; review in %s", run_id, ", ".join(f"{k} {v}" for k, v in counts.items()), location
    )
    maybe_fail(chosen, FailPoint.AFTER_DIFF, run_id)

    meter.mark("gate")
    rewritten = cand.restrict_months(whole, months, answer)
    gate = (
        gate_check(rewritten, table.name)
        if months
        else rec.Check(name="quality_gate", passed=True, detail="nothing rewritten")
    )
    meter.mark("recount")
    recount = answer.recount()(registry, setup, diff.changes)
    meter.mark("reconcile")
    reconciliation = rec.reconcile(
        candidate=whole,
        serving=base,
        events=analysis.events,
        recount=recount,
        vanished=analysis.vanished,
        rewritten=months,
        thresholds=rec.Thresholds(plan.checks.max_residual_delta, plan.checks.max_changed_ratio),
        trace_keys=trace_keys(diff.changes, run_id, plan.checks.trace_sample_size, answer),
        bronze=pinned_bronze(registry, setup.pins),
        removed_or_changed=diff.counts[REMOVED] + diff.counts[CHANGED],
        changes=diff.changes_rows,
        gate=gate,
        owner=plan.answer.authority,
        affected_range={
            "event_from": scope.event_range[0],
            "event_until": scope.event_range[1],
            "partitions": months,
            "entities": scope.affected_entity_count,
        },
        layout=layout(answer),
        bounds=setup.bounds,
    )
    meter.mark("decision")
    examples = reconciliation.examples()
    if examples:  # beside the sample of changes, where an erasure redacts them like the rest
        add_to_review(location, examples=examples)
    fields = reconciliation.ledger_fields()
    fields["checks"] = {
        **fields["checks"],
        "changes": {"hash": diff.changes_hash, "rows": diff.changes_rows},
        "manifest_digest": manifest_digest,
    }
    decision = ReconciliationDecision(run_id=run_id, table=table.name, **fields)
    finished = RunFinished(run_id=run_id, status="ok", counts={k: int(v) for k, v in counts.items()})
    searched = truth or TruthSearch(None, "no ground truth: none was looked for")
    report = measure(searched, setup, analysis.identities, base, whole)
    writer.append(quality_entry(setup, table.name, report), decision, finished)
    log.info(
        "run %s verdict %s (failed check: %s; owner %s)",
        run_id,
        reconciliation.verdict,
        reconciliation.failed_invariant or "none",
        reconciliation.owner,
    )
    if plan.purpose is Purpose.COMPARISON or reconciliation.verdict == Verdict.SUPPRESS:
        table.drop_candidate(candidate)  # never published: keep no shadow table or branch around
        log.info("run %s dropped its candidate %s (never published)", run_id, candidate.name)
    return Evaluation(
        counts=counts,
        decision=decision,
        sample=tuple(sample),
        high_impact=tuple(high),
        review_location=location,
        candidate_hash=candidate_hash,
        quality=report,
        examples=examples,
    )
