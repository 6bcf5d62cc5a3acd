"""The Gold build: per-entity daily features, W1 baselines and the correlation store.

What :func:`build_gold` does, in this order:

1. Pins the current version of ``silver.events`` and of every Gold table, and reads
   exactly those (a run never reads "whatever is there now").
2. Recomputes ``gold.entity_daily`` from Silver (:func:`entity_daily`, cheap) and
   compares it with the stored table by key ``(entity_id, day)`` through row hashes
   (:func:`daily_diff`): added, removed, changed.
3. ``gold.baselines``: recomputes only the (entity, day) keys a change can reach
   (:func:`workloads.gold.baselines.affected_days`: from each changed day up to 729 days
   later, for the changed entities only) and rewrites only the months holding them.
   Unaffected rows of those months are carried over unchanged; other months are not
   touched at all.
4. ``gold.entity_daily``: rewrites only the months with a changed key.
5. ``gold.correlations``: correlation engine v1 over the same Silver version, written by
   :func:`write_correlations` (idempotent: a rerun under the same engine writes nothing).

Baselines are written before entity_daily on purpose: the stored entity_daily is what
the next run diffs against, so it acts as the commit marker. If a run dies between the
two writes, the rerun sees the same difference and rewrites the same baselines.

Each write replaces whole ``month`` partitions in one commit (months that become empty
are deleted in a second one), carrying the run id and the pinned Silver version in the
commit metadata. ``full=True`` rewrites every month from scratch; the result is the same
rows as the incremental path (tested by canonical hash).

Attribution (which entity an event counts for): its own ``entity_id``, else the entity
of the order it references (``order_id``), which is how outcomes and refunds without a
resolved customer are attributed. Events still without an entity are excluded and
counted in :attr:`GoldReport.unattributed_events`. Only the feature domains
(:data:`FEATURE_DOMAINS`) count; settlements mirror orders and carry no feature.

The day of a feature is the event's ``accounting_date``: equal to the event date for
on-time facts, and the ingest date for a late fact booked as a current-period adjustment
(conf/policies.yaml, ``adjust``), so Gold never silently restates a closed period.
Outcomes count on the day they arrive, not on the order's day: a feature of day d then
only holds what was known on day d (point-in-time correct for W4 training sets).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from lakehouse.digest import canonical_json, row_hash_column
from lakehouse.errors import TableMissingError
from lakehouse.tables.base import sql_literal
from workloads.engines import correlation as correlation_v1
from workloads.gold import baselines as w1

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.tables import Table, TableRegistry
    from workloads.gold.entity_index import IndexRefresh

SILVER: Final = "silver.events"
ENTITY_DAILY: Final = "gold.entity_daily"
BASELINES: Final = "gold.baselines"
CORRELATIONS: Final = "gold.correlations"
GOLD_TABLES: Final[tuple[str, ...]] = (ENTITY_DAILY, BASELINES, CORRELATIONS)

ENTITY_DAILY_ENGINE: Final = "entity_daily@1"
FEATURE_DOMAINS: Final[tuple[str, ...]] = ("orders", "refunds", "logins", "outcomes")
DAILY_KEY: Final[tuple[str, ...]] = ("entity_id", "day")
DAILY_COLUMNS: Final[tuple[str, ...]] = (
    "entity_id",
    "day",
    "month",
    "resolver",
    "orders",
    "order_amount",
    "refunds",
    "refund_amount",
    "logins",
    "failed_logins",
    "devices",
    "cards",
    "chargebacks",
    "fraud_labels",
)
CORRELATION_MERGE_KEYS: Final[tuple[str, ...]] = ("valid_month", "correlation_id", "engine")
INPUTS_KEY: Final = "lakehouse.inputs"
ENGINE_KEY: Final = "lakehouse.engine"
INACTIVE_STATUSES: Final[tuple[str, ...]] = ("superseded", "retracted")
"""Correlation statuses that no longer assert anything; not counted as not reproduced."""

Gate = Callable[[str, "DataFrame"], None]
"""A quality gate: called with the logical table name and the DataFrame about to be
written; raises (a :class:`lakehouse.errors.DataQualityError`) to stop the write."""


# -- pure transforms ---------------------------------------------------------------------


def attribute_events(silver: DataFrame) -> DataFrame:
    """Feature-domain Silver rows with ``entity_id``/``resolver`` filled from their order.

    An event keeps its own entity; one without (for example an outcome, which names only
    an order) takes the entity of the order it references. Rows that still have no
    entity keep a null ``entity_id``.
    """
    from pyspark.sql import functions as F

    owners = (
        silver.where((F.col("domain") == "orders") & F.col("entity_id").isNotNull())
        .groupBy(F.coalesce("order_id", "event_id").alias("_order"))
        .agg(F.min(F.struct("entity_id", "resolver")).alias("_owner"))
    )
    feature = silver.where(F.col("domain").isin(*FEATURE_DOMAINS))
    joined = feature.join(owners, feature["order_id"] == owners["_order"], "left")
    own = F.col("entity_id").isNotNull()
    return joined.select(
        *[c for c in feature.columns if c not in ("entity_id", "resolver")],
        F.when(own, F.col("entity_id")).otherwise(F.col("_owner.entity_id")).alias("entity_id"),
        F.when(own, F.col("resolver")).otherwise(F.col("_owner.resolver")).alias("resolver"),
    )


def daily_features(silver: DataFrame) -> DataFrame:
    """:func:`entity_daily`'s rows plus, per day, one row with a null ``entity_id`` for the
    events no entity could be attributed to; ``events`` counts the events of each row.

    One pass over Silver gives both the features and the report's attribution counts.
    """
    from pyspark.sql import functions as F

    domain = F.col("domain")

    def amount_of(name: str) -> Any:
        total = F.sum(F.when(domain == name, F.col("amount")))
        return F.coalesce(total, F.lit(0)).cast("decimal(18,2)")

    label = F.lower(F.col("label"))
    daily = (
        attribute_events(silver)
        .groupBy("entity_id", F.col("accounting_date").alias("day"))
        .agg(
            F.coalesce(F.max("resolver"), F.lit("unknown")).alias("resolver"),
            F.count_if(domain == "orders").alias("orders"),
            amount_of("orders").alias("order_amount"),
            F.count_if(domain == "refunds").alias("refunds"),
            amount_of("refunds").alias("refund_amount"),
            F.count_if(domain == "logins").alias("logins"),
            F.count_if((domain == "logins") & (F.col("success") == F.lit(False))).alias("failed_logins"),
            F.count_distinct("device_id").alias("devices"),
            F.count_distinct("card_fingerprint").alias("cards"),
            F.count_if((domain == "outcomes") & (label == "chargeback")).alias("chargebacks"),
            F.count_if((domain == "outcomes") & (label == "fraud")).alias("fraud_labels"),
            F.count(F.lit(1)).alias("events"),
        )
    )
    counts = (
        "orders",
        "refunds",
        "logins",
        "failed_logins",
        "devices",
        "cards",
        "chargebacks",
        "fraud_labels",
    )
    return daily.select(
        "entity_id",
        "day",
        F.date_format("day", "yyyy-MM").alias("month"),
        "resolver",
        *[F.col(c).cast("bigint").alias(c) if c in counts else F.col(c) for c in DAILY_COLUMNS[4:]],
        F.col("events").cast("bigint").alias("events"),
    )


def entity_daily(silver: DataFrame) -> DataFrame:
    """Per entity and day: the features of ``gold.entity_daily`` (its exact columns and types).

    orders / order_amount, refunds / refund_amount, logins / failed_logins (``success``
    false; unknown success counts as a login, not a failure), devices and cards (distinct
    non-null ids seen that day in any domain), chargebacks and fraud_labels (outcomes by
    label, attributed through the order). Events without an entity are left out.
    """
    return only_attributed(daily_features(silver))


def only_attributed(features: DataFrame) -> DataFrame:
    """The ``gold.entity_daily`` rows of :func:`daily_features`' output."""
    from pyspark.sql import functions as F

    return features.where(F.col("entity_id").isNotNull()).select(*DAILY_COLUMNS)


