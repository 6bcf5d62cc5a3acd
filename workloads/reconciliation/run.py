"""``reconcile``: one recorded comparison of a declared (or ad hoc) pair, and its repair.

What :func:`reconcile` does, in order:

1. **Pin** both sides' current versions; everything below reads exactly those. (The pair
   itself was checked before: a declaration of ``reconcile.pairs``,
   :func:`~workloads.reconciliation.pairs.declared_pairs`.)
2. **Claim** the derived table through the ledger: the run's ``run_started`` is appended
   first (the ledger serialises appends), then the earliest unfinished reconcile of the same
   derived table that started within ``lock_timeout_seconds`` holds it. A second run stops
   cleanly (:class:`ReconcileBusyError`, exit 5, its ``run_finished`` says why); a holder
   that died without finishing is ignored once its lease has passed.
3. **Project** the pinned source rows to derived rows (the pair's projection) and take the
   derived rows the pair covers; **bounded mode** keeps only keys that a commit of either
   side changed between ``since`` and ``until`` (:meth:`~lakehouse.tables.Table.changed_keys`,
   from each side's commit history). ``since_last_clean`` takes ``since`` from the pair's last
   clean run (:func:`last_clean_run`): after a small change, only what changed since the pair
   was last known to agree is compared.
4. **Compare** by the bounded walk (:mod:`workloads.reconciliation.compare`): range
   summaries, one job per level over the ranges still in disagreement, at most
   ``max_ranges_per_level`` summaries on the driver, the keys of small disagreeing ranges
   listed in one job per pass, within the row and time budgets. A run the budgets stop
   records where it stopped (``resume_from`` in ``ops.reconcile_reports``); the pair's next
   run of the same mode (and window) starts there.
5. **Classify**: keys the source changed within the staleness window are ``pending``
   (expected lag, not drift); the rest are missing, divergent or orphan.
6. **Repair** (only asked, only with an authority, never for a report-only pair): missing
   and divergent keys get the source's rows, in batches of at most ``max_repairs_per_second``
   keys, one batch a second at most; each batch replaces exactly its keys' rows. Orphans are never touched.
7. **Report**: one row in ``ops.reconcile_reports`` (kept: the health signal's history),
   the delta per class in the ledger's ``run_finished`` counts, and a step change flagged
   against the pair's recent runs of the same mode.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pydantic import Field

from lakehouse.errors import ReconcileBusyError, UsageError
from lakehouse.frames import materialize, union_all
from lakehouse.models import StrictModel
from lakehouse.tables.base import sql_literal
from ledger import RunStarted
from ledger.clock import utc
from workloads.policies import DEFAULT_POLICY_PATH, load_section
from workloads.reconciliation.compare import CLASS, both_sides, walk
from workloads.reconciliation.pairs import DeriveContext, Pair, compared_columns
from workloads.reconciliation.summaries import (
    END,
    FANOUT,
    Budget,
    RateLimiter,
    batches,
    check_budget,
    check_window,
    step_change,
)
from workloads.runs import new_run_id, recorded_run
from workloads.vocabulary import Difference, TableName

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.tables import Table, TableRegistry
    from ledger import Ledger
    from ledger.clock import Clock

log = logging.getLogger(__name__)

PURPOSE: Final = "reconcile"
REPORTS: Final = TableName.RECONCILE_REPORTS
SAMPLE: Final = 5
"""Keys shown per class in the command's output (never stored: keys may be personal data)."""


class ReconcilePolicy(StrictModel):
    """The ``reconcile:`` section of the policy file."""

    staleness_seconds: int = Field(ge=0)
    recent_runs: int = Field(ge=1)
    step_factor: float = Field(gt=0)
    step_min: int = Field(ge=0)
    lock_timeout_seconds: int = Field(gt=0)
    max_repairs_per_second: int = Field(ge=1)
    max_ranges_per_level: int = Field(ge=FANOUT)
    """Range summaries the driver holds at most (65,536 ~ 64 MiB: a sixteenth of a 1 GiB heap)."""
    list_rows: int = Field(ge=1)
    """A disagreeing range of at most this many rows (both sides) is listed, not refined."""
    max_rows: int = Field(ge=1)
    """Default ``--max-rows``: rows a run lists key by key (both sides)."""
    max_seconds: float = Field(gt=0)
    """Default ``--max-seconds``: checked before each Spark job."""


