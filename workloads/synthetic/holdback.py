"""A feed that stops delivering, on purpose: its last deliveries held back, then delivered late.

A generated history has one folder per feed and delivery date (``<history>/<feed>/<date>/``).
:func:`hold_back` moves a feed's newest delivery folders aside, to
``<history>/_held/<feed>/<date>/``, where no ingest looks (it reads ``<history>/<feed>/``), so
the feed looks stalled to ``lakehouse progress`` while the others deliver. :func:`release_held`
moves them back: the partner delivers late, and the next ingest of the feed takes them. The
files themselves are never changed, so the ground truth still holds once they are delivered.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Final

from workloads.vocabulary import FEEDS

log = logging.getLogger(__name__)

HELD_DIR: Final = "_held"
"""Beside the feeds in a history folder: the deliveries held back, one folder per feed."""


@dataclass(frozen=True)
class HeldFeed:
    """A feed whose newest deliveries were held back."""

    feed: str
    deliveries: tuple[str, ...]
    """The delivery dates held back (their folder names), oldest first."""
    last_delivered: date | None
    """The newest delivery left in place (None: every delivery was held)."""
    newest: date
    """The feed's newest delivery (held): when the partner should last have delivered."""


def delivery_dates(history: Path, feed: str) -> list[date]:
    """The dates of a feed's delivery folders, oldest first (other entries are ignored)."""
    folder = history / feed
    found = []
    for entry in folder.iterdir() if folder.is_dir() else ():
        try:
            found.append(date.fromisoformat(entry.name))
        except ValueError:
            continue
    return sorted(found)


def hold_back(history: Path, feed: str, days: int) -> HeldFeed:
    """Move ``feed``'s delivery folders of its last ``days`` days (counted back from its newest
    delivery) to ``<history>/_held/<feed>/``; refuses an unknown feed or one with no delivery."""
    if feed not in {f.value for f in FEEDS}:
        raise ValueError(f"no feed {feed!r}; feeds: {', '.join(f.value for f in FEEDS)}")
    if days < 1:
        raise ValueError(f"hold back at least one day, not {days}")
    dates = delivery_dates(history, feed)
    if not dates:
        raise ValueError(f"{history / feed}: no delivery folders (<YYYY-MM-DD>/) to hold back")
    first_held = dates[-1] - timedelta(days=days - 1)
    target = history / HELD_DIR / feed
    held = [d for d in dates if d >= first_held]
    target.mkdir(parents=True, exist_ok=True)
    for day in held:
        (history / feed / day.isoformat()).rename(target / day.isoformat())
    kept = [d for d in dates if d < first_held]
    log.info("held back %d deliveries of %s (from %s)", len(held), feed, first_held)
    return HeldFeed(
        feed=feed,
        deliveries=tuple(d.isoformat() for d in held),
        last_delivered=kept[-1] if kept else None,
        newest=dates[-1],
    )


def release_held(history: Path, feed: str) -> tuple[str, ...]:
    """Move ``feed``'s held deliveries back into place; returns their dates (none held: ())."""
    source = history / HELD_DIR / feed
    released = [d.isoformat() for d in delivery_dates(history / HELD_DIR, feed)]
    for name in released:
        (source / name).rename(history / feed / name)
    if source.is_dir() and not any(source.iterdir()):
        source.rmdir()
    held_root = history / HELD_DIR
    if held_root.is_dir() and not any(held_root.iterdir()):
        held_root.rmdir()
    log.info("released %d held deliveries of %s", len(released), feed)
    return tuple(released)
