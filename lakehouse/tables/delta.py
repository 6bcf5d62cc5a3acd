"""Delta Lake tables, addressed by path so that nothing depends on a metastore.

Delta has no branches. A candidate is a *shadow table*: a shallow clone of serving (no data
copied) that takes the candidate's writes. Every candidate write records which partitions
it touched in its own commit, so publication can replace exactly those partitions of
serving in one Delta transaction (``replaceWhere``), or the whole table when a write could
have touched anything (a merge or delete not bounded by partition).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lakehouse.config import TableFormat
from lakehouse.errors import CandidateError, TableError, TableExistsError, TableMissingError
from lakehouse.tables.base import (
    RUN_ID_KEY,
    Candidate,
    Capabilities,
    Commit,
    Table,
    TableSize,
    VersionRef,
    candidate_ref,
    commit_metadata,
    file_path,
    first_line,
    metadata_context_json,
    partition_predicate,
    session_settings,
    tblproperties_sql,
    temp_view,
    utc_moment,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
RETENTION_CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"
"""On by default: VACUUM refuses a retention shorter than ``delta.deletedFileRetentionDuration``."""
RETENTION_IGNORE_CONF = "spark.databricks.delta.vacuum.retentionWindowIgnore.enabled"
"""On by default in Delta 4.4: ``VACUUM ... RETAIN n HOURS`` ignores any ``n`` but 0 and keeps
the table's ``delta.deletedFileRetentionDuration`` instead."""
TOUCHED_KEY = "lakehouse.candidate-touched"
"""Commit metadata key on shadow-table writes: JSON list of partition dicts, or "*"."""
CANDIDATES_DIR = "_candidates"
RETENTION_PROPERTIES = ("delta.deletedFileRetentionDuration", "delta.logRetentionDuration")
"""How long VACUUM keeps removed files, and how long the log keeps old versions (their
defaults: 7 and 30 days). VACUUM's safety check refuses a shorter retention than the first."""
_INTERVAL = re.compile(r"\s*interval\s+(\d+)\s+(second|minute|hour|day|week)s?\s*", re.IGNORECASE)
_UNIT_DAYS = {"second": 1 / 86400, "minute": 1 / 1440, "hour": 1 / 24, "day": 1.0, "week": 7.0}
LAST_VACUUM_FILE = "_last_vacuum_info"
PURGE_RECORD = "_lakehouse_purged.json"
"""Beside ``_delta_log``: the versions an erasure purged and why (Delta itself records no
removal of single files; files whose names start with ``_`` are invisible to Delta and VACUUM)."""
"""Written into ``_delta_log`` by every VACUUM that deleted (Delta 4.x): without it no file was
ever vacuumed, and a version whose commit is in the log is readable without listing its files."""
_COMMIT_FILE = re.compile(r"(\d{20})\.json")
"""A commit file in ``_delta_log``, its version in group 1 (checkpoints, checksums, compacted
logs and temporary files are named otherwise; log cleanup never removes the newest commit)."""


