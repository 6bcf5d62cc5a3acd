"""Protecting the versions the ledger points to from the formats' own maintenance.

Platform teams expire Iceberg snapshots and VACUUM Delta tables on a schedule. The ledger
points at exact versions: what a publication made current, what its rollback returns to,
what an open replay pinned, what ``asof`` route (b) reads. :func:`required_protections`
derives that list from the ledger alone (a pure function); :func:`protect` makes the
formats keep it:

* **Iceberg**: one tag per protected version, named from the ledger
  (``lh-<reason>-<run id>-<snapshot id>``), with a retention that ends when the version's
  window ends (``RETAIN n DAYS`` counts from the snapshot's commit). ``expire_snapshots``
  keeps tagged snapshots by design, whatever ``older_than`` it is given, and drops a tag
  whose retention has passed; :func:`protect` drops the tags the ledger no longer needs
  (the pins of a run that finished). The table property
  ``history.expire.max-snapshot-age-ms`` is set to the longest window, so an expiry with
  default settings keeps that much of every snapshot, tagged or not.
* **Delta** has no tags. ``delta.deletedFileRetentionDuration`` and
  ``delta.logRetentionDuration`` are set to the longest window: a plain ``VACUUM`` keeps
  that much, and Delta's retention check refuses a shorter ``RETAIN`` unless someone turns
  the check off (``spark.databricks.delta.retentionDurationCheck.enabled = false``). That
  case cannot be prevented; :func:`check_history` detects it.

Windows are measured on the ledger's clock; a tag's retention is the time left in its
window plus the snapshot's age, so a history recorded with a simulated clock is protected
as long as one recorded live.
"""

from __future__ import annotations

import logging
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Final

from lakehouse.errors import ReplayError
from ledger import LedgerRecord
from ledger.clock import Clock
from ledger.entries import LedgerEntryBase, RunStarted
from ledger.reader import LedgerReader
from ledger.timeline import PUBLICATION, purged_by_erasure, timeline
from workloads.policies import ProtectionPolicy, load_protection_policy
from workloads.replay.state import REPLAY_COMMAND, RESTARTABLE, RunState, run_state
from workloads.vocabulary import ProtectionReason

if TYPE_CHECKING:
    from lakehouse.tables import Table, TableRegistry

log = logging.getLogger(__name__)

TAG_PREFIX: Final = "lh-"
"""Tags this toolkit owns start with this; other tags are never touched."""
DAY: Final = timedelta(days=1)


@dataclass(frozen=True)
class Protection:
    """One version the ledger needs readable, why, and until when (ledger clock)."""

    table: str
    version: int
    reason: ProtectionReason
    run_id: str
    until: datetime | None
    """The end of the version's window; None while the run that pinned it can resume."""
    rule: str
    """The policy that sets the window, for messages (``protection.audit_window_days = 90``)."""

    @property
    def tag(self) -> str:
        """The Iceberg tag that keeps this version: derived from the ledger, stable across runs."""
        run = re.sub(r"[^A-Za-z0-9_-]", "_", self.run_id)
        return f"{TAG_PREFIX}{self.reason.value}-{run}-{self.version}"


@dataclass(frozen=True)
class TableProtection:
    """What :func:`protect` did on one table."""

    table: str
    format: str
    protected: int
    """How many protections name a version of this table."""
    tags_created: tuple[str, ...] = ()
    """Tags created or extended now."""
    tags_dropped: tuple[str, ...] = ()
    """Tags of ours the ledger no longer needs."""
    properties: Mapping[str, str] = field(default_factory=dict)
    """Retention properties set now (empty when they already covered the window)."""
    gone: tuple[int, ...] = ()
    """Protected versions no longer in the table's metadata (they cannot be tagged)."""


@dataclass(frozen=True)
class ProtectionReport:
    """The protections the ledger asks for and what :func:`protect` did for each table."""

    history_days: int
    protections: tuple[Protection, ...]
    tables: tuple[TableProtection, ...]
    dry_run: bool = False


@dataclass(frozen=True)
class GoneVersion:
    """A protected version that can no longer be read, and what the table says removed it."""

    table: str
    version: int
    reasons: tuple[str, ...]
    """``reason run_id (rule)`` of every protection it had."""
    note: str


@dataclass(frozen=True)
class HistoryCheck:
    """``ledger verify --history``: every protected version, checked readable."""

    checked: int
    gone: tuple[GoneVersion, ...]
    purged: tuple[GoneVersion, ...] = ()
    """Protected versions an erasure purged on purpose (its certificate says so): accounted for."""

    @property
    def ok(self) -> bool:
        return not self.gone


