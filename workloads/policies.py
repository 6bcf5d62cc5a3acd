"""The policy file (``conf/policies.yaml``): where it is, its ``protection`` and ``calibration`` sections.

The ``lateness`` section is read by :mod:`workloads.silver.lateness`; ``protection`` (how long
the format's history must stay readable for audits), ``calibration`` (when a scope's
calibration error is a divergence to flag), ``retention`` and ``maintenance`` (how much history
each zone keeps, and when small files are compacted) here.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Final

from pydantic import Field

from lakehouse.errors import ConfigError
from lakehouse.models import StrictModel, read_yaml_mapping, validate_file

log = logging.getLogger(__name__)

DEFAULT_POLICY_PATH: Final[Path] = Path(__file__).resolve().parents[1] / "conf" / "policies.yaml"
"""The repository's policy file, used when no other is named."""


class ProtectionPolicy(StrictModel):
    """How long versions the ledger points to must stay readable under routine maintenance."""

    audit_window_days: int = Field(ge=1)
    """Every version readers were served within this many days stays readable (``asof``
    route (b), audits); each publication also keeps its plan's rollback window."""


class _ProtectionSection(StrictModel):
    protection: ProtectionPolicy


def load_protection_policy(path: Path = DEFAULT_POLICY_PATH) -> ProtectionPolicy:
    """Read the ``protection:`` section of a policies YAML file (one-line errors name the key)."""
    document = read_yaml_mapping(path, what="policy file")
    if not isinstance(document.get("protection"), dict):
        raise ConfigError(f"{path}: no 'protection' mapping (protection.audit_window_days)")
    policy = validate_file(_ProtectionSection, path, {"protection": document["protection"]}).protection
    log.debug("protection policy from %s: %s", path, policy)
    return policy


class CalibrationPolicy(StrictModel):
    """When a scope's measured calibration error is a divergence (seed 004: measured, flagged)."""

    ece_threshold: float = Field(gt=0, le=1)
    """A scope whose equal-width ECE exceeds this is flagged in the report and the ledger."""
    scope_thresholds: dict[str, float] = Field(default_factory=dict)
    """Per-scope thresholds (``correlation_type`` -> ECE) that replace ``ece_threshold``."""
    label_horizon_days: int = Field(default=90, ge=1)
    """How long after a decision an outcome still counts as its outcome (``--label-horizon``)."""

    def threshold(self, scope: str) -> float:
        return self.scope_thresholds.get(scope, self.ece_threshold)


class _CalibrationSection(StrictModel):
    calibration: CalibrationPolicy


def load_calibration_policy(path: Path = DEFAULT_POLICY_PATH) -> CalibrationPolicy:
    """Read the ``calibration:`` section of a policies YAML file (one-line errors name the key)."""
    document = read_yaml_mapping(path, what="policy file")
    if not isinstance(document.get("calibration"), dict):
        raise ConfigError(f"{path}: no 'calibration' mapping (calibration.ece_threshold)")
    return validate_file(_CalibrationSection, path, {"calibration": document["calibration"]}).calibration


class RetentionPolicy(StrictModel):
    """How many days of table history each zone keeps under ``lakehouse maintain``."""

    bronze_days: int = Field(ge=0)
    silver_days: int = Field(ge=0)
    gold_days: int = Field(ge=0)
    ops_days: int = Field(ge=0)

    def days(self, zone: str) -> int:
        """The retention of ``zone`` (``bronze``, ``silver``, ``gold`` or ``ops``)."""
        return int(getattr(self, f"{zone}_days"))

    def rule(self, zone: str) -> str:
        """The policy key that sets ``zone``'s retention, for messages."""
        return f"retention.{zone}_days = {self.days(zone)}"


class MaintenancePolicy(StrictModel):
    """Who compacts, and when a table has enough small files to be worth it."""

    owner: str = Field(min_length=1)
    small_file_bytes: int = Field(ge=1)
    compact_min_small_files: int = Field(ge=2)


class _MaintenanceSections(StrictModel):
    retention: RetentionPolicy
    maintenance: MaintenancePolicy


def load_maintenance_policies(path: Path = DEFAULT_POLICY_PATH) -> tuple[RetentionPolicy, MaintenancePolicy]:
    """Read the ``retention:`` and ``maintenance:`` sections (one-line errors name the key)."""
    document = read_yaml_mapping(path, what="policy file")
    for section, example in (("retention", "retention.silver_days"), ("maintenance", "maintenance.owner")):
        if not isinstance(document.get(section), dict):
            raise ConfigError(f"{path}: no '{section}' mapping ({example})")
    found = validate_file(
        _MaintenanceSections,
        path,
        {"retention": document["retention"], "maintenance": document["maintenance"]},
    )
    return found.retention, found.maintenance
