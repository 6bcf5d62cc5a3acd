"""The ledger's storage edge: reading records from ``ops.ledger`` and appending to it safely.

Why not ``Table.append``: two writers that each read the tip (seq ``n``) and then append
seq ``n + 1`` would both succeed, because neither Delta nor Iceberg makes two blind appends
conflict, and the chain would fork. An append therefore commits with the format's own
optimistic concurrency, guarded on the tip it read:

* **Delta**: ``MERGE INTO ledger t USING batch s ON t.seq >= <first seq>
  WHEN NOT MATCHED THEN INSERT *``. The MERGE reads the table with the predicate
  ``seq >= first``; a concurrent writer that committed rows with such a seq after this
  transaction started makes Delta's conflict checker throw ``ConcurrentAppendException``
  (a MERGE is never a blind append, so this holds under the default WriteSerializable
  isolation). If the competitor committed *before* this MERGE started, the ON condition
  matches its rows and nothing is inserted (Delta then writes no commit at all). On a
  warehouse on the local file system the same MERGE runs through the ``deltalake`` package
  (delta-rs, in this process: tens of milliseconds where Spark's MERGE takes a second or
  two in Spark jobs), whose conflict checker refuses the same race (``CommitFailedError``:
  a concurrent transaction added new data); elsewhere (``s3a://``, ``hdfs://``) Spark's.
  Such a ledger is read by delta-rs too (a few hundred milliseconds where Spark's query
  takes about a second in seven jobs); the two reads are tested equal.
* **Iceberg**: an overwrite by the filter ``seq >= <first seq>`` with the write options
  ``validate-from-snapshot-id = <snapshot the tip was read from>`` and
  ``isolation-level = serializable``. Iceberg validates at commit time, against the fresh
  table metadata, that no data file matching the filter was added since that snapshot,
  and throws ``ValidationException`` otherwise. The filter matches no existing row, so the
  overwrite only adds. On a warehouse on the local file system, with the embedded JDBC
  catalog on SQLite, the same guard runs through ``pyiceberg`` in this process (about
  0.08 s where Spark's overwrite takes about 0.45 s): the table is loaded, refused as a lost
  race unless its current snapshot is still the one the tip was read from, and appended;
  pyiceberg's commit asserts that ``main`` still points there (the catalog's compare-and-swap
  of the metadata location, as Spark's JDBC catalog does), so a writer that commits in
  between makes it fail (``CommitFailedException``). Spark's cached entry of the table is
  refreshed after each such commit. Such a ledger is read by pyiceberg too.

Every commit reports whether it wrote: Delta's MERGE returns its metrics (all rows
inserted, or none because a competitor's rows matched), Iceberg's validation is exact.
Only an outcome that cannot be told (an unexpected insert count) is read back (*commit,
then confirm*): our own hashes at those seqs mean success, someone else's a lost race,
anything else a fork (:class:`~lakehouse.errors.LedgerIntegrityError`). A lost race or
a conflict exception is retried from the new tip with a bounded, deterministic backoff;
entries already present (same content address) are not written again, so a commit whose
outcome was unknown is not duplicated. This needs no lock and holds across threads,
processes and machines, as far as the table format's own commit protocol does (Delta on
object stores needs its usual LogStore for mutual exclusion of ``_delta_log`` writes).

Every append is one commit whose metadata holds the run id and the new tip
(:func:`ledger.chain.commit_anchor`), so :func:`ledger.chain.verify_chain` can check the
chain against the table's own history.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import unquote, urlparse

from lakehouse.catalog import SQLITE_JDBC_PREFIX, sqlalchemy_uri, sqlite_path
from lakehouse.config import TableFormat
from lakehouse.errors import (
    ConfigError,
    LedgerConflictError,
    LedgerError,
    LedgerIntegrityError,
    LedgerSchemaError,
)
from lakehouse.tables import DeltaLakeTable, IcebergTable, Table, TableRegistry
from lakehouse.tables.base import (
    commit_metadata,
    first_line,
    metadata_context_json,
    session_settings,
    temp_view,
)
from lakehouse.tables.delta import USER_METADATA_CONF
from ledger.chain import LedgerRecord, Tip, commit_anchor, link
from ledger.clock import Clock
from ledger.entries import LedgerEntryBase

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

LEDGER_TABLE = "ops.ledger"
"""Logical name of the ledger table in ``conf/lakehouse.yaml``."""

DEFAULT_MAX_ATTEMPTS = 12
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CONFLICT_MARKERS = (
    "io.delta.exceptions.Concurrent",
    "DELTA_CONCURRENT",
    "ProtocolChangedException",
    "MetadataChangedException",
    "Found conflicting",
    "CommitFailedException",
    "CommitFailedError",  # delta-rs: a concurrent transaction added new data
    "CommitStateUnknownException",
    "SQLITE_BUSY",
    "database is locked",
)


def ledger_table(registry: TableRegistry) -> Table:
    """The configured ledger table (``ops.ledger``)."""
    return registry.get(LEDGER_TABLE)


# -- format-specific commits ------------------------------------------------------------------


class LedgerStorage(ABC):
    """How one table format reads the ledger's tip and commits a guarded append."""

    format: ClassVar[TableFormat]

    @abstractmethod
    def sql_name(self, table: Table) -> str:
        """The table as a SQL relation name."""

    def refresh(self, table: Table) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Forget cached table state so that other writers' commits are seen."""

    @abstractmethod
    def create_if_missing(self, table: Table, columns_ddl: str) -> None:
        """Create the table with these columns unless it exists; safe when raced by another process."""

    @abstractmethod
    def pin(self, table: Table) -> int | None:
        """The state the tip is read from, if the guard needs it (None: read the latest)."""

    @abstractmethod
    def source(self, table: Table, pin: int | None) -> str:
        """SQL relation of the table at ``pin`` (or latest)."""

    @abstractmethod
    def follows(self, table: Table, version: int, base: int) -> bool:
        """Whether ``version`` was committed directly on top of ``base`` (nothing in between)."""

    @abstractmethod
    def guarded_append(
        self,
        table: Table,
        records: Sequence[LedgerRecord],
        columns: Sequence[str],
        *,
        pin: int | None,
        meta: dict[str, str],
    ) -> bool | None:
        """Append ``records`` (the table's ``columns`` of them) in one commit that fails (or
        inserts nothing) if a row with seq >= the first record's exists.

        Returns True if the rows were committed, False if nothing was written because
        another writer got there first, None if the outcome must be read back.
        """


