"""Bronze ingest by manifest: partner deliveries land verbatim, once, with their identity.

What: :func:`ingest_feed` takes a feed's delivery folders as the generator (or a partner)
writes them, ``<root>/<feed>/<YYYY-MM-DD>/<files>``, and appends one Bronze row per raw
line to ``bronze.<feed>``: the line verbatim in ``_raw``, the fields Bronze can parse
without judging the record (``_event_id``, ``_event_time``, ``_schema_version``; null when
they cannot be read, never an error) and the line's coordinates (``_manifest_id``,
``_source_file``, ``_line``). Every delivery folder is one batch with one manifest, recorded in
``ops.manifests``.

Why: Bronze is the replayable record of what arrived. Nothing is judged here (that is
Silver's job, with quarantine), nothing is lost (the per-file row count of the manifest is
checked against the rows Spark read before anything is written), and nothing arrives
twice: a manifest already ingested is a no-op that says so, and a file that changed under
a path already ingested is refused.

Identity and time (deterministic, no wall clock):

* a file entry is ``{"path", "size", "sha256", "rows"}``, ``path`` relative to the
  history root (``orders/2025-01-02/orders-2025-01-02-1.jsonl``), ``rows`` the data lines
  (a CSV header is not a data line); ``manifest_id`` is the sha256 of the canonical JSON of
  the delivery's file entries sorted by path (:func:`lakehouse.digest.digest_of`);
* the ingest time of a delivery is its folder date at 00:00:00Z. This is the lakehouse's
  processing clock: the same folder always gets the same ingest time, so a rebuild from
  the same deliveries gives the same lateness decisions downstream.

Erased subjects stay erased: a line of a new delivery that holds an identifier of a subject
an erasure certificate names (by salted digest, :mod:`lakehouse.identifiers`) is withheld,
counted per certificate, and never written; the manifest still records the whole file, so
the delivery is not ingested again.

Lines: a file is split on ``\\n``; a final ``\\n`` ends the last line, a file that does not
end in ``\\n`` keeps its last (truncated) line, and ``_line`` is 1-based with a CSV header
counted as line 1 (so line numbers match an editor's). A ``\\r`` before the ``\\n`` stays in
``_raw`` (raw fidelity); Silver ignores it. Files whose names start with ``.`` or ``_`` are
not part of a delivery.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote

from lakehouse.config import Zone
from lakehouse.digest import canonical_json, digest_of
from lakehouse.errors import IngestError
from lakehouse.identifiers import identifier_tokens, salted_digests
from ledger.entries import ErasureCertificate
from ledger.reader import LedgerReader
from ledger.timeline import erasure_certificates
from workloads.vocabulary import TableName

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from lakehouse.tables import Table, TableRegistry

__all__ = [
    "EVENT_TIME_FORMAT",
    "STATUS_ALREADY_INGESTED",
    "STATUS_INGESTED",
    "FileEntry",
    "IngestReport",
    "Manifest",
    "ManifestStatus",
    "bronze_table_of",
    "bronze_tables",
    "build_manifest",
    "feed_of",
    "ingest_feed",
    "ingest_history",
    "json_object",
    "parse_utc_timestamp",
    "scan_file",
]

STATUS_INGESTED: Final = "ingested"
STATUS_ALREADY_INGESTED: Final = "already_ingested"

log = logging.getLogger(__name__)

MANIFESTS_TABLE: Final = TableName.MANIFESTS
MANIFEST_IDS_KEY: Final = "lakehouse.manifest-ids"
"""Bronze commit metadata key: the comma-separated ids of the manifests the commit holds."""
EVENT_TIME_FORMAT: Final = "yyyy-MM-dd'T'HH:mm:ss[.SSSSSS]XXX"
"""ISO-8601 with an explicit zone (``Z`` or ``+01:00``); read into UTC."""

_CHUNK: Final = 1 << 20
_DATE_DIR: Final = re.compile(r"^\d{4}-\d{2}-\d{2}$")


# --------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileEntry:
    """One delivered file: where it is (relative to the history root), size, checksum, rows."""

    path: str
    size: int
    sha256: str
    rows: int


@dataclass(frozen=True)
class Manifest:
    """One delivery folder: its files and the identity derived from them."""

    feed: str
    delivery: date
    files: tuple[FileEntry, ...]

    @property
    def manifest_id(self) -> str:
        """sha256 of the canonical JSON of the file entries, sorted by path."""
        return digest_of(self._file_records())

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def ingest_time_text(self) -> str:
        """The delivery's ingest time: its folder date at 00:00:00Z."""
        return f"{self.delivery.isoformat()}T00:00:00Z"

    def files_json(self) -> str:
        """The file entries as stored in ``ops.manifests`` (canonical JSON, sorted by path)."""
        return canonical_json(self._file_records())

    def _file_records(self) -> list[dict[str, Any]]:
        """The file entries as plain dicts sorted by path: what the manifest id hashes."""
        return [asdict(f) for f in sorted(self.files, key=lambda f: f.path)]