def replay_states(records: Sequence[LedgerRecord]) -> dict[str, RunState]:
    """The state of every replay run in the records, by run id (oldest first)."""
    entries: dict[str, list[LedgerEntryBase]] = defaultdict(list)
    replays: list[str] = []
    for record in sorted(records, key=lambda r: r.seq):
        if record.run_id is None:
            continue
        entry = record.entry()
        entries[record.run_id].append(entry)
        if isinstance(entry, RunStarted) and entry.command == REPLAY_COMMAND:
            replays.append(record.run_id)
    states = {}
    for run_id in dict.fromkeys(replays):
        try:
            states[run_id] = run_state(run_id, entries[run_id])
        except ReplayError as exc:  # an unreadable run is reported by its own commands
            log.warning("run %s left out of the protections: %s", run_id, exc)
    return states


def rollback_window(state: RunState) -> tuple[timedelta, str]:
    """A run's rollback window and the rule that sets it, for messages."""
    days = state.plan.publication.rollback_window_days
    return timedelta(days=days), f"plan {state.plan.plan}: publication.rollback_window_days = {days}"


def required_protections(
    records: Sequence[LedgerRecord], policy: ProtectionPolicy, now: datetime
) -> list[Protection]:
    """Every version the ledger needs readable at ``now`` (a pure function of the records).

    The tables are those replays read or publish (answer tables and pinned inputs). For
    each: every version readers were served, until ``audit_window_days`` after it stopped
    being served; a published one at least for its plan's rollback window; the version
    before a live publication for that window (its rollback target); and every input a
    resumable replay pinned, for as long as it can resume.
    """
    return _required(replay_states(records), records, policy, now)


def _required(
    states: Mapping[str, RunState], records: Sequence[LedgerRecord], policy: ProtectionPolicy, now: datetime
) -> list[Protection]:
    tables = sorted({name for s in states.values() for name in (*s.pins, s.table)})
    audit = timedelta(days=policy.audit_window_days)
    audit_rule = f"protection.audit_window_days = {policy.audit_window_days}"
    found: list[Protection] = []
    for table in tables:
        epochs = timeline(records, table).epochs
        for index, epoch in enumerate(epochs):
            end = epochs[index + 1].effective_at if index + 1 < len(epochs) else now
            until, rule = end + audit, audit_rule
            reason = ProtectionReason.SERVED
            if epoch.kind == PUBLICATION:
                reason = ProtectionReason.PUBLISHED
                if epoch.run_id in states:
                    window, window_rule = rollback_window(states[epoch.run_id])
                    if epoch.effective_at + window > until:
                        until, rule = epoch.effective_at + window, window_rule
            if until >= now:
                found.append(Protection(table, epoch.version, reason, epoch.run_id, until, rule))
    for run_id, state in states.items():
        live = state.live_publication
        previous = live.previous.get(state.table) if live is not None else None
        if live is not None and previous is not None:
            window, rule = rollback_window(state)
            if live.effective_at + window >= now:
                reason = ProtectionReason.ROLLBACK_TARGET
                found.append(
                    Protection(state.table, previous, reason, run_id, live.effective_at + window, rule)
                )
        if state.status not in RESTARTABLE and not state.publications:
            rule = f"run {run_id} can still resume ({state.status})"
            found.extend(
                Protection(table, version, ProtectionReason.PINNED, run_id, None, rule)
                for table, version in sorted(state.pins.items())
            )
    return found


def history_days(policy: ProtectionPolicy, windows: Iterable[int] = ()) -> int:
    """The longest window: how much history the formats' default maintenance must keep."""
    return max([policy.audit_window_days, *windows])


_KEPT: dict[str, int] = {}
"""Table location -> days of history this process has seen covered (tables are created
covering the configured ``history_days``; this only repairs older or changed ones)."""


def keep_history(
    registry: TableRegistry, tables: Iterable[str], days: int, *, new_versions: bool = False
) -> dict[str, dict[str, str]]:
    """Set each existing table's retention properties to cover ``days``; returns what changed.

    Where a property change is a new version (Delta) it is only checked, and a shortfall
    logged, unless ``new_versions``: a new version would move serving under a pinned replay
    or a live publication (whose rollback then refuses). Tables are created covering the
    configured ``history_days``; ``lakehouse protect`` raises a Delta table's. Checked once
    per process.
    """
    changed = {}
    for name in sorted(set(tables)):
        table = registry.get(name)
        if _KEPT.get(table.location, 0) >= days or not table.exists():
            continue
        if table.capabilities.property_change_is_a_version and not new_versions:
            kept = table.history_retention_days()
            if kept is None or kept < days:
                log.warning(
                    "%s keeps %s days of history under VACUUM, fewer than the %d its protections need; "
                    "lakehouse protect raises it (a metadata commit: a new version)",
                    name,
                    "the default" if kept is None else f"{kept:g}",
                    days,
                )
            _KEPT[table.location] = days
            continue
        done = table.keep_history(days)
        _KEPT[table.location] = days
        if done:
            log.info("%s now keeps %d days of history: %s", name, days, done)
            changed[name] = done
    return changed


