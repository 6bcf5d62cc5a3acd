"""W6: erase one data subject from every table, every retained version and every work file,
then prove it with a scan that shares no code with the erasure.

The steps (``lakehouse erase``):

1. **Find** every identifier of the subject in the retained history
   (:func:`~workloads.compliance.subject.find_subject`).
2. **Locate** (:func:`locate`): in every table :data:`~workloads.compliance.subject.TREATMENTS`
   covers, every retained version and open candidate, the rows and data files that hold the
   subject (its rows, and other persons' rows under an entity id it shares with them); every
   tag on such a version; every file under the work dir (replay review files) that names an
   identifier. A dry run stops here and writes nothing.
3. **Redact** the work files: each identifier becomes ``redacted:<certificate id>``; then
   **delete the audit extracts** of every table that held the subject
   (:func:`~workloads.compliance.extract.extracts_of`: their pseudonyms cannot be traced to
   the subject, so every extract of such a table goes).
4. **Erase** the rows from each open candidate and the current version (one MERGE each,
   copy-on-write: the files holding the rows are rewritten without them; Gold correlations
   are redacted instead, :data:`~workloads.compliance.subject.REDACTIONS`; an entity id the
   subject shares with other persons is re-keyed in their rows in the same MERGE), table by
   table, Silver last (:func:`erasure_order`);
5. **Purge** each table's history right after its erasure: the old files are made
   physically gone, with exactly the versions that reference them
   (:meth:`lakehouse.tables.Table.purge`). Versions that never held the subject stay readable.
6. **Verify** independently (:mod:`workloads.compliance.scan`): every file under the work
   dir and the warehouse, Parquet by its rows and footers, everything else by its bytes,
   searched for the salted digest of every identifier. A single hit fails the erasure
   (exit 4) and no certificate is written.
7. **Certify**: an ``erasure_certificate`` ledger entry with digests only (see
   :class:`ledger.ErasureCertificate`).

The ledger itself is never rewritten (it is hash-chained): it must simply never hold an
identifier of a subject, and the verification scans its files like any other.

A crash at any step is recovered by running the same request again (:class:`ErasureStep`
names the steps a test crashes at): the rerun finds what is left (Silver, where the
subject's orders and entity ids are found, is erased last, so everything erased after it
is still found), verifies against the identifiers of every earlier run of the request as
well (:func:`unfinished_attempt`), and its certificate names the runs it completed. Nothing
reports the erasure complete before the verification passed.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Final

from lakehouse.errors import DataQualityError, InjectedFailure, UsageError
from lakehouse.tables import TableRegistry
from lakehouse.tables.base import Search, file_path, files_matching_tables
from ledger import ErasedIn, ErasureCertificate, ErasureProgress, ErasureVerification, Ledger, RunStarted
from ledger.chain import LedgerRecord
from ledger.timeline import erasure_certificates
from workloads.compliance.extract import delete_extracts, extracts_of
from workloads.compliance.holds import open_holds, refuse_if_held
from workloads.compliance.scan import identifier_digest, scan
from workloads.compliance.subject import (
    REDACTIONS,
    TREATMENTS,
    Subject,
    addresses_of,
    check_entity,
    check_text,
    email_key,
    find_subject,
    key_row,
    refuse_text_naming,
    rekeys,
    tables_with_rules,
    unlinked_id,
)
from workloads.runs import RUN_STAMP, new_run_id, recorded_run
from workloads.vocabulary import TableName, redacted_as

log = logging.getLogger(__name__)

Progress = Callable[[str], None]

TEXT_SUFFIXES: Final = frozenset({".json", ".jsonl", ".csv", ".txt", ".md", ".yaml", ".yml"})
"""Work files the erasure redacts (review files, extracts); data files belong to tables."""

SECRETS_DIR: Final = ".erasure-secrets"
"""Under the work dir: one secret per unfinished erasure request (:func:`request_secret`)."""


class ErasureIncomplete(DataQualityError):
    """The independent scan still found the subject: nothing reports the erasure as complete."""


@dataclass(frozen=True)
class TablePlace:
    """Where one table holds the subject: per retained version, per candidate, per tag."""

    table: str
    current: int | None
    current_rows: int = 0
    """Rows of the subject the current version serves."""
    versions: Mapping[int, int] = field(default_factory=dict)
    """Retained version -> rows of the subject in it."""
    files: Mapping[str, int] = field(default_factory=dict)
    """Data file -> rows of the subject in it (any version or candidate)."""
    candidates: Mapping[str, int] = field(default_factory=dict)
    """Open candidate -> rows of the subject in it."""
    tags: tuple[str, ...] = ()
    """Tags on versions that hold the subject (they must go for the versions to go)."""

    @property
    def holds(self) -> bool:
        return bool(self.versions or self.candidates)


@dataclass(frozen=True)
class Places:
    """Everything that holds the subject; what a dry run lists and an erasure clears."""

    identifiers: Mapping[str, int]
    """How many identifiers of each kind the subject has (never the values: this is printed)."""
    tables: tuple[TablePlace, ...]
    work_files: Mapping[str, int]
    """Work file -> number of identifier occurrences in it."""
    extracts: Mapping[str, str] = field(default_factory=dict)
    """Audit extracts of a table that held the subject (extract id -> folder under the work
    dir): the erasure deletes them."""

    @property
    def empty(self) -> bool:
        return not self.work_files and not self.extracts and not any(t.holds for t in self.tables)


@dataclass(frozen=True)
class ErasureRequest:
    """What the requester states; checked before Spark starts."""

    request_id: str
    reason: str
    email: str | None = None
    entity: str | None = None
    dry_run: bool = False

    def __post_init__(self) -> None:
        if not self.dry_run and not self.request_id.strip():
            raise UsageError("--request is missing: name the erasure request (its id in your ticket system)")
        if not self.dry_run and not self.reason.strip():
            raise UsageError("--reason is missing: say why the subject is erased (the legal basis)")
        for flag, text in (("--request", self.request_id), ("--reason", self.reason)):
            if text or not self.dry_run:
                check_text(flag, text)  # kept for good: one printable line of bounded length
        if self.email is not None:
            email_key(self.email)  # not an address the lakehouse can erase: exit 2 before Spark
        if (self.email is None) == (self.entity is None):
            raise UsageError("name the subject with exactly one of --subject-email and --entity")
        if self.entity is not None:
            check_entity(self.entity)

    @property
    def subject_key(self) -> str:
        """The key asked for, as holds and resolvers key it (an address normalised, an entity id trimmed)."""
        return email_key(self.email) if self.email is not None else str(self.entity).strip()


@dataclass(frozen=True)
class ErasureResult:
    """What ``lakehouse erase`` reports: the places found, and the certificate once written."""

    places: Places
    dry_run: bool
    certificate: ErasureCertificate | None = None


@dataclass(frozen=True)
class Roots:
    """Where this lakehouse keeps files: what the erasure redacts and the verification scans."""

    tables: tuple[Path, ...]
    """Every table's folders (data, logs, metadata, candidates)."""
    work: tuple[Path, ...]
    """Its files in the work dir: the review folders of its runs, and every other entry of the
    work dir that is neither table storage, another run's review, nor the deliveries."""
    skip: tuple[Path, ...]
    """Inside the roots but not this lakehouse's: the deliveries (the partners' files)."""

    @property
    def all(self) -> tuple[Path, ...]:
        return self.tables + self.work


