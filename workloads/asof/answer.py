"""``lakehouse asof``: what the system knew at T, by two independent routes that must agree.

* **Route (a), bitemporal + ledger.** The table's current rows, kept if they were recorded
  at or before T, not superseded by T, and written by a run the ledger says was visible
  by T (:mod:`ledger.timeline`). Survives snapshot expiry and vacuum: it reads
  only the current version.
* **Route (b), format time travel.** The version the ledger says was *published* at T
  (a build's output, a publication or a rollback; never an unpublished candidate or a
  Delta shadow write), read with the format's own time travel, current rows only.

Both are compared on row identity ``(correlation_id, run_id)`` and everything the row
asserts (its content, engine and ``recorded_at``; not its lifecycle columns, which are
*meant* to change later). A disagreement names the first differing key. Where one route
cannot answer, the answer says why (history expired, a rolled-back publication, a table
without knowledge-time columns) and the other route answers alone.

Pure apart from the reader passed in.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Final

from lakehouse.errors import ExitCode, UsageError, VersionGoneError
from lakehouse.expressions import Expr, parse_where
from ledger import LedgerRecord
from ledger.clock import utc
from ledger.timeline import RunFacts, Timeline, purged_by_erasure, timeline
from workloads.asof.readers import Reader, Scope
from workloads.gold.entity_index import INDEX, SOURCE, IndexVersion, bucket_of, index_versions, mirror_of
from workloads.vocabulary import CURRENT_STATUSES, REDACTED_PREFIX, TableName

log = logging.getLogger(__name__)

LIFECYCLE: Final[frozenset[str]] = frozenset({"status", "superseded_at", "superseded_by", "supersede_reason"})
"""Columns that change after a row is written (so they are not compared across routes)."""
CURRENT: Final[frozenset[str]] = frozenset(CURRENT_STATUSES)
BITEMPORAL: Final[frozenset[str]] = frozenset({"run_id", "recorded_at", "superseded_at", "status"})
ENTITY_COLUMNS: Final[dict[str, tuple[str, ...]]] = {
    TableName.CORRELATIONS: ("entity_a", "entity_b"),
}
DEFAULT_ENTITY_COLUMNS: Final = ("entity_id",)
ROUTES_DISAGREE_EXIT: Final = ExitCode.ROUTES_DISAGREE
INDEXES: Final[dict[str, str]] = {SOURCE: INDEX}
"""Tables with an entity index (:mod:`workloads.gold.entity_index`) that one-entity questions read."""
INDEX_ONLY: Final[frozenset[str]] = frozenset({"entity_id", "entity_bucket"})


def key_columns(columns: Sequence[str]) -> tuple[str, ...]:
    """Row identity: ``(correlation_id, run_id)`` in the correlation store, else all but lifecycle."""
    if "correlation_id" in columns and "run_id" in columns:
        return ("correlation_id", "run_id")
    return tuple(c for c in columns if c not in LIFECYCLE)


@dataclass(frozen=True)
class Route:
    """One route's outcome as the answer shows it: how many rows it found, from which
    version, or why it could not answer (its rows are compared, then the answer's)."""

    route: str
    """``a`` (bitemporal columns + ledger) or ``b`` (format time travel)."""
    available: bool
    rows: int = 0
    """How many rows the route found."""
    version: int | None = None
    note: str = ""


@dataclass(frozen=True)
class RouteRead:
    """A route's outcome with the rows it read (what :func:`asof` compares)."""

    route: Route
    rows: tuple[dict[str, Any], ...] = ()


def _read(
    name: str,
    available: bool,
    rows: Sequence[dict[str, Any]] = (),
    version: int | None = None,
    note: str = "",
) -> RouteRead:
    return RouteRead(Route(name, available, len(rows), version, note), tuple(rows))


@dataclass(frozen=True)
class AsOfAnswer:
    """What was known about a table (optionally one entity) at one instant, and why."""

    table: str
    at: datetime
    entity: str | None
    where: str | None
    reader: str
    routes: Mapping[str, Route]
    """``a`` and ``b``: each route's row count, version and note."""
    routes_agree: bool | None
    """None when only one route could answer."""
    first_difference: Mapping[str, Any] | None
    rows: tuple[dict[str, Any], ...]
    """The answer, each row with its ``provenance`` (and ``since`` when superseded after T)."""
    notes: tuple[str, ...] = ()
    redacted: Mapping[str, int] = field(default_factory=dict)
    """Rows of the answer that name an erased subject as ``redacted:<certificate>``, per
    erasure certificate (the fact is kept, the subject's identifiers are not)."""

    @property
    def route_a(self) -> Route:
        return self.routes["a"]

    @property
    def route_b(self) -> Route:
        return self.routes["b"]

    @property
    def exit_code(self) -> int:
        return ROUTES_DISAGREE_EXIT if self.routes_agree is False else ExitCode.DONE


def redactions(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """How many rows hold a value redacted by an erasure, per certificate."""
    found: dict[str, int] = {}
    for row in rows:
        certificates = {
            value[len(REDACTED_PREFIX) :]
            for value in row.values()
            if isinstance(value, str) and value.startswith(REDACTED_PREFIX)
        }
        for certificate in certificates:
            found[certificate] = found.get(certificate, 0) + 1
    return dict(sorted(found.items()))


def refuse_unanswerable(table: str, known: Sequence[str], command: str = "asof") -> None:
    """Refuse anything but a configured Gold table (not an entity index): what ``asof``, and
    so ``extract``, answer for. Needs only the configuration: refused before Spark starts."""
    gold = sorted(name for name in known if name.startswith("gold.") and name not in INDEXES.values())
    if table not in gold:
        raise UsageError(
            f"{command} answers for Gold tables only; {table!r} is not one of: {', '.join(gold)}"
        )


def check_table(reader: Reader, table: str, known: Sequence[str]) -> dict[str, str]:
    """Refuse anything but a configured Gold table; return its filterable columns."""
    refuse_unanswerable(table, known)
    return reader.columns(table)


def _content(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in LIFECYCLE}


def compare(
    a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]], keys: Sequence[str]
) -> dict[str, Any] | None:
    """The first key (in key order) whose rows differ between the routes, or None."""
    left = {tuple(r[k] for k in keys): _content(r) for r in a}
    right = {tuple(r[k] for k in keys): _content(r) for r in b}
    for key in sorted(set(left) | set(right), key=lambda k: tuple(str(v) for v in k)):
        if left.get(key) != right.get(key):
            only = left.get(key), right.get(key)
            columns = sorted({*(only[0] or {}), *(only[1] or {})})
            differing = [c for c in columns if (only[0] or {}).get(c) != (only[1] or {}).get(c)]
            return {
                "key": dict(zip(keys, key, strict=True)),
                "route_a": only[0],
                "route_b": only[1],
                "columns": differing if only[0] and only[1] else [],
            }
    return None


