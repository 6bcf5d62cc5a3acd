"""Entity resolution version 2: better email normalisation, plus shared cards.

What: ``resolve_v2(events) -> events``, the same signature and output columns as v1
(``entity_id``, ``resolver = entity_resolution@2``).

Rules:

* the email key is v1's (``strip().lower()``) with the ``+tag`` of the local part removed
  on every domain, and dots removed from the local part on ``gmail.com`` /
  ``googlemail.com`` (where the mailbox provider ignores them);
* two keys are the same entity when they used the same card fingerprint (on any event
  carrying both), transitively: entities are the connected components of the graph whose
  nodes are keys and whose edges are shared cards. Cards used by more than
  :data:`MAX_KEYS_PER_CARD` keys are ignored (a shared corporate or test card would glue
  strangers together);
* ``entity_id`` of a component is the smallest *v1* entity id among the v1 keys in it.
  An entity v2 does not change therefore keeps its v1 id, and a replay only touches the
  entities whose membership really changed. The ``resolver`` column says which version
  decided;
* events without an email take the entity of their order, as in v1.

Components are found by min-label propagation in Spark (no driver-side graph), with a
bounded number of rounds; the graph of keys and cards is small next to the events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lakehouse.errors import LakehouseError
from workloads.engines.entity_resolution import (
    NAME,
    engine_label,
    entity_of_key_v1,
    normalise_email_v1,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

VERSION_2: Final = "2"
MAX_KEYS_PER_CARD: Final = 20
MAX_ROUNDS: Final = 64
DOT_INSENSITIVE_DOMAINS: Final = ("gmail.com", "googlemail.com")

__all__ = ["MAX_KEYS_PER_CARD", "NAME", "VERSION_2", "normalise_email_v2", "resolve_v2"]


def normalise_email_v2(email: Column) -> Column:
    """v2 email key: v1's key without ``+tags``, and without dots on gmail local parts."""
    from pyspark.sql import functions as F

    key = normalise_email_v1(email)
    local = F.regexp_replace(F.substring_index(key, "@", 1), r"\+.*$", "")
    domain = F.substring_index(key, "@", -1)
    local = F.when(domain.isin(*DOT_INSENSITIVE_DOMAINS), F.regexp_replace(local, r"\.", "")).otherwise(local)
    return F.when(key.contains("@"), F.concat(local, F.lit("@"), domain)).otherwise(key)


def _components(nodes: DataFrame, edges: DataFrame) -> DataFrame:
    """Connected components by min-label propagation: (node, label) with label = min id."""
    from pyspark.sql import functions as F

    labels = nodes.select("node", F.col("seed").alias("label")).localCheckpoint()
    undirected = edges.select("a", "b").union(edges.select(F.col("b").alias("a"), F.col("a").alias("b")))
    undirected = undirected.distinct().localCheckpoint()
    for _ in range(MAX_ROUNDS):
        offered = undirected.join(labels.withColumnRenamed("node", "a"), "a").select(
            F.col("b").alias("node"), "label"
        )
        updated = (
            labels.unionByName(offered).groupBy("node").agg(F.min("label").alias("label")).localCheckpoint()
        )
        changed = updated.join(labels.withColumnRenamed("label", "old"), "node").where(
            F.col("label") != F.col("old")
        )
        if changed.isEmpty():
            return updated
        labels = updated
    raise LakehouseError(f"entity resolution v2 did not converge in {MAX_ROUNDS} rounds")


def resolve_v2(events: DataFrame) -> DataFrame:
    """Add ``entity_id`` and ``resolver`` (``entity_resolution@2``) to canonical events."""
    from pyspark.sql import functions as F

    base = events.drop("entity_id", "resolver")
    key, v1_id = "__er2_key", "__er2_v1"
    keyed = base.withColumn(key, normalise_email_v2(F.col("customer_email"))).withColumn(
        v1_id, entity_of_key_v1(normalise_email_v1(F.col("customer_email")))
    )
    with_email = keyed.where(F.col(key).isNotNull())
    nodes = with_email.groupBy(F.col(key).alias("node")).agg(F.min(v1_id).alias("seed"))
    card_keys = (
        with_email.where(F.col("card_fingerprint").isNotNull())
        .select(F.col(key).alias("node"), "card_fingerprint")
        .distinct()
    )
    usable_cards = (
        card_keys.groupBy("card_fingerprint")
        .agg(F.count("*").alias("n"))
        .where((F.col("n") > 1) & (F.col("n") <= MAX_KEYS_PER_CARD))
    )
    members = card_keys.join(usable_cards.select("card_fingerprint"), "card_fingerprint")
    anchors = members.groupBy("card_fingerprint").agg(F.min("node").alias("anchor"))
    edges = members.join(anchors, "card_fingerprint").select(
        F.col("node").alias("a"), F.col("anchor").alias("b")
    )
    components = _components(nodes, edges)

    # Rename before joining: Silver has a column called `label` (outcome labels) of its own.
    resolved = components.select(F.col("node").alias(key), F.col("label").alias("__er2_own"))
    own = keyed.join(resolved, key, "left")
    orders = (
        own.where((F.col("domain") == "orders") & F.col("__er2_own").isNotNull())
        .groupBy(F.col("event_id").alias("__er2_order"))
        .agg(F.min("__er2_own").alias("__er2_order_entity"))
    )
    joined = own.withColumn("__er2_order", F.when(F.col("__er2_own").isNull(), F.col("order_id"))).join(
        orders, "__er2_order", "left"
    )
    return joined.select(
        *[F.col(c) for c in base.columns],
        F.coalesce(F.col("__er2_own"), F.col("__er2_order_entity")).alias("entity_id"),
        F.lit(engine_label(VERSION_2)).alias("resolver"),
    )
