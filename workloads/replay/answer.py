"""Answer tables: what the replay flow needs to know about a table it restates.

The flow is not written for one table. A table a plan may restate (``answer.table`` in the
plan file) is an :class:`AnswerTable` declaration: its row identity, its partitioning, the
columns that make up its content, its supersession reason template, the independent check
that recounts it, and what follows its publication (an entity index to rebuild, a
provisional view to reconcile). Scope, candidate, classification, diff, review, quality
report, gate, publication, rollback and the index rebuild read the declaration; nothing
after :func:`answer_table` names a column of a particular table.

Every answer table is **bitemporal** in the same way: it carries the lifecycle columns
:data:`LIFECYCLE` (``run_id``, ``engine``, ``status`` with the
:class:`~workloads.vocabulary.CorrelationStatus` values, ``recorded_at``,
``superseded_at``, ``superseded_by``, ``supersede_reason``). They are the contract of an
answer table, not part of one declaration.

``gold.correlations`` is the first declaration (:data:`CORRELATIONS`). Some steps are
intrinsically about it: the independent recount of expected pairs
(:mod:`workloads.replay.recount`), the entity-resolution scope analysis
(:mod:`workloads.replay.scope`) and the pair successor rule of the classification. The
declaration names them (:attr:`AnswerTable.independent_check`, :attr:`AnswerTable.subjects`,
:attr:`AnswerTable.kind`), so that a second answer table plugs in its own.

This module imports no Spark and no engine: a plan naming a table without a declaration is
refused before a JVM starts (:mod:`workloads.replay.plan`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from lakehouse.errors import UsageError
from workloads.vocabulary import TableName

RUN: Final = "run_id"
"""The run that wrote a row version: with the key, a row's identity."""
ENGINE: Final = "engine"
"""The deciding engine label of a row (``correlation@1;entity_resolution@3``)."""
STATUS: Final = "status"
RECORDED_AT: Final = "recorded_at"
SUPERSEDED_AT: Final = "superseded_at"
SUPERSEDED_BY: Final = "superseded_by"
SUPERSEDE_REASON: Final = "supersede_reason"
LIFECYCLE: Final[tuple[str, ...]] = (
    RUN,
    ENGINE,
    STATUS,
    RECORDED_AT,
    SUPERSEDED_AT,
    SUPERSEDED_BY,
    SUPERSEDE_REASON,
)
"""The bitemporal columns every answer table has (module docstring)."""
WHEN: Final[tuple[str, ...]] = (RECORDED_AT, SUPERSEDED_AT)
"""Columns that record *when*, excluded from content hashes of candidates (stamped at
publication, so a candidate's hash does not depend on its build time)."""


@dataclass(frozen=True)
class ReasonTemplate:
    """The ``supersede_reason`` texts of one run, one per kind of retirement.

    Each is a :meth:`str.format` template over ``verb`` (``restated``, or ``recalibrated``
    for a release that only maps confidences through calibrators), ``new_engine`` (the new
    release, ``name@version``) and ``tail``, itself a template over ``plan``, ``run_id`` and
    ``change``. The tail must name the run as ``run <run_id>:`` (:meth:`run_marker`): that is
    how a resumed build recognises the rows it retired.
    """

    superseded: str
    """A row replaced by a successor."""
    merged: str
    """A row retracted because its subjects are now one (both entities resolve to one)."""
    no_longer: str
    """A row retracted because the new version no longer produces it."""
    tail: str = "(plan {plan}, run {run_id}: {change})"

    def render(
        self, *, plan: str, run_id: str, change: str, new_engine: str, verb: str = "restated"
    ) -> dict[str, str]:
        """``{"superseded": ..., "merged": ..., "no_longer": ...}`` for one run."""
        tail = self.tail.format(plan=plan, run_id=run_id, change=change)
        values = {"verb": verb, "new_engine": new_engine, "tail": tail}
        return {
            "superseded": self.superseded.format(**values),
            "merged": self.merged.format(**values),
            "no_longer": self.no_longer.format(**values),
        }

    @staticmethod
    def run_marker(run_id: str) -> str:
        """The text every reason of ``run_id`` contains."""
        return f"run {run_id}:"


def _resolve(reference: str) -> Callable[..., Any]:
    """``package.module:function`` -> the function (imported when first needed)."""
    module, _, name = reference.partition(":")
    function = getattr(importlib.import_module(module), name, None)
    if not callable(function):
        raise UsageError(f"answer-table declaration: {reference} is not a function")
    return function  # type: ignore[no-any-return]


