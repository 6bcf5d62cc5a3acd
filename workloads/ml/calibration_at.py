"""Which calibration was in force at T, and what it measured (the auditor's W5 question).

Answered from the engine catalog and the ledger alone, so it needs no Spark (the caller
chooses the reader of the ledger):

* the release of the engine in force at T: :func:`ledger.engines.engines_in_force` over the
  entries recorded by T, so a recalibrated release counts from its replay's publication on,
  and a publication rolled back by T does not count;
* whether that release is recalibrated (declared by ``lakehouse calibrate --declare``: its
  parameters hold the ``calibrators``, its ``model_versions`` the registered MLflow
  versions), and the ``calibrate`` run whose fit it declares, with that run's figures per
  scope before and after (the ``calibration_measured`` entry of the same run);
* the latest measurement of the release in force recorded by T: what was known at T about
  how well the confidences it served matched later outcomes, and which scopes were flagged.

The figures are the ledger's (no bins); ``gold.calibration_reports`` holds the same runs
with their bins and figures, one row per scope and run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ledger.chain import LedgerRecord
from ledger.engines import EngineCatalog, engines_in_force
from ledger.entries import CalibrationMeasured, EngineDeclared
from workloads.engines.correlation_calibrated import CALIBRATORS

__all__ = ["CalibrationAt", "Measurement", "calibration_at"]


@dataclass(frozen=True)
class Measurement:
    """One ``lakehouse calibrate`` run's figures, as the ledger keeps them."""

    run_id: str
    recorded_at: datetime
    engine: str
    label_horizon_days: int
    flagged: tuple[str, ...]
    scopes: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class CalibrationAt:
    """The calibration in force at ``at`` for one engine, and what had been measured of it."""

    at: datetime
    engine: str
    """The release in force, ``name@version``."""
    reason: str
    """Why it was in force (the in-force rule's reason)."""
    calibrated: bool
    base: str | None = None
    """The release whose confidences it maps (a recalibrated release only)."""
    methods: dict[str, str] = field(default_factory=dict)
    """Scope -> calibrator method (platt or isotonic) declared in the release."""
    model_versions: dict[str, str] = field(default_factory=dict)
    """The registered MLflow model versions the release pins."""
    fitted_by: Measurement | None = None
    """The calibrate run whose calibrators the release declares (before and after per scope)."""
    last_measured: Measurement | None = None
    """The latest measurement of the release in force recorded by ``at`` (None: never measured)."""


def _measurement(record: LedgerRecord, entry: CalibrationMeasured) -> Measurement:
    return Measurement(
        run_id=entry.run_id,
        recorded_at=record.recorded_at,
        engine=entry.engine,
        label_horizon_days=entry.label_horizon_days,
        flagged=tuple(entry.flagged),
        scopes={scope: dict(figures) for scope, figures in entry.scopes.items()},
    )


def calibration_at(
    catalog: EngineCatalog, records: Sequence[LedgerRecord], at: datetime, *, engine: str = "correlation"
) -> CalibrationAt:
    """The calibration of ``engine`` in force at ``at`` (see the module docstring); pure.

    ``records`` are the ledger's records in order; only those recorded by ``at`` count.
    """
    known = [r for r in records if r.recorded_at <= at]
    entries = [r.entry() for r in known]
    in_force = engines_in_force(catalog, entries, [engine], at.date())[engine]
    spec = in_force.spec
    measured = [(r, e) for r, e in zip(known, entries, strict=True) if isinstance(e, CalibrationMeasured)]
    mine = [_measurement(r, e) for r, e in measured if e.engine == spec.ref]
    last = mine[-1] if mine else None
    calibrators = spec.parameters.get(CALIBRATORS)
    if not isinstance(calibrators, dict):
        return CalibrationAt(at, spec.ref, in_force.reason, calibrated=False, last_measured=last)
    declared = (spec.name, spec.version)
    declarations = [
        e for e in entries if isinstance(e, EngineDeclared) and (e.engine.name, e.engine.version) == declared
    ]
    fitted_run = declarations[0].run_id if declarations else None
    fitted_by = next((_measurement(r, e) for r, e in measured if e.run_id == fitted_run), None)
    return CalibrationAt(
        at,
        spec.ref,
        in_force.reason,
        calibrated=True,
        base=str(spec.parameters.get("base")) if spec.parameters.get("base") else None,
        methods={scope: str(m.get("method")) for scope, m in calibrators.items() if isinstance(m, dict)},
        model_versions=dict(spec.model_versions),
        fitted_by=fitted_by,
        last_measured=last,
    )