def load_reconcile_policy(path: Path = DEFAULT_POLICY_PATH) -> ReconcilePolicy:
    """Read ``reconcile:`` (one-line errors name the key)."""
    return load_section(path, "reconcile", ReconcilePolicy, "reconcile.staleness_seconds")


def check_repair(pair: Pair) -> None:
    """``--repair`` needs a declared authority (otherwise nobody can say which side wins) and a
    pair that is not report-only."""
    if pair.authority is None:
        raise UsageError(
            f"--repair refused: the pair {pair.name} declares no authority (which side wins); "
            f"declare it in reconcile.pairs of the configuration, or reconcile without --repair"
        )
    if pair.report_only is not None:
        raise UsageError(
            f"--repair refused: the pair {pair.name} is report-only ({pair.report_only}); "
            f"reconcile without --repair"
        )


@dataclass(frozen=True)
class ReconcileReport:
    """One reconcile run: pins, window, the delta per class, the walk, the repair, the signal."""

    run_id: str
    pair: str
    key: str
    authority: str | None
    source: str
    derived: str
    source_version: int
    derived_version: int | None
    measured_at: datetime
    since: datetime | None
    until: datetime | None
    staleness_seconds: int
    missing: int
    divergent: int
    orphan: int
    pending: int
    """Differences whose key the source changed within the staleness window (not classified)."""
    repaired: int
    repair_batches: int
    repaired_version: int | None
    ranges_compared: int
    compared_per_level: tuple[int, ...]
    disagreeing_per_level: tuple[int, ...]
    ranges_listed: int
    rows_diffed: int
    jobs: int
    """Spark jobs of the walk: one per level and one list job per pass."""
    covered_from: int
    """The first key position compared (0 unless the run resumed an earlier one)."""
    resume_from: int | None
    """The first key position not compared (None: the run reached the end of the key space)."""
    stopped_by: str | None
    """``max_rows`` or ``max_seconds`` when a budget stopped the run before the end."""
    max_rows: int
    max_seconds: float
    baseline: float | None
    step_change: bool
    samples: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Up to :data:`SAMPLE` keys per class, for the operator (never stored)."""
    total_delta: int = field(init=False)
    """The health signal: every difference outside the staleness window."""
    remaining: int = field(init=False)
    """Differences left after the run: orphans always, and whatever was not repaired."""

    complete: bool = field(init=False)
    """Whether the run compared the whole key space (from position 0 to its end)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "total_delta", self.missing + self.divergent + self.orphan)
        object.__setattr__(self, "remaining", self.total_delta - self.repaired)
        object.__setattr__(self, "complete", self.covered_from == 0 and self.resume_from is None)

    @property
    def covered(self) -> float:
        """The share of the key space this run compared (from ``covered_from``)."""
        return ((self.resume_from if self.resume_from is not None else END) - self.covered_from) / END


@dataclass(frozen=True)
class _Sides:
    source: DataFrame
    derived: DataFrame
    columns: tuple[str, ...]


def _claim(ledger: Ledger, run_id: str, derived: str, now: datetime, timeout: int) -> None:
    """Stop unless this run is the earliest live reconcile of ``derived`` (see the module docstring)."""
    started: dict[str, tuple[int, datetime]] = {}
    finished: set[str] = set()
    for record in ledger.reader.records():
        if record.kind == "run_started":
            entry = record.entry()
            if (
                isinstance(entry, RunStarted)
                and entry.purpose == PURPOSE
                and entry.parameters.get("derived") == derived
                and entry.run_id
            ):
                started[entry.run_id] = (record.seq, utc(record.recorded_at))
        elif record.kind == "run_finished" and record.run_id:
            finished.add(record.run_id)
    live = {
        rid: seq
        for rid, (seq, at) in started.items()
        if rid == run_id or (rid not in finished and at > now - timedelta(seconds=timeout))
    }
    holder = min(live, key=live.__getitem__)
    if holder != run_id:
        raise ReconcileBusyError(
            f"another reconcile of {derived} is running (run {holder}); this one stopped before "
            f"reading anything: run it again when that one has finished"
        )


