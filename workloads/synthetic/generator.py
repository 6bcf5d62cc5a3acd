"""Seeded, deterministic "commerce-risk" history written as raw partner delivery files.

What: a history of orders, refunds, logins, settlements and fraud outcomes for a population
of true persons, written the way partners deliver it (one folder per feed and delivery
date, JSON lines or CSV), with realistic faults planted on purpose, plus a ground-truth file
(`_ground_truth.json`) that says who every email variant really is and what the lakehouse
must do with every planted fault.

Why: the Bronze/Silver/Gold pipeline needs input whose correct answer is known in advance.
Every fault kind (duplicates, corrections, late and backdated facts, malformed or mistyped
lines, missing ids, unknown schema versions, a truncated file) occurs at least once for any
`entities >= 50` and `months >= 3`, so tests can check each behaviour on small data, and
the same code scales to 10M+ events because it streams: events are generated day by day,
parked until their delivery date, and written as soon as that date is reached.

Determinism: nothing reads the wall clock and all randomness comes from `random.Random`
instances seeded by `sub_seed(settings.seed, ...)` (SHA-256 of the seed and a label), one
per person, per generated day and per delivery. The same settings and policy therefore give
byte-identical files.

This module holds the settings, the summary and :func:`generate`, which wires the parts:
:mod:`.population` (who), :mod:`.events` (what happens each day), :mod:`.faults` and
:mod:`.planting` (which faults, on which lines), :mod:`.delivery` (the files) and
:mod:`.ground_truth`. :mod:`.feeds` describes the lines. ``lakehouse generate`` is the
command line.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path

from workloads.silver.lateness import DEFAULT_POLICY_PATH, LatenessRule, check_policy, load_lateness_policy
from workloads.synthetic.delivery import DeliveryWriter, PendingDeliveries
from workloads.synthetic.events import EventGenerator
from workloads.synthetic.faults import FATES, FAULT_KINDS, FateRules, Fault, FaultPlan, expected_fate
from workloads.synthetic.feeds import SCHEMAS, EventIds
from workloads.synthetic.ground_truth import GROUND_TRUTH_FILE, ground_truth_document, write_ground_truth
from workloads.synthetic.holdback import HeldFeed
from workloads.synthetic.planting import Planter
from workloads.synthetic.population import Population, build_population
from workloads.synthetic.seeds import sub_seed
from workloads.synthetic.timeline import Calendar, add_months, date_of, day_number
from workloads.vocabulary import CSV_FEEDS, FEEDS

__all__ = [
    "CSV_FEEDS",
    "DEFAULT_POLICY_PATH",
    "FATES",
    "FAULT_KINDS",
    "FEEDS",
    "GROUND_TRUTH_FILE",
    "SCHEMAS",
    "Fault",
    "GenerationSummary",
    "GeneratorSettings",
    "LatenessRule",
    "expected_fate",
    "generate",
    "load_lateness_policy",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GeneratorSettings:
    """Size and seed of a generated history.

    `fault_rate` is the probability that any one event (and any one delivered file, for
    truncation) carries a random fault. Independently of it, a fixed plan plants each fault
    kind in the first weeks, so every kind occurs even when the random draw finds none.
    """

    entities: int = 200
    months: int = 6
    seed: int = 7
    start: date = date(2025, 1, 1)
    ring_count: int = 3
    fault_rate: float = 0.002

    def __post_init__(self) -> None:
        """Reject settings that cannot produce a meaningful history."""
        if self.entities < 1:
            raise ValueError(f"entities must be >= 1, got {self.entities}")
        if self.months < 1:
            raise ValueError(f"months must be >= 1, got {self.months}")
        if self.ring_count < 0:
            raise ValueError(f"ring_count must be >= 0, got {self.ring_count}")
        if not 0.0 <= self.fault_rate < 0.5:
            raise ValueError(f"fault_rate must be in [0, 0.5), got {self.fault_rate}")

    def to_json(self) -> dict[str, object]:
        """Plain JSON form (the start date as an ISO string), as stored in the ground truth."""
        data: dict[str, object] = asdict(self)
        data["start"] = self.start.isoformat()
        return data


@dataclass(frozen=True)
class GenerationSummary:
    """What `generate` wrote: per-feed line, file and fate counts, and faults per kind.

    `total_events` counts data lines (faulty ones included, CSV headers excluded).
    `faults_per_kind` counts ground-truth fault entries; a resent correction contributes two
    (the superseded line and the correcting line).
    """

    out_dir: Path
    ground_truth: Path
    files_written: int
    total_events: int
    lines_per_feed: Mapping[str, int]
    files_per_feed: Mapping[str, int]
    fates_per_feed: Mapping[str, Mapping[str, int]]
    faults_per_kind: Mapping[str, int]
    persons: int
    rings: int
    first_delivery: date
    last_delivery: date
    held: HeldFeed | None = None
    """A feed whose newest deliveries were held back after writing (``generate --hold-back``)."""


def generate(
    out_dir: Path,
    settings: GeneratorSettings,
    progress: Callable[[str], None] | None = None,
    *,
    policy: Mapping[str, LatenessRule] | None = None,
) -> GenerationSummary:
    """Write a deterministic commerce-risk history under `out_dir` and return its summary.

    Layout: `out_dir/<feed>/<delivery date>/<feed>-<delivery date>-<n>.jsonl|csv` (n = 1 or
    2) plus `out_dir/_ground_truth.json`. Event days span `settings.months` calendar months
    from `settings.start`; deliveries trail past that window by up to ~3 months (outcomes,
    late and backdated facts). `policy` defaults to conf/policies.yaml of this repository.
    `out_dir` must not exist or be empty, so stale files can never mix into a history.
    """
    if policy is None:
        policy = load_lateness_policy(DEFAULT_POLICY_PATH)
    check_policy(policy)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise FileExistsError(f"{out_dir} is not empty; refusing to mix histories")
    out_dir.mkdir(parents=True, exist_ok=True)
    population = build_population(settings.entities, settings.ring_count, settings.seed)
    first_day = day_number(settings.start)
    end_day = day_number(add_months(settings.start, settings.months))
    calendar = Calendar()
    writer = _write_history(out_dir, settings, policy, population, (first_day, end_day), calendar, progress)
    tally = writer.tally
    if tally.first_delivery is None or tally.last_delivery is None:  # pragma: no cover - every day has logins
        raise RuntimeError(f"no delivery was written under {out_dir}")
    window = {
        "first_event_day": calendar.day_text(first_day),
        "end_event_day_exclusive": calendar.day_text(end_day),
        "first_delivery": calendar.day_text(tally.first_delivery),
        "last_delivery": calendar.day_text(tally.last_delivery),
    }
    document = ground_truth_document(settings.to_json(), policy, window, population, tally)
    ground_truth = write_ground_truth(out_dir, document)
    faults_per_kind: dict[str, int] = dict.fromkeys(FAULT_KINDS, 0)
    for fault in tally.faults:
        faults_per_kind[fault.kind] += 1
    summary = GenerationSummary(
        out_dir=out_dir,
        ground_truth=ground_truth,
        files_written=sum(tally.files.values()),
        total_events=sum(tally.lines.values()),
        lines_per_feed=dict(tally.lines),
        files_per_feed=dict(tally.files),
        fates_per_feed={feed: dict(sorted(f.items())) for feed, f in tally.fates.items()},
        faults_per_kind=faults_per_kind,
        persons=len(population.persons),
        rings=len(population.rings),
        first_delivery=date_of(tally.first_delivery),
        last_delivery=date_of(tally.last_delivery),
    )
    log.info(
        "generated %d lines in %d files under %s (%d faults)",
        summary.total_events,
        summary.files_written,
        out_dir,
        len(tally.faults),
    )
    if progress is not None:
        progress(f"wrote {summary.total_events} lines in {summary.files_written} files")
    return summary


def _write_history(
    out_dir: Path,
    settings: GeneratorSettings,
    policy: Mapping[str, LatenessRule],
    population: Population,
    event_days: tuple[int, int],
    calendar: Calendar,
    progress: Callable[[str], None] | None,
) -> DeliveryWriter:
    """Generate every event day in ``[first, end)``, delivering each day as soon as it is
    complete, then the deliveries still parked past the window; return the writer."""
    first_day, end_day = event_days
    ids = EventIds(calendar)
    rules = FateRules(policy, calendar)
    plan = FaultPlan(first_day, settings.fault_rate, rules)
    pending = PendingDeliveries()
    planter = Planter(pending, plan, rules, ids, calendar)
    events = EventGenerator(population, first_day, calendar, ids, planter)
    writer = DeliveryWriter(out_dir, settings.seed, calendar, ids, plan)
    for day in range(first_day, end_day):
        if progress is not None and (day == first_day or date_of(day).day == 1):
            progress(f"generating {calendar.day_text(day)[:7]}")
        events.generate_day(day, random.Random(sub_seed(settings.seed, "day", day)))
        writer.deliver_day(day, pending.take(day))
    while pending:
        day = pending.earliest_day()
        writer.deliver_day(day, pending.take(day))
    return writer
