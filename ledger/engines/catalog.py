"""The declared engine versions of ``conf/engines.yaml``: strict loading and resolution by date.

An *engine* is a piece of versioned transformation logic (entity resolution, correlation,
...). Each version is declared once, with its implementation (``module:function``), its
parameters, the date it takes effect, and the fingerprint of its code
(:mod:`ledger.engines.fingerprint`). A run asks :meth:`EngineCatalog.resolve` for the
version effective at a date.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Final

from pydantic import Field, JsonValue, ValidationError, field_validator

from lakehouse.digest import digest_of
from lakehouse.errors import ConfigError, UnknownEngineError
from lakehouse.models import StrictModel, describe_validation_error, read_yaml_mapping
from ledger.entries import EngineDeclared
from ledger.identity import EngineIdentity, TextMapping

log = logging.getLogger(__name__)

DEFAULT_ENGINES_PATH: Final = Path("conf/engines.yaml")
PENDING: Final = "pending"
"""Placeholder fingerprint of a declared version whose code does not exist yet."""
IMPLEMENTATION_PATTERN: Final = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
"""``package.module:function``."""
_FINGERPRINT = re.compile(rf"^([0-9a-f]{{64}}|{PENDING})$")
DATA_REF_PATTERN: Final = re.compile(r"^[a-z_]\w*\.[a-z_]\w*(:[a-z_]\w*)?$")
"""What an engine consumes or produces: ``zone.table`` or ``zone.table:column``."""


def _data_refs(values: tuple[str, ...]) -> tuple[str, ...]:
    bad = [v for v in values if not DATA_REF_PATTERN.match(v)]
    if bad:
        raise ValueError(f"{bad[0]!r} must look like 'zone.table' or 'zone.table:column'")
    return values


def data_refs_meet(produced: str, consumed: str) -> bool:
    """Whether what one engine produces is (part of) what another consumes.

    Equal refs meet, and a whole table meets any column of it (``gold.baselines`` and
    ``gold.baselines:mean``); two different columns of one table do not.
    """
    p_table, _, p_column = produced.partition(":")
    c_table, _, c_column = consumed.partition(":")
    return p_table == c_table and (not p_column or not c_column or p_column == c_column)


class EngineSpec(StrictModel):
    """One declared engine version, as written in ``conf/engines.yaml``."""

    name: str
    version: int = Field(ge=1)
    implementation: str
    """``package.module:function``."""
    effective_from: date
    """From this date on, this version decides (until a later version takes effect)."""
    description: str
    parameters: dict[str, JsonValue] = Field(default_factory=dict)
    code_fingerprint: str
    """sha256 from :func:`ledger.engines.fingerprint.fingerprint`, or ``pending`` until the code exists."""
    reference_data: TextMapping = Field(default_factory=dict)
    """Reference tables the engine reads, name -> snapshot/version (none of the shipped engines
    reads any: empty is the truth, not a gap)."""
    model_versions: TextMapping = Field(default_factory=dict)
    """Models it applies, name -> version (none of the shipped engines applies a model)."""
    consumes: tuple[str, ...] = ()
    """What it reads: ``zone.table`` or ``zone.table:column`` (e.g. ``silver.events:entity_id``)."""
    produces: tuple[str, ...] = ()
    """What it decides: ``zone.table`` or ``zone.table:column``. An engine that consumes what
    another produces is downstream of it (:meth:`EngineCatalog.downstream`)."""

    @field_validator("consumes", "produces")
    @classmethod
    def _refs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _data_refs(value)

    @field_validator("name")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not value.isidentifier():
            raise ValueError("must be a plain identifier (letters, digits, '_')")
        return value

    @field_validator("implementation")
    @classmethod
    def _import_path(cls, value: str) -> str:
        if not IMPLEMENTATION_PATTERN.match(value):
            raise ValueError("must look like 'package.module:function'")
        return value

    @field_validator("code_fingerprint")
    @classmethod
    def _fingerprint(cls, value: str) -> str:
        if not _FINGERPRINT.match(value):
            raise ValueError(
                f"must be 64 lowercase hex digits (lakehouse engines fingerprint) or {PENDING!r}"
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
        """The declared identity (declared fingerprint; see :func:`~ledger.engines.verify_fingerprint`)."""
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


class _EnginesFile(StrictModel):
    engines: list[EngineSpec] = Field(default_factory=list)


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

    def downstream(self, name: str) -> list[str]:
        """Engines fed, directly or transitively, by what ``name`` produces (nearest first).

        Any declared version counts: a version that consumes or produces something makes
        the link. The change of ``entity_resolution`` reaches ``correlation`` (which
        consumes ``silver.events:entity_id``) and ``entity_daily`` and from it ``baselines``.
        """
        self.resolve(name)
        produced = {n: {p for e in self.versions(n) for p in e.produces} for n in self.names()}
        consumed = {n: {c for e in self.versions(n) for c in e.consumes} for n in self.names()}
        chain: list[str] = []
        frontier = [name]
        while frontier:
            current = frontier.pop(0)
            for other in self.names():
                if other == name or other in chain:
                    continue
                if any(data_refs_meet(p, c) for p in produced[current] for c in consumed[other]):
                    chain.append(other)
                    frontier.append(other)
        return chain

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
    raw = read_yaml_mapping(file, what="engines file", hint="pass the path of conf/engines.yaml")
    try:
        engines = tuple(_EnginesFile.model_validate(raw).engines)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(file, exc, where=_location(raw, exc))) from None
    _check_order(file, engines)
    log.debug("loaded %d engine versions from %s", len(engines), file)
    return EngineCatalog(file, engines)


def _location(raw: dict[str, Any], exc: ValidationError) -> str | None:
    """``engines[2] (name@version).key`` for a problem inside one declaration, else None."""
    loc = list(exc.errors()[0]["loc"])
    if len(loc) < 2 or loc[0] != "engines" or not isinstance(loc[1], int):
        return None
    items = raw.get("engines") or []
    item = items[loc[1]] if loc[1] < len(items) else {}
    label = f"{item.get('name', '?')}@{item.get('version', '?')}" if isinstance(item, dict) else "?"
    return ".".join([f"engines[{loc[1]}] ({label})", *(str(part) for part in loc[2:])])


def _check_order(file: Path, engines: tuple[EngineSpec, ...]) -> None:
    """Each engine's versions are listed once, in increasing order of version and effective date."""
    seen: dict[str, EngineSpec] = {}
    for engine in engines:
        before = seen.get(engine.name)
        if before is not None:
            if engine.version <= before.version:
                raise ConfigError(
                    f"{file}: key 'engines': {engine.ref} is declared after {before.ref}: list each "
                    f"engine's versions once, in increasing order"
                )
            if engine.effective_from <= before.effective_from:
                raise ConfigError(
                    f"{file}: key 'engines': {engine.ref} takes effect {engine.effective_from}, not after "
                    f"{before.ref} ({before.effective_from})"
                )
        seen[engine.name] = engine