@dataclass(frozen=True)
class ManifestStatus:
    """What one call did with one manifest."""

    manifest_id: str
    delivery: str
    files: tuple[str, ...]
    rows: int
    status: str


@dataclass(frozen=True)
class IngestReport:
    """Result of :func:`ingest_feed` (``--json`` prints its fields).

    ``inputs`` are the versions of the tables consulted before writing, ``outputs`` the
    versions after this call's writes (equal to the inputs when nothing was new).
    """

    feed: str
    run_id: str
    manifests: tuple[ManifestStatus, ...]
    rows_written: int
    inputs: Mapping[str, int | None] = field(default_factory=dict)
    outputs: Mapping[str, int | None] = field(default_factory=dict)
    withheld: Mapping[str, int] = field(default_factory=dict)
    """Lines of new deliveries not written because they hold an erased subject's identifier,
    per erasure certificate."""

    @property
    def ingested(self) -> tuple[ManifestStatus, ...]:
        return tuple(m for m in self.manifests if m.status == STATUS_INGESTED)

    @property
    def already_ingested(self) -> tuple[ManifestStatus, ...]:
        return tuple(m for m in self.manifests if m.status == STATUS_ALREADY_INGESTED)


# --------------------------------------------------------------------------------------
# Pure helpers: files, manifests, folder layout
# --------------------------------------------------------------------------------------


def bronze_tables(registry: TableRegistry) -> list[str]:
    """Every configured table of the Bronze zone (``bronze.<feed>``), in config order."""
    return [name for name in registry.names() if registry.spec(name).zone is Zone.BRONZE]


def feed_of(bronze_table: str) -> str:
    """``bronze.orders`` -> ``orders``: the feed a Bronze table holds."""
    return bronze_table.partition(".")[2]


def bronze_table_of(feed: str) -> str:
    """``orders`` -> ``bronze.orders``: the Bronze table a feed lands in."""
    return f"{Zone.BRONZE.value}.{feed}"


def is_csv(path: str) -> bool:
    """CSV files carry a header line; everything else is one record per line (JSON lines)."""
    return path.lower().endswith(".csv")


def scan_file(path: Path, relative: str) -> FileEntry:
    """Size, sha256 and data-line count of a file, streamed in 1 MiB chunks.

    Lines follow the module's rule: split on ``\\n``, a final ``\\n`` ends the last line,
    an unterminated last line counts; a CSV header is not a data line.
    """
    digest = hashlib.sha256()
    size = 0
    newlines = 0
    last = b""
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
            newlines += chunk.count(b"\n")
            last = chunk[-1:]
    lines = newlines + (1 if size and last != b"\n" else 0)
    if is_csv(relative):
        lines = max(0, lines - 1)
    return FileEntry(path=relative, size=size, sha256=digest.hexdigest(), rows=lines)


def build_manifest(root: Path, feed: str, delivery_dir: Path) -> Manifest:
    """The manifest of one delivery folder (every visible regular file in it)."""
    delivery = date.fromisoformat(delivery_dir.name)
    files = sorted(p for p in delivery_dir.iterdir() if p.is_file() and not p.name.startswith((".", "_")))
    if not files:
        raise IngestError(
            f"delivery folder {delivery_dir} has no files; remove it or put the delivery's files in it"
        )
    entries = tuple(scan_file(p, p.relative_to(root).as_posix()) for p in files)
    return Manifest(feed=feed, delivery=delivery, files=entries)