def lakehouse_roots(registry: TableRegistry, ledger: Ledger, deliveries: Path) -> Roots:
    """Where this lakehouse (this instance, in a shared catalog and warehouse) keeps files.

    Other instances' tables and reviews sharing the work dir are other lakehouses: an erasure
    there is theirs to run, so they are neither touched nor scanned here.
    """
    from workloads.replay.review import review_dir

    workdir = registry.config.workdir_path
    tables = tuple(dict.fromkeys(Path(file_path(loc)) for t in registry for loc in t.storage_locations()))
    runs = {r.run_id for r in ledger.reader.records() if r.run_id}
    reviews = tuple(p for p in (review_dir(registry, run) for run in sorted(runs)) if p.exists())
    shared = {workdir / "warehouse", workdir / "replays", workdir / "spark-warehouse", deliveries.resolve()}
    loose = (
        tuple(e for e in sorted(workdir.iterdir()) if e.resolve() not in shared) if workdir.is_dir() else ()
    )
    return Roots(tables=tables, work=reviews + loose, skip=(deliveries.resolve(),))


def locate(
    registry: TableRegistry, subject: Subject, roots: Roots, progress: Progress | None = None
) -> Places:
    """Every place that holds the subject (step 2 of the module): reads only, writes nothing."""
    keys = key_row(registry.spark, subject).localCheckpoint() if not subject.empty else None
    tables = {name: registry.get(name) for name in tables_with_rules(registry)}
    current = {name: t.current_version() if t.exists() else None for name, t in tables.items()}
    searches: dict[str, Search] = {}
    for name, table in tables.items():
        if keys is None or current[name] is None:
            continue
        if progress:
            progress(f"searching {name}")
        searches[name] = Search(
            table, TREATMENTS[name].match, table.retained_versions(), table.list_candidates()
        )
    if progress and searches:
        progress(f"searching {len(searches)} tables' versions and candidates in one Spark job")
    found = (
        dict(zip(searches, files_matching_tables(keys, list(searches.values())), strict=True))
        if keys is not None
        else {}
    )
    places = []
    for name, table in tables.items():
        if name not in found:
            places.append(TablePlace(table=name, current=current[name]))
            continue
        versions = {v: sum(files.values()) for v, files in found[name].versions.items() if files}
        in_candidates = {c: sum(files.values()) for c, files in found[name].candidates.items() if files}
        files = {
            f: n
            for held in (*found[name].versions.values(), *found[name].candidates.values())
            for f, n in held.items()
        }
        tags = tuple(sorted(t.name for t in table.tags() if t.version in versions))
        now = current[name]  # searched: the table has a current version
        rows = versions.get(now, 0) if now is not None else 0
        places.append(TablePlace(name, now, rows, dict(sorted(versions.items())), files, in_candidates, tags))
    work = _work_files(roots, subject)
    return Places(identifiers=subject.counts(), tables=tuple(places), work_files=work)


