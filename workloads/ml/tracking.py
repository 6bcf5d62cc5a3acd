"""MLflow for the ML users: an embedded store by default, a team's server by configuration.

Embedded (nothing to start): tracking and the model registry on ``<workdir>/mlflow/mlflow.db``
(SQLite), artifacts in ``<workdir>/mlflow/artifacts``; the experiment's artifact location
is pinned there, so nothing lands in ``./mlruns`` of whatever folder a job starts in.
``mlflow.tracking_uri`` in ``lakehouse.yaml`` (or ``LAKEHOUSE__MLFLOW__TRACKING_URI``)
replaces it; a server that does not answer is refused before Spark starts (exit 2).

Every MLflow run a recorded run opens carries the ledger's run id as the tag
:data:`LEDGER_RUN_TAG`, and the ledger's ``run_started`` entry carries the MLflow run id
(parameter ``mlflow_run_id``): either side finds the other.
"""

from __future__ import annotations

import logging
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from lakehouse.errors import UsageError

if TYPE_CHECKING:
    from lakehouse.config import LakehouseConfig

__all__ = ["LEDGER_RUN_TAG", "Tracking", "mlflow_run", "open_tracking", "tracking_for"]

log = logging.getLogger(__name__)

LEDGER_RUN_TAG: Final = "lakehouse.run_id"
"""MLflow run tag holding the id of the ledger's recorded run that opened it."""
REACH_TIMEOUT_SECONDS: Final = 5.0


@dataclass(frozen=True)
class Tracking:
    """Where one lakehouse's ML runs, datasets and models are tracked."""

    tracking_uri: str
    registry_uri: str
    experiment: str
    artifact_location: str | None
    """Pinned artifact root of the embedded store (None: the server decides)."""
    instance: str = ""
    """The lakehouse instance: registered model names carry it, as experiment names do."""

    @property
    def embedded(self) -> bool:
        return self.artifact_location is not None

    def registered_name(self, base: str) -> str:
        """A registered model's name in this lakehouse (``base``, or ``base-<instance>``)."""
        return f"{base}-{self.instance}" if self.instance else base

    def ui_command(self) -> str:
        """The one command that opens the MLflow UI on this store."""
        if self.embedded:
            return f"mlflow ui --backend-store-uri {self.tracking_uri}"
        return f"open {self.tracking_uri}"


def tracking_for(config: LakehouseConfig) -> Tracking:
    """The configured tracking (no MLflow import, no I/O)."""
    if config.mlflow.tracking_uri:
        uri = config.mlflow.tracking_uri
        return Tracking(
            uri, config.mlflow.registry_uri or uri, config.mlflow_experiment, None, config.instance
        )
    uri = config.mlflow_tracking_uri
    artifacts = (config.mlflow_home / "artifacts").as_uri()
    return Tracking(
        uri, config.mlflow.registry_uri or uri, config.mlflow_experiment, artifacts, config.instance
    )


def check_reachable(tracking: Tracking) -> None:
    """Refuse a tracking server that does not answer, naming it (exit 2, nothing written)."""
    uri = tracking.tracking_uri
    if not uri.startswith(("http://", "https://")):
        return
    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=REACH_TIMEOUT_SECONDS):
            return
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UsageError(f"MLflow tracking server {uri} is unreachable: {reason}") from None


def open_tracking(config: LakehouseConfig) -> Tracking:
    """Point this process's MLflow at the lakehouse's store and make sure its experiment exists."""
    import mlflow

    tracking = tracking_for(config)
    check_reachable(tracking)
    if tracking.embedded:
        config.mlflow_home.mkdir(parents=True, exist_ok=True)
        for noisy in ("alembic", "mlflow.store.db.utils"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    mlflow.set_tracking_uri(tracking.tracking_uri)
    mlflow.set_registry_uri(tracking.registry_uri)
    if mlflow.get_experiment_by_name(tracking.experiment) is None:
        mlflow.create_experiment(tracking.experiment, artifact_location=tracking.artifact_location)
        log.info("created MLflow experiment %s at %s", tracking.experiment, tracking.tracking_uri)
    mlflow.set_experiment(tracking.experiment)
    return tracking


@contextmanager
def mlflow_run(
    tracking: Tracking, *, ledger_run_id: str, kind: str, tags: Mapping[str, str] | None = None
) -> Iterator[Any]:
    """An MLflow run named after and tagged with the ledger run; failed if the block raises."""
    import mlflow

    experiment = mlflow.get_experiment_by_name(tracking.experiment)
    assert experiment is not None, "open_tracking creates the experiment"
    run_tags = {LEDGER_RUN_TAG: ledger_run_id, "lakehouse.kind": kind, **(tags or {})}
    with mlflow.start_run(
        experiment_id=experiment.experiment_id, run_name=ledger_run_id, tags=run_tags
    ) as run:
        yield run
