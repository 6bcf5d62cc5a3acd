"""The Silver build: Bronze rows become canonical, deduplicated, entity-resolved events.

What :func:`build_silver` does, in this order:

1. **Pin** the current version of every ``bronze.*`` table (or take the caller's pins)
   and read exactly those versions; they are the report's ``inputs``.
2. **Canonicalise** every Bronze row with its feed's adapter (:data:`ADAPTERS`) into the
   one canonical schema of ``silver.events`` (the schema a streaming path uses too), or
   give it a quarantine reason (:func:`canonicalise`).
3. **Decide every row's fate** (:func:`assign_fates`): ``quarantine``, ``duplicate``,
   ``exceptions`` (held), ``corrected`` or ``silver``, and the lateness of each fact.
4. **Resolve entities** with the entity-resolution engine (v1 by default).
5. **Check conservation** per manifest: Bronze rows = Silver rows + duplicates +
   corrected + quarantined + held. A mismatch raises :class:`ConservationError` and
   nothing is written.
6. Call the **quality gate** hook on the Silver rows about to be written.
7. **Write**: ``silver.events`` by (domain, month) partition, ``ops.quarantine`` by feed
   partition, ``ops.exceptions`` insert-only by Bronze coordinates.

Rules (each one is a decision downstream code relies on):

* **Adapters.** A feed's adapter declares its file format and, per accepted
  ``schema_version``, the fields it reads, their types and the canonical column each one
  fills. Orders accept "1" (``email``, ``amount_cents``) and "2" (``customer_email``,
  ``amount``); the other feeds accept "1". Orders are their own order: their
  ``order_id`` repeats ``event_id``, so every domain joins to orders the same way.
* **Quarantine reasons**, checked in this order, first match wins:

  1. ``malformed``: the line is not exactly one JSON object, or a CSV row's column
     count matches no accepted layout (counted here: Spark's CSV reader pads short rows
     silently; quotes are honoured);
  2. ``unknown_schema_version``: ``schema_version`` absent, empty or not accepted
     (``wrong_type`` if it is there but not a JSON string);
  3. ``malformed`` again if a CSV row does not have its version's column count;
  4. ``missing_event_id``: ``event_id`` absent, JSON null or blank;
  5. per declared field, in declaration order: ``malformed`` if it is absent,
     ``wrong_type`` if its type is wrong (the detail names the field and says what it
     was: its JSON type, or the CSV text).

  Types are strict JSON types: strings are JSON strings, amounts JSON numbers,
  ``amount_cents`` and ``revision`` JSON integers, ``success`` a JSON boolean,
  ``event_time`` a string holding an ISO-8601 timestamp with zone; JSON null is a wrong
  type. In CSV every value is text: numbers and booleans must parse, and an empty value
  is a wrong type. Undeclared extra JSON keys are ignored.
* **Duplicates and corrections**, per ``(domain, event_id)``: copies whose raw line is
  byte-identical are one fact; the earliest copy (ingest time, then manifest id, file,
  line) stands for it and the others are ``duplicate``. Among the remaining distinct
  facts that are not held, the winner has the highest ``revision``; ties go to the
  latest ingest time, then the largest manifest id, file and line. The winner goes to
  Silver, the others are ``corrected``.
* **Lateness** (conf/policies.yaml): ``on_time`` when ingest - event time <= allowed
  lateness; else ``late`` while the event's month is open (until the first of the next
  month plus the grace days); for a closed month the feed's action: ``reopen`` (row in
  its event date, ``lateness='reopen'``, the period reported as restated), ``adjust``
  (``lateness='adjustment'``, ``accounting_date`` = ingest date) or ``hold`` (the fact
  goes to ``ops.exceptions`` with status ``awaiting_approval``, not into Silver, and does
  not compete with the revisions already in Silver). ``accounting_date`` is the event
  date otherwise. Dates and months are UTC.
* **Range.** ``since`` (inclusive) and ``until`` (exclusive) select event dates; they are
  widened to whole months because Silver is replaced by (domain, month) partition. Every
  build still reads all pinned Bronze (duplicates, corrections and orders for entity
  resolution cross any range) and rewrites quarantine for all feeds it read.
* **Reruns.** Silver partitions are overwritten (partitions in range that no longer
  have rows are deleted), quarantine is overwritten per feed, and exceptions are only
  inserted for Bronze coordinates not yet queued (so an approval recorded there is never
  reset). The same inputs give byte-identical Silver content (no run-specific column).

Spark actions: the fated frame is cached once; one aggregate job yields conservation,
fates, partitions and restated periods; then the writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any, Final, Literal

from lakehouse.errors import ConfigError, ConservationError, UsageError
from lakehouse.tables.base import partition_predicate, sql_literal
from workloads.bronze.ingest import json_object, parse_utc_timestamp
from workloads.engines import entity_resolution

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from lakehouse.tables import Table, TableRegistry
    from workloads.silver.lateness import LatenessRule

__all__ = [
    "ADAPTERS",
    "EXCEPTIONS",
    "QUARANTINE",
    "SILVER",
    "SILVER_COLUMNS",
    "FeedAdapter",
    "Gate",
    "ManifestBalance",
    "SilverReport",
    "SourceField",
    "SourceSchema",
    "assign_fates",
    "balance_manifests",
    "build_silver",
    "canonicalise",
    "check_conservation",
    "classify_lateness",
    "month_scope",
    "pin_bronze",
]

SILVER: Final = "silver.events"
QUARANTINE: Final = "ops.quarantine"
EXCEPTIONS: Final = "ops.exceptions"
BRONZE_PREFIX: Final = "bronze."

FATE_SILVER: Final = "silver"
FATE_DUPLICATE: Final = "duplicate"
FATE_CORRECTED: Final = "corrected"
FATE_QUARANTINE: Final = "quarantine"
FATE_EXCEPTIONS: Final = "exceptions"
FATES: Final[tuple[str, ...]] = (
    FATE_SILVER,
    FATE_DUPLICATE,
    FATE_CORRECTED,
    FATE_QUARANTINE,
    FATE_EXCEPTIONS,
)

REASON_MALFORMED: Final = "malformed"
REASON_WRONG_TYPE: Final = "wrong_type"
REASON_MISSING_EVENT_ID: Final = "missing_event_id"
REASON_UNKNOWN_SCHEMA_VERSION: Final = "unknown_schema_version"

LATENESS_ON_TIME: Final = "on_time"
LATENESS_LATE: Final = "late"
LATENESS_REOPEN: Final = "reopen"
LATENESS_ADJUSTMENT: Final = "adjustment"
LATENESS_HOLD: Final = "hold"
"""Internal label of a held fact; never stored in Silver."""
ACTION_LATENESS: Final[Mapping[str, str]] = {
    "reopen": LATENESS_REOPEN,
    "adjust": LATENESS_ADJUSTMENT,
    "hold": LATENESS_HOLD,
}
EXCEPTION_AWAITING_APPROVAL: Final = "awaiting_approval"

COORDINATES: Final[tuple[str, ...]] = ("_manifest_id", "_source_file", "_line")
"""Where a row sits in Bronze: the key of quarantine and exception rows."""

Gate = Callable[[str, "DataFrame"], None]
"""A quality gate: called with the logical table name and the rows about to be written;
raises (a :class:`lakehouse.errors.DataQualityError`) to stop every write."""

FieldKind = Literal["str", "time", "int", "cents", "number", "bool"]
FeedFormat = Literal["jsonl", "csv"]

# --------------------------------------------------------------------------------------
# Adapters: what each feed delivers and what Silver makes of it
# --------------------------------------------------------------------------------------

BUSINESS_COLUMNS: Final[Mapping[str, str]] = {
    "customer_email": "string",
    "card_fingerprint": "string",
    "device_id": "string",
    "order_id": "string",
    "amount": "decimal(18,2)",
    "currency": "string",
    "merchant_id": "string",
    "ip": "string",
    "success": "boolean",
    "label": "string",
}
"""Canonical business columns and their Spark types (as in conf/lakehouse.yaml)."""

SILVER_COLUMNS: Final[tuple[str, ...]] = (
    "event_id",
    "domain",
    "event_time",
    "event_date",
    "event_month",
    "ingest_time",
    "accounting_date",
    "lateness",
    "schema_version",
    "revision",
    "customer_email",
    "entity_id",
    "resolver",
    "card_fingerprint",
    "device_id",
    "order_id",
    "amount",
    "currency",
    "merchant_id",
    "ip",
    "success",
    "label",
    "_manifest_id",
    "_source_file",
    "_line",
)

_EXPECTED: Final[Mapping[str, str]] = {
    "str": "a string",
    "time": "an ISO-8601 timestamp with zone",
    "int": "an integer",
    "cents": "an integer number of cents",
    "number": "a decimal number",
    "bool": "a boolean",
}
_INT_TYPES: Final[tuple[str, ...]] = ("TINYINT", "SMALLINT", "INT", "BIGINT")
_NUMBER_TYPE: Final = r"^(TINYINT|SMALLINT|INT|BIGINT|FLOAT|DOUBLE|DECIMAL\(\d+,\d+\))$"
_INT_TEXT: Final = r"^[+-]?\d+$"
_NUMBER_TEXT: Final = r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$"


@dataclass(frozen=True)
class SourceField:
    """One field of a source schema: its name, type and the canonical column it fills."""

    name: str
    kind: FieldKind
    target: str | None


@dataclass(frozen=True)
class SourceSchema:
    """One accepted ``schema_version`` of a feed: its fields in delivery (CSV column) order."""

    version: str
    fields: tuple[SourceField, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)


@dataclass(frozen=True)
class FeedAdapter:
    """How Silver reads one feed: format, accepted versions, and self-referencing ids."""

    feed: str
    format: FeedFormat
    schemas: tuple[SourceSchema, ...]
    id_alias: str | None = None
    """A canonical column that repeats ``event_id`` (orders are their own order)."""

    def __post_init__(self) -> None:
        for schema in self.schemas:
            names = schema.names
            if "schema_version" not in names or "event_id" not in names:
                raise ValueError(f"{self.feed} v{schema.version}: schema_version and event_id are required")
            if self.format == "csv" and names[0] != "schema_version":
                raise ValueError(f"{self.feed} v{schema.version}: CSV layouts start with schema_version")

    @property
    def accepted_versions(self) -> tuple[str, ...]:
        return tuple(s.version for s in self.schemas)


def _f(name: str, kind: FieldKind, target: str | None = "") -> SourceField:
    return SourceField(name, kind, name if target == "" else target)


_HEAD: Final = (_f("schema_version", "str", None), _f("event_id", "str"), _f("event_time", "time"))
_REVISION: Final = _f("revision", "int")

ADAPTERS: Final[Mapping[str, FeedAdapter]] = {
    "orders": FeedAdapter(
        "orders",
        "jsonl",
        (
            SourceSchema(
                "1",
                (
                    *_HEAD,
                    _f("email", "str", "customer_email"),
                    _f("card_fingerprint", "str"),
                    _f("device_id", "str"),
                    _f("amount_cents", "cents", "amount"),
                    _f("currency", "str"),
                    _f("merchant_id", "str"),
                    _REVISION,
                ),
            ),
            SourceSchema(
                "2",
                (
                    *_HEAD,
                    _f("customer_email", "str"),
                    _f("card_fingerprint", "str"),
                    _f("device_id", "str"),
                    _f("amount", "number"),
                    _f("currency", "str"),
                    _f("merchant_id", "str"),
                    _REVISION,
                ),
            ),
        ),
        id_alias="order_id",
    ),
    "refunds": FeedAdapter(
        "refunds",
        "jsonl",
        (
            SourceSchema(
                "1",
                (
                    *_HEAD,
                    _f("order_id", "str"),
                    _f("customer_email", "str"),
                    _f("amount", "number"),
                    _f("currency", "str"),
                    _REVISION,
                ),
            ),
        ),
    ),
    "logins": FeedAdapter(
        "logins",
        "jsonl",
        (
            SourceSchema(
                "1",
                (
                    *_HEAD,
                    _f("customer_email", "str"),
                    _f("device_id", "str"),
                    _f("ip", "str"),
                    _f("success", "bool"),
                    _REVISION,
                ),
            ),
        ),
    ),
    "settlements": FeedAdapter(
        "settlements",
        "csv",
        (
            SourceSchema(
                "1",
                (*_HEAD, _f("order_id", "str"), _f("amount", "number"), _f("currency", "str"), _REVISION),
            ),
        ),
    ),
    "outcomes": FeedAdapter(
        "outcomes",
        "jsonl",
        (SourceSchema("1", (*_HEAD, _f("order_id", "str"), _f("label", "str"), _REVISION)),),
    ),
}
"""The versions Silver accepts, per feed. A new source version is a new entry here."""

# --------------------------------------------------------------------------------------
# Canonicalisation (pure: DataFrame -> DataFrame)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Field:
    """One field of a record, read into plain columns: whether it is there, whether it is
    JSON null (or an empty CSV cell), whether its type is right, its canonical value and a
    few words saying what it was (for the quarantine detail)."""

    present: Column
    is_null: Column
    ok: Column
    value: Column
    shown: Column


_JSON_FETCH: Final[Mapping[str, str]] = {
    "str": "string",
    "time": "string",
    "int": "int",
    "cents": "decimal(20,0)",
    "number": "decimal(18,2)",
    "bool": "boolean",
}


def _json_field(record: Column, spec: SourceField, prefix: str) -> tuple[list[Column], _Field]:
    """Extract a JSON field with two variant reads (its JSON type, its value as the kind's
    type); checks and conversions then work on those plain columns."""
    from pyspark.sql import functions as F

    path = f"$.{spec.name}"
    extract = [
        F.schema_of_variant(F.variant_get(record, path, "variant")).alias(f"{prefix}_t"),
        F.try_variant_get(record, path, _JSON_FETCH[spec.kind]).alias(f"{prefix}_v"),
    ]
    kind, fetched = F.col(f"{prefix}_t"), F.col(f"{prefix}_v")
    value = fetched
    if spec.kind == "str":
        ok = kind == "STRING"
    elif spec.kind == "time":
        value = parse_utc_timestamp(fetched)
        ok = (kind == "STRING") & value.isNotNull()
    elif spec.kind in ("int", "cents"):
        if spec.kind == "cents":
            value = (fetched / F.lit(100)).try_cast("decimal(18,2)")
        ok = kind.isin(*_INT_TYPES) & value.isNotNull()
    elif spec.kind == "number":
        ok = kind.rlike(_NUMBER_TYPE) & value.isNotNull()
    else:
        ok = kind == "BOOLEAN"
    is_null = F.coalesce(kind == "VOID", F.lit(False))
    shown = F.when(is_null, F.lit("null")).otherwise(
        F.concat(F.lit("a JSON "), F.lower(F.regexp_replace(kind, r"[<(].*$", "")))
    )
    return extract, _Field(kind.isNotNull(), is_null, F.coalesce(ok, F.lit(False)), value, shown)


def _csv_field(cell: Column, spec: SourceField, prefix: str) -> tuple[list[Column], _Field]:
    """Extract a CSV cell (null when empty); types are checked on its text."""
    from pyspark.sql import functions as F

    text = F.col(f"{prefix}_x")
    if spec.kind == "str":
        ok, value = text.isNotNull(), text
    elif spec.kind == "time":
        value = parse_utc_timestamp(text)
        ok = value.isNotNull()
    elif spec.kind == "int":
        value = text.try_cast("int")
        ok = text.rlike(_INT_TEXT) & value.isNotNull()
    elif spec.kind == "cents":
        value = (text.try_cast("decimal(20,0)") / F.lit(100)).try_cast("decimal(18,2)")
        ok = text.rlike(_INT_TEXT) & value.isNotNull()
    elif spec.kind == "number":
        value = text.try_cast("decimal(18,2)")
        ok = text.rlike(_NUMBER_TEXT) & value.isNotNull()
    else:
        value = F.lower(text) == "true"
        ok = F.lower(text).isin("true", "false")
    shown = F.coalesce(F.concat(F.lit("'"), text, F.lit("'")), F.lit("empty"))
    field = _Field(F.lit(True), text.isNull(), F.coalesce(ok, F.lit(False)), value, shown)
    return [cell.alias(f"{prefix}_x")], field


def _case(checks: Sequence[tuple[Column, Column]]) -> Column:
    """CASE WHEN c1 THEN v1 WHEN c2 THEN v2 ... END (null when no check matches)."""
    from pyspark.sql import functions as F

    if not checks:
        return F.lit(None)
    result = F.when(checks[0][0], checks[0][1])
    for condition, value in checks[1:]:
        result = result.when(condition, value)
    return result


def canonicalise(bronze: DataFrame, adapter: FeedAdapter) -> DataFrame:
    """Bronze rows of one feed in the canonical shape, each with a quarantine reason or none.

    Output: ``domain``, the Bronze columns ``_raw``, ``_event_id``, ``_ingest_time``,
    ``_manifest_id``, ``_source_file``, ``_line``; ``_reason`` and ``_detail`` (null for a
    good record); ``event_id``, ``event_time``, ``schema_version``, ``revision`` and every
    business column (null when the record is quarantined or lacks the field).

    Projections, so that every field is extracted once and the generated code stays small:
    (1) parse the line, (2) extract each declared field into plain columns, (3) decide the
    reason and pick the canonical values by version, (4) blank out quarantined rows.
    """
    from pyspark.sql import functions as F

    keep = ["domain", "_raw", "_event_id", "_ingest_time", *COORDINATES]
    line = F.regexp_replace(F.col("_raw"), r"\r$", "")
    json = adapter.format == "jsonl"
    parsed = bronze.select(
        F.lit(adapter.feed).alias("domain"),
        *keep[1:],
        (json_object(F.col("_raw")) if json else _csv_struct(line, adapter)).alias("_parsed"),
        (F.lit(None) if json else _csv_width(line)).alias("_width"),
    )
    record = F.col("_parsed")

    extracted: list[Column] = []
    known: dict[tuple[str, ...], _Field] = {}

    def field_of(schema: SourceSchema, spec: SourceField) -> _Field:
        key = (spec.name, spec.kind) if json else (schema.version, spec.name)
        if key not in known:
            prefix = f"_x{len(known)}"
            if json:
                columns, got = _json_field(record, spec, prefix)
            else:
                position = schema.names.index(spec.name) + 1
                columns, got = _csv_field(record[f"c{position}"], spec, prefix)
            extracted.extend(columns)
            known[key] = got
        return known[key]

    checks: list[tuple[Column, str, Column]] = []
    first = adapter.schemas[0]
    version_spec = first.fields[0]
    if json:
        extracted.append(
            F.coalesce(F.schema_of_variant(record).startswith("OBJECT"), F.lit(False)).alias("_object")
        )
        checks.append((~F.col("_object"), REASON_MALFORMED, F.lit("not exactly one JSON object")))
        version = field_of(first, version_spec)
        checks.append((~version.present, REASON_UNKNOWN_SCHEMA_VERSION, F.lit("schema_version is absent")))
        checks.append((~version.ok, REASON_WRONG_TYPE, _wrong_type_detail(version_spec, version)))
    else:
        widths = sorted({len(s.fields) for s in adapter.schemas})
        width = F.col("_width")
        extracted.append(width)
        checks.append(
            (
                ~width.isin(*widths),
                REASON_MALFORMED,
                F.concat(
                    F.lit("CSV row has "),
                    width.cast("string"),
                    F.lit(f" columns; accepted layouts have {' or '.join(map(str, widths))}"),
                ),
            )
        )
        version = field_of(first, version_spec)
        checks.append((version.is_null, REASON_UNKNOWN_SCHEMA_VERSION, F.lit("schema_version is empty")))
    version_text = version.value
    accepted = adapter.accepted_versions
    checks.append(
        (
            ~version_text.isin(*accepted),
            REASON_UNKNOWN_SCHEMA_VERSION,
            F.concat(
                F.lit("schema_version '"),
                version_text,
                F.lit(f"' is not accepted for {adapter.feed} (accepted: {', '.join(accepted)})"),
            ),
        )
    )

    targets: dict[str, list[tuple[Column, Column]]] = {}
    for schema in adapter.schemas:
        is_version = version_text == schema.version
        if not json:
            checks.append(
                (
                    is_version & (F.col("_width") != len(schema.fields)),
                    REASON_MALFORMED,
                    F.lit(
                        f"CSV row does not have the {len(schema.fields)} columns of version {schema.version}"
                    ),
                )
            )
        event_id = field_of(schema, next(f for f in schema.fields if f.name == "event_id"))
        blank = F.coalesce(F.length(F.trim(event_id.value)) == 0, F.lit(False))
        why = (
            F.when(~event_id.present, F.lit("event_id is absent"))
            .when(event_id.is_null & F.lit(json), F.lit("event_id is null"))
            .otherwise(F.lit("event_id is empty"))
        )
        checks.append(
            (is_version & (~event_id.present | event_id.is_null | blank), REASON_MISSING_EVENT_ID, why)
        )
        for spec in schema.fields:
            if spec.name == "schema_version":
                continue
            got = field_of(schema, spec)
            checks.append(
                (is_version & ~got.present, REASON_MALFORMED, F.lit(f"field {spec.name} is absent"))
            )
            checks.append((is_version & ~got.ok, REASON_WRONG_TYPE, _wrong_type_detail(spec, got)))
            if spec.target is not None:
                targets.setdefault(spec.target, []).append((is_version, got.value))

    fields = parsed.select(*keep, *extracted)
    columns: dict[str, Column] = {}
    for name, sql_type in {
        "event_id": "string",
        "event_time": "timestamp",
        "revision": "int",
        **BUSINESS_COLUMNS,
    }.items():
        choices = targets.get(name, [])
        columns[name] = _case(choices).cast(sql_type) if choices else F.lit(None).cast(sql_type)
    if adapter.id_alias is not None:
        columns[adapter.id_alias] = columns["event_id"]
    decided = fields.select(
        *keep,
        _case([(c, F.lit(r)) for c, r, _ in checks]).alias("_reason"),
        _case([(c, d) for c, _, d in checks]).alias("_detail"),
        version_text.alias("_version"),
        *[column.alias(name) for name, column in columns.items()],
    )
    good = F.col("_reason").isNull()
    return decided.select(
        *keep,
        "_reason",
        "_detail",
        F.when(good, F.col("_version")).alias("schema_version"),
        *[F.when(good, F.col(name)).alias(name) for name in columns],
    )


def _wrong_type_detail(spec: SourceField, got: _Field) -> Column:
    from pyspark.sql import functions as F

    return F.concat(
        F.lit(f"field {spec.name} is "),
        F.coalesce(got.shown, F.lit("absent")),
        F.lit(f", expected {_EXPECTED[spec.kind]}"),
    )


def _csv_struct(line: Column, adapter: FeedAdapter) -> Column:
    """CSV cells ``c1..cN`` (N = widest layout + 1), parsed by Spark's CSV parser (quotes)."""
    from pyspark.sql import functions as F

    width = max(len(s.fields) for s in adapter.schemas) + 1
    schema = ", ".join(f"c{i} STRING" for i in range(1, width + 1))
    return F.from_csv(line, schema, {"mode": "PERMISSIVE"})


