"""``lakehouse training-set``: a recorded build of one point-in-time training set (W4).

The build pins its inputs as the lake knew them at the as-of time T (Silver, ``entity_daily``
and ``gold.baselines`` at their version current at T; ``gold.correlations`` at its current
version, filtered bitemporally to T), computes the rows with
:func:`workloads.ml.point_in_time.training_rows`, appends them to ``gold.training_sets``
under a new ``training_set_id`` (the ledger run id) and logs the result to MLflow as a
dataset input whose source is the exact table version (a SQL ``VERSION AS OF`` query, the
same text for Delta and Iceberg: ``mlflow.data`` has no Iceberg source).

Determinism: the same pinned versions, window and code give the same ``content_hash``
(:func:`lakehouse.digest.canonical_hash` of the rows without the build's own id and T),
recorded with the output in the ledger; the transformation identity is the code
fingerprint of ``training_rows`` and its window parameters.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from lakehouse.digest import canonical_hash
from lakehouse.errors import UsageError, VersionNotFoundError
from lakehouse.frames import materialize
from lakehouse.tables.base import sql_literal
from ledger.engines import fingerprint
from workloads.ml import point_in_time as pit
from workloads.ml.tracking import Tracking, mlflow_run
from workloads.runs import new_run_id, recorded_run
from workloads.vocabulary import TableName

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.tables import Table, TableRegistry
    from ledger import Clock, Ledger

__all__ = ["TRANSFORMATION", "TrainingSet", "build_training_set", "training_set_rows"]

log = logging.getLogger(__name__)

TRANSFORMATION: Final = "workloads.ml.point_in_time:training_rows"
"""The function whose code fingerprint is the training set's transformation identity."""
AS_OF_INPUTS: Final[tuple[TableName, ...]] = (
    TableName.SILVER_EVENTS,
    TableName.ENTITY_DAILY,
    TableName.BASELINES,
)
"""Inputs read at their version current at T (not bitemporal: a later version restates them)."""
BUILD_COLUMNS: Final[tuple[str, ...]] = ("training_set_id", "as_of", "label_horizon_days")
"""The columns a build adds to each row: which build, as of when, with which horizon."""


@dataclass(frozen=True)
class TrainingSet:
    """One built training set: where it is, what it holds, and where it is tracked."""

    training_set_id: str
    run_id: str
    as_of: datetime
    label_horizon_days: int
    table: str
    version: int
    rows: int
    positives: int
    censored: int
    content_hash: str
    inputs: dict[str, int]
    mlflow_run_id: str
    dataset_source: str
    """The SQL query that reads exactly these rows back (the MLflow dataset's source)."""
    knowledge_end: datetime
    """The last moment a row's horizon could close in: the earlier of T and the last delivery."""


def _pinned_at(table: Table, moment: datetime) -> int:
    try:
        return table.resolve_version(moment)
    except VersionNotFoundError as exc:
        raise UsageError(f"--at {moment.isoformat()}: {exc}") from None


def pin_inputs(registry: TableRegistry, as_of: datetime) -> dict[str, int]:
    """Each input's version as the lake knew it at ``as_of`` (correlations: their current one)."""
    pins = {name.value: _pinned_at(registry.get(name), as_of) for name in AS_OF_INPUTS}
    correlations = registry.get(TableName.CORRELATIONS)
    current = correlations.current_version() if correlations.exists() else None
    if current is None:
        raise UsageError("gold.correlations has never been built: run `lakehouse build gold` first")
    pins[TableName.CORRELATIONS.value] = current
    return pins


def training_set_rows(
    registry: TableRegistry, window: pit.TrainingWindow, pins: dict[str, int]
) -> tuple[DataFrame, int, datetime]:
    """The rows (materialised), the number of censored decision points, and the knowledge end."""

    def read(name: TableName) -> DataFrame:
        return registry.get(name).read(as_of=pins[name.value])

    silver = read(TableName.SILVER_EVENTS)
    knowledge_end = pit.knowledge_end(silver, window.as_of)
    censored = pit.decision_points(silver, window, knowledge_end).where("censored").count()
    rows = pit.training_rows(
        silver,
        read(TableName.ENTITY_DAILY),
        read(TableName.BASELINES),
        read(TableName.CORRELATIONS),
        window,
        knowledge_end,
    )
    return materialize(rows), censored, knowledge_end


