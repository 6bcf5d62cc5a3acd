"""The operational view: how far each source has arrived (``lakehouse progress``).

Seed 003's rule: a recent job time does not prove that all data arrived, and one active
source must not hide a stopped one. So progress is reported per feed, from what Bronze
actually holds, never from when a job last ran:

* **last event time**: the newest business event of the feed that was delivered by ``at``;
* **last ingest time**: the newest delivery (its manifest's ingest time) by ``at``;
* **watermark**: the last event time minus the feed's ``allowed_lateness_days`` (an event
  older than the watermark that still arrives is late, by the lateness policy Silver applies);
* **lag**: ``at`` minus the last event time (how stale the feed's picture of the world is),
  and ``at`` minus the last ingest time (how long since it last delivered);
* **rows in the last interval**: lines delivered in ``(at - interval, at]``;
* **stalled**: no delivery for longer than the feed's expected cadence times
  ``stall_factor`` (``progress:`` in ``conf/policies.yaml``), judged per feed, so a feed
  that stopped is flagged while the others deliver.

:func:`source_progress` is pure; :func:`read_feed_stats` is the one Spark read per feed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Final

from pydantic import Field

from lakehouse.errors import ConfigError
from lakehouse.models import StrictModel
from ledger.clock import utc
from workloads.policies import DEFAULT_POLICY_PATH, load_section
from workloads.silver.lateness import LatenessRule
from workloads.vocabulary import FEEDS, Feed

if TYPE_CHECKING:
    from lakehouse.tables import TableRegistry

log = logging.getLogger(__name__)

ACTIVE: Final = "active"
STALLED: Final = "stalled"
NEVER_DELIVERED: Final = "never delivered"


class FeedCadence(StrictModel):
    """How often a feed is expected to deliver."""

    cadence_hours: float = Field(gt=0)


class ProgressPolicy(StrictModel):
    """The ``progress:`` section: expected cadence per feed and when a feed counts as stalled."""

    interval_hours: float = Field(gt=0)
    """The window of "rows in the last interval"."""
    stall_factor: float = Field(ge=1)
    """A feed with no delivery for ``stall_factor`` times its cadence is stalled."""
    feeds: dict[Feed, FeedCadence]


def load_progress_policy(path: Path = DEFAULT_POLICY_PATH) -> ProgressPolicy:
    """Read the ``progress:`` section (one-line errors name the key; every feed is required)."""
    policy = load_section(path, "progress", ProgressPolicy, "progress.feeds.orders.cadence_hours")
    missing = [feed.value for feed in FEEDS if feed not in policy.feeds]
    if missing:
        raise ConfigError(f"{path}: progress.feeds has no cadence for {', '.join(missing)}")
    return policy


@dataclass(frozen=True)
class FeedStats:
    """What Bronze holds of one feed, as delivered by ``at`` (read at the I/O edge)."""

    feed: str
    rows: int
    rows_in_interval: int
    last_event_time: datetime | None
    last_ingest_time: datetime | None


@dataclass(frozen=True)
class SourceProgress:
    """One feed's progress at ``at``."""

    feed: str
    status: str
    """``active``, ``stalled`` or ``never delivered``."""
    rows: int
    rows_in_interval: int
    last_event_time: datetime | None
    last_ingest_time: datetime | None
    watermark: datetime | None
    event_lag_hours: float | None
    ingest_lag_hours: float | None
    stalled_after_hours: float
    """The feed's cadence times the stall factor: the longest silence that is still normal."""


@dataclass(frozen=True)
class ProgressReport:
    """Every feed's progress at ``at``, stalled feeds named."""

    at: datetime
    interval_hours: float
    sources: tuple[SourceProgress, ...]

    @property
    def stalled(self) -> tuple[str, ...]:
        return tuple(s.feed for s in self.sources if s.status != ACTIVE)


def _hours(delta: timedelta) -> float:
    return round(delta.total_seconds() / 3600, 2)


def source_progress(
    stats: Sequence[FeedStats],
    lateness: Mapping[str, LatenessRule],
    policy: ProgressPolicy,
    at: datetime,
) -> ProgressReport:
    """Each feed's progress at ``at`` from its Bronze figures (a pure function)."""
    sources = []
    for item in stats:
        limit = policy.feeds[Feed(item.feed)].cadence_hours * policy.stall_factor
        last_event, last_ingest = item.last_event_time, item.last_ingest_time
        status = NEVER_DELIVERED
        if last_ingest is not None:
            status = STALLED if at - last_ingest > timedelta(hours=limit) else ACTIVE
        allowed = timedelta(days=lateness[item.feed].allowed_lateness_days)
        sources.append(
            SourceProgress(
                feed=item.feed,
                status=status,
                rows=item.rows,
                rows_in_interval=item.rows_in_interval,
                last_event_time=last_event,
                last_ingest_time=last_ingest,
                watermark=last_event - allowed if last_event is not None else None,
                event_lag_hours=_hours(at - last_event) if last_event is not None else None,
                ingest_lag_hours=_hours(at - last_ingest) if last_ingest is not None else None,
                stalled_after_hours=limit,
            )
        )
    report = ProgressReport(at, policy.interval_hours, tuple(sources))
    if report.stalled:
        log.warning("feeds not delivering at %s: %s", at.isoformat(), ", ".join(report.stalled))
    return report


def read_feed_stats(registry: TableRegistry, at: datetime, interval_hours: float) -> list[FeedStats]:
    """One aggregation per Bronze table over the lines delivered by ``at`` (ingest time)."""
    from pyspark.sql import functions as F

    at = utc(at)
    since = at - timedelta(hours=interval_hours)
    found = []
    for feed in FEEDS:
        table = registry.get(feed.bronze_table)
        if not table.exists() or table.current_version() is None:
            found.append(FeedStats(feed.value, 0, 0, None, None))
            continue
        known = table.read().where(F.col("_ingest_time") <= F.lit(at))
        row = known.agg(
            F.count(F.lit(1)).alias("rows"),
            F.count(F.when(F.col("_ingest_time") > F.lit(since), True)).alias("recent"),
            F.max("_event_time").alias("last_event"),
            F.max("_ingest_time").alias("last_ingest"),
        ).collect()[0]
        found.append(
            FeedStats(
                feed.value,
                int(row["rows"]),
                int(row["recent"]),
                utc(row["last_event"]) if row["last_event"] is not None else None,
                utc(row["last_ingest"]) if row["last_ingest"] is not None else None,
            )
        )
    return found