def _changed(
    table: Table, key: str, since: datetime, until: datetime, pinned: int | None
) -> DataFrame | None:
    """Keys a commit of ``table`` in ``(since, until]`` changed (None: no commit there)."""
    if pinned is None:
        return None
    end = table.version_at(until)
    start = table.version_at(since)
    if end is None or end == start:
        return None
    return table.changed_keys(start, end, [key])


def only_keys(
    source: DataFrame, derived: DataFrame, key: str, keys: DataFrame | None
) -> tuple[DataFrame, DataFrame]:
    """Both sides restricted to ``keys`` (bounded mode; None: no key changed, nothing to compare).

    The changed keys are computed once; their smallest and largest key bound both sides
    first, a filter the formats answer from their files' min/max statistics, so a change
    confined to part of the key space (new keys at its end: a day's deliveries) reads only the
    files that may hold it. The semi-join then keeps exactly the changed keys.
    """
    from pyspark.sql import functions as F

    low = high = None
    if keys is not None:
        keys = materialize(keys)
        low, high = keys.agg(F.min(key), F.max(key)).collect()[0]
    if keys is None or low is None:
        return source.where(F.lit(False)), derived.where(F.lit(False))
    in_range = F.col(key).between(F.lit(low), F.lit(high))
    return (
        source.where(in_range).join(F.broadcast(keys), key, "left_semi"),
        derived.where(in_range).join(F.broadcast(keys), key, "left_semi"),
    )


def union_keys(frames: list[DataFrame | None], name: str) -> DataFrame | None:
    found = [f.toDF(name) for f in frames if f is not None]
    if not found:
        return None
    return union_all(found).distinct()


def _sides(
    pair: Pair,
    source: Table,
    derived: Table,
    pins: tuple[int, int | None],
    ctx: DeriveContext,
) -> _Sides:
    source_rows = source.read(pins[0])
    everything = _pinned(derived, pins[1])
    derived_rows = _covered(pair, everything)
    ctx = DeriveContext(ctx.registry, ctx.policies, derived_rows, ctx.ledger, everything)
    if pair.derive is not None:
        projected = pair.derive(source_rows, ctx)
    else:
        projected = source_rows.withColumnRenamed(pair.source_key, pair.derived_key)
    columns = compared_columns(pair, derived_rows.columns, projected.columns)
    keep = [pair.derived_key, *columns]
    return _Sides(projected.select(*keep), derived_rows.select(*keep), columns)


def _pinned(derived: Table, version: int | None) -> DataFrame:
    """Every pinned row of the derived store (none when it was never written)."""
    return derived.read(version) if version is not None else _empty(derived)


def _covered(pair: Pair, rows: DataFrame) -> DataFrame:
    """The rows of the derived store the pair covers."""
    return rows.where(pair.derived_where) if pair.derived_where else rows


def _empty(table: Table) -> DataFrame:
    return table.spark.createDataFrame([], table.spec.schema())


