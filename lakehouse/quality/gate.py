"""The gate a build calls before it writes: a table name and rows in, an error out if bad.

A :class:`QualityGate` holds the suites of the tables it guards, by logical table name.
It knows no table itself: whoever produces the rows builds it from their suites (the
workloads assemble theirs and pass the gate to their builds). Calling it as
``gate(table_name, rows)`` enforces that table's suite; a table without a suite is refused
with :class:`~lakehouse.errors.UnknownTableError`, so a gate can never pass rows silently
because nobody wrote a suite for them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, TypeAlias

from lakehouse.errors import DataQualityError, UnknownTableError
from lakehouse.quality.checks import Suite
from lakehouse.quality.results import GateResult
from lakehouse.quality.runner import validate

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["Gate", "QualityGate", "suites_by_table"]

log = logging.getLogger(__name__)

Gate: TypeAlias = "Callable[[str, DataFrame], None]"
"""What a build takes as its ``gate=`` hook: called with the logical table name and the
rows about to be written; raises (a :class:`DataQualityError`) to stop every write."""


def suites_by_table(suites: Iterable[Suite]) -> Mapping[str, Suite]:
    """A read-only ``table -> suite`` mapping; two suites for one table are refused."""
    found: dict[str, Suite] = {}
    for suite in suites:
        if suite.table in found:
            raise ValueError(f"two quality suites for table {suite.table!r}")
        found[str(suite.table)] = suite
    return MappingProxyType(found)


class QualityGate:
    """Enforces, per logical table name, the suite it was given for that table.

    ``on_result`` sees every result (passing or failing) before a failure is raised, e.g.
    to record it in the ledger. ``persist=False`` skips caching the rows during a run.
    """

    def __init__(
        self,
        suites: Mapping[str, Suite],
        *,
        on_result: Callable[[GateResult], None] | None = None,
        persist: bool = True,
    ) -> None:
        for name, suite in suites.items():
            if suite.table != name:
                raise ValueError(f"the suite filed under {name!r} is the suite of {suite.table!r}")
        self.suites: Mapping[str, Suite] = MappingProxyType(dict(suites))
        self._on_result = on_result
        self._persist = persist

    def observed(self, on_result: Callable[[GateResult], None]) -> QualityGate:
        """The same gate, with ``on_result`` told of every result."""
        return QualityGate(self.suites, on_result=on_result, persist=self._persist)

    def suite_for(self, table_name: str) -> Suite:
        """The suite of a logical table name; :class:`UnknownTableError` if it has none."""
        try:
            return self.suites[table_name]
        except KeyError:
            known = ", ".join(sorted(self.suites))
            raise UnknownTableError(
                f"no quality suite for table {table_name!r}; suites exist for: {known}"
            ) from None

    def validate(self, df: DataFrame, table_name: str) -> GateResult:
        """Run ``table_name``'s suite on ``df``; a failing suite is a result, not an error."""
        result = validate(df, self.suite_for(table_name), persist=self._persist)
        if self._on_result is not None:
            self._on_result(result)
        return result

    def enforce(self, df: DataFrame, table_name: str) -> GateResult:
        """:meth:`validate`, raising :class:`DataQualityError` (one line) when the suite fails."""
        result = self.validate(df, table_name)
        if not result.success:
            raise DataQualityError(result.message(), recorded=result.message(samples=0))
        return result

    def __call__(self, table_name: str, df: DataFrame) -> None:
        """The ``gate=`` hook of the builds: enforce ``table_name``'s suite before a write."""
        self.enforce(df, table_name)

    def for_table(self, table_name: str) -> Callable[[DataFrame], None]:
        """A one-table hook ``check(df)``; an unknown table fails here, not at the first write."""
        self.suite_for(table_name)

        def check(df: DataFrame) -> None:
            self.enforce(df, table_name)

        return check
