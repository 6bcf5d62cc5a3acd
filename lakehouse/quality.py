"""Quality gates for Silver and Gold: one Great Expectations 1.x suite per table.

What: :data:`SUITES` holds one :class:`Suite` per gated table (``silver.events``,
``gold.entity_daily``, ``gold.baselines``, ``gold.correlations``; names and columns as in
``conf/lakehouse.yaml``). :func:`validate` runs a table's suite on a DataFrame and returns
a :class:`GateResult`; :func:`enforce` raises :class:`~lakehouse.errors.DataQualityError`
when it fails. :func:`gate` (``Callable[[str, DataFrame], None]``), :func:`gate_for`
(``Callable[[DataFrame], None]``) and :func:`make_gate` are the adapters the Silver and
Gold builds take as their ``gate=`` hook; they run before anything is written.

Why the suites are code, not YAML: a suite is a handful of checks whose value sets are
business constants (feeds, lateness classes, windows, statuses). As typed frozen
dataclasses they are checked by mypy, reviewed with the code that produces the rows, and
cannot drift into an unparsed typo; a test compares every suite with the table schemas
in ``conf/lakehouse.yaml`` and the constants of the producing workloads. GX objects are
built from them lazily, so nothing of GX is needed to read or list a suite.

How it stays quick:

* ``import lakehouse.quality`` imports neither GX nor pyspark; GX (a few seconds to
  import) is loaded on the first validation.
* One ephemeral GX context per process (built lazily, reused, rebuilt only if the
  SparkSession changes): a Spark datasource *without* ``spark_config`` (GX would restart
  the session and lose Delta/Iceberg), one dataframe asset, one whole-dataframe batch
  definition, one registered suite per table.
* The DataFrame is persisted for the duration of the run (unless the caller has it cached
  already) so GX's ~10 small Spark jobs do not recompute its lineage each time, and
  unpersisted afterwards (GX's own ``persist`` is switched off: it never unpersists).
* The passing path asks GX for ``BOOLEAN_ONLY`` results (about a third of the Spark jobs of
  ``SUMMARY``); only the expectations that failed are rerun with ``SUMMARY`` and the
  suite's identity columns to collect counts and sample rows.

Quiet: progress bars are off in the context config, the ``great_expectations`` logger is
limited to CRITICAL (errors GX hits while computing a metric are reported through the
result's exception info, which lands in :attr:`ExpectationFailure.observed`), and
warnings raised inside GX calls are suppressed there, so nothing leaks into CLI output.

Determinism: a result depends only on the DataFrame's rows; samples are the first few
failing values GX returns, rendered as strings, with duplicates removed.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from lakehouse.errors import DataQualityError, UnknownTableError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "CORRELATION_STATUSES",
    "CURRENCIES",
    "DOMAINS",
    "LATENESS",
    "SUITES",
    "WINDOW_DAYS",
    "Check",
    "CheckKind",
    "ExpectationFailure",
    "GateResult",
    "Suite",
    "enforce",
    "gate",
    "gate_for",
    "make_gate",
    "suite_for",
    "validate",
]

# --------------------------------------------------------------------------------------
# Business constants the suites check against
# --------------------------------------------------------------------------------------

DOMAINS: Final[tuple[str, ...]] = ("orders", "refunds", "logins", "settlements", "outcomes")
"""The five feeds; ``silver.events.domain`` is one of them."""

LATENESS: Final[tuple[str, ...]] = ("on_time", "late", "reopen", "adjustment")
"""Lateness classes of a Silver fact (see conf/policies.yaml)."""

CURRENCIES: Final[tuple[str, ...]] = ("EUR", "GBP", "USD")
"""Currencies the reference domain trades in."""

WINDOW_DAYS: Final[tuple[int, ...]] = (30, 90, 365, 730)
"""W1 baseline windows."""

CORRELATION_STATUSES: Final[tuple[str, ...]] = ("provisional", "authoritative", "superseded", "retracted")
"""Lifecycle of a row of the correlation store."""

SAMPLE_SIZE: Final = 5
"""Failing rows kept per failed expectation in a :class:`GateResult`."""

MESSAGE_SAMPLES: Final = 3
"""Failing rows quoted per failed expectation in an error message."""

_SAMPLE_CHARS: Final = 80

# --------------------------------------------------------------------------------------
# Suites as data
# --------------------------------------------------------------------------------------


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
    row condition), e.g. ``("domain", ("orders", "logins"))``. Null values pass
    ``IN_SET`` and ``BETWEEN`` checks ("where present"); ``NOT_NULL`` is how a column is
    made required.
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


def not_null(column: str, *, only_when: tuple[str, tuple[str, ...]] | None = None) -> Check:
    """``column`` is never null (on the rows ``only_when`` selects)."""
    scope = f" where {only_when[0]} in {{{', '.join(only_when[1])}}}" if only_when else ""
    return Check(CheckKind.NOT_NULL, (column,), f"{column} not null{scope}", only_when=only_when)


def unique(*columns: str) -> Check:
    """No two rows share ``columns`` (one column: null values are ignored)."""
    if len(columns) == 1:
        return Check(CheckKind.UNIQUE, columns, f"{columns[0]} unique")
    return Check(CheckKind.COMPOUND_UNIQUE, columns, f"({', '.join(columns)}) unique")


def in_set(column: str, values: Iterable[str | int]) -> Check:
    """``column`` holds one of ``values`` where present."""
    allowed = tuple(values)
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


_COUNTS: Final[tuple[str, ...]] = (
    "orders",
    "refunds",
    "logins",
    "failed_logins",
    "devices",
    "cards",
    "chargebacks",
)

SUITES: Final[Mapping[str, Suite]] = MappingProxyType(
    {
        "silver.events": Suite(
            table="silver.events",
            identity=("event_id",),
            checks=(
                not_null("event_id"),
                unique("event_id"),
                in_set("domain", DOMAINS),
                not_null("event_time"),
                at_least("amount", 0),
                in_set("lateness", LATENESS),
                in_set("currency", CURRENCIES),
                at_least("revision", 1),
                not_null("entity_id", only_when=("domain", ("orders", "logins"))),
            ),
        ),
        "gold.entity_daily": Suite(
            table="gold.entity_daily",
            identity=("entity_id", "day"),
            checks=(
                not_null("entity_id"),
                not_null("day"),
                unique("entity_id", "day"),
                *(at_least(column, 0) for column in _COUNTS),
            ),
        ),
        "gold.baselines": Suite(
            table="gold.baselines",
            identity=("entity_id", "day", "metric", "window_days"),
            checks=(
                not_null("entity_id"),
                not_null("day"),
                not_null("metric"),
                in_set("window_days", WINDOW_DAYS),
                at_least("stddev", 0),
                at_least("observations", 0),
            ),
        ),
        "gold.correlations": Suite(
            table="gold.correlations",
            identity=("correlation_id", "engine"),
            checks=(
                not_null("correlation_id"),
                # The id is derived from (type, pair, valid_from), not from the engine: the
                # store keeps one row per id *and engine* (merge key), so two engine versions'
                # rows of the same pair are legitimate. Within one engine it is unique.
                unique("correlation_id", "engine"),
                strictly_between("confidence", 0, 1),
                less_than("entity_a", "entity_b"),
                in_set("status", CORRELATION_STATUSES),
                not_null("engine"),
            ),
        ),
    }
)
"""Every gated table's suite, by logical table name."""