def reconcile(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    pair: Pair,
    *,
    policy: ReconcilePolicy,
    policies: Path = DEFAULT_POLICY_PATH,
    since: datetime | None = None,
    until: datetime | None = None,
    since_last_clean: bool = False,
    repair: bool = False,
    max_repairs_per_second: int | None = None,
    max_rows: int | None = None,
    max_seconds: float | None = None,
    from_start: bool = False,
    progress: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] | None = None,
) -> ReconcileReport:
    """Reconcile ``pair`` as one recorded run; see the module docstring for every step."""
    from pyspark.sql import functions as F

    step = progress or (lambda message: log.info("%s", message))
    check_window(since, until)
    if repair:
        check_repair(pair)
    rate = max_repairs_per_second or policy.max_repairs_per_second
    check_budget(max_rows, "--max-rows")
    check_budget(max_seconds, "--max-seconds")
    budget = Budget(max_rows or policy.max_rows, max_seconds or policy.max_seconds)
    next(batches([], rate), None)  # refuses a rate below 1 before anything runs
    source, derived = registry.get(pair.source), registry.get(pair.derived)
    source_version = source.current_version() if source.exists() else None
    if source_version is None:
        raise UsageError(f"{pair.source} has never been written: there is nothing to reconcile against")
    derived_version = derived.current_version() if derived.exists() else None
    if since_last_clean:
        if since is not None:
            raise UsageError("--since takes an instant or last-clean, not both")
        since = last_clean_run(registry, pair.name)
        if since is None:
            raise UsageError(
                f"--since last-clean: the pair {pair.name} has no clean, complete run yet; run "
                f"lakehouse reconcile {pair.source} {pair.derived} once without --since"
            )
        check_window(since, until)
        step(f"reconcile {pair.name}: bounded since its last clean run, at {since.isoformat()}")
    now = utc(clock.now())
    bounded = since is not None or until is not None
    window_until = until or now
    run_id = new_run_id("reconcile", now, salt=pair.name)
    parameters: dict[str, Any] = {
        "pair": pair.name,
        "derived": pair.derived,
        "key": pair.key_text,
        "authority": pair.authority,
        "since": since.isoformat() if since else None,
        "until": window_until.isoformat() if bounded else None,
        "staleness_seconds": policy.staleness_seconds,
        "repair": repair,
        "max_repairs_per_second": rate if repair else None,
        "max_rows": budget.max_rows,
        "max_seconds": budget.max_seconds,
        "max_ranges_per_level": policy.max_ranges_per_level,
        "list_rows": policy.list_rows,
    }
    with recorded_run(
        ledger,
        run_id=run_id,
        command=f"reconcile {pair.source} {pair.derived}",
        purpose=PURPOSE,
        inputs={pair.source: source_version, pair.derived: derived_version},
        parameters=parameters,
    ) as run:
        _claim(ledger, run_id, pair.derived, now, policy.lock_timeout_seconds)
        step(
            f"reconcile {pair.name}: pinned {pair.source}@{source_version}, {pair.derived}@{derived_version}"
        )
        ctx = DeriveContext(registry, policies, None, ledger)
        sides = _sides(pair, source, derived, (source_version, derived_version), ctx)
        src, der = sides.source, sides.derived
        key = pair.derived_key
        if bounded:
            start = since or datetime.min.replace(tzinfo=now.tzinfo)
            keys = union_keys(
                [
                    _changed(source, pair.source_key, start, window_until, source_version),
                    _changed(derived, pair.derived_key, start, window_until, derived_version),
                ],
                key,
            )
            src, der = only_keys(src, der, key, keys)
        resume = 0 if from_start else _resume_point(registry, pair.name, since, until)
        if resume:
            step(f"reconcile {pair.name}: resuming at key position {resume} (a budget stopped the last run)")
        both = both_sides(src, der, key, sides.columns)  # the projection runs once, not per job
        found = walk(
            both,
            key,
            start=resume,
            max_ranges=policy.max_ranges_per_level,
            list_rows=policy.list_rows,
            budget=budget,
            step=lambda message: step(f"reconcile {pair.name}: {message}"),
        )
        differences = union_all(found.found) if found.found else None
        if differences is None:
            differences = both.select(key).where(F.lit(False)).withColumn(CLASS, F.lit(None).cast("string"))
        stale = _changed(
            source, pair.source_key, now - timedelta(seconds=policy.staleness_seconds), now, source_version
        )
        if stale is not None and policy.staleness_seconds > 0 and found.found:
            stale_keys = stale.toDF(key).distinct()
            differences = differences.join(
                stale_keys.withColumn("_stale", F.lit(True)), key, "left"
            ).withColumn(CLASS, F.when(F.col("_stale"), F.lit("pending")).otherwise(F.col(CLASS)))
            differences = materialize(differences.select(key, CLASS))
        counts = dict.fromkeys((*Difference, "pending"), 0)
        counts.update({r[CLASS]: int(r["count"]) for r in differences.groupBy(CLASS).count().collect()})
        samples = _samples(differences, key)
        repaired, repair_batches, repaired_version = 0, 0, None
        if repair:
            todo = _repair_keys(differences, key, rate * max(1.0, budget.max_seconds - budget.elapsed))
            repaired, repair_batches = _repair(
                pair, source, derived, (source_version, derived_version), todo, rate, ctx, run_id, step, sleep
            )
            repaired_version = derived.current_version() if repaired else None
            if repaired_version is not None:
                run.outputs[pair.derived] = repaired_version
        delta = counts[Difference.MISSING] + counts[Difference.DIVERGENT] + counts[Difference.ORPHAN]
        recent = _recent_deltas(registry, pair.name, bounded, policy.recent_runs)
        signal = step_change(delta, recent, factor=policy.step_factor, minimum=policy.step_min)
        report = ReconcileReport(
            run_id=run_id,
            pair=pair.name,
            key=pair.key_text,
            authority=pair.authority,
            source=pair.source,
            derived=pair.derived,
            source_version=source_version,
            derived_version=derived_version,
            measured_at=now,
            since=since,
            until=until if until is not None or not bounded else window_until,
            staleness_seconds=policy.staleness_seconds,
            missing=counts[Difference.MISSING],
            divergent=counts[Difference.DIVERGENT],
            orphan=counts[Difference.ORPHAN],
            pending=counts["pending"],
            repaired=repaired,
            repair_batches=repair_batches,
            repaired_version=repaired_version,
            ranges_compared=sum(found.trace.compared),
            compared_per_level=tuple(found.trace.compared),
            disagreeing_per_level=tuple(found.trace.disagreeing),
            ranges_listed=found.ranges_listed,
            rows_diffed=found.rows_diffed,
            jobs=found.trace.jobs,
            covered_from=found.start,
            resume_from=found.resume_from,
            stopped_by=found.stopped_by,
            max_rows=budget.max_rows,
            max_seconds=budget.max_seconds,
            baseline=signal.baseline,
            step_change=signal.step_change,
            samples=samples,
        )
        run.outputs[REPORTS] = _write_report(registry, report)
        run.counts.update(
            {
                **counts,
                "total_delta": delta,
                "repaired": repaired,
                "step_change": int(signal.step_change),
                "ranges_listed": found.ranges_listed,
                "rows_diffed": found.rows_diffed,
                "jobs": found.trace.jobs,
                "complete": int(report.complete),
            }
        )
    log.info(
        "reconcile %s: missing %d, divergent %d, orphan %d, pending %d, repaired %d",
        pair.name,
        report.missing,
        report.divergent,
        report.orphan,
        report.pending,
        report.repaired,
    )
    return report


