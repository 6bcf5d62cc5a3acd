"""Declared engine versions (``conf/engines.yaml``) and the code fingerprints that pin them.

An *engine* is a piece of versioned transformation logic (entity resolution, correlation,
...). Each version is declared once, with its implementation (``module:function``), its
parameters, the date it takes effect, and the fingerprint of its code. A run asks
:meth:`EngineCatalog.resolve` for the version effective at a date and calls
:func:`verify_fingerprint` before running it, which refuses code that changed without a
version bump. The resulting :class:`~ledger.identity.EngineIdentity` goes into the run's
``run_started`` ledger entry.

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

Command line (the lead fills placeholders once engine modules exist)::

    python -m ledger.engines fingerprint workloads.engines.correlation:correlate_v1
    python -m ledger.engines fill conf/engines.yaml      # replace every 'pending' fingerprint
    python -m ledger.engines check conf/engines.yaml     # exit 1 if any code changed
"""

from __future__ import annotations

import argparse
import ast
import copy
import hashlib
import importlib.util
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    field_validator,
    model_validator,
)

from lakehouse.digest import digest_of
from lakehouse.errors import (
    ConfigError,
    EngineError,
    EngineFingerprintError,
    LakehouseError,
    UnknownEngineError,
)
from ledger.entries import EngineDeclared
from ledger.identity import EngineIdentity, TextMapping

DEFAULT_ENGINES_PATH = Path("conf/engines.yaml")
PENDING = "pending"
"""Placeholder fingerprint of a declared version whose code does not exist yet."""
FINGERPRINT_SCHEME = "lakehouse-engine-fingerprint/1"
"""Mixed into every fingerprint; bump it if the normalisation below ever changes."""

_IMPLEMENTATION = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
_FINGERPRINT = re.compile(rf"^([0-9a-f]{{64}}|{PENDING})$")


# -- declarations -----------------------------------------------------------------------------


