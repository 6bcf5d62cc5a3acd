"""``lakehouse calibrate --engine NAME@VERSION``: one release's confidence against later outcomes (W5).

A recorded run joins every decision of the release (:mod:`workloads.ml.correlation_outcomes`)
to the outcomes that arrived later, as the lake knows them at T, and per scope (each
correlation type, and the whole release pooled as scope ``all``) measures the calibration
(:mod:`workloads.evaluation.calibration`: reliability bins with Wilson intervals, Brier, ECE
on equal-width and equal-mass bins, log loss). A scope whose ECE exceeds its threshold
(``calibration`` in ``conf/policies.yaml``) is flagged: a measured
divergence, in the report and in the ledger.

Per scope it then fits a calibrator (isotonic or Platt, by cross-validated Brier) when there
are enough outcomes (:data:`~workloads.evaluation.calibration.MIN_OUTCOMES_PER_SCOPE`), and
registers it in MLflow as ``confidence-calibration-<scope>`` when its cross-validated Brier
beats the confidences as they are; below the minimum, or when it does not beat them, it is
refused and not registered, and the report says why. The "after" figures are
measured on out-of-fold predictions, never on the outcomes a calibrator was fitted on.

Everything lands in three places that name each other: ``gold.calibration_reports`` (one row
per scope: what an auditor reads for "which calibration was measured when, and what did it
say"), a ``calibration_measured`` ledger entry, and an MLflow run with the reliability
diagrams (also written under ``<workdir>/calibration/<run id>/``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from lakehouse.errors import UsageError
from lakehouse.frames import materialize
from ledger.clock import utc
from ledger.engines import EngineCatalog, EngineSpec
from ledger.entries import CalibrationMeasured, EngineDeclared
from workloads.engines.correlation_calibrated import BASES, CALIBRATORS
from workloads.evaluation import calibration as measure
from workloads.ml.correlation_outcomes import decision_outcomes, engine_decisions
from workloads.ml.point_in_time import knowledge_end
from workloads.ml.tracking import Tracking, mlflow_run
from workloads.policies import CalibrationPolicy
from workloads.runs import new_run_id, recorded_run
from workloads.vocabulary import TableName

if TYPE_CHECKING:
    import pandas as pd

    from lakehouse.tables import TableRegistry
    from ledger import Clock, Ledger

__all__ = [
    "CALIBRATOR_MODEL",
    "Calibration",
    "Recalibration",
    "ScopeCalibration",
    "calibrate",
    "declare_recalibration",
    "recalibration_plan",
    "scope_groups",
]

log = logging.getLogger(__name__)

CALIBRATOR_MODEL: Final = "confidence-calibration"
"""Registered calibrators are ``confidence-calibration-<scope>`` (plus the lakehouse instance)."""
DECIDED_TABLE: Final = TableName.CORRELATIONS
WHOLE_RELEASE: Final = "all"
"""The scope of every decision of the release pooled (reported beside each correlation type)."""


def scope_groups(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Each correlation type's decisions, then the whole release's (when it has several types).

    The pooled scope is the release-level report the design asks for, and its calibrator is
    the one a recalibrated release applies to a type too small for its own: at a few hundred
    entities a type yields a few dozen decisions, below the fitting minimum on its own.
    """
    groups = [
        (str(name), group) for name, group in sorted(frame.groupby("scope"), key=lambda item: str(item[0]))
    ]
    return [*groups, (WHOLE_RELEASE, frame)] if len(groups) > 1 else groups


@dataclass(frozen=True)
class ScopeCalibration:
    """One scope's figures before and after, its flag, and its calibrator (or why none)."""

    scope: str
    decisions: int
    censored: int
    positives: int
    ece_threshold: float
    flagged: bool
    before: measure.CalibrationReport
    after: measure.CalibrationReport | None
    calibrator: dict[str, Any] | None
    """Method, cross-validated Brier of both candidates, registered model name and version."""
    refused: str | None
    """Why no calibrator was registered (too few outcomes, or not better), when none was."""
    figure: str

    def summary(self) -> dict[str, Any]:
        """The figures the ledger keeps (no bins: they are in the reports table)."""
        after = self.after
        return {
            "decisions": self.decisions,
            "censored": self.censored,
            "positives": self.positives,
            "brier": self.before.brier,
            "log_loss": self.before.log_loss,
            "ece_uniform": self.before.ece_uniform,
            "ece_quantile": self.before.ece_quantile,
            "ece_threshold": self.ece_threshold,
            "flagged": self.flagged,
            "calibrated_brier": after.brier if after else None,
            "calibrated_ece_uniform": after.ece_uniform if after else None,
            "calibrator": self.calibrator,
            "refused": self.refused,
        }


@dataclass(frozen=True)
class Recalibration:
    """A correlation release declared from a calibration, and the plan that replays history under it."""

    engine: str
    base: str
    model_versions: dict[str, str]
    plan: str
    plan_path: str


