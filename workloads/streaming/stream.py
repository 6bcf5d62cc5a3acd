"""``lakehouse stream``: Spark Structured Streaming over Bronze into the provisional view.

What one run does:

1. Opens every written Bronze table as a streaming source (:meth:`Table.read_stream`: appends
   only; an erasure's deletes are skipped) and unions them, each row tagged with its feed.
2. For each micro-batch, in a ``foreachBatch`` sink, applies the **same definitions as the
   batch path** (:func:`correlate_batch`; ``tests/workloads/streaming`` checks they are the
   same function objects, not copies):

   * Silver: :func:`~workloads.silver.adapters.canonicalise` with the feed's adapter,
     :func:`~workloads.silver.lateness.assign_fates` under the lateness policy, then
     :func:`~workloads.silver.routing.silver_rows` and
     :func:`~workloads.silver.routing.quarantine_rows`. A malformed line goes to
     ``ops.quarantine`` as in batch (merged by its Bronze coordinates, so the batch build's
     rewrite of the feed's quarantine and a replayed micro-batch leave it once);
   * entity resolution with the version in force, over the evidence window: the batch's
     events plus the ``silver.events`` rows of the last ``window_days`` before its newest
     event (bounded, and partial: Silver lags the stream);
   * the correlation engine in force (its declared function and parameters) over that
     window, keeping the pairs that involve an entity of the micro-batch.

3. Writes them ``provisional`` (:func:`workloads.gold.provisional.write_provisional`) and then
   records the batch in ``ops.stream_batches``: ``(query, batch_id)`` is the idempotency key.
   A batch already recorded is skipped; a batch that crashed after its write and before its
   record is applied again under the same row keys, so it lands exactly once either way.

Checkpoints live under ``<workdir>/streams/<instance>/`` with the query's identity
(``query-id``, drawn once): deleting that folder starts a new query from Bronze's first
version, under a new identity, so its batch ids never collide with the old ones.
``available_now`` processes what Bronze holds and stops (tests, the demo, a scheduler);
otherwise the query runs until interrupted.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, Final

from lakehouse.errors import InjectedFailure, UsageError
from lakehouse.frames import in_session, materialize, union_all
from workloads.bronze.ingest import bronze_tables, feed_of
from workloads.engines import correlation
from workloads.gold.correlations import Producer
from workloads.gold.provisional import window_start_of, write_provisional
from workloads.silver.adapters import ADAPTERS, canonicalise
from workloads.silver.columns import COORDINATES, SILVER_COLUMNS
from workloads.silver.exceptions import approvals_in_queue
from workloads.silver.lateness import assign_fates
from workloads.silver.routing import quarantine_rows, silver_rows
from workloads.vocabulary import TableName

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.config import LakehouseConfig
    from lakehouse.tables import TableRegistry
    from ledger import Clock
    from workloads.silver.lateness import LatenessRule

__all__ = [
    "StreamBatch",
    "StreamFailPoint",
    "StreamReport",
    "committed_batches",
    "correlate_batch",
    "run_stream",
    "stream_fail_point",
    "stream_home",
]

log = logging.getLogger(__name__)

FEED_COLUMN: Final = "_stream_feed"
QUARANTINE_KEY: Final[tuple[str, ...]] = ("feed", *COORDINATES)
TRIGGER_SECONDS: Final = 10
"""How often a running (not ``available_now``) query looks for new Bronze commits."""


class StreamFailPoint(StrEnum):
    """Where a crash can be injected into a micro-batch (``--fail-at``: tests and drills)."""

    AFTER_SINK_WRITE = "after_sink_write"
    """The batch's provisional rows and quarantine are written; the batch is not recorded as
    committed, and Spark's checkpoint has its offsets but not its commit."""


def stream_fail_point(value: str | None) -> StreamFailPoint | None:
    """Parse a fail point (None for none); one clear line for an unknown name."""
    if value is None:
        return None
    try:
        return StreamFailPoint(value)
    except ValueError:
        known = ", ".join(p.value for p in StreamFailPoint)
        raise UsageError(f"--fail-at: unknown fail point {value!r}; known: {known}") from None


@dataclass(frozen=True)
class StreamBatch:
    """One micro-batch the sink applied."""

    batch_id: int
    run_id: str
    """The row ``run_id`` of its provisional rows (derived from the query and the batch id)."""
    rows_read: int
    quarantined: int
    provisional: int
    superseded: int
    window_start: datetime | None
    window_end: datetime | None


@dataclass(frozen=True)
class StreamReport:
    """What one ``lakehouse stream`` run applied (``--json`` prints its fields)."""

    run_id: str
    query: str
    checkpoint: str
    engine: str
    """The engines in force that decided the provisional rows (their ``engine`` label)."""
    batches: tuple[StreamBatch, ...] = ()
    skipped: tuple[int, ...] = ()
    """Batch ids Spark offered again that ``ops.stream_batches`` already recorded."""
    outputs: Mapping[str, int | None] = field(default_factory=dict)

    @property
    def rows_read(self) -> int:
        return sum(b.rows_read for b in self.batches)

    @property
    def quarantined(self) -> int:
        return sum(b.quarantined for b in self.batches)

    @property
    def provisional(self) -> int:
        return sum(b.provisional for b in self.batches)


