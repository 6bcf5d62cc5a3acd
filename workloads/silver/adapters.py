"""Feed adapters: what each feed delivers, and the canonical rows Silver makes of it.

A feed's adapter (:data:`ADAPTERS`) declares its file format and, per accepted
``schema_version``, the fields it reads, their types and the canonical column each one
fills. Orders accept "1" (``email``, ``amount_cents``) and "2" (``customer_email``,
``amount``); the other feeds accept "1". Orders are their own order: their ``order_id``
repeats ``event_id``, so every domain joins to orders the same way.

:func:`canonicalise` turns one feed's Bronze rows into the one canonical schema of
``silver.events`` (the schema a streaming path uses too), or gives a row a quarantine
reason. Reasons, checked in this order, first match wins:

1. ``malformed``: the line is not exactly one JSON object, or a CSV row's column count
   matches no accepted layout (counted here: Spark's CSV reader pads short rows silently;
   quotes are honoured);
2. ``unknown_schema_version``: ``schema_version`` absent, empty or not accepted
   (``wrong_type`` if it is there but not a JSON string);
3. ``malformed`` again if a CSV row does not have its version's column count;
4. ``missing_event_id``: ``event_id`` absent, JSON null or blank;
5. per declared field, in declaration order: ``malformed`` if it is absent, ``wrong_type``
   if its type is wrong (the detail names the field and says what it was: its JSON type,
   or the CSV text).

Types are strict JSON types: strings are JSON strings, amounts JSON numbers,
``amount_cents`` and ``revision`` JSON integers, ``success`` a JSON boolean,
``event_time`` a string holding an ISO-8601 timestamp with zone; JSON null is a wrong
type. In CSV every value is text: numbers and booleans must parse, and an empty value is
a wrong type. Undeclared extra JSON keys are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

from workloads.bronze.ingest import json_object, parse_utc_timestamp
from workloads.silver.columns import BUSINESS_COLUMNS, COORDINATES, case_when
from workloads.vocabulary import Feed, QuarantineReason

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "ADAPTERS",
    "FeedAdapter",
    "FeedFormat",
    "FieldKind",
    "SourceField",
    "SourceSchema",
    "canonicalise",
]

FieldKind = Literal["str", "time", "int", "cents", "number", "bool"]
FeedFormat = Literal["jsonl", "csv"]

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
        """The field names, in delivery order."""
        return tuple(f.name for f in self.fields)


@dataclass(frozen=True)
class FeedAdapter:
    """How Silver reads one feed: format, accepted versions, and self-referencing ids."""

    feed: Feed
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
    Feed.ORDERS: FeedAdapter(
        Feed.ORDERS,
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
    Feed.REFUNDS: FeedAdapter(
        Feed.REFUNDS,
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
    Feed.LOGINS: FeedAdapter(
        Feed.LOGINS,
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
    Feed.SETTLEMENTS: FeedAdapter(
        Feed.SETTLEMENTS,
        "csv",
        (
            SourceSchema(
                "1",
                (*_HEAD, _f("order_id", "str"), _f("amount", "number"), _f("currency", "str"), _REVISION),
            ),
        ),
    ),
    Feed.OUTCOMES: FeedAdapter(
        Feed.OUTCOMES,
        "jsonl",
        (SourceSchema("1", (*_HEAD, _f("order_id", "str"), _f("label", "str"), _REVISION)),),
    ),
}
"""The versions Silver accepts, per feed. A new source version is a new entry here."""


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
        checks.append((~F.col("_object"), QuarantineReason.MALFORMED, F.lit("not exactly one JSON object")))
        version = field_of(first, version_spec)
        checks.append(
            (~version.present, QuarantineReason.UNKNOWN_SCHEMA_VERSION, F.lit("schema_version is absent"))
        )
        checks.append((~version.ok, QuarantineReason.WRONG_TYPE, _wrong_type_detail(version_spec, version)))
    else:
        widths = sorted({len(s.fields) for s in adapter.schemas})
        width = F.col("_width")
        extracted.append(width)
        checks.append(
            (
                ~width.isin(*widths),
                QuarantineReason.MALFORMED,
                F.concat(
                    F.lit("CSV row has "),
                    width.cast("string"),
                    F.lit(f" columns; accepted layouts have {' or '.join(map(str, widths))}"),
                ),
            )
        )
        version = field_of(first, version_spec)
        checks.append(
            (version.is_null, QuarantineReason.UNKNOWN_SCHEMA_VERSION, F.lit("schema_version is empty"))
        )
    version_text = version.value
    accepted = adapter.accepted_versions
    checks.append(
        (
            ~version_text.isin(*accepted),
            QuarantineReason.UNKNOWN_SCHEMA_VERSION,
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
                    QuarantineReason.MALFORMED,
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
            (
                is_version & (~event_id.present | event_id.is_null | blank),
                QuarantineReason.MISSING_EVENT_ID,
                why,
            )
        )
        for spec in schema.fields:
            if spec.name == "schema_version":
                continue
            got = field_of(schema, spec)
            checks.append(
                (is_version & ~got.present, QuarantineReason.MALFORMED, F.lit(f"field {spec.name} is absent"))
            )
            checks.append((is_version & ~got.ok, QuarantineReason.WRONG_TYPE, _wrong_type_detail(spec, got)))
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
        columns[name] = case_when(choices).cast(sql_type) if choices else F.lit(None).cast(sql_type)
    if adapter.id_alias is not None:
        columns[adapter.id_alias] = columns["event_id"]
    decided = fields.select(
        *keep,
        case_when([(c, F.lit(r)) for c, r, _ in checks]).alias("_reason"),
        case_when([(c, d) for c, _, d in checks]).alias("_detail"),
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