def _repair(
    pair: Pair,
    source: Table,
    derived: Table,
    pins: tuple[int, int | None],
    keys: list[Any],
    rate: int,
    ctx: DeriveContext,
    run_id: str,
    step: Callable[[str], None],
    sleep: Callable[[float], None] | None,
) -> tuple[int, int]:
    """Replace the rows of ``keys`` in the derived store by the source's, rate-limited."""
    from pyspark.sql import functions as F

    if not keys:
        return 0, 0
    everything = _pinned(derived, pins[1])
    derived_rows = _covered(pair, everything)
    ctx = DeriveContext(ctx.registry, ctx.policies, derived_rows, ctx.ledger, everything)
    project = pair.repair_rows or pair.derive
    pinned = source.read(pins[0])
    rows = (
        project(pinned, ctx)
        if project is not None
        else pinned.withColumnRenamed(pair.source_key, pair.derived_key)
    )
    key = pair.derived_key
    wanted = derived.spark.createDataFrame([(k,) for k in keys], rows.select(key).schema)
    fresh = materialize(rows.join(F.broadcast(wanted), key, "left_semi"))
    derived.create(if_not_exists=True)
    limiter = RateLimiter(rate, sleep=sleep) if sleep is not None else RateLimiter(rate)
    done = count = 0
    for batch in batches(keys, rate):
        limiter.admit(len(batch))
        listed = ", ".join(sql_literal(k) for k in batch)
        meta = {"lakehouse.reconcile": pair.name}
        scope = f" AND ({pair.derived_where})" if pair.derived_where else ""
        derived.delete_where(f"`{key}` IN ({listed}){scope}", run_id=run_id, metadata=meta)
        derived.append(fresh.where(F.col(key).isin(list(batch))), run_id=run_id, metadata=meta)
        done += len(batch)
        count += 1
        step(f"reconcile {pair.name}: repaired {done} of {len(keys)} keys")
    return done, count


def _recent_deltas(registry: TableRegistry, pair: str, bounded: bool, runs: int) -> list[int]:
    """The deltas of the pair's last ``runs`` whole runs (not stopped by a budget, not resumed)
    of the same mode (full or bounded), newest first: a part of the key space is no baseline."""
    from pyspark.sql import functions as F

    table = registry.get(REPORTS)
    if not table.exists() or table.current_version() is None:
        return []
    mode = F.col("since").isNotNull() | F.col("until").isNotNull()
    rows = (
        table.read()
        .where((F.col("pair") == pair) & (mode if bounded else ~mode))
        .where((F.col("covered_from") == 0) & F.col("resume_from").isNull())  # whole runs only
        .orderBy(F.desc("measured_at"))
        .limit(runs)
        .select("total_delta")
        .collect()
    )
    return [int(r[0]) for r in rows]