def locate_feed(source_dir: Path, feed: str) -> tuple[Path, Path]:
    """(history root, feed folder) for a feed folder or a history root."""
    if not source_dir.is_dir():
        raise IngestError(
            f"{source_dir}: no such folder; pass a feed folder (<history>/{feed}) or the history root"
        )
    if (source_dir / feed).is_dir():
        return source_dir, source_dir / feed
    if source_dir.name == feed:
        return source_dir.parent, source_dir
    raise IngestError(
        f"{source_dir} is neither the history root (it has no '{feed}' folder) "
        f"nor the '{feed}' feed folder; pass one of them"
    )


def delivery_folders(feed_dir: Path) -> list[Path]:
    """The dated delivery folders of a feed folder, oldest first; anything else is an error."""
    folders: list[Path] = []
    for entry in sorted(feed_dir.iterdir()):
        if entry.name.startswith((".", "_")):
            continue
        if not entry.is_dir() or not _DATE_DIR.match(entry.name):
            raise IngestError(
                f"unexpected entry {entry} in feed folder; deliveries must be folders named YYYY-MM-DD"
            )
        try:
            date.fromisoformat(entry.name)
        except ValueError:
            raise IngestError(f"delivery folder {entry} is not a valid date (YYYY-MM-DD)") from None
        folders.append(entry)
    if not folders:
        raise IngestError(f"{feed_dir} holds no delivery folders (YYYY-MM-DD); nothing to ingest")
    return folders


def check_against_known(
    manifests: Sequence[Manifest], known: Mapping[str, Mapping[str, Any]]
) -> list[Manifest]:
    """The manifests not yet ingested; refuses changed files and changed deliveries.

    ``known`` maps ingested manifest ids to their ``ops.manifests`` record (``delivery``
    and ``files`` as stored). A file whose path was ingested with another checksum is
    refused, as is a delivery that was ingested with a different set of files: changes
    must arrive as a new dated delivery, never by rewriting one that Bronze already holds.
    """
    known_files: dict[str, str] = {}
    known_deliveries: dict[str, tuple[str, set[str]]] = {}
    for manifest_id, record in known.items():
        paths = set()
        for entry in record.get("files", []):
            known_files[str(entry["path"])] = str(entry["sha256"])
            paths.add(str(entry["path"]))
        delivery = record.get("delivery")
        if delivery is not None:
            known_deliveries[str(delivery)] = (manifest_id, paths)
    fresh: list[Manifest] = []
    for manifest in manifests:
        if manifest.manifest_id in known:
            continue
        for entry in manifest.files:
            before = known_files.get(entry.path)
            if before is not None and before != entry.sha256:
                raise IngestError(
                    f"{entry.path} changed after it was ingested: sha256 was {before}, is now "
                    f"{entry.sha256}; deliver corrections as a new dated delivery"
                )
        previous = known_deliveries.get(manifest.delivery.isoformat())
        if previous is not None:
            old_id, old_paths = previous
            new_paths = {f.path for f in manifest.files}
            added = sorted(new_paths - old_paths)
            removed = sorted(old_paths - new_paths)
            raise IngestError(
                f"delivery {manifest.feed}/{manifest.delivery} was ingested as manifest {old_id[:12]} "
                f"and now differs (added {added}, removed {removed}); deliver changes as a new dated delivery"
            )
        fresh.append(manifest)
    return fresh


# --------------------------------------------------------------------------------------
# Spark column helpers (shared with Silver)
# --------------------------------------------------------------------------------------


def parse_utc_timestamp(text: Column) -> Column:
    """An ISO-8601 timestamp with explicit zone, as UTC; null when it is not one."""
    from pyspark.sql import functions as F

    return F.try_to_timestamp(text, F.lit(EVENT_TIME_FORMAT))


def json_object(raw: Column) -> Column:
    """The line as a VARIANT when it is exactly one JSON object, else null.

    Spark's parser is strict about syntax and duplicate keys but stops after the first
    value, so the trimmed line must also start with ``{`` and end with ``}``.
    """
    from pyspark.sql import functions as F

    trimmed = F.btrim(raw, F.lit(" \t\r\n"))
    shaped = trimmed.startswith("{") & trimmed.endswith("}")
    return F.when(shaped, F.try_parse_json(raw))


def _non_blank(text: Column) -> Column:
    from pyspark.sql import functions as F

    return F.when(F.length(F.trim(text)) > 0, text)


