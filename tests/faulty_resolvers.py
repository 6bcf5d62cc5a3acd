"""Test-only entity-resolution versions that are quietly wrong (never declared outside tests).

Each is ER v2 with one fault a reconciliation recounting from the engine's own output would
agree with: the independent recount (``workloads.replay.recount``) must catch both. They are
declared by the test that uses them, in an engines file of its own, with v2's parameters
(so the written rule they claim is v2's) and their real code fingerprints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workloads.engines.entity_resolution_v2 import resolve_v2

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

DROPPED = "carol@example.com"
"""Her events lose their entity: the (ann, carol) shared-device pair of 2025-02 disappears."""
RENAMED = "erin@example.com"
"""Her entity gets an id the rule never gives: the 2025-03 pair with dave is invented anew."""
INVENTED_ID = "e9-0000000000000000"


def resolve_drops_a_pair(events: DataFrame) -> DataFrame:
    """ER v2, except that one identity's events are left without an entity."""
    from pyspark.sql import functions as F

    resolved = resolve_v2(events)
    dropped = F.lower(F.trim(F.col("customer_email"))) == DROPPED
    return resolved.withColumn(
        "entity_id", F.when(dropped, F.lit(None).cast("string")).otherwise(F.col("entity_id"))
    )


def resolve_invents_a_pair(events: DataFrame) -> DataFrame:
    """ER v2, except that one identity's entity gets an id no written rule gives."""
    from pyspark.sql import functions as F

    resolved = resolve_v2(events)
    renamed = F.lower(F.trim(F.col("customer_email"))) == RENAMED
    return resolved.withColumn("entity_id", F.when(renamed, F.lit(INVENTED_ID)).otherwise(F.col("entity_id")))
