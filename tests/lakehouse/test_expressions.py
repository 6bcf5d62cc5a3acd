"""The --where filter language and the auditor timestamp parser (lakehouse.expressions).

One table of hand-computed answers (EXPECTED) is checked against all three back ends:
Python (matches), pyiceberg (bound and run through its Arrow filter and its row evaluator)
and Spark (one test, on the shared session).
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import pytest

from lakehouse.errors import UsageError
from lakehouse.expressions import (
    MAX_DEPTH,
    MAX_WHERE_LENGTH,
    And,
    Comparison,
    Expr,
    InList,
    IsNull,
    Not,
    Or,
    columns_of,
    matches,
    parse_instant,
    parse_where,
    to_pyiceberg,
    to_spark_column,
)

COLUMNS = {
    "id": "int",
    "entity_a": "string",
    "score": "double",
    "active": "boolean",
    "ts": "timestamp",
    "day": "date",
}
HOSTILE = "'; drop table t --"
MIDNIGHT = datetime(2026, 3, 1, tzinfo=UTC)


def _row(
    id: int,
    entity_a: str | None,
    score: float | None,
    active: bool | None,
    ts: datetime | None,
    day: date | None,
) -> dict[str, Any]:
    return {"id": id, "entity_a": entity_a, "score": score, "active": active, "ts": ts, "day": day}


ROWS = [
    _row(1, "a", 1.0, True, MIDNIGHT, date(2026, 3, 1)),
    _row(2, "b", 2.5, False, MIDNIGHT - timedelta(microseconds=1), date(2026, 2, 28)),
    _row(3, None, 3.0, None, MIDNIGHT + timedelta(hours=12), None),
    _row(4, "it's", None, True, None, date(2026, 3, 2)),
    _row(5, "a", -1.0, False, MIDNIGHT + timedelta(days=1), date(2026, 3, 1)),
    _row(6, HOSTILE, 0.0, None, datetime(2026, 2, 1, tzinfo=UTC), date(2026, 2, 1)),
    _row(7, None, None, None, None, None),
]

# expression -> ids of ROWS it keeps, worked out by hand (SQL NULL semantics: unknown is dropped)
EXPECTED: dict[str, set[int]] = {
    "entity_a = 'a'": {1, 5},
    "entity_a = 'zzz'": set(),
    "not entity_a = 'a'": {2, 4, 6},
    "entity_a is null": {3, 7},
    "not (entity_a in ('a', 'b'))": {4, 6},
    "entity_a is null or not (entity_a in ('a', 'b'))": {3, 4, 6, 7},
    "entity_a = 'it''s' or entity_a = '''; drop table t --'": {4, 6},
    "score > 1.5 or entity_a = 'a'": {1, 2, 3, 5},
    "not (score > 1.5 or entity_a = 'a')": {6},
    "score <= 0 and score >= -1": {5, 6},
    "score in (1, 2.5)": {1, 2},
    "not not (score < 2)": {1, 5, 6},
    "active = true": {1, 4},
    "active != true": {2, 5},
    "active is null or active = false": {2, 3, 5, 6, 7},
    "ts >= '2026-03-01T00:00:00Z'": {1, 3, 5},
    "ts < '2026-03-01T01:00:00+01:00'": {2, 6},
    "ts in ('2026-03-01T01:00:00+01:00', '2026-03-02T00:00:00.000Z')": {1, 5},
    "not ts > '2026-03-01T00:00:00Z'": {1, 2, 6},
    "day = '2026-03-01'": {1, 5},
    "day < '2026-03-01' or day is null": {2, 3, 6, 7},
    "id > 2 and not (id >= 6) and (ts is null or day is null)": {3, 4},
    "NOT (Entity_A = 'b') AND Active IS NOT NULL": {1, 4, 5},
}


def _kept(expr: Expr, rows: list[dict[str, Any]]) -> set[int]:
    return {row["id"] for row in rows if matches(expr, row)}


# --------------------------------------------------------------------------- Python semantics


@pytest.mark.parametrize(("text", "expected"), EXPECTED.items(), ids=list(EXPECTED))
def test_matches_follows_sql_null_semantics(text: str, expected: set[int]) -> None:
    assert _kept(parse_where(text, COLUMNS), ROWS) == expected


def test_naive_row_timestamps_mean_utc_and_aware_ones_are_compared_as_instants() -> None:
    expr = parse_where("ts = '2026-03-01T01:00:00+01:00'", COLUMNS)
    naive_utc = datetime(2026, 3, 1, 0, 0)
    paris = datetime(2026, 3, 1, 1, 0, tzinfo=timezone(timedelta(hours=1)))
    assert matches(expr, {"ts": naive_utc})
    assert matches(expr, {"ts": paris})
    assert not matches(expr, {"ts": naive_utc + timedelta(hours=1)})


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("score > 1", True),
        ("score >= 1", True),
        ("score = 1", False),
        ("score != 1", True),
        ("score < 1", False),
    ],
)
def test_nan_is_ordered_above_every_number_as_in_spark(text: str, kept: bool) -> None:
    assert matches(parse_where(text, COLUMNS), {"score": math.nan}) is kept


@pytest.mark.parametrize(
    ("row", "fragment"),
    [
        ({"id": 1}, "no column 'entity_a'"),
        ({"entity_a": 5}, "column 'entity_a' has Python type int"),
        ({"entity_a": b"a"}, "column 'entity_a' has Python type bytes"),
    ],
)
def test_matches_refuses_rows_that_do_not_fit_the_declared_columns(
    row: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(UsageError, match=fragment):
        matches(parse_where("entity_a = 'a'", COLUMNS), row)


@pytest.mark.parametrize(
    ("text", "row"),
    [
        ("id = 1", {"id": True}),
        ("score = 1", {"score": "1"}),
        ("active = true", {"active": 1}),
        ("ts > '2026-03-01T00:00:00Z'", {"ts": date(2026, 3, 2)}),
        ("day = '2026-03-01'", {"day": datetime(2026, 3, 1)}),
    ],
)
def test_matches_refuses_values_of_another_type(text: str, row: dict[str, Any]) -> None:
    with pytest.raises(UsageError, match="but the filter declared the column"):
        matches(parse_where(text, COLUMNS), row)


# --------------------------------------------------------------------------- parsing


def test_precedence_not_then_and_then_or() -> None:
    expr = parse_where("not id = 1 or id = 2 and entity_a = 'x'", COLUMNS)
    assert expr == Or(
        (
            Not(Comparison("id", "=", 1, "int")),
            And((Comparison("id", "=", 2, "int"), Comparison("entity_a", "=", "x", "string"))),
        )
    )


def test_chains_are_flat_and_parentheses_group() -> None:
    assert parse_where("id = 1 and id = 2 and id = 3", COLUMNS) == And(
        tuple(Comparison("id", "=", n, "int") for n in (1, 2, 3))
    )
    assert parse_where("(id = 1 or id = 2) and id is not null", COLUMNS) == And(
        (
            Or((Comparison("id", "=", 1, "int"), Comparison("id", "=", 2, "int"))),
            IsNull("id", True, "int"),
        )
    )


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("entity_a = '''; drop table t --'", HOSTILE),
        ("entity_a = 'x'' or ''1''=''1'", "x' or '1'='1"),
        ("entity_a = 'it''s'", "it's"),
        ("entity_a = ''", ""),
        ("entity_a = 'a\\b'", "a\\b"),
        ("entity_a = 'and or not ( ) ; -- /* \" `'", 'and or not ( ) ; -- /* " `'),
        ("entity_a = 'été ≠ 夏'", "été ≠ 夏"),
        ("id = -7", -7),
        ("id=42", 42),
        ("score = 3", 3.0),
        ("score = -0.25", -0.25),
        ("active = TRUE", True),
        ("active = false", False),
        ("ts = '2026-03-01T01:00:00+01:00'", MIDNIGHT),
        ("ts = '2026-03-01 00:00:00.5Z'", MIDNIGHT + timedelta(milliseconds=500)),
        ("ts = '2026-02-28T19:00:00-0500'", MIDNIGHT),
        ("day = '2026-03-01'", date(2026, 3, 1)),
    ],
)
def test_literals_become_typed_values_and_strings_stay_raw(text: str, value: object) -> None:
    expr = parse_where(text, COLUMNS)
    assert isinstance(expr, Comparison)
    assert expr.value == value
    assert type(expr.value) is type(value)
    if isinstance(value, datetime):
        assert isinstance(expr.value, datetime)
        assert expr.value.tzinfo is UTC


def test_hostile_text_as_a_value_is_only_compared() -> None:
    expr = parse_where("entity_a = '''; drop table t --'", COLUMNS)
    assert _kept(expr, ROWS) == {6}


def test_in_list_keeps_values_in_order() -> None:
    assert parse_where("entity_a IN ('b', 'a','b')", COLUMNS) == InList("entity_a", ("b", "a", "b"), "string")


def test_column_names_match_case_insensitively_when_unambiguous() -> None:
    assert parse_where("ENTITY_A = 'x'", COLUMNS) == Comparison("entity_a", "=", "x", "string")
    both = {"Code": "string", "code": "string"}
    assert parse_where("code = 'x'", both) == Comparison("code", "=", "x", "string")
    with pytest.raises(UsageError, match="unknown column 'CODE'"):
        parse_where("CODE = 'x'", both)


def test_columns_of() -> None:
    expr = parse_where("not (id = 1 or ts is null) and entity_a in ('a') and id < 3", COLUMNS)
    assert columns_of(expr) == frozenset({"id", "ts", "entity_a"})


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("entity_a = 'x' or 1=1", ["expected a column name", "'1' at character 19"]),
        ("entity_a = 'x' or true", ["keyword 'true' at character 19"]),
        ("entity_a = 'x'; drop table t", ["';' at character 15"]),
        ("entity_a = 'x' --", ["comments", "'--' at character 16"]),
        ("entity_a = 'x' /* c */", ["comments", "'/*' at character 16"]),
        ('entity_a = "x"', ["double quote at character 12", "single quotes"]),
        ("`entity_a` = 'x'", ["backtick at character 1"]),
        ("upper(entity_a) = 'X'", ["function call 'upper(' at character 1"]),
        (
            "nope = 'x'",
            ["unknown column 'nope' at character 1", "allowed columns: active, day, entity_a, id, score, ts"],
        ),
        ("select * from t", ["'*' at character 8"]),
        ("(entity_a = 'x'", ["unbalanced '(' at character 1", "the end of the expression"]),
        ("((entity_a = 'x')", ["unbalanced '(' at character 1"]),
        ("entity_a = 'x')", ["unbalanced ')' at character 15"]),
        ("entity_a in ('a', 'b'", ["unbalanced '(' at character 13"]),
        ("entity_a = 'x", ["unterminated string starting at character 12"]),
        ("entity_a = 'it's'", ["unterminated string starting at character 17"]),
        ("entity_a = 'x' entity_a = 'y'", ["unexpected 'entity_a' at character 16", "'and' / 'or'"]),
        ("entity_a = 'x' and", ["expected a column name", "the end of the expression"]),
        ("entity_a = score", ["expected a literal for column 'entity_a'", "'score' at character 12"]),
        ("entity_a == 'x'", ["'=' at character 11"]),
        ("entity_a <> 'x'", ["'>' at character 11"]),
        ("entity_a ≠ 'x'", ["'≠' at character 10"]),
        ("entity_a = 'x' || 'y'", ["'|' at character 16"]),
        ("entity_a not in ('a')", ["'not' at character 10", "not (entity_a in (...))"]),
        ("entity_a is nul", ["expected null after 'is'", "'nul' at character 13"]),
        ("entity_a in 'a'", ["expected '(' after 'in'", "string 'a' at character 13"]),
        ("entity_a in ()", ["empty list at character 13"]),
        ("null = 1", ["keyword 'null' at character 1"]),
        ("", ["empty"]),
        ("   ", ["empty"]),
        ("id = 1 + 1", ["'+' at character 8"]),
        ("id = - 1", ["'-' at character 6"]),
        ("id = 1e3", ["malformed number '1e3' at character 6"]),
        ("id = 0x10", ["malformed number '0x10' at character 6"]),
        ("score = .5", ["malformed number '.5' at character 9"]),
        ("id = 9223372036854775808", ["64-bit range"]),
        ("id = 1.5", ["column 'id' is int", "'1.5' at character 6"]),
        ("id in (1, 'a')", ["column 'id' is int", "string 'a' at character 11"]),
        ("score = 'x'", ["column 'score' is double"]),
        ("entity_a = 1", ["column 'entity_a' is string", "'1' at character 12"]),
        ("active = 'true'", ["column 'active' is boolean", "true or false"]),
        ("active > false", ["operator '>' at character 8", "boolean column 'active'"]),
        ("ts > 5", ["column 'ts' is timestamp"]),
        ("ts > '2026-03-01T00:00:00'", ["column 'ts'", "has no time zone", "add Z for UTC"]),
        ("ts > '2026-03-01'", ["column 'ts'", "without a time and a time zone"]),
        ("ts > 'now'", ["column 'ts'", "'now' is not an ISO-8601 timestamp"]),
        ("day = '2026-3-1'", ["column 'day'", "not YYYY-MM-DD"]),
        ("day = '2026-02-30'", ["column 'day'", "not a valid date"]),
        ("day = 20260301", ["column 'day' is date"]),
    ],
)
def test_refused_with_a_message_naming_the_culprit(text: str, fragments: list[str]) -> None:
    with pytest.raises(UsageError) as caught:
        parse_where(text, COLUMNS)
    message = str(caught.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message


def test_unknown_column_type_in_the_declaration_is_refused() -> None:
    with pytest.raises(UsageError, match="declared with type 'decimal'"):
        parse_where("price = 1", {"price": "decimal"})


def test_length_limit() -> None:
    clause = " or ".join(["id = 1"] * 400)
    assert len(clause) > MAX_WHERE_LENGTH
    with pytest.raises(UsageError, match=f"{len(clause)} characters long"):
        parse_where(clause, COLUMNS)


def test_long_flat_chains_within_the_limit_work_everywhere() -> None:
    clause = " or ".join(f"id={n}" for n in range(200))
    assert len(clause) <= MAX_WHERE_LENGTH
    expr = parse_where(clause, COLUMNS)
    assert isinstance(expr, Or)
    assert len(expr.operands) == 200
    assert matches(expr, {"id": 199})
    assert not matches(expr, {"id": 200})
    to_pyiceberg(parse_where(f"not ({clause})", COLUMNS))


@pytest.mark.parametrize(
    ("prefix", "suffix"),
    [
        ("(" * MAX_DEPTH, ")" * MAX_DEPTH),
        ("not " * MAX_DEPTH, ""),
        ("not (" * (MAX_DEPTH // 2), ")" * (MAX_DEPTH // 2)),
    ],
    ids=["parentheses", "not", "mixed"],
)
def test_nesting_limit(prefix: str, suffix: str) -> None:
    parse_where(f"{prefix}id = 1{suffix}", COLUMNS)
    with pytest.raises(UsageError, match=f"nesting deeper than {MAX_DEPTH} levels"):
        parse_where(f"not ({prefix}id = 1{suffix})", COLUMNS)


# --------------------------------------------------------------------------- auditor timestamps


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-03-01T00:00:00Z", MIDNIGHT),
        ("2026-03-01t00:00:00z", MIDNIGHT),
        ("2026-03-01T01:00:00+01:00", MIDNIGHT),
        ("2026-02-28T18:30:00-05:30", MIDNIGHT),
        ("2026-03-01T01:00:00+0100", MIDNIGHT),
        ("2026-03-01 00:00:00Z", MIDNIGHT),
        ("2026-03-01T00:00Z", MIDNIGHT),
        ("  2026-03-01T00:00:00Z\n", MIDNIGHT),
        ("2026-03-01T00:00:00.123456Z", MIDNIGHT + timedelta(microseconds=123456)),
        ("2026-03-01T00:00:00.5+00:00", MIDNIGHT + timedelta(milliseconds=500)),
    ],
)
def test_parse_instant_accepts_zoned_iso_8601(text: str, expected: datetime) -> None:
    parsed = parse_instant(text)
    assert parsed == expected
    assert parsed.tzinfo is UTC
    assert parsed.utcoffset() == timedelta(0)


def test_parse_instant_refuses_a_naive_timestamp_with_the_fix() -> None:
    with pytest.raises(UsageError) as caught:
        parse_instant("2026-03-01T00:00:00")
    assert str(caught.value) == (
        "--at '2026-03-01T00:00:00' has no time zone; add Z for UTC or an offset like +01:00"
    )


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("2026-03-01", "is a date without a time"),
        ("yesterday", "'yesterday' is not an ISO-8601 timestamp"),
        ("1772323200", "'1772323200' is not an ISO-8601 timestamp"),
        ("2026-03-01T00:00:00 Z", "is not an ISO-8601 timestamp"),
        ("2026-03-01T00:00:00+1", "is not an ISO-8601 timestamp"),
        ("2026-W09-7T00:00:00Z", "is not an ISO-8601 timestamp"),
        ("2026-02-30T00:00:00Z", "is not a valid date and time"),
        ("2026-03-01T24:00:00Z", "is not a valid date and time"),
        ("2026-03-01T00:00:00+24:00", "impossible offset +24:00"),
        ("0001-01-01T00:00:00+01:00", "is not a valid date and time"),
        ("2026-03-01T00:00:00.1234567Z", "more than 6 fractional second digits"),
        ("2026-03-01T00:00:00Z" + " " * 50, "is 70 characters long"),
        ("", "is not an ISO-8601 timestamp"),
    ],
)
def test_parse_instant_refuses_malformed_values_naming_the_option(text: str, fragment: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_instant(text, what="--known-at")
    message = str(caught.value)
    assert message.startswith("--known-at ")
    assert fragment in message
    assert "\n" not in message


# --------------------------------------------------------------------------- pyiceberg


def _iceberg_schema() -> Any:
    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        BooleanType,
        DateType,
        DoubleType,
        LongType,
        NestedField,
        StringType,
        TimestamptzType,
    )

    return Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "entity_a", StringType(), required=False),
        NestedField(3, "score", DoubleType(), required=False),
        NestedField(4, "active", BooleanType(), required=False),
        NestedField(5, "ts", TimestamptzType(), required=False),
        NestedField(6, "day", DateType(), required=False),
    )


def test_pyiceberg_expression_keeps_the_same_rows_in_arrow_and_in_its_row_evaluator() -> None:
    import pyarrow as pa
    from pyiceberg.expressions.visitors import bind, expression_evaluator
    from pyiceberg.io.pyarrow import expression_to_pyarrow, schema_to_pyarrow
    from pyiceberg.typedef import Record
    from pyiceberg.utils.datetime import date_to_days, datetime_to_micros

    schema = _iceberg_schema()
    table = pa.Table.from_pylist(ROWS, schema=schema_to_pyarrow(schema))
    records = {
        row["id"]: Record(
            row["id"],
            row["entity_a"],
            row["score"],
            row["active"],
            None if row["ts"] is None else datetime_to_micros(row["ts"]),
            None if row["day"] is None else date_to_days(row["day"]),
        )
        for row in ROWS
    }
    for text, expected in EXPECTED.items():
        expr = to_pyiceberg(parse_where(text, COLUMNS))
        assert "Not(" not in repr(expr), text
        arrow_filter = expression_to_pyarrow(bind(schema, expr, case_sensitive=True), schema)
        assert set(table.filter(arrow_filter).column("id").to_pylist()) == expected, text
        evaluate = expression_evaluator(schema, expr, case_sensitive=True)
        assert {i for i, record in records.items() if evaluate(record)} == expected, text


def test_pyiceberg_gets_timestamps_as_utc_microseconds_and_dates_as_days() -> None:
    from pyiceberg.expressions import And, EqualTo, In, NotNull
    from pyiceberg.expressions.literals import DateLiteral, TimestampLiteral

    micros = int((MIDNIGHT - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()) * 1_000_000
    assert to_pyiceberg(parse_where("ts = '2026-03-01T01:00:00+01:00'", COLUMNS)) == And(
        NotNull("ts"), EqualTo("ts", TimestampLiteral(micros))
    )
    days = (date(2026, 3, 1) - date(1970, 1, 1)).days
    assert to_pyiceberg(parse_where("day in ('2026-03-01', '2026-03-02')", COLUMNS)) == And(
        NotNull("day"), In("day", {DateLiteral(days), DateLiteral(days + 1)})
    )


# --------------------------------------------------------------------------- Spark


@pytest.mark.spark
def test_spark_column_keeps_exactly_the_rows_matches_keeps(spark_session: Any) -> None:
    from pyspark.sql.types import (
        BooleanType,
        DateType,
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    schema = StructType(
        [
            StructField("id", LongType(), False),
            StructField("entity_a", StringType()),
            StructField("score", DoubleType()),
            StructField("active", BooleanType()),
            StructField("ts", TimestampType()),
            StructField("day", DateType()),
        ]
    )
    rows = [*ROWS, _row(8, None, math.nan, None, None, None)]
    # not cached: the in-memory cache prunes batches on min/max statistics that ignore NaN
    frame = spark_session.createDataFrame([tuple(row.values()) for row in rows], schema)
    for text, expected in EXPECTED.items():
        expr = parse_where(text, COLUMNS)
        kept = {r["id"] for r in frame.where(to_spark_column(expr)).select("id").collect()}
        assert kept == _kept(expr, rows), text
        assert kept - {8} == expected, text
    for text in ("score > 1", "score = 1", "score != 1", "not score < 1", "score in (1, 2.5)"):
        expr = parse_where(text, COLUMNS)
        kept = {r["id"] for r in frame.where(to_spark_column(expr)).select("id").collect()}
        assert kept == _kept(expr, rows), text