# --------------------------------------------------------------------------------------
# Spark: read lines, parse what Bronze can, write
# --------------------------------------------------------------------------------------


def _split_lines(value: Column) -> Column:
    """A file's text as its lines (see the module docstring for the rule)."""
    from pyspark.sql import functions as F

    parts = F.split(value, "\n", -1)
    return (
        F.when(value == "", F.array().cast("array<string>"))
        .when(value.endswith("\n"), F.slice(parts, F.lit(1), F.size(parts) - 1))
        .otherwise(parts)
    )


def _bronze_fields(line: Column, header: Column, csv: Column) -> tuple[Column, Column, Column]:
    """(_event_id, _event_time, _schema_version) parsed where possible, null otherwise."""
    from pyspark.sql import functions as F

    variant = json_object(line)
    names = F.split(F.regexp_replace(header, "\r$", ""), ",", -1)
    values = F.split(F.regexp_replace(line, "\r$", ""), ",", -1)

    def pick(name: str) -> Column:
        position = F.array_position(names, name).cast("int")
        from_csv = F.when(position > 0, F.try_element_at(values, position))
        from_json = F.try_variant_get(variant, f"$.{name}", "string")
        return F.when(csv, from_csv).otherwise(from_json)

    return (
        _non_blank(pick("event_id")),
        parse_utc_timestamp(pick("event_time")),
        _non_blank(pick("schema_version")),
    )