def _csv_width(line: Column) -> Column:
    """Number of CSV columns of a line: commas outside double-quoted cells, plus one."""
    from pyspark.sql import functions as F

    unquoted = F.regexp_replace(line, r'"(?:[^"]|"")*"', "")
    return F.size(F.split(unquoted, ",", -1))


# --------------------------------------------------------------------------------------
# Lateness and fates (pure)
# --------------------------------------------------------------------------------------


def classify_lateness(events: DataFrame, policy: Mapping[str, LatenessRule]) -> DataFrame:
    """Add ``event_date``, ``event_month``, ``ingest_date``, ``lateness``,
    ``accounting_date`` and ``_period_closes``: the day at whose 00:00Z the event's month
    closes (the first of the next month plus the grace days); later ingest times are late
    for a closed period.

    Computed in whole seconds and UTC days, independent of the session time zone.
    """
    from pyspark.sql import functions as F

    domain = F.col("domain")
    feeds = sorted({str(d) for d in policy})

    def per_feed(pick: Callable[[LatenessRule], Any]) -> Column:
        return _case([(domain == feed, F.lit(pick(policy[feed]))) for feed in feeds])

    event_seconds = F.unix_seconds(F.col("event_time"))
    ingest_seconds = F.unix_seconds(F.col("_ingest_time"))
    event_date = F.date_from_unix_date(F.floor(event_seconds / 86400).cast("int"))
    ingest_date = F.date_from_unix_date(F.floor(ingest_seconds / 86400).cast("int"))
    closes = F.date_add(
        F.add_months(F.trunc(event_date, "month"), 1), per_feed(lambda r: r.period_close_grace_days)
    )
    on_time = ingest_seconds - event_seconds <= per_feed(lambda r: r.allowed_lateness_days * 86400)
    closed = ingest_seconds > F.unix_date(closes).cast("bigint") * 86400
    action = per_feed(lambda r: ACTION_LATENESS[r.closed_period_action])
    lateness = F.when(on_time, F.lit(LATENESS_ON_TIME)).when(~closed, F.lit(LATENESS_LATE)).otherwise(action)
    return (
        events.withColumn("event_date", event_date)
        .withColumn("event_month", F.date_format(F.col("event_date"), "yyyy-MM"))
        .withColumn("ingest_date", ingest_date)
        .withColumn("_period_closes", closes)
        .withColumn("lateness", F.when(F.col("event_time").isNotNull(), lateness))
        .withColumn(
            "accounting_date",
            F.when(F.col("lateness") == LATENESS_ADJUSTMENT, F.col("ingest_date")).otherwise(
                F.col("event_date")
            ),
        )
    )


