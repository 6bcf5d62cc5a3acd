"""Compliance erasure of one subject against a full rewrite of every table it touches (W6).

The lake is the cached benchmark lake (:mod:`benchmarks.lake`: generator, ingest of every
feed, Silver, Gold through the product; ``--events``, ``--seed``, the shipped mixed-format
default or ``--format``), built on first use and restored from its pristine copy before each
run, since the erasures change it; ``--workdir DIR`` measures the lake in ``DIR`` as it is
(``history/`` and ``lake/``, e.g. the copy a previous run left). Subjects are ordinary
persons: an address whose entity holds no other address, with at most the median number of
orders of such persons, chosen by a hash of the address so the choice is stable.

The two sides, in the same process:

* **the erasure**: the product's ``lakehouse erase`` (:func:`workloads.compliance.erase`,
  what the CLI runs): find the subject's identifiers, locate it in every retained version,
  erase and purge it table by table, verify with the independent scan, certify. Files are
  counted by listing every table's Parquet data files on disk before and after: the files
  the erasure deleted (every file that held the subject in any version, and what the
  format's expiry took with them) and the files it wrote.
* **the full rewrite** (the baseline): what a team does without a targeted erasure. Every
  table the erasure touches (its certificate's, or an untimed dry run's when the rewrite
  runs first) is read in its current version and written again without the subject (the
  same :data:`~workloads.compliance.subject.TREATMENTS`: rows deleted, redacted or
  re-keyed, the identifiers given to it for free),
  as one write into a fresh table of the same format, partitioning and sort order: the
  files an in-place ``INSERT OVERWRITE`` would write, without changing the lake the
  erasures run on (the scratch tables are dropped after counting). It neither purges the
  old files and versions nor verifies anything, so it is a lower bound of the full-rewrite
  route and the ratios are conservative.

Goals (issue 13, item 9): files the erasure rewrote (deleted) <= 10% of the lake's data files,
erasure time <= 10% of the full rewrite.

JVM warm-up must not land on one side: the subjects' identifiers are found (every Silver
version read) and the smallest table rewritten, untimed, first; then each sample erases a
new subject and rewrites the tables it is in, in alternating order (erase then rewrite,
rewrite then erase). Each erasure runs on
the lake the previous ones left (their purges shortened its history), so every sample is
printed with the versions it searched.

    python -m benchmarks erasure --events 1000000
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.lake import add_lake_arguments, cached_work_dir, lake_overrides
from benchmarks.phases import Phases

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.tables import TableRegistry
    from ledger import Ledger
    from workloads.compliance.subject import Treatment

GOAL = 0.10


@dataclass(frozen=True)
class Files:
    """Data files (path -> bytes)."""

    sizes: Mapping[str, int]

    @property
    def count(self) -> int:
        return len(self.sizes)

    @property
    def bytes(self) -> int:
        return sum(self.sizes.values())


def data_files(registry: TableRegistry, names: Sequence[str] | None = None) -> Files:
    """Every Parquet data file on disk under the tables' folders (any version, any candidate),
    logs and metadata excluded (a Delta checkpoint is Parquet too)."""
    from lakehouse.tables.base import file_path

    sizes: dict[str, int] = {}
    for name in names if names is not None else registry.names():
        for location in registry.get(name).storage_locations():
            root = Path(file_path(location))
            if not root.is_dir():
                continue
            for path in root.rglob("*.parquet"):
                if "_delta_log" not in path.parts and "metadata" not in path.parts:
                    sizes[str(path)] = path.stat().st_size
    return Files(sizes)


def current_files(registry: TableRegistry, names: Sequence[str] | None = None) -> dict[str, tuple[int, int]]:
    """Table -> (data files, bytes) of its current version: what a full rewrite rewrites."""
    found = {}
    for name in names if names is not None else registry.names():
        table = registry.get(name)
        version = table.current_version() if table.exists() else None
        if version is not None:
            size = table.size_at(version, count_rows=False)
            found[name] = (size.files, size.bytes)
    return found


@dataclass
class Erasure:
    """One timed erasure and what it did."""

    seconds: float
    steps: dict[str, float]
    """Seconds per step of :func:`workloads.compliance.erase` (see :func:`step_of`)."""
    tables: dict[str, float]
    """Seconds per table of the locate and erase steps (progress message -> seconds)."""
    versions_searched: int
    files_deleted: int
    bytes_deleted: int
    files_written: int
    bytes_written: int
    rows: dict[str, int]
    versions_purged: int
    certificate: str
    files_scanned: int


@dataclass
class Rewrite:
    """One timed full rewrite of the tables an erasure touched."""

    seconds: float
    files_read: int
    bytes_read: int
    files_written: int
    bytes_written: int
    per_table: dict[str, float] = field(default_factory=dict)


def pick_subjects(registry: TableRegistry, count: int) -> list[str]:
    """``count`` ordinary persons' addresses: an entity that holds no other address, with at most
    the median number of orders of such persons; in a stable order (a hash of the address)."""
    from pyspark.sql import functions as F

    from workloads.vocabulary import TableName

    silver = registry.get(TableName.SILVER_EVENTS).read()
    key = F.lower(F.trim(F.col("customer_email")))
    attributed = silver.where(F.col("customer_email").isNotNull() & F.col("entity_id").isNotNull())
    single = (
        attributed.groupBy("entity_id")
        .agg(F.countDistinct(key).alias("addresses"))
        .where("addresses = 1")
        .select("entity_id")
    )
    people = (
        attributed.where(F.col("domain") == "orders")
        .join(single, "entity_id", "left_semi")
        .groupBy(key.alias("email"))
        .agg(F.count("*").alias("orders"))
        .localCheckpoint()
    )
    median = people.agg(F.percentile_approx("orders", 0.5)).collect()[0][0]
    chosen = people.where(F.col("orders") <= median).orderBy(F.sha2("email", 256)).limit(count).collect()
    if len(chosen) < count:
        raise SystemExit(f"only {len(chosen)} ordinary persons in the lake; {count} needed")
    print(
        f"subjects: {', '.join(str(r['orders']) for r in chosen)} orders (median of such persons: {median})"
    )
    return [str(r["email"]) for r in chosen]


def step_of(message: str) -> str:
    """The step an erasure progress message starts (:func:`workloads.compliance.erase`)."""
    if message.startswith("searching "):
        return "locate: every retained version and candidate"
    if message.startswith("erasing from "):
        return "erase (MERGE) and purge, table by table"
    if message.startswith("verifying"):
        return "independent verification scan and certificate"
    return message


def erase_one(registry: TableRegistry, ledger: Ledger, address: str, deliveries: Path, tag: str) -> Erasure:
    """Erase ``address`` through the product and measure it."""
    from workloads.compliance import ErasureRequest, erase
    from workloads.compliance.subject import tables_with_rules

    names = registry.names()
    before = data_files(registry, names)
    searched = [registry.get(n) for n in tables_with_rules(registry)]
    versions = sum(len(t.retained_versions()) for t in searched if t.exists())
    request = ErasureRequest(request_id=f"BENCH-{tag}", reason="benchmark: erasure cost", email=address)
    phases = Phases("find the subject's identifiers (every Silver version, every resolver)")
    result = erase(registry, ledger, request, deliveries=deliveries, progress=phases)
    seconds = phases.end()
    after = data_files(registry, names)
    certificate = result.certificate
    assert certificate is not None
    gone = set(before.sizes) - set(after.sizes)
    new = set(after.sizes) - set(before.sizes)
    return Erasure(
        seconds=seconds,
        steps=phases.seconds(step_of),
        tables=phases.seconds(first=False),
        versions_searched=versions,
        files_deleted=len(gone),
        bytes_deleted=sum(before.sizes[f] for f in gone),
        files_written=len(new),
        bytes_written=sum(after.sizes[f] for f in new),
        rows={name: erased.rows for name, erased in certificate.tables.items()},
        versions_purged=sum(len(e.versions_purged) for e in certificate.tables.values()),
        certificate=certificate.certificate_id,
        files_scanned=certificate.verification.files_scanned,
    )


def without_subject(table_rows: DataFrame, keys: DataFrame, treatment: Treatment) -> DataFrame:
    """A table's rows as a full rewrite writes them: the subject's deleted or redacted, and a
    shared entity id re-keyed in the others."""
    from pyspark.sql import functions as F

    columns = table_rows.columns
    joined = table_rows.alias("t").crossJoin(F.broadcast(keys.alias("s")))
    matched = F.coalesce(F.expr(f"({treatment.match})"), F.lit(False))
    redact = treatment.update
    if redact:
        if treatment.delete:
            joined = joined.where(~(matched & F.coalesce(F.expr(f"({treatment.delete})"), F.lit(False))))
        return joined.select(
            *[
                (
                    F.when(matched, F.expr(redact[c])).otherwise(F.col(f"t.`{c}`"))
                    if c in redact
                    else F.col(f"t.`{c}`")
                ).alias(c)
                for c in columns
            ]
        )
    return joined.where(~matched).select(*[F.col(f"t.`{c}`") for c in columns])


def full_rewrite(registry: TableRegistry, names: Sequence[str], keys: DataFrame) -> Rewrite:
    """Every table in ``names`` read in its current version and written again without the
    subject, into a fresh table of the same format and layout (dropped after counting)."""
    from dataclasses import replace

    from lakehouse.tables import open_table
    from workloads.compliance.subject import TREATMENTS

    rewrite = Rewrite(0.0, 0, 0, 0, 0)
    for name in names:
        table = registry.get(name)
        spec = registry.spec(name)
        version = table.current_version()
        if version is None:
            continue
        read = table.size_at(version, count_rows=False)
        scratch = open_table(
            registry.spark,
            registry.config,
            replace(spec, name=f"{spec.namespace}.rewrite_{spec.short_name}_{uuid.uuid4().hex[:8]}"),
        )
        started = time.monotonic()
        scratch.create()
        scratch.append(without_subject(table.read(version), keys, TREATMENTS[name]), run_id="bench")
        seconds = time.monotonic() - started
        written = scratch.size_at(scratch.current_version() or 0, count_rows=False)
        scratch.drop()
        rewrite.seconds += seconds
        rewrite.per_table[name] = seconds
        rewrite.files_read += read.files
        rewrite.bytes_read += read.bytes
        rewrite.files_written += written.files
        rewrite.bytes_written += written.bytes
    return rewrite


def _open(workdir: Path, overrides: Mapping[str, Any]) -> tuple[TableRegistry, Ledger]:
    from lakehouse.config import load_config
    from lakehouse.session import build_session
    from lakehouse.tables import TableRegistry
    from ledger import SystemClock, open_ledger

    config = load_config("conf/lakehouse.yaml", overrides=overrides)
    registry = TableRegistry(build_session(config), config)
    return registry, open_ledger(registry, clock=SystemClock())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks erasure")
    add_lake_arguments(parser, events=20_000)
    parser.add_argument(
        "--workdir",
        type=Path,
        help="measure the lake already in this folder as it is (history/, lake/), not the cached one",
    )
    parser.add_argument("--format", choices=["delta", "iceberg"], help="one format for every zone")
    parser.add_argument("--samples", type=int, default=2, help="erasures and full rewrites, alternating")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON at the end")
    args = parser.parse_args(argv)

    from workloads.compliance import ErasureRequest, erase, find_subject
    from workloads.compliance.subject import key_row, tables_with_rules
    from workloads.vocabulary import redacted_as

    workdir = args.workdir or cached_work_dir(args.events, args.seed, args.format)
    registry, ledger = _open(workdir, lake_overrides(workdir, args.format))
    deliveries = workdir / "history"
    on_disk = data_files(registry)
    current = current_files(registry)
    lake_files = sum(files for files, _ in current.values())
    lake_bytes = sum(size for _, size in current.values())
    print(
        f"the lake: {lake_files} data files ({lake_bytes / 1e6:.1f} MB) in the current versions of "
        f"{len(current)} tables; {on_disk.count} data files ({on_disk.bytes / 1e6:.1f} MB) on disk "
        "(every version)"
    )
    subjects = pick_subjects(registry, args.samples)
    # Untimed, before any erasure: each subject's identifiers (the full rewrite's filter; it
    # reads every Silver version, which warms the reads up), and a rewrite of the smallest table.
    identities = [find_subject(registry, email=address) for address in subjects]
    for number, subject in enumerate(identities):
        print(f"subject {number + 1}: {subject.counts()}")
    smallest = min(
        (n for n in tables_with_rules(registry) if current.get(n, (0, 0))[0]), key=lambda n: current[n][1]
    )
    full_rewrite(registry, [smallest], key_row(registry.spark, identities[0], redacted_as("bench")))

    invocation = uuid.uuid4().hex[:6]
    erasures: list[Erasure] = []
    rewrites: list[Rewrite] = []
    for sample, (address, subject) in enumerate(zip(subjects, identities, strict=True)):
        keys = key_row(registry.spark, subject, redacted_as("bench")).localCheckpoint()
        if sample % 2 == 0:  # erase, then rewrite the tables the erasure touched
            erasures.append(erase_one(registry, ledger, address, deliveries, f"{invocation}-{sample + 1}"))
            print(f"sample {sample + 1}: {describe_erasure(erasures[-1])}")
            rewrites.append(full_rewrite(registry, list(erasures[-1].rows), keys))
            print(f"sample {sample + 1}: {describe_rewrite(rewrites[-1])}")
        else:  # rewrite the tables a dry run (untimed) finds the subject in, then erase
            request = ErasureRequest("", "", email=address, dry_run=True)
            dry = erase(registry, ledger, request, deliveries=deliveries)
            rewrites.append(full_rewrite(registry, [p.table for p in dry.places.tables if p.holds], keys))
            print(f"sample {sample + 1}: {describe_rewrite(rewrites[-1])}")
            erasures.append(erase_one(registry, ledger, address, deliveries, f"{invocation}-{sample + 1}"))
            print(f"sample {sample + 1}: {describe_erasure(erasures[-1])}")
    figures = summary(erasures, rewrites, lake_files)
    print("\n".join(figures))
    if args.json:
        document = {
            "lake": {"files": lake_files, "bytes": lake_bytes, "files_on_disk": on_disk.count},
            "erasures": [asdict(e) for e in erasures],
            "rewrites": [asdict(r) for r in rewrites],
        }
        print(json.dumps(document, indent=2))
    registry.spark.stop()
    return 0


def describe_erasure(e: Erasure) -> str:
    """One erasure's figures, its steps and its slowest tables."""
    rows = ", ".join(f"{name} {count}" for name, count in sorted(e.rows.items()) if count)
    lines = [
        f"erasure {e.seconds:.1f}s; {e.versions_searched} versions searched, {e.versions_purged} purged; "
        f"{e.files_deleted} data files deleted ({e.bytes_deleted / 1e6:.2f} MB), {e.files_written} written "
        f"({e.bytes_written / 1e6:.2f} MB); {e.files_scanned} files scanned; certificate {e.certificate}",
        f"    rows erased or redacted: {rows}",
        *(f"    {step:<70} {seconds:7.1f}s" for step, seconds in e.steps.items()),
        "    slowest: "
        + ", ".join(f"{m} {t:.1f}s" for m, t in sorted(e.tables.items(), key=lambda i: -i[1])[:4]),
    ]
    return "\n".join(lines)