def protect(
    registry: TableRegistry,
    records: Sequence[LedgerRecord],
    policy: ProtectionPolicy,
    now: datetime,
    *,
    dry_run: bool = False,
    properties: bool = True,
) -> ProtectionReport:
    """Make the formats keep every version :func:`required_protections` names.

    Tags (Iceberg) are created, extended or dropped to match; with ``properties`` the
    tables' retention properties are set to the longest window too (see :func:`keep_history`
    for when that is safe). ``dry_run`` reports what would change and changes nothing.
    """
    states = replay_states(records)
    wanted = _required(states, records, policy, now)
    days = history_days(policy, [rollback_window(s)[0].days for s in states.values()])
    by_table: dict[str, list[Protection]] = defaultdict(list)
    for item in wanted:
        by_table[item.table].append(item)
    done = []
    for name in sorted(by_table):
        if name not in registry.config.tables:
            log.warning("%s is in the ledger but no longer configured: its versions are not protected", name)
            continue
        table = registry.get(name)
        if not table.exists():
            continue
        changed = table.keep_history(days) if properties and not dry_run else {}  # an explicit request
        if table.capabilities.version_tags:
            done.append(_sync_tags(table, by_table[name], now, changed, dry_run=dry_run))
        else:
            done.append(TableProtection(name, table.format.value, len(by_table[name]), properties=changed))
    report = ProtectionReport(days, tuple(wanted), tuple(done), dry_run)
    log.info(
        "protections: %d versions of %d tables; %d tags created, %d dropped%s",
        len(wanted),
        len(done),
        sum(len(t.tags_created) for t in done),
        sum(len(t.tags_dropped) for t in done),
        " (dry run)" if dry_run else "",
    )
    return report


def sync_protections(
    registry: TableRegistry, clock: Clock, policy: ProtectionPolicy | None = None
) -> ProtectionReport | None:
    """Make the tags follow the ledger after a step it recorded (a replay's start, a publication,
    a rollback); table properties are left alone (see :func:`keep_history`).

    The step is committed already, so a failure here is logged, never raised: the step stays
    done, and ``lakehouse protect`` (or the next step) brings the tags up to date.
    """
    try:
        records = LedgerReader.for_registry(registry).records()
        return protect(registry, records, policy or load_protection_policy(), clock.now(), properties=False)
    except Exception as exc:
        log.warning("protections not updated (%s: %s); run lakehouse protect", type(exc).__name__, exc)
        return None


def _retain_days(item: Protection, now: datetime, committed: datetime) -> int | None:
    """Days after the snapshot's commit the tag must last: the time left in the window (ledger
    clock) plus the snapshot's age (wall clock), rounded up."""
    if item.until is None:
        return None
    left = (item.until - now) + (datetime.now(UTC) - committed)
    return max(1, math.ceil(left / DAY))


def _sync_tags(
    table: Table, wanted: Sequence[Protection], now: datetime, changed: Mapping[str, str], *, dry_run: bool
) -> TableProtection:
    existing = {t.name: t for t in table.tags() if t.name.startswith(TAG_PREFIX)}
    times = table.version_times()
    created, gone = [], set()
    for item in wanted:
        if item.version not in times:
            gone.add(item.version)
            continue
        days = _retain_days(item, now, times[item.version])
        have = existing.get(item.tag)
        if have is not None and have.version == item.version and _covers(have.retain_days, days):
            continue
        if not dry_run:
            table.tag_version(item.tag, item.version, days)
        created.append(item.tag)
    names = {item.tag for item in wanted}
    dropped = sorted(name for name in existing if name not in names)
    if not dry_run:
        for name in dropped:
            table.drop_tag(name)
    return TableProtection(
        table.name,
        table.format.value,
        len(wanted),
        tuple(created),
        tuple(dropped),
        changed,
        tuple(sorted(gone)),
    )


def _covers(have: float | None, wanted: int | None) -> bool:
    if have is None:
        return wanted is None
    return wanted is not None and have >= wanted


def check_history(
    registry: TableRegistry, records: Sequence[LedgerRecord], policy: ProtectionPolicy, now: datetime
) -> HistoryCheck:
    """Check that every version the ledger still needs can be read; name what removed the others."""
    reasons: dict[tuple[str, int], list[str]] = defaultdict(list)
    for item in required_protections(records, policy, now):
        reasons[(item.table, item.version)].append(f"{item.reason.value} {item.run_id} ({item.rule})")
    erased = purged_by_erasure(records)
    gone, purged = [], []
    for (name, version), why in sorted(reasons.items()):
        if (name, version) in erased:
            note = f"history purged by erasure certificate {erased[(name, version)]}"
            purged.append(GoneVersion(name, version, tuple(why), note))
            continue
        if name not in registry.config.tables:
            gone.append(GoneVersion(name, version, tuple(why), f"{name} is no longer configured"))
            continue
        table = registry.get(name)
        if table.exists() and table.readable(version):
            continue
        note = table.removal_note(version) if table.exists() else f"{name} does not exist any more"
        gone.append(GoneVersion(name, version, tuple(why), note))
    log.info("history check: %d protected versions, %d gone, %d purged", len(reasons), len(gone), len(purged))
    return HistoryCheck(len(reasons), tuple(gone), tuple(purged))