def assign_fates(canonical: DataFrame, policy: Mapping[str, LatenessRule]) -> DataFrame:
    """Add ``_fate`` (see the module docstring for the rules) and the lateness columns.

    ``_raw`` is kept only on quarantined rows (the only place it is written again), which
    keeps the cached frame small.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    timed = classify_lateness(canonical, policy).repartition("domain", "event_id")
    valid = F.col("_reason").isNull()
    # Quarantined rows have a null event_id: they share one window partition per domain
    # and take no part in the ranking below (their fate is decided first).
    first_copy = Window.partitionBy("domain", "event_id", "_raw").orderBy(
        "_ingest_time", "_manifest_id", "_source_file", "_line"
    )
    copies = timed.withColumn("_copy", F.row_number().over(first_copy))
    contender = valid & (F.col("_copy") == 1) & (F.col("lateness") != LATENESS_HOLD)
    winner = Window.partitionBy("domain", "event_id").orderBy(
        contender.desc(),
        F.col("revision").desc(),
        F.col("_ingest_time").desc(),
        F.col("_manifest_id").desc(),
        F.col("_source_file").desc(),
        F.col("_line").desc(),
    )
    fate = (
        F.when(~valid, F.lit(FATE_QUARANTINE))
        .when(F.col("_copy") > 1, F.lit(FATE_DUPLICATE))
        .when(F.col("lateness") == LATENESS_HOLD, F.lit(FATE_EXCEPTIONS))
        .when(F.row_number().over(winner) == 1, F.lit(FATE_SILVER))
        .otherwise(F.lit(FATE_CORRECTED))
    )
    fated = copies.withColumn("_fate", fate).drop("_copy")
    return fated.withColumn("_raw", F.when(F.col("_fate") == FATE_QUARANTINE, F.col("_raw")))


def silver_rows(fated: DataFrame, resolve: Callable[[DataFrame], DataFrame]) -> DataFrame:
    """The Silver rows (fate ``silver``), entity-resolved, in the table's column order."""
    from pyspark.sql import functions as F

    events = fated.where(F.col("_fate") == FATE_SILVER).select(
        "event_id",
        "domain",
        "event_time",
        "event_date",
        "event_month",
        F.col("_ingest_time").alias("ingest_time"),
        "accounting_date",
        "lateness",
        "schema_version",
        "revision",
        *BUSINESS_COLUMNS,
        *COORDINATES,
    )
    return resolve(events).select(*SILVER_COLUMNS)