def daily_diff(stored: DataFrame, new: DataFrame) -> DataFrame:
    """Keys ``(entity_id, day)`` whose row was added, removed or changed, with ``month`` and ``change``.

    Rows are compared by the sha256 of their canonical JSON over every column
    (:func:`lakehouse.digest.row_hash_column`), so any changed value counts.
    """
    from pyspark.sql import functions as F

    columns = list(DAILY_COLUMNS)
    old = stored.select(
        *DAILY_KEY, F.col("month").alias("_m_old"), row_hash_column(stored, columns).alias("_old")
    )
    cur = new.select(*DAILY_KEY, F.col("month").alias("_m_new"), row_hash_column(new, columns).alias("_new"))
    change = (
        F.when(F.col("_old").isNull(), F.lit("added"))
        .when(F.col("_new").isNull(), F.lit("removed"))
        .when(F.col("_old") != F.col("_new"), F.lit("changed"))
    )
    return (
        old.join(cur, list(DAILY_KEY), "full_outer")
        .select(*DAILY_KEY, F.coalesce("_m_new", "_m_old").alias("month"), change.alias("change"))
        .where(F.col("change").isNotNull())
    )


# -- reports -----------------------------------------------------------------------------


@dataclass(frozen=True)
class CorrelationWrite:
    """What :func:`write_correlations` did, compared with the stored rows of the same engine."""

    engine: str
    version: int | None
    """The table's version after the write (the version read when nothing was written)."""
    inserted: int
    updated: int
    unchanged: int
    not_reproduced: int
    """Stored active rows of this engine that the new output no longer contains. They are left
    as they are: retracting or superseding them is the replay flow's decision."""