class EngineSpec(BaseModel):
    """One declared engine version, as written in ``conf/engines.yaml``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    version: int = Field(ge=1)
    implementation: str
    """``package.module:function``."""
    effective_from: date
    """From this date on, this version decides (until a later version takes effect)."""
    description: str
    parameters: dict[str, JsonValue] = Field(default_factory=dict)
    code_fingerprint: str
    """sha256 from :func:`fingerprint`, or ``pending`` until the code exists."""
    reference_data: TextMapping = Field(default_factory=dict)
    model_versions: TextMapping = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not value.isidentifier():
            raise ValueError("must be a plain identifier (letters, digits, '_')")
        return value

    @field_validator("implementation")
    @classmethod
    def _import_path(cls, value: str) -> str:
        if not _IMPLEMENTATION.match(value):
            raise ValueError("must look like 'package.module:function'")
        return value

    @field_validator("code_fingerprint")
    @classmethod
    def _fingerprint(cls, value: str) -> str:
        if not _FINGERPRINT.match(value):
            raise ValueError(
                f"must be 64 lowercase hex digits (python -m ledger.engines fingerprint) or {PENDING!r}"
            )
        return value

    @property
    def ref(self) -> str:
        """``name@version``."""
        return f"{self.name}@{self.version}"

    @property
    def module(self) -> str:
        return self.implementation.split(":", 1)[0]

    @property
    def function(self) -> str:
        return self.implementation.split(":", 1)[1]

    @property
    def fingerprint_pending(self) -> bool:
        return self.code_fingerprint == PENDING

    def identity(self) -> EngineIdentity:
        """The declared identity (declared fingerprint; see :func:`verify_fingerprint`)."""
        return EngineIdentity(
            name=self.name,
            version=self.version,
            code_fingerprint=self.code_fingerprint,
            config_digest=digest_of(self.parameters),
            reference_data=dict(self.reference_data),
            model_versions=dict(self.model_versions),
        )

    def declared_entry(self, *, run_id: str | None = None) -> EngineDeclared:
        """The ``engine_declared`` ledger entry of this version."""
        return EngineDeclared(
            run_id=run_id,
            engine=self.identity(),
            implementation=self.implementation,
            parameters=dict(self.parameters),
            effective_from=self.effective_from,
            description=self.description,
        )


class _EnginesFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    engines: list[EngineSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _versions_in_order(self) -> _EnginesFile:
        seen: dict[str, EngineSpec] = {}
        for engine in self.engines:
            before = seen.get(engine.name)
            if before is not None:
                if engine.version <= before.version:
                    raise ValueError(
                        f"{engine.ref} is declared after {before.ref}: list each engine's versions "
                        f"once, in increasing order"
                    )
                if engine.effective_from <= before.effective_from:
                    raise ValueError(
                        f"{engine.ref} takes effect {engine.effective_from}, not after {before.ref} "
                        f"({before.effective_from})"
                    )
            seen[engine.name] = engine
        return self


@dataclass(frozen=True)
class EngineCatalog:
    """Every declared engine version of one ``engines.yaml``."""

    path: Path
    engines: tuple[EngineSpec, ...]

    def names(self) -> list[str]:
        return sorted({e.name for e in self.engines})

    def versions(self, name: str) -> list[EngineSpec]:
        """The declared versions of one engine, oldest first."""
        return sorted((e for e in self.engines if e.name == name), key=lambda e: e.version)

    def resolve(self, name: str, version: int | None = None, at: date | None = None) -> EngineSpec:
        """The version asked for, or the one effective at ``at``, or the newest.

        With both ``version`` and ``at``, the version must already be effective at ``at``.
        """
        versions = self.versions(name)
        if not versions:
            known = ", ".join(self.names()) or "none"
            raise UnknownEngineError(
                f"engine {name!r} is not declared in {self.path}; declared engines: {known}"
            )
        if version is not None:
            chosen = next((e for e in versions if e.version == version), None)
            if chosen is None:
                known = ", ".join(str(e.version) for e in versions)
                raise UnknownEngineError(
                    f"engine {name}@{version} is not declared in {self.path}; declared versions: {known}"
                )
            if at is not None and chosen.effective_from > at:
                raise UnknownEngineError(
                    f"engine {chosen.ref} takes effect {chosen.effective_from}, after {at}; "
                    f"use an earlier version for that date"
                )
            return chosen
        if at is None:
            return versions[-1]
        effective = [e for e in versions if e.effective_from <= at]
        if not effective:
            raise UnknownEngineError(
                f"no version of engine {name!r} is effective at {at}; the first, {versions[0].ref}, "
                f"takes effect {versions[0].effective_from}"
            )
        return effective[-1]


def load_engines(path: Path | str = DEFAULT_ENGINES_PATH) -> EngineCatalog:
    """Read and strictly validate an engines file; errors name the file, the engine and the key."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"{file}: engines file not found; pass the path of conf/engines.yaml")
    return EngineCatalog(file, tuple(_parse_engines(file, file.read_text(encoding="utf-8"))))


def _parse_engines(file: Path, text: str) -> list[EngineSpec]:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{file}:{where} is not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{file}: the top level must be a mapping with the key 'engines'")
    try:
        return list(_EnginesFile.model_validate(raw).engines)
    except ValidationError as exc:
        raise ConfigError(_describe(file, raw, exc)) from None


def _describe(file: Path, raw: dict[str, Any], exc: ValidationError) -> str:
    first = exc.errors()[0]
    loc = list(first["loc"])
    where = ""
    if len(loc) >= 2 and loc[0] == "engines" and isinstance(loc[1], int):
        items = raw.get("engines") or []
        item = items[loc[1]] if loc[1] < len(items) else {}
        label = f"{item.get('name', '?')}@{item.get('version', '?')}" if isinstance(item, dict) else "?"
        where = f"engines[{loc[1]}] ({label})"
        loc = loc[2:]
    key = ".".join(str(p) for p in loc)
    prefix = f"{file}: {where}" + (": " if where else "")
    if first["type"] == "extra_forbidden":
        return f"{prefix}unknown key '{key}'; remove it or check its spelling"
    if first["type"] == "missing":
        return f"{prefix}missing key '{key}'"
    if not key:
        return f"{prefix}{first['msg'].removeprefix('Value error, ')}"
    message = first["msg"].removeprefix("Value error, ")
    return f"{prefix}key '{key}' has invalid value {first.get('input')!r}: {message}"


