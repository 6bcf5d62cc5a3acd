"""``lakehouse score`` and ``lakehouse train --declare``: a registered model as an engine release.

A ``fraud_scoring`` release (:mod:`workloads.engines.fraud_scoring`) pins one registered
``fraud-score`` version in its identity's ``model_versions``; :func:`declare_scoring` declares
the next release on a registered version (``train --declare``, after the fit, or on an older
version with ``--model-version``), refusing a version the registry does not hold.

:func:`score` is a recorded run: it verifies the release's code fingerprint, loads exactly the
pinned version (``models:/<name>/<version>``), scores every decision point of one training set
(the features known at its as-of time) and writes ``gold.fraud_scores`` the way every forward
Gold build writes the correlation store: a decision scored the same stays as it is (a rerun
writes nothing), a new decision is inserted, and a decision whose score moved keeps its earlier
row as ``superseded`` with the reason ``rescored under fraud_scoring@N (model NAME vV, run R)``
beside the new one. So ``asof`` for a moment before the rescoring answers with the old scores.
The ledger's ``run_started`` carries the release's identity with its model version, and its
``run_finished`` the output's content hash (same training set + same release => same hash).

Quality is measured, not assumed: each run reports ROC AUC and Brier of its scores against the
labels the training set holds (the outcomes that arrived within its horizon), on the later
part of its decisions (:func:`workloads.ml.model.time_split`), beside the base rate and the
correlation confidence, so two releases scored on the same set are compared on the same rows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from lakehouse.digest import canonical_hash
from lakehouse.errors import UsageError
from lakehouse.frames import materialize
from ledger.engines import EngineCatalog, EngineSpec, verify_fingerprint
from ledger.entries import EngineDeclared
from workloads.engines import fraud_scoring
from workloads.ml import model as fraud
from workloads.ml.point_in_time import FEATURE_COLUMNS
from workloads.ml.tracking import Tracking
from workloads.ml.training import model_name
from workloads.runs import new_run_id, recorded_run
from workloads.vocabulary import CURRENT_STATUSES, CorrelationStatus, TableName

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.tables import TableRegistry
    from ledger import Clock, Ledger

__all__ = [
    "ENGINE",
    "IMPLEMENTATION",
    "Scoring",
    "check_model_version",
    "declare_scoring",
    "pinned_model",
    "score",
]

log = logging.getLogger(__name__)

ENGINE: Final = fraud_scoring.NAME
IMPLEMENTATION: Final = "workloads.engines.fraud_scoring:score_v1"
SCORES: Final = TableName.FRAUD_SCORES
MERGE_KEYS: Final[tuple[str, ...]] = ("decision_month", "decision_id", "run_id")
"""A score row version's identity (the decision and the run that scored it), with its partition."""
CONTENT: Final[tuple[str, ...]] = ("entity_id", "decision_time", "score")
"""What a score asserts: the same decision scored the same is not rewritten (no churn)."""
HASHED: Final[tuple[str, ...]] = ("decision_id", "score", "model", "engine", "training_set_id")
"""The columns of a run's output hash: what it decided, not when or by which run."""


