"""The entity index of the correlation store: what makes a one-entity ``asof`` read a few files.

``gold.correlations`` is laid out for builds and replays (partitioned by ``valid_month``),
so an entity's correlations are spread over most months, and ``entity_a = X or
entity_b = X`` cannot be pruned by min/max statistics on either column: a one-entity
question read nearly every data file. ``gold.correlations_by_entity`` holds every row
version of the store twice, once under each of its entities (``entity_id``), partitioned
by ``entity_bucket`` (CRC-32 of the id modulo :func:`buckets_for`) and sorted by
``(entity_id, recorded_at)``, with small row groups. A lookup for one entity plans one
bucket's files and decodes only the row groups holding that entity, however many
restatements the store has been through.

**Derived, never authoritative.** The index is rebuilt from one version of the store, in
one commit, whenever the store's serving version changes (after a Gold build, a
publication, a rollback: :func:`refresh_entity_index`). Each rebuild is a recorded run
(purpose ``index``) whose pinned input is the store's version and whose output is the
index version, and it is verified before it is recorded: row count, an order-free
checksum of every source column, and every row filed under one of its own entities and
the right bucket. So the ledger says exactly which index version mirrors which store
version (:func:`index_versions`), and ``asof`` uses the index only for a store version
it provably mirrors; otherwise it reads the store itself and says so.

**Why a full rebuild.** A build or a restatement touches entities in every bucket, so an
incremental merge would rewrite nearly every index file anyway, and it would leave them
unsorted across commits. A rebuild from the source is simple, deterministic (same store
version, same index rows) and leaves the best possible layout for reads. Its cost is one
pass over the store per serving change; see docs/benchmarks.md.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from lakehouse.errors import IndexMismatchError
from lakehouse.frames import order_free_checksum
from ledger import LedgerRecord
from ledger.entries import RunFinished, RunStarted
from workloads.runs import new_run_id, recorded_run
from workloads.vocabulary import TableName

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from lakehouse.tables import TableRegistry
    from ledger import Ledger
    from ledger.clock import Clock

log = logging.getLogger(__name__)

SOURCE: Final = TableName.CORRELATIONS
INDEX: Final = TableName.CORRELATIONS_BY_ENTITY
MAX_BUCKETS: Final = 32
"""One bucket of 32 is ~3% of the index's files: under the 5% a one-entity lookup may read."""
INDEX_ROWS_PER_BUCKET: Final = 500_000
"""A bucket is one file: below this many index rows a smaller store gets fewer, larger files."""
COMMAND: Final = f"index {SOURCE}"
PURPOSE: Final = "index"
ENTITY_SIDES: Final = ("entity_a", "entity_b")


