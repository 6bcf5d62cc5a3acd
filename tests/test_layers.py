"""Imports point one way: jobs -> workloads -> ledger -> lakehouse, and inside workloads,
from the later stages to the earlier ones; only the demo and test-data paths import the
synthetic-data generator."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ORDER = ["lakehouse", "ledger", "workloads", "jobs"]

WORKLOAD_ORDER = [
    {"vocabulary", "policies"},
    {"graph"},
    {"engines"},
    {"evaluation"},
    {"runs"},
    {"bronze"},
    {"silver"},
    {"gold"},
    {"replay", "asof", "operations", "streaming"},
    {"ml", "communities"},
    {"compliance"},
    {"maintenance"},
    {"reconciliation"},
    {"pipeline"},
    {"synthetic"},
]
"""Inner layers of ``workloads``, lowest first; a module imports only its own and lower
layers, and never a sibling of the same layer."""

SYNTHETIC_USERS = {"jobs/generate.py", "jobs/demo.py"}
"""The only modules outside ``workloads/synthetic`` that may import it."""


def imported_modules(path: Path) -> set[str]:
    """Every absolute module name a file imports (``from a.b import c`` gives ``a.b``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def imported_packages(path: Path) -> set[str]:
    return {module.split(".")[0] for module in imported_modules(path)} & set(ORDER)


def workload_part(module: str) -> str | None:
    """``workloads.gold.build`` -> ``gold``; None for anything outside workloads."""
    parts = module.split(".")
    if parts[0] != "workloads" or len(parts) < 2:
        return None
    return parts[1]


def layer_of(part: str) -> int:
    for index, layer in enumerate(WORKLOAD_ORDER):
        if part in layer:
            return index
    raise AssertionError(f"workloads/{part} is in no layer of WORKLOAD_ORDER; add it")


def test_imported_modules_reads_absolute_imports_only(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("import os.path\nfrom workloads.gold import build\nfrom . import sibling\n")
    assert imported_modules(sample) == {"os.path", "workloads.gold"}


@pytest.mark.parametrize("package", ORDER)
def test_a_layer_imports_only_layers_below_it(package: str) -> None:
    allowed = set(ORDER[: ORDER.index(package) + 1])
    offenders = {
        str(path.relative_to(REPO)): sorted(imported_packages(path) - allowed)
        for path in sorted((REPO / package).rglob("*.py"))
        if imported_packages(path) - allowed
    }
    assert not offenders, f"{package} imports layers above it: {offenders}"


def test_every_workloads_module_sits_in_a_layer() -> None:
    parts = {
        path.relative_to(REPO / "workloads").parts[0].removesuffix(".py")
        for path in (REPO / "workloads").glob("*")
    }
    parts -= {"__init__", "__pycache__"}
    for part in sorted(parts):
        layer_of(part)


def test_inside_workloads_a_stage_imports_only_earlier_stages() -> None:
    offenders: dict[str, list[str]] = {}
    for path in sorted((REPO / "workloads").rglob("*.py")):
        relative = path.relative_to(REPO / "workloads")
        if relative.parts == ("__init__.py",):
            continue
        own = relative.parts[0].removesuffix(".py")
        for module in imported_modules(path):
            part = workload_part(module)
            if part is None or part == own:
                continue
            if layer_of(part) >= layer_of(own):
                offenders.setdefault(f"workloads/{relative}", []).append(module)
    assert not offenders, f"stages import later or sibling stages: {offenders}"


def test_production_code_never_imports_the_synthetic_generator() -> None:
    offenders = []
    for package in ORDER:
        for path in sorted((REPO / package).rglob("*.py")):
            relative = str(path.relative_to(REPO))
            if relative.startswith("workloads/synthetic/") or relative in SYNTHETIC_USERS:
                continue
            if any(workload_part(module) == "synthetic" for module in imported_modules(path)):
                offenders.append(relative)
    assert not offenders, f"production modules import workloads.synthetic: {offenders}"


FORMAT_AWARE = {
    "ledger/store.py": "the ledger's guarded append, per format in tests/ledger",
    "workloads/asof/readers.py": "route (b)'s pyiceberg reader, per format in the lifecycle",
    "jobs/common.py": "the --format option",
}
"""The only modules above ``lakehouse`` that name a table format, and where each is tested
on both formats. Everything else runs on the shipped mixed-format default in the workload
stories (tests/conftest.py): a new format branch above the table interface must come with
tests per format and an entry here."""

FORMAT_MEMBERS = {"DELTA", "ICEBERG", "DeltaLakeTable", "IcebergTable"}
FORMAT_LITERALS = {"delta", "iceberg"}


def named_formats(path: Path) -> set[str]:
    """Table-format names a file uses: ``TableFormat.X``, the table classes, string literals."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Attribute) and node.attr in FORMAT_MEMBERS:
            found.add(node.attr)
        elif isinstance(node, ast.Name) and node.id in FORMAT_MEMBERS:
            found.add(node.id)
        elif isinstance(node, ast.Constant) and node.value in FORMAT_LITERALS:
            found.add(str(node.value))
    return found


def test_named_formats_finds_members_classes_and_literals(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("a = TableFormat.ICEBERG\nisinstance(t, DeltaLakeTable)\nb = 'delta'\ndelta = 'x'\n")
    assert named_formats(sample) == {"ICEBERG", "DeltaLakeTable", "delta"}


def test_only_the_listed_modules_above_the_table_interface_branch_on_a_format() -> None:
    aware = {
        str(path.relative_to(REPO))
        for package in ("ledger", "workloads", "jobs")
        for path in sorted((REPO / package).rglob("*.py"))
        if named_formats(path)
    }
    assert aware == set(FORMAT_AWARE), (
        f"modules naming a table format: {sorted(aware)}; listed: {sorted(FORMAT_AWARE)}"
    )


SERVICES = "local_services"
"""Throwaway servers for the tests and demos (PostgreSQL, a Spark standalone cluster), outside
the product's layers."""


PRODUCT_USERS = {"cluster_demo.py"}
"""The ``local_services`` modules that use the product (the story they run is the product's)."""


def test_local_services_stay_outside_the_product() -> None:
    """The product never imports the throwaway servers, and they import nothing of the product
    (a cluster never has them; scripts use them through ``python -m local_services.postgres``).
    The cluster demo is the one exception the other way: it drives the product's commands
    and reads its configuration, as a user's script would."""
    importers = [
        str(path.relative_to(REPO))
        for package in ORDER
        for path in sorted((REPO / package).rglob("*.py"))
        if any(module.split(".")[0] == SERVICES for module in imported_modules(path))
    ]
    assert not importers, f"product modules import {SERVICES}: {importers}"
    own = {
        str(path.relative_to(REPO)): sorted(imported_packages(path))
        for path in sorted((REPO / SERVICES).rglob("*.py"))
        if imported_packages(path) and path.name not in PRODUCT_USERS
    }
    assert not own, f"{SERVICES} imports the product: {own}"
