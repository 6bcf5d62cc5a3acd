"""How results look to people: one function per result type, returning output blocks.

The library returns result objects (frozen dataclasses whose fields are what ``--json``
prints, see :func:`jobs.output.plain`); these functions turn them into the lines and
tables a job puts in its :class:`~jobs.output.Outcome`. A function that returns plain
``str`` lines is meant to be nested (indented) inside another rendering, as the demo does.
The synthetic generator's summary is drawn in :mod:`jobs.generate` (only the generate
and demo jobs may import :mod:`workloads.synthetic`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from jobs.output import Block, TableView, plain
from workloads.gold.entity_index import INDEX
from workloads.gold.entity_index import SOURCE as INDEXED
from workloads.vocabulary import Fate

if TYPE_CHECKING:
    from lakehouse.meter import StepCost
    from ledger import ErasureCertificate, ErasureVerification
    from workloads.asof import AsOfAnswer, EntityHistory
    from workloads.bronze.ingest import IngestReport
    from workloads.communities import CommunityBuild
    from workloads.compliance import ErasureResult
    from workloads.compliance.extract import ExtractResult
    from workloads.evaluation import QualityReport
    from workloads.gold.build import GoldReport
    from workloads.gold.entity_index import IndexRefresh
    from workloads.maintenance import MaintenanceReport
    from workloads.ml.calibration_at import CalibrationAt
    from workloads.ml.model import ModelMetrics
    from workloads.operations import ProgressReport
    from workloads.reconciliation.run import ReconcileReport
    from workloads.replay import (
        AlreadyPublished,
        ApprovalResult,
        HistoryCheck,
        ProtectionReport,
        PublishResult,
        ReplayOutcome,
        RollbackResult,
    )
    from workloads.replay.outbox import Acknowledgement
    from workloads.replay.scope import ReplayScope
    from workloads.silver.build import SilverReport
    from workloads.streaming import DivergenceView, StreamReport

AFFECTED_SHOWN: Final = 10
"""Affected entity ids a dry run lists before ``(+N more)``."""


def indented(blocks: Iterable[Block], prefix: str = "  ") -> list[Block]:
    """``blocks`` with every text line indented (tables are drawn as they are)."""
    return [f"{prefix}{block}" if isinstance(block, str) else block for block in blocks]


def _short(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    return "" if value is None else str(value)


# -- Bronze, Silver, Gold ------------------------------------------------------------------------


def render_ingest(report: IngestReport) -> list[Block]:
    """``lakehouse ingest``: what was new, then one row per delivery."""
    deliveries = [
        {"delivery": m.delivery, "status": m.status, "rows": m.rows, "manifest": m.manifest_id[:16]}
        for m in report.manifests
    ]
    withheld = [
        f"withheld {lines} line(s) of an erased subject (certificate {certificate})"
        for certificate, lines in sorted(report.withheld.items())
    ]
    return [
        f"{report.feed}: {len(report.ingested)} manifest(s) ingested ({report.rows_written} rows), "
        f"{len(report.already_ingested)} already ingested",
        *withheld,
        TableView(deliveries, ["delivery", "status", "rows", "manifest"]),
    ]


def render_ingests(reports: Sequence[IngestReport]) -> list[Block]:
    """``lakehouse ingest`` of several feeds: each feed's lines, in the order they ran."""
    return [block for report in reports for block in render_ingest(report)]


def render_silver(report: SilverReport) -> list[str]:
    """``lakehouse build silver``: fates over every feed, partitions, exceptions, restatements."""
    totals = {fate: sum(f.get(fate, 0) for f in report.fates.values()) for fate in Fate}
    lines = [
        f"silver build {report.run_id} ({report.resolver}): "
        + ", ".join(f"{fate}={n}" for fate, n in totals.items()),
        f"partitions written: {len(report.partitions_written)}, removed: {len(report.partitions_removed)}; "
        f"exceptions added: {report.exceptions_added}",
    ]
    if report.restated_periods:
        lines.append("restated: " + ", ".join(f"{p.domain}/{p.period}" for p in report.restated_periods))
    return lines