class DeltaLedgerStorage(LedgerStorage):
    """Delta: a MERGE guarded on ``seq >= first``; Delta's conflict checker does the rest."""

    format = TableFormat.DELTA

    def sql_name(self, table: Table) -> str:
        return f"delta.`{table.location}`"

    def refresh(self, table: Table) -> None:
        # Loading the path brings this process's cached Delta log up to date; existence
        # checks (``DeltaTable.isDeltaTable``) otherwise trust a snapshot that may predate
        # another process creating or writing the table.
        with contextlib.suppress(Exception):  # not a Delta table (yet): nothing to refresh
            table.spark.read.format("delta").load(table.location)

    def create_if_missing(self, table: Table, columns_ddl: str) -> None:
        props = ", ".join(f"'{k}' = '{v}'" for k, v in sorted(table.spec.properties.items()))
        tblprops = f" TBLPROPERTIES ({props})" if props else ""
        table.spark.sql(
            f"CREATE TABLE IF NOT EXISTS {self.sql_name(table)} ({columns_ddl}) USING delta{tblprops}"
        )

    def pin(self, table: Table) -> int | None:
        return None

    def follows(self, table: Table, version: int, base: int) -> bool:
        return version == base + 1  # Delta numbers its commits one by one

    def source(self, table: Table, pin: int | None) -> str:
        name = self.sql_name(table)
        return f"{name} VERSION AS OF {int(pin)}" if pin is not None else name

    def guarded_append(
        self,
        table: Table,
        records: Sequence[LedgerRecord],
        columns: Sequence[str],
        *,
        pin: int | None,
        meta: dict[str, str],
    ) -> bool | None:
        local = _local_delta(table, self)
        if local is not None:
            inserted = _rust_merge(local, records, columns, records[0].seq, meta)
            return _inserted_all(inserted, len(records))
        return self.spark_merge(table, records, columns, meta=meta)

    def spark_merge(
        self, table: Table, records: Sequence[LedgerRecord], columns: Sequence[str], *, meta: dict[str, str]
    ) -> bool | None:
        """The guarded MERGE through Spark (any storage Spark reaches)."""
        first_seq, rows = records[0].seq, len(records)
        view = temp_view(records_frame(table, records, columns), "ledger_batch")
        statement = (
            f"MERGE INTO {self.sql_name(table)} t USING {view} s ON t.seq >= {int(first_seq)} "
            f"WHEN NOT MATCHED THEN INSERT *"
        )
        try:
            with session_settings(table.spark, {USER_METADATA_CONF: metadata_context_json(meta)}):
                metrics = table.spark.sql(statement).collect()  # the command ran; this reads its metrics
        finally:
            table.spark.catalog.dropTempView(view)
        return _inserted_all(metrics[0].asDict().get("num_inserted_rows") if metrics else None, rows)