@dataclass(frozen=True)
class Calibration:
    """One calibration run of one engine release."""

    run_id: str
    engine: str
    as_of: datetime
    label_horizon_days: int
    inputs: dict[str, int]
    scopes: tuple[ScopeCalibration, ...]
    reports_table: str
    reports_version: int
    mlflow_run_id: str
    model_versions: dict[str, int]
    """Registered calibrator -> version: what a recalibrated release pins (``--declare``)."""
    declared: Recalibration | None = None
    """The release declared from it and its replay plan (``lakehouse calibrate --declare``)."""

    @property
    def flagged(self) -> tuple[str, ...]:
        return tuple(s.scope for s in self.scopes if s.flagged)


def _decisions(
    registry: TableRegistry,
    engine: str,
    as_of: datetime,
    horizon_days: int,
    scope: str | None,
    since: Any,
    until: Any,
) -> tuple[pd.DataFrame, dict[str, int]]:

    silver_table, correlations_table = (registry.get(n) for n in (TableName.SILVER_EVENTS, DECIDED_TABLE))
    if not correlations_table.exists() or correlations_table.current_version() is None:
        raise UsageError(f"{DECIDED_TABLE} has never been built: run `lakehouse build gold` first")
    pins = {
        TableName.SILVER_EVENTS.value: silver_table.resolve_version(as_of),
        DECIDED_TABLE.value: correlations_table.resolve_version(as_of),
    }
    silver = silver_table.read(as_of=pins[TableName.SILVER_EVENTS.value])
    end = knowledge_end(silver, as_of)
    decided = engine_decisions(
        correlations_table.read(as_of=pins[DECIDED_TABLE.value]),
        engine,
        as_of,
        scope=scope,
        since=since,
        until=until,
    )
    joined = materialize(decision_outcomes(decided, silver, horizon_days, as_of, end))
    frame = joined.select("scope", "confidence", "outcome", "censored").toPandas()
    return frame, pins


def _refuse_empty(frame: pd.DataFrame, engine: str, scope: str | None) -> None:
    """No decisions, or no outcome at all in range: nothing to calibrate (exit 2, with counts)."""
    usable = frame[~frame["censored"]]
    decisions, positives = len(usable), int(usable["outcome"].sum()) if len(usable) else 0
    if decisions and positives:
        return
    where = f" in scope {scope!r}" if scope else ""
    raise UsageError(
        f"nothing to calibrate for {engine}{where}: found {decisions} decision(s) with a closed horizon "
        f"({len(frame) - decisions} still open) and {positives} confirmed outcome(s)"
    )


def calibrate(
    registry: TableRegistry,
    ledger: Ledger,
    clock: Clock,
    tracking: Tracking,
    engine: str,
    policy: CalibrationPolicy,
    *,
    figures: Path,
    as_of: datetime | None = None,
    horizon_days: int | None = None,
    scope: str | None = None,
    since: Any = None,
    until: Any = None,
    progress: Callable[[str], None] | None = None,
) -> Calibration:
    """Measure, flag, fit and register per scope; record it all (see the module docstring)."""
    import mlflow

    say = progress or (lambda _message: None)
    started = clock.now()
    moment = as_of or started
    horizon = horizon_days or policy.label_horizon_days
    say(f"joining the decisions of {engine} to the outcomes that arrived within {horizon} days")
    frame, pins = _decisions(registry, engine, moment, horizon, scope, since, until)
    _refuse_empty(frame, engine, scope)
    run_id = new_run_id("calibrate", started, salt=[engine, scope])
    folder = figures / run_id
    parameters = {
        "engine": engine,
        "as_of": moment.isoformat(),
        "label_horizon_days": horizon,
        "scope": scope,
        "since": str(since) if since else None,
        "until": str(until) if until else None,
        "n_bins": measure.DEFAULT_BINS,
    }
    with (
        mlflow_run(tracking, ledger_run_id=run_id, kind="calibrate", tags={"engine": engine}) as tracked,
        recorded_run(
            ledger,
            run_id=run_id,
            command="calibrate",
            purpose="calibration",
            inputs=pins,
            parameters={**parameters, "mlflow_run_id": tracked.info.run_id},
        ) as run,
    ):
        mlflow.log_params({k: str(v) for k, v in parameters.items()})
        scopes = tuple(
            _calibrate_scope(tracking, name, group, policy.threshold(name), folder, say)
            for name, group in scope_groups(frame)
        )
        flagged = tuple(s.scope for s in scopes if s.flagged)
        ledger.writer.append(
            CalibrationMeasured(
                run_id=run_id,
                engine=engine,
                table=DECIDED_TABLE.value,
                label_horizon_days=horizon,
                scopes={s.scope: s.summary() for s in scopes},
                flagged=flagged,
            )
        )
        reports = registry.get(TableName.CALIBRATION_REPORTS)
        reports.create(if_not_exists=True)
        reports.append(
            _report_rows(registry, run_id, engine, moment, started, horizon, scopes, tracked), run_id=run_id
        )
        version = reports.current_version()
        assert version is not None, "an append makes a version"
        run.outputs[reports.name] = version
        run.counts.update(
            {
                "scopes": len(scopes),
                "flagged": len(flagged),
                "calibrators": sum(1 for s in scopes if s.calibrator),
                "decisions": sum(s.decisions for s in scopes),
            }
        )
    model_versions = {
        str(s.calibrator["model"]): int(s.calibrator["model_version"]) for s in scopes if s.calibrator
    }
    return Calibration(
        run_id=run_id,
        engine=engine,
        as_of=moment,
        label_horizon_days=horizon,
        inputs=pins,
        scopes=scopes,
        reports_table=TableName.CALIBRATION_REPORTS.value,
        reports_version=version,
        mlflow_run_id=tracked.info.run_id,
        model_versions=model_versions,
    )


