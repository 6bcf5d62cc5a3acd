"""A small, safe filter language for ``lakehouse asof TABLE --at T --where EXPR``, and the
auditor's timestamp parser.

The text of ``--where`` is never handed to a SQL parser. It is tokenised and parsed here
into a tree of frozen dataclasses, every column is checked against the columns the caller
allows, every literal is checked against its column's type and turned into a Python value,
and only then is the tree translated: to a Spark ``Column`` (built with
``pyspark.sql.functions.col``/``lit`` and Column operators, values bound as literals), to a
pyiceberg ``BooleanExpression``, or evaluated in Python on a plain row (:func:`matches`).

Grammar
-------

::

    expr       := or_expr
    or_expr    := and_expr ("or" and_expr)*
    and_expr   := not_expr ("and" not_expr)*
    not_expr   := "not" not_expr | atom
    atom       := "(" expr ")" | comparison
    comparison := COLUMN OP literal
                | COLUMN "is" ["not"] "null"
                | COLUMN "in" "(" literal ("," literal)* ")"
    OP         := "=" | "!=" | "<" | "<=" | ">" | ">="
    literal    := STRING | NUMBER | "true" | "false"
    STRING     := "'" (any character but "'" | "''")* "'"
    NUMBER     := ["-"] DIGIT+ ["." DIGIT+]
    COLUMN     := [A-Za-z_][A-Za-z0-9_]*   (and not a keyword)

* STRING: inside the quotes every character is taken as it is (no backslash escapes),
  except ``''``, which stands for one quote: ``'it''s'`` is ``it's``.
* NUMBER: ``42``, ``-7``, ``2.5``, ``-0.25``; the ``-`` touches the digits, and a number
  may not run into a letter, ``_`` or ``.`` (``1e3``, ``0x10``, ``.5``, ``1.`` are refused).
* Keywords (``and or not is null in true false``) are case-insensitive and reserved: they
  cannot be used as column names. Column names are matched exactly, or else
  case-insensitively when that names exactly one allowed column.
* ``not`` binds tighter than ``and``, which binds tighter than ``or``:
  ``not a = 1 or b = 2 and c = 3`` is ``(not (a = 1)) or ((b = 2) and (c = 3))``.
  Negate an ``in`` or a group with parentheses: ``not (a in (1, 2))``; there is no
  ``not in`` and no ``<>``.
* Whitespace (space, tab, carriage return, newline) separates tokens. Nothing else is accepted: no
  functions, no arithmetic, no column-to-column or literal-to-literal comparisons, no
  ``;``, no comments (``--``, ``/*``), no double-quoted strings, no backticks, no exponents
  (``1e3``), no characters outside the grammar.
* Limits: at most 2000 characters, and at most 20 nested levels (each ``(`` and each
  ``not`` is one level).

Literals must fit the column's type (the ``columns`` mapping given to :func:`parse_where`):

============  ================================================================
column type   literal
============  ================================================================
``string``    a single-quoted string
``int``       an integer NUMBER (64-bit range)
``double``    a NUMBER (integers are taken as doubles)
``boolean``   ``true`` or ``false``; only ``=``, ``!=``, ``in``, ``is [not] null``
``timestamp`` a single-quoted ISO-8601 instant *with* a time zone, e.g.
              ``'2026-03-01T00:00:00Z'`` or ``'2026-03-01T01:00:00.5+01:00'``; it becomes
              an aware UTC ``datetime``
``date``      a single-quoted ``'YYYY-MM-DD'``; it becomes a ``date``
============  ================================================================

NULL semantics
--------------

SQL's three-valued logic, as Spark's ``where`` applies it: a comparison or ``in`` whose
column value is NULL is *unknown*; ``not unknown`` is unknown; ``false and unknown`` is
false, ``true or unknown`` is true, any other mix with unknown is unknown; and a row is kept
only when the whole predicate is *true*. So ``not entity_a = 'x'`` does not keep rows whose
``entity_a`` is NULL; use ``entity_a is null or not entity_a = 'x'`` to keep them.
``is null`` / ``is not null`` are never unknown. The three back ends agree on this:
Spark evaluates it natively, :func:`matches` implements it, and :func:`to_pyiceberg` emits an
expression without ``Not`` whose every comparison is guarded by ``NotNull`` so that
pyiceberg's two-valued row evaluator, its Arrow filter and its file pruning all give the
same answer. (One difference is left: a double value that is NaN. Spark and
:func:`matches` order NaN above every number and equal to itself; Arrow compares it as IEEE
does, so no comparison with NaN is true there. Literals are never NaN.)

Timestamps
----------

:func:`parse_instant` (and timestamp literals in ``--where``) accept
``YYYY-MM-DD[T ]HH:MM[:SS[.ffffff]]`` followed by ``Z`` or an offset ``±HH:MM`` / ``±HHMM``.
A value without a zone is refused rather than guessed. The result is an aware ``datetime``
in UTC. In rows given to :func:`matches`, a naive ``datetime`` means UTC. pyiceberg receives
timestamps as a ``TimestampLiteral`` holding microseconds since 1970-01-01T00:00:00Z (what
``pyiceberg.expressions.literals.literal`` makes of an aware ``datetime``); it binds to
``timestamptz`` and to ``timestamp`` columns. Dates become a ``DateLiteral`` (days since
1970-01-01).
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

from lakehouse.errors import UsageError

if TYPE_CHECKING:
    from pyiceberg.expressions import BooleanExpression
    from pyspark.sql import Column

__all__ = [
    "COLUMN_TYPES",
    "MAX_DEPTH",
    "MAX_INSTANT_LENGTH",
    "MAX_WHERE_LENGTH",
    "And",
    "Comparison",
    "Expr",
    "InList",
    "IsNull",
    "Not",
    "Or",
    "Value",
    "columns_of",
    "matches",
    "parse_instant",
    "parse_where",
    "to_pyiceberg",
    "to_spark_column",
]

MAX_WHERE_LENGTH: Final = 2000
MAX_DEPTH: Final = 20
MAX_INSTANT_LENGTH: Final = 64
COLUMN_TYPES: Final = frozenset({"string", "int", "double", "boolean", "timestamp", "date"})

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1

ColumnType: TypeAlias = Literal["string", "int", "double", "boolean", "timestamp", "date"]
Op: TypeAlias = Literal["=", "!=", "<", "<=", ">", ">="]
Value: TypeAlias = str | int | float | bool | datetime | date


# --------------------------------------------------------------------------- the tree


@dataclass(frozen=True)
class Comparison:
    """``column op value``; ``value`` is already of the column's Python type."""

    column: str
    op: Op
    value: Value
    column_type: ColumnType