class IcebergLedgerStorage(LedgerStorage):
    """Iceberg: overwrite by ``seq >= first`` validated from the snapshot the tip was read at."""

    format = TableFormat.ICEBERG

    def sql_name(self, table: Table) -> str:
        assert isinstance(table, IcebergTable)
        return table.sql_name

    def refresh(self, table: Table) -> None:
        # Spark's Iceberg catalog caches loaded tables; other processes' commits would stay
        # invisible here until the cache entry expires.
        with contextlib.suppress(Exception):  # no such table (yet): nothing cached
            table.spark.sql(f"REFRESH TABLE {self.sql_name(table)}")

    def create_if_missing(self, table: Table, columns_ddl: str) -> None:
        assert isinstance(table, IcebergTable)
        props = {"format-version": "2", **table.spec.properties}
        tblprops = ", ".join(f"'{k}' = '{v}'" for k, v in sorted(props.items()))
        table.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `{table.catalog}`.`{table.namespace}`")
        table.spark.sql(
            f"CREATE TABLE IF NOT EXISTS {table.sql_name} ({columns_ddl}) USING iceberg "
            f"TBLPROPERTIES ({tblprops})"
        )

    def pin(self, table: Table) -> int | None:
        return table.current_version()

    def follows(self, table: Table, version: int, base: int) -> bool:
        assert isinstance(table, IcebergTable)
        return table.parent_version(version) == base

    def source(self, table: Table, pin: int | None) -> str:
        name = self.sql_name(table)
        return f"{name} VERSION AS OF {int(pin)}" if pin is not None else name

    def guarded_append(
        self,
        table: Table,
        records: Sequence[LedgerRecord],
        columns: Sequence[str],
        *,
        pin: int | None,
        meta: dict[str, str],
    ) -> bool | None:
        handle = _local_iceberg(table, self)
        if handle is None:
            return self.spark_overwrite(table, records, columns, pin=pin, meta=meta)
        written = _pyiceberg_append(handle, records, columns, pin=pin, meta=meta)
        self.refresh(table)  # Spark's cached entry of the table now sees the commit
        return written

    def spark_overwrite(
        self,
        table: Table,
        records: Sequence[LedgerRecord],
        columns: Sequence[str],
        *,
        pin: int | None,
        meta: dict[str, str],
    ) -> bool:
        """The guarded overwrite through Spark (any catalog and storage)."""
        from pyspark.sql import functions as F

        first_seq = records[0].seq
        writer = (
            records_frame(table, records, columns)
            .writeTo(table.location)
            .option("isolation-level", "serializable")
        )
        if pin is not None:
            writer = writer.option("validate-from-snapshot-id", str(pin))
        for key, value in meta.items():
            writer = writer.option(f"snapshot-property.{key}", value)
        writer.overwrite(F.col("seq") >= F.lit(int(first_seq)))
        return True  # validated at commit: no row with seq >= first_seq was added since the pin


def _inserted_all(inserted: object, rows: int) -> bool | None:
    """A guarded MERGE's outcome from its insert count: all rows (True), none because a
    competitor's rows matched (False: it committed before this MERGE began), or unknown."""
    if inserted == rows:
        return True
    if inserted == 0:
        return False
    return None


def local_path(location: str) -> str | None:
    """The file-system path of a table on the local file system (a plain path or ``file:``
    URI), None for any other storage."""
    parsed = urlparse(location)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    if parsed.scheme == "" and location.startswith("/"):
        return location
    return None


def _arrow_schema(columns: Sequence[str]) -> pa.Schema:
    """The ledger's ``columns`` as Arrow fields, typed as the table's (``records_frame``'s)."""
    import pyarrow as pa

    types: dict[str, tuple[pa.DataType, bool]] = {
        "seq": (pa.int64(), False),
        "entry_id": (pa.string(), False),
        "kind": (pa.string(), False),
        "run_id": (pa.string(), True),
        "recorded_at": (pa.timestamp("us", tz="UTC"), False),
        "body": (pa.string(), False),
        "prev_hash": (pa.string(), False),
        "hash": (pa.string(), False),
        "schema_version": (pa.int32(), False),
        "refs": (pa.list_(pa.field("element", pa.string(), nullable=False)), True),
    }
    return pa.schema([pa.field(c, types[c][0], nullable=types[c][1]) for c in columns])


def _arrow_batch(records: Sequence[LedgerRecord], columns: Sequence[str]) -> pa.Table:
    """``records`` as an Arrow table of the ledger's ``columns`` (what delta-rs and pyiceberg write)."""
    import pyarrow as pa

    rows = [{c: (getattr(r, c) if c != "refs" else _refs_value(r)) for c in columns} for r in records]
    return pa.Table.from_pylist(rows, schema=_arrow_schema(columns))