def _with_provenance(row: dict[str, Any], known: Timeline, at: datetime) -> dict[str, Any]:
    facts = known.runs.get(row.get("run_id") or "")
    result = {k: v for k, v in row.items() if k not in LIFECYCLE}
    result["status_at"] = "current"
    result["provenance"] = asdict(facts or RunFacts(run_id=str(row.get("run_id"))))
    superseded = row.get("superseded_at")
    if superseded is not None and utc(superseded) > at:
        result["since"] = {
            "status": row.get("status"),
            "superseded_at": superseded,
            "superseded_by": row.get("superseded_by"),
            "reason": row.get("supersede_reason"),
        }
    return result


@dataclass(frozen=True)
class EntityIndex:
    """A table's entity index and the store versions each of its versions provably mirrors."""

    table: str
    source: str
    versions: tuple[IndexVersion, ...]

    @classmethod
    def of(cls, table: str, records: Sequence[LedgerRecord], entity: str | None) -> EntityIndex | None:
        """The index to read for a one-entity question on ``table``, if it has one."""
        if entity is None or table not in INDEXES:
            return None
        return cls(INDEXES[table], table, index_versions(records))

    def version_for(self, source_version: int | None) -> IndexVersion | None:
        return mirror_of(self.versions, source_version) if source_version is not None else None

    def scope(self, scope: Scope, mirror: IndexVersion) -> Scope:
        """``scope`` as the index answers it: one entity column, one bucket."""
        assert scope.entity is not None
        bucket = (("entity_bucket", bucket_of(scope.entity, mirror.buckets)),)
        return Scope(scope.entity, ("entity_id",), scope.where, scope.known_at, bucket)

    def read(
        self, reader: Reader, scope: Scope, mirror: IndexVersion, version: int | None
    ) -> list[dict[str, Any]]:
        rows = reader.rows(self.table, self.scope(scope, mirror), version=version)
        return [{k: v for k, v in row.items() if k not in INDEX_ONLY} for row in rows]

    def via(self, mirror: IndexVersion) -> str:
        mirrored = f"{self.source}@{mirror.source_version}"
        return f"read through {self.table}@{mirror.index_version} (mirrors {mirrored})"


