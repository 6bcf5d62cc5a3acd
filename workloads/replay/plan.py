"""Correction plans: what a replay is for, what it may touch, how it is proved and published.

A plan is a YAML file under ``conf/plans/``. It is validated strictly before anything
runs; an invalid plan is refused with the offending key. The plan is part of a replay's
identity: its canonical digest is recorded in the ledger with the run.
"""

from __future__ import annotations

import logging
from datetime import date
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from lakehouse.digest import digest_of
from lakehouse.models import StrictModel, read_yaml_mapping, validate_file
from workloads.replay.answer import ANSWER_TABLES, AnswerTable, answer_table, unknown_answer
from workloads.vocabulary import TableName

log = logging.getLogger(__name__)


class Purpose(StrEnum):
    """``correction`` may publish after approval; ``comparison`` never publishes."""

    CORRECTION = "correction"
    COMPARISON = "comparison"


class Answer(StrictModel):
    """The derived answer the plan restates, and who stands behind it.

    ``table`` must be a declared answer table (:mod:`workloads.replay.answer`): the flow reads
    its declaration, so a table without one is refused with the plan, before a JVM starts.
    """

    table: str = TableName.CORRELATIONS.value
    authority: str
    description: str = ""

    @field_validator("table")
    @classmethod
    def _declared(cls, value: str) -> str:
        if value not in ANSWER_TABLES:
            raise ValueError(unknown_answer(value))
        return value

    @property
    def declaration(self) -> AnswerTable:
        """The answer table's declaration (row identity, partitioning, content, checks)."""
        return answer_table(self.table)


class EngineChange(StrictModel):
    """Which engine moves from which declared version to which.

    Any engine of the answer's chain: a resolver upstream of the producer (entity
    resolution), or the producer itself (correlation); the catalog tells which
    (:func:`workloads.replay.identity.change_kind`).
    """

    engine: str
    from_version: str = Field(alias="from")
    to_version: str = Field(alias="to")
    downstream: tuple[str, ...] = ()
    """Engines re-run on top of the changed one (e.g. correlation after entity resolution):
    ``name@version`` pins a version; a bare ``name`` means the version effective on the
    new engine's ``effective_from``. Empty when the changed engine produces the answer."""

    model_config = ConfigDict(populate_by_name=True)  # merged with StrictModel's config

    @model_validator(mode="after")
    def _a_real_change(self) -> EngineChange:
        if self.from_version == self.to_version:
            raise ValueError("'from' and 'to' are the same version: nothing to replay")
        return self


class InputRange(StrictModel):
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


class Checks(StrictModel):
    """Reconciliation thresholds; breaching one turns the verdict away from 'publish'."""

    max_residual_delta: int = Field(default=0, ge=0)
    """Rows the candidate may differ from the independently expected total."""
    max_changed_ratio: float = Field(default=1.0, ge=0.0, le=1.0)
    """Share of serving keys that may change before the verdict becomes 'investigate'."""
    high_impact_confidence_delta: float = Field(default=0.25, gt=0.0, le=1.0)
    """A change of confidence at least this large is shown to the approver one by one."""
    sample_size: int = Field(default=10, ge=0, le=1000)
    trace_sample_size: int = Field(default=5, ge=0, le=100)


class Consumer(StrictModel):
    name: str
    required: bool = False


ConcurrentArrivalRule = Literal["keep_serving"]


class Publication(StrictModel):
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


class Operations(StrictModel):
    max_bytes_read: int = Field(default=10 * 1024**3, gt=0)
    """The rebuild I/O cap: a replay whose estimate exceeds it is refused before it runs."""


class CorrectionPlan(StrictModel):
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
    raw = read_yaml_mapping(plan_path, what="plan file", hint="plans live under conf/plans/")
    plan = validate_file(CorrectionPlan, plan_path, raw)
    log.debug("loaded plan %s (%s) from %s, digest %s", plan.plan, plan.purpose, plan_path, plan.digest[:12])
    return plan
