"""The graph algorithms' parameters and convergence rule: pure, no JVM."""

from __future__ import annotations

import math

import pytest

from lakehouse.errors import ExitCode, GraphError, GraphParameterError
from workloads.graph.parameters import open_fraction, positive_count, positive_tolerance, ranks_converged


def test_counts_are_whole_numbers_from_one() -> None:
    assert positive_count("max_iter", 1) == 1
    for bad in (0, -3, 2.5, True, None):
        with pytest.raises(GraphParameterError, match=r"^max_iter must be a whole number of at least 1"):
            positive_count("max_iter", bad)  # type: ignore[arg-type]


def test_damping_lies_strictly_between_zero_and_one() -> None:
    assert open_fraction("damping", 0.85) == 0.85
    for bad in (0, 1, 1.5, -0.1, math.nan, True, "0.5"):
        with pytest.raises(GraphParameterError, match=r"^damping must lie strictly between 0 and 1"):
            open_fraction("damping", bad)  # type: ignore[arg-type]


def test_a_tolerance_is_positive_or_none() -> None:
    assert positive_tolerance("tol", None) is None
    assert positive_tolerance("tol", 1) == 1.0
    for bad in (0, -1e-6, math.inf, math.nan, False):
        with pytest.raises(GraphParameterError, match=r"^tol must be a number above 0, or None"):
            positive_tolerance("tol", bad)


def test_bad_parameters_are_bad_input_and_graph_errors() -> None:
    assert GraphParameterError.exit_code == ExitCode.BAD_INPUT
    assert issubclass(GraphParameterError, GraphError)
    assert issubclass(GraphParameterError, ValueError)
    assert GraphError.exit_code == ExitCode.FAILED


@pytest.mark.parametrize(
    ("change", "vertices", "tol", "converged"),
    [
        (0.009, 10, 1e-3, True),
        (0.01, 10, 1e-3, False),  # strictly below N * tol, as networkx
        (0.0, 10, None, False),  # no tolerance: every iteration runs
        (0.0, 0, 1e-6, False),
    ],
)
def test_ranks_converge_below_n_times_tol(
    change: float, vertices: int, tol: float | None, converged: bool
) -> None:
    assert ranks_converged(change, vertices, tol) is converged
