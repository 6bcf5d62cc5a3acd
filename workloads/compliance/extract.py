"""W6: redacted audit extracts (``lakehouse extract TABLE --at T [--where EXPR] --out DIR``).

An extract is the answer ``asof`` gives for a Gold table at T (route (a), or route (b) where
(a) cannot answer; the routes must not disagree), written as Parquet files under the work dir
with a manifest, and recorded in the ledger (a recorded run with an ``audit_extract`` entry).
It is meant to leave the lakehouse, so it carries no identifier:

* **Pseudonymised.** Every identifier column (:func:`pseudonymised_columns`: the table's
  ``personal:`` columns, its entity columns, and the ids derived from entity ids without a
  salt) holds ``ps-`` + 24 hex of the value's sha256 under a salt drawn for this extract
  (:func:`pseudonym`). The same value is the same pseudonym throughout one extract (a
  correlation's two sides still link up), and differs between extracts (two recipients
  cannot join theirs). **The salt is kept nowhere**: not in the files, the manifest, the
  ledger or a log. Whoever holds it can test a guessed address or id against the
  pseudonyms, so keeping it would make every extract re-identifiable by anyone who reads
  where it is kept; nothing needs it later either, because an erasure deletes every extract
  of a table that held the subject instead of looking for the subject inside one
  (:func:`extracts_of`).
* **Erased subjects absent.** A row that holds ``redacted:<certificate>`` (a Gold correlation
  kept after one side was erased) is left out, and so is any row holding a token whose
  salted digest is an identifier digest of an erasure certificate: a defence in depth
  against any route bringing an erased subject back (route (b) reads retained versions;
  the erasure purged the ones that held the subject, and :func:`erased_in` would catch one it
  missed). The manifest counts the rows left out per certificate.
* **The filter names no identifier.** ``--where`` is parsed by :mod:`lakehouse.expressions`
  (never SQL text; the same grammar as ``asof``), and may not compare a pseudonymised
  column with a value: the filter is recorded in the manifest and the ledger, which must
  never hold an identifier (an erasure's verification scans the ledger).

Everything is checked before Spark starts (:func:`extract_request`): the table, the
instant, the filter, and the folder (inside the work dir, outside table storage, new or
empty).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from lakehouse.config import LakehouseConfig
from lakehouse.errors import LakehouseError, UsageError
from lakehouse.expressions import compared_columns, parse_instant, parse_where
from ledger import AuditExtract, ErasureCertificate, ExtractFile, ExtractManifest, Ledger, RunStarted
from workloads.asof.answer import (
    DEFAULT_ENTITY_COLUMNS,
    ENTITY_COLUMNS,
    LIFECYCLE,
    ROUTES_DISAGREE_EXIT,
    refuse_unanswerable,
)
from workloads.asof.readers import ddl_fields, simple_columns
from workloads.compliance.scan import identifier_digest, tokens
from workloads.runs import new_run_id, recorded_run
from workloads.vocabulary import PSEUDONYM_PREFIX, REDACTED_PREFIX

if TYPE_CHECKING:
    import pyarrow as pa

    from lakehouse.tables import TableRegistry

log = logging.getLogger(__name__)

Progress = Callable[[str], None]

EXTRACT_COMMAND: Final = "extract"
"""The recorded run of an extract (``run_started.command``), which erasures look for."""
MANIFEST_NAME: Final = "manifest.json"
ROWS_PER_FILE: Final = 100_000
"""At most this many rows per Parquet file (``part-00000.parquet``, ...)."""
PSEUDONYM_HEX: Final = 24
"""Hex digits of a pseudonym's digest: 96 bits, no collision in any extract this size."""
DERIVED_IDENTIFIERS: Final = frozenset({"correlation_id", "superseded_by"})
"""Ids computed from entity ids without a salt (a correlation's id digests its two entities):
anyone who knows the entities could recompute them, so they are identifiers too."""
STORAGE: Final = "warehouse"
"""The work dir's table storage, where no extract may be written."""
PSEUDONYMISATION: Final = (
    f"{PSEUDONYM_PREFIX} + {PSEUDONYM_HEX} hex of sha256(salt, value) with a salt drawn for this "
    "extract and kept nowhere: equal values are equal pseudonyms within this extract only"
)


class RoutesDisagree(LakehouseError):
    """The two ``asof`` routes disagree at T: no extract is written from a disputed answer."""

    exit_code = ROUTES_DISAGREE_EXIT