@dataclass(frozen=True)
class IsNull:
    """``column is null`` (or ``is not null`` when ``negated``)."""

    column: str
    negated: bool
    column_type: ColumnType


@dataclass(frozen=True)
class InList:
    """``column in (v1, v2, ...)``; values in the order written."""

    column: str
    values: tuple[Value, ...]
    column_type: ColumnType


@dataclass(frozen=True)
class Not:
    operand: Expr


@dataclass(frozen=True)
class And:
    """All operands (two or more); ``a and b and c`` is one node, not a nested chain."""

    operands: tuple[Expr, ...]


@dataclass(frozen=True)
class Or:
    """Any operand (two or more); ``a or b or c`` is one node."""

    operands: tuple[Expr, ...]


Expr: TypeAlias = Comparison | IsNull | InList | Not | And | Or


# --------------------------------------------------------------------------- timestamps

_INSTANT = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[Tt ](?P<h>\d{2}):(?P<m>\d{2})(?::(?P<s>\d{2})(?:[.,](?P<f>\d+))?)?"
    r"(?P<zone>[Zz]|[+-]\d{2}:?\d{2})?"
)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_ZONE_HINT: Final = "add Z for UTC or an offset like +01:00"
_INSTANT_EXAMPLE: Final = "2026-03-01T00:00:00Z or 2026-03-01T00:00:00+01:00"


