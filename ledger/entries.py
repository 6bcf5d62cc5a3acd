"""The typed, immutable entries of the provenance ledger.

Every entry is a frozen pydantic model with a ``kind`` discriminator. In the ledger table an
entry becomes one row: ``kind`` and ``run_id`` are columns, every other field goes into
``body`` as canonical JSON (:func:`lakehouse.digest.canonical_json`), so one entry has
exactly one text and therefore one hash. :func:`parse_entry` turns a row back into the
typed entry.

``entry_id`` is content-addressed (:func:`entry_id_of`): the same fact recorded twice has
the same id, which is how :class:`ledger.writer.LedgerWriter` makes a rerun idempotent.

``refs`` (:meth:`LedgerEntryBase.refs`) are short, queryable labels of what an entry is
about, stored in the ``refs`` column from schema v2 on: ``out:<table>@<version>`` for a
version an entry produced or made current, ``in:<table>@<version>`` for an input read,
``engine:<name>@<version>`` for an engine run or declared.
"""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    Field,
    JsonValue,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from lakehouse.digest import canonical_json, digest_of
from lakehouse.errors import LedgerError
from lakehouse.models import StrictModel
from ledger.identity import EngineIdentity, InputRead, OutputWritten


def out_ref(table: str, version: int) -> str:
    """The ref of a table version an entry produced or made current."""
    return f"out:{table}@{version}"


def in_ref(table: str, version: int) -> str:
    """The ref of a table version an entry read."""
    return f"in:{table}@{version}"


def engine_ref(identity: EngineIdentity) -> str:
    """The ref of an engine version."""
    return f"engine:{identity.ref}"


class LedgerEntryBase(StrictModel):
    """Fields and behaviour every entry shares."""

    kind: str
    run_id: str | None = None
    """The run the entry belongs to (None for entries outside any run)."""

    def refs(self) -> tuple[str, ...]:
        """Queryable labels of the table versions and engines this entry is about."""
        return ()

    def body(self) -> str:
        """Canonical JSON of every field except ``kind`` and ``run_id`` (stored as columns)."""
        return canonical_json(self.model_dump(mode="json", exclude={"kind", "run_id"}))

    def entry_id(self) -> str:
        """Content address of the entry: equal facts have equal ids."""
        return entry_id_of(self.kind, self.run_id, self.body())


class _InRun(LedgerEntryBase):
    run_id: str = Field(min_length=1)


class EngineDeclared(LedgerEntryBase):
    """A new engine version was declared in ``conf/engines.yaml``."""

    kind: Literal["engine_declared"] = "engine_declared"
    engine: EngineIdentity
    implementation: str
    parameters: dict[str, JsonValue] = Field(default_factory=dict)
    effective_from: date
    description: str = ""

    def refs(self) -> tuple[str, ...]:
        return (engine_ref(self.engine),)


class LedgerSchemaChanged(LedgerEntryBase):
    """The ledger table itself was created or upgraded to a schema version (a migration)."""

    kind: Literal["ledger_schema"] = "ledger_schema"
    schema_version: int = Field(ge=1)
    migration: str
    description: str
    columns_added: tuple[str, ...] = ()


class RunStarted(_InRun):
    """A run began: what it is for and exactly what it reads and runs."""

    kind: Literal["run_started"] = "run_started"
    command: str
    purpose: str = Field(min_length=1)
    """Why the run exists: ``correction`` (may publish after approval), ``comparison``
    (never publishes), or an operational purpose such as ``ingest`` or ``build``."""
    engines: tuple[EngineIdentity, ...] = ()
    inputs: dict[str, InputRead] = Field(default_factory=dict)
    """Input identity: table -> version/snapshot actually read and the range read."""
    parameters: dict[str, JsonValue] = Field(default_factory=dict)
    plan: str | None = None

    def refs(self) -> tuple[str, ...]:
        found = {in_ref(t, i.version) for t, i in self.inputs.items()}
        found.update(engine_ref(e) for e in self.engines)
        return tuple(sorted(found))

    def identity_digest(self) -> str:
        """Digest of input identity plus transformation identity (not purpose or command)."""
        return digest_of(
            {
                "inputs": {t: i.model_dump(mode="json") for t, i in self.inputs.items()},
                "engines": sorted(e.digest for e in self.engines),
            }
        )