def render_gold(report: GoldReport) -> list[str]:
    """``lakehouse build gold``: events, daily rows, baselines, correlations, the entity index."""
    lines = [
        f"gold build {report.run_id}: {report.events} events ({report.unattributed_events} unattributed), "
        f"daily rows {report.daily_rows} (+{report.daily_added} ~{report.daily_changed} "
        f"-{report.daily_removed}), baselines recomputed for {report.entities_recomputed} entities",
    ]
    if report.correlations is not None:
        c = report.correlations
        lines.append(
            f"correlations ({c.engine}): {c.inserted} new, {c.superseded} superseded, "
            f"{c.retracted} retracted, {c.unchanged} unchanged"
        )
    if report.entity_index is not None:
        lines.append(render_index_refresh(report.entity_index))
    if report.provisional is not None:
        p = report.provisional
        counts = ", ".join(f"{outcome} {n}" for outcome, n in p.outcomes.items())
        lines.append(f"provisional rows reconciled against batch: {counts}")
        lines += [f"FLAGGED: {scope}: streaming precision below its threshold" for scope in p.flagged]
    return lines


def render_communities(result: CommunityBuild) -> list[str]:
    """``lakehouse communities``: what the release found, what it wrote, and how it measured."""
    how = "iterations" if result.method == "label_propagation" else "rounds"
    version = "(empty)" if result.version is None else result.version
    lines = [
        f"communities run {result.run_id} ({result.engine}, {result.method} over correlations of "
        f"confidence >= {result.min_confidence:g}, gold.correlations@{result.correlations_version}): "
        f"{result.entities} entities, {result.communities} communities of 2 or more "
        f"(largest {result.largest}); "
        f"{result.iterations} {how}{'' if result.settled else ' (not settled)'}, "
        f"PageRank in {result.pagerank_iterations} iterations",
        f"{result.table}@{version}: {result.inserted} inserted, "
        f"{result.regrouped} regrouped or rescored (earlier rows superseded), "
        f"{result.retracted} retracted, {result.unchanged} unchanged; "
        f"content hash {result.content_hash[:16]}",
    ]
    if result.quality is None:
        lines.append(f"against the true rings: not measured ({result.quality_note})")
    else:
        q = result.quality
        lines.append(
            f"against the true rings ({q.ring_members} ring members): adjusted Rand index "
            f"{q.adjusted_rand_index:.3f}, pair precision {q.pairs.precision:.3f}, "
            f"recall {q.pairs.recall:.3f}, "
            f"mean share captured {q.mean_share:.3f}; {q.false_communities} false communities "
            f"({q.false_community_persons} persons) outside rings and households"
        )
    return lines


def render_stream(report: StreamReport) -> list[Block]:
    """``lakehouse stream``: per micro-batch, rows read, quarantined and provisional."""
    head = (
        f"stream {report.query} (run {report.run_id}, {report.engine}): {len(report.batches)} batch(es), "
        f"{report.rows_read} Bronze rows, {report.quarantined} quarantined, {report.provisional} provisional"
    )
    out: list[Block] = [head]
    if report.skipped:
        out.append(f"skipped (committed before): batch {', '.join(str(b) for b in report.skipped)}")
    if report.batches:
        rows = [
            {
                "batch": b.batch_id,
                "rows": b.rows_read,
                "quarantined": b.quarantined,
                "provisional": b.provisional,
                "restated": b.superseded,
                "window": "-"
                if b.window_start is None or b.window_end is None
                else f"{b.window_start.date().isoformat()}..{b.window_end.date().isoformat()}",
            }
            for b in report.batches
        ]
        out.append(TableView(rows, list(rows[0])))
    return out