def _show(text: str, limit: int = 40) -> str:
    """A value for an error message: quoted, escaped, and cut short."""
    shown = text if len(text) <= limit else text[:limit] + "…"
    return repr(shown)


def _instant(text: str) -> datetime | str:
    """The aware UTC datetime ``text`` names, or why it names none (a message fragment)."""
    found = _INSTANT.fullmatch(text)
    if found is None:
        if _DATE.fullmatch(text):
            return f"{_show(text)} is a date without a time and a time zone; write e.g. {text}T00:00:00Z"
        return f"{_show(text)} is not an ISO-8601 timestamp; write it like {_INSTANT_EXAMPLE}"
    zone = found["zone"]
    if zone is None:
        return f"{_show(text)} has no time zone; {_ZONE_HINT}"
    fraction = found["f"] or ""
    if len(fraction) > 6:
        return f"{_show(text)} has more than 6 fractional second digits; timestamps are kept to microseconds"
    try:
        day = date.fromisoformat(found["date"])
        hour, minute, second = int(found["h"]), int(found["m"]), int(found["s"] or 0)
        if zone in ("Z", "z"):
            tz = UTC
        else:
            digits = zone[1:].replace(":", "")
            zone_hours, zone_minutes = int(digits[:2]), int(digits[2:])
            if zone_hours > 23 or zone_minutes > 59:
                return f"{_show(text)} has an impossible offset {zone}; offsets run from -23:59 to +23:59"
            offset = timedelta(hours=zone_hours, minutes=zone_minutes)
            tz = timezone(-offset if zone.startswith("-") else offset)
        local = datetime(
            day.year, day.month, day.day, hour, minute, second, int(fraction.ljust(6, "0")), tzinfo=tz
        )
        return local.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        return f"{_show(text)} is not a valid date and time ({exc}); write it like {_INSTANT_EXAMPLE}"


def parse_instant(text: str, *, what: str = "--at") -> datetime:
    """The auditor's timestamp: ISO-8601 *with* a time zone -> an aware ``datetime`` in UTC.

    ``2026-03-01T00:00:00Z``, ``2026-03-01T01:00:00+01:00`` and ``2026-03-01 00:00:00.250Z``
    are accepted (surrounding whitespace is ignored). A value without a zone is refused, as
    is anything malformed or longer than 64 characters; the :class:`UsageError` names
    ``what`` (the option or field the value came from) and the value.
    """
    if len(text) > MAX_INSTANT_LENGTH:
        raise UsageError(
            f"{what} {_show(text)} is {len(text)} characters long; a timestamp has at most "
            f"{MAX_INSTANT_LENGTH}: write it like {_INSTANT_EXAMPLE}"
        )
    result = _instant(text.strip())
    if isinstance(result, str):
        raise UsageError(f"{what} {result}")
    return result


# --------------------------------------------------------------------------- tokens

_KEYWORDS: Final = frozenset({"and", "or", "not", "is", "null", "in", "true", "false"})

_TOKEN = re.compile(
    r"(?P<ws>[ \t\r\n]+)"
    r"|(?P<number>-?\d+(?:\.\d+)?)(?![A-Za-z0-9_.])"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op><=|>=|!=|=|<|>)"
    r"|(?P<punct>[(),])"
)

TokenKind: TypeAlias = Literal["number", "string", "word", "op", "punct", "end"]


