"""The policy file (``conf/policies.yaml``): where it is, its ``protection`` and ``calibration`` sections.

The ``lateness`` section is read by :mod:`workloads.silver.lateness`; ``protection`` (how long
the format's history must stay readable for audits), ``calibration`` (when a scope's
calibration error is a divergence to flag), ``retention`` and ``maintenance`` (how much history
each zone keeps, and when small files are compacted) here.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Final, TypeVar

from pydantic import Field, create_model

from lakehouse.errors import ConfigError
from lakehouse.models import StrictModel, read_yaml_mapping, validate_file

log = logging.getLogger(__name__)

DEFAULT_POLICY_PATH: Final[Path] = Path(__file__).resolve().parents[1] / "conf" / "policies.yaml"
"""The repository's policy file, used when no other is named."""

SectionT = TypeVar("SectionT", bound=StrictModel)


def load_section(path: Path, section: str, model: type[SectionT], example: str) -> SectionT:
    """Read one top-level section of a policies YAML file into ``model``.

    A missing section names ``example`` (a key it should hold); a bad value is one line naming
    the file and the dotted key (``progress.feeds.orders.cadence_hours``)."""
    document = read_yaml_mapping(path, what="policy file")
    if not isinstance(document.get(section), dict):
        raise ConfigError(f"{path}: no '{section}' mapping ({example})")
    fields: dict[str, Any] = {section: (model, ...)}
    wrapper = create_model(f"_{section.title()}Section", __base__=StrictModel, **fields)
    found = getattr(validate_file(wrapper, path, {section: document[section]}), section)
    assert isinstance(found, model)
    log.debug("%s policy from %s: %s", section, path, found)
    return found


class ProtectionPolicy(StrictModel):
    """How long versions the ledger points to must stay readable under routine maintenance."""

    audit_window_days: int = Field(ge=1)
    """Every version readers were served within this many days stays readable (``asof``
    route (b), audits); each publication also keeps its plan's rollback window."""


def load_protection_policy(path: Path = DEFAULT_POLICY_PATH) -> ProtectionPolicy:
    """Read the ``protection:`` section of a policies YAML file (one-line errors name the key)."""
    return load_section(path, "protection", ProtectionPolicy, "protection.audit_window_days")


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


def load_calibration_policy(path: Path = DEFAULT_POLICY_PATH) -> CalibrationPolicy:
    """Read the ``calibration:`` section of a policies YAML file (one-line errors name the key)."""
    return load_section(path, "calibration", CalibrationPolicy, "calibration.ece_threshold")


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
    """Who compacts, to what file size, and when a table has enough small files to be worth it.

    A table may declare its own ``owner`` and ``target_file_bytes`` in ``lakehouse.yaml``;
    these are the defaults."""

    owner: str = Field(min_length=1)
    target_file_bytes: int = Field(ge=1024)
    """Compaction writes data files of about this size; a file under 3/4 of it is small
    (Iceberg's own default for ``rewrite_data_files``)."""
    compact_min_small_files: int = Field(ge=2)

    @staticmethod
    def small_below(target_file_bytes: int) -> int:
        """Files under this many bytes count as small for a table whose target is ``target_file_bytes``."""
        return target_file_bytes * 3 // 4


def load_maintenance_policies(path: Path = DEFAULT_POLICY_PATH) -> tuple[RetentionPolicy, MaintenancePolicy]:
    """Read the ``retention:`` and ``maintenance:`` sections (one-line errors name the key)."""
    return (
        load_section(path, "retention", RetentionPolicy, "retention.silver_days"),
        load_section(path, "maintenance", MaintenancePolicy, "maintenance.owner"),
    )


class StreamingPolicy(StrictModel):
    """The ``streaming:`` section: the stream's evidence window and how its divergence is judged."""

    window_days: int = Field(ge=1)
    """Each micro-batch is correlated over this many days of event time up to its newest event
    (the batch's events and what Silver holds of the window): the bounded, partial evidence."""
    precision_threshold: float = Field(ge=0, le=1)
    """A scope whose streaming precision against batch falls below this is flagged."""
    scope_thresholds: dict[str, float] = Field(default_factory=dict)
    """Per-scope thresholds (``correlation_type`` -> precision) that replace the default."""
    consumers: tuple[str, ...] = ()
    """Told through ``ops.outbox`` when a reconciliation retracts streaming false positives."""

    def threshold(self, scope: str) -> float:
        return self.scope_thresholds.get(scope, self.precision_threshold)


def load_streaming_policy(path: Path = DEFAULT_POLICY_PATH) -> StreamingPolicy:
    """Read the ``streaming:`` section of a policies YAML file (one-line errors name the key)."""
    return load_section(path, "streaming", StreamingPolicy, "streaming.window_days")