def build_training_set(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    window: pit.TrainingWindow,
    tracking: Tracking,
    progress: Callable[[str], None] | None = None,
) -> TrainingSet:
    """Build, record and track one training set (see the module docstring)."""
    import mlflow
    from pyspark.sql import functions as F

    say = progress or (lambda _message: None)
    started = clock.now()
    if window.as_of > started:
        raise UsageError(f"--at {window.as_of.isoformat()} is in the future (now {started.isoformat()})")
    pins = pin_inputs(registry, window.as_of)
    run_id = new_run_id("training-set", started, salt=[window.as_of.isoformat(), window.horizon_days])
    table = registry.get(TableName.TRAINING_SETS)
    parameters: dict[str, Any] = {
        "as_of": window.as_of.isoformat(),
        "label_horizon_days": window.horizon_days,
        "since": window.since.isoformat() if window.since else None,
        "until": window.until.isoformat() if window.until else None,
        "transformation": {"implementation": TRANSFORMATION, "code_fingerprint": fingerprint(TRANSFORMATION)},
    }
    with mlflow_run(tracking, ledger_run_id=run_id, kind="training-set") as tracked:
        mlflow_run_id = tracked.info.run_id
        with recorded_run(
            ledger,
            run_id=run_id,
            command="training-set",
            purpose="training-set",
            inputs=pins,
            parameters={**parameters, "mlflow_run_id": mlflow_run_id},
        ) as run:
            say(f"computing decision points as known at {window.as_of.isoformat()}")
            rows, censored, knowledge_end = training_set_rows(registry, window, pins)
            stamped = rows.select(
                F.lit(run_id).alias("training_set_id"),
                F.lit(window.as_of).cast("timestamp").alias("as_of"),
                F.lit(window.horizon_days).alias("label_horizon_days"),
                *rows.columns,
            )
            content_hash = canonical_hash(rows)
            counted = rows.agg(
                F.count("*").alias("n"), F.coalesce(F.sum("label"), F.lit(0)).alias("pos")
            ).first()
            total, positives = (int(counted["n"]), int(counted["pos"])) if counted else (0, 0)
            say(f"writing {total} rows ({positives} positive, {censored} censored) to {table.name}")
            table.create(if_not_exists=True)
            table.append(stamped, run_id=run_id)
            version = table.current_version()
            assert version is not None, "an append makes a version"
            source = (
                f"SELECT * FROM {table.sql_name} VERSION AS OF {version} "
                f"WHERE training_set_id = {sql_literal(run_id)}"
            )
            _log_dataset(table, stamped, source, run_id, version, window, pins)
            mlflow.log_params({k: str(v) for k, v in parameters.items() if k != "transformation"})
            mlflow.log_metrics({"rows": total, "positives": positives, "censored": censored})
            run.outputs[table.name] = version
            run.content_hashes[table.name] = content_hash
            run.counts.update({"rows": total, "positives": positives, "censored": censored})
    log.info("training set %s: %d rows, %d positive, version %s", run_id, total, positives, version)
    return TrainingSet(
        training_set_id=run_id,
        run_id=run_id,
        as_of=window.as_of,
        label_horizon_days=window.horizon_days,
        table=table.name,
        version=version,
        rows=total,
        positives=positives,
        censored=censored,
        content_hash=content_hash,
        inputs=pins,
        mlflow_run_id=mlflow_run_id,
        dataset_source=source,
        knowledge_end=knowledge_end,
    )


def _log_dataset(
    table: Table,
    rows: DataFrame,
    source: str,
    run_id: str,
    version: int,
    window: pit.TrainingWindow,
    pins: dict[str, int],
) -> None:
    """Log the training set as an MLflow dataset input: its source is the exact table version."""
    import mlflow
    from mlflow.data.spark_dataset import from_spark

    with warnings.catch_warnings():
        # MLflow hints that integer columns cannot hold missing values; ours are never null
        warnings.filterwarnings("ignore", message="Hint: Inferred schema contains integer")
        dataset = from_spark(rows, sql=source, name=run_id, targets="label")
    tags = {
        "table": table.name,
        "version": str(version),
        "as_of": window.as_of.isoformat(),
        **{f"input.{name}": str(v) for name, v in sorted(pins.items())},
    }
    mlflow.log_input(dataset, context="training", tags=tags)