# -- fingerprints -----------------------------------------------------------------------------


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
    if not _IMPLEMENTATION.match(implementation):
        raise EngineError(f"{implementation!r} is not an implementation path like 'package.module:function'")
    module, function = implementation.split(":", 1)
    path = source_file(module, search_path)
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        raise EngineError(f"{path}:{exc.lineno}: cannot parse engine module {module!r}: {exc.msg}") from None
    return fingerprint_source(tree, function, where=implementation)


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
            f"run `python -m ledger.engines fill` and commit conf/engines.yaml"
        )
    if actual != engine.code_fingerprint:
        raise EngineFingerprintError(
            f"engine {engine.ref}'s code changed (declared fingerprint {engine.code_fingerprint}, "
            f"actual {actual}) without a version bump — declare a new version"
        )
    return engine.identity()


# -- changing engines.yaml ------------------------------------------------------------------


def declare(
    path: Path | str,
    *,
    name: str,
    implementation: str,
    effective_from: date,
    description: str,
    parameters: dict[str, JsonValue] | None = None,
    reference_data: dict[str, str] | None = None,
    model_versions: dict[str, str] | None = None,
    run_id: str | None = None,
    search_path: Sequence[str] | None = None,
) -> EngineDeclared:
    """Declare the next version of an engine in ``path`` and return its ledger entry.

    The version is one above the newest declared (1 for a new engine); the fingerprint is
    computed from the code now. The new item is appended as text at the end of the file,
    so comments and layout are kept; if the file does not end with its ``engines`` list
    (so that appending would not parse back to the same declarations), the file is
    rewritten deterministically with ``yaml.safe_dump`` instead, which drops comments.
    The caller appends the returned entry to the ledger.
    """
    catalog = load_engines(path)
    versions = catalog.versions(name)
    latest = versions[-1] if versions else None
    try:
        spec = EngineSpec(
            name=name,
            version=latest.version + 1 if latest else 1,
            implementation=implementation,
            effective_from=effective_from,
            description=description,
            parameters=parameters or {},
            code_fingerprint=fingerprint(implementation, search_path=search_path),
            reference_data=reference_data or {},
            model_versions=model_versions or {},
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise EngineError(f"cannot declare engine {name!r}: {first['loc'][0]}: {first['msg']}") from None
    if latest is not None:
        if _same_logic(latest, spec):
            raise EngineError(
                f"engine {latest.ref} already declares this code and these parameters; nothing to declare"
            )
        if spec.effective_from <= latest.effective_from:
            raise EngineError(
                f"{spec.ref} must take effect after {latest.ref} ({latest.effective_from}), "
                f"not {spec.effective_from}"
            )
    file = Path(path)
    text = file.read_text(encoding="utf-8")
    expected = [*catalog.engines, spec]
    appended = _append_item(text, spec)
    if appended is not None and _parse_engines(file, appended) == expected:
        new_text = appended
    else:
        new_text = _dump(expected)
    _write_atomically(file, new_text)
    return spec.declared_entry(run_id=run_id)


def _same_logic(a: EngineSpec, b: EngineSpec) -> bool:
    left, right = a.identity(), b.identity()
    return (
        a.implementation == b.implementation
        and left.code_fingerprint == right.code_fingerprint
        and left.config_digest == right.config_digest
        and left.reference_data == right.reference_data
        and left.model_versions == right.model_versions
    )


def _item(spec: EngineSpec) -> dict[str, Any]:
    item: dict[str, Any] = {
        "name": spec.name,
        "version": spec.version,
        "implementation": spec.implementation,
        "effective_from": spec.effective_from,
        "description": spec.description,
        "parameters": dict(spec.parameters),
        "code_fingerprint": spec.code_fingerprint,
    }
    if spec.reference_data:
        item["reference_data"] = dict(spec.reference_data)
    if spec.model_versions:
        item["model_versions"] = dict(spec.model_versions)
    return item


def _append_item(text: str, spec: EngineSpec) -> str | None:
    """``text`` with the spec appended as a list item of ``engines``, or None if unsure how."""
    match = re.search(r"^( *)- name:", text, flags=re.MULTILINE)
    if match is None:
        return None
    indent = match.group(1)
    block = yaml.safe_dump([_item(spec)], sort_keys=False, default_flow_style=False, allow_unicode=True)
    lines = [indent + line if line else line for line in block.splitlines()]
    return text.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"


def _dump(engines: Sequence[EngineSpec]) -> str:
    header = "# Declared engine versions; rewritten by ledger.engines.declare (comments were not kept).\n"
    body = yaml.safe_dump(
        {"engines": [_item(e) for e in engines]},
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
    )
    return header + body


def _write_atomically(file: Path, text: str) -> None:
    handle, temp = tempfile.mkstemp(dir=file.parent, prefix=f".{file.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temp, file)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


_PENDING_LINE = re.compile(rf"^(\s*(?:-\s+)?code_fingerprint:\s*)([\"']?){PENDING}\2(?=\s|$)", re.MULTILINE)


def fill_fingerprints(path: Path | str, *, search_path: Sequence[str] | None = None) -> list[str]:
    """Replace every ``pending`` fingerprint in ``path`` with the code's; returns the refs filled.

    Edits only those values in place (comments kept); refuses, changing nothing, if an
    engine's module is missing or the file's layout makes the edit ambiguous.
    """
    file = Path(path)
    catalog = load_engines(file)
    pending = [e for e in catalog.engines if e.fingerprint_pending]
    if not pending:
        return []
    values = [fingerprint(e.implementation, search_path=search_path) for e in pending]
    text = file.read_text(encoding="utf-8")
    matches = list(_PENDING_LINE.finditer(text))
    if len(matches) != len(pending):
        raise EngineError(
            f"{file}: found {len(matches)} 'code_fingerprint: {PENDING}' lines for {len(pending)} pending "
            f"engines; fill them by hand with python -m ledger.engines fingerprint"
        )
    pieces = []
    last = 0
    for match, value in zip(matches, values, strict=True):
        pieces.append(text[last : match.start()] + match.group(1) + value)
        last = match.end()
    new_text = "".join(pieces) + text[last:]
    filled = {(e.name, e.version): v for e, v in zip(pending, values, strict=True)}
    check = _parse_engines(file, new_text)
    if [e.code_fingerprint for e in check if (e.name, e.version) in filled] != values:
        raise EngineError(f"{file}: could not fill the pending fingerprints unambiguously; edit it by hand")
    _write_atomically(file, new_text)
    return [e.ref for e in pending]


# -- command line ----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ledger.engines fingerprint|fill|check``; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m ledger.engines", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("fingerprint", help="print the code fingerprint of module:function")
    one.add_argument("implementation")
    for command, text in (
        ("fill", "replace 'pending' fingerprints in an engines file"),
        ("check", "verify every declared fingerprint against the code"),
    ):
        sub = commands.add_parser(command, help=text)
        sub.add_argument("path", nargs="?", default=str(DEFAULT_ENGINES_PATH))
    args = parser.parse_args(argv)
    try:
        if args.command == "fingerprint":
            print(fingerprint(args.implementation))
            return 0
        if args.command == "fill":
            for ref in fill_fingerprints(args.path):
                print(f"filled {ref}")
            return 0
        failures = 0
        for engine in load_engines(args.path).engines:
            try:
                verify_fingerprint(engine)
            except LakehouseError as exc:
                failures += 1
                print(f"FAIL {engine.ref}: {exc}")
            else:
                print(f"ok   {engine.ref} {engine.code_fingerprint[:12]}")
        return 1 if failures else 0
    except LakehouseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