def _rust_merge(
    location: str,
    records: Sequence[LedgerRecord],
    columns: Sequence[str],
    first_seq: int,
    meta: dict[str, str],
) -> object:
    """The guarded MERGE through delta-rs; returns its insert count."""
    from deltalake import CommitProperties, DeltaTable

    merged = (
        DeltaTable(location)
        .merge(
            source=_arrow_batch(records, columns),
            predicate=f"t.seq >= {int(first_seq)}",
            source_alias="s",
            target_alias="t",
            commit_properties=CommitProperties(custom_metadata={"userMetadata": metadata_context_json(meta)}),
        )
        .when_not_matched_insert_all()
        .execute()
    )
    return merged.get("num_target_rows_inserted")


def _pyiceberg_append(
    handle: Any,
    records: Sequence[LedgerRecord],
    columns: Sequence[str],
    *,
    pin: int | None,
    meta: dict[str, str],
) -> bool:
    """The guarded append through pyiceberg: False (nothing written) if another writer
    committed since ``pin``; the commit itself fails if one does so before it lands."""
    current = handle.current_snapshot()
    if (current.snapshot_id if current is not None else None) != pin:
        return False
    # pyiceberg retries a commit that lost a race on top of the winner's snapshot, without
    # asking the guard again (that forks the chain): this handle's commits are not retried
    # (the table's own properties are left as they are); commit_entries retries from the tip.
    properties = {**handle.metadata.properties, _COMMIT_RETRIES: "0"}
    handle.metadata = handle.metadata.model_copy(update={"properties": properties})
    handle.append(_arrow_batch(records, columns), snapshot_properties=meta)
    return True


SQLITE_JDBC = SQLITE_JDBC_PREFIX
"""The JDBC URI prefix of the embedded catalog."""
_COMMIT_RETRIES = "commit.retry.num-retries"
"""Iceberg's table property for how often a writer retries a commit that lost a race."""

_CATALOGS: dict[tuple[str, str, str, tuple[int, int] | None], Any] = {}
"""pyiceberg catalogs opened by this process, by (name, URI, warehouse, the SQLite file's
identity: :func:`sqlite_file_identity`)."""
_CATALOGS_LOCK = threading.Lock()


def _pyiceberg_catalog(table: Table) -> Any | None:
    """The pyiceberg catalog of an Iceberg ledger this process can commit to without Spark:
    the embedded JDBC catalog on SQLite (read from the session's own catalog settings) with its
    warehouse on the local file system; None otherwise (Spark commits: a team's catalog on
    PostgreSQL, where pyiceberg's appends are not tested yet, REST, Hive, object stores)."""
    if not isinstance(table, IcebergTable):
        return None
    conf = table.spark.conf
    prefix = f"spark.sql.catalog.{table.catalog}"
    kind, uri, warehouse = (conf.get(f"{prefix}.{k}", None) for k in ("type", "uri", "warehouse"))
    if kind != "jdbc" or not uri or not uri.startswith(SQLITE_JDBC):
        return None
    if not warehouse or local_path(warehouse) is None:
        return None
    user, password = (conf.get(f"{prefix}.jdbc.{k}", None) for k in ("user", "password"))
    return sqlite_catalog(table.catalog, uri, warehouse, user=user, password=password)


def sqlite_catalog(
    name: str, jdbc_uri: str, warehouse: str, *, user: str | None = None, password: str | None = None
) -> Any | None:
    """The pyiceberg catalog on the SQLite JDBC catalog ``jdbc_uri``, opened once per process and
    per database file (None where pyiceberg cannot open it: Spark's path). A file put in the
    catalog's place (a lake restored from a copy, as the benchmarks do) is another database:
    SQLite refuses writes through a connection to the file it replaced ("attempt to write a
    readonly database"), so the catalog is opened anew on it and the stale one is closed."""
    where = (name, jdbc_uri, warehouse)
    with _CATALOGS_LOCK:
        key = (*where, sqlite_file_identity(jdbc_uri))
        if key in _CATALOGS:
            return _CATALOGS[key]
        for stale in [k for k in _CATALOGS if k[:3] == where]:
            _dispose(_CATALOGS.pop(stale))
        try:
            address = sqlalchemy_uri(jdbc_uri, user=user, password=password)
            from pyiceberg.catalog.sql import SqlCatalog

            catalog = SqlCatalog(name, uri=address, warehouse=warehouse, schema_version="v1")
        except (ConfigError, ImportError):  # pyiceberg cannot open it here: Spark's path
            catalog = None
        # keyed by the file as it is now: opening the catalog creates a file that was missing
        _CATALOGS[(*where, sqlite_file_identity(jdbc_uri))] = catalog
        return catalog