def _work_files(roots: Roots, subject: Subject) -> dict[str, int]:
    """Text files of this lakehouse outside table storage (review files) naming the subject."""
    if subject.empty:
        return {}
    pattern = _identifier_pattern(subject)
    found: dict[str, int] = {}
    for root in roots.work:
        for path in sorted(root.rglob("*")) if root.is_dir() else [root]:
            if path.suffix not in TEXT_SUFFIXES or not path.is_file():
                continue
            if any(s == path or s in path.parents for s in roots.skip):
                continue
            hits = len(pattern.findall(path.read_text(encoding="utf-8", errors="replace")))
            if hits:
                found[str(path)] = hits
    return found


def _identifier_pattern(subject: Subject) -> re.Pattern[str]:
    """Any identifier as a whole token (not inside a longer address or id)."""
    edge = r"a-z0-9._%+@\-"
    alternatives = "|".join(re.escape(i) for i in sorted(subject.identifiers, key=len, reverse=True))
    return re.compile(rf"(?<![{edge}])(?:{alternatives})(?![{edge}])", re.IGNORECASE)


class ErasureStep(StrEnum):
    """Where a crash can be injected into an erasure (``fail_at``), in the order the steps run."""

    AFTER_WORK_FILES = "after_work_files"
    """The review files are redacted and the audit extracts deleted; no table is touched."""
    AFTER_FIRST_MERGE = "after_first_merge"
    """The first table's rows are erased; its old files and versions are still there."""
    AFTER_FIRST_TABLE = "after_first_table"
    """The first table is erased and purged; the others are not touched."""
    AFTER_TABLES = "after_tables"
    """Every table is erased and purged; nothing is verified."""
    AFTER_VERIFICATION = "after_verification"
    """The scan found nothing; no certificate is written."""


def _crash(chosen: ErasureStep | None, here: ErasureStep, run_id: str) -> None:
    if chosen is here:
        log.warning("injecting failure %s in erasure %s", here.value, run_id)
        raise InjectedFailure(
            f"injected failure {here.value} in erasure {run_id}; rerun the same command to recover"
        )