def _read_bronze_rows(
    registry: TableRegistry, root: Path, feed: str, manifests: Sequence[Manifest], run_id: str
) -> tuple[DataFrame | None, int]:
    """The Bronze rows of ``manifests``, checked line for line against their row counts.

    Returns the persisted rows (None when the files hold no data line) and their number;
    the caller unpersists. One Spark job reads the files and counts lines per file.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    spark = registry.spark
    entries = [(m, e) for m in manifests for e in m.files]
    to_read = [str(root / e.path) for _, e in entries if e.size > 0]
    if not to_read:
        return None, 0
    texts = spark.read.text(to_read, wholetext=True).select(
        F.col("_metadata.file_path").alias("_path"), F.col("value")
    )
    # The lines and the CSV header are computed once per file, before the explode; an
    # expression on the file text after it would run once per line (quadratic).
    is_csv_path = F.lower(F.col("_path")).endswith(".csv")
    per_file = texts.select("_path", _split_lines(F.col("value")).alias("_lines")).select(
        "_path", F.when(is_csv_path, F.try_element_at("_lines", F.lit(1))).alias("_header"), "_lines"
    )
    lines = (
        per_file.select("_path", "_header", F.posexplode("_lines").alias("_pos", "_raw"))
        .where(~(is_csv_path & (F.col("_pos") == 0)))
        .persist()
    )
    counted: dict[str, tuple[str, int]] = {
        _local_path(str(r["_path"])): (str(r["_path"]), int(r["n"]))
        for r in lines.groupBy("_path").agg(F.count(F.lit(1)).alias("n")).collect()
    }
    mapping_rows = []
    for manifest, entry in entries:
        spark_path, got = counted.get(str((root / entry.path).resolve()), ("", 0))
        if got != entry.rows:
            lines.unpersist()
            raise IngestError(
                f"{entry.path}: Spark read {got} lines but the file has {entry.rows}; "
                f"check its encoding and line endings"
            )
        if got:
            mapping_rows.append((spark_path, entry.path, manifest.manifest_id, manifest.ingest_time_text))
    total = sum(n for _, n in counted.values())
    if not total:
        lines.unpersist()
        return None, 0
    mapping = spark.createDataFrame(
        mapping_rows,
        StructType(
            [
                StructField("_path", StringType(), False),
                StructField("_source_file", StringType(), False),
                StructField("_manifest_id", StringType(), False),
                StructField("_ingest_text", StringType(), False),
            ]
        ),
    )
    csv = F.lower(F.col("_source_file")).endswith(".csv")
    event_id, event_time, schema_version = _bronze_fields(F.col("_raw"), F.col("_header"), csv)
    rows = lines.join(F.broadcast(mapping), "_path").select(
        F.col("_raw"),
        event_id.alias("_event_id"),
        event_time.alias("_event_time"),
        parse_utc_timestamp(F.col("_ingest_text")).alias("_ingest_time"),
        F.to_date(F.substring(F.col("_ingest_text"), 1, 10)).alias("_ingest_date"),
        F.lit(feed).alias("_source"),
        schema_version.alias("_schema_version"),
        F.col("_manifest_id"),
        F.col("_source_file"),
        (F.col("_pos") + 1).cast("bigint").alias("_line"),
        F.lit(run_id).alias("_run_id"),
    )
    return rows, total


def _local_path(spark_path: str) -> str:
    """A local file path from the URI Spark reports (``file:/a%20b`` -> ``/a b``)."""
    text = spark_path
    if text.startswith("file:"):
        text = "/" + text[len("file:") :].lstrip("/")
    return str(Path(unquote(text)).resolve())


def _known_manifests(manifests_table: Table, feed: str) -> dict[str, dict[str, Any]]:
    """Ingested manifests of a feed from ``ops.manifests``: id -> {delivery, files}."""
    from pyspark.sql import functions as F

    rows = (
        manifests_table.read()
        .where(F.col("feed") == feed)
        .select("manifest_id", "delivery", "files")
        .collect()
    )
    return {
        str(r["manifest_id"]): {"delivery": str(r["delivery"]), "files": json.loads(r["files"])} for r in rows
    }


def _manifest_rows(registry: TableRegistry, manifests: Iterable[Manifest], run_id: str) -> DataFrame:
    from pyspark.sql import functions as F

    data = [
        (
            m.manifest_id,
            m.feed,
            m.delivery.isoformat(),
            m.ingest_time_text,
            m.files_json(),
            m.rows,
            m.bytes,
            run_id,
        )
        for m in manifests
    ]
    frame = registry.spark.createDataFrame(
        data,
        "manifest_id STRING, feed STRING, delivery STRING, ingest_text STRING, files STRING, "
        "rows BIGINT, bytes BIGINT, run_id STRING",
    )
    return frame.select(
        "manifest_id",
        "feed",
        "delivery",
        parse_utc_timestamp(F.col("ingest_text")).alias("ingest_time"),
        "files",
        "rows",
        "bytes",
        "run_id",
    )


def ingest_feed(registry: TableRegistry, feed: str, source_dir: Path | str, *, run_id: str) -> IngestReport:
    """Ingest every delivery of ``feed`` under ``source_dir`` that Bronze does not hold yet.

    ``source_dir`` is the feed folder (``<history>/<feed>``) or the history root. New
    manifests are written to ``bronze.<feed>`` in one append (the run id in the commit
    metadata) and then recorded in ``ops.manifests``. A manifest already in Bronze is
    reported ``already_ingested`` and not written again; a changed file under an ingested
    path, or a changed ingested delivery, raises :class:`IngestError` before anything is
    written. Missing tables are created.
    """
    bronze_name = bronze_table_of(feed)
    if bronze_name not in registry.names():
        feeds = sorted(feed_of(n) for n in bronze_tables(registry))
        raise IngestError(f"unknown feed {feed!r}; known feeds: {', '.join(feeds) or 'none configured'}")
    root, feed_dir = locate_feed(Path(source_dir).expanduser().resolve(), feed)
    manifests = [build_manifest(root, feed, folder) for folder in delivery_folders(feed_dir)]

    bronze = registry.get(bronze_name)
    manifests_table = registry.get(MANIFESTS_TABLE)
    bronze.create(if_not_exists=True)
    manifests_table.create(if_not_exists=True)
    bronze_commits = bronze.history()
    inputs = {
        bronze_name: bronze_commits[-1].version if bronze_commits else None,
        MANIFESTS_TABLE: manifests_table.current_version(),
    }

    known = _known_manifests(manifests_table, feed) if inputs[MANIFESTS_TABLE] is not None else {}
    fresh = check_against_known(manifests, known)
    # An append to Bronze is atomic and names its manifests in its commit metadata, but the
    # ops.manifests record is a second commit: a manifest named by a Bronze commit without
    # its record was interrupted in between. It is not written again; its record is
    # completed below.
    in_bronze = {m for c in bronze_commits for m in c.metadata.get(MANIFEST_IDS_KEY, "").split(",") if m}
    unrecorded = [m for m in fresh if m.manifest_id in in_bronze]
    fresh = [m for m in fresh if m.manifest_id not in in_bronze]

    rows_written = 0
    withheld: dict[str, int] = {}
    if fresh:
        rows, read = _read_bronze_rows(registry, root, feed, fresh, run_id)
        if rows is not None:
            try:
                kept, withheld = withhold_erased(
                    rows, erasure_certificates(LedgerReader.for_registry(registry).records())
                )
                rows_written = read - sum(withheld.values())
                if rows_written:
                    ids = ",".join(sorted(m.manifest_id for m in fresh))
                    bronze.append(kept, run_id=run_id, metadata={MANIFEST_IDS_KEY: ids})
            finally:
                rows.unpersist()
    if fresh or unrecorded:
        manifests_table.append(_manifest_rows(registry, [*unrecorded, *fresh], run_id), run_id=run_id)

    log.info(
        "ingest %s (%s): %d delivery(ies) found, %d new, %d rows written to %s",
        feed,
        run_id,
        len(manifests),
        len(fresh),
        rows_written,
        bronze_name,
    )
    if unrecorded:
        log.info("ingest %s: completed the ops.manifests record of %d manifest(s)", feed, len(unrecorded))
    for certificate, lines in withheld.items():
        log.info("ingest %s: withheld %d line(s) erased under certificate %s", feed, lines, certificate)
    fresh_ids = {m.manifest_id for m in fresh}
    statuses = tuple(
        ManifestStatus(
            manifest_id=m.manifest_id,
            delivery=m.delivery.isoformat(),
            files=tuple(f.path for f in m.files),
            rows=m.rows,
            status=STATUS_INGESTED if m.manifest_id in fresh_ids else STATUS_ALREADY_INGESTED,
        )
        for m in manifests
    )
    outputs = dict(inputs)
    if rows_written:
        outputs[bronze_name] = bronze.current_version()
    if fresh or unrecorded:
        outputs[MANIFESTS_TABLE] = manifests_table.current_version()
    return IngestReport(
        feed=feed,
        run_id=run_id,
        manifests=statuses,
        rows_written=rows_written,
        inputs=inputs,
        outputs=outputs,
        withheld=withheld,
    )


def withhold_erased(
    rows: DataFrame, certificates: Sequence[ErasureCertificate]
) -> tuple[DataFrame, dict[str, int]]:
    """``rows`` without the lines that hold an identifier of an erased subject, and how many
    lines each certificate withheld (one Spark job, only when there is a certificate).

    A line is compared token by token, by salted digest, with each certificate's identifier
    digests: the ledger never holds an identifier in clear, and neither does this plan.
    """
    from pyspark.sql import functions as F

    if not certificates:
        return rows, {}
    tokens = identifier_tokens(F.col("_raw"))
    erased_under = F.coalesce(
        *(
            F.when(
                F.arrays_overlap(
                    salted_digests(tokens, c.salt), F.array(*(F.lit(d) for d in c.identifier_digests))
                ),
                F.lit(c.certificate_id),
            )
            for c in certificates
            if c.identifier_digests
        ),
        F.lit(None).cast("string"),
    )
    tagged = rows.withColumn("_erased_under", erased_under)
    counts = {
        str(r["_erased_under"]): int(r["n"])
        for r in tagged.where(F.col("_erased_under").isNotNull())
        .groupBy("_erased_under")
        .agg(F.count(F.lit(1)).alias("n"))
        .collect()
    }
    if not counts:
        return rows, {}
    return tagged.where(F.col("_erased_under").isNull()).drop("_erased_under"), counts


def ingest_history(
    registry: TableRegistry, root: Path | str, *, run_id: str, feeds: Sequence[str] | None = None
) -> list[IngestReport]:
    """Ingest every feed folder found under a history root (or the given ``feeds``)."""
    base = Path(root).expanduser().resolve()
    if not base.is_dir():
        raise IngestError(f"{base}: no such folder; pass the history root (the generator's --out)")
    if feeds is None:
        configured = [feed_of(n) for n in bronze_tables(registry)]
        feeds = [f for f in configured if (base / f).is_dir()]
        if not feeds:
            raise IngestError(f"{base} holds no feed folder ({', '.join(configured)}); pass the history root")
    return [ingest_feed(registry, feed, base, run_id=run_id) for feed in feeds]
