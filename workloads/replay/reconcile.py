"""Independent reconciliation of a replay candidate, and the verdict it leads to.

Written apart from every engine on purpose: nothing here imports one (a test checks),
and the expected pairs come from :mod:`workloads.replay.recount`, which resolves the
pinned Silver rows itself under the *written* rules (``conf/engines.yaml``) of the old and
the new version, in plain Python, and counts the pairs the producer's written rule gives.
It shares no code and no output with the engine under test, so a faulty engine version,
a wrong scope or a wrong candidate assembly makes the two disagree.

Checks (:func:`reconcile`), each recorded by name in the decision. The structural checks
read the columns the caller takes from the answer table's declaration (:class:`Layout`;
this module imports none, not even :mod:`workloads.replay.answer`); the names below are
``gold.correlations``'. The pair recount (``expected_pairs``) and the Bronze traces are
``gold.correlations``' own independent check.

* ``one_current_row_per_id``: at most one provisional/authoritative row per correlation id;
* ``row_identity_unique``: at most one row per ``(correlation_id, run_id)``;
* ``superseded_successor_exists``: every superseded row's ``superseded_by`` is a row of the
  candidate;
* ``entity_order``: ``entity_a < entity_b`` on every row;
* ``no_vanished_entity_current``: no current row names an entity the new resolution no
  longer produces;
* ``untouched_partitions_equal``: every partition the run does not rewrite has the
  same row count and canonical hash as serving;
* ``expected_pairs``: the candidate's current pairs equal the independent recount on every
  pair touching an entity the recount finds affected and on every pair the run changed:
  none missing, none unexpected, none twice, the same ``valid_from``; counted per type and
  per partition (mismatches within ``checks.max_residual_delta``). A recount that has no
  written rule for a declaration fails the check instead of guessing;
* ``bronze_trace``: a sample of changed keys traced back through Silver's Bronze
  coordinates to rows of the pinned Bronze tables;
* ``changed_ratio``: the share of serving keys removed or changed stays within
  ``checks.max_changed_ratio``;
* ``quality_gate``: the Great Expectations suite of the table on the rewritten partitions
  (run by the caller, passed in).

Verdict (:func:`decide`): a broken structure (the first five checks, untouched partitions,
quality gate) -> ``repair``; totals, traces or too many changes -> ``investigate``; no
change at all -> ``suppress``; otherwise ``publish``. ``rollback`` is the verdict of the
check run after publication (:mod:`workloads.replay.verify`) when serving disagrees with
what the recount says was published.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

from lakehouse.digest import partition_hashes
from lakehouse.frames import materialize, union_all
from workloads.replay.recount import ASSET_OF_TYPE, PairKey, Recount, month_of
from workloads.vocabulary import CURRENT_STATUSES, CorrelationStatus, Verdict

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

STRUCTURAL: Final[tuple[str, ...]] = (
    "one_current_row_per_id",
    "row_identity_unique",
    "superseded_successor_exists",
    "entity_order",
    "no_vanished_entity_current",
    "untouched_partitions_equal",
    "quality_gate",
)
"""Checks whose failure means the candidate is broken (verdict ``repair``)."""
QUANTITATIVE: Final[tuple[str, ...]] = ("expected_pairs", "bronze_trace", "changed_ratio")
"""Checks whose failure needs a person to look (verdict ``investigate``)."""


@dataclass(frozen=True)
class Check:
    """One named check: passed or not, how many violations, a few examples."""

    name: str
    passed: bool
    violations: int = 0
    detail: str = ""
    examples: tuple[str, ...] = ()
    first_bad_partition: str | None = None
    counts: Mapping[str, Any] = field(default_factory=dict)
    """Figures behind the check (the recount's per-partition counts), recorded as they are."""

    def recorded(self) -> dict[str, Any]:
        """What the ledger keeps of the check: verdict, violations, detail and counts, never its
        :attr:`examples` (row values an erasure could not redact there)."""
        return {
            "passed": self.passed,
            "violations": self.violations,
            "detail": self.detail,
            **({"counts": dict(self.counts)} if self.counts else {}),
        }


@dataclass(frozen=True)
class Layout:
    """The columns the structural checks read: the answer table's declaration
    (:class:`~workloads.replay.answer.AnswerTable`), given by the caller."""

    key: str
    """At most one current row per key (``correlation_id``)."""
    identity: tuple[str, ...]
    """A row version's identity (``correlation_id, run_id``)."""
    partition: str
    """The partition compared with serving where the run does not rewrite (``valid_month``)."""
    subjects: tuple[str, str]
    """The ordered entity columns (``entity_a < entity_b``)."""


@dataclass(frozen=True)
class Thresholds:
    """The plan's reconciliation thresholds."""

    max_residual_delta: int
    max_changed_ratio: float


@dataclass(frozen=True)
class Reconciliation:
    """The decision on a candidate: totals, every check, and the verdict."""

    verdict: Verdict
    failed_invariant: str | None
    first_bad_partition: str | None
    affected_range: Mapping[str, Any]
    old_total: int
    candidate_total: int
    expected_delta: int
    residual_delta: int
    owner: str
    checks: tuple[Check, ...]
    per_type: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    def examples(self) -> dict[str, list[str]]:
        """Each check's examples (row values: entity and correlation ids, a month), for the person
        reading the outcome and the review file, which an erasure redacts; never for the ledger,
        which nobody can redact (:meth:`ledger_fields`)."""
        return {c.name: list(c.examples) for c in self.checks if c.examples}

    def ledger_fields(self) -> dict[str, Any]:
        """Keyword arguments of :class:`ledger.entries.ReconciliationDecision` (minus run/table):
        each check's verdict, violations, detail and counts, without its examples
        (:meth:`examples`): an entry is kept for good, and an example may name a data subject."""
        return {
            "verdict": self.verdict,
            "affected_range": dict(self.affected_range),
            "old_total": Decimal(self.old_total),
            "candidate_total": Decimal(self.candidate_total),
            "expected_delta": Decimal(self.expected_delta),
            "residual_delta": Decimal(self.residual_delta),
            "first_bad_partition": self.first_bad_partition,
            "failed_invariant": self.failed_invariant,
            "owner": self.owner,
            "checks": {c.name: c.recorded() for c in self.checks},
        }


# -- pure decision ---------------------------------------------------------------------------


def decide(checks: Sequence[Check], *, changes: int) -> tuple[Verdict, str | None]:
    """The verdict and the first failed check (structural checks before quantitative ones)."""
    by_name = {c.name: c for c in checks}
    for name in STRUCTURAL:
        check = by_name.get(name)
        if check is not None and not check.passed:
            return Verdict.REPAIR, name
    for name in QUANTITATIVE:
        check = by_name.get(name)
        if check is not None and not check.passed:
            return Verdict.INVESTIGATE, name
    if changes == 0:
        return Verdict.SUPPRESS, None
    return Verdict.PUBLISH, None


# -- independent recount ------------------------------------------------------------------------


def _live(df: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return df.where(F.col("status").isin(*CURRENT_STATUSES))


def _with_flag(df: DataFrame, ids: DataFrame, column: str, flag: str) -> DataFrame:
    from pyspark.sql import functions as F

    keys = ids.select(F.col("entity_id").alias(f"{flag}_k")).distinct()
    joined = df.join(keys, df[column] == keys[f"{flag}_k"], "left")
    return joined.withColumn(flag, F.col(f"{flag}_k").isNotNull()).drop(f"{flag}_k")


def _within(column: Column, bounds: tuple[datetime | None, datetime | None]) -> Column:
    """``column`` in the half-open event range (always true for an open range)."""
    from pyspark.sql import functions as F

    start, end = bounds
    condition = F.lit(True)
    if start is not None:
        condition = condition & (column >= F.lit(start))
    if end is not None:
        condition = condition & (column < F.lit(end))
    return condition


def _touching(df: DataFrame, ids: DataFrame, subjects: Sequence[str] = ("entity_a", "entity_b")) -> DataFrame:
    """Rows whose subjects (entity_a or entity_b) are one of ``ids``."""
    from pyspark.sql import functions as F

    first, second = subjects
    flagged = _with_flag(_with_flag(df, ids, first, "_ta"), ids, second, "_tb")
    return flagged.where(F.col("_ta") | F.col("_tb")).drop("_ta", "_tb")


# -- checks ------------------------------------------------------------------------------------


def _examples(df: DataFrame, column: str, limit: int = 3) -> tuple[str, ...]:
    return tuple(str(r[0]) for r in df.select(column).orderBy(column).limit(limit).collect())


def _first_month(df: DataFrame, partition: str) -> str | None:
    from pyspark.sql import functions as F

    row = df.agg(F.min(partition).alias("m")).collect()[0]
    return None if row["m"] is None else str(row["m"])


def structural_checks(candidate: DataFrame, vanished: DataFrame, layout: Layout) -> list[Check]:
    """The exhaustive row invariants on the whole candidate (its columns: ``layout``)."""
    from pyspark.sql import functions as F

    key, partition = layout.key, layout.partition
    first, second = layout.subjects
    identity = ", ".join(layout.identity)
    found: list[Check] = []
    live = _live(candidate)
    dup_current = live.groupBy(key).agg(F.count(F.lit(1)).alias("n"), F.min(partition).alias(partition))
    bad = dup_current.where(F.col("n") > 1)
    found.append(_check("one_current_row_per_id", bad, key, "ids with more than one current row", partition))
    dup_identity = candidate.groupBy(*layout.identity).agg(
        F.count(F.lit(1)).alias("n"), F.min(partition).alias(partition)
    )
    bad = dup_identity.where(F.col("n") > 1)
    found.append(_check("row_identity_unique", bad, key, f"({identity}) repeated", partition))
    ids = candidate.select(F.col(key).alias("_succ")).distinct()
    superseded = candidate.where(F.col("status") == CorrelationStatus.SUPERSEDED)
    dangling = superseded.join(ids, superseded["superseded_by"] == ids["_succ"], "left_anti")
    found.append(
        _check("superseded_successor_exists", dangling, key, "superseded rows without successor", partition)
    )
    disordered = candidate.where(~(F.col(first) < F.col(second)))
    found.append(_check("entity_order", disordered, key, f"rows with {first} >= {second}", partition))
    stale = _touching(live, vanished, layout.subjects)
    found.append(
        _check(
            "no_vanished_entity_current",
            stale,
            key,
            "current rows naming an entity the new resolution no longer produces",
            partition,
        )
    )
    return found


def _check(name: str, violations: DataFrame, column: str, what: str, partition: str) -> Check:
    count = violations.count()
    if count == 0:
        return Check(name=name, passed=True)
    return Check(
        name=name,
        passed=False,
        violations=count,
        detail=f"{count} {what}",
        examples=_examples(violations, column),
        first_bad_partition=_first_month(violations, partition),
    )


def untouched_partitions_check(
    candidate: DataFrame, serving: DataFrame, rewritten: Sequence[str], partition: str
) -> Check:
    """Partitions the run does not rewrite: same count and canonical hash as serving."""
    mine = {k[0]: v for k, v in partition_hashes(candidate, [partition]).items()}
    theirs = {k[0]: v for k, v in partition_hashes(serving, [partition]).items()}
    months = sorted((set(mine) | set(theirs)) - set(rewritten), key=str)
    bad = [str(m) for m in months if mine.get(m) != theirs.get(m)]
    if not bad:
        return Check(name="untouched_partitions_equal", passed=True, detail=f"{len(months)} partitions equal")
    return Check(
        name="untouched_partitions_equal",
        passed=False,
        violations=len(bad),
        detail=f"{len(bad)} partitions the run does not rewrite differ from serving",
        examples=tuple(bad[:3]),
        first_bad_partition=bad[0],
    )


@dataclass(frozen=True)
class PairCount:
    """The candidate against the independent recount."""

    check: Check
    per_type: Mapping[str, Mapping[str, int]]
    expected_in_scope: int
    serving_in_scope: int


def _pairs_of(
    table: DataFrame, recount: Recount, bounds: tuple[datetime | None, datetime | None]
) -> dict[PairKey, list[int]]:
    """Current rows of ``table`` in the recount's universe: ``(type, a, b)`` -> their valid_from (µs)."""
    from pyspark.sql import functions as F

    entities = sorted(recount.entities)
    if not entities:
        return {}
    ids = table.sparkSession.createDataFrame([(e,) for e in entities], "entity_id string")
    live = _live(table).where(_within(F.col("valid_from"), bounds))
    found: dict[PairKey, list[int]] = {}
    for r in (
        _touching(live, ids)
        .select("correlation_type", "entity_a", "entity_b", F.unix_micros("valid_from").alias("since"))
        .collect()
    ):
        key = (str(r["correlation_type"]), str(r["entity_a"]), str(r["entity_b"]))
        if recount.covers(key):
            found.setdefault(key, []).append(int(r["since"]))
    return found


def expected_pairs_check(
    candidate: DataFrame,
    serving: DataFrame,
    recount: Recount,
    *,
    max_residual: int,
    bounds: tuple[datetime | None, datetime | None] = (None, None),
) -> PairCount:
    """Candidate current pairs vs the independent recount, pair by pair and per partition.

    Compared on the recount's universe (pairs touching the entities it finds affected, and
    every pair the run changed): a recounted pair the candidate lacks is ``missing``, a
    candidate pair the rule does not give is ``unexpected``, a pair held twice is
    ``duplicate``, and one with another ``valid_from`` is ``moved``.
    """
    got = _pairs_of(candidate, recount, bounds)
    served = _pairs_of(serving, recount, bounds)
    want = recount.expected()
    bad: list[tuple[str, PairKey, str]] = []
    per_type: dict[str, dict[str, int]] = {}
    per_partition: dict[str, dict[str, int]] = {}

    def tally(bucket: dict[str, dict[str, int]], name: str, what: str) -> None:
        counts = bucket.setdefault(name, {"candidate": 0, "expected": 0, "unexpected": 0, "missing": 0})
        counts[what] = counts.get(what, 0) + 1

    for key, since in want.items():
        tally(per_type, key[0], "expected")
        tally(per_partition, month_of(since), "expected")
    for key, moments in got.items():
        for moment in moments:
            tally(per_type, key[0], "candidate")
            tally(per_partition, month_of(moment), "candidate")
    for key in sorted(set(want) | set(got)):
        expected, held = want.get(key), got.get(key, [])
        if expected is None:
            bad.extend((month_of(m), key, "unexpected") for m in held)
        elif not held:
            bad.append((month_of(expected), key, "missing"))
        elif len(held) > 1:
            bad.append((month_of(min(held)), key, "duplicate"))
        elif held[0] != expected:
            bad.append((min(month_of(held[0]), month_of(expected)), key, "moved"))
    for month, key, what in bad:
        if what in ("unexpected", "missing"):
            tally(per_type, key[0], what)
            tally(per_partition, month, what)
        else:
            tally(per_partition, month, what)
    for key, moments in served.items():
        per_type.setdefault(key[0], {"candidate": 0, "expected": 0, "unexpected": 0, "missing": 0})
        per_type[key[0]]["serving"] = per_type[key[0]].get("serving", 0) + len(moments)
    bad.sort()
    wrong = len(bad)
    first_bad = bad[0][0] if bad else None
    examples = tuple(f"{k[0]} {k[1]} {k[2]} {month} ({what})" for month, k, what in bad[:3])
    check = Check(
        name="expected_pairs",
        passed=wrong <= max_residual,
        violations=wrong,
        detail=(
            f"{wrong} pairs differ from the independent recount (allowed {max_residual}); "
            f"{len(want)} expected under {recount.new_rule} and {recount.pair_rule} for "
            f"{len(recount.scope)} affected entities, first bad partition {first_bad or 'none'}"
        ),
        examples=examples,
        first_bad_partition=first_bad if wrong else None,
        counts={
            "rules": f"{recount.old_rule} -> {recount.new_rule}; {recount.pair_rule}",
            "events_read": recount.events_read,
            "entities_in_scope": len(recount.scope),
            "pairs_changed_by_run": len(recount.changed),
            "per_partition": {m: per_partition[m] for m in sorted(per_partition)},
        },
    )
    return PairCount(
        check=check,
        per_type=per_type,
        expected_in_scope=len(want),
        serving_in_scope=sum(len(m) for m in served.values()),
    )


def no_recount_check(reason: str) -> PairCount:
    """The pair check when the recount has no written rule for a declaration: failed, not guessed."""
    check = Check(
        name="expected_pairs", passed=False, violations=1, detail=f"no independent recount: {reason}"
    )
    return PairCount(check=check, per_type={}, expected_in_scope=0, serving_in_scope=0)


def changed_ratio_check(removed_or_changed: int, serving_total: int, max_ratio: float) -> Check:
    ratio = removed_or_changed / serving_total if serving_total else 0.0
    return Check(
        name="changed_ratio",
        passed=ratio <= max_ratio,
        violations=0 if ratio <= max_ratio else removed_or_changed,
        detail=f"{removed_or_changed} of {serving_total} serving keys removed or changed "
        f"({ratio:.3f}, allowed {max_ratio})",
    )


# -- traces ---------------------------------------------------------------------------------------


def trace_to_bronze(
    keys: DataFrame,
    events: DataFrame,
    bronze: Mapping[str, DataFrame],
) -> Check:
    """Trace sampled keys to Bronze: each key's events on the pair's shared assets must exist there.

    ``keys``: ``(key, side, correlation_type, entity_a, entity_b)`` with ``side`` ``old`` or
    ``new`` (which resolution made the pair). ``events``: resolved Silver with
    ``old_entity`` / ``new_entity`` and Bronze coordinates. ``bronze``: domain -> the
    pinned Bronze table of that feed.
    """
    from pyspark.sql import functions as F

    sample = keys.collect()
    if not sample:
        return Check(name="bronze_trace", passed=True, detail="no changed keys to trace")
    # The sample as rows in the plan (it is small by construction: the plan's trace sample),
    # and the traced coordinates computed once: each is read by several joins below, which
    # otherwise recompute it (the changes' sort and limit four times, the events' joins seven).
    keys = keys.sparkSession.createDataFrame(sample, keys.schema)
    coords = ["_manifest_id", "_source_file", "_line"]
    asset = F.lit(None).cast("string")
    for kind, column in ASSET_OF_TYPE.items():
        asset = F.when(F.col("correlation_type") == kind, F.col(column)).otherwise(asset)
    frames = []
    for side in ("old", "new"):
        resolved = events.select(
            F.col(f"{side}_entity").alias("_entity"), "domain", *coords, *ASSET_OF_TYPE.values()
        )
        for member in ("entity_a", "entity_b"):
            wanted = keys.where(F.col("side") == side).select(
                "key", "correlation_type", F.col(member).alias("_entity"), F.lit(member).alias("member")
            )
            frames.append(
                wanted.join(resolved, "_entity")
                .select("key", "member", asset.alias("asset"), "domain", *coords)
                .where(F.col("asset").isNotNull())
            )
    uses = union_all(frames)
    shared = (
        uses.groupBy("key", "asset")
        .agg(F.count_distinct("member").alias("members"))
        .where(F.col("members") == 2)
    )
    traced = materialize(
        uses.join(shared.select("key", "asset"), ["key", "asset"]).select("key", "domain", *coords).distinct()
    )
    # Only the traced coordinates are looked up (a broadcast semi-join, no shuffle of Bronze).
    wanted_coords = F.broadcast(traced.select("domain", *coords).distinct())
    known = None
    for domain, frame in sorted(bronze.items()):
        part = (
            frame.select(F.lit(domain).alias("domain"), *coords)
            .join(wanted_coords, ["domain", *coords], "left_semi")
            .distinct()
        )
        known = part if known is None else known.unionByName(part)
    if known is None:
        found = traced.withColumn("_found", F.lit(None).cast("boolean"))
    else:
        found = traced.join(known.withColumn("_found", F.lit(True)), ["domain", *coords], "left")
    per_key = {
        str(r["key"]): (int(r["events"]), int(r["found"]))
        for r in found.groupBy("key")
        .agg(F.count(F.lit(1)).alias("events"), F.count_if(F.col("_found").isNotNull()).alias("found"))
        .collect()
    }
    bad = []
    for row in sample:
        events_n, found_n = per_key.get(str(row["key"]), (0, 0))
        if events_n == 0 or found_n < events_n:
            bad.append(f"{row['key']}: {found_n} of {events_n} events found in Bronze")
    return Check(
        name="bronze_trace",
        passed=not bad,
        violations=len(bad),
        detail=f"{len(sample) - len(bad)} of {len(sample)} sampled keys traced to Bronze",
        examples=tuple(bad[:3]),
    )


# -- the whole reconciliation -------------------------------------------------------------------


def reconcile(
    *,
    candidate: DataFrame,
    serving: DataFrame,
    events: DataFrame,
    recount: Recount | str,
    vanished: DataFrame,
    rewritten: Sequence[str],
    thresholds: Thresholds,
    trace_keys: DataFrame,
    bronze: Mapping[str, DataFrame],
    removed_or_changed: int,
    changes: int,
    gate: Check,
    owner: str,
    affected_range: Mapping[str, Any],
    layout: Layout,
    bounds: tuple[datetime | None, datetime | None] = (None, None),
) -> Reconciliation:
    """Every check on a candidate and the verdict (see the module docstring).

    ``candidate`` / ``serving``: whole tables (serving at the pinned version).
    ``events``: Silver in range with ``old_entity`` / ``new_entity`` and Bronze coordinates
    (only for the sampled traces). ``recount``: the independent recount
    (:func:`workloads.replay.recount.recount`), or why there is none. ``layout``: the
    columns of the answer table's declaration the structural checks read.
    """
    checks = structural_checks(candidate, vanished, layout)
    checks.append(untouched_partitions_check(candidate, serving, rewritten, layout.partition))
    pairs = (
        expected_pairs_check(
            candidate, serving, recount, max_residual=thresholds.max_residual_delta, bounds=bounds
        )
        if isinstance(recount, Recount)
        else no_recount_check(recount)
    )
    checks.append(pairs.check)
    checks.append(trace_to_bronze(trace_keys, events, bronze))
    old_total = _live(serving).count()
    checks.append(changed_ratio_check(removed_or_changed, old_total, thresholds.max_changed_ratio))
    checks.append(gate)
    candidate_total = _live(candidate).count()
    expected_delta = pairs.expected_in_scope - pairs.serving_in_scope
    residual = (candidate_total - old_total) - expected_delta
    verdict, failed = decide(checks, changes=changes)
    for check in checks:
        if not check.passed:
            log.debug("check %s failed: %d violation(s); %s", check.name, check.violations, check.detail)
    log.debug(
        "reconciled: serving %d, candidate %d, expected delta %d, residual %d -> %s",
        old_total,
        candidate_total,
        expected_delta,
        residual,
        verdict,
    )
    failing = sorted((c for c in checks if not c.passed), key=lambda c: c.name != failed)
    first_bad = next((c.first_bad_partition for c in failing if c.first_bad_partition), None)
    return Reconciliation(
        verdict=verdict,
        failed_invariant=failed,
        first_bad_partition=first_bad,
        affected_range=dict(affected_range),
        old_total=old_total,
        candidate_total=candidate_total,
        expected_delta=expected_delta,
        residual_delta=residual,
        owner=owner,
        checks=tuple(checks),
        per_type=pairs.per_type,
    )
