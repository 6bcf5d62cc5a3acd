"""Entity resolution: which events belong to the same person.

What: ``resolve_v1(events) -> events`` adds ``entity_id`` and ``resolver`` to canonical
Silver events (columns used: ``domain``, ``event_id``, ``customer_email``, ``order_id``).

Version 1 (``entity_resolution@1``) is *exact normalised email*:

* the key of an email is ``strip().lower()`` (leading and trailing whitespace removed,
  lower-cased, nothing else: dots and ``+tags`` still make different keys);
* ``entity_id = "e1-" + sha256(key)[:16]`` (hex), so the id is deterministic, needs no
  lookup, and the ``e1-`` prefix shows which version made it;
* an event without an email (settlements, outcomes; any event whose email is blank) takes
  the entity of its order: the ``orders`` event whose ``event_id`` equals its
  ``order_id`` *in the same input*. If that order is not in the input (held in
  ``ops.exceptions``, quarantined, never delivered), ``entity_id`` stays null.

Why a versioned module: replays rebuild history under a newer version and compare it with
the old one, so every version stays callable. A v2 (better email normalisation plus
shared card fingerprints via connected components) is added beside v1 with the same
signature and registered in :data:`RESOLVERS`; callers pick a version with
:func:`resolver_for`.

Determinism: pure functions of their input rows; no clock, no randomness, no lookups.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final

from lakehouse.errors import UsageError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "NAME",
    "RESOLVERS",
    "VERSION",
    "VERSION_1",
    "engine_label",
    "entity_of_key_v1",
    "known_versions",
    "normalise_email_v1",
    "resolve_v1",
    "resolver_for",
]

NAME: Final = "entity_resolution"
VERSION_1: Final = "1"
VERSION: Final = VERSION_1
"""The version Silver uses unless told otherwise."""

ENTITY_PREFIX_V1: Final = "e1-"
ENTITY_HASH_CHARS: Final = 16

Resolver = Callable[["DataFrame"], "DataFrame"]


def engine_label(version: str) -> str:
    """``entity_resolution@<version>``: the value of the ``resolver`` column."""
    return f"{NAME}@{version}"


def normalise_email_v1(email: Column) -> Column:
    """v1 email key: Python's ``strip().lower()`` for ASCII whitespace; null when blank."""
    from pyspark.sql import functions as F

    key = F.lower(F.regexp_replace(email, r"^\s+|\s+$", ""))
    return F.when(F.length(key) > 0, key)


def entity_of_key_v1(key: Column) -> Column:
    """The v1 entity id of an email key."""
    from pyspark.sql import functions as F

    return F.concat(F.lit(ENTITY_PREFIX_V1), F.substring(F.sha2(key, 256), 1, ENTITY_HASH_CHARS))


def resolve_v1(events: DataFrame) -> DataFrame:
    """Add ``entity_id`` and ``resolver`` (``entity_resolution@1``) to canonical events.

    Row count is preserved: the order lookup is a left join against one row per order id.
    Existing ``entity_id`` / ``resolver`` columns are replaced.
    """
    from pyspark.sql import functions as F

    base = events.drop("entity_id", "resolver")
    own = "__er_own"
    order_key = "__er_order"
    order_entity = "__er_order_entity"
    with_own = base.withColumn(own, entity_of_key_v1(normalise_email_v1(F.col("customer_email"))))
    orders = (
        with_own.where((F.col("domain") == "orders") & F.col(own).isNotNull())
        .groupBy(F.col("event_id").alias(order_key))
        .agg(F.min(own).alias(order_entity))
    )
    lookup = F.when(F.col(own).isNull(), F.col("order_id"))
    joined = with_own.withColumn(order_key, lookup).join(orders, order_key, "left")
    return joined.select(
        *[F.col(c) for c in base.columns],
        F.coalesce(F.col(own), F.col(order_entity)).alias("entity_id"),
        F.lit(engine_label(VERSION_1)).alias("resolver"),
    )


RESOLVERS: Final[Mapping[str, Resolver]] = {VERSION_1: resolve_v1}
"""The versions held in this module: version -> ``DataFrame -> DataFrame``. A later version
may live in a sibling module ``entity_resolution_v<N>`` exposing ``resolve_v<N>``
(it imports this module, so it is looked up lazily by :func:`resolver_for`)."""


def known_versions() -> list[str]:
    """Every version available: this module's and the sibling ``entity_resolution_v<N>`` ones."""
    import pkgutil

    import workloads.engines as package

    prefix = f"{NAME}_v"
    found = set(RESOLVERS)
    for module in pkgutil.iter_modules(package.__path__):
        if module.name.startswith(prefix) and module.name[len(prefix) :].isdigit():
            found.add(module.name[len(prefix) :])
    return sorted(found, key=int)


def resolver_for(version: str) -> Resolver:
    """The resolve function of a version; a clear error for unknown versions."""
    import importlib

    if version in RESOLVERS:
        return RESOLVERS[version]
    if version.isdigit() and version in known_versions():
        module = importlib.import_module(f"workloads.engines.{NAME}_v{version}")
        function = getattr(module, f"resolve_v{version}", None)
        if callable(function):
            resolver: Resolver = function
            return resolver
    known = ", ".join(known_versions())
    raise UsageError(f"{NAME} has no version {version!r}; known versions: {known}")