def read_current(
    reader: Reader, table: str, scope: Scope, index: EntityIndex | None
) -> tuple[list[dict[str, Any]], str]:
    """The table's current rows in ``scope``, through its entity index when that mirrors the
    current version; with a note saying which was read."""
    if index is not None:
        current = reader.current_version(table)
        mirror = index.version_for(current)
        if mirror is not None and reader.current_version(index.table) == mirror.index_version:
            return index.read(reader, scope, mirror, None), index.via(mirror)
        stale = f"{index.table} does not mirror {table}@{current} (no rebuild recorded since)"
        return reader.rows(table, scope), f"{stale}; read {table} itself"
    return reader.rows(table, scope), ""


def route_a(
    reader: Reader, table: str, scope: Scope, known: Timeline, at: datetime, index: EntityIndex | None = None
) -> RouteRead:
    """Bitemporal columns plus the ledger's run visibility."""
    rolled = known.rolled_back_at(at)
    if rolled is not None:
        return _read(
            "a",
            False,
            note=(
                f"at T readers saw run {rolled.run_id}'s publication (version {rolled.version}), rolled back "
                f"at {rolled.rolled_back_at.isoformat()}; its rows are no longer in the table, so the "
                f"bitemporal columns cannot reconstruct T"
            ),
        )
    candidates, via = read_current(
        reader, table, Scope(scope.entity, scope.entity_columns, scope.where, known_at=at), index
    )
    rows, unaccounted = [], 0
    for row in candidates:
        visible = known.visible_from(str(row.get("run_id")))
        if visible is None:
            unaccounted += 1
        elif visible <= at:
            rows.append(row)
    notes = [via] if via else []
    if unaccounted:
        notes.append(f"{unaccounted} rows written by runs the ledger does not know were left out")
    return _read("a", True, rows, reader.current_version(table), "; ".join(notes))


def _published_rows(
    reader: Reader, table: str, scope: Scope, version: int, index: EntityIndex | None
) -> tuple[list[dict[str, Any]], str]:
    """Rows in ``scope`` of the published ``version``: through the index version that mirrors
    it when there is one and it is still readable, else the table's own time travel."""
    plain = Scope(scope.entity, scope.entity_columns, scope.where)
    mirror = index.version_for(version) if index is not None else None
    if index is not None and mirror is not None:
        try:
            return index.read(reader, plain, mirror, mirror.index_version), index.via(mirror)
        except VersionGoneError:
            pass  # the index's history was expired: the table's own may still be there
    return reader.rows(table, plain, version=version), ""


def route_b(
    reader: Reader,
    table: str,
    scope: Scope,
    known: Timeline,
    at: datetime,
    bitemporal: bool,
    index: EntityIndex | None = None,
    purged: Mapping[tuple[str, int], str] | None = None,
) -> RouteRead:
    """The published version at T, through the format's time travel (``purged``: the
    versions erasure certificates purged, from the ledger, named when one is asked for)."""
    epoch = known.serving_at(at)
    if epoch is None:
        return _read("b", True, (), None, "no version of the table was published yet")
    try:
        rows, via = _published_rows(reader, table, scope, epoch.version, index)
    except VersionGoneError as exc:
        certificate = (purged or {}).get((table, epoch.version))
        if certificate is not None:
            return _read(
                "b",
                False,
                version=epoch.version,
                note=f"history purged by erasure certificate {certificate}: version {epoch.version} "
                f"({epoch.kind} of run {epoch.run_id}) held an erased subject",
            )
        return _read(
            "b",
            False,
            version=epoch.version,
            note=(
                f"the format's history for T is gone: version {epoch.version} ({epoch.kind} of run "
                f"{epoch.run_id}) was expired or vacuumed ({exc})"
            ),
        )
    if bitemporal:
        rows = [r for r in rows if r.get("status") in CURRENT]
    what = f"{epoch.kind} of run {epoch.run_id}"
    return _read("b", True, rows, epoch.version, f"{what}; {via}" if via else what)