class DeltaLakeTable(Table):
    """A Delta Lake table at a path."""

    format = TableFormat.DELTA
    capabilities = Capabilities(
        candidate_kind="shadow_table",
        table_write_order=False,
        rollback_creates_commit=True,
        version_kind="version",
        property_change_is_a_version=True,
        version_tags=False,
    )

    @property
    def sql_name(self) -> str:
        return f"delta.`{self.location}`"

    def _shadow_location(self, name: str) -> str:
        parent, _, leaf = self.location.rstrip("/").rpartition("/")
        return f"{parent}/{CANDIDATES_DIR}/{leaf}__{candidate_ref(name)}"

    def storage_locations(self) -> list[str]:
        """The table's folder and each open candidate's shadow table (a sibling folder)."""
        return [self.location, *(self._shadow_location(name) for name in self.list_candidates())]

    # -- lifecycle ----------------------------------------------------------------------

    def exists(self) -> bool:
        from delta.tables import DeltaTable

        return bool(DeltaTable.isDeltaTable(self.spark, self.location))

    def create(self, *, if_not_exists: bool = False) -> None:
        if self.exists():
            if if_not_exists:
                return
            raise TableExistsError(f"{self.name} already exists at {self.location}")
        existed_before = _path_exists(self.spark, self.location)
        partition = (
            f" PARTITIONED BY ({', '.join(f'`{c}`' for c in self.spec.partition_by)})"
            if self.spec.partition_by
            else ""
        )
        tblprops = tblproperties_sql(self.creation_properties({"delta.appendOnly": "false"}))
        statement = (
            f"CREATE TABLE {self.sql_name} ({self.spec.schema_ddl}) USING delta"
            f"{partition} TBLPROPERTIES ({tblprops})"
        )
        try:
            self.spark.sql(statement)
        except Exception as exc:
            if self.exists():
                # Another writer created it between our check and our commit: theirs stays.
                if if_not_exists:
                    return
                raise TableExistsError(f"{self.name} already exists at {self.location}") from exc
            if not existed_before:
                _delete_path(self.spark, self.location)
            raise TableError(f"cannot create {self.name}: {first_line(exc)}") from exc

    def drop(self) -> None:
        for name in self.list_candidates():
            _delete_path(self.spark, self._shadow_location(name))
        _delete_path(self.spark, self.location)

    # -- writes -------------------------------------------------------------------------

    def _target(self, candidate: Candidate | None) -> str:
        if candidate is None:
            self._require()
            return self.location
        self._require_candidate(candidate)
        return candidate.location

    def _sorted(self, df: DataFrame) -> DataFrame:
        return df.sortWithinPartitions(*self.spec.sort_by) if self.spec.sort_by else df

    def _touched(self, df: DataFrame) -> list[dict[str, Any]]:
        cols = list(self.spec.partition_by)
        return [row.asDict() for row in df.select(*cols).distinct().collect()]

    def _with_touched(
        self, meta: Mapping[str, str], candidate: Candidate | None, touched: Any
    ) -> dict[str, str]:
        out = dict(meta)
        if candidate is not None:
            out[TOUCHED_KEY] = json.dumps(touched, default=str, sort_keys=True)
        return out

    def _append(self, df: DataFrame, meta: Mapping[str, str], candidate: Candidate | None) -> None:
        target = self._target(candidate)
        touched = self._touched(df) if candidate is not None and self.spec.partition_by else "*"
        meta = self._with_touched(meta, candidate, touched)
        (
            self._sorted(df)
            .write.format("delta")
            .mode("append")
            .option("userMetadata", metadata_context_json(meta))
            .save(target)
        )

    def _overwrite_partitions(
        self, df: DataFrame, meta: Mapping[str, str], candidate: Candidate | None
    ) -> None:
        target = self._target(candidate)
        touched = self._touched(df) if candidate is not None and self.spec.partition_by else "*"
        meta = self._with_touched(meta, candidate, touched)
        writer = (
            self._sorted(df)
            .write.format("delta")
            .mode("overwrite")
            .option("userMetadata", metadata_context_json(meta))
        )
        if self.spec.partition_by:
            writer = writer.option("partitionOverwriteMode", "dynamic")
        writer.save(target)

    def _replace(self, df: DataFrame, meta: Mapping[str, str]) -> None:
        # one task per partition value, so each partition is written as one sorted file
        spread = df.repartition(*self.spec.partition_by) if self.spec.partition_by else df
        (
            self._sorted(spread)
            .write.format("delta")
            .mode("overwrite")
            .option("partitionOverwriteMode", "static")
            .option("userMetadata", metadata_context_json(meta))
            .save(self._target(None))
        )

    def _merge(
        self,
        df: DataFrame,
        keys: Sequence[str],
        meta: Mapping[str, str],
        candidate: Candidate | None,
    ) -> None:
        target = self._target(candidate)
        bounded = self.spec.partition_by and set(self.spec.partition_by) <= set(keys)
        touched = self._touched(df) if bounded else "*"
        meta = self._with_touched(meta, candidate, touched)
        view = temp_view(df, "merge_source")
        on = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in keys)
        statement = (
            f"MERGE INTO delta.`{target}` t USING {view} s ON {on} "
            f"WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
        )
        with session_settings(self.spark, {USER_METADATA_CONF: metadata_context_json(meta)}):
            self.spark.sql(statement)
        self.spark.catalog.dropTempView(view)

    def _delete_where(self, condition: str, meta: Mapping[str, str], candidate: Candidate | None) -> None:
        target = self._target(candidate)
        meta = self._with_touched(meta, candidate, "*")
        with session_settings(self.spark, {USER_METADATA_CONF: metadata_context_json(meta)}):
            self.spark.sql(f"DELETE FROM delta.`{target}` WHERE {condition}")

    def _erase_matching(self, merge: str, meta: Mapping[str, str], candidate: Candidate | None) -> None:
        target = self._target(candidate)
        meta = self._with_touched(meta, candidate, "*")
        with session_settings(self.spark, {USER_METADATA_CONF: metadata_context_json(meta)}):
            self.spark.sql(f"MERGE INTO delta.`{target}` t {merge}")

    # -- reads and history --------------------------------------------------------------

    def read(self, as_of: VersionRef | None = None) -> DataFrame:
        self._require()
        if as_of is None:
            return self.spark.read.format("delta").load(self.location)
        version = self.resolve_version(as_of)
        return self.spark.read.format("delta").option("versionAsOf", version).load(self.location)

    def read_stream(self, *, max_files_per_batch: int | None = None) -> DataFrame:
        """Delta's streaming source; ``skipChangeCommits`` passes over commits that remove
        or rewrite files (DELETE, MERGE, OPTIMIZE) instead of failing the query on them."""
        self._require()
        reader = self.spark.readStream.format("delta").option("skipChangeCommits", "true")
        if max_files_per_batch is not None:
            reader = reader.option("maxFilesPerTrigger", str(max_files_per_batch))
        return reader.load(self.location)

    def history(self) -> list[Commit]:
        self._require()
        return _history(self.spark, self.location)

    def current_version(self) -> int | None:
        """The newest commit's version, from the names in ``_delta_log``.

        Delta finds its latest version the same way (a listing of the log), but asking it
        through ``history(1)`` also rebuilds the table's snapshot with a Spark job: about
        0.15 s a call on a tiny table against 0.02 s for the listing, and the replay flow
        asks hundreds of times. Path-based tables with file-system commits only (no commit
        coordinator), which is how the toolkit creates them.
        """
        if not self.exists():
            return None
        found = (_COMMIT_FILE.fullmatch(name) for name in _list_dir(self.spark, self._log_location))
        return max((int(m.group(1)) for m in found if m), default=None)

    @property
    def _log_location(self) -> str:
        return f"{self.location.rstrip('/')}/_delta_log"

    def _has_version(self, version: int) -> bool:
        current = self.current_version()
        return current is not None and 0 <= version <= current

    # -- candidates ---------------------------------------------------------------------

    def stage_candidate(self, name: str) -> Candidate:
        self._require()
        shadow = self._shadow_location(name)
        if _path_exists(self.spark, shadow):
            raise CandidateError(
                f"candidate {name!r} of {self.name} already exists; publish or drop it first"
            )
        base = self.current_version()
        self.spark.sql(f"CREATE TABLE delta.`{shadow}` SHALLOW CLONE {self.sql_name} VERSION AS OF {base}")
        return Candidate(table=self.name, name=name, location=shadow, base_version=base)

    def read_candidate(self, candidate: Candidate) -> DataFrame:
        self._require_candidate(candidate)
        return self.spark.read.format("delta").load(candidate.location)

    def publish(self, candidate: Candidate, *, run_id: str | None = None) -> int:
        self._require_candidate(candidate)
        current = self.current_version()
        if current != candidate.base_version:
            raise CandidateError(
                f"serving {self.name} moved from version {candidate.base_version} to {current} "
                f"after candidate {candidate.name!r} was staged; rebuild the candidate"
            )
        touched = self._candidate_touched(candidate)
        shadow = self.spark.read.format("delta").load(candidate.location)
        meta = {"lakehouse.published-candidate": candidate.name}
        if run_id is not None:
            meta[RUN_ID_KEY] = run_id
        writer = shadow.write.format("delta").mode("overwrite").option("partitionOverwriteMode", "static")
        if touched is None:
            pass  # the candidate could have changed anything: replace the whole table
        elif not touched:
            self.drop_candidate(candidate)
            return current if current is not None else 0
        else:
            predicate = partition_predicate(self.spec.partition_by, touched)
            shadow = shadow.where(predicate)
            writer = (
                shadow.write.format("delta")
                .mode("overwrite")
                .option("partitionOverwriteMode", "static")
                .option("replaceWhere", predicate)
            )
        writer.option("userMetadata", metadata_context_json(meta)).save(self.location)
        self.drop_candidate(candidate)
        version = self.current_version()
        assert version is not None
        return version

    def _candidate_touched(self, candidate: Candidate) -> list[dict[str, Any]] | None:
        """Partitions the candidate's writes touched; None means 'possibly all'."""
        if not self.spec.partition_by:
            return None
        touched: dict[str, dict[str, Any]] = {}
        for commit in _history(self.spark, candidate.location)[1:]:
            raw = commit.metadata.get(TOUCHED_KEY)
            if raw is None:
                return None
            value = json.loads(raw)
            if value == "*":
                return None
            for row in value:
                touched[json.dumps(row, sort_keys=True)] = row
        return list(touched.values())

    def drop_candidate(self, candidate: Candidate) -> None:
        _delete_path(self.spark, candidate.location)

    def list_candidates(self) -> list[str]:
        parent, _, leaf = self.location.rstrip("/").rpartition("/")
        prefix = f"{leaf}__cand_"
        names = _list_dir(self.spark, f"{parent}/{CANDIDATES_DIR}")
        return sorted(n[len(prefix) :] for n in names if n.startswith(prefix))

    def open_candidate(self, name: str, base_version: int | None) -> Candidate:
        candidate = Candidate(
            table=self.name, name=name, location=self._shadow_location(name), base_version=base_version
        )
        self._require_candidate(candidate)
        return candidate

    def size_at(
        self,
        version: int,
        *,
        partition: str | None = None,
        first: str | None = None,
        last: str | None = None,
        count_rows: bool = True,
    ) -> TableSize:
        from pyspark.sql import functions as F

        frame = self.read(as_of=version)

        def wanted(path: str) -> bool:
            marker = f"/{partition}="
            if partition is None or marker not in path:
                return True
            value = path.split(marker, 1)[1].split("/", 1)[0]
            return (first is None or value >= first) and (last is None or value <= last)

        chosen = [f for f in frame.inputFiles() if wanted(f)]
        rows = 0
        if count_rows:
            condition = F.lit(True)
            if partition is not None and first is not None:
                condition = condition & (F.col(partition) >= first)
            if partition is not None and last is not None:
                condition = condition & (F.col(partition) <= last)
            rows = int(frame.where(condition).count())  # Delta answers this from file statistics
        return TableSize(len(chosen), sum(_file_length(self.spark, f) for f in chosen), rows)

    def _require_candidate(self, candidate: Candidate) -> None:
        if candidate.table != self.name or not _path_exists(self.spark, candidate.location):
            raise CandidateError(
                f"candidate {candidate.name!r} of {self.name} does not exist (already published or dropped?)"
            )

    # -- recovery and housekeeping ------------------------------------------------------

    def _rollback(self, version: int, meta: Mapping[str, str]) -> int:
        with session_settings(self.spark, {USER_METADATA_CONF: metadata_context_json(meta)}):
            self.spark.sql(f"RESTORE TABLE {self.sql_name} TO VERSION AS OF {version}")
        current = self.current_version()
        assert current is not None
        return current

    def expire(self, older_than: datetime, *, retain_last: int = 1) -> None:
        """VACUUM data files no longer needed by versions newer than ``older_than``.

        Delta keeps its log, so history still lists old versions, but reading them fails
        once their files are gone. Shadow tables of open candidates reference serving's
        files: publish or drop candidates before expiring.
        """
        self._require()
        if self.list_candidates():
            raise CandidateError(
                f"{self.name} has open candidates {self.list_candidates()}; vacuuming would "
                f"break their shallow clones: publish or drop them first"
            )
        older_than = utc_moment(older_than)
        now = datetime.now(UTC)
        hours = max(0.0, (now - older_than).total_seconds() / 3600)
        keep_from = self.history()[-retain_last:][0].timestamp if retain_last > 0 else now
        if keep_from < older_than:
            hours = max(0.0, (now - keep_from).total_seconds() / 3600)
        # Delta would refuse (or ignore) a retention shorter than the table's file retention:
        # this method is the caller's explicit choice, so both guards are off for this statement.
        with session_settings(self.spark, {RETENTION_CHECK_CONF: "false", RETENTION_IGNORE_CONF: "false"}):
            self.spark.sql(f"VACUUM {self.sql_name} RETAIN {hours:.6f} HOURS")

    def compact(self, target_file_bytes: int, *, run_id: str | None = None) -> int | None:
        self._require()
        before = self.current_version()
        settings = {
            USER_METADATA_CONF: metadata_context_json(commit_metadata(run_id)),
            "spark.databricks.delta.optimize.maxFileSize": str(int(target_file_bytes)),
            "spark.databricks.delta.optimize.minFileSize": str(int(target_file_bytes) * 3 // 4),
        }
        with session_settings(self.spark, settings):
            self.spark.sql(f"OPTIMIZE {self.sql_name}")
        after = self.current_version()
        return after if after != before else None

    def data_files_at(self, version: int) -> set[str]:
        return {file_path(f) for f in self.read(version).inputFiles()}

    def data_file_sizes(self) -> list[int]:
        if not self.exists() or self.current_version() is None:
            return []
        return [_file_length(self.spark, path) for path in self.read().inputFiles()]

    # -- protection from maintenance ----------------------------------------------------

    def retained_versions(self) -> list[int]:
        if not self.exists():
            return []
        log = set(_list_dir(self.spark, self._log_location))
        purged = self._purged()
        found = (_COMMIT_FILE.fullmatch(name) for name in log)
        return [v for v in sorted(int(m.group(1)) for m in found if m) if self._readable(v, log, purged)]

    def purge(self, versions: Sequence[int], files: Sequence[str], *, note: str) -> list[str]:
        self._require()
        served = list(self.read().inputFiles())
        for candidate in self.list_candidates():
            served += self.read_candidate(self.open_candidate(candidate, None)).inputFiles()
        still = sorted({file_path(f) for f in files} & {file_path(f) for f in served})
        if still:
            raise TableError(f"{self.name}: {len(still)} file(s) to purge are still served, e.g. {still[0]}")
        done = []
        for path in sorted(set(files)):
            _delete_path(self.spark, path)
            done.append(f"deleted data file {path}")
        if versions:
            record = self._purged()
            record.update({str(v): note for v in versions})
            _write_text(self.spark, self._purge_record_location, json.dumps(record, sort_keys=True))
            shown = ", ".join(str(v) for v in sorted(versions))
            done.append(f"versions {shown} can no longer be read (files they list are gone)")
        return done

    @property
    def _purge_record_location(self) -> str:
        return f"{self.location.rstrip('/')}/{PURGE_RECORD}"

    def _purged(self) -> dict[str, str]:
        """Version (as text) -> why it was purged, from :data:`PURGE_RECORD`."""
        text = _read_text(self.spark, self._purge_record_location)
        value = json.loads(text) if text else {}
        return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}

    def readable(self, version: int) -> bool:
        """The version's log is still there and so is every data file it lists (VACUUM removes
        files, not log entries, so a listed version may be unreadable)."""
        if not self.exists() or version < 0:
            return False
        return self._readable(version, set(_list_dir(self.spark, self._log_location)), self._purged())

    def _readable(self, version: int, log: set[str], purged: Mapping[str, str]) -> bool:
        """:meth:`readable`, given the log folder's names and the purge record."""
        if str(version) in purged:
            return False
        if f"{version:020d}.json" in log and LAST_VACUUM_FILE not in log:
            # Its commit is in the log and no VACUUM ever removed a file. An erasure's purge
            # deletes files too, but records every version that lists one (:meth:`purge`: the
            # versions that held the subject's rows are exactly those listing the files that
            # held them), so a version it does not name lists no deleted file.
            return True
        try:
            files = (
                self.spark.read.format("delta")
                .option("versionAsOf", version)
                .load(self.location)
                .inputFiles()
            )
        except Exception:
            return False  # the log of that version was cleaned up
        return all(_path_exists(self.spark, path) for path in files)

    def removal_note(self, version: int) -> str:
        from delta.tables import DeltaTable

        purged = self._purged().get(str(version))
        if purged:
            return f"version {version} of {self.name} was purged: {purged}"

        vacuums = (
            DeltaTable.forPath(self.spark, self.location)
            .history()
            .where(f"operation = 'VACUUM START' AND version > {int(version)}")
            .orderBy("version")
            .collect()
        )
        if not vacuums:
            return (
                f"version {version} of {self.name} cannot be read and its history records no VACUUM: "
                f"its log or files were removed outside Delta"
            )
        last = vacuums[-1]  # the latest VACUUM after the version (one before it removed none of its files)
        params = last["operationParameters"] or {}
        retain = params.get("specifiedRetentionMillis")
        hours = f"RETAIN {int(retain) / 3_600_000:g} HOURS" if retain not in (None, "null") else "its default"
        return (
            f"version {version} of {self.name} lost its data files to VACUUM ({hours}) at "
            f"{last['timestamp'].isoformat()} (table version {last['version']})"
        )

    def private_columns_properties(self, columns: Sequence[str]) -> dict[str, str]:
        from pyspark.sql.types import ArrayType, BinaryType, BooleanType, MapType

        # partition columns are pruned by their folder values, never by statistics; Delta
        # keeps no statistics of these types and refuses to be asked for them
        left_out = set(columns) | set(self.spec.partition_by)
        no_stats = (ArrayType, BinaryType, BooleanType, MapType)
        fields = self.spec.schema().fields
        kept = [f.name for f in fields if f.name not in left_out and not isinstance(f.dataType, no_stats)]
        return {"delta.dataSkippingStatsColumns": ",".join(kept)}

    def retention_properties(self, days: int) -> dict[str, str]:
        return dict.fromkeys(RETENTION_PROPERTIES, f"interval {days} days")

    def history_retention_days(self) -> float | None:
        self._require()
        have = self.properties()
        values = [_interval_days(have.get(key)) for key in RETENTION_PROPERTIES]
        known = [v for v in values if v is not None]
        return min(known) if len(known) == len(values) else None

    def _require(self) -> None:
        if not self.exists():
            raise TableMissingError(
                f"{self.name} does not exist at {self.location}; create it first "
                f"(lakehouse demo creates every configured table)"
            )