def quarantine_rows(fated: DataFrame, run_id: str) -> DataFrame:
    """Rows for ``ops.quarantine``: reason, detail, the raw line and its Bronze coordinates."""
    from pyspark.sql import functions as F

    return fated.where(F.col("_fate") == FATE_QUARANTINE).select(
        F.col("domain").alias("feed"),
        F.col("_reason").alias("reason"),
        F.col("_detail").alias("detail"),
        "_raw",
        "_event_id",
        "_ingest_time",
        *COORDINATES,
        F.lit(run_id).alias("run_id"),
    )


def exception_rows(fated: DataFrame, run_id: str) -> DataFrame:
    """Rows for ``ops.exceptions``: held facts with their canonical record as JSON."""
    from pyspark.sql import functions as F

    record = F.to_json(
        F.struct(
            "event_id",
            "domain",
            "event_time",
            "schema_version",
            "revision",
            *BUSINESS_COLUMNS,
        )
    )
    reason = F.concat(
        F.lit("late fact for closed period "),
        F.col("event_month"),
        F.lit(": ingested "),
        F.col("ingest_date").cast("string"),
        F.lit(", period closed after "),
        F.col("_period_closes").cast("string"),
        F.lit("; closed_period_action=hold"),
    )
    return fated.where(F.col("_fate") == FATE_EXCEPTIONS).select(
        "event_id",
        "domain",
        "event_time",
        F.col("_ingest_time").alias("ingest_time"),
        F.col("event_month").alias("period"),
        F.lit(EXCEPTION_AWAITING_APPROVAL).alias("status"),
        reason.alias("reason"),
        record.alias("record"),
        *COORDINATES,
        F.lit(run_id).alias("run_id"),
    )


