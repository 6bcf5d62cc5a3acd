"""Runs a :class:`~lakehouse.quality.checks.Suite` on a DataFrame with Great Expectations 1.x.

:func:`validate` returns a :class:`~lakehouse.quality.results.GateResult`;
:func:`enforce` raises :class:`~lakehouse.errors.DataQualityError` when it fails. Neither
knows any table: the caller passes the suite (see :mod:`lakehouse.quality.gate` for
looking suites up by table name).

How it stays quick:

* ``import lakehouse.quality`` imports neither GX nor pyspark; GX (3-4 s to import) is
  loaded on the first validation, or earlier in a background thread by
  :func:`import_in_background`, which a command that will run a gate calls before it starts
  the JVM, so the two overlap.
* One ephemeral GX context per process (built lazily, reused, rebuilt only if the
  SparkSession changes): a Spark datasource *without* ``spark_config`` (GX would restart
  the session and lose Delta/Iceberg), one dataframe asset, one whole-dataframe batch
  definition, one registered GX suite per suite run.
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
"""

from __future__ import annotations

import logging
import sys
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakehouse.errors import DataQualityError
from lakehouse.quality.checks import Check, CheckKind, Suite
from lakehouse.quality.results import (
    SAMPLE_SIZE,
    ExpectationFailure,
    GateResult,
    failure_from_result,
    missing_column_failure,
    missing_columns,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["enforce", "validate"]

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------
# GX: one context per process
# --------------------------------------------------------------------------------------


@dataclass
class _GxRuntime:
    """The process's GX objects, bound to one SparkSession."""

    session: Any
    context: Any
    batch_definition: Any
    suites: dict[Suite, Any] = field(default_factory=dict)
    """GX suites registered in the context, by the suite they were built from."""


_LOCK = threading.RLock()
_GX_RUNTIME: _GxRuntime | None = None
_IMPORTING: threading.Thread | None = None


def import_in_background() -> None:
    """Start importing GX in a daemon thread, once per process (nothing if it is imported).

    For a command that will validate: its main thread spends the JVM's start waiting on a
    socket, when the import would otherwise cost it 3-4 s of its own later. The caller waits
    for it (:func:`await_background_import`) once the JVM is up. GX emits no warning while
    importing; its logger is quietened first.
    """
    global _IMPORTING
    with _LOCK:
        if _IMPORTING is not None or "great_expectations" in sys.modules:
            return
        logging.getLogger("great_expectations").setLevel(logging.CRITICAL)
        _IMPORTING = threading.Thread(target=_import_gx, name="gx-import", daemon=True)
        _IMPORTING.start()


def await_background_import() -> None:
    """Wait for :func:`import_in_background`'s import, if one was started: called once the JVM
    is up, so that the command's own imports never run beside it (two threads importing
    modules that import each other can deadlock)."""
    if _IMPORTING is not None:
        _IMPORTING.join()


def _import_gx() -> None:
    try:
        import great_expectations  # noqa: F401
        from great_expectations.data_context.types.base import DataContextConfig  # noqa: F401
    except Exception:  # the first validation imports it again and reports the failure
        log.debug("importing Great Expectations in the background failed", exc_info=True)


@contextmanager
def _quiet() -> Iterator[None]:
    """Silence GX's warnings for the duration of a GX call (they are not ours to fix)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _gx_runtime(session: SparkSession) -> _GxRuntime:
    """The GX context for ``session``, built on first use and then reused."""
    global _GX_RUNTIME
    if _GX_RUNTIME is not None and _GX_RUNTIME.session is session:
        return _GX_RUNTIME
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
    _GX_RUNTIME = _GxRuntime(session=session, context=context, batch_definition=batch_definition)
    return _GX_RUNTIME


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


def _registered_suite(runtime: _GxRuntime, suite: Suite) -> Any:
    """The suite's full GX suite, added to the context once.

    Keyed by the suite itself, not its table name: two suites of one table (a stricter one
    in a test, say) each get their own registration.
    """
    if suite not in runtime.suites:
        name = suite.table if not runtime.suites else f"{suite.table}#{len(runtime.suites)}"
        gx_suite = _gx_suite(suite, range(len(suite.checks)), name=str(name))
        runtime.suites[suite] = runtime.context.suites.add(gx_suite)
    return runtime.suites[suite]


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


def validate(df: DataFrame, suite: Suite, *, persist: bool = True) -> GateResult:
    """Run ``suite`` on ``df`` and say which expectations failed and on what.

    Columns the suite needs but ``df`` lacks are failures (``expect_column_to_exist``);
    the checks that read them are skipped. ``persist=False`` skips caching ``df`` during
    the run (for a DataFrame that is cheap to recompute). A failing suite is a result,
    not an error (see :func:`enforce`); raises :class:`DataQualityError` if GX cannot run
    the suite at all.
    """
    absent = missing_columns(suite, df.columns)
    runnable = [i for i, check in enumerate(suite.checks) if not set(check.needs) & set(absent)]
    failures: list[ExpectationFailure] = [missing_column_failure(column) for column in absent]
    log.debug("validating %s: %d checks, %d missing column(s)", suite.table, len(runnable), len(absent))
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
    result = GateResult(
        table=suite.table,
        success=not failures,
        checks=len(runnable) + len(absent),
        failures=tuple(failures),
    )
    if result.success:
        log.info("quality gate passed for %s (%d checks)", suite.table, result.checks)
    else:
        log.warning("%s", result.message())
    return result


def _run(
    df: DataFrame, suite: Suite, runnable: Sequence[int], absent: Sequence[str]
) -> list[ExpectationFailure]:
    """GX on ``df``: a cheap pass/fail run, then details for the failed checks only."""
    failures: list[ExpectationFailure] = []
    runtime = _gx_runtime(df.sparkSession)
    if len(runnable) == len(suite.checks):
        gx_suite = _registered_suite(runtime, suite)
    else:
        gx_suite = _gx_suite(suite, runnable, name=f"{suite.table}.partial")
    batch = runtime.batch_definition.get_batch(batch_parameters={"dataframe": df})
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


def enforce(df: DataFrame, suite: Suite, *, persist: bool = True) -> GateResult:
    """:func:`validate`, raising :class:`DataQualityError` (one line) when the suite fails."""
    result = validate(df, suite, persist=persist)
    if not result.success:
        raise DataQualityError(result.message(), recorded=result.message(samples=0))
    return result