@dataclass(frozen=True)
class _Token:
    kind: TokenKind
    text: str  # the source text (for a string: the decoded value)
    position: int  # 1-based character position in the expression

    @property
    def keyword(self) -> str | None:
        lowered = self.text.lower()
        return lowered if self.kind == "word" and lowered in _KEYWORDS else None

    def describe(self) -> str:
        if self.kind == "end":
            return "the end of the expression"
        if self.kind == "string":
            return f"string {_show(self.text)} at character {self.position}"
        return f"{_show(self.text)} at character {self.position}"


def _refuse_character(text: str, index: int) -> UsageError:
    """The error for the character at ``index`` that starts no token."""
    position = index + 1
    char = text[index]
    if text.startswith("--", index) or text.startswith("/*", index):
        reason = f"comments ({text[index : index + 2]!r} at character {position}) are not accepted"
    elif char == ";":
        reason = f"';' at character {position} is not accepted: give one filter expression, nothing else"
    elif char == '"':
        reason = (
            f"double quote at character {position} is not accepted; quote strings with single quotes "
            "('x', and 'it''s' for a quote inside)"
        )
    elif char == "`":
        reason = f"backtick at character {position} is not accepted; write column names bare (entity_a)"
    elif char == "-":
        reason = (
            f"'-' at character {position} is not accepted; there is no arithmetic (write -5 without a space)"
        )
    elif char.isdigit() or char == ".":
        end = index
        while end < len(text) and (text[end].isalnum() or text[end] in "._"):
            end += 1
        reason = (
            f"malformed number {_show(text[index:end])} at character {position}; "
            "numbers are like 42, -7 or 2.5 (no exponents, no trailing letters)"
        )
    else:
        reason = (
            f"character {char!r} at character {position} is not accepted; the grammar allows columns, "
            "= != < <= > >=, and/or/not, is [not] null, in (...), 'strings', numbers, true/false"
        )
    return UsageError(f"--where: {reason}")