class RunFinished(_InRun):
    """A run ended: its status, the versions it wrote and its counts."""

    kind: Literal["run_finished"] = "run_finished"
    status: Literal["ok", "failed"]
    outputs: dict[str, OutputWritten] = Field(default_factory=dict)
    counts: dict[str, int] = Field(default_factory=dict)
    error: str | None = None

    @model_validator(mode="after")
    def _error_iff_failed(self) -> RunFinished:
        if self.status == "failed" and not self.error:
            raise ValueError("a failed run needs an error message")
        if self.status == "ok" and self.error:
            raise ValueError("a run that finished ok cannot carry an error")
        return self

    def refs(self) -> tuple[str, ...]:
        return tuple(sorted(out_ref(t, o.version) for t, o in self.outputs.items()))


class DiffManifest(_InRun):
    """The diff of a candidate against serving, stored for audit and rollback."""

    kind: Literal["diff_manifest"] = "diff_manifest"
    table: str
    candidate: str
    base_version: int | None
    candidate_version: int | None = None
    counts: dict[str, int]
    """At least added / removed / changed / unchanged."""
    partitions: tuple[str, ...] = ()
    manifest_digest: str
    location: str | None = None
    """Where the full per-key manifest is stored, if outside the ledger."""


class ReconciliationDecision(_InRun):
    """The verdict of independent checks on a candidate."""

    kind: Literal["reconciliation_decision"] = "reconciliation_decision"
    table: str
    verdict: Literal["publish", "investigate", "repair", "suppress", "rollback"]
    affected_range: dict[str, JsonValue] = Field(default_factory=dict)
    old_total: Decimal | None = None
    candidate_total: Decimal | None = None
    expected_delta: Decimal | None = None
    residual_delta: Decimal | None = None
    first_bad_partition: str | None = None
    failed_invariant: str | None = None
    owner: str
    checks: dict[str, JsonValue] = Field(default_factory=dict)


class QualityComparison(_InRun):
    """How good the old and the new engine version of a replay are, side by side.

    Measured against labelled truth when the data has one (``basis = ground_truth``:
    identities' true persons and true shared-asset groups), otherwise recorded with
    ``basis = none`` and the reason, so the absence of a measurement is on record too.
    ``report`` holds the figures (``workloads.evaluation.QualityReport.to_dict``).
    """

    kind: Literal["quality_comparison"] = "quality_comparison"
    table: str
    basis: Literal["ground_truth", "none"]
    old_engine: str
    new_engine: str
    report: dict[str, JsonValue] = Field(default_factory=dict)


class CalibrationMeasured(_InRun):
    """How well one engine release's probabilities matched the outcomes that arrived later (W5).

    One per ``lakehouse calibrate`` run: per scope (a correlation type) the figures before
    and after the fitted calibrator (``workloads.evaluation.calibration``), whether the
    scope's ECE passed its declared threshold (a divergence, flagged), and the registered
    calibrator model version, or why none was fitted. Figures only, never an identifier.
    """

    kind: Literal["calibration_measured"] = "calibration_measured"
    engine: str
    table: str
    label_horizon_days: int
    scopes: dict[str, dict[str, JsonValue]] = Field(default_factory=dict)
    flagged: tuple[str, ...] = ()
    """Scopes whose ECE exceeded their threshold."""


class CommunitiesMeasured(_InRun):
    """How well one community release's communities recovered the true rings.

    One per ``lakehouse communities`` run: ``basis = ground_truth`` with the figures
    (``workloads.evaluation.communities.CommunityQuality.to_dict``: adjusted Rand index,
    pairwise precision and recall over ring members, each ring's share in its best community,
    false communities outside rings and households) when the data has labelled truth;
    otherwise ``basis = none`` and the reason in ``note``. Figures and ring names only,
    never an identifier.
    """

    kind: Literal["communities_measured"] = "communities_measured"
    engine: str
    table: str
    basis: Literal["ground_truth", "none"]
    note: str = ""
    report: dict[str, JsonValue] = Field(default_factory=dict)