def sqlite_file_identity(jdbc_uri: str) -> tuple[int, int] | None:
    """The SQLite catalog file's (device, inode); None while it does not exist."""
    path = sqlite_path(jdbc_uri)
    try:
        found = os.stat(path) if path is not None else None
    except OSError:
        return None
    return (found.st_dev, found.st_ino) if found is not None else None


def _dispose(catalog: Any) -> None:
    """Close a pyiceberg SQL catalog's connections (its SQLAlchemy engine), if it has any."""
    engine = getattr(catalog, "engine", None)
    if engine is not None:
        engine.dispose()


def _local_iceberg(table: Table, storage: LedgerStorage) -> Any | None:
    """The pyiceberg table of an Iceberg ledger read and appended in this process, or None."""
    if storage.format is not TableFormat.ICEBERG:
        return None
    catalog = _pyiceberg_catalog(table)
    if catalog is None:
        return None
    assert isinstance(table, IcebergTable)
    return catalog.load_table((table.namespace, table.table_name))


STORAGES: dict[TableFormat, LedgerStorage] = {
    TableFormat.DELTA: DeltaLedgerStorage(),
    TableFormat.ICEBERG: IcebergLedgerStorage(),
}
_TABLE_CLASSES: dict[TableFormat, type[Table]] = {
    TableFormat.DELTA: DeltaLakeTable,
    TableFormat.ICEBERG: IcebergTable,
}


def storage_for(table: Table) -> LedgerStorage:
    """The storage strategy for the table's format."""
    storage = STORAGES.get(table.format)
    if storage is None or not isinstance(table, _TABLE_CLASSES[table.format]):
        raise LedgerError(f"the ledger cannot be stored in a {type(table).__name__}; use delta or iceberg")
    return storage


# -- reading ----------------------------------------------------------------------------------


def table_columns(table: Table) -> list[str]:
    """The ledger table's physical columns, in order."""
    storage = storage_for(table)
    storage.refresh(table)
    return list(table.spark.sql(f"SELECT * FROM {storage.sql_name(table)} LIMIT 0").columns)


def read_records(table: Table, *, as_of: int | None = None) -> list[LedgerRecord]:
    """Every record (at ``as_of``, or the latest), ordered by seq.

    At ``as_of`` the columns are that version's: an Iceberg column added by a migration
    (``refs``) makes no snapshot, so the version read before the migration's first entry
    does not have it yet.
    """
    storage = storage_for(table)
    local = _local_delta(table, storage)
    if local is not None:
        return _rust_records(local, as_of)
    handle = _local_iceberg(table, storage)
    if handle is not None:
        return _pyiceberg_records(handle, as_of)
    return spark_records(table, as_of=as_of)


def spark_records(table: Table, *, as_of: int | None = None) -> list[LedgerRecord]:
    """:func:`read_records` through Spark (any format and storage)."""
    storage = storage_for(table)
    source = storage.source(table, as_of)
    if as_of is None:
        present = table_columns(table)
    else:
        present = list(table.spark.sql(f"SELECT * FROM {source} LIMIT 0").columns)
    select = [
        "seq",
        "entry_id",
        "kind",
        "run_id",
        "unix_micros(recorded_at) AS recorded_us",
        "body",
        "prev_hash",
        "hash",
        "schema_version",
    ]
    if "refs" in present:
        select.append("refs")
    rows = table.spark.sql(f"SELECT {', '.join(select)} FROM {source} ORDER BY seq").collect()
    return [_record(row.asDict()) for row in rows]


def _rust_records(location: str, as_of: int | None) -> list[LedgerRecord]:
    """Every record of a local Delta ledger (at ``as_of``, or the latest), read by delta-rs in
    this process: the same rows as the Spark query, without its Spark jobs."""
    from deltalake import DeltaTable

    handle = DeltaTable(location, version=as_of) if as_of is not None else DeltaTable(location)
    present = {field.name for field in handle.schema().fields}
    return _arrow_records(handle.to_pyarrow_table(columns=_read_columns(present)))


def _pyiceberg_records(handle: Any, as_of: int | None) -> list[LedgerRecord]:
    """Every record of an Iceberg ledger (at snapshot ``as_of``, or the current one), read by
    pyiceberg in this process with that snapshot's columns, as Spark's ``VERSION AS OF`` does."""
    scan = handle.scan(snapshot_id=as_of) if as_of is not None else handle.scan()
    present = {field.name for field in scan.projection().fields}
    return _arrow_records(scan.select(*_read_columns(present)).to_arrow())