def erasure_order(places: Sequence[TablePlace]) -> list[TablePlace]:
    """The tables to erase, Silver last: the subject's orders and entity ids are found in Silver
    (:func:`find_subject`), so a rerun after a crash still finds every identifier the tables
    not yet erased are matched by."""
    return sorted((p for p in places if p.holds), key=lambda p: p.table == TableName.SILVER_EVENTS)


def erase(
    registry: TableRegistry,
    ledger: Ledger,
    request: ErasureRequest,
    *,
    deliveries: Path,
    progress: Progress | None = None,
    fail_at: ErasureStep | None = None,
) -> ErasureResult:
    """Run ``lakehouse erase`` (the module's steps); a dry run stops after locating and ignores
    legal holds. An erasure of a subject under an open legal hold is refused (exit 2, naming
    the hold) before anything is written: by the key asked for before the subject is searched,
    then by every identifier found and every address their entities hold (a merged entity
    holds other addresses' data too). A request id or reason that names the subject is refused
    (exit 2): it would stay in the ledger and in the tables' commit history."""
    holds = {} if request.dry_run else open_holds(ledger)
    refuse_if_held(holds, [request.subject_key])
    subject = find_subject(registry, email=request.email, entity=request.entity)
    if holds:  # a shared or borrowed entity's other addresses: their rows are rewritten too
        entities = [*subject.entities, *subject.borrowed]
        refuse_if_held(holds, [*subject.identifiers, *subject.borrowed, *addresses_of(registry, entities)])
    refuse_text_naming((("--request", request.request_id), ("--reason", request.reason)), subject.identifiers)
    places = locate(registry, subject, lakehouse_roots(registry, ledger, deliveries), progress)
    workdir = registry.config.workdir_path.resolve()
    extracts = extracts_of(ledger, [p.table for p in places.tables if p.holds], workdir)
    places = replace(places, extracts={e.extract_id: e.folder for e in extracts})
    if request.dry_run:
        return ErasureResult(places=places, dry_run=True)
    now = ledger.writer.clock.now()
    run_id = new_run_id("erase", now, request.request_id)
    attempt = unfinished_attempt(ledger, request.request_id)
    # a rerun completes the first attempt's erasure: the values it redacted name that id
    certificate_id = f"erasure-{(attempt.run_ids or (run_id,))[0].split('-', 1)[1]}"
    salt = attempt.salt
    digests = tuple(sorted(set(_digests(salt, subject)) | set(attempt.digests)))
    subject_key = request.email.strip().lower() if request.email else str(request.entity)
    request_key = f"{registry.config.instance}\x1f{request.request_id}"  # instances share a work dir
    secret = request_secret(workdir, request_key)
    with recorded_run(
        ledger,
        run_id=run_id,
        command="erase",
        purpose=f"compliance erasure, request {request.request_id}",
        inputs={},
        parameters={
            "request_id": request.request_id,
            "subject_digest": identifier_digest(salt, subject_key),
            "salt": salt,
            "identifier_digests": list(digests),
        },
    ) as run:
        work_files = _redact(places.work_files, subject, certificate_id, secret)
        ledger.writer.append(
            ErasureProgress(run_id=run_id, certificate_id=certificate_id, work_files=work_files)
        )
        deleted = delete_extracts(extracts, workdir)
        ledger.writer.append(ErasureProgress(run_id=run_id, certificate_id=certificate_id, extracts=deleted))
        _crash(fail_at, ErasureStep.AFTER_WORK_FILES, run_id)
        keys = key_row(registry.spark, subject, redacted_as(certificate_id), secret).localCheckpoint()
        reason = f"erasure certificate {certificate_id}: {request.reason}"
        tables: dict[str, ErasedIn] = {}
        for place in erasure_order(places.tables):
            first = not tables
            crash = fail_at if first else None  # only the first table's merge is a crash point
            tables[place.table] = _erase_table(
                registry, place, keys, bool(subject.shared), run_id, reason, progress, crash
            )
            ledger.writer.append(
                ErasureProgress(
                    run_id=run_id,
                    certificate_id=certificate_id,
                    table=place.table,
                    erased=tables[place.table],
                )
            )
            if first:
                _crash(fail_at, ErasureStep.AFTER_FIRST_TABLE, run_id)
        _crash(fail_at, ErasureStep.AFTER_TABLES, run_id)
        roots = lakehouse_roots(registry, ledger, deliveries)
        verification = verify_digests(roots, salt, digests, progress)
        if not verification.passed:
            raise ErasureIncomplete(
                f"erasure {certificate_id} is NOT complete: the subject is still in "
                f"{len(verification.hits)} place(s), e.g. {verification.hits[0]}; no certificate written"
            )
        _crash(fail_at, ErasureStep.AFTER_VERIFICATION, run_id)
        tables = merged_tables([*attempt.done, *tables.items()])
        work_files = tuple(sorted({*attempt.work_files, *work_files}))
        deleted = dict(sorted({**attempt.extracts, **deleted}.items()))
        run.counts.update({f"{name}.rows": erased.rows for name, erased in tables.items()})
        run.outputs.update({n: e.version for n, e in tables.items() if e.version is not None and e.rows})
    certificate = ErasureCertificate(
        run_id=run_id,
        certificate_id=certificate_id,
        request_id=request.request_id,
        reason=request.reason,
        subject_digest=identifier_digest(salt, subject_key),
        salt=salt,
        identifier_digests=digests,
        identifiers=subject.counts(),
        tables=tables,
        work_files=work_files,
        extracts=deleted,
        completes=attempt.run_ids,
        kept=kept_places(deliveries),
        verification=verification,
        completed_at=ledger.writer.clock.now(),
    )
    ledger.writer.append(certificate)
    forget_request_secret(workdir, request_key)
    log.info(
        "erasure %s certified: %d table(s), %d work file(s), %d extract(s) deleted",
        certificate_id,
        len(tables),
        len(work_files),
        len(deleted),
    )
    return ErasureResult(places=places, dry_run=False, certificate=certificate)