def suite_for(table_name: str) -> Suite:
    """The suite of a logical table name; :class:`UnknownTableError` if it has none."""
    try:
        return SUITES[table_name]
    except KeyError:
        known = ", ".join(sorted(SUITES))
        raise UnknownTableError(
            f"no quality suite for table {table_name!r}; suites exist for: {known}"
        ) from None


# --------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------


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
        """One line: the expectation, its rule, how many rows failed and a few of them."""
        text = f"{self.expectation}({self.column}) [{self.rule}]"
        if self.unexpected_count is not None:
            text += f": {self.unexpected_count} failing row(s)"
        if self.samples:
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

    def message(self) -> str:
        """One line naming the table, every failed expectation and sample failing values."""
        if self.success:
            return f"quality gate passed for {self.table} ({self.checks} checks)"
        parts = " | ".join(failure.describe() for failure in self.failures)
        return (
            f"quality gate failed for {self.table}: {len(self.failures)} of {self.checks} checks failed: "
            f"{parts}; nothing was written: fix the step that produced these rows (or its input) and rerun"
        )


# --------------------------------------------------------------------------------------
# Pure helpers (no GX, no Spark)
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# GX: one context per process
# --------------------------------------------------------------------------------------


@dataclass
class _Engine:
    """The process's GX objects, bound to one SparkSession."""

    session: Any
    context: Any
    batch_definition: Any
    suites: dict[str, Any] = field(default_factory=dict)


_LOCK = threading.RLock()
_ENGINE: _Engine | None = None


