"""Suites as data: the checks a table's rows must pass, independent of Great Expectations.

A :class:`Suite` is a handful of :class:`Check` values built with the small constructors
below (:func:`not_null`, :func:`unique`, :func:`in_set`, ...). They are typed frozen
dataclasses, so mypy checks them and they are reviewed with the code that produces the
rows (the suites themselves live next to that code, in the workloads). This module knows
no table and no business value; GX objects are built from these lazily by
:mod:`lakehouse.quality.runner`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

__all__ = [
    "COLUMN_MISSING",
    "Check",
    "CheckKind",
    "Suite",
    "at_least",
    "in_set",
    "less_than",
    "not_null",
    "strictly_between",
    "unique",
]


class CheckKind(StrEnum):
    """The kinds of check a suite uses; each value is the GX expectation type it becomes."""

    NOT_NULL = "expect_column_values_to_not_be_null"
    UNIQUE = "expect_column_values_to_be_unique"
    COMPOUND_UNIQUE = "expect_compound_columns_to_be_unique"
    IN_SET = "expect_column_values_to_be_in_set"
    BETWEEN = "expect_column_values_to_be_between"
    LESS_THAN = "expect_column_pair_values_a_to_be_greater_than_b"
    """``columns[0] < columns[1]``, expressed as GX's "B greater than A" with the pair swapped."""


COLUMN_MISSING: Final = "expect_column_to_exist"
"""Expectation type reported for a column a suite needs but the DataFrame lacks."""


@dataclass(frozen=True)
class Check:
    """One rule of a suite, independent of GX.

    ``only_when`` restricts the rule to rows whose column holds one of the values (GX's
    row condition), e.g. ``("kind", ("a", "b"))``. Null values pass ``IN_SET`` and
    ``BETWEEN`` checks ("where present"); ``NOT_NULL`` is how a column is made required.
    """

    kind: CheckKind
    columns: tuple[str, ...]
    rule: str
    """The rule in words, as shown in reports: ``"confidence in (0, 1)"``."""
    value_set: tuple[str | int, ...] = ()
    min_value: float | None = None
    max_value: float | None = None
    strict: bool = False
    """For ``BETWEEN``: exclusive bounds."""
    only_when: tuple[str, tuple[str, ...]] | None = None

    @property
    def needs(self) -> tuple[str, ...]:
        """Every column the check reads, its condition included."""
        extra = (self.only_when[0],) if self.only_when is not None else ()
        return tuple(dict.fromkeys((*self.columns, *extra)))


def not_null(column: str, *, only_when: tuple[str, Iterable[str]] | None = None) -> Check:
    """``column`` is never null (on the rows ``only_when`` selects)."""
    condition = (only_when[0], tuple(str(v) for v in only_when[1])) if only_when is not None else None
    scope = f" where {condition[0]} in {{{', '.join(condition[1])}}}" if condition else ""
    return Check(CheckKind.NOT_NULL, (column,), f"{column} not null{scope}", only_when=condition)


def unique(*columns: str) -> Check:
    """No two rows share ``columns`` (one column: null values are ignored)."""
    if len(columns) == 1:
        return Check(CheckKind.UNIQUE, columns, f"{columns[0]} unique")
    return Check(CheckKind.COMPOUND_UNIQUE, columns, f"({', '.join(columns)}) unique")


def in_set(column: str, values: Iterable[str | int]) -> Check:
    """``column`` holds one of ``values`` where present (str enum members become plain strings)."""
    allowed = tuple(v if isinstance(v, int) else str(v) for v in values)
    return Check(
        CheckKind.IN_SET, (column,), f"{column} in {{{', '.join(map(str, allowed))}}}", value_set=allowed
    )


def at_least(column: str, minimum: float) -> Check:
    """``column >= minimum`` where present."""
    return Check(CheckKind.BETWEEN, (column,), f"{column} >= {minimum:g}", min_value=minimum)


def strictly_between(column: str, low: float, high: float) -> Check:
    """``low < column < high`` where present."""
    return Check(
        CheckKind.BETWEEN,
        (column,),
        f"{column} in ({low:g}, {high:g})",
        min_value=low,
        max_value=high,
        strict=True,
    )


def less_than(left: str, right: str) -> Check:
    """``left < right`` on every row where both are present."""
    return Check(CheckKind.LESS_THAN, (left, right), f"{left} < {right}")


@dataclass(frozen=True)
class Suite:
    """The checks of one table, and the columns that identify a row in failure samples."""

    table: str
    checks: tuple[Check, ...]
    identity: tuple[str, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        """Every column the suite reads, in first-use order."""
        names = [*self.identity]
        for check in self.checks:
            names.extend(check.needs)
        return tuple(dict.fromkeys(names))