def _calibrate_scope(
    tracking: Tracking,
    scope: str,
    group: pd.DataFrame,
    threshold: float,
    folder: Path,
    say: Callable[[str], None],
) -> ScopeCalibration:
    import mlflow

    usable = group[~group["censored"]]
    y, p = usable["outcome"].astype(int).to_numpy(), usable["confidence"].astype(float).to_numpy()
    say(f"{scope}: {len(y)} decisions, {int(y.sum())} confirmed")
    before = measure.calibration_report(y, p)
    flagged = before.ece_uniform > threshold
    after: measure.CalibrationReport | None = None
    calibrator: dict[str, Any] | None = None
    refused: str | None = None
    try:
        fitted = measure.fit_calibrator(y, p)
    except UsageError as too_few:
        refused = str(too_few)
        log.info("%s: calibrator refused: %s", scope, refused)
    else:
        after = measure.calibration_report(y, fitted.held_out)
        if fitted.improves():
            calibrator = _register(tracking, scope, fitted)
        else:
            cv_brier, raw_brier = fitted.cv_brier[fitted.method], fitted.uncalibrated_brier
            refused = (
                f"not registered: the {fitted.method} calibrator's cross-validated Brier "
                f"{cv_brier:.5f} does not beat the uncalibrated {raw_brier:.5f}"
            )
    metrics = {f"{scope}.{k}": v for k, v in _metric_values(before, after).items()}
    mlflow.log_metrics(metrics)
    folder.mkdir(parents=True, exist_ok=True)
    figure = measure.reliability_figure(before, after, title=f"{scope}: reliability (equal-width bins)")
    path = measure.save_reliability_png(figure, folder / f"reliability_{scope}.png")
    mlflow.log_artifact(str(path), artifact_path="plots")
    return ScopeCalibration(
        scope=scope,
        decisions=len(y),
        censored=int(group["censored"].sum()),
        positives=int(y.sum()),
        ece_threshold=threshold,
        flagged=flagged,
        before=before,
        after=after,
        calibrator=calibrator,
        refused=refused,
        figure=str(path),
    )


def _metric_values(
    before: measure.CalibrationReport, after: measure.CalibrationReport | None
) -> dict[str, float]:
    values = {
        "brier": before.brier,
        "log_loss": before.log_loss,
        "ece_uniform": before.ece_uniform,
        "ece_quantile": before.ece_quantile,
    }
    if after is not None:
        values |= {f"calibrated_{k}": v for k, v in _metric_values(after, None).items()}
    return values


def _register(tracking: Tracking, scope: str, fitted: measure.FittedCalibrator) -> dict[str, Any]:
    """Log the calibrator's estimator and register it; the version goes into the report."""
    import mlflow
    import mlflow.sklearn

    name = tracking.registered_name(f"{CALIBRATOR_MODEL}-{scope}")
    info = mlflow.sklearn.log_model(fitted.estimator, name=f"calibrator-{scope}")
    registered = mlflow.register_model(info.model_uri, name)
    return {
        **fitted.as_dict(),
        "model": name,
        "model_version": int(registered.version),
        "input": "p" if fitted.method == "isotonic" else f"logit(clip(p, {measure.PLATT_CLIP}))",
        "map": fitted.declared_map(),
    }