# --------------------------------------------------------------------------------------
# Conservation (pure)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ManifestBalance:
    """Where the Bronze rows of one manifest went."""

    manifest_id: str
    feed: str
    bronze: int
    silver: int = 0
    duplicate: int = 0
    corrected: int = 0
    quarantined: int = 0
    held: int = 0

    @property
    def accounted(self) -> int:
        return self.silver + self.duplicate + self.corrected + self.quarantined + self.held

    @property
    def balanced(self) -> bool:
        return self.bronze == self.accounted

    def to_dict(self) -> dict[str, Any]:
        return {
            "manifest_id": self.manifest_id,
            "feed": self.feed,
            "bronze": self.bronze,
            "silver": self.silver,
            "duplicate": self.duplicate,
            "corrected": self.corrected,
            "quarantined": self.quarantined,
            "held": self.held,
            "balanced": self.balanced,
        }


_BALANCE_FIELD: Final[Mapping[str, str]] = {
    FATE_SILVER: "silver",
    FATE_DUPLICATE: "duplicate",
    FATE_CORRECTED: "corrected",
    FATE_QUARANTINE: "quarantined",
    FATE_EXCEPTIONS: "held",
}


def balance_manifests(
    bronze: Mapping[str, tuple[str, int]], outcomes: Mapping[tuple[str, str], int]
) -> list[ManifestBalance]:
    """Per manifest: Bronze rows (``manifest -> (feed, rows)``) against the rows found in
    each fate (``(manifest, fate) -> rows``). A manifest seen only in outcomes has
    ``bronze=0`` (rows invented), one seen only in Bronze has nothing accounted (lost)."""
    per_manifest: dict[str, dict[str, int]] = {}
    for (manifest_id, fate), n in outcomes.items():
        if fate not in _BALANCE_FIELD:
            raise UsageError(f"unknown fate {fate!r}; known fates: {', '.join(FATES)}")
        counts = per_manifest.setdefault(manifest_id, dict.fromkeys(_BALANCE_FIELD.values(), 0))
        counts[_BALANCE_FIELD[fate]] += n
    balances = []
    for manifest_id in sorted({*bronze, *per_manifest}):
        feed, rows = bronze.get(manifest_id, ("?", 0))
        counts = per_manifest.get(manifest_id, {})
        balances.append(ManifestBalance(manifest_id=manifest_id, feed=feed, bronze=rows, **counts))
    return balances