def _tokens(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    index = 0
    while index < len(text):
        if text[index] == "'":
            start = index
            index += 1
            chunks: list[str] = []
            while True:
                close = text.find("'", index)
                if close < 0:
                    raise UsageError(
                        f"--where: unterminated string starting at character {start + 1}; "
                        "close it with ' (write '' for a quote inside)"
                    )
                chunks.append(text[index:close])
                if text.startswith("''", close):
                    chunks.append("'")
                    index = close + 2
                    continue
                index = close + 1
                break
            tokens.append(_Token("string", "".join(chunks), start + 1))
            continue
        if text.startswith("--", index):  # before '-' could start a number
            raise _refuse_character(text, index)
        found = _TOKEN.match(text, index)
        if found is None or found.lastgroup is None:
            raise _refuse_character(text, index)
        kind = found.lastgroup
        if kind != "ws":
            tokens.append(_Token(kind, found.group(), index + 1))  # type: ignore[arg-type]
        index = found.end()
    tokens.append(_Token("end", "", len(text) + 1))
    return tokens


# --------------------------------------------------------------------------- parser

_OPS: Final[frozenset[str]] = frozenset({"=", "!=", "<", "<=", ">", ">="})


class _Parser:
    def __init__(self, text: str, columns: Mapping[str, str]) -> None:
        self._tokens = _tokens(text)
        self._index = 0
        self._depth = 0
        self._columns = columns
        self._folded: dict[str, list[str]] = {}
        for name in columns:
            self._folded.setdefault(name.lower(), []).append(name)

    # token access -----------------------------------------------------------------

    @property
    def _current(self) -> _Token:
        return self._tokens[self._index]

    def _advance(self) -> _Token:
        token = self._tokens[self._index]
        if token.kind != "end":
            self._index += 1
        return token

    def _at_keyword(self, keyword: str) -> bool:
        return self._current.keyword == keyword

    def _at_punct(self, punct: str) -> bool:
        return self._current.kind == "punct" and self._current.text == punct

    def _fail(self, message: str) -> UsageError:
        return UsageError(f"--where: {message}")

    def _enter(self, token: _Token) -> None:
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise self._fail(
                f"nesting deeper than {MAX_DEPTH} levels at {token.describe()}; "
                "simplify the expression (each '(' and each 'not' is a level)"
            )

    # grammar ----------------------------------------------------------------------

    def parse(self) -> Expr:
        if self._current.kind == "end":
            raise self._fail("the expression is empty; write a filter like entity_a = 'x'")
        expr = self._or()
        token = self._current
        if token.kind != "end":
            if token.kind == "punct" and token.text == ")":
                raise self._fail(f"unbalanced ')' at character {token.position}; remove it or add a '('")
            raise self._fail(f"unexpected {token.describe()}; join conditions with 'and' / 'or'")
        return expr

    def _or(self) -> Expr:
        operands = [self._and()]
        while self._at_keyword("or"):
            self._advance()
            operands.append(self._and())
        return operands[0] if len(operands) == 1 else Or(tuple(operands))

    def _and(self) -> Expr:
        operands = [self._not()]
        while self._at_keyword("and"):
            self._advance()
            operands.append(self._not())
        return operands[0] if len(operands) == 1 else And(tuple(operands))

    def _not(self) -> Expr:
        if self._at_keyword("not"):
            token = self._advance()
            self._enter(token)
            operand = self._not()
            self._depth -= 1
            return Not(operand)
        return self._atom()

    def _atom(self) -> Expr:
        token = self._current
        if token.kind == "punct" and token.text == "(":
            self._advance()
            self._enter(token)
            expr = self._or()
            self._depth -= 1
            if not self._at_punct(")"):
                raise self._fail(
                    f"unbalanced '(' at character {token.position}: expected ')' but found "
                    f"{self._current.describe()}"
                )
            self._advance()
            return expr
        return self._comparison()

    def _column(self) -> tuple[str, ColumnType]:
        token = self._advance()
        if token.kind != "word" or token.keyword is not None:
            what = f"keyword {token.describe()}" if token.keyword else token.describe()
            raise self._fail(
                f"expected a column name but found {what}; a condition is COLUMN OP literal, "
                "e.g. entity_a = 'x' (no functions, no literal on the left)"
            )
        if self._at_punct("("):
            raise self._fail(
                f"function call '{token.text}(' at character {token.position} is not accepted; "
                "compare a bare column with a literal"
            )
        name = token.text
        allowed = ", ".join(sorted(self._columns)) or "(none)"
        if name not in self._columns:
            folded = self._folded.get(name.lower(), [])
            if len(folded) != 1:
                raise self._fail(
                    f"unknown column {_show(name)} at character {token.position}; allowed columns: {allowed}"
                )
            name = folded[0]
        declared = self._columns[name]
        if declared not in COLUMN_TYPES:
            raise UsageError(
                f"--where: column {name!r} is declared with type {declared!r}, which the filter "
                f"language does not know; use one of {', '.join(sorted(COLUMN_TYPES))}"
            )
        return name, declared  # type: ignore[return-value]

    def _comparison(self) -> Expr:
        column, column_type = self._column()
        token = self._advance()
        if token.keyword == "is":
            negated = False
            if self._at_keyword("not"):
                self._advance()
                negated = True
            after = self._advance()
            if after.keyword != "null":
                raise self._fail(
                    f"expected null after 'is{' not' if negated else ''}' but found {after.describe()}; "
                    f"write {column} is null or {column} is not null"
                )
            return IsNull(column, negated, column_type)
        if token.keyword == "in":
            opening = self._advance()
            if not (opening.kind == "punct" and opening.text == "("):
                raise self._fail(
                    f"expected '(' after 'in' but found {opening.describe()}; write {column} in ('a', 'b')"
                )
            if self._at_punct(")"):
                raise self._fail(
                    f"empty list at character {opening.position}; 'in' needs at least one literal"
                )
            values = [self._literal(column, column_type)]
            while self._at_punct(","):
                self._advance()
                values.append(self._literal(column, column_type))
            closing = self._advance()
            if not (closing.kind == "punct" and closing.text == ")"):
                raise self._fail(
                    f"unbalanced '(' at character {opening.position}: expected ',' or ')' in the 'in' list "
                    f"but found {closing.describe()}"
                )
            return InList(column, tuple(values), column_type)
        if token.kind == "op" and token.text in _OPS:
            if column_type == "boolean" and token.text not in ("=", "!="):
                raise self._fail(
                    f"operator {token.text!r} at character {token.position} does not apply to boolean "
                    f"column {column!r}; use = or !="
                )
            value = self._literal(column, column_type)
            return Comparison(column, token.text, value, column_type)  # type: ignore[arg-type]
        hint = f"; to negate, write not ({column} in (...))" if token.keyword == "not" else ""
        raise self._fail(
            f"after column {column!r} expected = != < <= > >= is or in, but found {token.describe()}{hint}"
        )

    def _literal(self, column: str, column_type: ColumnType) -> Value:
        token = self._advance()
        if token.kind not in ("string", "number") and token.keyword not in ("true", "false"):
            raise self._fail(
                f"expected a literal for column {column!r} but found {token.describe()}; literals are "
                "'strings', numbers or true/false (comparing two columns is not accepted)"
            )
        where = f"at character {token.position}"
        if column_type == "string":
            if token.kind == "string":
                return token.text
            expected = "a single-quoted string like 'x'"
        elif column_type == "int":
            if token.kind == "number" and "." not in token.text:
                number = int(token.text)
                if _INT64_MIN <= number <= _INT64_MAX:
                    return number
                raise self._fail(f"integer {_show(token.text)} {where} is out of the 64-bit range")
            expected = "an integer like 42 or -7"
        elif column_type == "double":
            if token.kind == "number":
                double = float(token.text)
                if math.isfinite(double):
                    return double
                raise self._fail(f"number {_show(token.text)} {where} is too large for a double")
            expected = "a number like 2.5 or -7"
        elif column_type == "boolean":
            if token.keyword in ("true", "false"):
                return token.keyword == "true"
            expected = "true or false"
        elif column_type == "timestamp":
            if token.kind == "string":
                instant = _instant(token.text)
                if isinstance(instant, datetime):
                    return instant
                raise self._fail(f"timestamp for column {column!r} {where}: {instant}")
            expected = f"a quoted ISO-8601 timestamp with a time zone like '{_INSTANT_EXAMPLE.split()[0]}'"
        else:  # date
            if token.kind == "string":
                if _DATE.fullmatch(token.text):
                    try:
                        return date.fromisoformat(token.text)
                    except ValueError as exc:
                        raise self._fail(
                            f"date {_show(token.text)} for column {column!r} {where} "
                            f"is not a valid date ({exc})"
                        ) from None
                raise self._fail(
                    f"date {_show(token.text)} for column {column!r} {where} is not YYYY-MM-DD; "
                    "write it like '2026-03-01'"
                )
            expected = "a quoted date like '2026-03-01'"
        raise self._fail(
            f"column {column!r} is {column_type}, so it needs {expected}, not {token.describe()}"
        )


def parse_where(text: str, columns: Mapping[str, str]) -> Expr:
    """Parse a ``--where`` expression (grammar in the module docstring).

    ``columns`` maps each column the expression may use to its type: one of ``string``,
    ``int``, ``double``, ``boolean``, ``timestamp``, ``date``. Anything outside the grammar,
    an unknown column, or a literal that does not fit its column raises :class:`UsageError`
    naming the offending token (and its 1-based character position) or column.
    """
    if len(text) > MAX_WHERE_LENGTH:
        raise UsageError(
            f"--where is {len(text)} characters long; the limit is {MAX_WHERE_LENGTH}: "
            "narrow the filter or split the audit"
        )
    return _Parser(text, columns).parse()


# --------------------------------------------------------------------------- inspection


def _walk(expr: Expr) -> Iterator[Expr]:
    stack: list[Expr] = [expr]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, Not):
            stack.append(node.operand)
        elif isinstance(node, And | Or):
            stack.extend(node.operands)


