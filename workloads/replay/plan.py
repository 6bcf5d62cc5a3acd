"""Correction plans: what a replay is for, what it may touch, how it is proved and published.

A plan is a YAML file under ``conf/plans/``. It is validated strictly before anything
runs; an invalid plan is refused with the offending key. The plan is part of a replay's
identity: its canonical digest is recorded in the ledger with the run.
"""

from __future__ import annotations

from datetime import date
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from lakehouse.digest import digest_of
from lakehouse.errors import ConfigError


class Purpose(StrEnum):
    """``correction`` may publish after approval; ``comparison`` never publishes."""

    CORRECTION = "correction"
    COMPARISON = "comparison"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Answer(_Strict):
    """The derived answer the plan restates, and who stands behind it."""

    table: str = "gold.correlations"
    authority: str
    description: str = ""


class EngineChange(_Strict):
    """Which engine moves from which declared version to which."""

    engine: str
    from_version: str = Field(alias="from")
    to_version: str = Field(alias="to")
    downstream: tuple[str, ...] = ()
    """Engines re-run on top of the changed one (e.g. correlation after entity resolution):
    ``name@version`` pins a version; a bare ``name`` means the version effective on the
    new engine's ``effective_from``."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _a_real_change(self) -> EngineChange:
        if self.from_version == self.to_version:
            raise ValueError("'from' and 'to' are the same version: nothing to replay")
        return self


class InputRange(_Strict):
    """What history the replay reads: an event-time interval and pinned inputs."""

    event_from: date | None = None
    event_until: date | None = None
    pins: dict[str, int] = Field(default_factory=dict)
    """Explicit table -> version pins; tables not listed are pinned when the replay starts."""

    @model_validator(mode="after")
    def _ordered(self) -> InputRange:
        if self.event_from and self.event_until and self.event_from >= self.event_until:
            raise ValueError("event_from must be before event_until")
        return self


class Checks(_Strict):
    """Reconciliation thresholds; breaching one turns the verdict away from 'publish'."""

    max_residual_delta: int = Field(default=0, ge=0)
    """Rows the candidate may differ from the independently expected total."""
    max_changed_ratio: float = Field(default=1.0, ge=0.0, le=1.0)
    """Share of serving keys that may change before the verdict becomes 'investigate'."""
    high_impact_confidence_delta: float = Field(default=0.25, gt=0.0, le=1.0)
    """A change of confidence at least this large is shown to the approver one by one."""
    sample_size: int = Field(default=10, ge=0, le=1000)
    trace_sample_size: int = Field(default=5, ge=0, le=100)


class Consumer(_Strict):
    name: str
    required: bool = False


ConcurrentArrivalRule = Literal["keep_serving"]


class Publication(_Strict):
    approvers: tuple[str, ...] = ()
    consumers: tuple[Consumer, ...] = ()
    rollback_window_days: int = Field(default=30, ge=0)
    concurrent_arrivals: ConcurrentArrivalRule = "keep_serving"
    """Rows that reached serving after the pinned snapshot are kept as they are."""

    @field_validator("consumers")
    @classmethod
    def _unique_consumers(cls, consumers: tuple[Consumer, ...]) -> tuple[Consumer, ...]:
        names = [c.name for c in consumers]
        if len(names) != len(set(names)):
            raise ValueError("consumer names must be unique")
        return consumers


class Operations(_Strict):
    max_bytes_read: int = Field(default=10 * 1024**3, gt=0)
    """The rebuild I/O cap: a replay whose estimate exceeds it is refused before it runs."""


class CorrectionPlan(_Strict):
    """A whole correction plan."""

    plan: str
    purpose: Purpose
    description: str = ""
    answer: Answer
    engine_change: EngineChange
    range: InputRange = Field(default_factory=InputRange)
    checks: Checks = Field(default_factory=Checks)
    publication: Publication = Field(default_factory=Publication)
    operations: Operations = Field(default_factory=Operations)

    @field_validator("plan")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not value.replace("-", "_").isidentifier():
            raise ValueError("must hold letters, digits, '-' and '_' only")
        return value

    @model_validator(mode="after")
    def _correction_needs_approvers(self) -> CorrectionPlan:
        if self.purpose is Purpose.CORRECTION and not self.publication.approvers:
            raise ValueError("a correction plan needs publication.approvers")
        return self

    @property
    def digest(self) -> str:
        """Canonical digest of the plan's content: part of the replay's identity."""
        return digest_of(self.model_dump(mode="json", by_alias=True))

    def with_purpose(self, purpose: Purpose) -> CorrectionPlan:
        """The same plan run for another purpose (``--purpose comparison``)."""
        return self.model_copy(update={"purpose": purpose})


def load_plan(path: Path | str) -> CorrectionPlan:
    """Read and validate a plan; any problem is one line naming the file and the key."""
    plan_path = Path(path)
    if not plan_path.is_file():
        raise ConfigError(f"{plan_path}: plan file not found")
    try:
        raw: Any = yaml.safe_load(plan_path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{plan_path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{plan_path}: a plan must be a mapping")
    try:
        return CorrectionPlan.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"]) or "(plan)"
        if first["type"] == "extra_forbidden":
            raise ConfigError(f"{plan_path}: unknown key '{key}'") from None
        if first["type"] == "missing":
            raise ConfigError(f"{plan_path}: missing key '{key}'") from None
        raise ConfigError(f"{plan_path}: key '{key}': {first['msg']}") from None