def _history(spark: SparkSession, location: str) -> list[Commit]:
    from delta.tables import DeltaTable

    rows = (
        DeltaTable.forPath(spark, location)
        .history()
        .selectExpr("version", "unix_millis(timestamp) AS ms", "operation", "userMetadata")
        .orderBy("version")
        .collect()
    )
    commits = []
    for row in rows:
        meta = _parse_user_metadata(row["userMetadata"])
        commits.append(
            Commit(
                version=int(row["version"]),
                timestamp=datetime.fromtimestamp(row["ms"] / 1000, tz=UTC),
                operation=str(row["operation"]),
                run_id=meta.get(RUN_ID_KEY),
                metadata=meta,
            )
        )
    return commits


def _interval_days(value: str | None) -> float | None:
    """Days in a Delta interval property (``interval 30 days``); None when unset or unparsable."""
    match = _INTERVAL.fullmatch(value) if value else None
    return int(match.group(1)) * _UNIT_DAYS[match.group(2).lower()] if match else None


def _parse_user_metadata(raw: str | None) -> dict[str, str]:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {"userMetadata": raw}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _hadoop_path(spark: SparkSession, location: str) -> tuple[Any, Any]:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(location)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return fs, path


def _path_exists(spark: SparkSession, location: str) -> bool:
    fs, path = _hadoop_path(spark, location)
    return bool(fs.exists(path))


