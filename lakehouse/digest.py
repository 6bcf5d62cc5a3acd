"""Canonical content hashes of DataFrames: the same rows give the same hash, whatever their
order, partitioning or file layout. This is how determinism is checked (same inputs and
same engine identity give the same output hash) and how reconciliation compares ranges.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: one text per value, for hashing."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)


def digest_of(value: Any) -> str:
    """sha256 of the canonical JSON of a plain value."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def row_hash_column(df: DataFrame, columns: Sequence[str] | None = None) -> Any:
    """A Spark column holding the sha256 of each row's canonical JSON over ``columns``."""
    from pyspark.sql import functions as F

    chosen = sorted(columns if columns is not None else df.columns)
    return F.sha2(F.to_json(F.struct(*[F.col(f"`{c}`") for c in chosen])), 256)


def canonical_hash(df: DataFrame, *, exclude: Iterable[str] = ()) -> str:
    """Order-independent hash of a DataFrame's rows (columns sorted by name).

    Rows are hashed one by one; the hashes are sorted and hashed again, so duplicates
    count and layout does not. ``exclude`` drops columns that record *when* or *by which
    run* rather than *what* (for example ``run_id``, ``recorded_at``).
    """
    from pyspark.sql import functions as F

    excluded = set(exclude)
    columns = [c for c in df.columns if c not in excluded]
    hashed = df.select(row_hash_column(df, columns).alias("h"))
    digests = hashed.agg(F.sort_array(F.collect_list("h")).alias("all")).collect()[0]["all"]
    return hashlib.sha256("\n".join(digests or []).encode()).hexdigest()


def partition_hashes(
    df: DataFrame, partition_by: Sequence[str], *, exclude: Iterable[str] = ()
) -> Mapping[tuple[Any, ...], tuple[int, str]]:
    """Per partition: (row count, canonical hash). Used to find the partitions that differ."""
    from pyspark.sql import functions as F

    excluded = set(exclude)
    columns = [c for c in df.columns if c not in excluded]
    grouped = (
        df.select(*partition_by, row_hash_column(df, columns).alias("h"))
        .groupBy(*partition_by)
        .agg(F.count("*").alias("n"), F.sort_array(F.collect_list("h")).alias("hs"))
        .collect()
    )
    return {
        tuple(r[c] for c in partition_by): (
            int(r["n"]),
            hashlib.sha256("\n".join(r["hs"]).encode()).hexdigest(),
        )
        for r in grouped
    }