def render_divergence(view: DivergenceView) -> list[Block]:
    """``lakehouse divergence``: streaming precision and recall against batch, per scope and release."""
    if view.run_id is None:
        return ["no reconciliation yet: run lakehouse stream, then lakehouse build gold"]

    def ratio(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    rows = [
        {
            "scope": s.scope,
            "release": s.release,
            "precision": ratio(s.precision),
            "recall": ratio(s.recall),
            "threshold": f"{s.threshold:.2f}",
            "agree": s.agree,
            "batch stronger": s.batch_stronger,
            "false positive": s.false_positive,
            "missed": s.missed,
        }
        for s in view.scopes
    ]
    when = view.recorded_at.isoformat() if view.recorded_at else "-"
    out: list[Block] = [f"streaming against batch, reconciled by {view.run_id} at {when}"]
    if rows:
        out.append(TableView(rows, list(rows[0])))
    out += [
        f"FLAGGED: {s.scope} ({s.release}): precision {ratio(s.precision)} < {s.threshold:.2f}"
        for s in view.scopes
        if s.flagged
    ]
    return out


def render_index_refresh(refresh: IndexRefresh) -> str:
    """One line: the entity index rebuilt, already current, or nothing to index yet."""
    if refresh.status == "rebuilt":
        return (
            f"entity index {INDEX}@{refresh.index_version} rebuilt from {INDEXED}@{refresh.source_version} "
            f"({refresh.rows} rows in {refresh.buckets} buckets, run {refresh.run_id})"
        )
    if refresh.status == "current":
        return (
            f"entity index {INDEX}@{refresh.index_version} already mirrors {INDEXED}@{refresh.source_version}"
        )
    return f"entity index: {INDEXED} has no version yet"


def render_reconcile(report: ReconcileReport) -> list[Block]:
    """``lakehouse reconcile``: the pins, the delta per class, the walk, the repair, the signal."""
    window = ""
    if report.since is not None or report.until is not None:
        start = report.since.isoformat() if report.since is not None else "the first commit"
        window = f", keys modified from {start} to {report.until.isoformat() if report.until else 'now'}"
    rows = [
        {"class": kind, "keys": count, "sample": ", ".join(report.samples.get(kind, ())) or "-"}
        for kind, count in (
            ("missing", report.missing),
            ("divergent", report.divergent),
            ("orphan", report.orphan),
            ("pending", report.pending),
        )
    ]
    out: list[Block] = [
        f"reconcile {report.pair} by {report.key} (run {report.run_id}): "
        f"{report.source}@{report.source_version} against {report.derived}@{report.derived_version}{window}",
        f"compared {report.ranges_compared} key-hash ranges "
        f"({'/'.join(str(n) for n in report.compared_per_level) or '0'} per level) in {report.jobs} "
        f"Spark jobs; listed the keys of {report.ranges_listed} ranges, {report.rows_diffed} rows "
        f"(budget {report.max_rows} rows, {report.max_seconds:g} s)",
        TableView(rows, ["class", "keys", "sample"]),
        f"delta {report.total_delta} (pending: source changed in the last {report.staleness_seconds} s)",
    ]
    if not report.complete:
        share = f"{report.covered:.1%} of the key space from position {report.covered_from}"
        if report.resume_from is None:
            out.append(f"resumed an earlier run: compared {share} to its end")
        else:
            out.append(
                f"STOPPED by {report.stopped_by}: compared {share}; the next run resumes at "
                f"position {report.resume_from} (--from-start to start over)"
            )
    if report.repaired:
        out.append(
            f"repaired {report.repaired} keys in {report.repair_batches} batches "
            f"-> {report.derived}@{report.repaired_version}"
        )
    if report.orphan:
        out.append(f"ORPHANS: {report.orphan} keys exist only in {report.derived}: reported, never deleted")
    if report.step_change:
        out.append(f"STEP CHANGE: delta {report.total_delta} against a recent median of {report.baseline:g}")
    return out


# -- replay ---------------------------------------------------------------------------------------


def render_scope(scope: ReplayScope) -> list[str]:
    """``lakehouse replay --dry-run``: what the replay would read, recompute, supersede and write."""
    est = scope.estimate
    shown = ", ".join(scope.affected_entities[:AFFECTED_SHOWN])
    hidden = scope.affected_entity_count - AFFECTED_SHOWN
    more = f" (+{hidden} more)" if hidden > 0 else ""
    return [
        f"replay {scope.run_id} of plan {scope.plan} ({scope.purpose}) on {scope.table}",
        f"engine change ({scope.change_kind}): {scope.engine_change}; new rows labelled {scope.engine_label}",
        f"pinned inputs: {', '.join(f'{k}@{v}' for k, v in sorted(scope.pins.items()))}",
        f"inputs from: {scope.inputs_route}",
        f"affected entities: {scope.affected_entity_count}: {shown}{more}",
        f"recomputed entities: {scope.recomputed_entity_count}",
        f"partitions in scope: {', '.join(scope.partitions) or 'none'}; "
        f"rewritten: {', '.join(scope.changed_partitions) or 'none'}",
        f"rows: {scope.serving_rows_in_scope} serving in scope, {scope.new_rows} recomputed; "
        f"supersede {scope.to_supersede}, retract {scope.to_retract}, insert {scope.to_insert}, "
        f"unchanged {scope.unchanged}",
        f"produced by runs: {', '.join(r.run_id for r in scope.producing_runs) or 'none'}",
        f"estimate: read {est.bytes_to_read} bytes / {est.rows_to_read} rows in {est.files_to_read} "
        f"files (cap {est.max_bytes_read}), write {est.rows_to_write} rows",
    ]


def render_replay(outcome: ReplayOutcome, *, high_impact_shown: int | None = None) -> list[Block]:
    """``lakehouse replay``: status, candidate, diff, verdict, totals and the high-impact changes
    (a table; only the first ``high_impact_shown`` when given: all are in the review file)."""
    from workloads.replay.state import AWAITING_APPROVAL

    d = outcome.decision
    out: list[Block] = [
        f"replay {outcome.run_id} of plan {outcome.plan} ({outcome.purpose}): {outcome.status}",
        f"candidate {outcome.candidate or '-'} of {outcome.table} (base {outcome.base_version}); "
        f"partitions rewritten: {', '.join(outcome.partitions) or 'none'}",
        "diff: " + ", ".join(f"{k} {v}" for k, v in outcome.diff.items()),
        f"verdict: {d.get('verdict')} (owner {d.get('owner')}); failed check: "
        f"{d.get('failed_invariant') or 'none'}; "
        f"first bad partition: {d.get('first_bad_partition') or '-'}",
        f"totals: serving {d.get('old_total')}, candidate {d.get('candidate_total')}, expected delta "
        f"{d.get('expected_delta')}, residual {d.get('residual_delta')}",
        f"high-impact changes: {len(outcome.high_impact)}; sample of changes: {len(outcome.sample)}",
    ]
    changes = outcome.high_impact
    if high_impact_shown is not None:
        changes = changes[:high_impact_shown]
    if changes:
        out.append(_changes_table(changes, impact_column(outcome.table)))
    hidden = len(outcome.high_impact) - len(changes)
    if hidden:
        out.append(f"... {hidden} more high-impact changes in the review file")
    if outcome.quality is not None:
        out += render_quality(outcome.quality)
    if outcome.review_location:
        out.append(f"review: {outcome.review_location}")
    if outcome.steps:
        out.append(render_steps(outcome.steps))
    if outcome.status == AWAITING_APPROVAL:
        out.append(
            f"next: lakehouse approve {outcome.run_id} --by NAME, then lakehouse publish {outcome.run_id}"
        )
    return out


def render_steps(steps: Sequence[StepCost]) -> str:
    """One line: each step's wall seconds and Spark jobs, then the totals."""
    parts = [f"{s.step} {s.seconds:.1f} s ({s.spark_jobs} jobs)" for s in steps]
    total = f"{sum(s.seconds for s in steps):.1f} s, {sum(s.spark_jobs for s in steps)} Spark jobs"
    return f"steps: {', '.join(parts)}; in all {total}"


QUALITY_COLUMNS: Final = (
    "side",
    "engine",
    "er_precision",
    "er_recall",
    "er_f1",
    "correlation_precision",
    "correlation_recall",
)


def render_quality(report: QualityReport) -> list[Block]:
    """Both versions' quality against labelled truth, one row each; or why it was not measured."""
    if report.old is None or report.new is None:
        return [f"quality: {report.note}"]
    unlabelled = f", {report.unlabelled_identities} unlabelled" if report.unlabelled_identities else ""
    return [
        f"quality against labelled truth {report.source} (sha256 {(report.source_digest or '')[:12]}): "
        f"{report.identities} identities of {report.persons} persons{unlabelled}",
        TableView(report.rows(), QUALITY_COLUMNS),
    ]


def _changes_table(changes: Sequence[Mapping[str, Any]], impact: str) -> TableView:
    """The reviewer rows of a replay: kind, old and new row ids, and the answer table's impact
    figure before and after (``old_<impact>``, ``new_<impact>``; confidence for correlations)."""
    rows = [
        {
            "kind": c.get("kind"),
            "old": c.get("old_id") or "-",
            "new": c.get("new_id") or "-",
            impact: f"{c.get(f'old_{impact}')} -> {c.get(f'new_{impact}')}",
        }
        for c in changes
    ]
    return TableView(rows, ["kind", "old", "new", impact])


def impact_column(table: str) -> str:
    """The figure a replay's reviewer sees change for ``table``: its declaration's impact column."""
    from workloads.replay.answer import ANSWER_TABLES

    declared = ANSWER_TABLES.get(table)
    return declared.impact if declared is not None else "confidence"


def render_approval(result: ApprovalResult) -> str:
    """``lakehouse approve``: the decision, and what to run next after an approval."""
    line = f"{result.decision}: run {result.run_id} by {result.approver} at {result.approved_at.isoformat()}"
    if result.decision == "approved":
        line += f"; next: lakehouse publish {result.run_id}"
    return line


def render_ack(result: Acknowledgement) -> str:
    """``lakehouse ack``: recorded now, or already recorded before."""
    state = "acknowledged" if result.recorded else "already acknowledged"
    return f"{state}: {result.consumer} for run {result.run_id} by {result.acknowledged_by}"


def render_publication(result: PublishResult) -> list[str]:
    """``lakehouse publish``: the new serving version, supersessions, notifications, the index."""
    out = [
        f"{result.status}: {result.table} version {result.version} (was {result.previous}), "
        f"effective {result.effective_at.isoformat()}, run {result.run_id}"
        + ("; re-applied onto serving as it is now (it moved after staging)" if result.restaged else ""),
    ]
    out += [f"  {s['count']} {s['status']}: {s['reason']}" for s in result.supersessions]
    out += [f"  notified {n.consumer} (key {n.idempotency_key})" for n in result.notifications]
    if result.entity_index is not None:
        out.append(f"  {render_index_refresh(result.entity_index)}")
    return out


def render_rollback(result: RollbackResult) -> list[str]:
    """``lakehouse rollback``: which content serving was restored to, and the index rebuild."""
    lines = [
        f"rolled back run {result.run_id}: {result.table} restored to the content of version "
        f"{result.to_version} (was {result.from_version}) as new version {result.new_version}"
    ]
    if result.entity_index is not None:
        lines.append(render_index_refresh(result.entity_index))
    return lines


def render_already_published(published: AlreadyPublished) -> list[str]:
    """``lakehouse replay --dry-run`` of a plan whose run is published: nothing to do."""
    return [
        f"plan {published.plan} is run {published.run_id}, already published ({published.status}): "
        f"{published.table}@{published.version} since {published.effective_at.isoformat()}",
        f"nothing to replay and nothing written; to undo it: lakehouse rollback {published.run_id}",
    ]


# -- protection from maintenance ---------------------------------------------------------------


def render_protection(report: ProtectionReport) -> list[Block]:
    """``lakehouse protect``: each protected version, then what changed on each table."""
    rows = [
        {
            "table": p.table,
            "version": p.version,
            "reason": p.reason.value,
            "run": p.run_id,
            "until": p.until.date().isoformat() if p.until else "while open",
            "rule": p.rule,
        }
        for p in report.protections
    ]
    verb = "would change" if report.dry_run else "changed"
    out: list[Block] = [
        f"{len(report.protections)} versions protected; history kept: {report.history_days} days",
        TableView(rows, ["table", "version", "reason", "run", "until", "rule"]),
    ]
    for table in report.tables:
        changes = [
            f"{len(table.tags_created)} tags created",
            f"{len(table.tags_dropped)} dropped",
            f"properties {dict(table.properties)}" if table.properties else "properties unchanged",
        ]
        gone = f"; gone already: {', '.join(str(v) for v in table.gone)}" if table.gone else ""
        out.append(f"{table.table} ({table.format}) {verb}: {', '.join(changes)}{gone}")
    return out


def render_maintenance(report: MaintenanceReport) -> list[Block]:
    """``lakehouse maintain``: per table what was (or would be) done, files and bytes, what was kept."""
    rows = []
    kept: list[str] = []
    for t in report.tables:
        action = [
            *(["compacted" if t.compacted_to is not None else "compact"] if t.compact else []),
            *([f"expired before {t.expire_before.date().isoformat()}"] if t.expire_before else []),
        ]
        after = "" if t.stored_files_after is None else f"{t.stored_files_after}"
        rows.append(
            {
                "table": t.table,
                "format": t.format,
                "owner": t.owner,
                "action": ", ".join(action) or "-",
                "data files": t.live_files_before
                if t.live_files_after is None
                else f"{t.live_files_before} -> {t.live_files_after}",
                "stored files": f"{t.stored_files_before}" + (f" -> {after}" if after else ""),
                "stored MB": f"{t.stored_bytes_before / 1e6:.2f}"
                + ("" if t.stored_bytes_after is None else f" -> {t.stored_bytes_after / 1e6:.2f}"),
            }
        )
        kept.extend(f"  {t.table}: {why}" for why in t.kept)
    head = (
        f"maintenance (dry run, nothing written), owner {report.owner}"
        if report.dry_run
        else f"maintenance run {report.run_id}, owner {report.owner}: "
        f"{report.stored_bytes_freed / 1e6:.2f} MB freed in {report.seconds:.1f} s"
    )
    out: list[Block] = [
        head,
        TableView(rows, ["table", "format", "owner", "action", "data files", "stored files", "stored MB"]),
    ]
    if report.holds:
        out.append(f"legal holds placed: {', '.join(report.holds)}")
    if kept:
        out += ["kept:", *kept]
    return out


def render_progress(report: ProgressReport) -> list[Block]:
    """``lakehouse progress``: one row per feed; a stalled feed is named below the table."""

    def moment(value: datetime | None) -> str:
        return value.isoformat(timespec="minutes") if value is not None else "-"

    rows = [
        {
            "feed": s.feed,
            "status": s.status,
            "last event": moment(s.last_event_time),
            "last ingest": moment(s.last_ingest_time),
            "watermark": moment(s.watermark),
            "event lag h": "-" if s.event_lag_hours is None else f"{s.event_lag_hours:g}",
            "ingest lag h": "-" if s.ingest_lag_hours is None else f"{s.ingest_lag_hours:g}",
            f"rows last {report.interval_hours:g} h": s.rows_in_interval,
            "rows": s.rows,
        }
        for s in report.sources
    ]
    out: list[Block] = [f"progress per source at {report.at.isoformat()}", TableView(rows, list(rows[0]))]
    for s in report.sources:
        if s.status != "active":
            silence = (
                "never delivered"
                if s.last_ingest_time is None
                else f"no delivery for {s.ingest_lag_hours:g} h"
            )
            out.append(f"STALLED: {s.feed}: {silence} (expected within {s.stalled_after_hours:g} h)")
    return out


def render_history_check(check: HistoryCheck) -> list[str]:
    """``lakehouse ledger verify --history``: the protected versions that cannot be read."""
    purged = [f"  {p.table}@{p.version}: {p.note}" for p in check.purged]
    if check.ok:
        readable = check.checked - len(check.purged)
        head = f"history: all {readable} versions the ledger still needs are readable"
        return [f"{head}; {len(check.purged)} purged by erasure", *purged] if purged else [head]
    lines = [f"history: {len(check.gone)} of {check.checked} versions the ledger still needs are GONE"]
    for gone in check.gone:
        lines.append(f"  {gone.table}@{gone.version}: {gone.note}")
        lines.extend(f"    needed as {why}" for why in gone.reasons)
    return lines + purged


# -- compliance -----------------------------------------------------------------------------------


def render_erasure(result: ErasureResult) -> list[Block]:
    """``lakehouse erase``: where the subject is (dry run), or what was erased and the certificate."""
    places = result.places
    found = ", ".join(f"{n} {kind}" for kind, n in places.identifiers.items())
    rows = [
        {
            "table": t.table,
            "current rows": t.current_rows,
            "versions holding": len(t.versions),
            "versions": ", ".join(str(v) for v in t.versions)
            if len(t.versions) <= 6
            else f"{len(t.versions)}",
            "data files": len(t.files),
            "candidates": ", ".join(f"{n} ({r})" for n, r in t.candidates.items()),
            "tags": ", ".join(t.tags),
        }
        for t in places.tables
        if t.holds
    ]
    out: list[Block] = [f"subject: {found or 'no identifiers'}"]
    if places.empty:
        out.append("no rows for this subject in any table, retained version, candidate or work file")
    else:
        columns = [
            "table",
            "current rows",
            "versions holding",
            "versions",
            "data files",
            "candidates",
            "tags",
        ]
        out.append(TableView(rows, columns))
        out.extend(f"work file {path}: {n} mention(s)" for path, n in places.work_files.items())
        out.extend(f"extract {i} ({folder}): deleted by the erasure" for i, folder in places.extracts.items())
    if result.dry_run:
        out.append("dry run: nothing written")
        return out
    assert result.certificate is not None
    return out + render_certificate(result.certificate)


def render_certificate(certificate: ErasureCertificate) -> list[Block]:
    """What an erasure did, its verification, and its certificate."""
    purged = sum(len(e.versions_purged) for e in certificate.tables.values())
    files = sum(len(e.files) for e in certificate.tables.values())
    redacted = sorted(t for t, e in certificate.tables.items() if e.redacted)
    out: list[Block] = [
        f"erased from {len(certificate.tables)} table(s): {purged} version(s) purged, "
        f"{files} data file(s) gone, {len(certificate.work_files)} work file(s) redacted, "
        f"{len(certificate.extracts)} audit extract(s) deleted"
    ]
    if redacted:
        out.append(f"redacted (rows kept, the subject's identifiers replaced): {', '.join(redacted)}")
    out.extend(render_erasure_check(certificate.certificate_id, certificate.verification))
    out.append(f"certificate {certificate.certificate_id} recorded (run {certificate.run_id})")
    return out


def render_erasure_check(certificate_id: str, check: ErasureVerification) -> list[Block]:
    """The independent scan of an erasure: passed, or every place the subject remains."""
    if check.passed:
        return [
            f"verified ({certificate_id}): {check.files_scanned} files scanned, no identifier of the subject"
        ]
    lines: list[Block] = [f"NOT erased: the subject remains in {len(check.hits)} place(s) ({certificate_id})"]
    lines.extend(f"  {hit}" for hit in check.hits)
    return lines


def render_extract(result: ExtractResult) -> list[Block]:
    """``lakehouse extract``: what was written, where, and what was left out."""
    manifest = result.manifest
    out: list[Block] = [
        f"extract {manifest.extract_id}: {manifest.rows} row(s) of {manifest.table} as known at "
        f"{manifest.at.isoformat()} (route {manifest.route}, version {manifest.version})",
        f"  folder {result.folder}: {len(manifest.files)} Parquet file(s) and manifest.json "
        f"(sha256 {result.manifest_sha256[:16]}…, recorded in the ledger)",
        f"  pseudonymised (salt drawn for this extract, kept nowhere): {', '.join(manifest.pseudonymised)}",
    ]
    out += [
        f"  left out: {n} row(s) of a subject erased under certificate {c}"
        for c, n in manifest.withheld.items()
    ]
    out += [f"  note: {n}" for n in result.notes]
    return out


# -- asof -----------------------------------------------------------------------------------------


def render_asof(answer: AsOfAnswer) -> list[str]:
    """``lakehouse asof``: both routes (a disagreement loudly), notes, then each row with its
    provenance and what became of it since."""
    subject = f" entity {answer.entity}" if answer.entity else ""
    out = [f"{answer.table}{subject} as known at {answer.at.isoformat()} ({answer.reader} reader)"]
    for route in answer.routes.values():
        state = f"{route.rows} rows" if route.available else "unavailable"
        version = f" (version {route.version})" if route.version is not None else ""
        out.append(f"  route {route.route}: {state}{version}{'; ' + route.note if route.note else ''}")
    if answer.routes_agree is False:
        out.append("  !!! ROUTES DISAGREE: the bitemporal columns and the published version differ")
        out.append(f"  !!! first differing key: {plain(answer.first_difference)}")
    elif answer.routes_agree:
        out.append("  routes agree")
    out += [f"  note: {n}" for n in answer.notes]
    for row in answer.rows:
        prov = row.get("provenance", {})
        described = ", ".join(
            f"{k}={_short(row[k])}" for k in row if k not in ("provenance", "since", "evidence")
        )
        out.append(f"- {described}")
        out.append(
            f"    by run {prov.get('run_id')} ({prov.get('command')}), engines "
            f"{', '.join(prov.get('engines') or []) or '-'}, published {_short(prov.get('published_at'))}"
        )
        inputs = prov.get("inputs") or {}
        if inputs:
            out.append("    inputs: " + ", ".join(f"{t}@{v}" for t, v in inputs.items()))
        since = row.get("since")
        if since:
            out.append(
                f"    since then {since['status']} at {_short(since['superseded_at'])}"
                f" by {since['superseded_by'] or '-'}: {since['reason']}"
            )
    return out


def render_history(story: EntityHistory) -> list[Block]:
    """``lakehouse asof --history``: one table row per row version, over knowledge time."""
    rows = [
        {
            "known_from": _short(v["known_from"]),
            "known_until": _short(v["known_until"]) or "now",
            "correlation": f"{v.get('correlation_type')} {v.get('entity_a')} ~ {v.get('entity_b')}",
            "confidence": v.get("confidence"),
            "engine": v.get("engine"),
            "status": v["status"],
            "run": v.get("run_id"),
            "successor": v.get("superseded_by") or ("-" if v.get("supersede_reason") else ""),
            "reason": v.get("supersede_reason"),
        }
        for v in story.versions
    ]
    columns = ["known_from", "known_until", "correlation", "confidence", "engine", "status", "run"]
    if any(r["successor"] or r["reason"] for r in rows):
        columns += ["successor", "reason"]
    title = f"history of entity {story.entity} in {story.table} ({len(story.versions)} row versions)"
    return [title, TableView(rows, columns)]


def figure_or_na(value: float | None) -> str:
    """A measure with three decimals, or ``n/a`` where it is undefined (one class only)."""
    return "n/a" if value is None else f"{value:.3f}"


def render_model_measures(metrics: ModelMetrics, better: bool) -> str:
    """One line: the held-out measures of a model beside its references, and the verdict."""
    verdict = (
        "better than both references"
        if better
        else "NOT better than the references: different is not yet better"
    )
    return (
        f"ROC AUC {figure_or_na(metrics.roc_auc)} "
        f"(confidence alone {figure_or_na(metrics.confidence_roc_auc)}), "
        f"PR AUC {figure_or_na(metrics.pr_auc)}, Brier {metrics.brier:.4f} "
        f"(base rate {metrics.base_rate_brier:.4f}): {verdict}"
    )


def _figure(value: Any) -> str:
    """A measure with four decimals ("" where there is none)."""
    return f"{value:.4f}" if isinstance(value, float) else _short(value)


def render_calibration_at(answer: CalibrationAt) -> list[Block]:
    """``lakehouse calibration-at --at T``: the release in force, its calibrators, and the
    figures per scope of the run that fitted them and of the latest measurement by T."""
    blocks: list[Block] = [f"at {answer.at.isoformat()}: {answer.engine} in force ({answer.reason})"]
    if answer.calibrated:
        methods = ", ".join(f"{scope} {method}" for scope, method in sorted(answer.methods.items()))
        models = ", ".join(f"{name} v{version}" for name, version in sorted(answer.model_versions.items()))
        blocks.append(f"recalibrated release of {answer.base}: {methods}; MLflow models {models or 'none'}")
    else:
        blocks.append("uncalibrated: its confidences are served as the engine computes them")
    measured = [("fitted by", answer.fitted_by), ("latest measurement by T", answer.last_measured)]
    for label, run in measured:
        if run is None:
            continue
        rows = [
            {
                "scope": scope,
                "decisions": figures.get("decisions"),
                "positives": figures.get("positives"),
                "brier": _figure(figures.get("brier")),
                "ece": _figure(figures.get("ece_uniform")),
                "flagged": figures.get("flagged"),
                "brier after": _figure(figures.get("calibrated_brier")),
                "ece after": _figure(figures.get("calibrated_ece_uniform")),
            }
            for scope, figures in sorted(run.scopes.items())
        ]
        flagged = ", ".join(run.flagged) or "none"
        title = (
            f"{label}: calibrate run {run.run_id} of {run.engine} at {run.recorded_at.isoformat()} "
            f"({run.label_horizon_days}-day labels; flagged: {flagged})"
        )
        blocks.append(TableView(rows, list(rows[0]) if rows else ["scope"], title=title))
    if answer.last_measured is None:
        blocks.append(f"{answer.engine} had not been measured against later outcomes by then")
    return blocks
