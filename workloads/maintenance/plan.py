"""What ``lakehouse maintain`` may do to one table: a pure function of facts gathered before.

Two actions, each refused where it would break something the ledger or an operator relies on:

* **Expire** history older than the zone's retention (``retention.<zone>_days``). Never while
  a legal hold is placed: a hold names its subject only by a salted digest, so which tables
  hold the subject cannot be told without a scan, and an old version may be the only place
  its rows still exist. On Delta, never while a candidate is open (its shadow table lists
  serving's files, which ``VACUUM`` does not see), and never past the oldest version the
  ledger protects (``VACUUM`` has no tags: its retention is moved back to that version's
  commit). Iceberg keeps protected versions by their tags, and candidates' branches by itself.
* **Compact** the current version's small files (``maintenance.compact_min_small_files`` files
  under 3/4 of the table's target file size). Never while a candidate is open (its publication
  would then have to restage onto a moved serving version) or inside a publication's rollback
  window (a rollback refuses once serving moved after the publication).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from workloads.policies import MaintenancePolicy, RetentionPolicy
from workloads.vocabulary import ProtectionReason


@dataclass(frozen=True)
class Guard:
    """A protection, candidate or hold that keeps part of a table, as the decision sees it."""

    version: int | None
    """The version it keeps (None: the whole table, e.g. a hold)."""
    until: datetime | None
    reason: ProtectionReason
    what: str
    """For messages: ``published by run R (plan P: publication.rollback_window_days = 30)``."""


@dataclass(frozen=True)
class TableFacts:
    """One table as it stands before maintenance (read at the I/O edge)."""

    name: str
    zone: str
    format: str
    version_tags: bool
    """The format keeps tagged versions through expiry (Iceberg), so protections need no
    shorter retention."""
    versions: Mapping[int, datetime]
    """Every version in the table's metadata, with its commit time (wall clock)."""
    candidates: tuple[str, ...]
    small_files: int
    live_files: int
    owner: str = ""
    """Who answers for the table's layout (the table's declared owner, or the policy's)."""
    target_file_bytes: int = 0
    """The data file size compaction writes for this table."""


@dataclass(frozen=True)
class TableDecision:
    """What to do to one table, and what is kept and why."""

    table: str
    expire_before: datetime | None
    compact: bool
    kept: tuple[str, ...]


def decide(
    facts: TableFacts,
    guards: Sequence[Guard],
    holds: Sequence[str],
    retention: RetentionPolicy,
    policy: MaintenancePolicy,
    now: datetime,
) -> TableDecision:
    """Decide the table's maintenance at ``now`` (wall clock, like the versions' commit times).

    ``guards`` are the ledger's protections of this table; ``holds`` the open legal holds, as
    ``<id> (<by>)`` text.
    """
    kept: list[str] = []
    cutoff = now - timedelta(days=retention.days(facts.zone))
    expire_before: datetime | None = cutoff
    old = sorted(v for v, t in facts.versions.items() if t < cutoff)
    if not old:
        expire_before = None
    elif holds:
        expire_before = None
        kept.append(f"all history: legal hold {', '.join(holds)} is placed")
    elif facts.candidates and not facts.version_tags:
        expire_before = None
        kept.append(
            f"all history: open candidate {', '.join(facts.candidates)} lists serving's files, "
            f"which VACUUM does not see"
        )
    else:
        protected = sorted(
            (g for g in guards if g.version is not None and g.version in old), key=lambda g: g.version or 0
        )
        for guard in protected:
            kept.append(f"version {guard.version}: {guard.what}")
        if protected and not facts.version_tags:
            oldest = facts.versions[protected[0].version or 0]
            expire_before = min(cutoff, oldest)
    compact = facts.small_files >= policy.compact_min_small_files
    if compact and facts.candidates:
        compact = False
        kept.append(f"small files: open candidate {', '.join(facts.candidates)} publishes onto this version")
    windows = [g for g in guards if g.reason is ProtectionReason.ROLLBACK_TARGET]
    if compact and windows:
        compact = False
        kept.extend(f"small files: {g.what}; a rollback refuses once serving moved" for g in windows)
    return TableDecision(facts.name, expire_before, compact, tuple(kept))