@dataclass(frozen=True)
class Attempt:
    """Earlier runs of a request that wrote no certificate: the salt and identifier digests of
    the latest (which include its predecessors'), their run ids (oldest first), and what they
    did (their ``erasure_progress`` entries: tables erased, work files redacted)."""

    salt: str
    digests: tuple[str, ...] = ()
    run_ids: tuple[str, ...] = ()
    done: tuple[tuple[str, ErasedIn], ...] = ()
    work_files: tuple[str, ...] = ()
    extracts: Mapping[str, str] = field(default_factory=dict)


def merged_tables(done: Sequence[tuple[str, ErasedIn]]) -> dict[str, ErasedIn]:
    """What several runs did to each table, in run order, as one record per table: rows added
    up, purged versions, files and actions joined, the last run's version."""
    merged: dict[str, ErasedIn] = {}
    for table, erased in done:
        before = merged.get(table)
        if before is None:
            merged[table] = erased
            continue
        merged[table] = ErasedIn(
            rows=before.rows + erased.rows,
            redacted=tuple(dict.fromkeys((*before.redacted, *erased.redacted))),
            version=erased.version if erased.version is not None else before.version,
            versions_purged=tuple(sorted({*before.versions_purged, *erased.versions_purged})),
            files=tuple(sorted({*before.files, *erased.files})),
            actions=(*before.actions, *erased.actions),
        )
    return dict(sorted(merged.items()))


def unfinished_attempt(ledger: Ledger, request_id: str) -> Attempt:
    """The earlier runs of this request since its last certificate (they failed, or crashed),
    or a new salt.

    A rerun after a crash no longer finds what the first run already erased (the subject's
    orders and entity ids may be gone from Silver), so it verifies against the earlier runs'
    identifiers too: an erasure completes as one, whatever step it stopped at.
    """
    certified = {e.run_id for e in ledger.reader.entries(kind="erasure_certificate")}
    latest: RunStarted | None = None
    run_ids: list[str] = []
    for entry in reversed(ledger.reader.entries(kind="run_started")):
        if not isinstance(entry, RunStarted) or entry.command != "erase":
            continue
        parameters = entry.parameters
        if parameters.get("request_id") != request_id or not isinstance(parameters.get("salt"), str):
            continue
        if entry.run_id in certified:
            break  # the request's latest run completed: this is a new erasure
        latest = latest or entry
        run_ids.insert(0, entry.run_id)
    if latest is None:
        return Attempt(secrets.token_hex(16))
    found = latest.parameters.get("identifier_digests")
    digests = tuple(str(d) for d in found) if isinstance(found, list) else ()
    steps = [
        e
        for e in ledger.reader.entries(kind="erasure_progress")
        if isinstance(e, ErasureProgress) and e.run_id in run_ids
    ]
    return Attempt(
        str(latest.parameters["salt"]),
        digests,
        tuple(run_ids),
        done=tuple((s.table, s.erased) for s in steps if s.table is not None and s.erased is not None),
        work_files=tuple(sorted({f for s in steps for f in s.work_files})),
        extracts={i: f for s in steps for i, f in s.extracts.items()},
    )