@dataclass(frozen=True)
class GoldReport:
    """What one Gold build read, recomputed and wrote."""

    run_id: str
    full: bool
    inputs: Mapping[str, int]
    """Table -> version read (Delta version or Iceberg snapshot id)."""
    outputs: Mapping[str, int | None]
    """Table -> version after the build (unchanged when nothing had to be written)."""
    events: int
    """Feature-domain Silver events read."""
    unattributed_events: int
    """Events left out because neither they nor their order have an entity."""
    daily_rows: int
    daily_added: int
    daily_changed: int
    daily_removed: int
    entities_recomputed: int
    """Entities whose baselines were recomputed."""
    baseline_rows_recomputed: int
    months_rewritten: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Table -> the ``month`` partitions replaced or emptied."""
    correlations: CorrelationWrite | None = None
    entity_index: IndexRefresh | None = None
    """The rebuild of the correlation store's entity index that followed (run_gold)."""

    def as_dict(self) -> dict[str, Any]:
        """Plain values, for ``--json`` output and the ledger."""
        return asdict(self)


# -- I/O at the edges --------------------------------------------------------------------


def _read_pinned(table: Table, version: int | None) -> DataFrame:
    """The table as of ``version``; an Iceberg table never written has no version: read it empty."""
    return table.read() if version is None else table.read(as_of=version)


def _months_predicate(months: Iterable[str]) -> str:
    return "`month` IN (" + ", ".join(sql_literal(m) for m in sorted(months)) + ")"


def _replace_months(
    table: Table,
    content: DataFrame,
    *,
    months: Iterable[str],
    present: Iterable[str],
    run_id: str,
    metadata: Mapping[str, str],
    gate: Gate | None,
) -> tuple[str, ...]:
    """Make the ``months`` partitions of ``table`` hold exactly ``content``'s rows of them.

    ``present`` are the months in which ``content`` has rows; months of ``months`` without
    rows are emptied. Returns the months replaced or emptied.
    """
    from pyspark.sql import functions as F

    wanted = set(months)
    written = sorted(wanted & set(present))
    emptied = sorted(wanted - set(present))
    if written:
        rows = content.where(F.col("month").isin(*written))
        if gate is not None:
            gate(table.name, rows)
        table.overwrite_partitions(rows, run_id=run_id, metadata=metadata)
    if emptied:
        table.delete_where(_months_predicate(emptied), run_id=run_id, metadata=metadata)
    return tuple(sorted(wanted))