def buckets_for(source_rows: int) -> int:
    """How many buckets an index of a store with ``source_rows`` rows gets: about
    :data:`INDEX_ROWS_PER_BUCKET` index rows each, at most :data:`MAX_BUCKETS` (a function of
    the pinned store version alone, so a rebuild is deterministic; recorded per index version)."""
    return max(1, min(MAX_BUCKETS, -(-2 * source_rows // INDEX_ROWS_PER_BUCKET)))


def bucket_of(entity: str, buckets: int) -> int:
    """The bucket of an entity id, as :func:`bucket_column` computes it in Spark."""
    return zlib.crc32(entity.encode("utf-8")) % buckets


def bucket_column(column: str, buckets: int) -> Column:
    """Spark's side of :func:`bucket_of` (CRC-32 of the UTF-8 bytes, modulo ``buckets``)."""
    from pyspark.sql import functions as F

    return F.pmod(F.crc32(F.col(column).cast("binary")), F.lit(buckets)).cast("int")


def project(correlations: DataFrame, buckets: int) -> DataFrame:
    """Every row of the store twice, filed under each of its two entities."""
    from pyspark.sql import functions as F

    sides = [correlations.withColumn("entity_id", F.col(side)) for side in ENTITY_SIDES]
    both = sides[0].unionByName(sides[1])
    return both.withColumn("entity_bucket", bucket_column("entity_id", buckets))


@dataclass(frozen=True)
class IndexVersion:
    """A verified index version and the store version it mirrors, as the ledger records it."""

    source_version: int
    index_version: int
    buckets: int
    run_id: str
    seq: int


def index_versions(records: Iterable[LedgerRecord]) -> tuple[IndexVersion, ...]:
    """Every successful index rebuild, oldest first (pure: ledger records in, facts out)."""
    started: dict[str, RunStarted] = {}
    found: list[IndexVersion] = []
    for record in sorted(records, key=lambda r: r.seq):
        if record.kind not in ("run_started", "run_finished"):
            continue
        entry = record.entry()
        if isinstance(entry, RunStarted) and entry.purpose == PURPOSE and SOURCE in entry.inputs:
            started[entry.run_id] = entry
        elif isinstance(entry, RunFinished) and entry.run_id in started and entry.status == "ok":
            written = entry.outputs.get(INDEX)
            start = started[entry.run_id]
            buckets = start.parameters.get("buckets")
            if written is not None and isinstance(buckets, int):
                found.append(
                    IndexVersion(
                        start.inputs[SOURCE].version, written.version, buckets, entry.run_id, record.seq
                    )
                )
    return tuple(found)


def mirror_of(known: Sequence[IndexVersion], source_version: int) -> IndexVersion | None:
    """The newest index version that mirrors ``source_version`` of the store, if any."""
    return next((v for v in reversed(known) if v.source_version == source_version), None)


@dataclass(frozen=True)
class IndexRefresh:
    """What :func:`refresh_entity_index` did."""

    status: str
    """``rebuilt``, ``current`` (already mirrored the serving version) or ``no_source``."""
    source_version: int | None = None
    index_version: int | None = None
    rows: int = 0
    run_id: str | None = None
    buckets: int | None = None


@dataclass(frozen=True)
class Fingerprint:
    """Rows and an order-free checksum of the store's columns (and, for an index, its misfiled rows)."""

    rows: int
    checksum: int
    misfiled: int = 0


def fingerprint(frame: DataFrame, columns: Sequence[str], buckets: int | None = None) -> Fingerprint:
    """One pass over ``frame``; with ``buckets`` it is an index and misfiled rows are counted:
    filed under neither of its entities, in the wrong bucket, or a pair of one entity."""
    from pyspark.sql import functions as F

    aggregates = [
        F.count(F.lit(1)).alias("n"),
        order_free_checksum(*columns).alias("h"),
    ]
    if buckets is not None:
        wrong = (
            ~F.coalesce(F.col("entity_id").isin(F.col("entity_a"), F.col("entity_b")), F.lit(False))
            | ~F.col("entity_bucket").eqNullSafe(bucket_column("entity_id", buckets))
            | F.col("entity_a").eqNullSafe(F.col("entity_b"))
        )
        aggregates.append(F.count(F.when(wrong, F.lit(1))).alias("m"))
    row = frame.agg(*aggregates).first()
    assert row is not None
    return Fingerprint(int(row["n"]), int(row["h"]), int(row["m"]) if buckets is not None else 0)


def verify_index(source: Fingerprint, columns: Sequence[str], index: DataFrame, buckets: int) -> int:
    """Check that ``index`` is exactly the projection of the store ``source`` fingerprints;
    return its row count. Raises :class:`IndexMismatchError` naming what differs."""
    found = fingerprint(index, columns, buckets)
    if found.rows != 2 * source.rows or found.checksum != 2 * source.checksum:
        raise IndexMismatchError(
            f"{INDEX} does not mirror {SOURCE}: {found.rows} rows for {source.rows} source rows "
            f"(expected {2 * source.rows}), checksums "
            f"{'match' if found.checksum == 2 * source.checksum else 'differ'}; "
            f"it was not recorded, so asof keeps reading {SOURCE} itself"
        )
    if found.misfiled:
        raise IndexMismatchError(
            f"{INDEX}: {found.misfiled} rows are filed under a wrong entity or bucket; "
            f"it was not recorded, so asof keeps reading {SOURCE} itself"
        )
    return found.rows


def refresh_entity_index(
    registry: TableRegistry, ledger: Ledger, clock: Clock, *, buckets: int | None = None
) -> IndexRefresh:
    """Make the index mirror the store's current version (a recorded, verified rebuild), or
    do nothing when it already does. Safe to call after every write; a crash leaves the
    ledger naming the previous mirror, and the next call rebuilds. ``buckets``: by default
    :func:`buckets_for` the store's size; a different count than the mirror's forces a rebuild."""
    source = registry.get(SOURCE)
    version = source.current_version() if source.exists() else None
    if version is None:
        return IndexRefresh("no_source")
    index = registry.get(INDEX)
    latest = mirror_of(index_versions(ledger.reader.records()), version)
    mirrors = latest is not None and index.exists() and index.current_version() == latest.index_version
    if latest is not None and mirrors and buckets in (None, latest.buckets):
        log.debug("%s is current for %s version %s", INDEX, SOURCE, version)
        return IndexRefresh("current", version, latest.index_version, 0, latest.run_id, latest.buckets)
    index.create(if_not_exists=True)
    pinned = source.read(version)
    columns = pinned.columns
    expected = fingerprint(pinned, columns)
    buckets = buckets or buckets_for(expected.rows)
    run_id = new_run_id("index", clock.now(), salt=version)
    with recorded_run(
        ledger,
        run_id=run_id,
        command=COMMAND,
        purpose=PURPOSE,
        inputs={SOURCE: version},
        parameters={"buckets": buckets},
    ) as run:
        index.replace(
            project(pinned, buckets), run_id=run_id, metadata={"lakehouse.index-of": f"{SOURCE}@{version}"}
        )
        written = index.current_version()
        assert written is not None
        rows = verify_index(expected, columns, index.read(written), buckets)
        run.outputs[INDEX] = written
        run.counts["rows"] = rows
    log.info("%s rebuilt from %s version %s: %d rows in %d bucket(s)", INDEX, SOURCE, version, rows, buckets)
    return IndexRefresh("rebuilt", version, written, rows, run_id, buckets)


__all__ = [
    "INDEX",
    "INDEX_ROWS_PER_BUCKET",
    "MAX_BUCKETS",
    "SOURCE",
    "Fingerprint",
    "IndexRefresh",
    "IndexVersion",
    "bucket_column",
    "bucket_of",
    "buckets_for",
    "fingerprint",
    "index_versions",
    "mirror_of",
    "project",
    "refresh_entity_index",
    "verify_index",
]