@dataclass(frozen=True)
class AnswerTable:
    """The declaration of one answer table (module docstring)."""

    name: str
    """The logical table (``conf/lakehouse.yaml``)."""
    key: str
    """The business key: at most one *current* row per key; a diff and a classification
    compare rows key by key. A row version's identity is ``(key, run_id)`` (:attr:`identity`)."""
    partition: str
    """The partition column a candidate rewrites partition by partition (``yyyy-MM`` months)."""
    content: tuple[str, ...]
    """What a row asserts (besides its key): a recomputed row with the same key and the same
    content keeps the serving row as it is (no churn). Engine label, run and lifecycle are not
    content."""
    compared: tuple[str, ...]
    """The columns the per-key diff compares (the key already fixes the others)."""
    kind: str
    """The column that types a row (the classification finds a successor among rows of the
    same kind)."""
    subjects: tuple[str, ...]
    """The entity columns a row is about, ordered (``subjects[0] < subjects[1]``): the scope
    recomputes rows involving a recomputed entity; a retired row's successor is the row of
    its subjects mapped to the new entities; the index files a row under each of them."""
    valid_from: str
    """When what a row asserts starts to hold: the plan's event range bounds it."""
    impact: str
    """The figure whose change the approver is shown one by one from
    ``checks.high_impact_confidence_delta`` on (review file)."""
    reasons: ReasonTemplate
    """The supersession reason template."""
    independent_check: str
    """``package.module:function`` of the check that recounts the table without the engines'
    code: ``(registry, setup, changes) -> Recount | str`` (the reason when there is none)."""
    index: str | None = None
    """``package.module:function`` rebuilding the table's derived index after its serving
    version changed: ``(registry, ledger, clock) -> IndexRefresh``; None: no index."""
    provisional: str | None = None
    """``package.module:function`` reconciling the table's provisional (streaming) view against
    what serves after a publication: ``(registry, ledger, *, run_id, recorded_at, policy) ->
    ProvisionalReconciliation | None``; None: the table has no provisional view."""
    description: str = field(default="", compare=False)

    @property
    def identity(self) -> tuple[str, ...]:
        """A row version's identity: ``(key, run_id)``."""
        return (self.key, RUN)

    @property
    def columns(self) -> tuple[str, ...]:
        """Every column the declaration names (each must be in the table's schema)."""
        named = (self.key, self.partition, *self.content, *self.compared, self.kind, *self.subjects)
        return tuple(dict.fromkeys((*named, self.valid_from, self.impact, *LIFECYCLE)))

    def recount(self) -> Callable[..., Any]:
        """The independent check (:attr:`independent_check`)."""
        return _resolve(self.independent_check)

    def index_refresh(self) -> Callable[..., Any] | None:
        """The index rebuild (:attr:`index`), or None."""
        return None if self.index is None else _resolve(self.index)

    def provisional_reconciliation(self) -> Callable[..., Any] | None:
        """The provisional view's reconciliation (:attr:`provisional`), or None."""
        return None if self.provisional is None else _resolve(self.provisional)


CORRELATIONS: Final = AnswerTable(
    name=TableName.CORRELATIONS.value,
    key="correlation_id",
    partition="valid_month",
    content=(
        "correlation_type",
        "entity_a",
        "entity_b",
        "valid_from",
        "valid_to",
        "valid_month",
        "confidence",
        "evidence",
    ),
    compared=("entity_a", "entity_b", "valid_from", "valid_to", "confidence", "evidence"),
    kind="correlation_type",
    subjects=("entity_a", "entity_b"),
    valid_from="valid_from",
    impact="confidence",
    reasons=ReasonTemplate(
        superseded="{verb} under {new_engine} {tail}",
        merged="retracted: both entities resolve to one entity under {new_engine} {tail}",
        no_longer="retracted: pair no longer correlated under {new_engine} {tail}",
    ),
    independent_check="workloads.replay.evaluate:independent_recount",
    index="workloads.gold.entity_index:refresh_entity_index",
    provisional="workloads.replay.provisional:reconcile_and_record",
    description="the bitemporal correlation store: one row version per (correlation_id, run_id)",
)
"""``gold.correlations``: the first answer table."""

ANSWER_TABLES: Final[Mapping[str, AnswerTable]] = {answer.name: answer for answer in (CORRELATIONS,)}
"""Every declared answer table, by table name."""


def unknown_answer(name: str) -> str:
    """Why ``name`` cannot be restated (one line)."""
    return f"{name!r} is not a declared answer table (declared: {', '.join(sorted(ANSWER_TABLES))})"


def answer_table(name: str) -> AnswerTable:
    """The declaration of ``name``; a table without one is refused in one line (exit 2)."""
    try:
        return ANSWER_TABLES[name]
    except KeyError:
        raise UsageError(unknown_answer(name)) from None
