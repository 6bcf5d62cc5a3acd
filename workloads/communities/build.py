"""Run a community release over the serving correlations and keep ``gold.communities`` bitemporal.

A run (``lakehouse communities``) pins ``gold.correlations`` at its current version, reads
the serving rows (``provisional`` / ``authoritative``), runs the release
(:func:`workloads.engines.community.communities_v1`) and compares its answer, one row per
entity, with the serving rows of ``gold.communities`` by ``entity_id`` and content
(:data:`~workloads.engines.community.CONTENT_COLUMNS`):

* same content: the serving row stays as it is (a rerun on the same graph writes nothing);
* an entity new to the graph: inserted, ``authoritative``, with this run's id and time;
* other content (another community, other scores): the serving row becomes ``superseded``
  (``superseded_by`` = the entity's new community, with the reason) and the new row is
  inserted beside it;
* an entity no longer in the graph: its serving row becomes ``retracted``, with the reason.

Rows are identified by ``(entity_id, run_id)``, so ``asof`` at a moment before the run still
answers with the earlier row. The run is recorded in the ledger with its input version, the
release's identity and parameters, its counts and the content hash of the answer (the same
graph and release give the same hash), and a ``communities_measured`` entry: the
communities against the true rings when the data has labelled truth, else why not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Final

from lakehouse.digest import canonical_hash
from lakehouse.errors import UsageError
from lakehouse.frames import materialize
from ledger.engines import EngineSpec, verify_fingerprint
from ledger.entries import CommunitiesMeasured
from workloads.communities.quality import measure, recorded_report
from workloads.engines.community import CONTENT_COLUMNS, NAME, communities_v1, community_parameters
from workloads.evaluation.communities import CommunityQuality
from workloads.replay.quality import locate_truth
from workloads.runs import new_run_id, recorded_run
from workloads.vocabulary import CURRENT_STATUSES, CorrelationStatus, TableName

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.tables import TableRegistry
    from ledger import Clock, Ledger
    from workloads.evaluation import LabelledTruth

__all__ = ["MERGE_KEYS", "CommunityBuild", "run_communities"]

log = logging.getLogger(__name__)

TABLE: Final = TableName.COMMUNITIES
MERGE_KEYS: Final[tuple[str, ...]] = ("entity_id", "run_id")
INSERTED, UNCHANGED, REGROUPED, RETRACTED = "inserted", "unchanged", "regrouped", "retracted"


@dataclass(frozen=True)
class CommunityBuild:
    """What one run computed, wrote and measured."""

    run_id: str
    engine: str
    method: str
    min_confidence: float
    correlations_version: int
    table: str
    version: int | None
    """The version of ``gold.communities`` after the run (None: nothing was ever written)."""
    entities: int
    communities: int
    """Communities of at least two entities."""
    largest: int
    iterations: int
    settled: bool
    pagerank_iterations: int
    inserted: int
    regrouped: int
    retracted: int
    unchanged: int
    content_hash: str
    quality: CommunityQuality | None
    quality_note: str


def run_communities(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    spec: EngineSpec,
    *,
    truth: LabelledTruth | None = None,
    progress: Callable[[str], None] | None = None,
) -> CommunityBuild:
    """Run ``spec`` over the serving correlations as a recorded run (module docstring)."""
    from pyspark.sql import functions as F

    say = progress or (lambda _message: None)
    if spec.name != NAME:
        raise UsageError(f"--engine {spec.ref} is not a {NAME} release")
    parameters = community_parameters(spec.parameters)
    identity = verify_fingerprint(spec)
    correlations = registry.get(TableName.CORRELATIONS)
    pinned = correlations.current_version() if correlations.exists() else None
    if pinned is None:
        raise UsageError("no correlations yet: build Gold first (lakehouse build gold)")
    search = locate_truth(registry, truth)
    started = clock.now()
    run_id = new_run_id("communities", started, salt=[spec.ref, pinned])
    with recorded_run(
        ledger,
        run_id=run_id,
        command="communities",
        purpose="build",
        inputs={TableName.CORRELATIONS.value: pinned},
        engines=(identity,),
        parameters={"engine": spec.ref, **asdict(parameters)},
    ) as run:
        serving = correlations.read(as_of=pinned).where(F.col("status").isin(*CURRENT_STATUSES))
        say(f"{spec.ref}: {parameters.method} over {TableName.CORRELATIONS.value}@{pinned}")
        answer = communities_v1(serving, **asdict(parameters))
        content_hash = canonical_hash(answer.frame.withColumn("engine", F.lit(spec.ref)))
        sizes = answer.frame.groupBy("community_id").agg(F.max("size").alias("size")).where("size >= 2")
        summary = sizes.agg(F.count("*").alias("n"), F.max("size").alias("largest")).first()
        assert summary is not None  # an aggregate without grouping has one row
        produced = _lifecycle(answer.frame, engine=spec.ref, run_id=run_id, at=started)
        version, counts = _write(registry, produced, engine=spec.ref, run_id=run_id, at=started)
        if version is not None:
            run.outputs[TABLE.value] = version
        run.content_hashes[TABLE.value] = content_hash
        entities = sum(counts.get(kind, 0) for kind in (INSERTED, REGROUPED, UNCHANGED))
        run.counts.update({"entities": entities, "communities": int(summary["n"]), **counts})
        quality = None
        if search.truth is not None:
            say(f"{spec.ref}: measuring the communities against the true rings")
            events = registry.get(TableName.SILVER_EVENTS).read()
            quality = measure(spec.ref, search.truth, events, answer.frame)
        ledger.writer.append(
            CommunitiesMeasured(
                run_id=run_id,
                engine=spec.ref,
                table=TABLE.value,
                basis="ground_truth" if quality is not None else "none",
                note=search.note,
                report=recorded_report(quality) if quality is not None else {},
            )
        )
    if quality is not None:
        log.info("%s against the true rings: %s", spec.ref, quality.row())
    return CommunityBuild(
        run_id=run_id,
        engine=spec.ref,
        method=parameters.method,
        min_confidence=parameters.min_confidence,
        correlations_version=pinned,
        table=TABLE.value,
        version=version,
        entities=entities,
        communities=int(summary["n"]),
        largest=int(summary["largest"] or 0),
        iterations=answer.iterations,
        settled=answer.settled,
        pagerank_iterations=answer.pagerank_iterations,
        inserted=counts.get(INSERTED, 0),
        regrouped=counts.get(REGROUPED, 0),
        retracted=counts.get(RETRACTED, 0),
        unchanged=counts.get(UNCHANGED, 0),
        content_hash=content_hash,
        quality=quality,
        quality_note=search.note,
    )


def _lifecycle(frame: DataFrame, *, engine: str, run_id: str, at: datetime) -> DataFrame:
    """The answer's rows as new serving rows of ``gold.communities``."""
    from pyspark.sql import functions as F

    return frame.select(
        *CONTENT_COLUMNS,
        F.lit(engine).alias("engine"),
        F.lit(run_id).alias("run_id"),
        F.lit(CorrelationStatus.AUTHORITATIVE.value).alias("status"),
        F.lit(at).cast("timestamp").alias("recorded_at"),
        F.lit(None).cast("timestamp").alias("superseded_at"),
        F.lit(None).cast("string").alias("superseded_by"),
        F.lit(None).cast("string").alias("supersede_reason"),
    )