def request_secret(workdir: Path, request_key: str) -> str:
    """The secret that re-keys the subject's shared entity ids and correlation ids for one
    erasure request (``request_key``: this lakehouse's instance and the request id): drawn by
    its first run, read again by a rerun after a crash (so every run maps an old id to the same
    new id), deleted once the certificate is written (:func:`forget_request_secret`). It is
    never in a table, the ledger or the certificate: nobody can map the subject's ids to the
    new ones afterwards."""
    path = _secret_path(workdir, request_key)
    if path.is_file():
        return path.read_text(encoding="ascii").strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_hex(32)
    path.write_text(secret, encoding="ascii")
    path.chmod(0o600)
    return secret


def forget_request_secret(workdir: Path, request_key: str) -> None:
    """Delete a completed request's secret (and the folder once no request has one)."""
    path = _secret_path(workdir, request_key)
    path.unlink(missing_ok=True)
    if path.parent.is_dir() and not any(path.parent.iterdir()):
        path.parent.rmdir()


def _secret_path(workdir: Path, request_key: str) -> Path:
    name = hashlib.sha256(request_key.encode("utf-8")).hexdigest()[:32]
    return workdir / SECRETS_DIR / name


def kept_places(deliveries: Path) -> dict[str, str]:
    """What an erasure leaves alone on purpose, and why (recorded in every certificate)."""
    return {
        str(deliveries): (
            "the partners' delivery files (the landing zone): source systems the lakehouse reads "
            "and does not own; not scanned"
        ),
        "ops.ledger": (
            "hash-chained and never rewritten; it holds no identifier of any subject "
            "(digests and counts only), which the scan checks"
        ),
        "shared assets": (
            "device ids, card fingerprints and IP addresses in other subjects' rows stay: they are "
            "those subjects' data too; the subject's own rows are gone with them"
        ),
        "shared entity ids": (
            "an entity id of the subject that other persons' rows hold too is re-keyed in those rows "
            "(one new id in every table, not derivable from the old); another person's own id that a "
            "resolver also gave the subject stays in that person's rows"
        ),
    }


def _erase_table(
    registry: TableRegistry,
    place: TablePlace,
    keys: object,
    shared: bool,
    run_id: str,
    reason: str,
    progress: Progress | None,
    crash: ErasureStep | None = None,
) -> ErasedIn:
    from pyspark.sql import DataFrame

    assert isinstance(keys, DataFrame)
    table = registry.get(place.table)
    if progress:
        progress(f"erasing from {place.table}")
    treatment = TREATMENTS[place.table]
    # without shared ids, a table whose rows are deleted gets a plain delete (nothing to re-key)
    redact = treatment.update if shared or place.table in REDACTIONS else None
    delete = treatment.delete if redact else None
    for name in place.candidates:
        table.erase_matching(
            keys,
            treatment.match,
            run_id=run_id,
            reason=reason,
            candidate=table.open_candidate(name, None),
            redact=redact,
            delete_when=delete,
        )
    if place.current_rows:
        table.erase_matching(
            keys, treatment.match, run_id=run_id, reason=reason, redact=redact, delete_when=delete
        )
    _crash(crash, ErasureStep.AFTER_FIRST_MERGE, run_id)
    doomed = sorted(place.versions)  # the version current before the erasure included
    actions = table.purge(doomed, sorted(place.files), note=reason)
    return ErasedIn(
        rows=place.current_rows + sum(place.candidates.values()),
        redacted=tuple(redact or ()),
        version=table.current_version(),
        versions_purged=tuple(doomed),
        files=tuple(sorted(place.files)),
        actions=tuple(actions),
    )