def check_conservation(balances: Iterable[ManifestBalance]) -> None:
    """Raise :class:`ConservationError` naming the first manifest whose rows do not add up."""
    for b in balances:
        if not b.balanced:
            raise ConservationError(
                f"manifest {b.manifest_id} ({b.feed}): Bronze has {b.bronze} rows but Silver "
                f"accounts for {b.accounted} (silver {b.silver} + duplicate {b.duplicate} + "
                f"corrected {b.corrected} + quarantined {b.quarantined} + held {b.held}); "
                f"nothing was written, report this as a bug in the Silver build"
            )


# --------------------------------------------------------------------------------------
# Range and pinning
# --------------------------------------------------------------------------------------


def month_scope(since: date | None, until: date | None) -> tuple[str | None, str | None]:
    """The months ``[first, end)`` (``YYYY-MM``) covering event dates ``[since, until)``."""
    first = f"{since.year:04d}-{since.month:02d}" if since is not None else None
    end: str | None = None
    if until is not None:
        year, month = until.year, until.month
        if until.day != 1:
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)
        end = f"{year:04d}-{month:02d}"
    if first is not None and end is not None and first >= end:
        raise UsageError(f"empty range: since {since} is not before until {until}")
    return first, end


def _in_scope(month: str, scope: tuple[str | None, str | None]) -> bool:
    first, end = scope
    return (first is None or month >= first) and (end is None or month < end)


def _scope_condition(column: str, scope: tuple[str | None, str | None]) -> str | None:
    first, end = scope
    parts = []
    if first is not None:
        parts.append(f"`{column}` >= {sql_literal(first)}")
    if end is not None:
        parts.append(f"`{column}` < {sql_literal(end)}")
    return " AND ".join(parts) if parts else None


def pin_bronze(registry: TableRegistry) -> dict[str, int | None]:
    """The current version of every configured ``bronze.*`` table (None: never written)."""
    return {
        name: registry.get(name).current_version()
        for name in registry.names()
        if name.startswith(BRONZE_PREFIX)
    }


# --------------------------------------------------------------------------------------
# The build
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SilverReport:
    """What :func:`build_silver` read, decided and wrote; ``to_dict`` is the CLI's JSON."""

    run_id: str
    resolver: str
    inputs: Mapping[str, int | None]
    outputs: Mapping[str, int | None]
    since_month: str | None
    until_month: str | None
    fates: Mapping[str, Mapping[str, int]]
    quarantine_reasons: Mapping[str, Mapping[str, int]]
    lateness: Mapping[str, Mapping[str, int]]
    restated_periods: tuple[tuple[str, str], ...]
    partitions_written: tuple[tuple[str, str], ...]
    partitions_removed: tuple[tuple[str, str], ...]
    exceptions_added: int
    conservation: tuple[ManifestBalance, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "resolver": self.resolver,
            "inputs": dict(self.inputs),
            "outputs": dict(self.outputs),
            "range": {"since_month": self.since_month, "until_month_exclusive": self.until_month},
            "fates": {k: dict(v) for k, v in self.fates.items()},
            "quarantine_reasons": {k: dict(v) for k, v in self.quarantine_reasons.items()},
            "lateness": {k: dict(v) for k, v in self.lateness.items()},
            "restated_periods": [{"domain": d, "period": p} for d, p in self.restated_periods],
            "partitions_written": [{"domain": d, "event_month": m} for d, m in self.partitions_written],
            "partitions_removed": [{"domain": d, "event_month": m} for d, m in self.partitions_removed],
            "exceptions_added": self.exceptions_added,
            "conservation": [b.to_dict() for b in self.conservation],
        }

    def describe(self) -> str:
        """A few human lines, as the CLI prints them."""
        totals = {fate: sum(f.get(fate, 0) for f in self.fates.values()) for fate in FATES}
        lines = [
            f"silver build {self.run_id} ({self.resolver}): "
            + ", ".join(f"{fate}={n}" for fate, n in totals.items()),
            f"partitions written: {len(self.partitions_written)}, removed: {len(self.partitions_removed)}; "
            f"exceptions added: {self.exceptions_added}",
        ]
        if self.restated_periods:
            lines.append("restated: " + ", ".join(f"{d}/{p}" for d, p in self.restated_periods))
        return "\n".join(lines)