class Approval(_InRun):
    """A person approved (or rejected) a run's candidate for publication."""

    kind: Literal["approval"] = "approval"
    approver: str = Field(min_length=1)
    decision: Literal["approved", "rejected"]
    scope: str
    """What was approved: a plan id, a candidate, a table."""
    reason: str = ""
    approved_at: AwareDatetime


class Publication(_InRun):
    """Candidates became what readers see: table -> version, effective from a moment."""

    kind: Literal["publication"] = "publication"
    tables: dict[str, int]
    """Serving version (Delta) / snapshot id (Iceberg) per published table."""
    previous: dict[str, int | None] = Field(default_factory=dict)
    """Serving version per table before publication (the rollback target)."""
    effective_at: AwareDatetime
    candidate: str | None = None
    built_by_run: str | None = None
    """The run that built the candidate, when it is not the publishing run itself."""

    def refs(self) -> tuple[str, ...]:
        return tuple(sorted(out_ref(t, v) for t, v in self.tables.items()))


class Supersession(_InRun):
    """Published rows were replaced by a newer version; the old ones are kept."""

    kind: Literal["supersession"] = "supersession"
    table: str
    key: str
    """What was superseded: a key, key range or partition."""
    old: str
    new: str
    reason: str = Field(min_length=1)
    count: int | None = None


class Notification(_InRun):
    """One consumer was told about one decision version, exactly once."""

    kind: Literal["notification"] = "notification"
    consumer: str
    table: str
    version: int
    decision_version: str
    idempotency_key: str
    channel: str = "outbox"


class Rollback(_InRun):
    """Serving was moved back to the content of an earlier version."""

    kind: Literal["rollback"] = "rollback"
    table: str
    from_version: int
    to_version: int
    new_version: int
    """The version readers see after the rollback (equal to ``to_version`` for Iceberg)."""
    reason: str = Field(min_length=1)

    def refs(self) -> tuple[str, ...]:
        return (out_ref(self.table, self.new_version),)


class ErasedIn(StrictModel):
    """What an erasure did in one table: rows deleted, history purged, files gone."""

    rows: int = Field(ge=0)
    """Rows erased from the current version and open candidates (deleted, or redacted)."""
    redacted: tuple[str, ...] = ()
    """The columns replaced by ``redacted:<certificate>`` when the rows were kept (a Gold
    correlation stays a fact about its other side); empty: the rows were deleted."""
    version: int | None = None
    """The current version after the erasure (None: nothing to erase there)."""
    versions_purged: tuple[int, ...] = ()
    """Retained versions (snapshots) that held the subject and can no longer be read."""
    files: tuple[str, ...] = ()
    """Data files that held the subject; physically gone."""
    actions: tuple[str, ...] = ()
    """What was done to the table's history (tags dropped, snapshots expired, files deleted)."""


class ErasureVerification(StrictModel):
    """The independent scan after an erasure: every file under the scanned roots."""

    roots: tuple[str, ...]
    files_scanned: int = Field(ge=0)
    hits: tuple[str, ...] = ()
    """Where an identifier of the subject was still found (``path: column``); empty to pass."""

    @property
    def passed(self) -> bool:
        return not self.hits


class ErasureProgress(_InRun):
    """One step of an erasure done (the work files redacted, or one table erased and purged),
    recorded as it finishes: a rerun after a crash completes the same erasure, under the same
    certificate id, and its certificate lists what every run did."""

    kind: Literal["erasure_progress"] = "erasure_progress"
    certificate_id: str
    table: str | None = None
    erased: ErasedIn | None = None
    work_files: tuple[str, ...] = ()
    extracts: dict[str, str] = Field(default_factory=dict)
    """Audit extracts deleted (extract id -> its folder under the work dir)."""