@contextmanager
def _quiet() -> Iterator[None]:
    """Silence GX's warnings for the duration of a GX call (they are not ours to fix)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _engine(session: SparkSession) -> _Engine:
    """The GX context for ``session``, built on first use and then reused."""
    global _ENGINE
    if _ENGINE is not None and _ENGINE.session is session:
        return _ENGINE
    # Before the import: GX logs at INFO while importing and at ERROR for metrics it cannot
    # compute; both would reach a CLI's stderr. Failures come back in the results instead.
    logging.getLogger("great_expectations").setLevel(logging.CRITICAL)
    with _quiet():
        import great_expectations as gx
        from great_expectations.data_context.types.base import (
            DataContextConfig,
            InMemoryStoreBackendDefaults,
            ProgressBarsConfig,
        )

        context = gx.get_context(
            mode="ephemeral",
            project_config=DataContextConfig(
                store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
                progress_bars=ProgressBarsConfig(globally=False, metric_calculations=False),
                analytics_enabled=False,
            ),
        )
        # No spark_config: GX would stop and restart the session to apply it, dropping the
        # Delta/Iceberg catalogs. persist=False: GX persists every batch and never unpersists;
        # validate() caches around the run instead.
        datasource = context.data_sources.add_spark(name="lakehouse", persist=False)
        batch_definition = datasource.add_dataframe_asset(name="frame").add_batch_definition_whole_dataframe(
            "whole"
        )
    _ENGINE = _Engine(session=session, context=context, batch_definition=batch_definition)
    return _ENGINE


def _expectation(check: Check, index: int) -> Any:
    """The GX expectation of a check; ``meta.check`` maps results back to the check."""
    import great_expectations as gx
    from great_expectations.expectations.row_conditions import Column

    meta = {"check": index}
    condition: dict[str, Any] = {}
    if check.only_when is not None:
        name, values = check.only_when
        condition = {"row_condition": Column(name).is_in(list(values))}
    expectations: Any = gx.expectations  # GX's __init__ re-exports without __all__
    if check.kind is CheckKind.NOT_NULL:
        return expectations.ExpectColumnValuesToNotBeNull(column=check.columns[0], meta=meta, **condition)
    if check.kind is CheckKind.UNIQUE:
        return expectations.ExpectColumnValuesToBeUnique(column=check.columns[0], meta=meta, **condition)
    if check.kind is CheckKind.COMPOUND_UNIQUE:
        return expectations.ExpectCompoundColumnsToBeUnique(
            column_list=list(check.columns), meta=meta, **condition
        )
    if check.kind is CheckKind.IN_SET:
        return expectations.ExpectColumnValuesToBeInSet(
            column=check.columns[0], value_set=list(check.value_set), meta=meta, **condition
        )
    if check.kind is CheckKind.BETWEEN:
        return expectations.ExpectColumnValuesToBeBetween(
            column=check.columns[0],
            min_value=check.min_value,
            max_value=check.max_value,
            strict_min=check.strict,
            strict_max=check.strict,
            meta=meta,
            **condition,
        )
    # LESS_THAN: left < right  <=>  right > left
    left, right = check.columns
    return expectations.ExpectColumnPairValuesAToBeGreaterThanB(
        column_A=right, column_B=left, or_equal=False, meta=meta, **condition
    )


def _gx_suite(suite: Suite, indices: Sequence[int], *, name: str) -> Any:
    """An unregistered GX suite of the checks at ``indices``."""
    import great_expectations as gx

    gx_suite = gx.ExpectationSuite(name=name)
    for index in indices:
        gx_suite.add_expectation(_expectation(suite.checks[index], index))
    return gx_suite


def _registered_suite(engine: _Engine, suite: Suite) -> Any:
    """The table's full suite, added to the context once."""
    if suite.table not in engine.suites:
        gx_suite = _gx_suite(suite, range(len(suite.checks)), name=suite.table)
        engine.suites[suite.table] = engine.context.suites.add(gx_suite)
    return engine.suites[suite.table]


def _check_index(result: Any) -> int:
    return int(result.expectation_config.meta["check"])


def _error_of(result: Any) -> str | None:
    """GX's first error message for an expectation it could not evaluate, else None.

    ``exception_info`` is either one ``{raised_exception, exception_message, ...}`` dict or,
    when a metric failed, a dict of those keyed by metric id.
    """
    info = result.exception_info or {}
    if not isinstance(info, Mapping):
        return None
    entries = [info] if "raised_exception" in info else [v for v in info.values() if isinstance(v, Mapping)]
    for entry in entries:
        if entry.get("raised_exception"):
            text = str(entry.get("exception_message") or "").strip()
            return (text.splitlines() or ["GX could not evaluate the expectation"])[0][:200]
    return None