def _redact(
    work_files: Mapping[str, int], subject: Subject, certificate_id: str, secret: str
) -> tuple[str, ...]:
    pattern = _identifier_pattern(subject)
    replace_match = replacer(subject, certificate_id, secret)
    for name in work_files:
        path = Path(name)
        path.write_text(pattern.sub(replace_match, path.read_text(encoding="utf-8")), encoding="utf-8")
        # a Hadoop checksum sidecar (Spark-written review parts) would no longer match
        path.with_name(f".{path.name}.crc").unlink(missing_ok=True)
    return tuple(sorted(work_files))


def replacer(subject: Subject, certificate_id: str, secret: str) -> Callable[[re.Match[str]], str]:
    """What an identifier found in a work file becomes: a shared entity id or a correlation id its
    new id (as in the tables, so a review file still names the rows it reviewed), anything else
    ``redacted:<certificate>``."""
    new_ids = {old.lower(): new for old, new in rekeys(secret, subject.shared).items()}
    new_ids |= {old.lower(): unlinked_id(secret, old) for old in subject.correlations}
    redacted = redacted_as(certificate_id)
    return lambda found: new_ids.get(found.group(0).lower(), redacted)


def _digests(salt: str, subject: Subject) -> tuple[str, ...]:
    return tuple(sorted(identifier_digest(salt, i) for i in subject.identifiers))


def verify_digests(
    roots: Roots, salt: str, digests: Sequence[str], progress: Progress | None = None
) -> ErasureVerification:
    """The independent scan (:mod:`workloads.compliance.scan`) over every root of the lakehouse."""
    if progress:
        progress(f"verifying: scanning every file of {len(roots.all)} table and work folders")
    found = scan(roots.all, salt, digests, skip=roots.skip)
    return ErasureVerification(
        roots=tuple(str(r) for r in roots.all),
        files_scanned=found.files,
        hits=tuple(f"{hit.path}: {hit.where}" for hit in found.hits),
    )


CERTIFICATE_ID: Final = re.compile(rf"erasure-{RUN_STAMP}")
"""An erasure certificate's id: ``erasure-`` and the rest of its erase run's id (<UTC time>-<8 hex>)."""


def check_certificate_id(certificate_id: str) -> None:
    """``--verify CERT``: refuse an empty value or one that is not a certificate id (exit 2)."""
    if not certificate_id.strip():
        raise UsageError("--verify is empty: name an erasure certificate")
    if not CERTIFICATE_ID.fullmatch(certificate_id):
        raise UsageError(
            f"--verify {certificate_id!r} is not an erasure certificate id (erasure-<UTC time>-<8 hex>, "
            "as erase printed it)"
        )


def find_certificate(ledger: Ledger, certificate_id: str) -> ErasureCertificate:
    """The certificate named ``certificate_id`` (exit 2 naming the known ones if absent)."""
    return certificate_in(ledger.reader.records(kind="erasure_certificate"), certificate_id)


def certificate_in(records: Iterable[LedgerRecord], certificate_id: str) -> ErasureCertificate:
    """The certificate named ``certificate_id`` among the ledger's ``records`` (read by Spark, or
    without a JVM before Spark starts); exit 2 naming the latest ones if absent."""
    found = erasure_certificates(records)
    for certificate in found:
        if certificate.certificate_id == certificate_id:
            return certificate
    known = ", ".join(c.certificate_id for c in found[-5:]) or "none yet"
    raise UsageError(f"no erasure certificate {certificate_id!r} in the ledger (latest: {known})")


def reverify(
    registry: TableRegistry,
    ledger: Ledger,
    certificate: ErasureCertificate,
    deliveries: Path,
    progress: Progress | None = None,
) -> ErasureVerification:
    """``lakehouse erase --verify CERT``: the same independent scan, from the certificate alone."""
    roots = lakehouse_roots(registry, ledger, deliveries)
    return verify_digests(roots, certificate.salt, certificate.identifier_digests, progress)
