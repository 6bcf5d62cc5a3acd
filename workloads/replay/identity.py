"""Who a replay is: its verified engines, its pinned inputs, its run id and candidate names.

* **Engines.** A plan names an engine change and the catalog says where in the chain it
  sits (:func:`change_kind`, from what each version declares it ``produces``):

  - a **resolver** change (``entity_resolution`` 1 -> 3) is upstream of the answer: the
    plan's ``downstream`` engines re-run on top of it and the last one is the *producer*
    of the answer table (``correlation``);
  - a **producer** change (``correlation`` 1 -> 2) writes the answer table itself: both
    versions run on the entities of the resolver *in force* at the replay's processing
    date (:mod:`ledger.engines.in_force`; the plan names no downstream).

  Every engine is resolved in ``conf/engines.yaml`` and its code fingerprint verified
  before anything runs, so a change of code without a version bump is refused
  (:class:`~lakehouse.errors.EngineFingerprintError`). Past this module, the flow asks
  :class:`ReplayEngines` for the two resolutions and the producer and never for the kind.
* **Run id.** ``"replay-" + digest(plan digest, pinned input versions, engine identity
  digests)[:16]``: the same plan against the same pins with the same engines is the same
  run, so its ledger entries deduplicate and a rerun resumes it instead of starting a
  second one.
* **Candidate names.** ``replay_<16 hex>_v<base version>``: a run's candidate can be found
  again from the run id alone (another process, after a crash), and the name carries the
  serving version it was staged from.

Pure apart from :func:`pin_inputs` (which reads table versions) and :func:`open_candidate`
(which lists a table's candidates).
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from lakehouse.digest import digest_of
from lakehouse.errors import ReplayError, ReplayRefusedError, UsageError
from lakehouse.tables import Candidate, Table
from ledger.engines import EngineCatalog, EngineSpec, verify_fingerprint
from ledger.engines.catalog import data_refs_meet
from ledger.identity import EngineIdentity
from workloads.gold.correlations import row_engine_label
from workloads.vocabulary import ChangeKind, TableName

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.tables import TableRegistry
    from workloads.replay.plan import CorrectionPlan

log = logging.getLogger(__name__)

BRONZE_PREFIX: Final = "bronze."
RUN_PREFIX: Final = "replay-"
ENGINE_SEPARATOR: Final = ";"


@dataclass(frozen=True)
class ReplayEngines:
    """The verified engines of a replay: the changed one (old and new) and the rest of its chain."""

    old: EngineSpec
    new: EngineSpec
    downstream: tuple[EngineSpec, ...]
    identities: tuple[EngineIdentity, ...]
    """Verified identities of every engine involved (old, new, then the downstream engines of
    a resolver change or the resolver of a producer change), in that order."""
    kind: ChangeKind = ChangeKind.RESOLVER
    resolver: EngineSpec | None = None
    """A producer change: the entity resolver in force, whose entities both versions run on."""

    @property
    def producer(self) -> EngineSpec:
        """The engine that writes the answer table: the new version of a producer change, else
        the last downstream engine."""
        return self.new if self.kind is ChangeKind.PRODUCER else self.downstream[-1]

    @property
    def resolutions(self) -> tuple[EngineSpec, EngineSpec]:
        """The resolvers whose entities serving's rows and the candidate's rows are decided on.

        A resolver change: its old and new version. A producer change: the resolver in force,
        twice (the entities do not move; only what is said about them does).
        """
        if self.kind is ChangeKind.PRODUCER:
            if self.resolver is None:
                raise ReplayError(f"producer change {self.change} has no resolver in force")
            return self.resolver, self.resolver
        return self.old, self.new

    @property
    def label(self) -> str:
        """The ``engine`` value of rows this replay writes: the versions that decided them.

        A resolver change: ``correlation@1;entity_resolution@2``, the correlation logic
        unchanged on v2's entities. A producer change: what a forward Gold build under the
        new producer writes on the resolver in force (``correlation@2;entity_resolution@3``,
        ``correlation@2`` on v1 entities; :func:`~workloads.gold.correlations.row_engine_label`),
        so the first Gold build after the publication finds the same rows and the same label.
        """
        if self.kind is ChangeKind.PRODUCER:
            return row_engine_label(self.producer.ref, [self.resolutions[1].ref])
        return ENGINE_SEPARATOR.join([self.producer.ref, self.new.ref])

    @property
    def change(self) -> str:
        """``entity_resolution@1 -> entity_resolution@2``."""
        return f"{self.old.ref} -> {self.new.ref}"

    def digests(self) -> list[str]:
        return sorted(identity.digest for identity in self.identities)


def change_kind(plan: CorrectionPlan, catalog: EngineCatalog) -> ChangeKind:
    """Whether the plan changes the answer table's producer or an engine upstream of it.

    A version of the changed engine that declares it ``produces`` the answer table makes it
    the producer; anything else is upstream (a resolver).
    """
    answer = plan.answer.table
    versions = catalog.versions(plan.engine_change.engine)
    if any(data_refs_meet(made, answer) for spec in versions for made in spec.produces):
        return ChangeKind.PRODUCER
    return ChangeKind.RESOLVER


def upstream_resolver(catalog: EngineCatalog, producer: EngineSpec) -> str:
    """The engine whose output the producer consumes (its entities): exactly one must exist."""
    found = sorted(
        name
        for name in catalog.names()
        if name != producer.name
        and any(
            data_refs_meet(made, used)
            for spec in catalog.versions(name)
            for made in spec.produces
            for used in producer.consumes
        )
    )
    if len(found) != 1:
        raise UsageError(
            f"engine {producer.ref} consumes {', '.join(producer.consumes) or 'nothing'}: expected exactly "
            f"one engine producing it in {catalog.path}, found {', '.join(found) or 'none'}"
        )
    return found[0]


def resolve_engines(
    plan: CorrectionPlan, catalog: EngineCatalog, *, resolver: EngineSpec | None = None
) -> ReplayEngines:
    """Resolve and verify every engine a plan runs; refuses changed code without a version bump.

    ``resolver``: for a producer change, the entity resolver in force (the caller decides it
    from the ledger, :func:`workloads.replay.setup.setup_replay`); ignored otherwise.
    """
    change = plan.engine_change
    try:
        old_version, new_version = int(change.from_version), int(change.to_version)
    except ValueError:
        raise UsageError(
            f"plan {plan.plan}: engine versions must be integers, got "
            f"from={change.from_version!r} to={change.to_version!r}"
        ) from None
    old = catalog.resolve(change.engine, old_version)
    new = catalog.resolve(change.engine, new_version)
    if change_kind(plan, catalog) is ChangeKind.PRODUCER:
        if change.downstream:
            raise UsageError(
                f"plan {plan.plan}: {change.engine} produces {plan.answer.table} itself, so "
                f"engine_change.downstream must be empty (got {', '.join(change.downstream)})"
            )
        if resolver is None:
            raise UsageError(
                f"plan {plan.plan}: a change of {change.engine} runs on the entity resolver in force; "
                f"none was given"
            )
        identities = tuple(verify_fingerprint(spec) for spec in (old, new, resolver))
        log.debug(
            "plan %s: producer change on %s, engines verified against their code", plan.plan, resolver.ref
        )
        return ReplayEngines(
            old=old,
            new=new,
            downstream=(),
            identities=identities,
            kind=ChangeKind.PRODUCER,
            resolver=resolver,
        )
    if not change.downstream:
        raise UsageError(
            f"plan {plan.plan}: engine_change.downstream must name the engine that produces "
            f"{plan.answer.table} (for example [correlation])"
        )
    downstream = tuple(_downstream(catalog, ref, new) for ref in change.downstream)
    identities = tuple(verify_fingerprint(spec) for spec in (old, new, *downstream))
    refs = ", ".join(identity.ref for identity in identities)
    log.debug("plan %s: engines %s verified against their code", plan.plan, refs)
    return ReplayEngines(old=old, new=new, downstream=downstream, identities=identities)


def _downstream(catalog: EngineCatalog, ref: str, new: EngineSpec) -> EngineSpec:
    """``name@version`` as declared, or the version of ``name`` effective when ``new`` takes effect."""
    name, sep, version = ref.partition("@")
    if not sep:
        return catalog.resolve(name, at=new.effective_from)
    try:
        return catalog.resolve(name, int(version))
    except ValueError:
        raise UsageError(f"engine_change.downstream {ref!r}: expected name or name@version") from None


def engine_function(spec: EngineSpec) -> Callable[..., DataFrame]:
    """The callable an engine version declares (``package.module:function``)."""
    module = importlib.import_module(spec.module)
    function = getattr(module, spec.function, None)
    if not callable(function):
        raise ReplayError(
            f"engine {spec.ref}: {spec.implementation} is not a function; fix conf/engines.yaml"
        )
    return function  # type: ignore[no-any-return]


def engine_kwargs(function: Callable[..., Any], parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The declared parameters the function takes as keyword arguments (others are descriptive)."""
    accepted = inspect.signature(function).parameters
    return {k: v for k, v in parameters.items() if k in accepted}