def build_silver(
    registry: TableRegistry,
    *,
    run_id: str,
    policy: Mapping[str, LatenessRule],
    since: date | None = None,
    until: date | None = None,
    inputs: Mapping[str, int | None] | None = None,
    resolver_version: str = entity_resolution.VERSION,
    gate: Gate | None = None,
) -> SilverReport:
    """Build Silver from pinned Bronze; see the module docstring for every rule.

    ``inputs`` pins Bronze versions explicitly (``bronze.<feed> -> version``; a replay
    passes what the ledger recorded); by default the current versions are pinned at the
    start. A feed without a pinned version (absent, or None: never written) is not read,
    and its Silver partitions, quarantine and exceptions are left as they are.
    ``resolver_version`` picks the entity-resolution engine version. ``gate`` is called
    as ``gate("silver.events", rows)`` before anything is written.
    """
    scope = month_scope(since, until)
    resolve = entity_resolution.resolver_for(resolver_version)
    pins = dict(inputs) if inputs is not None else pin_bronze(registry)
    feeds = _check_inputs(registry, pins, policy)

    silver_table = registry.get(SILVER)
    quarantine_table = registry.get(QUARANTINE)
    exceptions_table = registry.get(EXCEPTIONS)
    for table in (silver_table, quarantine_table, exceptions_table):
        table.create(if_not_exists=True)

    bronze_frames = {
        feed: registry.get(BRONZE_PREFIX + feed).read(as_of=pins[BRONZE_PREFIX + feed]) for feed in feeds
    }
    canonical = [canonicalise(frame, ADAPTERS[feed]) for feed, frame in bronze_frames.items()]
    if not canonical:
        return _empty_report(run_id, resolver_version, pins, scope, registry)
    union = canonical[0]
    for frame in canonical[1:]:
        union = union.unionByName(frame)
    fated = assign_fates(union, policy).persist()
    try:
        silver = silver_rows(fated, resolve).persist()
        try:
            quarantine = quarantine_rows(fated, run_id)
            exceptions = exception_rows(fated, run_id)
            tallies = _tally(bronze_frames, fated, silver, quarantine, exceptions)
            balances = balance_manifests(tallies.bronze, tallies.outcomes)
            check_conservation(balances)

            in_scope = silver
            condition = _scope_condition("event_month", scope)
            if condition is not None:
                in_scope = silver.where(condition)
            if gate is not None:
                gate(SILVER, in_scope)

            written = sorted(p for p in tallies.silver_partitions if _in_scope(p[1], scope))
            removed = _stale_partitions(silver_table, feeds, set(written), scope)
            if written:
                silver_table.overwrite_partitions(in_scope, run_id=run_id, metadata=_pins_meta(pins))
            if removed:
                silver_table.delete_where(
                    partition_predicate(
                        ["domain", "event_month"],
                        [dict(zip(("domain", "event_month"), p, strict=True)) for p in removed],
                    ),
                    run_id=run_id,
                )
            _write_quarantine(quarantine_table, quarantine, tallies, feeds, run_id)
            added = _write_exceptions(exceptions_table, exceptions, tallies.held_rows, run_id)
        finally:
            silver.unpersist()
    finally:
        fated.unpersist()

    outputs = {t.name: t.current_version() for t in (silver_table, quarantine_table, exceptions_table)}
    return SilverReport(
        run_id=run_id,
        resolver=entity_resolution.engine_label(resolver_version),
        inputs=pins,
        outputs=outputs,
        since_month=scope[0],
        until_month=scope[1],
        fates=tallies.fates,
        quarantine_reasons=tallies.reasons,
        lateness=tallies.lateness,
        restated_periods=tuple(sorted(tallies.restated)),
        partitions_written=tuple(written),
        partitions_removed=tuple(removed),
        exceptions_added=added,
        conservation=tuple(balances),
    )


def _check_inputs(
    registry: TableRegistry, pins: Mapping[str, int | None], policy: Mapping[str, LatenessRule]
) -> list[str]:
    """The feeds to build (pinned and written at least once), after checking the pins."""
    bronze_names = [n for n in registry.names() if n.startswith(BRONZE_PREFIX)]
    unknown = sorted(set(pins) - set(bronze_names))
    if unknown:
        raise UsageError(f"inputs name tables that are not Bronze tables: {unknown}; known: {bronze_names}")
    feeds = []
    for name in bronze_names:
        if pins.get(name) is None:
            continue
        feed = name[len(BRONZE_PREFIX) :]
        if feed not in ADAPTERS:
            raise ConfigError(f"{name} has no Silver adapter; add one to workloads.silver.build.ADAPTERS")
        if feed not in policy:
            raise ConfigError(
                f"the lateness policy has no rule for feed {feed!r}; add it to conf/policies.yaml"
            )
        feeds.append(feed)
    return feeds


def _pins_meta(pins: Mapping[str, int | None]) -> dict[str, str]:
    from lakehouse.digest import canonical_json

    return {"lakehouse.inputs": canonical_json({k: v for k, v in pins.items() if v is not None})}


