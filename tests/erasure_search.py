"""The erasure tests' own search for a subject (not the product's scan): every file of a
lakehouse's tables, Parquet rows read with pyarrow and everything else as bytes, plus the
review files of its own replays (the work dir is shared with other tests' lakehouses)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lakehouse.config import LakehouseConfig
from lakehouse.tables import TableRegistry
from lakehouse.tables.base import file_path


def files_naming(registry: TableRegistry, identifiers: Iterable[str]) -> list[str]:
    """Every file that holds one of ``identifiers`` (substrings, lower case)."""
    import pyarrow.parquet as pq

    from ledger import LedgerReader

    wanted = [i.lower() for i in identifiers]
    folders = [Path(file_path(loc)) for table in registry for loc in table.storage_locations()]
    runs = {r.run_id for r in LedgerReader.for_registry(registry).records() if r.run_id}
    folders += [registry.config.workdir_path / "replays" / run for run in sorted(runs)]
    found = []
    for folder in (f for f in folders if f.exists()):
        for path in (p for p in folder.rglob("*") if p.is_file()):
            if path.suffix == ".parquet":
                text = json.dumps(pq.read_table(path).to_pylist(), default=str).lower()
            else:
                text = path.read_bytes().decode("latin-1").lower()
            if any(i in text for i in wanted):
                found.append(str(path))
    return found


def words(line: str) -> set[str]:
    """The values of a JSON or CSV line, lower-cased (the tests' own cut, not the product's)."""
    return {v for v in re.split(r'[\s",:{}\[\]]+', line.lower()) if v}


def owners_of(spark: Any, config: LakehouseConfig) -> dict[str, set[str]]:
    """Each current Silver entity id with the addresses its rows hold."""
    from pyspark.sql import functions as F

    from lakehouse.tables import TableRegistry

    silver = TableRegistry(spark, config).get("silver.events").read()
    key = F.lower(F.trim("customer_email"))
    owners: dict[str, set[str]] = {}
    for r in silver.where(key.isNotNull()).select(key.alias("v"), "entity_id").distinct().collect():
        owners.setdefault(r["entity_id"], set()).add(r["v"])
    return owners


def household_subject(
    spark: Any,
    config: LakehouseConfig,
    deliveries: Path,
    erased: set[str],
    holds: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A planted household (two persons outside the rings sharing one device): a person's
    address, entity and the addresses under it (the subject), the other person's addresses
    and the shared device, with their rows before the erasure (:func:`person_rows`); the
    first such person with rows in every table of ``holds``."""
    truth = json.loads((deliveries / "_ground_truth.json").read_text())
    assert truth["households"], "the history has a household"
    owners = owners_of(spark, config)
    entity_of = {address: entity for entity, held in owners.items() for address in held}
    for device, members in sorted(truth["households"].items()):
        for person, other in (members, members[::-1]):
            emails = [e.strip().lower() for e in truth["persons"][person]["emails"]]
            present = [e for e in emails if e in entity_of and e not in erased]
            if not present:
                continue
            entity = entity_of[present[0]]
            found: dict[str, Any] = {
                "email": present[0],
                "device": device,
                "entity": entity,
                "emails": sorted(owners[entity]),
                "other_emails": sorted(e.strip().lower() for e in truth["persons"][other]["emails"]),
            }
            assert not set(found["emails"]) & set(found["other_emails"]), "a household shares no entity"
            found["before"] = person_rows(spark, config, found)
            if all(found["before"].get(table, 0) > 0 for table in holds):
                return found
    raise AssertionError(f"no household member with Silver rows and rows in {list(holds)}")


def person_rows(spark: Any, config: LakehouseConfig, subject: dict[str, Any]) -> dict[str, Any]:
    """The subject's Silver rows and correlations (and training-set rows and scores, where those
    tables exist), and the other household member's rows, their entity ids and their rows on
    the shared device."""
    from pyspark.sql import functions as F

    from lakehouse.tables import TableRegistry

    registry = TableRegistry(spark, config)
    silver = registry.get("silver.events").read()
    key = F.lower(F.trim("customer_email"))
    other = silver.where(key.isin(subject["other_emails"]))
    mine = F.col("entity_id") == subject["entity"]
    correlations = registry.get("gold.correlations").read()
    derived = {
        name: registry.get(name).read().where(mine).count()
        for name in ("gold.training_sets", "gold.fraud_scores")
        if registry.get(name).exists()
    }
    on_device = F.when(F.col("device_id") == subject["device"], 1).otherwise(0)
    theirs = other.groupBy("entity_id").agg(F.count("*").alias("rows"), F.sum(on_device).alias("on_device"))
    per_entity = theirs.collect()  # the other person's rows in one pass: counts and entity ids
    return {
        **derived,
        "subject_rows": silver.where(key.isin(subject["emails"]) | mine).count(),
        "subject_correlations": correlations.where(
            (F.col("entity_a") == subject["entity"]) | (F.col("entity_b") == subject["entity"])
        ).count(),
        "other_rows": sum(int(r["rows"]) for r in per_entity),
        "other_entities": sorted(r["entity_id"] for r in per_entity),
        "other_on_device": sum(int(r["on_device"]) for r in per_entity),
    }