def columns_of(expr: Expr) -> frozenset[str]:
    """Every column the expression reads."""
    return frozenset(node.column for node in _walk(expr) if isinstance(node, Comparison | IsNull | InList))


def compared_columns(expr: Expr) -> frozenset[str]:
    """Every column the expression compares with a literal (``=``, ``<``, ``in``...; not ``is null``)."""
    return frozenset(node.column for node in _walk(expr) if isinstance(node, Comparison | InList))


# --------------------------------------------------------------------------- Python evaluation


def _row_value(row: Mapping[str, Any], column: str, column_type: ColumnType) -> Any:
    """The row's value for ``column``, checked against the declared type (None stays None)."""
    try:
        value = row[column]
    except KeyError:
        raise UsageError(
            f"the row has no column {column!r} (it has: {', '.join(sorted(map(str, row))) or 'none'}); "
            "pass rows that carry every column of the filter"
        ) from None
    if value is None:
        return None
    ok: bool
    if column_type == "string":
        ok = isinstance(value, str)
    elif column_type == "int":
        ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    elif column_type == "double":
        ok = isinstance(value, numbers.Real | Decimal) and not isinstance(value, bool)
    elif column_type == "boolean":
        ok = isinstance(value, bool)
    elif column_type == "timestamp":
        ok = isinstance(value, datetime)
        if ok:
            value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    else:
        ok = isinstance(value, date) and not isinstance(value, datetime)
    if not ok:
        raise UsageError(
            f"row value {repr(value)[:40]} of column {column!r} has Python type {type(value).__name__}, "
            f"but the filter declared the column {column_type}; declare the column's real type"
        )
    return value


