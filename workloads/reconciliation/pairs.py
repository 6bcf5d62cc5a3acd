"""The declared pairs: which store is derived from which, by what projection, and who wins.

Pairs are declared in the configuration (``reconcile.pairs`` in ``conf/lakehouse.yaml``,
:class:`lakehouse.config.ReconcilePairSettings`); the projections they name stay Python
functions, registered here by name (:data:`PROJECTIONS`). :func:`declared_pairs` turns the
declarations into :class:`Pair` objects, checked before Spark starts: both tables
configured, the key on both sides with one type, a registered projection that reads that
source and writes that derived table; anything else is a :class:`~lakehouse.errors.ConfigError`
naming the key (exit 2).

A :class:`Pair` says everything a reconcile needs to know that the two tables do not: the
**authority** (the side that wins; ``None`` means nobody declared one, and ``--repair`` is
refused: seed 002, "if you cannot say, the problem is ownership"; ``report_only`` refuses it
too, with its reason), the **key** on each side, the **projection** that maps pinned source
rows to the rows the derived store should hold (``derive``, and ``derived_where`` for the part
of the derived store the pair covers), the **compared columns**, and the **repair** (the rows
to write for a set of keys; by default the projection's own rows).

Registered projections (``projection:`` in a declaration):

* ``silver_events``: ``bronze.<feed> -> silver.events`` (conservation by key, one pair per
  feed): every Bronze event whose fate is ``silver`` (the Silver build's own
  canonicalisation and fates, so duplicates, corrected revisions, quarantined and held lines
  are expected to be absent) is in Silver with the same canonical columns. Entity columns
  are not compared: they depend on every feed and the resolver version, and a replay owns
  them. A repair writes the rows a build would write (resolved with the version Silver
  carries).
* ``entity_index``: ``gold.correlations -> gold.correlations_by_entity``: every row version
  of the store filed twice, once under each entity, in its bucket
  (:func:`workloads.gold.entity_index.project`, the index's own projection; the bucket count
  is the one the index was built with).
* ``provisional_batch_copies``: ``gold.correlations -> gold.provisional_correlations``, the
  published batch correlations against the provisional (streaming) view: the standing form
  of the four-outcome comparison (:mod:`workloads.gold.provisional`). A Gold build (or a
  replay's publication) reconciles the view: each streaming row is kept, superseded (agree,
  batch stronger) or retracted (false positive), and the batch rows of its pair, and those
  of the pairs the stream missed, are inserted as ``authoritative`` copies (every column of
  the batch row; the stream's batch, window and outcome beside them). The pair covers those
  copies (``derived_where: status = 'authoritative'``): for every pair
  (``correlation_type, entity_a, entity_b``) the view has reconciled (a row with an
  ``outcome``), the view should hold the published store's serving rows of that pair,
  column for column (the stream's columns are not compared). On a view the last Gold build
  reconciled nothing differs. A difference means the view no longer says what batch
  publishes for a pair it reconciled: ``divergent``, a copy whose values differ from the
  batch row of its id (a tampered copy; or the store restated that row since, by a replay's
  publication or a later build that had no streaming row to reconcile, which leaves the
  copy behind); ``missing``, a serving batch row of a reconciled pair without its copy (a
  deleted copy, or a row batch added or re-keyed since); ``orphan``, an authoritative copy
  no serving batch row has (batch superseded or retracted it since, or a row no
  reconciliation wrote). Pairs the view never held, and streaming rows not yet reconciled,
  are outside it (that gap is the ``missed`` outcome's). **Report-only**: the view's rows
  are superseded or retracted, never deleted, and carry the stream's batch, window and
  outcome, which the store does not hold; a repair rewrites a key's rows by deleting them,
  so it would destroy exactly that history (and bypass the ledger entries and consumer
  notifications the build's reconciliation records). ``--repair`` is refused.

**Adding a pair is one declaration** in ``reconcile.pairs`` (and, when the source rows are
not already the derived rows, one small projection registered in :data:`PROJECTIONS`); the
comparison, classes, staleness, bounded mode, report, ledger entry, lock and rate-limited
repair come with it. Two tables no declaration pairs are refused (exit 2, before Spark
starts): without a declaration nobody has said which side wins, by which key, through which
projection.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Final

from lakehouse.config import LakehouseConfig, ReconcilePairSettings, key_columns
from lakehouse.errors import ConfigError, UnknownTableError, UsageError
from lakehouse.frames import materialize, union_all
from lakehouse.tables.base import sql_literal
from workloads.asof.readers import ddl_fields
from workloads.policies import DEFAULT_POLICY_PATH
from workloads.vocabulary import CURRENT_STATUSES, FEEDS, TableName

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.tables import TableRegistry
    from ledger import Ledger

log = logging.getLogger(__name__)

SOURCE: Final = "source"
"""The only authority a pair declares: the source wins, the derived store is repaired."""


@dataclass(frozen=True)
class DeriveContext:
    """What a projection may read besides the pinned source rows."""

    registry: TableRegistry
    policies: Path = DEFAULT_POLICY_PATH
    derived: DataFrame | None = None
    """The pinned derived rows the pair covers (a repair resolves entities with the version
    they carry)."""
    ledger: Ledger | None = None
    """The ledger (the entity index's bucket count is recorded with each rebuild)."""
    derived_all: DataFrame | None = None
    """Every pinned derived row, also outside the part the pair covers (the provisional view's
    reconciled streaming rows say which pairs it should hold copies of)."""


Projection = Callable[["DataFrame", DeriveContext], "DataFrame"]


@dataclass(frozen=True)
class Pair:
    """One declared source -> derived relation; see the module docstring."""

    source: str
    derived: str
    source_key: str
    derived_key: str
    authority: str | None = None
    columns: tuple[str, ...] | None = None
    """Compared columns besides the key (None: every column both sides have)."""
    derive: Projection | None = None
    """Pinned source rows -> rows shaped like the derived store (key renamed to ``derived_key``);
    None: the source rows themselves, the key renamed."""
    derived_where: str | None = None
    """A SQL condition: the rows of the derived store the pair covers (None: all). A repair
    replaces a key's rows only inside it."""
    repair_rows: Projection | None = None
    """Pinned source rows -> the full derived rows a repair writes (None: :attr:`derive`'s)."""
    description: str = ""
    declared: bool = True
    label: str = ""
    """The declaration's name in ``reconcile.pairs``."""
    report_only: str | None = None
    """Why ``--repair`` is refused although the pair has an authority (None: allowed)."""

    @property
    def name(self) -> str:
        return f"{self.source} -> {self.derived}"

    @property
    def key_text(self) -> str:
        return (
            self.derived_key
            if self.source_key == self.derived_key
            else f"{self.source_key}:{self.derived_key}"
        )


# -- Bronze -> Silver -----------------------------------------------------------------

SILVER_UNCOMPARED: Final = ("entity_id", "resolver")


def silver_fated(feeds: Mapping[str, DataFrame], ctx: DeriveContext) -> DataFrame:
    """Bronze rows of ``feeds`` (feed -> rows) with the fate a Silver build gives each (the
    build's own functions), computed once and cut from their lineage.

    Cut like the build's and the stream's fated frame (:func:`lakehouse.frames.materialize`):
    a join planned above the canonicalisation's projections and the fates' windows (entity
    resolution's order lookup, a repair's semi-join on its keys, bounded mode's semi-join)
    makes Spark's constraint inference explode (see
    :func:`workloads.silver.lateness.admit_approved`): minutes of JVM time on a few hundred
    rows. Above the computed rows the same joins plan at once.
    """
    from workloads.silver.adapters import ADAPTERS, canonicalise
    from workloads.silver.exceptions import approvals_in_queue
    from workloads.silver.lateness import assign_fates, load_lateness_policy

    policy = load_lateness_policy(ctx.policies)
    canonical = union_all([canonicalise(rows, ADAPTERS[feed]) for feed, rows in feeds.items()])
    return materialize(assign_fates(canonical, policy, approvals_in_queue(ctx.registry)))


def _unresolved(events: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return events.withColumns({c: F.lit(None).cast("string") for c in SILVER_UNCOMPARED})


@cache
def _silver_derive(feed: str) -> Projection:
    def derive(bronze: DataFrame, ctx: DeriveContext) -> DataFrame:
        from workloads.silver.routing import silver_rows

        return silver_rows(silver_fated({feed: bronze}, ctx), _unresolved).drop(*SILVER_UNCOMPARED)

    return derive


def carried_label(derived: DataFrame) -> str:
    """The resolver label most of the pinned derived rows carry (the version in force when
    Silver was built); the current default when none carries one."""
    from workloads.engines import entity_resolution

    counted = derived.groupBy("resolver").count().orderBy("count", ascending=False).collect()
    return next((r[0] for r in counted if r[0]), entity_resolution.engine_label(entity_resolution.VERSION))


@cache
def _silver_repair(feed: str) -> Projection:
    def repair(bronze: DataFrame, ctx: DeriveContext) -> DataFrame:
        """The rows a Silver build would write: every feed's current Bronze resolved together
        (entity resolution links across feeds) by the version the Silver rows carry.

        Resolution is not per row (an event without an email takes its order's entity, and
        v2/v3 group every event of an email key), so the whole fated input is resolved, as a
        build does, and the caller keeps the keys it repairs; the fated rows are computed
        first (:func:`silver_fated`), so the resolver's join and the caller's semi-join plan
        against computed rows."""
        from workloads.engines import entity_resolution
        from workloads.silver.routing import silver_rows

        assert ctx.derived is not None
        label = carried_label(ctx.derived)
        feeds = {feed: bronze}
        for other in FEEDS:
            table = ctx.registry.get(other.bronze_table)
            if other.value != feed and table.exists() and table.current_version() is not None:
                feeds[other.value] = table.read()
        resolve = entity_resolution.resolver_for(label.rsplit("@", 1)[1])
        return silver_rows(silver_fated(feeds, ctx), resolve).where(f"domain = {sql_literal(feed)}")

    return repair


# -- gold.correlations -> its entity index -------------------------------------------------


def _index_derive(correlations: DataFrame, ctx: DeriveContext) -> DataFrame:
    """The index's own projection, with the bucket count of its newest recorded rebuild."""
    from workloads.gold.entity_index import buckets_for, index_versions, project

    known = index_versions(ctx.ledger.reader.records()) if ctx.ledger is not None else ()
    buckets = known[-1].buckets if known else buckets_for(correlations.count())
    return project(correlations, buckets)


# -- published batch correlations -> the provisional (streaming) view ------------------------


def _provisional_derive(correlations: DataFrame, ctx: DeriveContext) -> DataFrame:
    """The authoritative copies the provisional view should hold: the published store's serving
    rows (:data:`~workloads.vocabulary.CURRENT_STATUSES`, as the Gold build's reconciliation
    reads them) of every pair the view has reconciled (any of its rows with an ``outcome``:
    a reconciled streaming row, or a copy itself). See the module docstring."""
    from pyspark.sql import functions as F

    from workloads.gold.provisional import PAIR

    serving = correlations.where(F.col("status").isin(*CURRENT_STATUSES))
    if ctx.derived_all is None:  # the view was never written: it should hold nothing
        return serving.where(F.lit(False))
    reconciled = ctx.derived_all.where(F.col("outcome").isNotNull()).select(*PAIR).distinct()
    return serving.join(F.broadcast(reconciled), list(PAIR), "left_semi")


# -- the registered projections --------------------------------------------------------------


@dataclass(frozen=True)
class Registered:
    """A projection a declaration names (``projection:``): the sources it reads, the derived
    table it writes rows for, and, given the declared source table, its functions."""

    sources: tuple[str, ...]
    derived: str
    derive: Callable[[str], Projection]
    repair_rows: Callable[[str], Projection] | None = None


def _feed_of(source: str) -> str:
    return source.split(".", 1)[1]


PROJECTIONS: Final[Mapping[str, Registered]] = {
    "silver_events": Registered(
        sources=tuple(str(feed.bronze_table) for feed in FEEDS),
        derived=TableName.SILVER_EVENTS,
        derive=lambda source: _silver_derive(_feed_of(source)),
        repair_rows=lambda source: _silver_repair(_feed_of(source)),
    ),
    "entity_index": Registered(
        sources=(TableName.CORRELATIONS,),
        derived=TableName.CORRELATIONS_BY_ENTITY,
        derive=lambda source: _index_derive,
    ),
    "provisional_batch_copies": Registered(
        sources=(TableName.CORRELATIONS,),
        derived=TableName.PROVISIONAL_CORRELATIONS,
        derive=lambda source: _provisional_derive,
    ),
}
"""Every projection a declaration may name (see the module docstring)."""


# -- the declarations, checked before Spark ------------------------------------------------


def declared_pairs(config: LakehouseConfig) -> tuple[Pair, ...]:
    """Every pair ``reconcile.pairs`` declares, in its order, each checked against the
    configured tables and the registered projections (no Spark): one
    :class:`~lakehouse.errors.ConfigError` naming the first wrong key."""
    return tuple(_declared(config, name, settings) for name, settings in config.reconcile.pairs.items())


def _config_error(config: LakehouseConfig, key: str, value: object, problem: str) -> ConfigError:
    where = config.source_path or "the configuration"
    return ConfigError(f"{where}: key '{key}' has invalid value {value!r}: {problem}")


def _declared(config: LakehouseConfig, name: str, declared: ReconcilePairSettings) -> Pair:
    at = f"reconcile.pairs.{name}"
    types: dict[str, dict[str, str]] = {}
    for side in ("source", "derived"):
        table = getattr(declared, side)
        try:
            types[side] = column_types(config, table)
        except UnknownTableError as exc:
            raise _config_error(config, f"{at}.{side}", table, str(exc)) from None
    source, derived = declared.source, declared.derived
    keys = {"source": declared.source_key, "derived": declared.derived_key}
    for side, column in keys.items():
        if column not in types[side]:
            table = getattr(declared, side)
            raise _config_error(config, f"{at}.key", declared.key, f"{table} has no column {column!r}")
    source_type, derived_type = types["source"][keys["source"]], types["derived"][keys["derived"]]
    if source_type != derived_type:
        raise _config_error(
            config,
            f"{at}.key",
            declared.key,
            f"the key types differ, {source}.{keys['source']} is {source_type} "
            f"and {derived}.{keys['derived']} is {derived_type}",
        )
    for column in declared.columns or ():
        if column not in types["derived"]:
            raise _config_error(config, f"{at}.columns", column, f"{derived} has no column {column!r}")
    derive = repair_rows = None
    if declared.projection is not None:
        registered = PROJECTIONS.get(declared.projection)
        if registered is None:
            known = ", ".join(sorted(PROJECTIONS))
            problem = f"no projection of that name is registered (registered: {known})"
            raise _config_error(config, f"{at}.projection", declared.projection, problem)
        if source not in registered.sources:
            problem = f"the projection {declared.projection} reads {', '.join(registered.sources)}"
            raise _config_error(config, f"{at}.source", source, problem)
        if derived != registered.derived:
            problem = f"the projection {declared.projection} writes rows for {registered.derived}"
            raise _config_error(config, f"{at}.derived", derived, problem)
        derive = registered.derive(source)
        repair_rows = registered.repair_rows(source) if registered.repair_rows is not None else None
    return Pair(
        source=source,
        derived=derived,
        source_key=keys["source"],
        derived_key=keys["derived"],
        authority=declared.authority,
        columns=declared.columns,
        derive=derive,
        derived_where=declared.derived_where,
        repair_rows=repair_rows,
        description=declared.description,
        label=name,
        report_only=declared.report_only,
    )


# -- resolving a command line to a pair, before Spark ------------------------------------


def column_types(config: LakehouseConfig, table: str) -> dict[str, str]:
    """Column -> type as configured (upper case), from the YAML alone."""
    if table not in config.tables:
        known = ", ".join(sorted(config.tables))
        raise UnknownTableError(f"unknown table {table!r}; known tables: {known}")
    return {name: kind.upper() for name, kind in ddl_fields(config.tables[table].schema_ddl)}


def _split_key(key: str) -> tuple[str, str]:
    try:
        return key_columns(key)
    except ValueError as exc:
        raise UsageError(f"--key {key!r}: {exc}") from None


def resolve_pair(
    config: LakehouseConfig,
    source: str,
    derived: str,
    key: str | None,
    pairs: Sequence[Pair] | None = None,
) -> Pair:
    """The declared pair a command names, checked against the configuration before Spark
    starts: every declaration sound (:func:`declared_pairs`; ``pairs``: these instead), both
    tables known, the key on both sides with one type, a declared pair's own key (``None``:
    the declared pair's). An undeclared pair is refused: nobody said which side wins, by which
    key, through which projection."""
    if pairs is None:
        pairs = declared_pairs(config)
    source_types, derived_types = column_types(config, source), column_types(config, derived)
    declared = next((p for p in pairs if p.source == source and p.derived == derived), None)
    if key is None:
        if declared is None:
            raise _undeclared(source, derived, pairs)
        key = declared.key_text
    if declared is not None:
        if key not in (declared.derived_key, declared.source_key, declared.key_text):
            raise UsageError(f"--key {key!r}: the pair {declared.name} is keyed by {declared.key_text}")
        source_key, derived_key = declared.source_key, declared.derived_key
    else:
        source_key, derived_key = _split_key(key)
    for table, column, types in ((source, source_key, source_types), (derived, derived_key, derived_types)):
        if column not in types:
            raise UsageError(f"--key {key!r}: {table} has no column {column!r}")
    if source_types[source_key] != derived_types[derived_key]:
        raise UsageError(
            f"--key {key!r}: the key types differ, {source}.{source_key} is {source_types[source_key]} "
            f"and {derived}.{derived_key} is {derived_types[derived_key]}"
        )
    if declared is None:
        raise _undeclared(source, derived, pairs)
    return declared


def _undeclared(source: str, derived: str, pairs: Sequence[Pair]) -> UsageError:
    known = "; ".join(p.name for p in pairs) or "none"
    return UsageError(
        f"{source} -> {derived} is not a declared pair (declared in reconcile.pairs of the "
        f"configuration: {known})"
    )


def compared_columns(
    pair: Pair, derived_columns: Sequence[str], source_columns: Sequence[str]
) -> tuple[str, ...]:
    """The columns whose values must agree (besides the key), in the derived table's order."""
    wanted = pair.columns if pair.columns is not None else tuple(source_columns)
    return tuple(c for c in derived_columns if c in wanted and c in source_columns and c != pair.derived_key)


def pair_parameters(pair: Pair) -> Mapping[str, object]:
    return {"pair": pair.name, "key": pair.key_text, "authority": pair.authority, "declared": pair.declared}