def _write(
    registry: TableRegistry, produced: DataFrame, *, engine: str, run_id: str, at: datetime
) -> tuple[int | None, dict[str, int]]:
    """Insert new and changed rows, supersede or retract the serving rows they replace (kept)."""
    from pyspark.sql import functions as F

    table = registry.get(TABLE)
    table.create(if_not_exists=True)
    version = table.current_version()
    stored = table.read() if version is None else table.read(as_of=version)
    columns = stored.columns
    serving = stored.where(F.col("status").isin(*CURRENT_STATUSES))
    old = serving.select(*[F.col(c).alias(f"_o_{c}") for c in columns])
    joined = produced.join(old, produced["entity_id"] == old["_o_entity_id"], "full_outer")
    same = F.lit(True)
    for column in CONTENT_COLUMNS:
        same = same & F.col(column).eqNullSafe(F.col(f"_o_{column}"))
    kind = (
        F.when(F.col("_o_entity_id").isNull(), INSERTED)
        .when(F.col("entity_id").isNull(), RETRACTED)
        .when(same, UNCHANGED)
        .otherwise(REGROUPED)
    )
    joined = materialize(joined.withColumn("_kind", kind))
    counts = {str(r["_kind"]): int(r["count"]) for r in joined.groupBy("_kind").count().collect()}
    if not (counts.get(INSERTED, 0) or counts.get(REGROUPED, 0) or counts.get(RETRACTED, 0)):
        return version, counts
    moved = F.col("community_id") != F.col("_o_community_id")
    under = f" under {engine} (run {run_id})"
    reason = (
        F.when(F.col("_kind") == RETRACTED, F.lit(f"not in the correlation graph{under}"))
        .when(moved, F.concat(F.lit("moved to "), F.col("community_id"), F.lit(under)))
        .otherwise(F.lit(f"rescored{under}"))
    )
    lifecycle = {
        "status": F.when(F.col("_kind") == RETRACTED, CorrelationStatus.RETRACTED.value).otherwise(
            CorrelationStatus.SUPERSEDED.value
        ),
        "superseded_at": F.lit(at).cast("timestamp"),
        "superseded_by": F.col("community_id"),
        "supersede_reason": reason,
    }
    fresh = joined.where(F.col("_kind").isin(INSERTED, REGROUPED)).select(*columns)
    retired = joined.where(F.col("_kind").isin(REGROUPED, RETRACTED)).select(
        *[lifecycle[c].alias(c) if c in lifecycle else F.col(f"_o_{c}").alias(c) for c in columns]
    )
    rows = materialize(fresh.unionByName(retired))
    table.merge(rows, list(MERGE_KEYS), run_id=run_id, metadata={"lakehouse.engine": engine})
    log.info("%s: %s", TABLE.value, ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    return table.current_version(), counts
