"""The parameters of the graph algorithms, checked before any Spark job starts; pure."""

from __future__ import annotations

import math

from lakehouse.errors import GraphParameterError


def positive_count(name: str, value: int) -> int:
    """``value`` if it is a whole number of at least 1 (rounds, iterations)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise GraphParameterError(f"{name} must be a whole number of at least 1, not {value!r}")
    return value


def open_fraction(name: str, value: float) -> float:
    """``value`` if it lies strictly between 0 and 1 (PageRank's damping)."""
    if not _is_number(value) or not 0 < value < 1:
        raise GraphParameterError(f"{name} must lie strictly between 0 and 1, not {value!r}")
    return float(value)


def positive_tolerance(name: str, value: float | None) -> float | None:
    """``value`` if it is None (no tolerance: run every iteration) or a finite number above 0."""
    if value is None:
        return None
    if not _is_number(value) or not math.isfinite(value) or value <= 0:
        raise GraphParameterError(f"{name} must be a number above 0, or None, not {value!r}")
    return float(value)


def ranks_converged(change: float, vertices: int, tol: float | None) -> bool:
    """Whether PageRank has converged: the summed absolute change of the ranks in one iteration is
    below ``vertices * tol`` (networkx's criterion, so that the same ``tol`` means the same). Never
    with no tolerance."""
    return tol is not None and change < vertices * tol


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