def describe_rewrite(r: Rewrite) -> str:
    """One full rewrite's figures."""
    slowest = ", ".join(f"{n} {t:.1f}s" for n, t in sorted(r.per_table.items(), key=lambda i: -i[1])[:4])
    return (
        f"full rewrite {r.seconds:.1f}s; {r.files_read} data files read and replaced "
        f"({r.bytes_read / 1e6:.1f} MB), {r.files_written} written ({r.bytes_written / 1e6:.1f} MB)"
        f"\n    slowest: {slowest}"
    )


def summary(erasures: Sequence[Erasure], rewrites: Sequence[Rewrite], lake_files: int) -> list[str]:
    """The two ratios against the goals, and the erasure's time by step (medians)."""
    erasure_s = statistics.median(e.seconds for e in erasures)
    rewrite_s = statistics.median(r.seconds for r in rewrites)
    worst = max(erasures, key=lambda e: max(e.files_deleted, e.files_written))
    rewritten = max(worst.files_deleted, worst.files_written)
    files_ratio, time_ratio = rewritten / lake_files, erasure_s / rewrite_s
    steps = {s: statistics.median(e.steps.get(s, 0.0) for e in erasures) for s in erasures[0].steps}
    return [
        f"files rewritten by an erasure (the most of {len(erasures)}): {rewritten} of the lake's "
        f"{lake_files} data files = {files_ratio:.1%} (goal <= {GOAL:.0%}: {_verdict(files_ratio)}); "
        f"the full rewrite: {rewrites[0].files_read} ({rewrites[0].files_read / lake_files:.0%})",
        f"time: erasure {erasure_s:.1f}s, full rewrite {rewrite_s:.1f}s (medians) = {time_ratio:.1%} "
        f"(goal <= {GOAL:.0%}: {_verdict(time_ratio)})",
        "the erasure by step (medians; share of the erasure, share of the full rewrite):",
        *(
            f"    {step:<70} {seconds:7.1f}s {seconds / erasure_s:4.0%} {seconds / rewrite_s:6.1%}"
            for step, seconds in sorted(steps.items(), key=lambda item: -item[1])
        ),
    ]


def _verdict(ratio: float) -> str:
    return "met" if ratio <= GOAL else "NOT met"
