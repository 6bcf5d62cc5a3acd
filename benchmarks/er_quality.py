"""``python -m benchmarks quality --workdir W``: entity-resolution versions against labelled truth.

Reads the current ``silver.events`` of the lakehouse in ``W`` (after ``lakehouse demo``, or
generate + ingest + build silver; ``--events N``: a fresh copy of the cached benchmark lake,
:mod:`benchmarks.lake`), resolves it under every declared entity-resolution
version, correlates each result with ``correlation@1`` (its declared parameters) and
measures both against the labelled truth beside the ingested deliveries, exactly as a
replay's quality report does (:mod:`workloads.evaluation`). Prints one row per version:
ER precision, recall, F1; correlation precision, recall. Nothing is written.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.lake import add_lake_arguments, cached_work_dir


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks quality", description=__doc__)
    parser.add_argument(
        "--workdir", type=Path, default=Path("work"), help="lakehouse work dir (default: work)"
    )
    add_lake_arguments(parser)
    parser.add_argument("--conf", type=Path, default=Path("conf/lakehouse.yaml"))
    parser.add_argument("--engines", type=Path, default=Path("conf/engines.yaml"))
    args = parser.parse_args(argv)

    from lakehouse.config import load_config
    from lakehouse.session import build_session
    from lakehouse.tables import TableRegistry
    from ledger.engines import load_engines
    from workloads.engines.correlation import correlate_v1
    from workloads.evaluation import VersionEvidence, compare_versions
    from workloads.replay.identity import engine_function
    from workloads.replay.quality import locate_truth
    from workloads.vocabulary import TableName

    workdir = args.workdir if args.events is None else cached_work_dir(args.events, args.seed) / "lake"
    config = load_config(args.conf, overrides={"workdir": str(workdir)})
    registry = TableRegistry(build_session(config), config)
    search = locate_truth(registry)
    if search.truth is None:
        print(search.note)
        return 1
    catalog = load_engines(args.engines)
    producer = catalog.resolve("correlation", 1)
    max_entities = int(str(producer.parameters.get("max_entities_per_asset", 50)))
    silver = registry.get(TableName.SILVER_EVENTS).read().drop("entity_id", "resolver").cache()
    evidence: list[VersionEvidence] = []
    for spec in catalog.versions("entity_resolution"):
        began = time.monotonic()
        resolved = engine_function(spec)(silver).cache()
        links = correlate_v1(
            resolved,
            run_id="quality",
            recorded_at=datetime(2000, 1, 1, tzinfo=UTC),
            max_entities_per_asset=max_entities,
        )
        identity = resolved.where("customer_email is not null and entity_id is not null")
        counts = identity.groupBy("customer_email", "entity_id").count().collect()
        evidence.append(
            VersionEvidence(
                spec.ref,
                tuple((str(r[0]), str(r[1]), int(r[2])) for r in counts),
                tuple(
                    (str(r[0]), str(r[1])) for r in links.select("entity_a", "entity_b").distinct().collect()
                ),
            )
        )
        resolved.unpersist()
        print(f"{spec.ref}: resolved and correlated in {time.monotonic() - began:.1f} s")
    rows: list[dict[str, Any]] = []
    for new in evidence:
        report = compare_versions(search.truth, evidence[0], new, note=search.note)
        rows.extend(r for r in report.rows() if r["side"] == "new")
    first = compare_versions(search.truth, evidence[0], evidence[0], note=search.note)
    print(f"{search.note}: {first.identities} identities of {first.persons} persons")
    print("| resolver | ER precision | ER recall | ER F1 | correlation precision | correlation recall |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['engine']} | {r['er_precision']:.3f} | {r['er_recall']:.3f} | {r['er_f1']:.3f} "
            f"| {r['correlation_precision']:.3f} | {r['correlation_recall']:.3f} |"
        )
    return 0
