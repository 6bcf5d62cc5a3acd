"""Writing a correlation engine's output to ``gold.correlations``: history is never rewritten.

A forward Gold build recomputes every correlation from Silver and compares the result with
the *current* serving rows (``provisional`` / ``authoritative``; at most one per
``correlation_id``), by id and content (:data:`CONTENT_COLUMNS`: what a correlation asserts,
not which engine label, run or lifecycle state it carries):

* same id, same content: the serving row stays exactly as it is (a rerun writes nothing,
  and the first ``recorded_at`` / ``run_id`` stay: what was known since when);
* a new id: inserted, ``authoritative``, with this run's id and ``recorded_at``;
* same id, different content (new events on the shared assets, say): the serving row is
  kept and becomes ``superseded`` (``superseded_at`` = this build's time, ``superseded_by``
  = its successor, which has the same id, and a ``supersede_reason`` such as
  ``rebuilt: 2 new input events in window``); the rebuilt row is inserted beside it;
* a current row the engine no longer produces becomes ``retracted``, with a reason.

Rows are identified by ``(correlation_id, run_id)`` (:data:`CORRELATION_MERGE_KEYS`, with
the ``valid_month`` partition), so an old version and its successor sit side by side and
``asof`` for a moment before the build still answers with the old row. This is the rule
of the replay flow (:mod:`workloads.replay.candidate`), applied by every forward build.

The rows carry the deciding versions in ``engine`` (:func:`row_engine_label`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from lakehouse.digest import row_hash_column
from lakehouse.errors import UsageError
from lakehouse.frames import materialize
from workloads.engines import correlation as correlation_v1
from workloads.engines import entity_resolution
from workloads.gold.tables import ENGINE_KEY, read_pinned
from workloads.vocabulary import CURRENT_STATUSES, CorrelationStatus

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from lakehouse.quality import Gate
    from lakehouse.tables import Table

__all__ = [
    "CONTENT_COLUMNS",
    "CORRELATION_MERGE_KEYS",
    "CorrelationWrite",
    "Producer",
    "row_engine_label",
    "write_correlations",
]

log = logging.getLogger(__name__)

CORRELATION_MERGE_KEYS: Final[tuple[str, ...]] = ("valid_month", "correlation_id", "run_id")
"""The merge key of ``gold.correlations``: a row version's identity (id and the run that wrote
it), with its partition."""

CONTENT_COLUMNS: Final[tuple[str, ...]] = tuple(c for c in correlation_v1.CONTENT_COLUMNS if c != "engine")
"""What a correlation asserts. A row that says the same under another engine label is not
rewritten (no churn)."""

ENGINE_SEPARATOR: Final = ";"
FIRST_RESOLVER: Final = entity_resolution.engine_label(entity_resolution.VERSION_1)

INSERTED, UNCHANGED, REBUILT, GONE = "inserted", "unchanged", "rebuilt", "gone"


@dataclass(frozen=True)
class Producer:
    """The correlation engine a Gold build runs: ``name@version``, its function and parameters."""

    ref: str
    correlate: Callable[..., DataFrame]
    parameters: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments as declared in ``conf/engines.yaml`` (only those the function takes)."""


V1_PRODUCER: Final = Producer(correlation_v1.ENGINE, correlation_v1.correlate_v1)
"""What Gold ran before engines were chosen by date (tests call the build directly with it)."""


def row_engine_label(producer: str, resolvers: Collection[str]) -> str:
    """The ``engine`` value of rows a forward build writes: the versions that decided them.

    ``correlation@1`` on entities of ``entity_resolution@1`` (as Gold always wrote them);
    ``correlation@1;entity_resolution@2`` on entities of ER v2, the label a replay under
    that change writes, so forward rows and replayed rows name their deciders alike.
    Silver resolved by two versions at once is refused: one build, one resolver.
    """
    found = sorted({r for r in resolvers if r})
    if len(found) > 1:
        raise UsageError(
            f"silver.events mixes entity resolvers {found}; rebuild Silver (lakehouse build silver, "
            f"without --since/--until) so that one version decides every entity"
        )
    return ENGINE_SEPARATOR.join([producer, *(r for r in found if r != FIRST_RESOLVER)])


@dataclass(frozen=True)
class CorrelationWrite:
    """What :func:`write_correlations` did, compared with the current serving rows."""

    engine: str
    version: int | None
    """The table's version after the write (the version read when nothing was written)."""
    inserted: int
    """New correlation ids."""
    superseded: int
    """Serving rows whose content changed: kept as ``superseded``, their successor inserted."""
    retracted: int
    """Serving rows the engine no longer produces: kept as ``retracted``."""
    unchanged: int


def _events(evidence: Column) -> Column:
    """``events_a + events_b`` of a correlation's evidence (canonical JSON)."""
    from pyspark.sql import functions as F

    return F.coalesce(F.get_json_object(evidence, "$.events_a").cast("long"), F.lit(0)) + F.coalesce(
        F.get_json_object(evidence, "$.events_b").cast("long"), F.lit(0)
    )