class ErasureCertificate(_InRun):
    """A data subject was erased everywhere the lakehouse holds data, and an independent scan
    found no identifier of the subject left. Never holds an identifier in clear: the subject
    and each identifier are salted sha256 digests (the salt is here, so the scan can be
    re-run from the certificate alone: ``lakehouse erase --verify``)."""

    kind: Literal["erasure_certificate"] = "erasure_certificate"
    certificate_id: str
    request_id: str = Field(min_length=1)
    reason: str = Field(min_length=1)
    subject_digest: str
    salt: str
    identifier_digests: tuple[str, ...]
    identifiers: dict[str, int]
    """How many identifiers of each kind were found (emails, orders, entities)."""
    tables: dict[str, ErasedIn]
    work_files: tuple[str, ...] = ()
    """Files under the work dir (review files) the subject was redacted from."""
    extracts: dict[str, str] = Field(default_factory=dict)
    """Audit extracts of a table that held the subject, deleted (extract id -> folder under
    the work dir): their pseudonyms cannot be traced back to the subject, so every extract of
    such a table goes (``lakehouse extract`` makes a new one, without the subject)."""
    kept: dict[str, str] = Field(default_factory=dict)
    """What was deliberately not touched, and why."""
    completes: tuple[str, ...] = ()
    """Earlier runs of the same request that stopped (failed or crashed) before a certificate:
    this erasure completed their work and verified against their identifiers too."""
    verification: ErasureVerification
    completed_at: AwareDatetime

    def refs(self) -> tuple[str, ...]:
        return tuple(
            sorted(out_ref(t, e.version) for t, e in self.tables.items() if e.version is not None and e.rows)
        )


class TableMaintained(StrictModel):
    """What ``lakehouse maintain`` did to one table, with what it kept and why."""

    zone: str
    format: str
    owner: str
    """Who answers for the table's layout: its declared owner, or the policy's."""
    compacted_to: int | None = None
    """The version compaction wrote (the rows unchanged); None: not compacted."""
    expired_before: AwareDatetime | None = None
    """History older than this was expired (Iceberg) or vacuumed (Delta); None: none."""
    kept: tuple[str, ...] = ()
    """What was left alone, and the rule or state that keeps it."""
    live_files_before: int = Field(ge=0)
    live_files_after: int = Field(ge=0)
    stored_files_before: int = Field(ge=0)
    stored_files_after: int = Field(ge=0)
    stored_bytes_before: int = Field(ge=0)
    stored_bytes_after: int = Field(ge=0)


class MaintenanceDone(_InRun):
    """A maintenance run applied the retention and compaction policies, table by table."""

    kind: Literal["maintenance"] = "maintenance"
    owner: str = Field(min_length=1)
    tables: dict[str, TableMaintained]

    def refs(self) -> tuple[str, ...]:
        return tuple(
            sorted(out_ref(t, m.compacted_to) for t, m in self.tables.items() if m.compacted_to is not None)
        )


class ExtractFile(StrictModel):
    """One file of an audit extract: its digest and size, as its manifest lists it."""

    sha256: str
    rows: int = Field(ge=0)
    bytes: int = Field(ge=0)


class ExtractManifest(StrictModel):
    """What an audit extract's ``manifest.json`` says: the answer as known at ``at``, which
    version and route gave it, the filter, and every file by digest. Holds no identifier (the
    filter may not name one)."""

    extract_id: str
    table: str
    at: AwareDatetime
    version: int | None
    """The table version read (route (a): the current one; route (b): the one published at T)."""
    route: Literal["a", "b"]
    routes_agree: bool | None
    where: str | None = None
    rows: int = Field(ge=0)
    files: dict[str, ExtractFile]
    format: str = "parquet"
    pseudonymised: tuple[str, ...]
    """The columns whose values are pseudonyms."""
    pseudonymisation: str
    """How the pseudonyms were made (the salt itself is kept nowhere)."""
    withheld: dict[str, int] = Field(default_factory=dict)
    """Rows left out because they name a subject erased under a certificate (per certificate)."""
    created_at: AwareDatetime