def _delete_path(spark: SparkSession, location: str) -> None:
    fs, path = _hadoop_path(spark, location)
    if fs.exists(path):
        fs.delete(path, True)


def _write_text(spark: SparkSession, location: str, text: str) -> None:
    fs, path = _hadoop_path(spark, location)
    stream = fs.create(path, True)
    stream.write(bytearray(text.encode("utf-8")))
    stream.close()


def _read_text(spark: SparkSession, location: str) -> str:
    """A small file's text ('' when it does not exist)."""
    fs, path = _hadoop_path(spark, location)
    if not fs.exists(path):
        return ""
    local = file_path(location)
    if not local.startswith(("/", ".")) or "://" in local:
        return "\n".join(r[0] for r in spark.read.text(location).collect())
    with open(local, encoding="utf-8") as handle:
        return handle.read()


def _list_dir(spark: SparkSession, location: str) -> list[str]:
    fs, path = _hadoop_path(spark, location)
    if not fs.exists(path):
        return []
    return [str(status.getPath().getName()) for status in fs.listStatus(path)]


def _file_length(spark: SparkSession, path: str) -> int:
    """A data file's length: ``os.stat`` for a local file (a replay's size estimate asks for
    every file of the pinned tables, and a JVM round trip each cost seconds per thousand
    files), Hadoop's file system for any other scheme."""
    if path.startswith("file:"):
        from urllib.parse import unquote, urlparse

        local = unquote(urlparse(path).path)
        if os.path.isfile(local):
            return os.stat(local).st_size
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return int(fs.getFileStatus(hadoop_path).getLen())
