"""Which version of an engine is in force for a processing date.

**The rule.** For engine ``E`` and processing date ``D`` (the date of the build's clock,
UTC), the version in force is the latest declared version with ``effective_from <= D``,
except that a version which *restates history* is in force only once a replay publishing
it has been recorded in the ledger; until then the version before it stays in force.

A version restates history when an earlier version of the same engine has produced
output (a recorded run that used it finished ``ok`` with outputs, or published). So:

* on a lakehouse that never ran ``E``, the latest effective version simply decides;
* ER v2 (effective 2026-11-01) after months of ER v1 builds does not decide new days on
  its own: new days would then be decided by v2 next to v1 rows of the same entities.
  It waits for the ``er-v2-recorrelation`` replay to be published; the next build after
  that publication resolves with v2. A publication that was rolled back does not count.

An operator may pin a version instead (``lakehouse build --engine entity_resolution@1``),
e.g. to start a fresh lakehouse under the version its history was decided by; the
next builds then follow the rule from there (:func:`pinned_in_force`).

Declared versions must match what the ledger recorded when they were declared
(``engine_declared``: identity and effective date); a version edited after its
declaration is refused.

:func:`decide_in_force` is the pure decision (unit-tested); :func:`engines_in_force`
gathers its facts from the catalog and ledger entries handed in (the caller reads them).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date

from lakehouse.errors import ConfigError, UnknownEngineError
from ledger.engines.catalog import EngineCatalog, EngineSpec
from ledger.entries import EngineDeclared, LedgerEntryBase, Publication, Rollback, RunFinished, RunStarted

__all__ = [
    "EngineHistory",
    "InForce",
    "decide_in_force",
    "engine_history",
    "engines_in_force",
    "pinned_in_force",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InForce:
    """The version of one engine in force at a date, and why (recorded in ``run_started``)."""

    spec: EngineSpec
    at: date
    reason: str

    @property
    def ref(self) -> str:
        return self.spec.ref


@dataclass(frozen=True)
class EngineHistory:
    """What the ledger says about one engine's versions."""

    produced: frozenset[int] = frozenset()
    """Versions that produced output (a run using them finished ok with outputs, or published)."""
    published: Mapping[int, str] = field(default_factory=dict)
    """Version -> the run whose live publication (not rolled back) published output under it."""


def decide_in_force(versions: Sequence[EngineSpec], at: date, history: EngineHistory) -> InForce:
    """The version of one engine in force at ``at`` (see the module docstring); pure.

    ``versions`` are the engine's declared versions (any order).
    """
    ordered = sorted(versions, key=lambda e: e.version)
    if not ordered:
        raise UnknownEngineError("no declared versions to choose from")
    effective = [e for e in ordered if e.effective_from <= at]
    if not effective:
        first = ordered[0]
        raise UnknownEngineError(
            f"no version of engine {first.name!r} is effective at {at}; the first, {first.ref}, "
            f"takes effect {first.effective_from}"
        )
    later = [e for e in ordered if e.effective_from > at]
    pending = f"; {later[0].ref} takes effect {later[0].effective_from}" if later else ""
    waiting: list[str] = []
    for candidate in reversed(effective):
        earlier = sorted(v for v in history.produced if v < candidate.version)
        if not earlier:
            reason = f"latest version effective on {at} (from {candidate.effective_from})"
            return InForce(candidate, at, _joined(reason, waiting) + pending)
        run = history.published.get(candidate.version)
        if run is not None:
            reason = (
                f"latest version effective on {at} (from {candidate.effective_from}); its restatement "
                f"of history built by {_refs(candidate.name, earlier)} was published by run {run}"
            )
            return InForce(candidate, at, _joined(reason, waiting) + pending)
        waiting.append(
            f"{candidate.ref} (effective {candidate.effective_from}) restates history built by "
            f"{_refs(candidate.name, earlier)} and waits for a replay publishing it"
        )
    raise AssertionError("the first version never restates history")  # pragma: no cover


def _refs(name: str, versions: Iterable[int]) -> str:
    return ", ".join(f"{name}@{v}" for v in versions)


def _joined(reason: str, waiting: Sequence[str]) -> str:
    if not waiting:
        return reason
    return f"{reason}; not in force yet: " + "; ".join(waiting)