def _read_columns(present: set[str]) -> list[str]:
    return [*_READ_COLUMNS, *(("refs",) if "refs" in present else ())]


def _arrow_records(data: pa.Table) -> list[LedgerRecord]:
    """Records from an Arrow table of the ledger's columns, in seq order."""
    import pyarrow as pa

    data = data.sort_by("seq")
    micros = data.column("recorded_at").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    data = data.drop_columns(["recorded_at"]).append_column("recorded_us", micros)
    return [_record(row) for row in data.to_pylist()]


_READ_COLUMNS = (
    "seq",
    "entry_id",
    "kind",
    "run_id",
    "recorded_at",
    "body",
    "prev_hash",
    "hash",
    "schema_version",
)


def _record(row: dict[str, Any]) -> LedgerRecord:
    refs = row.get("refs")
    return LedgerRecord(
        seq=int(row["seq"]),
        entry_id=str(row["entry_id"]),
        kind=str(row["kind"]),
        run_id=row["run_id"],
        recorded_at=_EPOCH + timedelta(microseconds=int(row["recorded_us"])),
        body=str(row["body"]),
        prev_hash=str(row["prev_hash"]),
        hash=str(row["hash"]),
        schema_version=int(row["schema_version"]),
        refs=tuple(refs) if refs is not None else None,
    )


# -- the records of one version, read once per process ---------------------------------------


@dataclass(frozen=True)
class _VersionRecords:
    version: int
    records: tuple[LedgerRecord, ...]


_KEPT: dict[str, _VersionRecords] = {}
"""Per ledger location, the records of the newest version this process has read or written."""
_KEPT_LOCK = threading.Lock()


def current_records(table: Table) -> tuple[LedgerRecord, ...]:
    """Every record of the ledger's current version, in seq order (empty if it does not exist).

    A table version never changes once committed, so the records of the last version this
    process read (or wrote, see :func:`commit_entries`) are kept, and asking again at the
    same version costs one version lookup instead of a scan: a command reads the ledger many
    times between its appends. :meth:`ledger.reader.LedgerReader.verify` reads the table
    afresh instead, so it sees whatever the files hold. Kept by location and version: a
    Delta ledger dropped and created again at the same location by the same process
    would number its versions from 0 again (the toolkit never drops the ledger).
    """
    storage = storage_for(table)
    storage.refresh(table)
    if not table.exists():
        return ()
    version = table.current_version()
    if version is None:
        return tuple(read_records(table))
    return _records_at(table, version)


def _kept(table: Table, version: int) -> tuple[LedgerRecord, ...] | None:
    with _KEPT_LOCK:
        kept = _KEPT.get(table.location)
    return kept.records if kept is not None and kept.version == version else None


def _keep(table: Table, version: int, records: tuple[LedgerRecord, ...]) -> None:
    with _KEPT_LOCK:
        _KEPT[table.location] = _VersionRecords(version, records)


def _records_at(table: Table, version: int) -> tuple[LedgerRecord, ...]:
    kept = _kept(table, version)
    if kept is not None:
        return kept
    records = tuple(read_records(table, as_of=version))
    _keep(table, version, records)
    return records


def last_record(records: Sequence[LedgerRecord]) -> LedgerRecord | None:
    """The tip among ``records``: the highest seq (on a fork, the highest hash among those)."""
    return max(records, key=lambda r: (r.seq, r.hash), default=None)


def _tip_of(records: Sequence[LedgerRecord]) -> Tip | None:
    last = last_record(records)
    return Tip(last.seq, last.hash, last.schema_version) if last is not None else None


@dataclass(frozen=True)
class _Probe:
    tip: Tip | None
    present: frozenset[str]


def _probe(table: Table, storage: LedgerStorage, pin: int | None, entry_ids: Iterable[str]) -> _Probe:
    """One query: the tip, plus which of ``entry_ids`` the ledger already holds."""
    source = storage.source(table, pin)
    condition = "seq = top"
    ids = sorted(set(entry_ids))
    if ids:
        condition += " OR entry_id IN (" + ", ".join(_quote(i) for i in ids) + ")"
    # One scan (a window over the whole table) instead of a scalar max() subquery, which
    # costs Delta several extra Spark jobs per append.
    rows = table.spark.sql(
        f"SELECT seq, hash, entry_id, schema_version FROM ("
        f"SELECT seq, hash, entry_id, schema_version, max(seq) OVER () AS top FROM {source}"
        f") WHERE {condition}"
    ).collect()
    tip_row = max(rows, key=lambda r: (int(r["seq"]), str(r["hash"])), default=None)
    tip = (
        Tip(int(tip_row["seq"]), str(tip_row["hash"]), int(tip_row["schema_version"]))
        if tip_row is not None
        else None
    )
    return _Probe(tip, frozenset(str(r["entry_id"]) for r in rows if str(r["entry_id"]) in ids))