def _report_rows(
    registry: TableRegistry,
    run_id: str,
    engine: str,
    as_of: datetime,
    measured_at: datetime,
    horizon: int,
    scopes: tuple[ScopeCalibration, ...],
    tracked: Any,
) -> Any:
    """One ``gold.calibration_reports`` row per scope, in the table's schema."""
    table = registry.get(TableName.CALIBRATION_REPORTS)
    rows = []
    for s in scopes:
        after, cal = s.after, s.calibrator or {}
        rows.append(
            (
                run_id,
                engine,
                s.scope,
                utc(as_of),
                utc(measured_at),
                horizon,
                s.decisions,
                s.censored,
                s.positives,
                s.before.brier,
                s.before.log_loss,
                s.before.ece_uniform,
                s.before.ece_quantile,
                s.ece_threshold,
                s.flagged,
                cal.get("method"),
                cal.get("model"),
                cal.get("model_version"),
                after.brier if after else None,
                after.log_loss if after else None,
                after.ece_uniform if after else None,
                after.ece_quantile if after else None,
                s.refused,
                json.dumps(s.before.as_dict()["bins_uniform"], sort_keys=True),
                json.dumps(after.as_dict()["bins_uniform"], sort_keys=True) if after else None,
                tracked.info.run_id,
            )
        )
    return table.spark.createDataFrame(rows, table.spec.schema())


CALIBRATED_IMPLEMENTATION: Final = "workloads.engines.correlation_calibrated:correlate_calibrated"
"""The producer a recalibrated correlation release runs (the base release plus declared maps)."""


def recalibration_plan(
    template: dict[str, Any], *, base: EngineSpec, new: EngineSpec, calibration: Calibration
) -> dict[str, Any]:
    """A correction plan from ``base`` to the recalibrated ``new`` release: the template's
    answer, checks and publication rules (who approves, who must acknowledge), this change."""
    models = ", ".join(f"{name} v{version}" for name, version in sorted(calibration.model_versions.items()))
    return {
        **template,
        "plan": f"correlation-v{new.version}-recalibration",
        "purpose": "correction",
        "description": (
            f"Replay history under {new.ref}: {base.ref}'s correlations with confidences recalibrated "
            f"against the outcomes that arrived later (calibrate run {calibration.run_id}: {models})."
        ),
        "engine_change": {
            "engine": base.name,
            "from": str(base.version),
            "to": str(new.version),
            "downstream": [],
        },
        "range": {"event_from": None, "event_until": None, "pins": {}},
    }


def check_declarable(catalog: EngineCatalog, base: EngineSpec, effective_from: date) -> None:
    """Refuse (exit 2) a recalibration that cannot be declared: a base the calibrated producer
    cannot stand on, or a date not after every declared release of the engine (a release
    declared earlier could never take effect after the pending one)."""
    if base.ref not in BASES:
        bases = ", ".join(sorted(BASES))
        raise UsageError(f"--declare: calibrate a base release ({bases}); {base.ref} is not one")
    latest = catalog.versions(base.name)[-1]
    if effective_from <= latest.effective_from:
        raise UsageError(
            f"--declare: a new {base.name} release must take effect after {latest.ref} "
            f"({latest.effective_from}); pass --effective-from after it, or recalibrate once {latest.ref} "
            "is in force"
        )


def declare_recalibration(
    engines_path: Path,
    base: EngineSpec,
    calibration: Calibration,
    *,
    effective_from: date,
    template: Path,
    plans: Path,
) -> tuple[Recalibration, EngineDeclared]:
    """Declare the next correlation release (the base release's parameters plus every
    registered calibrator's map, its model versions pinned) and write the plan that replays
    history under it. The caller appends the returned ledger entry."""
    import yaml

    from ledger.engines import declare, load_engines

    calibrators = {s.scope: s.calibrator["map"] for s in calibration.scopes if s.calibrator}
    if not calibrators:
        raise UsageError(
            f"--declare: no scope of {calibration.engine} has a registered calibrator "
            f"(see the report of {calibration.run_id}): nothing to declare"
        )
    models = {
        str(s.calibrator["model"]): str(s.calibrator["model_version"])
        for s in calibration.scopes
        if s.calibrator
    }
    entry = declare(
        engines_path,
        name=base.name,
        implementation=CALIBRATED_IMPLEMENTATION,
        effective_from=effective_from,
        description=(
            f"{base.ref} with confidences recalibrated against later outcomes (confidence calibration of "
            f"calibrate run {calibration.run_id}; {', '.join(sorted(calibrators))})"
        ),
        parameters={**dict(base.parameters), "base": base.ref, CALIBRATORS: calibrators},
        model_versions=models,
        consumes=base.consumes,
        produces=base.produces,
        run_id=calibration.run_id,
    )
    new = load_engines(engines_path).resolve(base.name, entry.engine.version)
    plan = recalibration_plan(
        yaml.safe_load(template.read_text()), base=base, new=new, calibration=calibration
    )
    plans.mkdir(parents=True, exist_ok=True)
    path = plans / f"{plan['plan']}.yaml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    log.info("declared %s from %s; plan %s", new.ref, calibration.run_id, path)
    return Recalibration(new.ref, base.ref, models, plan["plan"], str(path)), entry