def _is_nan(value: Any) -> bool:
    return isinstance(value, float | Decimal) and value != value


def _compare(value: Any, op: Op, literal: Value) -> bool:
    if _is_nan(value):  # Spark: NaN equals NaN and sorts above every other number
        return op in ("!=", ">", ">=")
    if op == "=":
        return bool(value == literal)
    if op == "!=":
        return bool(value != literal)
    if op == "<":
        return bool(value < literal)
    if op == "<=":
        return bool(value <= literal)
    if op == ">":
        return bool(value > literal)
    return bool(value >= literal)


def _truth(expr: Expr, row: Mapping[str, Any]) -> bool | None:
    """Three-valued (Kleene) truth of ``expr`` on ``row``: True, False, or None for unknown."""
    if isinstance(expr, Comparison):
        value = _row_value(row, expr.column, expr.column_type)
        return None if value is None else _compare(value, expr.op, expr.value)
    if isinstance(expr, IsNull):
        is_null = _row_value(row, expr.column, expr.column_type) is None
        return not is_null if expr.negated else is_null
    if isinstance(expr, InList):
        value = _row_value(row, expr.column, expr.column_type)
        if value is None:
            return None
        return any(_compare(value, "=", literal) for literal in expr.values)
    if isinstance(expr, Not):
        inner = _truth(expr.operand, row)
        return None if inner is None else not inner
    if isinstance(expr, And):
        result: bool | None = True
        for operand in expr.operands:
            truth = _truth(operand, row)
            if truth is False:
                return False
            if truth is None:
                result = None
        return result
    result = False
    for operand in expr.operands:
        truth = _truth(operand, row)
        if truth is True:
            return True
        if truth is None:
            result = None
    return result


def matches(expr: Expr, row: Mapping[str, Any]) -> bool:
    """Whether Spark's ``where`` would keep ``row``: the predicate is true (unknown is dropped).

    Timestamps in ``row`` may be naive (meaning UTC) or aware. A missing column or a value of
    another type than the one declared to :func:`parse_where` raises :class:`UsageError`.
    """
    return _truth(expr, row) is True