def declared_int(spec: EngineSpec, name: str) -> int:
    """An integer parameter as declared in ``conf/engines.yaml`` (never read from the code)."""
    value = spec.parameters.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ReplayError(f"engine {spec.ref} declares no integer parameter {name!r} in conf/engines.yaml")
    return value


# -- pins and run id -------------------------------------------------------------------------


def input_tables(plan: CorrectionPlan, registry: TableRegistry) -> list[str]:
    """Every table a replay reads: Silver, the answer table and each Bronze feed (for traces)."""
    bronze = [name for name in registry.names() if name.startswith(BRONZE_PREFIX)]
    return [TableName.SILVER_EVENTS, plan.answer.table, *bronze]


def pin_inputs(plan: CorrectionPlan, registry: TableRegistry) -> dict[str, int]:
    """Table -> version to read: the plan's explicit pins, else the current version now.

    Silver and the answer table must have a version; Bronze tables that do not exist are
    left out (traces then report them missing).
    """
    pins: dict[str, int] = {}
    for name in input_tables(plan, registry):
        if name in plan.range.pins:
            pins[name] = registry.get(name).resolve_version(plan.range.pins[name])
            continue
        table = registry.get(name)
        version = table.current_version() if table.exists() else None
        if version is None:
            if name.startswith(BRONZE_PREFIX):
                continue
            raise ReplayRefusedError(
                f"{name} has no committed version to replay against; build it first (lakehouse build)"
            )
        pins[name] = version
    return pins