class AuditExtract(_InRun):
    """A redacted audit extract was written (``lakehouse extract``): identifiers pseudonymised
    with a salt kept nowhere, erased subjects left out. Its manifest as written, with the
    manifest's own sha256, so a file or manifest changed after delivery is detectable."""

    kind: Literal["audit_extract"] = "audit_extract"
    folder: str
    """The extract's folder, relative to the work dir."""
    manifest: ExtractManifest
    manifest_sha256: str

    def refs(self) -> tuple[str, ...]:
        read = self.manifest.version
        return (in_ref(self.manifest.table, read),) if read is not None else ()


class LegalHold(LedgerEntryBase):
    """A legal hold on a data subject was placed or released: while it is placed, the subject
    may not be erased. Outside any run. Like a certificate, it names the subject only by a
    salted digest of its key (the address as every resolver keys it, or an entity id)."""

    kind: Literal["legal_hold"] = "legal_hold"
    hold_id: str = Field(min_length=1)
    action: Literal["placed", "released"]
    by: str = Field(min_length=1)
    reason: str = Field(min_length=1)
    salt: str
    subject_digest: str
    at: AwareDatetime


LedgerEntry = Annotated[
    EngineDeclared
    | LedgerSchemaChanged
    | RunStarted
    | RunFinished
    | DiffManifest
    | ReconciliationDecision
    | QualityComparison
    | CalibrationMeasured
    | CommunitiesMeasured
    | Approval
    | Publication
    | Supersession
    | Notification
    | Rollback
    | ErasureProgress
    | ErasureCertificate
    | MaintenanceDone
    | LegalHold
    | AuditExtract,
    Field(discriminator="kind"),
]
"""Any ledger entry, discriminated by ``kind``."""

ENTRY_TYPES: tuple[type[LedgerEntryBase], ...] = (
    EngineDeclared,
    LedgerSchemaChanged,
    RunStarted,
    RunFinished,
    DiffManifest,
    ReconciliationDecision,
    QualityComparison,
    CalibrationMeasured,
    CommunitiesMeasured,
    Approval,
    Publication,
    Supersession,
    Notification,
    Rollback,
    ErasureProgress,
    ErasureCertificate,
    MaintenanceDone,
    LegalHold,
    AuditExtract,
)
KINDS: tuple[str, ...] = tuple(t.model_fields["kind"].default for t in ENTRY_TYPES)
"""Every entry kind this code knows."""

_ADAPTER: TypeAdapter[Any] = TypeAdapter(LedgerEntry)


def entry_id_of(kind: str, run_id: str | None, body: str) -> str:
    """The content address of an entry (128 bits of sha256, hex)."""
    return digest_of({"kind": kind, "run_id": run_id, "body": body})[:32]


def parse_entry(kind: str, run_id: str | None, body: str) -> LedgerEntryBase:
    """The typed entry stored as (kind, run_id, body); refuses unknown kinds and bad bodies."""
    if kind not in KINDS:
        raise LedgerError(
            f"ledger entry kind {kind!r} is unknown to this code (known: {', '.join(KINDS)}); "
            f"upgrade lakehouse-replay"
        )
    try:
        fields = json.loads(body)
    except json.JSONDecodeError as exc:
        raise LedgerError(
            f"ledger entry body of kind {kind!r} is not JSON ({exc.msg}); run ledger verify"
        ) from None
    if not isinstance(fields, dict):
        raise LedgerError(f"ledger entry body of kind {kind!r} is not a JSON object; run ledger verify")
    try:
        entry: LedgerEntryBase = _ADAPTER.validate_python({**fields, "kind": kind, "run_id": run_id})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or "body"
        raise LedgerError(f"ledger entry of kind {kind!r} has an invalid {where}: {first['msg']}") from None
    return entry