CLEAN_RUN = (
    "missing = 0 AND divergent = 0 AND orphan = 0 AND pending = 0 "
    "AND covered_from = 0 AND resume_from IS NULL"
)
"""A report of a clean run: nothing differed and it covered the whole key space (of its window:
a clean bounded run since an earlier clean run extends what is known to agree)."""


def last_clean_run(registry: TableRegistry, pair: str) -> datetime | None:
    """When the pair's last clean run measured (its versions were pinned then); None if none was."""
    from pyspark.sql import functions as F

    table = registry.get(REPORTS)
    if not table.exists() or table.current_version() is None:
        return None
    found = table.read().where((F.col("pair") == pair) & F.expr(CLEAN_RUN)).agg(F.max("measured_at")).first()
    return utc(found[0]) if found is not None and found[0] is not None else None


def _resume_point(registry: TableRegistry, pair: str, since: datetime | None, until: datetime | None) -> int:
    """Where the pair's last run of the same mode and window stopped (0: it finished, or none ran)."""
    from pyspark.sql import functions as F

    table = registry.get(REPORTS)
    if not table.exists() or table.current_version() is None:
        return 0
    same = (
        (F.col("pair") == pair)
        & F.col("since").eqNullSafe(F.lit(since).cast("timestamp"))
        & F.col("until").eqNullSafe(F.lit(until).cast("timestamp"))
    )
    last = table.read().where(same).orderBy(F.desc("measured_at")).limit(1).select("resume_from").collect()
    return int(last[0][0]) if last and last[0][0] is not None else 0


def _samples(differences: DataFrame, key: str) -> dict[str, tuple[str, ...]]:
    """Up to :data:`SAMPLE` keys per class, smallest first (one small job)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ranked = differences.withColumn(
        "_n", F.row_number().over(Window.partitionBy(CLASS).orderBy(F.col(key).cast("string")))
    )
    found: dict[str, list[str]] = {}
    for row in ranked.where(F.col("_n") <= SAMPLE).orderBy(CLASS, "_n").collect():
        found.setdefault(row[CLASS], []).append(str(row[key]))
    return {kind: tuple(keys) for kind, keys in found.items()}


def _repair_keys(differences: DataFrame, key: str, most: float) -> list[Any]:
    """The missing and divergent keys a repair may reach at its rate in the time left (the
    driver never holds more keys than it can repair)."""
    from pyspark.sql import functions as F

    wanted = F.col(CLASS).isin(Difference.MISSING.value, Difference.DIVERGENT.value)
    rows = differences.where(wanted).select(key).orderBy(key).limit(int(most)).collect()
    return [r[0] for r in rows]


def _write_report(registry: TableRegistry, report: ReconcileReport) -> int:
    table = registry.get(REPORTS)
    table.create(if_not_exists=True)
    row = {
        "run_id": report.run_id,
        "pair": report.pair,
        "source": report.source,
        "derived": report.derived,
        "source_version": report.source_version,
        "derived_version": report.derived_version,
        "measured_at": report.measured_at,
        "since": report.since,
        "until": report.until,
        "staleness_seconds": report.staleness_seconds,
        "missing": report.missing,
        "divergent": report.divergent,
        "orphan": report.orphan,
        "pending": report.pending,
        "total_delta": report.total_delta,
        "repaired": report.repaired,
        "ranges_compared": report.ranges_compared,
        "ranges_listed": report.ranges_listed,
        "rows_diffed": report.rows_diffed,
        "jobs": report.jobs,
        "covered_from": report.covered_from,
        "resume_from": report.resume_from,
        "stopped_by": report.stopped_by,
        "baseline": report.baseline,
        "step_change": report.step_change,
    }
    frame = table.spark.createDataFrame([row], table.spec.schema())
    table.append(frame, run_id=report.run_id)
    version = table.current_version()
    assert version is not None
    return version


__all__ = [
    "PURPOSE",
    "REPORTS",
    "ReconcilePolicy",
    "ReconcileReport",
    "check_repair",
    "load_reconcile_policy",
    "reconcile",
]