def stream_home(config: LakehouseConfig) -> Path:
    """Where a lakehouse's streaming checkpoints live: one folder per instance."""
    return config.workdir_path / "streams" / (config.instance or "default") / "provisional"


def query_identity(home: Path) -> str:
    """The query's identity, drawn once per checkpoint folder and kept beside it."""
    home.mkdir(parents=True, exist_ok=True)
    marker = home / "query-id"
    if not marker.exists():
        marker.write_text(f"provisional-{uuid.uuid4().hex[:12]}\n")
    return marker.read_text().strip()


def committed_batches(registry: TableRegistry, query: str) -> set[int]:
    """The batch ids of ``query`` that ``ops.stream_batches`` records as committed."""
    from pyspark.sql import functions as F

    table = registry.get(TableName.STREAM_BATCHES)
    if not table.exists() or table.current_version() is None:
        return set()
    rows = table.read().where(F.col("query") == query).select("batch_id").collect()
    return {int(r["batch_id"]) for r in rows}


@dataclass(frozen=True)
class _Correlated:
    fated: DataFrame
    produced: DataFrame | None
    window_start: datetime | None
    window_end: datetime | None


def correlate_batch(
    registry: TableRegistry,
    bronze: DataFrame,
    *,
    resolve: Callable[[DataFrame], DataFrame],
    producer: Producer,
    engine_label: str,
    lateness: Mapping[str, LatenessRule],
    window_days: int,
    run_id: str,
    recorded_at: datetime,
) -> _Correlated:
    """One micro-batch of Bronze rows (tagged with :data:`FEED_COLUMN`) through the batch
    path's own definitions; see the module docstring."""
    from pyspark.sql import functions as F

    feeds = sorted(str(r[0]) for r in bronze.select(FEED_COLUMN).distinct().collect())
    unknown = [f for f in feeds if f not in ADAPTERS]
    if unknown:
        raise UsageError(f"Bronze feeds {unknown} have no Silver adapter")
    canonical = [
        canonicalise(bronze.where(F.col(FEED_COLUMN) == f).drop(FEED_COLUMN), ADAPTERS[f]) for f in feeds
    ]
    union = union_all(canonical)
    t0 = time.monotonic()
    fated = materialize(assign_fates(union, lateness, approvals_in_queue(registry)))
    log.debug("stream batch: fates in %.1f s", time.monotonic() - t0)
    events = materialize(silver_rows(fated, resolve))
    log.debug("stream batch: events in %.1f s", time.monotonic() - t0)
    carries = [F.col(c).isNotNull() for c in sorted(set(correlation.ASSETS.values()))]
    newest = events.where(reduce(lambda a, b: a | b, carries)).agg(F.max("event_time")).collect()[0][0]
    if newest is None:
        return _Correlated(fated, None, None, None)
    start = window_start_of(newest, window_days)
    window = events
    silver = registry.get(TableName.SILVER_EVENTS)
    if silver.exists() and silver.current_version() is not None:
        known = silver.read().where(F.col("event_time") >= F.lit(start)).select(*SILVER_COLUMNS)
        window = events.unionByName(known.join(events.select("event_id"), "event_id", "left_anti"))
    resolved = materialize(resolve(window.where(F.col("event_time") >= F.lit(start))).select(*SILVER_COLUMNS))
    log.debug("stream batch: window resolved in %.1f s", time.monotonic() - t0)
    mine = resolved.join(events.select("event_id"), "event_id", "left_semi")
    entities = mine.where(F.col("entity_id").isNotNull()).select("entity_id").distinct()
    produced = producer.correlate(
        resolved, run_id=run_id, recorded_at=recorded_at, **dict(producer.parameters)
    )
    produced = produced.withColumn("engine", F.lit(engine_label))
    touching = produced.join(
        entities.withColumnRenamed("entity_id", "entity_a"), "entity_a", "left_semi"
    ).unionByName(produced.join(entities.withColumnRenamed("entity_id", "entity_b"), "entity_b", "left_semi"))
    return _Correlated(fated, touching.dropDuplicates(["correlation_id"]), start, newest)


