"""What a suite run says: failed expectations with sample rows, rendered as one line.

Pure (no GX, no Spark): the runner turns GX's result dicts into these with
:func:`failure_from_result`. A result depends only on the DataFrame's rows; samples are
the first few failing values GX returns, rendered as strings, with duplicates removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Final

from lakehouse.quality.checks import COLUMN_MISSING, Check, CheckKind, Suite

__all__ = [
    "MESSAGE_SAMPLES",
    "SAMPLE_SIZE",
    "ExpectationFailure",
    "GateResult",
    "failure_from_result",
    "missing_column_failure",
    "missing_columns",
    "render_row",
    "render_samples",
    "render_value",
]

SAMPLE_SIZE: Final = 5
"""Failing rows kept per failed expectation in a :class:`GateResult`."""

MESSAGE_SAMPLES: Final = 3
"""Failing rows quoted per failed expectation in an error message."""

_SAMPLE_CHARS: Final = 80


@dataclass(frozen=True)
class ExpectationFailure:
    """One failed expectation: what was expected, on which columns, and a few failing rows.

    ``samples`` are failing rows rendered as ``"col=value, ..."`` (the suite's identity
    columns first, then the checked columns), or the bare failing value when GX gives no
    row. ``observed`` carries GX's observed value or, when GX could not evaluate the
    expectation, its error message.
    """

    expectation: str
    columns: tuple[str, ...]
    rule: str
    unexpected_count: int | None = None
    element_count: int | None = None
    samples: tuple[str, ...] = ()
    observed: str | None = None

    @property
    def column(self) -> str:
        """The checked column(s) as one string (``"entity_id, day"`` for compound checks)."""
        return ", ".join(self.columns)

    def describe(self, samples: int = MESSAGE_SAMPLES) -> str:
        """One line: the expectation, its rule, how many rows failed and a few of them
        (``samples=0``: none, for a record that must hold no row values)."""
        text = f"{self.expectation}({self.column}) [{self.rule}]"
        if self.unexpected_count is not None:
            text += f": {self.unexpected_count} failing row(s)"
        if self.samples and samples > 0:
            shown = "; ".join(self.samples[:samples])
            text += f", e.g. {shown}"
        if self.observed is not None:
            text += f" (observed: {self.observed})"
        return text


@dataclass(frozen=True)
class GateResult:
    """The outcome of a table's suite on one DataFrame."""

    table: str
    success: bool
    checks: int
    """How many expectations were evaluated (plus any missing column)."""
    failures: tuple[ExpectationFailure, ...] = field(default=())

    def message(self, samples: int = MESSAGE_SAMPLES) -> str:
        """One line naming the table, every failed expectation and ``samples`` failing values
        of each (0: none, for the ledger, which an erasure cannot rewrite)."""
        if self.success:
            return f"quality gate passed for {self.table} ({self.checks} checks)"
        parts = " | ".join(failure.describe(samples) for failure in self.failures)
        return (
            f"quality gate failed for {self.table}: {len(self.failures)} of {self.checks} checks failed: "
            f"{parts}; nothing was written: fix the step that produced these rows (or its input) and rerun"
        )


def missing_columns(suite: Suite, columns: Iterable[str]) -> tuple[str, ...]:
    """The suite's columns absent from ``columns``, in suite order."""
    present = set(columns)
    return tuple(name for name in suite.columns if name not in present)


def render_value(value: object) -> str:
    """A failing value as plain text: ``null``, ISO dates, plain decimals, truncated."""
    if value is None:
        text = "null"
    elif isinstance(value, datetime | date):
        text = value.isoformat()
    elif isinstance(value, Decimal):
        text = format(value, "f")
    elif isinstance(value, float):
        text = repr(value)
    else:
        text = str(value)
    return text if len(text) <= _SAMPLE_CHARS else text[: _SAMPLE_CHARS - 1] + "…"


def render_row(row: Mapping[str, object], order: Sequence[str]) -> str:
    """A failing row as ``col=value, ...``: columns of ``order`` first, the rest after."""
    names = [name for name in order if name in row] + [name for name in row if name not in order]
    return ", ".join(f"{name}={render_value(row[name])}" for name in names)


def render_samples(check: Check, suite: Suite, result: Mapping[str, Any]) -> tuple[str, ...]:
    """The first :data:`SAMPLE_SIZE` distinct failing rows (or values) of a GX result dict."""
    order = (*suite.identity, *check.columns)
    rows = result.get("partial_unexpected_index_list") or []
    rendered: list[str] = [render_row(row, order) for row in rows if isinstance(row, Mapping)]
    if not rendered:
        for value in result.get("partial_unexpected_list") or []:
            if isinstance(value, Mapping):
                rendered.append(render_row(value, order))
            elif isinstance(value, tuple | list) and check.kind is CheckKind.LESS_THAN:
                # GX reports (column_A, column_B) = (right, left): show them in rule order.
                rendered.append(render_row(dict(zip(check.columns[::-1], value, strict=False)), order))
            else:
                rendered.append(render_value(value))
    return tuple(dict.fromkeys(rendered))[:SAMPLE_SIZE]


def _int_or_none(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def failure_from_result(
    check: Check, suite: Suite, result: Mapping[str, Any], error: str | None
) -> ExpectationFailure:
    """An :class:`ExpectationFailure` from a GX result dict and its exception message."""
    observed = result.get("observed_value")
    return ExpectationFailure(
        expectation=check.kind.value,
        columns=check.columns,
        rule=check.rule,
        unexpected_count=_int_or_none(result.get("unexpected_count")),
        element_count=_int_or_none(result.get("element_count")),
        samples=render_samples(check, suite, result),
        observed=error if error else (render_value(observed) if observed is not None else None),
    )


def missing_column_failure(column: str) -> ExpectationFailure:
    """The failure reported for a column the suite needs but the DataFrame does not have."""
    return ExpectationFailure(
        expectation=COLUMN_MISSING,
        columns=(column,),
        rule=f"column {column} present",
        observed="column missing from the DataFrame",
    )