def replay_run_id(plan: CorrectionPlan, pins: Mapping[str, int], engines: ReplayEngines) -> str:
    """``replay-`` + 16 hex digits of the digest of plan, pins and engine identities."""
    digest = digest_of({"plan": plan.digest, "pins": dict(pins), "engines": engines.digests()})
    return RUN_PREFIX + digest[:16]


# -- candidates -------------------------------------------------------------------------------


def candidate_prefix(run_id: str) -> str:
    """Every candidate name of a run starts with this."""
    return run_id.replace("-", "_") + "_v"


def candidate_name(run_id: str, base_version: int | None) -> str:
    """The candidate of ``run_id`` staged from serving version ``base_version``."""
    return f"{candidate_prefix(run_id)}{'none' if base_version is None else base_version}"


def base_of(run_id: str, name: str) -> int | None:
    """The serving version a candidate of ``run_id`` was staged from (parsed from its name)."""
    text = name[len(candidate_prefix(run_id)) :]
    return None if text == "none" else int(text)


def run_candidates(table: Table, run_id: str) -> list[Candidate]:
    """Every staged candidate of a run, oldest base first (normally zero or one)."""
    prefix = candidate_prefix(run_id)
    found = [
        table.open_candidate(name, base_of(run_id, name))
        for name in table.list_candidates()
        if name.startswith(prefix)
    ]
    return sorted(found, key=lambda c: (c.base_version is not None, c.base_version or 0))


def open_candidate(table: Table, run_id: str) -> Candidate | None:
    """The run's candidate staged from the current serving version, if there is one."""
    current = table.current_version()
    return next((c for c in run_candidates(table, run_id) if c.base_version == current), None)