def engine_history(entries: Sequence[LedgerEntryBase]) -> dict[str, EngineHistory]:
    """Per engine name, which versions produced output and which were published (ledger order)."""
    engines_of: dict[str, dict[str, set[int]]] = {}
    produced: dict[str, set[int]] = {}
    live: dict[str, Publication | None] = {}
    for entry in entries:
        run = entry.run_id
        if run is None:
            continue
        if isinstance(entry, RunStarted) and entry.engines:
            used = engines_of.setdefault(run, {})
            for identity in entry.engines:
                used.setdefault(identity.name, set()).add(identity.version)
        elif isinstance(entry, RunFinished) and entry.status == "ok" and _served(entry):
            for name, versions in engines_of.get(run, {}).items():
                produced.setdefault(name, set()).update(versions)
        elif isinstance(entry, Publication):
            live[run] = entry
            for name, versions in engines_of.get(run, {}).items():
                produced.setdefault(name, set()).update(versions)
        elif isinstance(entry, Rollback) and run in live:
            live[run] = None
    published: dict[str, dict[int, str]] = {}
    for run, publication in live.items():
        if publication is None:
            continue
        for name, versions in engines_of.get(run, {}).items():
            published.setdefault(name, {})[max(versions)] = run
    names = set(produced) | set(published)
    return {
        name: EngineHistory(frozenset(produced.get(name, set())), dict(published.get(name, {})))
        for name in names
    }


def _served(finished: RunFinished) -> bool:
    """Whether a finished run wrote to serving (not only to candidates)."""
    return any(output.candidate is None for output in finished.outputs.values())


def _check_declarations(catalog: EngineCatalog, entries: Sequence[LedgerEntryBase]) -> None:
    """Refuse a declared version whose file entry no longer says what the ledger recorded."""
    declared = {(e.name, e.version): e for e in catalog.engines}
    for entry in entries:
        if not isinstance(entry, EngineDeclared):
            continue
        spec = declared.get((entry.engine.name, entry.engine.version))
        if spec is None:
            continue
        same = spec.identity().digest == entry.engine.digest and spec.effective_from == entry.effective_from
        if not same:
            raise ConfigError(
                f"{catalog.path}: key 'engines': {spec.ref} differs from its declaration recorded in "
                f"the ledger (effective {entry.effective_from}, fingerprint "
                f"{entry.engine.code_fingerprint[:12]}); a declared version is never edited: "
                f"declare a new version instead"
            )


def _check_known(catalog: EngineCatalog, name: str, history: EngineHistory) -> None:
    """Refuse a catalog that lacks a version the ledger says produced output: the rule would
    silently choose an older version and build next to (or over) that version's rows. This
    is the catalog of another lakehouse, or a copy without the versions declared in this one's."""
    declared = {e.version for e in catalog.versions(name)}
    unknown = sorted((history.produced | set(history.published)) - declared)
    if unknown:
        raise ConfigError(
            f"{catalog.path}: key 'engines': the ledger records output of {name}@{unknown[-1]}, which this "
            f"file does not declare; pass the --engines file it was declared in"
        )


def pinned_in_force(spec: EngineSpec, rule: InForce, history: EngineHistory) -> InForce:
    """An operator's pin (``lakehouse build --engine name@version``) instead of the rule; pure.

    A pin chooses the version a build runs, typically on a fresh lakehouse that starts
    under an older version than the latest effective one (the rule alone would pick the
    latest). The rule's own choice is kept in the reason. A pin is refused when it would
    mix versions: below a version whose restatement is published, or not yet effective.
    """
    if spec.effective_from > rule.at:
        raise UnknownEngineError(
            f"cannot pin {spec.ref}: it takes effect {spec.effective_from}, after the build's date {rule.at}"
        )
    newer = sorted(v for v in history.published if v > spec.version)
    if newer:
        run = history.published[newer[-1]]
        raise UnknownEngineError(
            f"cannot pin {spec.ref}: the restatement under {spec.name}@{newer[-1]} is published (run "
            f"{run}), so new rows under {spec.ref} would sit beside it; roll that publication back first"
        )
    if spec.version == rule.spec.version:
        return rule
    reason = f"pinned by the operator; the rule alone would choose {rule.ref} ({rule.reason})"
    return InForce(spec, rule.at, reason)


def engines_in_force(
    catalog: EngineCatalog,
    entries: Sequence[LedgerEntryBase],
    names: Sequence[str],
    at: date,
    *,
    pinned: Mapping[str, int] | None = None,
) -> dict[str, InForce]:
    """The version in force at ``at`` of each engine in ``names`` (ledger ``entries`` in order).

    ``pinned`` (engine name -> version) overrides the rule for those engines
    (:func:`pinned_in_force`); a pin naming an engine the build does not run is refused.
    """
    pins = dict(pinned or {})
    unused = sorted(set(pins) - set(names))
    if unused:
        raise UnknownEngineError(
            f"--engine {unused[0]}@{pins[unused[0]]}: this build runs {', '.join(names)}, not {unused[0]}"
        )
    _check_declarations(catalog, entries)
    history = engine_history(entries)
    chosen: dict[str, InForce] = {}
    for name in names:
        catalog.resolve(name)  # a clear error for an undeclared engine
        past = history.get(name, EngineHistory())
        _check_known(catalog, name, past)
        decision = decide_in_force(catalog.versions(name), at, past)
        if name in pins:
            decision = pinned_in_force(catalog.resolve(name, pins[name]), decision, past)
        log.info("engine in force at %s: %s (%s)", at, decision.ref, decision.reason)
        chosen[name] = decision
    return chosen
