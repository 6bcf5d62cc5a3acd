"""Delivery: lines parked until their delivery date, then written as that date's files,
with the ground-truth accounting (fates per feed, faults with their file and line).

A delivery folder is ``<feed>/<YYYY-MM-DD>/`` with one or two files; lines are sorted by
event time, a CSV file starts with its header, and a truncated file ends mid-record.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from workloads.synthetic.faults import FATE_MALFORMED, Fault, FaultKind, FaultPlan, PlannedFault
from workloads.synthetic.feeds import SCHEMAS, EventIds
from workloads.synthetic.seeds import sub_seed
from workloads.synthetic.timeline import Calendar
from workloads.vocabulary import CSV_FEEDS, FEEDS


class PendingLine(NamedTuple):
    """One rendered line waiting for its delivery date.

    ``copy`` tells an exact duplicate (1) from its original (0); ``fault`` is None for a
    clean line.
    """

    secs: int
    event_id: str
    copy: int
    text: str
    fate: str
    fault: PlannedFault | None


class PendingDeliveries:
    """Lines parked by delivery day and feed. Its size is bounded by the delivery horizon:
    a settlement waits at most 3 days, a refund 20, an outcome 90, a rare backdated fact a
    few weeks past its period close."""

    def __init__(self) -> None:
        self._by_day: dict[int, dict[str, list[PendingLine]]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_day)

    def put(self, day: int, feed: str, line: PendingLine) -> None:
        """Park ``line`` for ``feed``'s delivery on ``day``."""
        by_feed = self._by_day.get(day)
        if by_feed is None:
            by_feed = self._by_day[day] = {}
        bucket = by_feed.get(feed)
        if bucket is None:
            by_feed[feed] = [line]
        else:
            bucket.append(line)

    def earliest_day(self) -> int:
        """The earliest day with parked lines (there must be one)."""
        return min(self._by_day)

    def take(self, day: int) -> dict[str, list[PendingLine]]:
        """Remove and return every line parked for ``day``, by feed."""
        return self._by_day.pop(day, None) or {}


@dataclass
class Tally:
    """What has been written so far: the counts and faults the ground truth reports."""

    faults: list[Fault] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FEEDS, 0))
    files: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FEEDS, 0))
    fates: dict[str, dict[str, int]] = field(default_factory=lambda: {feed: {} for feed in FEEDS})
    first_delivery: int | None = None
    last_delivery: int | None = None

    def count_fate(self, feed: str, fate: str) -> None:
        """One more line of ``feed`` with this expected fate."""
        fates = self.fates[feed]
        fates[fate] = fates.get(fate, 0) + 1


def split_point(lines: Sequence[PendingLine], rng: random.Random) -> int:
    """Where a day's sorted lines split into two files (``len(lines)`` for one file).

    Some larger deliveries come as two files, split near the middle but never between an
    exact duplicate and its original.
    """
    split = len(lines)
    if len(lines) >= 20 and rng.random() < 0.35:
        split = len(lines) // 2
        while split < len(lines) and lines[split][:2] == lines[split - 1][:2]:
            split += 1
    return split


def truncated_record(feed: str, whole: str) -> tuple[str, int]:
    """The first part of a record as a truncated file ends with it, and the cut position."""
    if feed in CSV_FEEDS:
        third = [i for i, ch in enumerate(whole) if ch == ","][2]
        cut = third + 6  # inside order_id: 4 columns instead of 7
    else:
        cut = max(2, (len(whole) * 3) // 5)
    return whole[:cut], cut


class DeliveryWriter:
    """Writes each delivery date's files under ``out_dir`` and keeps the :class:`Tally`."""

    def __init__(
        self,
        out_dir: Path,
        seed: int,
        calendar: Calendar,
        ids: EventIds,
        plan: FaultPlan,
    ) -> None:
        self.out_dir = out_dir
        self.tally = Tally()
        self._seed = seed
        self._calendar = calendar
        self._ids = ids
        self._plan = plan

    def deliver_day(self, day: int, by_feed: dict[str, list[PendingLine]]) -> None:
        """Write every feed's batch for delivery date ``day``: one folder, 1-2 sorted files."""
        if not by_feed:
            return
        if self.tally.first_delivery is None:
            self.tally.first_delivery = day
        self.tally.last_delivery = day
        for feed in FEEDS:
            lines = by_feed.get(feed)
            if not lines:
                continue
            lines.sort(key=lambda line: (line.secs, line.event_id, line.copy))
            rng = random.Random(sub_seed(self._seed, "deliver", feed, day))
            split = split_point(lines, rng)
            chunks = [lines[:split], lines[split:]] if split < len(lines) else [lines]
            truncate = self._plan.truncate(feed, day, rng)
            folder = self.out_dir / feed / self._calendar.day_text(day)
            folder.mkdir(parents=True, exist_ok=True)
            for number, chunk in enumerate(chunks, start=1):
                last = number == len(chunks)
                if self._write_file(feed, day, folder, number, chunk, truncate and last):
                    self._plan.truncation_written(feed)

    def _write_file(
        self,
        feed: str,
        day: int,
        folder: Path,
        number: int,
        chunk: Sequence[PendingLine],
        truncate: bool,
    ) -> bool:
        """Write one data file; return whether a truncated record was appended to it."""
        csv = feed in CSV_FEEDS
        day_text = self._calendar.day_text(day)
        name = f"{feed}-{day_text}-{number}.{'csv' if csv else 'jsonl'}"
        relative = f"{feed}/{day_text}/{name}"
        parts: list[str] = []
        line_no = 0
        if csv:
            parts.append(",".join(SCHEMAS[feed]["1"]) + "\n")
            line_no = 1
        for line in chunk:
            line_no += 1
            parts.append(line.text + "\n")
            self.tally.count_fate(feed, line.fate)
            if line.fault is not None:
                self.tally.faults.append(line.fault.placed(feed, relative, line_no))
        truncated = False
        if truncate:
            template = next((line for line in reversed(chunk) if line.fault is None), None)
            if template is not None:
                phantom_id, _ = self._ids.next_id(feed, day)
                whole = template.text.replace(template.event_id, phantom_id, 1)
                cut_text, cut = truncated_record(feed, whole)
                line_no += 1
                parts.append(cut_text)  # no trailing newline: the file ends mid-record
                self.tally.count_fate(feed, FATE_MALFORMED)
                self.tally.faults.append(
                    Fault(
                        FaultKind.TRUNCATED_FILE,
                        feed,
                        relative,
                        line_no,
                        phantom_id,
                        FATE_MALFORMED,
                        f"file ends mid-record: last line cut after {cut} of {len(whole)} characters",
                    )
                )
                truncated = True
        (folder / name).write_bytes("".join(parts).encode("utf-8"))
        self.tally.lines[feed] += line_no - (1 if csv else 0)
        self.tally.files[feed] += 1
        return truncated