def _rebuilt_reason(delta: Column, tail: str) -> Column:
    """``rebuilt: N new input events in window`` (or fewer, or none), plus ``tail``."""
    from pyspark.sql import functions as F

    counted = (
        F.when(
            delta > 0,
            F.concat(F.lit("rebuilt: "), delta.cast("string"), F.lit(" new input events in window")),
        )
        .when(
            delta < 0,
            F.concat(F.lit("rebuilt: "), (-delta).cast("string"), F.lit(" fewer input events in window")),
        )
        .otherwise(F.lit("rebuilt: evidence changed, no new input events in window"))
    )
    return F.concat(counted, F.lit(tail))


def write_correlations(
    table: Table,
    correlations: DataFrame,
    *,
    engine: str,
    run_id: str,
    recorded_at: datetime | None = None,
    metadata: Mapping[str, str] | None = None,
    gate: Gate | None = None,
) -> CorrelationWrite:
    """Write a build's correlations without rewriting history (see the module docstring).

    ``correlations`` holds every row the engine produces now (a full recompute), labelled
    ``engine``. ``recorded_at`` is the build's time, stamped as ``superseded_at`` on the rows
    it retires (default: the new rows' ``recorded_at``).
    """
    from pyspark.sql import functions as F

    table.create(if_not_exists=True)
    version = table.current_version()
    stored = read_pinned(table, version)
    content = list(CONTENT_COLUMNS)
    columns = stored.columns
    new = correlations.select(
        *[F.col(c) for c in columns], row_hash_column(correlations, content).alias("_new")
    )
    current = stored.where(F.col("status").isin(*CURRENT_STATUSES))
    old = current.select(
        *[F.col(c).alias(f"_o_{c}") for c in columns], row_hash_column(stored, content).alias("_old")
    )
    kind = (
        F.when(F.col("_old").isNull(), F.lit(INSERTED))
        .when(F.col("_new").isNull(), F.lit(GONE))
        .when(F.col("_old") != F.col("_new"), F.lit(REBUILT))
        .otherwise(F.lit(UNCHANGED))
    )
    joined = materialize(
        new.join(old, new["correlation_id"] == old["_o_correlation_id"], "full_outer").withColumn(
            "_kind", kind
        )
    )
    counts = {str(r["_kind"]): int(r["count"]) for r in joined.groupBy("_kind").count().collect()}
    inserted, rebuilt, gone = (counts.get(k, 0) for k in (INSERTED, REBUILT, GONE))
    if inserted or rebuilt or gone:
        moment = recorded_at if recorded_at is not None else _recorded_at_of(joined)
        at = F.lit(moment).cast("timestamp")
        tail = f" ({engine}, run {run_id})"
        fresh = joined.where(F.col("_kind").isin(INSERTED, REBUILT)).select(*columns)
        retired_status = F.when(F.col("_kind") == REBUILT, F.lit(CorrelationStatus.SUPERSEDED)).otherwise(
            F.lit(CorrelationStatus.RETRACTED)
        )
        reason = F.when(
            F.col("_kind") == REBUILT,
            _rebuilt_reason(_events(F.col("evidence")) - _events(F.col("_o_evidence")), tail),
        ).otherwise(F.lit(f"retracted: no longer produced by {engine} from silver.events (run {run_id})"))
        lifecycle = {
            "status": retired_status,
            "superseded_at": at,
            "superseded_by": F.when(F.col("_kind") == REBUILT, F.col("correlation_id")),
            "supersede_reason": reason,
        }
        retired = joined.where(F.col("_kind").isin(REBUILT, GONE)).select(
            *[lifecycle[c].alias(c) if c in lifecycle else F.col(f"_o_{c}").alias(c) for c in columns]
        )
        # Materialized: a MERGE whose source still reads its own target table fails to plan
        # on Iceberg ("No plan for TableReference").
        rows = materialize(fresh.unionByName(retired))
        if gate is not None:
            gate(table.name, rows)
        meta = {**(metadata or {}), ENGINE_KEY: engine}
        table.merge(rows, list(CORRELATION_MERGE_KEYS), run_id=run_id, metadata=meta)
        version = table.current_version()
    log.info(
        "%s (%s): %d inserted, %d superseded by a rebuilt row, %d retracted, %d unchanged",
        table.name,
        engine,
        inserted,
        rebuilt,
        gone,
        counts.get(UNCHANGED, 0),
    )
    return CorrelationWrite(
        engine=engine,
        version=version,
        inserted=inserted,
        superseded=rebuilt,
        retracted=gone,
        unchanged=counts.get(UNCHANGED, 0),
    )


def _recorded_at_of(joined: DataFrame) -> datetime:
    """The build time carried by the new rows (all rows of one build share it)."""
    from pyspark.sql import functions as F

    value = joined.agg(F.max("recorded_at")).collect()[0][0]
    if value is None:
        raise UsageError(
            "write_correlations: only retractions and no recorded_at given; pass the build's time"
        )
    moment: datetime = value
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