def write_correlations(
    table: Table,
    correlations: DataFrame,
    *,
    engine: str,
    run_id: str,
    metadata: Mapping[str, str] | None = None,
    gate: Gate | None = None,
) -> CorrelationWrite:
    """Write an engine's correlations idempotently: merge by ``correlation_id`` (and engine).

    Rows whose content (:data:`workloads.engines.correlation.CONTENT_COLUMNS`) equals the
    stored row of the same id and engine are not written again, so a rerun changes
    nothing and the first ``recorded_at`` / ``run_id`` stay (what was known since when).
    New ids are inserted; ids whose evidence or confidence changed are updated in place.
    Stored rows the engine no longer produces are counted, not touched. Reusable by any
    engine version: ``engine`` is the ``name@version`` of the rows in ``correlations``.
    """
    from pyspark.sql import functions as F

    table.create(if_not_exists=True)
    version = table.current_version()
    stored = _read_pinned(table, version)
    content = list(correlation_v1.CONTENT_COLUMNS)
    new = correlations.withColumn("_new", row_hash_column(correlations, content))
    old = stored.where(F.col("engine") == engine).select(
        F.col("correlation_id").alias("_id"),
        row_hash_column(stored, content).alias("_old"),
        F.col("status").isin(*INACTIVE_STATUSES).alias("_inactive"),
    )
    kind = (
        F.when(F.col("_old").isNull(), F.lit("inserted"))
        .when(F.col("_new").isNull() & F.col("_inactive"), F.lit("inactive"))
        .when(F.col("_new").isNull(), F.lit("not_reproduced"))
        .when(F.col("_old") != F.col("_new"), F.lit("updated"))
        .otherwise(F.lit("unchanged"))
    )
    joined = new.join(old, new["correlation_id"] == old["_id"], "full_outer").withColumn("_kind", kind)
    counts = {str(r["_kind"]): int(r["count"]) for r in joined.groupBy("_kind").count().collect()}
    inserted, updated = counts.get("inserted", 0), counts.get("updated", 0)
    if inserted or updated:
        # Materialized: a MERGE whose source still reads its own target table fails to plan
        # on Iceberg ("No plan for TableReference").
        rows = _materialize(
            joined.where(F.col("_kind").isin("inserted", "updated")).select(*correlations.columns)
        )
        if gate is not None:
            gate(table.name, rows)
        meta = {**(metadata or {}), ENGINE_KEY: engine}
        table.merge(rows, list(CORRELATION_MERGE_KEYS), run_id=run_id, metadata=meta)
        version = table.current_version()
    return CorrelationWrite(
        engine=engine,
        version=version,
        inserted=inserted,
        updated=updated,
        unchanged=counts.get("unchanged", 0),
        not_reproduced=counts.get("not_reproduced", 0),
    )


@dataclass(frozen=True)
class _BaselinePlan:
    """Which baseline months to rewrite, with what, and how much was recomputed."""

    content: DataFrame
    months: frozenset[str]
    entities: int
    rows: int


def _materialize(df: DataFrame) -> DataFrame:
    """Compute ``df`` once and cut its lineage: it is used by several actions.

    A local checkpoint, not ``persist()``: a cached plan that reads a Gold table is
    re-cached by Spark when that table is written, which fails for Iceberg relations
    ("computeStats called before pushdown"), and would re-read a newer version anyway.
    """
    return df.localCheckpoint(eager=True)


def _distinct_months(df: DataFrame) -> set[str]:
    return {str(r["month"]) for r in df.select("month").distinct().collect()}


def _plan_full(new_daily: DataFrame, months: frozenset[str]) -> _BaselinePlan:
    """Every baseline recomputed; ``months`` (all stored or new) rewritten or emptied."""
    from pyspark.sql import functions as F

    stats = new_daily.agg(F.count_distinct("entity_id").alias("entities"), F.count(F.lit(1)).alias("rows"))
    row = stats.collect()[0]
    return _BaselinePlan(
        content=w1.baselines(new_daily),
        months=months,
        entities=int(row["entities"]),
        rows=int(row["rows"]) * len(w1.METRICS) * len(w1.WINDOWS),
    )


def _plan_incremental(
    new_daily: DataFrame,
    stored_daily: DataFrame,
    stored_baselines: DataFrame,
    changed_keys: DataFrame,
) -> _BaselinePlan:
    """Recompute only the affected (entity, day) keys; carry the rest of their months over."""
    from pyspark.sql import functions as F

    key = list(DAILY_KEY)
    all_keys = stored_daily.select(*key).unionByName(new_daily.select(*key))
    affected = _materialize(w1.affected_days(all_keys, changed_keys))
    present = new_daily.select(*key, F.lit(1).alias("_present"))
    stats = (
        affected.join(present, key, "left")
        .agg(
            F.collect_set(F.date_format("day", "yyyy-MM")).alias("months"),
            F.count_distinct("entity_id").alias("entities"),
            F.count("_present").alias("present"),
        )
        .collect()[0]
    )
    months = frozenset(str(m) for m in stats["months"])
    scope = affected.select("entity_id").distinct()
    recomputed = w1.baselines(new_daily.join(scope, "entity_id", "left_semi")).join(
        affected, key, "left_semi"
    )
    kept = (
        stored_baselines.where(F.col("month").isin(*sorted(months)))
        .join(affected, key, "left_anti")
        .select(*recomputed.columns)
    )
    return _BaselinePlan(
        content=kept.unionByName(recomputed),
        months=months,
        entities=int(stats["entities"]),
        rows=int(stats["present"]) * len(w1.METRICS) * len(w1.WINDOWS),
    )


