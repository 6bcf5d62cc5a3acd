"""Lateness and fates: the lateness policy of each feed, and where every row ends up.

**The policy** (``conf/policies.yaml``, section ``lateness``). A fact is on time while
``ingest - event_time <= allowed_lateness_days``. A late fact for a period (UTC month)
that is still open is processed normally; the period closes ``period_close_grace_days``
after the first day of the next month, and a late fact for a closed period gets the
feed's ``closed_period_action``: ``reopen`` (row in its event date,
``lateness='reopen'``, the period reported as restated), ``adjust``
(``lateness='adjustment'``, ``accounting_date`` = ingest date) or ``hold`` (the fact goes
to ``ops.exceptions`` with status ``awaiting_approval``, not into Silver, and does not
compete with the revisions already in Silver). ``accounting_date`` is the event date
otherwise. Dates and months are UTC.

**Approved exceptions.** A held fact that someone approved (``lakehouse exceptions
approve``) is an adjustment from then on: ``lateness='adjustment'``, ``accounting_date`` =
the approval's date, ``event_time`` unchanged. It then competes like any other fact.
A rejected (or still waiting) one stays held.

**Fates** (:func:`assign_fates`), per ``(domain, event_id)``: a row with a quarantine
reason is ``quarantine``. Copies whose raw line is byte-identical are one fact; the
earliest copy (ingest time, then manifest id, file, line) stands for it and the others
are ``duplicate``. A held fact is ``exceptions``. Among the remaining distinct facts, the
winner has the highest ``revision``; ties go to the latest ingest time, then the largest
manifest id, file and line. The winner is ``silver``, the others are ``corrected``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from lakehouse.errors import ConfigError
from lakehouse.models import StrictModel, read_yaml_mapping, validate_file
from workloads.policies import DEFAULT_POLICY_PATH
from workloads.silver.columns import COORDINATES, case_when
from workloads.silver.exceptions import Approval
from workloads.vocabulary import FEEDS, ClosedPeriodAction, Fate, Lateness

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "DEFAULT_POLICY_PATH",
    "LatenessRule",
    "admit_approved",
    "assign_fates",
    "check_policy",
    "classify_lateness",
    "load_lateness_policy",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LatenessRule:
    """One feed's lateness policy (see conf/policies.yaml for the semantics)."""

    allowed_lateness_days: int
    period_close_grace_days: int
    closed_period_action: ClosedPeriodAction


class _RuleEntry(StrictModel):
    """One feed's entry under ``lateness:`` as written in the file."""

    allowed_lateness_days: int = Field(ge=0, strict=True)
    period_close_grace_days: int = Field(ge=0, strict=True)
    closed_period_action: ClosedPeriodAction


class _LatenessSection(StrictModel):
    """The ``lateness:`` section, one entry per feed (other sections are not read here)."""

    lateness: dict[str, _RuleEntry]


def load_lateness_policy(path: Path = DEFAULT_POLICY_PATH) -> dict[str, LatenessRule]:
    """Read the ``lateness:`` section of a policies YAML file into one rule per feed.

    Raises :class:`~lakehouse.errors.ConfigError` (a ValueError) naming the file and the
    key (``lateness.orders.allowed_lateness_days``) when a feed is missing, a key is
    unknown or a value has the wrong type, so a broken policy fails here rather than deep
    inside a build.
    """
    document = read_yaml_mapping(path, what="policy file")
    if not isinstance(document.get("lateness"), dict):
        raise ConfigError(f"{path}: no 'lateness' mapping")
    section = validate_file(_LatenessSection, path, {"lateness": document["lateness"]})
    policy = {
        str(feed): LatenessRule(
            entry.allowed_lateness_days, entry.period_close_grace_days, entry.closed_period_action
        )
        for feed, entry in section.lateness.items()
    }
    try:
        check_policy(policy)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    log.debug("lateness policy from %s: %s", path, policy)
    return policy


def check_policy(policy: Mapping[str, LatenessRule]) -> None:
    """Refuse a policy that has no rule for some feed."""
    missing = [feed for feed in FEEDS if feed not in policy]
    if missing:
        raise ConfigError(f"lateness policy has no rule for feed(s): {', '.join(missing)}")


