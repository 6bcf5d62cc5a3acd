"""One table interface over Delta Lake and Apache Iceberg.

A :class:`Table` is a configured table bound to a SparkSession. Every operation the
toolkit performs on stored data goes through it, so that the two formats behave the same
where it matters (versions, as-of reads, run ids in commit metadata, candidates, atomic
publication, rollback) and differ only where the formats really differ, which is stated
once, as :class:`Capabilities` on each implementation.
"""

from __future__ import annotations

import json
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from lakehouse.config import TableFormat, Zone
from lakehouse.errors import UsageError, VersionNotFoundError, ZonePolicyError
from lakehouse.frames import union_all

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

VersionRef = int | str | datetime
"""A way to name a state of a table: a version / snapshot id, an ISO-8601 timestamp string
(or a string of digits, read as a version), or a datetime (naive means UTC)."""

RUN_ID_KEY = "lakehouse.run-id"
"""Key under which the run id is written into each commit's metadata."""

CANDIDATE_PREFIX = "cand_"

# Session-level commit metadata (used by SQL statements) is process-global; writers that
# rely on it take this lock so that two threads never label each other's commits.
COMMIT_METADATA_LOCK = threading.RLock()


@dataclass(frozen=True)
class TableSpec:
    """What a table is: its logical name, zone, format, schema and layout."""

    name: str
    zone: Zone
    format: TableFormat
    schema_ddl: str
    partition_by: tuple[str, ...] = ()
    sort_by: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    history_days: int | None = None
    """Days of history the format's default maintenance keeps, set at creation (None: the
    format's own default)."""
    personal_columns: tuple[str, ...] = ()
    """Columns of personal data, kept out of the table's metadata (see :meth:`Table.creation_properties`)."""
    owner: str | None = None
    """Who answers for the table's layout (compaction); None: the maintenance policy's owner."""
    target_file_bytes: int | None = None
    """The data file size compaction writes; None: the maintenance policy's."""

    def schema(self) -> StructType:
        """The schema as a Spark type (parsing the DDL needs a running session)."""
        from pyspark.sql.types import StructType

        schema = StructType.fromDDL(self.schema_ddl)
        assert isinstance(schema, StructType)
        return schema

    @property
    def namespace(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def short_name(self) -> str:
        return self.name.split(".", 1)[1]


@dataclass(frozen=True)
class Capabilities:
    """How a format really differs; callers branch on these, never on the format name."""

    candidate_kind: str
    """``branch`` (the candidate lives inside the table) or ``shadow_table`` (beside it)."""
    table_write_order: bool
    """The table itself declares a sort order that every writer applies."""
    rollback_creates_commit: bool
    """A rollback is a new commit (new version) rather than a move of the current pointer."""
    version_kind: str
    """``version`` (a dense counter from 0) or ``snapshot_id`` (an opaque 64-bit id)."""
    property_change_is_a_version: bool
    """Changing a table property commits a new version (Delta) rather than metadata only."""
    version_tags: bool
    """A version can be tagged so that the format's own expiry keeps it (Iceberg tags); without
    them, only the table's retention properties keep old versions (Delta)."""


@dataclass(frozen=True)
class Commit:
    """One entry of a table's history: a state that was current from ``timestamp`` on."""

    version: int
    timestamp: datetime
    operation: str
    run_id: str | None
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TableSize:
    """How much a table version holds (from metadata)."""

    files: int
    bytes: int
    rows: int


@dataclass(frozen=True)
class VersionTag:
    """A named reference to one version that the format's own expiry keeps while it lasts."""

    name: str
    version: int
    retain_days: float | None
    """How long after the version's commit the tag lasts (None: until it is dropped)."""


@dataclass(frozen=True)
class Candidate:
    """Output staged beside serving, invisible to readers until published."""

    table: str
    name: str
    location: str
    base_version: int | None


def commit_metadata(run_id: str | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The key/value pairs written into a commit: the run id plus anything the caller adds."""
    meta = dict(extra or {})
    if run_id is not None:
        meta[RUN_ID_KEY] = run_id
    return meta


def utc_moment(moment: datetime) -> datetime:
    """An aware datetime; a naive one is taken as UTC (the lakehouse's clock), never local time."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def describe_versions(versions: Mapping[str, int | None]) -> str:
    """``name@version, ...`` sorted by name, for logs and messages (unwritten tables show ``@-``)."""
    return ", ".join(
        f"{name}@{'-' if version is None else version}" for name, version in sorted(versions.items())
    )


def parse_version_ref(ref: VersionRef) -> int | datetime:
    """Normalise every way of naming a table state to a version number or an aware datetime."""
    if isinstance(ref, bool):
        raise UsageError(f"a version must be an integer, a timestamp or a datetime, not {ref!r}")
    if isinstance(ref, int):
        return ref
    if isinstance(ref, datetime):
        return utc_moment(ref)
    if isinstance(ref, str):
        text = ref.strip()
        if re.fullmatch(r"-?\d+", text):
            return int(text)
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(
                f"{ref!r} is neither a version number nor an ISO-8601 timestamp "
                f"(for example 2026-01-31T12:00:00+00:00)"
            ) from None
        return utc_moment(parsed)
    raise UsageError(f"a version must be an integer, a timestamp or a datetime, not {ref!r}")


def sql_literal(value: Any) -> str:
    """Render a partition value as a SQL literal, safely quoted."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, datetime):
        return f"TIMESTAMP '{value.isoformat()}'"
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    text = str(value).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{text}'"


def partition_predicate(columns: Sequence[str], values: Sequence[Mapping[str, Any]]) -> str:
    """A SQL predicate that selects exactly the given partitions."""
    clauses = []
    for row in values:
        parts = []
        for col in columns:
            value = row[col]
            parts.append(f"`{col}` IS NULL" if value is None else f"`{col}` = {sql_literal(value)}")
        clauses.append("(" + " AND ".join(parts) + ")")
    return " OR ".join(clauses) if clauses else "FALSE"


def merge_clauses(update: Mapping[str, str] | None, delete_when: str | None = None) -> str:
    """The WHEN MATCHED clauses of an erasure's MERGE (:meth:`Table.erase_matching`): delete the
    matched rows; or update them (``update``: column -> SQL); or delete those meeting
    ``delete_when`` and update the others."""
    if not update:
        return "WHEN MATCHED THEN DELETE"
    action = "WHEN MATCHED THEN UPDATE SET " + ", ".join(f"t.`{c}` = {expr}" for c, expr in update.items())
    return f"WHEN MATCHED AND ({delete_when}) THEN DELETE {action}" if delete_when else action


def _files_matching(frames: Mapping[int, DataFrame], keys: DataFrame, on: str) -> dict[int, dict[str, int]]:
    """Per tagged frame, its data files holding rows that match ``keys`` on ``on``, with their
    row counts, in one Spark job (:func:`_matching_files`)."""
    (found,) = _matching_files([({str(key): df for key, df in frames.items()}, on)], keys)
    return {int(tag): files for tag, files in found.items()}


def _matching_files(
    groups: Sequence[tuple[Mapping[str, DataFrame], str]], keys: DataFrame
) -> list[dict[str, dict[str, int]]]:
    """Per group (frames by tag, and the condition they match ``keys`` on), per tag, the data
    files holding matching rows with their row counts (``{}``: none): every group's counts
    (:func:`_matching_counts`) united and collected in one Spark job."""
    from pyspark.sql import functions as F

    group = "__lakehouse_group"
    plans = [
        _matching_counts(frames, keys, on).withColumn(group, F.lit(index))
        for index, (frames, on) in enumerate(groups)
        if frames
    ]
    found: list[dict[str, dict[str, int]]] = [{tag: {} for tag in frames} for frames, _ in groups]
    for tag, file, count, index in union_all(plans).collect() if plans else ():
        found[int(index)][str(tag)][file_path(str(file))] = int(count)
    return found


def _matching_counts(frames: Mapping[str, DataFrame], keys: DataFrame, on: str) -> DataFrame:
    """The plan of ``(tag, file, count)``: the frames tagged, united by name (a column one of
    them lacks is null there), joined with ``keys`` once and counted per tag and file."""
    from pyspark.sql import functions as F

    tag, file = "__lakehouse_tag", "__lakehouse_file"
    tagged = [
        df.select(F.lit(key).alias(tag), F.input_file_name().alias(file), "*") for key, df in frames.items()
    ]
    located = tagged[0]
    for frame in tagged[1:]:
        located = located.unionByName(frame, allowMissingColumns=True)
    matched = located.alias("t").join(F.broadcast(keys.alias("s")), F.expr(on), "left_semi")
    return matched.groupBy(tag, file).count().select(tag, file, "count")


def file_path(location: str) -> str:
    """One spelling of a data file's location: a local path for ``file:`` URIs (Spark writes
    ``file:/x`` and ``file:///x`` for the same file), the URI itself otherwise."""
    from urllib.parse import unquote, urlparse

    parsed = urlparse(location)
    return unquote(parsed.path) if parsed.scheme in ("", "file") else location


def candidate_ref(name: str) -> str:
    """The branch / shadow suffix for a candidate name; only safe characters survive."""
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not cleaned or cleaned != name:
        raise UsageError(f"candidate name {name!r} may only hold letters, digits and '_'")
    return CANDIDATE_PREFIX + cleaned


class Table(ABC):
    """A configured table, bound to a session. Subclasses implement one format each."""

    format: ClassVar[TableFormat]
    capabilities: ClassVar[Capabilities]

    def __init__(self, spark: SparkSession, spec: TableSpec, location: str) -> None:
        self.spark = spark
        self.spec = spec
        self.location = location

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.name!r} at {self.location!r})"

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    @abstractmethod
    def sql_name(self) -> str:
        """How Spark SQL statements address the table (``delta.`path``` or ``catalog.zone.name``)."""

    # -- lifecycle ----------------------------------------------------------------------

    @abstractmethod
    def exists(self) -> bool:
        """Whether the table has been created."""

    @abstractmethod
    def create(self, *, if_not_exists: bool = False) -> None:
        """Create the table with its schema, partitioning, sort order and properties.

        A failure leaves nothing behind.
        """

    @abstractmethod
    def drop(self) -> None:
        """Remove the table and its data (tests and demos; never used on serving data)."""

    # -- writes -------------------------------------------------------------------------

    @abstractmethod
    def _append(self, df: DataFrame, meta: Mapping[str, str], candidate: Candidate | None) -> None: ...

    @abstractmethod
    def _overwrite_partitions(
        self, df: DataFrame, meta: Mapping[str, str], candidate: Candidate | None
    ) -> None: ...

    @abstractmethod
    def _replace(self, df: DataFrame, meta: Mapping[str, str]) -> None: ...

    @abstractmethod
    def _merge(
        self,
        df: DataFrame,
        keys: Sequence[str],
        meta: Mapping[str, str],
        candidate: Candidate | None,
    ) -> None: ...

    @abstractmethod
    def _delete_where(self, condition: str, meta: Mapping[str, str], candidate: Candidate | None) -> None: ...

    def append(
        self,
        df: DataFrame,
        *,
        run_id: str | None = None,
        metadata: Mapping[str, str] | None = None,
        candidate: Candidate | None = None,
    ) -> None:
        """Add rows. The only write Bronze accepts."""
        self._append(self._prepare(df), commit_metadata(run_id, metadata), candidate)

    def overwrite_partitions(
        self,
        df: DataFrame,
        *,
        run_id: str | None = None,
        metadata: Mapping[str, str] | None = None,
        candidate: Candidate | None = None,
    ) -> None:
        """Replace exactly the partitions present in ``df`` (the whole table if unpartitioned)."""
        self._refuse_in_bronze("overwrite")
        self._overwrite_partitions(self._prepare(df), commit_metadata(run_id, metadata), candidate)

    def replace(
        self,
        df: DataFrame,
        *,
        run_id: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        """Replace the whole table's content with ``df`` in one commit (partitions absent from
        ``df`` are emptied). For derived tables rebuilt from their source, such as projections."""
        self._refuse_in_bronze("replace")
        self._replace(self._prepare(df), commit_metadata(run_id, metadata))

    def merge(
        self,
        df: DataFrame,
        keys: Sequence[str],
        *,
        run_id: str | None = None,
        metadata: Mapping[str, str] | None = None,
        candidate: Candidate | None = None,
    ) -> None:
        """Upsert by key: matching rows are replaced by ``df``'s, new keys are inserted."""
        self._refuse_in_bronze("merge")
        if not keys:
            raise UsageError(f"merge into {self.name} needs at least one key column")
        missing = [k for k in keys if k not in df.columns]
        if missing:
            raise UsageError(f"merge into {self.name}: key columns {missing} are not in the data")
        self._merge(self._prepare(df), keys, commit_metadata(run_id, metadata), candidate)

    def delete_where(
        self,
        condition: str,
        *,
        run_id: str | None = None,
        metadata: Mapping[str, str] | None = None,
        candidate: Candidate | None = None,
    ) -> None:
        """Delete the rows matching a SQL condition (refused in Bronze: use :meth:`erase`)."""
        self._refuse_in_bronze("delete")
        self._delete_where(condition, commit_metadata(run_id, metadata), candidate)

    def erase(self, condition: str, *, run_id: str, reason: str) -> None:
        """The one way to delete from any zone, Bronze included: compliance erasure.

        The reason is written into the commit so the table's own history shows why.
        """
        if not reason.strip():
            raise UsageError(f"erasure from {self.name} needs a reason")
        meta = commit_metadata(run_id, {"lakehouse.erasure-reason": reason})
        self._delete_where(condition, meta, None)

    def erase_matching(
        self,
        keys: DataFrame,
        on: str,
        *,
        run_id: str,
        reason: str,
        candidate: Candidate | None = None,
        redact: Mapping[str, str] | None = None,
        delete_when: str | None = None,
    ) -> None:
        """Compliance erasure of the rows that match a row of ``keys`` (any zone, Bronze included).

        ``on`` is a SQL condition over the table's row ``t`` and a key row ``s``. It is one
        ``MERGE ... WHEN MATCHED THEN DELETE`` against the keys, so the erased values are data
        the statement joins with, never text a format writes into its history (a Delta
        ``DELETE``'s predicate is). With ``redact`` (column -> SQL over ``t`` and ``s``) the
        matched rows are updated instead (``WHEN MATCHED THEN UPDATE SET``); with
        ``delete_when`` too, the matched rows that also meet it are deleted and the others
        updated, in the same MERGE (one commit). Copy-on-write on both formats: each file
        holding a matched row is rewritten; the old file stays until :meth:`purge` removes it.
        """
        if not reason.strip():
            raise UsageError(f"erasure from {self.name} needs a reason")
        unknown = sorted(set(redact or {}) - set(self.spec.schema().fieldNames()))
        if unknown:
            raise UsageError(f"cannot redact {unknown} in {self.name}: no such column")
        view = temp_view(keys, "erase_keys")
        try:
            self._erase_matching(
                f"USING {view} s ON ({on}) {merge_clauses(redact, delete_when)}",
                commit_metadata(run_id, {"lakehouse.erasure-reason": reason}),
                candidate,
            )
        finally:
            self.spark.catalog.dropTempView(view)

    @abstractmethod
    def _erase_matching(self, merge: str, meta: Mapping[str, str], candidate: Candidate | None) -> None:
        """Run ``MERGE INTO <target> t <merge>`` with ``meta`` in the commit."""

    def files_matching(
        self, keys: DataFrame, on: str, *, version: int | None = None, candidate: Candidate | None = None
    ) -> dict[str, int]:
        """The data files of a version (current if None) or of a candidate that hold rows
        matching ``keys`` on ``on`` (as in :meth:`erase_matching`), with their row counts."""
        df = self.read_candidate(candidate) if candidate is not None else self.read(version)
        return _files_matching({0: df}, keys, on)[0]

    def files_matching_versions(
        self, keys: DataFrame, on: str, versions: Sequence[int]
    ) -> dict[int, dict[str, int]]:
        """:meth:`files_matching` for each of ``versions``, in one Spark job: every version's
        rows are read in one plan (the format's own time-travel reads, each tagged with its
        version), joined with ``keys`` once and counted per version and file. A version with
        no matching file maps to ``{}``. An erasure searches every retained version of every
        table, so this is one job per table where it was one per version."""
        return _files_matching({int(version): self.read(version) for version in versions}, keys, on)

    def storage_locations(self) -> list[str]:
        """Every folder that holds this table's files: data, log or metadata, and open candidates'."""
        return [self.location]

    @abstractmethod
    def retained_versions(self) -> list[int]:
        """Every version whose files may still be on disk and readable (what an erasure must
        search): Delta's logged versions that are still readable, Iceberg's snapshots in the
        metadata (every branch's and tag's included)."""

    @abstractmethod
    def purge(self, versions: Sequence[int], files: Sequence[str], *, note: str) -> list[str]:
        """After :meth:`erase_matching`: make ``files`` (which held erased rows; no longer in
        the current version or any candidate) physically gone, and with them ``versions``
        (every retained version that references one). Returns what was done, one line each.
        ``note`` (e.g. the erasure certificate) is what :meth:`removal_note` says of them where
        the format keeps a record.

        Delta deletes exactly those files (what ``VACUUM`` would delete for them, leaving every
        other removed file, so versions that never held the subject stay readable); Iceberg
        drops the tags on those snapshots and expires exactly them (Iceberg's ``ExpireSnapshots`` with
        their ids), which deletes the files no remaining snapshot references, then removes the
        files older than a day that no snapshot ever referenced (``remove_orphan_files``: a
        crashed writer's, which may hold the subject's rows too).
        """

    def _refuse_in_bronze(self, operation: str) -> None:
        if self.spec.zone is Zone.BRONZE:
            raise ZonePolicyError(
                f"{self.name} is a Bronze table and append-only: {operation} is refused; "
                f"only a compliance erasure (Table.erase / lakehouse erase) may delete from Bronze"
            )

    def _prepare(self, df: DataFrame) -> DataFrame:
        """Align columns to the table's order so writes never depend on the caller's order."""
        table_columns = self.read().columns if self.exists() else df.columns
        missing = [c for c in table_columns if c not in df.columns]
        extra = [c for c in df.columns if c not in table_columns]
        if missing or extra:
            raise UsageError(
                f"data for {self.name} does not match its schema: "
                f"missing columns {missing}, unexpected columns {extra}"
            )
        return df.select(*table_columns)

    # -- reads and history --------------------------------------------------------------

    @abstractmethod
    def read(self, as_of: VersionRef | None = None) -> DataFrame:
        """The table's content now, or as it was at a version or timestamp."""

    @abstractmethod
    def read_stream(self, *, max_files_per_batch: int | None = None) -> DataFrame:
        """A streaming read (Spark Structured Streaming) of the rows the table's commits append,
        from its first version on; commits that only delete or rewrite rows (an erasure,
        a compaction) are skipped, not replayed. ``max_files_per_batch`` caps the data files
        one micro-batch takes (None: the format's default). Where a query resumes is its
        checkpoint's business, not the table's.
        """

    @abstractmethod
    def history(self) -> list[Commit]:
        """Every state the table's serving view has had, oldest first."""

    @abstractmethod
    def current_version(self) -> int | None:
        """The version readers see now; None for a table that was never written."""

    def resolve_version(self, ref: VersionRef) -> int:
        """The version named by ``ref``: checked to exist, or the one current at a timestamp."""
        parsed = parse_version_ref(ref)
        if isinstance(parsed, int) and self._has_version(parsed):
            return parsed
        commits = self.history()
        if isinstance(parsed, int):
            raise VersionNotFoundError(
                f"{self.name} has no version {parsed}; "
                f"known versions: {_sample([c.version for c in commits])}"
            )
        earlier = [c for c in commits if c.timestamp <= parsed]
        if not earlier:
            first = commits[0].timestamp.isoformat() if commits else "never written"
            raise VersionNotFoundError(
                f"{self.name} did not exist yet at {parsed.isoformat()} (first commit: {first})"
            )
        return earlier[-1].version

    def _has_version(self, version: int) -> bool:
        """Whether ``version`` names a state of the table (formats answer this cheaply)."""
        return any(c.version == version for c in self.history())

    @abstractmethod
    def data_files_at(self, version: int) -> set[str]:
        """The data files a version reads (:func:`file_path` spelling)."""

    def version_at(self, moment: datetime) -> int | None:
        """The version that was current at ``moment`` (None: the table had no version yet)."""
        earlier = [c for c in self.history() if c.timestamp <= utc_moment(moment)]
        return earlier[-1].version if earlier else None

    def changed_keys(self, after: int | None, until: int, columns: Sequence[str]) -> DataFrame:
        """``columns`` of every row in a data file that a commit after version ``after`` (None:
        from the first) up to ``until`` added or removed: a superset of the keys those commits
        changed, from the commit history alone (the two versions' file lists; the files
        themselves, read directly, so no change-data property has to be set on the table).

        A file that a copy-on-write rewrite replaced contributes every row it held, changed or
        not: the set may be larger than the change, never smaller. ``columns`` must be stored
        in the data files, so a partition column is refused (Delta keeps it in the log only).
        """
        from pyspark.sql import functions as F

        partitioned = [c for c in columns if c in self.spec.partition_by]
        if partitioned:
            raise UsageError(
                f"{self.name}: {', '.join(partitioned)} is a partition column; changed keys are "
                f"read from the data files, which do not hold it"
            )
        before = self.data_files_at(after) if after is not None else set()
        touched = sorted(before ^ self.data_files_at(until))
        if not touched:
            return self.read(until).select(*columns).where(F.lit(False))
        return self.spark.read.parquet(*touched).select(*columns).distinct()

    @abstractmethod
    def readable(self, version: int) -> bool:
        """Whether ``version`` can still be read: its metadata and every data file it needs exist."""

    @abstractmethod
    def removal_note(self, version: int) -> str:
        """What the table's own history says removed ``version`` (for messages; best effort)."""

    # -- candidates ---------------------------------------------------------------------

    @abstractmethod
    def stage_candidate(self, name: str) -> Candidate:
        """Start a candidate from the current serving state; readers keep seeing serving."""

    @abstractmethod
    def read_candidate(self, candidate: Candidate) -> DataFrame:
        """The candidate's full content: serving as it was when staged plus its writes."""

    @abstractmethod
    def publish(self, candidate: Candidate, *, run_id: str | None = None) -> int:
        """Make the candidate what readers see, in one atomic step; returns the new version.

        Refused if serving moved since the candidate was staged: publishing would then
        silently discard the newer serving writes.
        """

    @abstractmethod
    def drop_candidate(self, candidate: Candidate) -> None:
        """Discard a candidate; serving is untouched."""

    @abstractmethod
    def list_candidates(self) -> list[str]:
        """Names of candidates staged and not yet published or dropped."""

    @abstractmethod
    def open_candidate(self, name: str, base_version: int | None) -> Candidate:
        """A handle on a staged candidate found by name (e.g. by another process after a crash).

        ``base_version`` is the serving version it was staged from, as the caller recorded it.
        Raises :class:`CandidateError` if no such candidate is staged.
        """

    @abstractmethod
    def size_at(
        self,
        version: int,
        *,
        partition: str | None = None,
        first: str | None = None,
        last: str | None = None,
        count_rows: bool = True,
    ) -> TableSize:
        """Data files, bytes and rows of ``version`` with ``first <= partition <= last``.

        Answered from metadata (file lists, sizes and statistics), not by reading data, so a
        dry run can estimate cost cheaply. Files without a value for ``partition`` count;
        rows are 0 unless ``count_rows``.
        """

    # -- recovery and housekeeping ------------------------------------------------------

    def rollback(self, to: VersionRef, *, run_id: str | None = None) -> int:
        """Make readers see the content of an earlier version again; returns the new version."""
        self._refuse_in_bronze("rollback")
        return self._rollback(self.resolve_version(to), commit_metadata(run_id))

    @abstractmethod
    def _rollback(self, version: int, meta: Mapping[str, str]) -> int: ...

    @abstractmethod
    def expire(self, older_than: datetime, *, retain_last: int = 1) -> None:
        """Forget states older than ``older_than`` (and their unreferenced files)."""

    @abstractmethod
    def compact(self, target_file_bytes: int, *, run_id: str | None = None) -> int | None:
        """Rewrite the current version's data files smaller than 3/4 of ``target_file_bytes``
        into files of about that size; the rows do not change. Returns the new version, or None
        when the format found nothing to rewrite.

        Iceberg ``rewrite_data_files`` (``target-file-size-bytes``; files under 3/4 of it are
        its own default for small, and ``min-input-files = 2``: its default of 5 leaves a small
        table as it is); Delta ``OPTIMIZE`` (bins of files per partition, with
        ``optimize.maxFileSize`` and ``minFileSize`` set the same way). The old files stay on
        disk, readable by the versions that list them, until :meth:`expire`.
        """

    @abstractmethod
    def data_file_sizes(self) -> list[int]:
        """The size in bytes of each data file of the current version (none before a write)."""

    def stored_size(self) -> TableSize:
        """The data files the table keeps in storage under :meth:`storage_locations`, for every
        retained version and open candidate (rows are not counted): what :meth:`expire` frees,
        where the current version's size does not move. The formats' logs and metadata are left
        out: they are small, and an expiry itself adds to them (Delta logs each ``VACUUM``)."""
        files = size = 0
        for location in self.storage_locations():
            for length in _data_file_lengths(self.spark, location):
                files += 1
                size += length
        return TableSize(files, size, 0)

    # -- protection from maintenance ----------------------------------------------------

    @abstractmethod
    def retention_properties(self, days: int) -> dict[str, str]:
        """The table properties that make the format's default maintenance keep ``days``."""

    def creation_properties(self, defaults: Mapping[str, str]) -> dict[str, str]:
        """Properties a new table is created with: the format's defaults, the history to keep,
        then the configured ones (which win)."""
        kept = self.retention_properties(self.spec.history_days) if self.spec.history_days else {}
        private = (
            self.private_columns_properties(self.spec.personal_columns) if self.spec.personal_columns else {}
        )
        return {**defaults, **kept, **private, **self.spec.properties}

    @abstractmethod
    def private_columns_properties(self, columns: Sequence[str]) -> dict[str, str]:
        """Properties that keep the values of ``columns`` out of the table's metadata.

        Both formats record per-file column statistics (minimum and maximum) for pruning:
        Delta in its transaction log, Iceberg in its manifests. Those files are never
        rewritten, so a personal value that lands there outlives the erasure of its row
        (for Delta, until the log is cleaned up). Data files' own Parquet footers are
        rewritten with the data, so they need nothing.
        """

    def keep_history(self, days: int) -> dict[str, str]:
        """Make the format's own maintenance, run with its default settings, keep ``days`` of
        history; returns the table properties this changed (empty when they already did).

        A new version on Delta (``capabilities.property_change_is_a_version``), metadata only
        on Iceberg."""
        have = self.history_retention_days()
        if have is not None and have >= days:
            return {}
        wanted = self.retention_properties(days)
        self.spark.sql(f"ALTER TABLE {self.sql_name} SET TBLPROPERTIES ({tblproperties_sql(wanted)})")
        return wanted

    def properties(self) -> dict[str, str]:
        """The table's properties as the format reports them."""
        rows = self.spark.sql(f"SHOW TBLPROPERTIES {self.sql_name}").collect()
        return {str(r["key"]): str(r["value"]) for r in rows}

    @abstractmethod
    def history_retention_days(self) -> float | None:
        """How many days of history the format's default maintenance keeps (None: its default)."""

    def version_times(self) -> dict[int, datetime]:
        """Every version still in the format's metadata, with its commit time."""
        return {c.version: c.timestamp for c in self.history()}

    def tags(self) -> list[VersionTag]:
        """The tags on the table's versions (none where the format has no tags)."""
        return []

    def tag_version(self, name: str, version: int, retain_days: int | None) -> None:
        """Tag ``version`` so that expiry keeps it for ``retain_days`` after its commit (None:
        until the tag is dropped); replaces a tag of that name."""
        raise UsageError(f"{self.name} is a {self.format.value} table: its versions cannot be tagged")

    def drop_tag(self, name: str) -> None:
        """Remove a tag (nothing if there is none)."""
        raise UsageError(f"{self.name} is a {self.format.value} table: its versions cannot be tagged")


_METADATA_FOLDERS = frozenset({"_delta_log", "metadata"})
"""Folders of a table that hold the format's log or metadata (Delta checkpoints are Parquet too)."""


def _data_file_lengths(spark: SparkSession, location: str) -> Iterator[int]:
    """The length of every Parquet data file under ``location`` (recursively, any Hadoop file
    system), outside the formats' log and metadata folders."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(location)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(path):
        return
    root = str(path.toUri().getPath()).rstrip("/")
    files = fs.listFiles(path, True)
    while files.hasNext():
        status = files.next()
        relative = str(status.getPath().toUri().getPath())[len(root) :].split("/")
        if relative[-1].endswith(".parquet") and not _METADATA_FOLDERS.intersection(relative[:-1]):
            yield int(status.getLen())


def tblproperties_sql(properties: Mapping[str, str]) -> str:
    """``'key' = 'value', ...`` (sorted) for ``TBLPROPERTIES (...)`` clauses."""
    return ", ".join(f"'{k}' = '{v}'" for k, v in sorted(properties.items()))


def metadata_context_json(meta: Mapping[str, str]) -> str:
    """Canonical JSON for commit metadata stored as one string (Delta ``userMetadata``)."""
    return json.dumps(dict(meta), sort_keys=True, separators=(",", ":"))


@contextmanager
def session_settings(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Set session settings for the duration of one statement, under the metadata lock."""
    with COMMIT_METADATA_LOCK:
        previous = {key: spark.conf.get(key, None) for key in settings}
        for key, value in settings.items():
            spark.conf.set(key, value)
        try:
            yield
        finally:
            for key, old in previous.items():
                if old is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, old)


def temp_view(df: DataFrame, prefix: str) -> str:
    """Register ``df`` under a fresh, unique temporary view name and return the name."""
    import uuid

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    df.createOrReplaceTempView(name)
    return name


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message: Spark's are pages long."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def recorded_error(exc: BaseException) -> str:
    """What the ledger records of a failure: the error's own ``recorded`` text when it has
    one (a quality gate's, without failing rows' values), else its first line."""
    recorded = getattr(exc, "recorded", None)
    return str(recorded) if recorded else first_line(exc)


def _sample(values: Sequence[int], limit: int = 8) -> str:
    if not values:
        return "none (the table was never written)"
    shown = ", ".join(str(v) for v in values[-limit:])
    return shown if len(values) <= limit else f"... {shown}"


@dataclass(frozen=True)
class Search:
    """What :func:`files_matching_tables` looks for in one table: the rows matching the keys on
    ``on`` (SQL over the table's row ``t`` and a key row ``s``, as in
    :meth:`Table.erase_matching`) in each of ``versions`` and of the open ``candidates``."""

    table: Table
    on: str
    versions: Sequence[int]
    candidates: Sequence[str] = ()


@dataclass(frozen=True)
class Found:
    """Where one :class:`Search` found matching rows: per version and per candidate, its data
    files with their row counts (``{}``: none there)."""

    versions: Mapping[int, Mapping[str, int]]
    candidates: Mapping[str, Mapping[str, int]]


def files_matching_tables(keys: DataFrame, searches: Sequence[Search]) -> list[Found]:
    """:meth:`Table.files_matching_versions` and :meth:`Table.files_matching` (per candidate)
    for several tables in one Spark job (:func:`_matching_files`): each table's versions, and
    its candidates, are one group. An erasure searches every retained version of every table:
    on a 20-person history that was twelve jobs of about 0.5 s each, one per table."""
    groups: list[tuple[Mapping[str, DataFrame], str]] = []
    for search in searches:
        table = search.table
        groups.append(({str(v): table.read(v) for v in search.versions}, search.on))
        groups.append(
            ({n: table.read_candidate(table.open_candidate(n, None)) for n in search.candidates}, search.on)
        )
    found = _matching_files(groups, keys)
    return [
        Found({int(v): files for v, files in versions.items()}, candidates)
        for versions, candidates in zip(found[::2], found[1::2], strict=True)
    ]