@contextmanager
def _cached(df: DataFrame, persist: bool) -> Iterator[None]:
    """Keep ``df`` cached during the run unless the caller already caches it."""
    if not persist or df.is_cached:
        yield
        return
    df.persist()
    try:
        yield
    finally:
        df.unpersist(blocking=False)


# --------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------


def validate(df: DataFrame, table_name: str, *, persist: bool = True) -> GateResult:
    """Run ``table_name``'s suite on ``df`` and say which expectations failed and on what.

    Columns the suite needs but ``df`` lacks are failures (``expect_column_to_exist``);
    the checks that read them are skipped. ``persist=False`` skips caching ``df`` during
    the run (for a DataFrame that is cheap to recompute). A failing suite is a result,
    not an error (see :func:`enforce`); raises :class:`UnknownTableError` for a table
    without a suite and :class:`DataQualityError` if GX cannot run the suite at all.
    """
    suite = suite_for(table_name)
    absent = missing_columns(suite, df.columns)
    runnable = [i for i, check in enumerate(suite.checks) if not set(check.needs) & set(absent)]
    failures: list[ExpectationFailure] = [missing_column_failure(column) for column in absent]
    with _LOCK, _cached(df, persist and bool(runnable)), _quiet():
        if runnable:
            try:
                failures.extend(_run(df, suite, runnable, absent))
            except Exception as exc:  # GX or Spark could not run the suite at all
                reason = (str(exc).strip().splitlines() or [""])[0][:200]
                raise DataQualityError(
                    f"quality gate for {suite.table} could not run: {type(exc).__name__}: {reason}; "
                    "check that the rows have the table's column types"
                ) from exc
    return GateResult(
        table=suite.table,
        success=not failures,
        checks=len(runnable) + len(absent),
        failures=tuple(failures),
    )


def _run(
    df: DataFrame, suite: Suite, runnable: Sequence[int], absent: Sequence[str]
) -> list[ExpectationFailure]:
    """GX on ``df``: a cheap pass/fail run, then details for the failed checks only."""
    failures: list[ExpectationFailure] = []
    engine = _engine(df.sparkSession)
    if len(runnable) == len(suite.checks):
        gx_suite = _registered_suite(engine, suite)
    else:
        gx_suite = _gx_suite(suite, runnable, name=f"{suite.table}.partial")
    batch = engine.batch_definition.get_batch(batch_parameters={"dataframe": df})
    verdict = batch.validate(gx_suite, result_format="BOOLEAN_ONLY")
    failed = sorted(_check_index(r) for r in verdict.results if not r.success)
    if failed:
        details = batch.validate(
            _gx_suite(suite, failed, name=f"{suite.table}.details"),
            result_format={
                "result_format": "SUMMARY",
                "partial_unexpected_count": SAMPLE_SIZE,
                "unexpected_index_column_names": [c for c in suite.identity if c not in absent],
            },
        )
        by_index = {_check_index(r): r for r in details.results}
        for index in failed:
            detail = by_index[index]
            failures.append(
                failure_from_result(suite.checks[index], suite, detail.result or {}, _error_of(detail))
            )
    return failures


def enforce(df: DataFrame, table_name: str, *, persist: bool = True) -> GateResult:
    """:func:`validate`, raising :class:`DataQualityError` (one line) when the suite fails."""
    result = validate(df, table_name, persist=persist)
    if not result.success:
        raise DataQualityError(result.message())
    return result


def make_gate(
    on_result: Callable[[GateResult], None] | None = None, *, persist: bool = True
) -> Callable[[str, DataFrame], None]:
    """A ``gate(table_name, df)`` hook for the Silver/Gold builds.

    It enforces the table's suite before the caller writes. ``on_result`` sees every
    result (passing or failing) before a failure is raised, e.g. to record it in the ledger.
    """

    def hook(table_name: str, df: DataFrame) -> None:
        result = validate(df, table_name, persist=persist)
        if on_result is not None:
            on_result(result)
        if not result.success:
            raise DataQualityError(result.message())

    return hook


def gate(table_name: str, df: DataFrame) -> None:
    """The default ``gate=`` hook: enforce ``table_name``'s suite on ``df``, return nothing."""
    enforce(df, table_name)


def gate_for(table_name: str, *, persist: bool = True) -> Callable[[DataFrame], None]:
    """A one-table hook ``check(df)``; an unknown table fails here, not at the first write."""
    suite_for(table_name)

    def hook(df: DataFrame) -> None:
        enforce(df, table_name, persist=persist)

    return hook
