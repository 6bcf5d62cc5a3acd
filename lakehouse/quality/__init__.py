"""Quality gates: Great Expectations 1.x suites, written as code, run before a write.

The generic machinery only; no table and no business value lives here.

* :mod:`~lakehouse.quality.checks`: :class:`Suite` and :class:`Check` as data, with the
  constructors suites are written with (:func:`not_null`, :func:`unique`, :func:`in_set`,
  :func:`at_least`, :func:`strictly_between`, :func:`less_than`).
* :mod:`~lakehouse.quality.results`: :class:`GateResult` and :class:`ExpectationFailure`,
  rendered as one line with sample failing rows.
* :mod:`~lakehouse.quality.runner`: :func:`validate` / :func:`enforce` a suite on a
  DataFrame with one lazily built GX context per process.
* :mod:`~lakehouse.quality.gate`: :class:`QualityGate`, the ``gate(table_name, rows)``
  hook the builds call, built from the suites of the tables it guards.

The suites themselves sit next to the code that produces the rows
(``workloads/silver/quality.py``, ``workloads/gold/quality.py``), with value sets taken
from the workloads' vocabulary; a test compares each with the configured table schema.

``import lakehouse.quality`` imports neither GX nor pyspark.
"""

from __future__ import annotations

from lakehouse.quality.checks import (
    COLUMN_MISSING,
    Check,
    CheckKind,
    Suite,
    at_least,
    in_set,
    less_than,
    not_null,
    strictly_between,
    unique,
)
from lakehouse.quality.gate import Gate, QualityGate, suites_by_table
from lakehouse.quality.results import (
    MESSAGE_SAMPLES,
    SAMPLE_SIZE,
    ExpectationFailure,
    GateResult,
    render_samples,
    render_value,
)
from lakehouse.quality.runner import enforce, validate

__all__ = [
    "COLUMN_MISSING",
    "MESSAGE_SAMPLES",
    "SAMPLE_SIZE",
    "Check",
    "CheckKind",
    "ExpectationFailure",
    "Gate",
    "GateResult",
    "QualityGate",
    "Suite",
    "at_least",
    "enforce",
    "in_set",
    "less_than",
    "not_null",
    "render_samples",
    "render_value",
    "strictly_between",
    "suites_by_table",
    "unique",
    "validate",
]