def run_stream(
    registry: TableRegistry,
    *,
    home: Path,
    resolve: Callable[[DataFrame], DataFrame],
    producer: Producer,
    engine_label: str,
    lateness: Mapping[str, LatenessRule],
    window_days: int,
    run_id: str,
    clock: Clock,
    available_now: bool = True,
    max_files_per_batch: int | None = None,
    fail_at: StreamFailPoint | None = None,
    progress: Callable[[str], None] | None = None,
) -> StreamReport:
    """Run the streaming query over Bronze; see the module docstring."""
    from pyspark.sql import functions as F

    names = [n for n in bronze_tables(registry) if registry.get(n).exists()]
    names = [n for n in names if registry.get(n).current_version() is not None]
    if not names:
        raise UsageError("no Bronze table has been written yet: ingest a delivery first (lakehouse ingest)")
    query = query_identity(home)
    checkpoint = home / "checkpoint"
    provisional = registry.get(TableName.PROVISIONAL_CORRELATIONS)
    quarantine = registry.get(TableName.QUARANTINE)
    ledger_of_batches = registry.get(TableName.STREAM_BATCHES)
    for table in (provisional, quarantine, ledger_of_batches):
        table.create(if_not_exists=True)
    committed = committed_batches(registry, query)
    applied: list[StreamBatch] = []
    skipped: list[int] = []
    failures: list[BaseException] = []

    def apply(df: DataFrame, batch_id: int) -> None:
        if batch_id in committed:
            log.info("stream %s: batch %d was committed before; skipped", query, batch_id)
            skipped.append(batch_id)
            return
        batch_run = f"stream-{query.removeprefix('provisional-')}-b{batch_id}"
        moment = clock.now()
        bronze = materialize(in_session(df, registry.spark))
        rows_read = bronze.count()
        if progress is not None:
            progress(f"stream batch {batch_id}: {rows_read} Bronze row(s)")
        result = correlate_batch(
            registry,
            bronze,
            resolve=resolve,
            producer=producer,
            engine_label=engine_label,
            lateness=lateness,
            window_days=window_days,
            run_id=batch_run,
            recorded_at=moment,
        )
        bad = materialize(quarantine_rows(result.fated, batch_run))
        quarantined = bad.count()
        if quarantined:
            quarantine.merge(bad, list(QUARANTINE_KEY), run_id=batch_run)
        written = None
        if result.produced is not None and result.window_start is not None and result.window_end is not None:
            written = write_provisional(
                provisional,
                result.produced,
                batch_id=batch_id,
                run_id=batch_run,
                window_start=result.window_start,
                window_end=result.window_end,
                recorded_at=moment,
            )
        if fail_at is StreamFailPoint.AFTER_SINK_WRITE:
            log.warning("injecting failure %s in stream batch %d", fail_at.value, batch_id)
            raise InjectedFailure(
                f"injected failure {fail_at.value} in stream batch {batch_id} ({query}); "
                "rerun the same command to resume from the checkpoint"
            )
        batch = StreamBatch(
            batch_id=batch_id,
            run_id=batch_run,
            rows_read=rows_read,
            quarantined=quarantined,
            provisional=written.provisional if written else 0,
            superseded=written.superseded if written else 0,
            window_start=result.window_start,
            window_end=result.window_end,
        )
        record = [
            (
                query,
                batch_id,
                run_id,
                rows_read,
                quarantined,
                batch.provisional,
                batch.superseded,
                batch.window_start,
                batch.window_end,
                moment,
            )
        ]
        schema = ledger_of_batches.read().schema
        ledger_of_batches.append(registry.spark.createDataFrame(record, schema), run_id=run_id)
        committed.add(batch_id)
        applied.append(batch)
        log.info(
            "stream %s: batch %d applied: %d row(s), %d quarantined, %d provisional",
            query,
            batch_id,
            rows_read,
            quarantined,
            batch.provisional,
        )

    def sink(df: DataFrame, batch_id: int) -> None:
        try:
            apply(df, batch_id)
        except BaseException as exc:
            failures.append(exc)
            raise

    sources = [
        registry.get(n)
        .read_stream(max_files_per_batch=max_files_per_batch)
        .withColumn(FEED_COLUMN, F.lit(feed_of(n)))
        for n in names
    ]
    stream = union_all(sources)
    writer = stream.writeStream.queryName(query.replace("-", "_")).foreachBatch(sink)
    writer = writer.option("checkpointLocation", str(checkpoint))
    writer = (
        writer.trigger(availableNow=True)
        if available_now
        else writer.trigger(processingTime=f"{TRIGGER_SECONDS} seconds")
    )
    log.info("stream %s: reading %s (checkpoint %s)", query, ", ".join(names), checkpoint)
    running = writer.start()
    try:
        running.awaitTermination()
    except KeyboardInterrupt:
        log.warning("stream %s: interrupted; stopping after the current batch", query)
        running.stop()
    except Exception as exc:
        if failures:
            raise failures[0] from exc
        raise
    if failures:
        raise failures[0]
    return StreamReport(
        run_id=run_id,
        query=query,
        checkpoint=str(checkpoint),
        engine=engine_label,
        batches=tuple(applied),
        skipped=tuple(skipped),
        outputs={t.name: t.current_version() for t in (provisional, quarantine, ledger_of_batches)},
    )
