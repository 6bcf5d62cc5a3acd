"""The quality suites of the Gold tables, and the gate of every gated medallion table.

Gold's suites sit next to the code that produces their rows, with value sets taken from
the code and vocabulary that define them (W1 windows, correlation statuses).

:data:`MEDALLION_SUITES` assembles Silver's suites (:mod:`workloads.silver.quality`) and
Gold's, and :data:`medallion_gate` is the :class:`~lakehouse.quality.QualityGate` built from
them: the ``gate=`` hook the command line and the demo pass to the Silver and Gold builds,
and what the replay flow validates rewritten rows with. It lives here because Gold is the
last stage that writes gated rows, so every stage after it can reach it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from lakehouse.quality import (
    QualityGate,
    Suite,
    at_least,
    in_set,
    less_than,
    not_null,
    strictly_between,
    suites_by_table,
    unique,
)
from workloads.gold.baselines import WINDOWS
from workloads.silver.quality import SUITES as SILVER_SUITES
from workloads.vocabulary import CorrelationStatus, TableName

__all__ = [
    "BASELINES_SUITE",
    "CORRELATIONS_SUITE",
    "CORRELATION_STATUSES",
    "ENTITY_DAILY_SUITE",
    "GOLD_SUITES",
    "MEDALLION_SUITES",
    "WINDOW_DAYS",
    "medallion_gate",
]

WINDOW_DAYS: Final[tuple[int, ...]] = WINDOWS
"""W1 baseline windows."""

CORRELATION_STATUSES: Final[tuple[CorrelationStatus, ...]] = tuple(CorrelationStatus)
"""Lifecycle of a row of the correlation store."""

DAILY_COUNTS: Final[tuple[str, ...]] = (
    "orders",
    "refunds",
    "logins",
    "failed_logins",
    "devices",
    "cards",
    "chargebacks",
)
"""Count columns of ``gold.entity_daily`` that can never be negative."""

ENTITY_DAILY_SUITE: Final = Suite(
    table=TableName.ENTITY_DAILY,
    identity=("entity_id", "day"),
    checks=(
        not_null("entity_id"),
        not_null("day"),
        unique("entity_id", "day"),
        *(at_least(column, 0) for column in DAILY_COUNTS),
    ),
)

BASELINES_SUITE: Final = Suite(
    table=TableName.BASELINES,
    identity=("entity_id", "day", "metric", "window_days"),
    checks=(
        not_null("entity_id"),
        not_null("day"),
        not_null("metric"),
        in_set("window_days", WINDOW_DAYS),
        at_least("stddev", 0),
        at_least("observations", 0),
    ),
)

CORRELATIONS_SUITE: Final = Suite(
    table=TableName.CORRELATIONS,
    identity=("correlation_id", "run_id"),
    checks=(
        not_null("correlation_id"),
        # A row version is identified by its id and the run that wrote it (the merge key):
        # a rebuilt or restated correlation keeps its old version beside the new one (one
        # superseded, one current), so an id alone is not unique; id and run are.
        unique("correlation_id", "run_id"),
        strictly_between("confidence", 0, 1),
        less_than("entity_a", "entity_b"),
        in_set("status", CORRELATION_STATUSES),
        not_null("engine"),
    ),
)

GOLD_SUITES: Final[Mapping[str, Suite]] = suites_by_table(
    [ENTITY_DAILY_SUITE, BASELINES_SUITE, CORRELATIONS_SUITE]
)
"""Gold's suites by logical table name."""

MEDALLION_SUITES: Final[Mapping[str, Suite]] = suites_by_table(
    [*SILVER_SUITES.values(), *GOLD_SUITES.values()]
)
"""Every gated table's suite, Silver's and Gold's, by logical table name."""

medallion_gate: Final = QualityGate(MEDALLION_SUITES)
"""The gate the builds take: ``medallion_gate(table_name, rows)`` enforces that table's
suite and raises :class:`~lakehouse.errors.DataQualityError` when the rows fail it."""