# -- what is checked before Spark starts ------------------------------------------------------------


def pseudonymised_columns(table: str, columns: Sequence[str], personal: Iterable[str]) -> tuple[str, ...]:
    """The columns of ``table`` an extract pseudonymises, in table order: its declared personal
    columns, its entity columns, and the ids derived from entity ids."""
    wanted = {*personal, *ENTITY_COLUMNS.get(table, DEFAULT_ENTITY_COLUMNS), *DERIVED_IDENTIFIERS}
    return tuple(c for c in columns if c in wanted)


def check_out(out: Path, workdir: Path) -> Path:
    """The extract's folder, resolved: inside the work dir (where erasures reach it), outside
    table storage, and new or empty (an extract never mixes with other files)."""
    target, root = out.expanduser().resolve(), workdir.resolve()
    if target == root or root not in target.parents:
        raise UsageError(
            f"--out {out}: outside the work dir {root}; extracts are written under it, where an "
            f"erasure reaches them"
        )
    storage = root / STORAGE
    if target == storage or storage in target.parents:
        raise UsageError(f"--out {out}: inside the table storage {storage}; choose another folder")
    if target.exists() and not target.is_dir():
        raise UsageError(f"--out {out}: a file, not a folder")
    if target.is_dir() and any(target.iterdir()):
        raise UsageError(f"--out {out}: the folder exists and is not empty; name a new or empty one")
    return target


def check_where(where: str, columns: Mapping[str, str], pseudonymised: Iterable[str]) -> None:
    """Parse ``--where`` (the ``asof`` grammar: never SQL text) and refuse a comparison of a
    pseudonymised column with a value: the filter is kept by the manifest and the ledger."""
    named = sorted(compared_columns(parse_where(where, columns)) & set(pseudonymised))
    if named:
        raise UsageError(
            f"--where compares {', '.join(named)} with a value: identifiers are pseudonymised in an "
            f"extract and the filter is recorded in the ledger, which never holds one; filter on "
            f"other columns"
        )


@dataclass(frozen=True)
class ExtractRequest:
    """What ``lakehouse extract`` was asked for, checked (:func:`extract_request`)."""

    table: str
    at: datetime
    folder: Path
    """Resolved, inside the work dir."""
    where: str | None = None


def extract_request(
    config: LakehouseConfig, table: str, at: str | None, out: Path | None, where: str | None
) -> ExtractRequest:
    """Check every argument against the configuration alone (exit 2, before Spark starts)."""
    refuse_unanswerable(table, sorted(config.tables), EXTRACT_COMMAND)
    if not at:
        raise UsageError("extract needs --at TIMESTAMP (ISO-8601 with a time zone)")
    if out is None:
        raise UsageError("extract needs --out DIR (a new or empty folder under the work dir)")
    instant = parse_instant(at, what="--at")
    settings = config.tables[table]
    if where is not None:
        names = [name for name, _ in ddl_fields(settings.schema_ddl)]
        check_where(
            where, simple_columns(settings.schema_ddl), pseudonymised_columns(table, names, settings.personal)
        )
    return ExtractRequest(table, instant, check_out(out, config.workdir_path), where)


# -- rows -------------------------------------------------------------------------------------------


def pseudonym(salt: str, value: object) -> str:
    """The pseudonym of one value under one extract's salt."""
    return PSEUDONYM_PREFIX + identifier_digest(salt, str(value))[:PSEUDONYM_HEX]


@dataclass(frozen=True)
class Erased:
    """An erased subject as its certificate names it: by salted digests only."""

    certificate_id: str
    salt: str
    digests: frozenset[str]


def erased_subjects(ledger: Ledger) -> tuple[Erased, ...]:
    """Every subject an erasure certificate in the ledger names."""
    return tuple(
        Erased(e.certificate_id, e.salt, frozenset(e.identifier_digests))
        for e in ledger.reader.entries(kind="erasure_certificate")
        if isinstance(e, ErasureCertificate)
    )


def erased_in(values: Iterable[object], erased: Sequence[Erased], memo: dict[str, str | None]) -> str | None:
    """The certificate under which one of ``values`` names an erased subject (a
    ``redacted:<certificate>`` value, or a token whose salted digest a certificate lists), or None."""
    for value in values:
        if not isinstance(value, str):
            continue
        if value.startswith(REDACTED_PREFIX):
            return value[len(REDACTED_PREFIX) :]
        if value not in memo:
            memo[value] = next(
                (
                    e.certificate_id
                    for e in erased
                    if any(identifier_digest(e.salt, t) in e.digests for t in tokens(value))
                ),
                None,
            )
        if memo[value] is not None:
            return memo[value]
    return None