# --------------------------------------------------------------------------- Spark


def to_spark_column(expr: Expr) -> Column:
    """A Spark boolean Column for ``df.where``: ``col``/``lit`` and Column operators only."""
    from pyspark.sql import functions as F

    def build(node: Expr) -> Column:
        if isinstance(node, Not):
            return ~build(node.operand)
        if isinstance(node, And | Or):
            return _balanced([build(operand) for operand in node.operands], isinstance(node, And))
        column = F.col(f"`{node.column}`")  # the name is an identifier: no backtick can occur
        if isinstance(node, IsNull):
            return column.isNotNull() if node.negated else column.isNull()
        if isinstance(node, InList):
            return column.isin(*[F.lit(value) for value in node.values])
        value = F.lit(node.value)
        if node.op == "=":
            return column == value
        if node.op == "!=":
            return column != value
        if node.op == "<":
            return column < value
        if node.op == "<=":
            return column <= value
        if node.op == ">":
            return column > value
        return column >= value

    return build(expr)


def _balanced(columns: list[Column], conjunction: bool) -> Column:
    """``c1 & c2 & ...`` (or ``|``) as a balanced tree, so long chains stay shallow."""
    if len(columns) == 1:
        return columns[0]
    middle = len(columns) // 2
    left, right = _balanced(columns[:middle], conjunction), _balanced(columns[middle:], conjunction)
    return left & right if conjunction else left | right


# --------------------------------------------------------------------------- pyiceberg

_NEGATED_OP: Final[dict[Op, Op]] = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def to_pyiceberg(expr: Expr) -> BooleanExpression:
    """A pyiceberg row filter with the same meaning as Spark's ``where`` (see NULL semantics).

    The result has no ``Not``: negations are pushed down to the leaves, and every
    comparison and ``in`` is guarded by ``NotNull``, so pyiceberg's two-valued evaluators
    (row evaluator, manifest and metrics pruning) and its Kleene Arrow filter agree.
    Timestamps are passed as ``TimestampLiteral`` (microseconds since the epoch, UTC), dates
    as ``DateLiteral`` (days since the epoch).
    """
    import pyiceberg.expressions as ice_module
    import pyiceberg.expressions.literals as literals_module

    # pyiceberg's pydantic models confuse mypy's view of their constructors; call them untyped
    ice: Any = ice_module
    iceberg_literal: Any = literals_module.literal
    by_op: dict[Op, Any] = {
        "=": ice.EqualTo,
        "!=": ice.NotEqualTo,
        "<": ice.LessThan,
        "<=": ice.LessThanOrEqual,
        ">": ice.GreaterThan,
        ">=": ice.GreaterThanOrEqual,
    }

    def build(node: Expr, positive: bool) -> BooleanExpression:
        """The rows where ``node`` is true (``positive``) or false (not ``positive``)."""
        result: BooleanExpression
        if isinstance(node, Not):
            result = build(node.operand, not positive)
        elif isinstance(node, And | Or):
            parts = [build(operand, positive) for operand in node.operands]
            # true(and) = all true, false(and) = any false; the mirror image for or
            conjunction = isinstance(node, And) == positive
            result = parts[0] if len(parts) == 1 else (ice.And if conjunction else ice.Or)(*parts)
        elif isinstance(node, IsNull):
            result = ice.IsNull(node.column) if node.negated != positive else ice.NotNull(node.column)
        elif isinstance(node, InList):
            literals = [iceberg_literal(value) for value in node.values]
            members = (ice.In if positive else ice.NotIn)(node.column, literals)
            result = ice.And(ice.NotNull(node.column), members)
        else:
            op = node.op if positive else _NEGATED_OP[node.op]
            result = ice.And(ice.NotNull(node.column), by_op[op](node.column, iceberg_literal(node.value)))
        return result

    return build(expr, True)