def read_tip(table: Table) -> Tip | None:
    """The last record's seq, hash and schema version; None for a missing or empty ledger."""
    storage = storage_for(table)
    storage.refresh(table)
    if not table.exists():
        return None
    version = table.current_version()
    kept = _kept(table, version) if version is not None else None
    if kept is not None:
        return _tip_of(kept)
    return _probe(table, storage, storage.pin(table), ()).tip


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


# -- writing ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AppendResult:
    """What one append did."""

    records: tuple[LedgerRecord, ...]
    """The records written, in seq order (empty if every entry was already there)."""
    skipped: tuple[str, ...]
    """Entry ids left out because the ledger (or the batch) already held them."""
    attempts: int
    """Commit attempts used: 1 unless other writers won races and this one retried."""


AttemptHook = Callable[[int], None]
"""Called with the attempt number after the tip was read and before the commit (tests)."""


def records_frame(table: Table, records: Sequence[LedgerRecord], columns: Sequence[str]) -> DataFrame:
    """A DataFrame of ``records`` with exactly the table's ``columns``."""
    from pyspark.sql.types import (
        ArrayType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    types = {
        "seq": (LongType(), False),
        "entry_id": (StringType(), False),
        "kind": (StringType(), False),
        "run_id": (StringType(), True),
        "recorded_at": (TimestampType(), False),
        "body": (StringType(), False),
        "prev_hash": (StringType(), False),
        "hash": (StringType(), False),
        "schema_version": (IntegerType(), False),
        "refs": (ArrayType(StringType(), containsNull=False), True),
    }
    unknown = [c for c in columns if c not in types]
    if unknown:
        raise LedgerSchemaError(
            f"{table.name} has columns {unknown} this code does not know; upgrade lakehouse-replay"
        )
    schema = StructType([StructField(c, types[c][0], types[c][1]) for c in columns])
    rows = [tuple(getattr(r, c) if c != "refs" else _refs_value(r) for c in columns) for r in records]
    return table.spark.createDataFrame(rows, schema)


def _refs_value(record: LedgerRecord) -> list[str] | None:
    return list(record.refs) if record.refs is not None else None


def commit_entries(
    table: Table,
    entries: Sequence[LedgerEntryBase],
    *,
    clock: Clock,
    schema_version: int,
    expect_tip_schema: int,
    run_id: str | None = None,
    deduplicate: bool = True,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    on_attempt: AttemptHook | None = None,
) -> AppendResult:
    """Append ``entries`` as records of ``schema_version`` in one guarded commit, retrying conflicts.

    ``expect_tip_schema`` is the schema version the current tip must have (0: empty
    ledger); migrations pass the version before theirs, writers the current one.
    """
    if not entries:
        return AppendResult((), (), 0)
    storage = storage_for(table)
    storage.refresh(table)
    if not table.exists():
        raise LedgerSchemaError(
            f"{table.name} does not exist at {table.location}; "
            f"run ledger.migrate (lakehouse ledger migrate) first"
        )
    ids = [e.entry_id() for e in entries]
    commit_run = run_id if run_id is not None else _single_run(entries)
    for attempt in range(max_attempts):
        storage.refresh(table)
        pin = storage.pin(table)
        base = pin if pin is not None else table.current_version()
        kept = _kept(table, base) if base is not None else None
        if kept is None and base is not None and _reads_in_process(table, storage):
            kept = _records_at(table, base)  # delta-rs/pyiceberg: the whole ledger costs no Spark job
        if kept is not None:
            held = {r.entry_id for r in kept}
            probe = _Probe(_tip_of(kept), frozenset(i for i in ids if deduplicate and i in held))
        else:
            probe = _probe(table, storage, pin, ids if deduplicate else ())
        todo, skipped = _pending(entries, ids, probe.present, deduplicate)
        if not todo:
            return AppendResult((), tuple(skipped), attempt + 1)
        tip_schema = probe.tip.schema_version if probe.tip is not None else 0
        if tip_schema != expect_tip_schema:
            raise _schema_mismatch(table, tip_schema, expect_tip_schema)
        records = link(todo, probe.tip, recorded_at=clock.now(), schema_version=schema_version)
        meta = commit_metadata(commit_run, commit_anchor(records))
        columns = table_columns(table)
        if on_attempt is not None:
            on_attempt(attempt)
        try:
            written = storage.guarded_append(table, records, columns, pin=pin, meta=meta)
        except Exception as exc:
            if not is_conflict(exc):
                raise LedgerError(f"cannot append to {table.name}: {first_line(exc)}") from exc
            written = False
        if written is None:
            written = _confirm(table, storage, records)
        if written:
            if kept is not None and base is not None:
                _keep_after_own_commit(table, storage, base, (*kept, *records))
            return AppendResult(tuple(records), tuple(skipped), attempt + 1)
        _backoff(attempt, ids[0])
    raise LedgerConflictError(
        f"could not append {len(entries)} entries to {table.name} after {max_attempts} attempts: "
        f"other writers kept winning; retry later"
    )


def _local_delta(table: Table, storage: LedgerStorage) -> str | None:
    """The path of a Delta ledger that delta-rs reads and appends in this process (on the local
    file system); None when Spark does."""
    return local_path(table.location) if storage.format is TableFormat.DELTA else None


def _reads_in_process(table: Table, storage: LedgerStorage) -> bool:
    """Whether the ledger is read in this process (delta-rs or pyiceberg), not by Spark."""
    if storage.format is TableFormat.ICEBERG:
        return _pyiceberg_catalog(table) is not None
    return _local_delta(table, storage) is not None


def _keep_after_own_commit(
    table: Table, storage: LedgerStorage, base: int, records: tuple[LedgerRecord, ...]
) -> None:
    """Keep ``records`` as the new version's if that version is this commit right after ``base``
    (no other writer in between); otherwise the next read scans the table."""
    version = table.current_version()
    if version is not None and storage.follows(table, version, base):
        _keep(table, version, records)


def _pending(
    entries: Sequence[LedgerEntryBase], ids: Sequence[str], present: frozenset[str], deduplicate: bool
) -> tuple[list[LedgerEntryBase], list[str]]:
    if not deduplicate:
        return list(entries), []
    seen = set(present)
    todo: list[LedgerEntryBase] = []
    skipped: list[str] = []
    for entry, entry_id in zip(entries, ids, strict=True):
        if entry_id in seen:
            skipped.append(entry_id)
            continue
        seen.add(entry_id)
        todo.append(entry)
    return todo, skipped


def _confirm(table: Table, storage: LedgerStorage, records: Sequence[LedgerRecord]) -> bool:
    """True if the seq range holds exactly our records; False if another writer's; else raise."""
    storage.refresh(table)
    first, last = records[0].seq, records[-1].seq
    rows = table.spark.sql(
        f"SELECT seq, hash FROM {storage.sql_name(table)} WHERE seq BETWEEN {first} AND {last}"
    ).collect()
    found: dict[int, set[str]] = {}
    for row in rows:
        found.setdefault(int(row["seq"]), set()).add(str(row["hash"]))
    ours = {r.seq: r.hash for r in records}
    if all(found.get(seq) == {digest} for seq, digest in ours.items()):
        return True
    if not any(digest in found.get(seq, set()) for seq, digest in ours.items()):
        return False
    raise LedgerIntegrityError(
        f"{table.name} forked at seq {first}..{last}: two writers' entries share those seqs; "
        f"stop writers and run lakehouse ledger verify"
    )


def is_conflict(exc: BaseException) -> bool:
    """Whether an exception is another writer winning a commit race (worth a retry)."""
    text = f"{type(exc).__name__}: {exc}"
    return any(marker in text for marker in _CONFLICT_MARKERS)


def _backoff(attempt: int, salt: str) -> None:
    """Sleep before retrying: exponential, capped, with jitter derived from the batch (no RNG)."""
    spread = int(hashlib.sha256(f"{salt}:{attempt}".encode()).hexdigest()[:4], 16) / 0xFFFF
    time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + spread))


def _single_run(entries: Sequence[LedgerEntryBase]) -> str | None:
    runs = {e.run_id for e in entries if e.run_id is not None}
    return runs.pop() if len(runs) == 1 else None


def _schema_mismatch(table: Table, found: int, expected: int) -> LedgerSchemaError:
    if found == 0:
        return LedgerSchemaError(
            f"{table.name} is empty and not initialised; run ledger.migrate (lakehouse ledger migrate) first"
        )
    if found < expected:
        return LedgerSchemaError(
            f"{table.name} is at ledger schema v{found}, this code writes v{expected}; "
            f"run ledger.migrate (lakehouse ledger migrate) first"
        )
    return LedgerSchemaError(
        f"{table.name} is at ledger schema v{found}, newer than this code (v{expected}); "
        f"upgrade lakehouse-replay"
    )
