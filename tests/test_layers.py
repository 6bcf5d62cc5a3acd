"""Imports point one way: jobs -> workloads -> ledger -> lakehouse."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ORDER = ["lakehouse", "ledger", "workloads", "jobs"]


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found & set(ORDER)


@pytest.mark.parametrize("package", ORDER)
def test_a_layer_imports_only_layers_below_it(package: str) -> None:
    allowed = set(ORDER[: ORDER.index(package) + 1])
    offenders = {
        str(path.relative_to(REPO)): sorted(imported_packages(path) - allowed)
        for path in sorted((REPO / package).rglob("*.py"))
        if imported_packages(path) - allowed
    }
    assert not offenders, f"{package} imports layers above it: {offenders}"