def classify_lateness(events: DataFrame, policy: Mapping[str, LatenessRule]) -> DataFrame:
    """Add ``event_date``, ``event_month``, ``ingest_date``, ``lateness``,
    ``accounting_date`` and ``_period_closes``: the day at whose 00:00Z the event's month
    closes (the first of the next month plus the grace days); later ingest times are late
    for a closed period.

    Computed in whole seconds and UTC days, independent of the session time zone.
    """
    from pyspark.sql import functions as F

    domain = F.col("domain")
    feeds = sorted({str(d) for d in policy})

    def per_feed(pick: Callable[[LatenessRule], Any]) -> Column:
        return case_when([(domain == feed, F.lit(pick(policy[feed]))) for feed in feeds])

    event_seconds = F.unix_seconds(F.col("event_time"))
    ingest_seconds = F.unix_seconds(F.col("_ingest_time"))
    event_date = F.date_from_unix_date(F.floor(event_seconds / 86400).cast("int"))
    ingest_date = F.date_from_unix_date(F.floor(ingest_seconds / 86400).cast("int"))
    closes = F.date_add(
        F.add_months(F.trunc(event_date, "month"), 1), per_feed(lambda r: r.period_close_grace_days)
    )
    on_time = ingest_seconds - event_seconds <= per_feed(lambda r: r.allowed_lateness_days * 86400)
    closed = ingest_seconds > F.unix_date(closes).cast("bigint") * 86400
    action = per_feed(lambda r: ClosedPeriodAction(r.closed_period_action).lateness)
    lateness = F.when(on_time, F.lit(Lateness.ON_TIME)).when(~closed, F.lit(Lateness.LATE)).otherwise(action)
    return (
        events.withColumn("event_date", event_date)
        .withColumn("event_month", F.date_format(F.col("event_date"), "yyyy-MM"))
        .withColumn("ingest_date", ingest_date)
        .withColumn("_period_closes", closes)
        .withColumn("lateness", F.when(F.col("event_time").isNotNull(), lateness))
        .withColumn(
            "accounting_date",
            F.when(F.col("lateness") == Lateness.ADJUSTMENT, F.col("ingest_date")).otherwise(
                F.col("event_date")
            ),
        )
    )


def admit_approved(timed: DataFrame, approvals: Sequence[Approval]) -> DataFrame:
    """Held facts whose Bronze coordinates are among ``approvals`` become adjustments
    accounted on the approval's date; every other row is unchanged.

    A literal map from coordinates to approval date, not a join: the queue is small, and a
    join above these projections makes Spark's constraint inference explode.
    """
    from pyspark.sql import functions as F

    if not approvals:
        return timed
    dates = {(a.manifest_id, a.source_file, a.line): a.approved_on for a in approvals}
    entries = [
        part
        for (manifest, file, line), on in sorted(dates.items())
        for part in (F.lit(f"{manifest}|{file}|{line}"), F.lit(on))
    ]
    key = F.concat_ws("|", *(F.col(c).cast("string") for c in COORDINATES))
    approved_on = F.element_at(F.create_map(*entries), key)
    admitted = (F.col("lateness") == Lateness.HOLD) & approved_on.isNotNull()
    return timed.withColumns(
        {
            "accounting_date": F.when(admitted, approved_on).otherwise(F.col("accounting_date")),
            "lateness": F.when(admitted, F.lit(Lateness.ADJUSTMENT)).otherwise(F.col("lateness")),
        }
    )


def assign_fates(
    canonical: DataFrame, policy: Mapping[str, LatenessRule], approvals: Sequence[Approval] = ()
) -> DataFrame:
    """Add ``_fate`` (see the module docstring for the rules) and the lateness columns.

    ``approvals`` (see :func:`admit_approved`) names the held facts someone approved; they
    enter as adjustments instead of staying ``exceptions``. ``_raw`` is kept only on
    quarantined rows (the only place it is written again), which keeps the cached frame
    small.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    timed = admit_approved(classify_lateness(canonical, policy), approvals).repartition("domain", "event_id")
    valid = F.col("_reason").isNull()
    # Quarantined rows have a null event_id: they share one window partition per domain
    # and take no part in the ranking below (their fate is decided first).
    first_copy = Window.partitionBy("domain", "event_id", "_raw").orderBy(
        "_ingest_time", "_manifest_id", "_source_file", "_line"
    )
    copies = timed.withColumn("_copy", F.row_number().over(first_copy))
    contender = valid & (F.col("_copy") == 1) & (F.col("lateness") != Lateness.HOLD)
    winner = Window.partitionBy("domain", "event_id").orderBy(
        contender.desc(),
        F.col("revision").desc(),
        F.col("_ingest_time").desc(),
        F.col("_manifest_id").desc(),
        F.col("_source_file").desc(),
        F.col("_line").desc(),
    )
    fate = (
        F.when(~valid, F.lit(Fate.QUARANTINE))
        .when(F.col("_copy") > 1, F.lit(Fate.DUPLICATE))
        .when(F.col("lateness") == Lateness.HOLD, F.lit(Fate.EXCEPTIONS))
        .when(F.row_number().over(winner) == 1, F.lit(Fate.SILVER))
        .otherwise(F.lit(Fate.CORRECTED))
    )
    fated = copies.withColumn("_fate", fate).drop("_copy")
    return fated.withColumn("_raw", F.when(F.col("_fate") == Fate.QUARANTINE, F.col("_raw")))