def redact_rows(
    rows: Iterable[Mapping[str, Any]],
    columns: Sequence[str],
    pseudonymised: Iterable[str],
    salt: str,
    erased: Sequence[Erased] = (),
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The rows to write (``columns`` only, identifiers pseudonymised), and how many rows were
    left out because they name an erased subject, per certificate."""
    hidden = frozenset(pseudonymised)
    kept: list[dict[str, Any]] = []
    withheld: Counter[str] = Counter()
    memo: dict[str, str | None] = {}
    for row in rows:
        certificate = erased_in((row.get(c) for c in columns), erased, memo)
        if certificate is not None:
            withheld[certificate] += 1
            continue
        kept.append(
            {
                c: pseudonym(salt, row[c]) if c in hidden and row.get(c) is not None else row.get(c)
                for c in columns
            }
        )
    return kept, dict(sorted(withheld.items()))


# -- files ------------------------------------------------------------------------------------------


def arrow_schema(fields: Sequence[tuple[str, str]], pseudonymised: Iterable[str]) -> pa.Schema:
    """The Parquet schema of an extract: the table's types, pseudonyms as strings."""
    import pyarrow as pa

    simple = {
        "STRING": pa.string(),
        "INT": pa.int32(),
        "BIGINT": pa.int64(),
        "SMALLINT": pa.int16(),
        "DOUBLE": pa.float64(),
        "FLOAT": pa.float32(),
        "BOOLEAN": pa.bool_(),
        "TIMESTAMP": pa.timestamp("us", tz="UTC"),
        "DATE": pa.date32(),
    }
    hidden = frozenset(pseudonymised)
    types = []
    for name, written in fields:
        base, _, rest = written.upper().partition("(")
        if name in hidden:
            kind = pa.string()
        elif base == "DECIMAL" and rest:
            precision, _, scale = rest.rstrip(")").partition(",")
            kind = pa.decimal128(int(precision), int(scale or 0))
        else:
            kind = simple.get(base, pa.string())
        types.append(pa.field(name, kind))
    return pa.schema(types)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_parts(folder: Path, rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> dict[str, ExtractFile]:
    """Write the rows as Parquet parts of at most :data:`ROWS_PER_FILE` rows (one, empty, for
    no rows); returns each file with its digest, rows and size."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files: dict[str, ExtractFile] = {}
    for index, start in enumerate(range(0, max(len(rows), 1), ROWS_PER_FILE)):
        chunk = rows[start : start + ROWS_PER_FILE]
        path = folder / f"part-{index:05d}.parquet"
        # no column statistics: the footer stays free of values, pseudonyms or not
        pq.write_table(pa.Table.from_pylist(list(chunk), schema=schema), path, write_statistics=False)
        files[path.name] = ExtractFile(sha256=sha256_of(path), rows=len(chunk), bytes=path.stat().st_size)
    return files


@dataclass(frozen=True)
class ExtractResult:
    """What ``lakehouse extract`` reports."""

    manifest: ExtractManifest
    folder: str
    manifest_sha256: str
    notes: tuple[str, ...] = ()


def extract(
    registry: TableRegistry, ledger: Ledger, request: ExtractRequest, progress: Progress | None = None
) -> ExtractResult:
    """Write one redacted audit extract (the module's rules) and record it in the ledger."""
    from workloads.asof import SparkReader, asof

    config = registry.config
    if progress:
        progress(f"reading {request.table} as known at {request.at.isoformat()}")
    answer = asof(
        SparkReader(registry),
        request.table,
        request.at,
        known_tables=sorted(config.tables),
        where=request.where,
    )
    if answer.routes_agree is False:
        key = answer.first_difference and answer.first_difference.get("key")
        raise RoutesDisagree(
            f"routes disagree for {request.table} at {request.at.isoformat()} (first differing key {key}); "
            f"no extract written: run lakehouse asof for the details"
        )
    route = answer.route_a if answer.route_a.available else answer.route_b
    if not route.available:
        notes = "; ".join(r.note for r in answer.routes.values() if r.note)
        raise UsageError(f"nothing to extract: neither route answers for {request.table} at T ({notes})")
    settings = config.tables[request.table]
    fields = [(name, written) for name, written in ddl_fields(settings.schema_ddl) if name not in LIFECYCLE]
    columns = [name for name, _ in fields]
    hidden = pseudonymised_columns(request.table, columns, settings.personal)
    rows, withheld = redact_rows(answer.rows, columns, hidden, secrets.token_hex(16), erased_subjects(ledger))
    now = ledger.writer.clock.now()
    extract_id = new_run_id(
        EXTRACT_COMMAND, now, [request.table, request.at.isoformat(), str(request.folder)]
    )
    folder = str(request.folder.relative_to(config.workdir_path.resolve()))
    with recorded_run(
        ledger,
        run_id=extract_id,
        command=EXTRACT_COMMAND,
        purpose="audit extract",
        inputs={request.table: route.version},
        parameters={
            "table": request.table,
            "at": request.at.isoformat(),
            "where": request.where,
            "folder": folder,
            "route": route.route,
        },
    ) as run:
        request.folder.mkdir(parents=True, exist_ok=True)
        if progress:
            progress(f"writing {len(rows)} row(s) to {request.folder}")
        manifest = ExtractManifest(
            extract_id=extract_id,
            table=request.table,
            at=request.at,
            version=route.version,
            route="a" if route.route == "a" else "b",
            routes_agree=answer.routes_agree,
            where=request.where,
            rows=len(rows),
            files=write_parts(request.folder, rows, arrow_schema(fields, hidden)),
            pseudonymised=hidden,
            pseudonymisation=PSEUDONYMISATION,
            withheld=withheld,
            created_at=now,
        )
        path = request.folder / MANIFEST_NAME
        path.write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
        manifest_sha256 = sha256_of(path)
        ledger.writer.append(
            AuditExtract(run_id=extract_id, folder=folder, manifest=manifest, manifest_sha256=manifest_sha256)
        )
        run.counts.update(
            {
                "rows": len(rows),
                "files": len(manifest.files),
                "rows_withheld_as_erased": sum(withheld.values()),
            }
        )
    log.info(
        "extract %s: %d row(s) of %s at %s", extract_id, len(rows), request.table, request.at.isoformat()
    )
    said = tuple(f"route {r.route}: {r.note}" for r in answer.routes.values() if r.note)
    return ExtractResult(manifest, str(request.folder), manifest_sha256, said)


# -- what an erasure does with extracts ------------------------------------------------------------


@dataclass(frozen=True)
class RecordedExtract:
    """An extract the ledger knows of (its recorded run's start, so a crashed one too)."""

    extract_id: str
    table: str
    folder: str
    """Relative to the work dir."""


def extracts_of(ledger: Ledger, tables: Iterable[str], workdir: Path) -> tuple[RecordedExtract, ...]:
    """Every extract recorded in the ledger of one of ``tables`` whose folder is still there.

    An erasure cannot tell which extracts hold the subject (their pseudonyms were salted with
    a salt kept nowhere), so it takes every extract of a table that held the subject in any
    retained version: a correlation row is never deleted (erasure aside) and a subject's
    entity rows stay under some entity id in every version, so a table whose history never
    held the subject could not have given it to an extract."""
    wanted = frozenset(tables)
    found = []
    for entry in ledger.reader.entries(kind="run_started"):
        if not isinstance(entry, RunStarted) or entry.command != EXTRACT_COMMAND:
            continue
        table, folder = entry.parameters.get("table"), entry.parameters.get("folder")
        if (
            isinstance(table, str)
            and isinstance(folder, str)
            and table in wanted
            and (workdir / folder).exists()
        ):
            found.append(RecordedExtract(entry.run_id, table, folder))
    return tuple(found)


def delete_extracts(extracts: Iterable[RecordedExtract], workdir: Path) -> dict[str, str]:
    """Delete each extract's folder (a rerun finds nothing left to delete); returns extract id
    -> folder. Deleted, not regenerated: see docs/guides/compliance.md, "Redacted audit extracts"."""
    deleted = {}
    for found in extracts:
        shutil.rmtree(workdir / found.folder, ignore_errors=True)
        deleted[found.extract_id] = found.folder
        log.info("erasure: deleted extract %s (%s, %s)", found.extract_id, found.table, found.folder)
    return dict(sorted(deleted.items()))