def build_gold(
    registry: TableRegistry,
    *,
    run_id: str,
    recorded_at: datetime,
    full: bool = False,
    gate: Gate | None = None,
) -> GoldReport:
    """Build Gold from the current version of ``silver.events``; see the module docstring.

    ``recorded_at`` is when this run's knowledge counts as recorded (passed in, never
    read from the clock; naive means UTC). ``gate`` is called before every Gold write.
    ``full`` recomputes and rewrites everything (the repair path if a Gold table was
    changed by hand); the default recomputes only what the Silver change reaches.
    """
    from pyspark.sql import functions as F

    silver_table = registry.get(SILVER)
    silver_version = silver_table.current_version() if silver_table.exists() else None
    if silver_version is None:
        raise TableMissingError(
            f"{SILVER} has no committed version to build Gold from; run the Silver build first"
        )
    moment = recorded_at if recorded_at.tzinfo is not None else recorded_at.replace(tzinfo=UTC)
    silver = silver_table.read(as_of=silver_version)
    tables = {name: registry.get(name) for name in GOLD_TABLES}
    for table in tables.values():
        table.create(if_not_exists=True)
    pinned = {name: tables[name].current_version() for name in (ENTITY_DAILY, BASELINES)}
    inputs = {SILVER: silver_version, **{n: v for n, v in pinned.items() if v is not None}}
    stored_daily = _read_pinned(tables[ENTITY_DAILY], pinned[ENTITY_DAILY]).select(*DAILY_COLUMNS)
    stored_baselines = _read_pinned(tables[BASELINES], pinned[BASELINES])
    meta = {INPUTS_KEY: canonical_json({SILVER: silver_version})}

    features = _materialize(daily_features(silver))
    new_daily = only_attributed(features)
    month_rows = (
        features.groupBy("month", F.col("entity_id").isNull().alias("unattributed"))
        .agg(F.count(F.lit(1)).alias("rows"), F.sum("events").alias("events"))
        .collect()
    )
    new_months = {str(r["month"]) for r in month_rows if not r["unattributed"]}
    diff = _materialize(daily_diff(stored_daily, new_daily))
    changes = diff.groupBy("change", "month").count().collect()
    by_change = dict.fromkeys(("added", "changed", "removed"), 0)
    for r in changes:
        by_change[str(r["change"])] += int(r["count"])
    if full:
        daily_months = _distinct_months(stored_daily) | new_months
        plan = _plan_full(new_daily, frozenset(daily_months | _distinct_months(stored_baselines)))
    elif changes:
        plan = _plan_incremental(new_daily, stored_daily, stored_baselines, diff.select(*DAILY_KEY))
        daily_months = {str(r["month"]) for r in changes}
    else:  # Silver changed nothing Gold depends on
        plan = _BaselinePlan(content=stored_baselines, months=frozenset(), entities=0, rows=0)
        daily_months = set()
    # Baselines first: the stored entity_daily is what the next run diffs against.
    months_rewritten = {
        BASELINES: _replace_months(
            tables[BASELINES],
            plan.content,
            months=plan.months,
            present=new_months,
            run_id=run_id,
            metadata={**meta, ENGINE_KEY: w1.ENGINE},
            gate=gate,
        ),
        ENTITY_DAILY: _replace_months(
            tables[ENTITY_DAILY],
            new_daily,
            months=daily_months,
            present=new_months,
            run_id=run_id,
            metadata={**meta, ENGINE_KEY: ENTITY_DAILY_ENGINE},
            gate=gate,
        ),
    }

    written = write_correlations(
        tables[CORRELATIONS],
        correlation_v1.correlate_v1(silver, run_id=run_id, recorded_at=moment),
        engine=correlation_v1.ENGINE,
        run_id=run_id,
        metadata=meta,
        gate=gate,
    )
    outputs = {
        name: tables[name].current_version() if months_rewritten[name] else pinned[name]
        for name in (ENTITY_DAILY, BASELINES)
    }
    outputs[CORRELATIONS] = written.version
    return GoldReport(
        run_id=run_id,
        full=full,
        inputs=inputs,
        outputs=outputs,
        events=sum(int(r["events"]) for r in month_rows),
        unattributed_events=sum(int(r["events"]) for r in month_rows if r["unattributed"]),
        daily_rows=sum(int(r["rows"]) for r in month_rows if not r["unattributed"]),
        daily_added=by_change["added"],
        daily_changed=by_change["changed"],
        daily_removed=by_change["removed"],
        entities_recomputed=plan.entities,
        baseline_rows_recomputed=plan.rows,
        months_rewritten=months_rewritten,
        correlations=written,
    )