@dataclass
class _Tallies:
    bronze: dict[str, tuple[str, int]] = field(default_factory=dict)
    outcomes: dict[tuple[str, str], int] = field(default_factory=dict)
    fates: dict[str, dict[str, int]] = field(default_factory=dict)
    reasons: dict[str, dict[str, int]] = field(default_factory=dict)
    lateness: dict[str, dict[str, int]] = field(default_factory=dict)
    silver_partitions: set[tuple[str, str]] = field(default_factory=set)
    quarantine_feeds: set[str] = field(default_factory=set)
    restated: set[tuple[str, str]] = field(default_factory=set)
    held_rows: int = 0


def _tally(
    bronze_frames: Mapping[str, DataFrame],
    fated: DataFrame,
    silver: DataFrame,
    quarantine: DataFrame,
    exceptions: DataFrame,
) -> _Tallies:
    """One Spark job: rows per manifest in Bronze (read again, independently of the cached
    frame) and in every output, plus what the report needs."""
    from pyspark.sql import functions as F

    def tag(frame: DataFrame, kind: str, feed: Column, a: Column, b: Column) -> DataFrame:
        return frame.select(
            F.col("_manifest_id").alias("m"),
            F.lit(kind).alias("kind"),
            feed.alias("feed"),
            a.cast("string").alias("a"),
            b.cast("string").alias("b"),
        )

    none = F.lit(None)
    parts = [tag(frame, "bronze", F.lit(feed), none, none) for feed, frame in bronze_frames.items()]
    parts.append(tag(silver, FATE_SILVER, F.col("domain"), F.col("event_month"), F.col("lateness")))
    dropped = fated.where(F.col("_fate").isin(FATE_DUPLICATE, FATE_CORRECTED))
    parts.append(tag(dropped, "dropped", F.col("domain"), F.col("_fate"), none))
    parts.append(tag(quarantine, FATE_QUARANTINE, F.col("feed"), F.col("reason"), none))
    parts.append(tag(exceptions, FATE_EXCEPTIONS, F.col("domain"), F.col("period"), none))
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    rows = union.groupBy("m", "kind", "feed", "a", "b").agg(F.count(F.lit(1)).alias("n")).collect()

    t = _Tallies()
    for r in rows:
        manifest, kind, feed, a, b, n = r["m"], r["kind"], r["feed"], r["a"], r["b"], int(r["n"])
        if kind == "bronze":
            _, before = t.bronze.get(manifest, (feed, 0))
            t.bronze[manifest] = (feed, before + n)
            continue
        fate = a if kind == "dropped" else kind
        key = (manifest, fate)
        t.outcomes[key] = t.outcomes.get(key, 0) + n
        per_feed = t.fates.setdefault(feed, {})
        per_feed[fate] = per_feed.get(fate, 0) + n
        if kind == FATE_SILVER:
            t.silver_partitions.add((feed, a))
            late = t.lateness.setdefault(feed, {})
            late[b] = late.get(b, 0) + n
            if b == LATENESS_REOPEN:
                t.restated.add((feed, a))
        elif kind == FATE_QUARANTINE:
            t.quarantine_feeds.add(feed)
            reasons = t.reasons.setdefault(feed, {})
            reasons[a] = reasons.get(a, 0) + n
        elif kind == FATE_EXCEPTIONS:
            t.held_rows += n
    t.fates = {feed: dict(sorted(f.items())) for feed, f in sorted(t.fates.items())}
    t.reasons = {feed: dict(sorted(f.items())) for feed, f in sorted(t.reasons.items())}
    t.lateness = {feed: dict(sorted(f.items())) for feed, f in sorted(t.lateness.items())}
    return t


def _stale_partitions(
    table: Table, domains: Sequence[str], present: set[tuple[str, str]], scope: tuple[str | None, str | None]
) -> list[tuple[str, str]]:
    """(domain, month) partitions of Silver, of the domains built and in scope, that the new
    rows no longer fill. Domains not read in this build are never touched."""
    from pyspark.sql import functions as F

    if table.current_version() is None or not domains:
        return []
    rows = (
        table.read()
        .where(F.col("domain").isin(*domains))
        .select("domain", "event_month")
        .distinct()
        .collect()
    )
    existing = {(str(r["domain"]), str(r["event_month"])) for r in rows}
    return sorted(p for p in existing if _in_scope(p[1], scope) and p not in present)


def _write_quarantine(
    table: Table, rows: DataFrame, tallies: _Tallies, feeds: Sequence[str], run_id: str
) -> None:
    """Replace the quarantine of every feed read: overwrite its partition, or delete it."""
    from pyspark.sql import functions as F

    if tallies.quarantine_feeds:
        table.overwrite_partitions(rows, run_id=run_id)
    if table.current_version() is None:
        return
    empty = sorted(set(feeds) - tallies.quarantine_feeds)
    if not empty:
        return
    existing = {
        str(r["feed"])
        for r in table.read().where(F.col("feed").isin(*empty)).select("feed").distinct().collect()
    }
    if existing:
        table.delete_where(
            partition_predicate(["feed"], [{"feed": f} for f in sorted(existing)]), run_id=run_id
        )


def _write_exceptions(table: Table, rows: DataFrame, held: int, run_id: str) -> int:
    """Queue held facts not queued yet (by Bronze coordinates); returns how many were added."""
    if held == 0:
        return 0
    fresh = rows
    if table.current_version() is not None:
        queued = table.read().select(*COORDINATES)
        fresh = rows.join(queued, list(COORDINATES), "left_anti")
    added = fresh.count() if table.current_version() is not None else held
    if added:
        table.append(fresh, run_id=run_id)
    return added


def _empty_report(
    run_id: str,
    resolver_version: str,
    pins: Mapping[str, int | None],
    scope: tuple[str | None, str | None],
    registry: TableRegistry,
) -> SilverReport:
    outputs = {name: registry.get(name).current_version() for name in (SILVER, QUARANTINE, EXCEPTIONS)}
    return SilverReport(
        run_id=run_id,
        resolver=entity_resolution.engine_label(resolver_version),
        inputs=pins,
        outputs=outputs,
        since_month=scope[0],
        until_month=scope[1],
        fates={},
        quarantine_reasons={},
        lateness={},
        restated_periods=(),
        partitions_written=(),
        partitions_removed=(),
        exceptions_added=0,
    )
