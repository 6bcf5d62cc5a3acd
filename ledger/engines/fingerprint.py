"""Code fingerprints that pin each declared engine version to its code.

**What the fingerprint covers, and why.** Not the whole module: engines keep old and new
versions side by side (``resolve_v1`` next to ``resolve_v2``), and adding v2 must not
change v1's fingerprint, or v1 could no longer be rerun to reproduce old answers. Not just
the function's own source either: a change in a helper or constant it uses changes its
behaviour. So the fingerprint is the sha256 of the function's definition plus every
module-level definition it reaches by name, transitively (helpers, constants, classes,
and the import lines that bind names it uses), each normalised with ``ast.unparse`` with
docstrings removed: comments, formatting and documentation do not count, code does.
Limits: code in *other* modules that the engine calls is not covered (keep an engine's
logic in its module, or bump its version when a shared helper changes), and fingerprints
are computed with the project's Python (3.11; another minor version may unparse
differently).

**No import, no Spark.** The source file is located with the import system's path finder
(:class:`importlib.machinery.PathFinder`) and parsed, never imported or executed.

A run calls :func:`verify_fingerprint` before running an engine, which refuses code that
changed without a version bump; the resulting :class:`~ledger.identity.EngineIdentity`
goes into the run's ``run_started`` ledger entry. ``lakehouse engines fingerprint|check``
expose the same functions on the command line.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import importlib.util
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path
from typing import Final

from lakehouse.errors import EngineError, EngineFingerprintError, LakehouseError
from ledger.engines.catalog import IMPLEMENTATION_PATTERN, PENDING, EngineSpec
from ledger.identity import EngineIdentity

log = logging.getLogger(__name__)

FINGERPRINT_SCHEME: Final = "lakehouse-engine-fingerprint/1"
"""Mixed into every fingerprint; bump it if the normalisation below ever changes."""


def source_file(module: str, search_path: Sequence[str] | None = None) -> Path:
    """The ``.py`` file of ``module``, found without importing it (parents included).

    ``search_path`` replaces ``sys.path`` for the lookup (tests use a temporary folder).
    """
    parts = module.split(".")
    locations: list[str] | None = list(search_path) if search_path is not None else None
    spec: ModuleSpec | None = None
    for i in range(len(parts)):
        name = ".".join(parts[: i + 1])
        if i == 0 and locations is None:
            spec = importlib.util.find_spec(name)  # top-level lookup never imports
        else:
            spec = PathFinder.find_spec(name, locations)
        if spec is None:
            raise EngineError(f"cannot find module {module!r}: no {name!r} on the Python path")
        if i < len(parts) - 1:
            if not spec.submodule_search_locations:
                raise EngineError(f"cannot find module {module!r}: {name!r} is not a package")
            locations = list(spec.submodule_search_locations)
    assert spec is not None
    if not spec.origin or not spec.origin.endswith(".py"):
        raise EngineError(
            f"module {module!r} is not a Python source file ({spec.origin}); cannot fingerprint it"
        )
    return Path(spec.origin)


def fingerprint(implementation: str, *, search_path: Sequence[str] | None = None) -> str:
    """sha256 of the behaviour-relevant source of ``module:function`` (see the module docs)."""
    if not IMPLEMENTATION_PATTERN.match(implementation):
        raise EngineError(f"{implementation!r} is not an implementation path like 'package.module:function'")
    module, function = implementation.split(":", 1)
    path = source_file(module, search_path)
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        raise EngineError(f"{path}:{exc.lineno}: cannot parse engine module {module!r}: {exc.msg}") from None
    value = fingerprint_source(tree, function, where=implementation)
    log.debug("fingerprint of %s (%s): %s", implementation, path, value)
    return value


def fingerprint_source(tree: ast.Module, function: str, *, where: str = "") -> str:
    """Fingerprint of ``function`` within a parsed module (pure; see :func:`fingerprint`)."""
    bindings = _module_bindings(tree)
    if function not in bindings:
        raise EngineError(f"{where or function}: the module defines no top-level {function!r}")
    chosen: dict[tuple[int, int], str] = {}
    pending = [function]
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        for key, node, text in bindings.get(name, []):
            if key in chosen:
                continue
            chosen[key] = text
            pending.extend(sorted(_names_used(node) - seen))
    canonical = "\n".join(chosen[k] for k in sorted(chosen))
    return hashlib.sha256(f"{FINGERPRINT_SCHEME}\n{canonical}".encode()).hexdigest()


_Binding = tuple[tuple[int, int], ast.AST, str]


def _module_bindings(tree: ast.Module) -> dict[str, list[_Binding]]:
    """Top-level name -> the statements (normalised text) that bind it, keyed by position."""
    found: dict[str, list[_Binding]] = {}
    for index, stmt in enumerate(_flat_statements(tree.body)):
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
                continue
            for alias_index, alias in enumerate(stmt.names):
                bound = alias.asname or alias.name.split(".")[0]
                single = copy.copy(stmt)
                single.names = [alias]
                found.setdefault(bound, []).append(((index, alias_index), single, ast.unparse(single)))
            continue
        text = ast.unparse(_without_docstrings(stmt))
        for bound in _bound_names(stmt):
            found.setdefault(bound, []).append(((index, 0), stmt, text))
    return found


def _flat_statements(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements, looking inside if/try/with blocks (e.g. ``if TYPE_CHECKING:``)."""
    for stmt in body:
        if isinstance(stmt, ast.If | ast.Try | ast.With):
            nested: list[ast.stmt] = list(stmt.body)
            if isinstance(stmt, ast.If | ast.Try):
                nested += stmt.orelse
            if isinstance(stmt, ast.Try):
                nested += stmt.finalbody
                for handler in stmt.handlers:
                    nested += handler.body
            yield from _flat_statements(nested)
        else:
            yield stmt