def check_model_version(tracking: Tracking, name: str, version: str) -> None:
    """Refuse (exit 2) a model version the registry does not hold, naming what it holds."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking.tracking_uri, registry_uri=tracking.registry_uri)
    try:
        client.get_model_version(name, version)
    except MlflowException:
        try:
            held = sorted(int(v.version) for v in client.search_model_versions(f"name = '{name}'"))
        except MlflowException:
            held = []
        known = ", ".join(str(v) for v in held) or "none"
        raise UsageError(
            f"model {name} has no registered version {version} at {tracking.registry_uri} "
            f"(registered versions: {known})"
        ) from None


def pinned_model(spec: EngineSpec) -> tuple[str, str]:
    """The one ``(registered model, version)`` a scoring release pins."""
    if len(spec.model_versions) != 1:
        raise UsageError(
            f"engine {spec.ref} pins {len(spec.model_versions)} model versions; a scoring release pins "
            "exactly one (model_versions: {fraud-score: N})"
        )
    ((name, version),) = spec.model_versions.items()
    return name, version


def check_declarable(catalog: EngineCatalog, effective_from: date) -> None:
    """A new scoring release must take effect after every declared one (exit 2 otherwise)."""
    versions = catalog.versions(ENGINE)
    if versions and effective_from <= versions[-1].effective_from:
        latest = versions[-1]
        raise UsageError(
            f"--declare: a new {ENGINE} release must take effect after {latest.ref} "
            f"({latest.effective_from}); pass --effective-from after it"
        )


def declare_scoring(
    engines_path: Path,
    tracking: Tracking,
    model_version: int | str,
    *,
    effective_from: date,
    run_id: str | None = None,
) -> EngineDeclared:
    """Declare the next ``fraud_scoring`` release pinning ``model_version`` of this lakehouse's
    fraud model in ``engines_path``; the caller appends the returned ledger entry."""
    from ledger.engines import declare

    name = model_name(tracking)
    check_model_version(tracking, name, str(model_version))
    entry = declare(
        engines_path,
        name=ENGINE,
        implementation=IMPLEMENTATION,
        effective_from=effective_from,
        description=(
            f"fraud scores of decision points from the registered model {name} version {model_version} "
            f"(features as known at each decision, in the declared order)"
        ),
        parameters={"features": list(FEATURE_COLUMNS)},
        model_versions={name: str(model_version)},
        consumes=[TableName.TRAINING_SETS.value],
        produces=[SCORES.value],
        run_id=run_id,
    )
    log.info("declared %s pinning %s v%s in %s", entry.engine.ref, name, model_version, engines_path)
    return entry


@dataclass(frozen=True)
class Scoring:
    """One scoring run: what it read, which release and model decided, what it wrote."""

    run_id: str
    engine: str
    model: str
    model_version: str
    training_set_id: str
    training_set_version: int
    scored: int
    inserted: int
    rescored: int
    unchanged: int
    table: str
    version: int | None
    content_hash: str
    measures: fraud.ModelMetrics | None
    """ROC AUC, Brier of the scores on the later part of the set's decisions, with references
    (None when either part has too few positives to measure anything)."""


def _decisions(registry: TableRegistry, training_set_id: str) -> tuple[DataFrame, int]:
    from pyspark.sql import functions as F

    table = registry.get(TableName.TRAINING_SETS)
    version = table.current_version() if table.exists() else None
    if version is None:
        raise UsageError("no training set yet: build one with `lakehouse training-set --at T`")
    rows = table.read(as_of=version).where(F.col("training_set_id") == training_set_id)
    if rows.isEmpty():
        raise UsageError(f"--training-set {training_set_id}: no such training set in {table.name}@{version}")
    return rows, version


def _write(
    registry: TableRegistry, produced: DataFrame, *, reason: str, at: datetime, run_id: str, engine: str
) -> tuple[int | None, dict[str, int]]:
    """Insert new and moved scores; retire the serving rows they replace (kept, superseded)."""
    from pyspark.sql import functions as F

    table = registry.get(SCORES)
    table.create(if_not_exists=True)
    version = table.current_version()
    stored = table.read() if version is None else table.read(as_of=version)
    columns = stored.columns
    current = stored.where(F.col("status").isin(*CURRENT_STATUSES)).join(
        produced.select("decision_id"), "decision_id", "left_semi"
    )
    old = current.select(*[F.col(c).alias(f"_o_{c}") for c in columns])
    joined = materialize(produced.join(old, produced["decision_id"] == old["_o_decision_id"], "left"))
    same = F.lit(True)
    for column in CONTENT:
        same = same & F.col(column).eqNullSafe(F.col(f"_o_{column}"))
    kind = F.when(F.col("_o_decision_id").isNull(), "inserted").when(same, "unchanged").otherwise("rescored")
    joined = materialize(joined.withColumn("_kind", kind))
    counts = {str(r["_kind"]): int(r["count"]) for r in joined.groupBy("_kind").count().collect()}
    if counts.get("inserted", 0) or counts.get("rescored", 0):
        fresh = joined.where(F.col("_kind") != "unchanged").select(*columns)
        lifecycle = {
            "status": F.lit(CorrelationStatus.SUPERSEDED.value),
            "superseded_at": F.lit(at).cast("timestamp"),
            "superseded_by": F.col("_o_decision_id"),
            "supersede_reason": F.lit(reason),
        }
        retired = joined.where(F.col("_kind") == "rescored").select(
            *[lifecycle[c].alias(c) if c in lifecycle else F.col(f"_o_{c}").alias(c) for c in columns]
        )
        table.merge(
            materialize(fresh.unionByName(retired)),
            list(MERGE_KEYS),
            run_id=run_id,
            metadata={"lakehouse.engine": engine},
        )
        version = table.current_version()
    return version, counts


def score(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    tracking: Tracking,
    spec: EngineSpec,
    training_set_id: str,
    progress: Callable[[str], None] | None = None,
) -> Scoring:
    """Score one training set's decisions under a declared release (see the module docstring)."""
    import mlflow.sklearn
    from pyspark.sql import functions as F

    say = progress or (lambda _message: None)
    identity = verify_fingerprint(spec)
    name, version = pinned_model(spec)
    check_model_version(tracking, name, version)
    rows, set_version = _decisions(registry, training_set_id)
    features = [str(f) for f in spec.parameters.get("features") or FEATURE_COLUMNS]  # type: ignore[union-attr]
    frame = rows.select("decision_id", "decision_time", *features, "label").toPandas()
    started = clock.now()
    run_id = new_run_id("score", started, salt=[spec.ref, training_set_id])
    model_label = f"{name}/{version}"
    with recorded_run(
        ledger,
        run_id=run_id,
        command="score",
        purpose="scoring",
        inputs={TableName.TRAINING_SETS.value: set_version},
        engines=(identity,),
        parameters={"engine": spec.ref, "training_set_id": training_set_id, "model": model_label},
    ) as run:
        say(f"loading {name} version {version} from the registry; scoring {len(frame)} decisions")
        model = mlflow.sklearn.load_model(f"models:/{name}/{version}")
        scores = fraud_scoring.score_v1(frame, model=model, features=features)
        spark = rows.sparkSession
        scored = spark.createDataFrame(
            list(zip(scores["decision_id"].tolist(), scores["score"].astype(float).tolist(), strict=True)),
            "decision_id STRING, score DOUBLE",
        )
        produced = materialize(
            rows.select("decision_id", "entity_id", "decision_time", "decision_month")
            .join(scored, "decision_id")
            .select(
                "decision_id",
                "entity_id",
                "decision_time",
                "decision_month",
                "score",
                F.lit(model_label).alias("model"),
                F.lit(training_set_id).alias("training_set_id"),
                F.lit(spec.ref).alias("engine"),
                F.lit(run_id).alias("run_id"),
                F.lit(CorrelationStatus.AUTHORITATIVE.value).alias("status"),
                F.lit(started).cast("timestamp").alias("recorded_at"),
                F.lit(None).cast("timestamp").alias("superseded_at"),
                F.lit(None).cast("string").alias("superseded_by"),
                F.lit(None).cast("string").alias("supersede_reason"),
            )
        )
        content_hash = canonical_hash(produced.select(*HASHED))
        reason = f"rescored under {spec.ref} (model {name} v{version}, run {run_id})"
        written, counts = _write(
            registry, produced, reason=reason, at=started, run_id=run_id, engine=spec.ref
        )
        if written is not None:
            run.outputs[SCORES.value] = written
        run.content_hashes[SCORES.value] = content_hash
        run.counts.update({"scored": len(frame), **counts})
    measures = _measure(frame, scores)
    log.info("%s (%s v%s) on %s: %s", spec.ref, name, version, training_set_id, measures)
    return Scoring(
        run_id=run_id,
        engine=spec.ref,
        model=name,
        model_version=version,
        training_set_id=training_set_id,
        training_set_version=set_version,
        scored=len(frame),
        inserted=counts.get("inserted", 0),
        rescored=counts.get("rescored", 0),
        unchanged=counts.get("unchanged", 0),
        table=SCORES.value,
        version=written,
        content_hash=content_hash,
        measures=measures,
    )


def _measure(frame: Any, scores: Any) -> fraud.ModelMetrics | None:
    """The scores against the set's labels on its later decisions (the part a model trained on
    the earlier part of the same history never saw), beside the two references."""
    joined = frame.assign(score=scores["score"].to_numpy())
    try:
        earlier, later = fraud.time_split(joined)
    except UsageError as too_few:
        log.info("scores not measured: %s", too_few)
        return None
    return fraud.measure(
        later["label"].astype(int).to_numpy(),
        later["score"].to_numpy(),
        later["max_confidence"].fillna(0.0).to_numpy(),
        float(earlier["label"].mean()),
    )