def asof(
    reader: Reader,
    table: str,
    at: datetime,
    *,
    known_tables: Sequence[str],
    entity: str | None = None,
    where: str | None = None,
    use_index: bool = True,
) -> AsOfAnswer:
    """Answer "what did the system know about ``table`` (``entity``) at ``at``?" by both routes.

    A one-entity question on a table with an entity index reads the index versions that
    mirror the versions asked about (``use_index=False``: the table itself, every file).
    """
    moment = utc(at)
    columns = check_table(reader, table, known_tables)
    expr: Expr | None = parse_where(where, columns) if where else None
    bitemporal = set(columns) >= BITEMPORAL
    entity_columns = ENTITY_COLUMNS.get(table, DEFAULT_ENTITY_COLUMNS)
    scope = Scope(entity, entity_columns if entity is not None else (), expr)
    records = reader.ledger_records()
    known = timeline(records, table)
    index = EntityIndex.of(table, records, entity) if use_index else None
    b = route_b(reader, table, scope, known, moment, bitemporal, index, purged_by_erasure(records))
    notes: list[str] = []
    if bitemporal:
        a = route_a(reader, table, scope, known, moment, index)
    else:
        a = _read("a", False, note=f"{table} keeps no knowledge-time columns; only route (b) can answer")
    keys = key_columns(list(columns))
    agree: bool | None = None
    difference = None
    if a.route.available and b.route.available:
        difference = compare(a.rows, b.rows, keys)
        agree = difference is None
    if not a.route.available and not b.route.available:
        notes.append("neither route can answer for this instant")
    chosen = a if a.route.available else b
    log.info(
        "asof %s at %s (%s): route a %s, route b %s, agree %s",
        table,
        moment.isoformat(),
        reader.name,
        f"{len(a.rows)} rows" if a.route.available else "unavailable",
        f"{len(b.rows)} rows at version {b.route.version}" if b.route.available else "unavailable",
        agree,
    )
    rows = tuple(
        _with_provenance(dict(r), known, moment)
        for r in sorted(chosen.rows, key=lambda r: tuple(str(r.get(k)) for k in keys))
    )
    redacted = redactions(chosen.rows)
    notes += [
        f"{n} row(s) redacted under erasure certificate {certificate}: the erased subject's "
        f"identifiers read {REDACTED_PREFIX}{certificate}, the rest of each row is as known"
        for certificate, n in redacted.items()
    ]
    return AsOfAnswer(
        table=table,
        at=moment,
        entity=entity,
        where=where,
        reader=reader.name,
        routes={"a": a.route, "b": b.route},
        routes_agree=agree,
        first_difference=difference,
        rows=rows,
        notes=tuple(notes),
        redacted=redacted,
    )


@dataclass(frozen=True)
class EntityHistory:
    """Every version of every correlation of one entity over knowledge time."""

    table: str
    entity: str
    reader: str
    versions: tuple[dict[str, Any], ...] = field(default_factory=tuple)


def entity_history(
    reader: Reader, table: str, entity: str, *, known_tables: Sequence[str], use_index: bool = True
) -> EntityHistory:
    """The ``--history`` answer: each row version of the entity, when it became known and why it ended."""
    columns = check_table(reader, table, known_tables)
    if not set(columns) >= BITEMPORAL:
        raise UsageError(f"{table} keeps no knowledge-time columns; --history needs gold.correlations")
    records = reader.ledger_records()
    known = timeline(records, table)
    index = EntityIndex.of(table, records, entity) if use_index else None
    rows, _ = read_current(
        reader, table, Scope(entity, ENTITY_COLUMNS.get(table, DEFAULT_ENTITY_COLUMNS)), index
    )
    versions = []
    for row in rows:
        facts = known.runs.get(str(row.get("run_id")))
        visible = facts.published_at if facts else None
        recorded = utc(row["recorded_at"])
        versions.append(
            {
                **{k: row.get(k) for k in row if k not in ("evidence",)},
                "known_from": max(recorded, visible) if visible else recorded,
                "known_until": row.get("superseded_at"),
                "engines": list(facts.engines) if facts else [],
            }
        )
    versions.sort(key=lambda v: (v["known_from"], str(v.get("correlation_id")), str(v.get("run_id"))))
    return EntityHistory(table=table, entity=entity, reader=reader.name, versions=tuple(versions))