def _bound_names(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {stmt.name}
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, ast.AnnAssign | ast.AugAssign):
        targets = [stmt.target]
    names: set[str] = set()
    for target in targets:
        names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def _names_used(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _without_docstrings(stmt: ast.stmt) -> ast.stmt:
    """A copy of ``stmt`` with every function and class docstring removed."""
    clean = copy.deepcopy(stmt)
    for node in ast.walk(clean):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            body = node.body
            if body and _is_docstring(body[0]):
                node.body = body[1:] or [ast.Pass()]
    return clean


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def verify_fingerprint(engine: EngineSpec, *, search_path: Sequence[str] | None = None) -> EngineIdentity:
    """The engine's identity, after checking its code still matches the declared fingerprint.

    Raises :class:`~lakehouse.errors.EngineFingerprintError` if the code changed (a new
    version must be declared) or if the fingerprint was never filled in.
    """
    actual = fingerprint(engine.implementation, search_path=search_path)
    if engine.fingerprint_pending:
        raise EngineFingerprintError(
            f"engine {engine.ref} has no declared code fingerprint yet ({PENDING!r}); "
            f"run `lakehouse engines fill` and commit conf/engines.yaml"
        )
    if actual != engine.code_fingerprint:
        raise EngineFingerprintError(
            f"engine {engine.ref}'s code changed (declared fingerprint {engine.code_fingerprint}, "
            f"actual {actual}) without a version bump — declare a new version"
        )
    return engine.identity()


@dataclass(frozen=True)
class FingerprintCheck:
    """One declared version checked against its code: ``problem`` is None when it matches."""

    engine: EngineSpec
    problem: str | None

    @property
    def ok(self) -> bool:
        return self.problem is None


def check_fingerprints(
    engines: Iterable[EngineSpec], *, search_path: Sequence[str] | None = None
) -> list[FingerprintCheck]:
    """Verify every declared version; a changed, pending or missing code is reported, not raised."""
    checks = []
    for engine in engines:
        try:
            verify_fingerprint(engine, search_path=search_path)
        except LakehouseError as exc:
            log.info("engine %s does not match its declared fingerprint: %s", engine.ref, exc)
            checks.append(FingerprintCheck(engine, str(exc)))
        else:
            checks.append(FingerprintCheck(engine, None))
    return checks
