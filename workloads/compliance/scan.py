"""The erasure's independent check: every byte under the given folders, searched for a subject.

It shares no code with the erasure (no Spark, no table interface, no format knowledge
beyond "a Parquet file has columns"): it walks the folders, reads each Parquet data file
with pyarrow (so it sees rows a table's log or delete files hide, in every file still on
disk, whichever version, snapshot, tag, branch or shadow table references it) and every
other file as bytes (transaction logs, manifests, metadata, the catalog database, review
files, extracts).

It never holds the subject in clear either: it is given salted digests of the subject's
identifiers (:func:`identifier_digest`), cuts every text it reads into tokens
(:func:`tokens`), and compares the tokens' digests. That is what lets ``lakehouse erase
--verify CERT`` run again at any later time from the certificate alone.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

TOKEN_SPLIT: Final = re.compile(r"[^a-z0-9._%+@\-]+")
"""What separates identifiers in any text: anything an email address or an id cannot hold."""

PARQUET_MAGIC: Final = b"PAR1"


def identifier_digest(salt: str, identifier: str) -> str:
    """The salted sha256 of one identifier's token (lower case, no surrounding whitespace)."""
    return hashlib.sha256(f"{salt}\x1f{identifier.strip().lower()}".encode()).hexdigest()


def tokens(text: str) -> set[str]:
    """The candidate identifiers in a text: lower-cased runs of id and address characters,
    without the dots that end a sentence or an address written before a period."""
    return {token.strip(".") for token in TOKEN_SPLIT.split(text.lower()) if token.strip(".")}


@dataclass(frozen=True)
class Hit:
    """Where the subject remains: a file, and the column (Parquet) or ``bytes`` it was found in."""

    path: str
    where: str
    count: int


@dataclass(frozen=True)
class ScanResult:
    """What one walk found: where the subject remains, and how many files were read."""

    hits: tuple[Hit, ...]
    files: int


def scan(
    roots: Sequence[Path], salt: str, digests: Iterable[str], *, skip: Sequence[Path] = ()
) -> ScanResult:
    """Every file under ``roots`` (except under ``skip``) that holds a token whose salted digest
    is one of ``digests``, in one walk that also counts the files read."""
    wanted = frozenset(digests)
    skipped = tuple(p.resolve() for p in skip)
    hits: list[Hit] = []
    files = 0
    for path in _files(roots, skipped):
        files += 1
        hits.extend(_scan_file(path, salt, wanted))
    return ScanResult(tuple(sorted(hits, key=lambda hit: (hit.path, hit.where))), files)


def _files(roots: Sequence[Path], skipped: tuple[Path, ...]) -> Iterator[Path]:
    seen: set[Path] = set()
    for root in roots:
        if not root.exists():
            continue
        for folder, _, names in os.walk(root):
            here = Path(folder).resolve()
            if any(here == s or s in here.parents for s in skipped):
                continue
            for name in sorted(names):
                path = here / name
                if path not in seen and path.is_file():
                    seen.add(path)
                    yield path


def _scan_file(path: Path, salt: str, wanted: frozenset[str]) -> list[Hit]:
    if _is_parquet(path):
        return _scan_parquet(path, salt, wanted)
    found = _matches(path.read_bytes().decode("latin-1"), salt, wanted)
    return [Hit(str(path), "bytes", found)] if found else []


def _is_parquet(path: Path) -> bool:
    if path.stat().st_size < 8:
        return False
    with path.open("rb") as handle:
        head = handle.read(4)
        handle.seek(-4, os.SEEK_END)
        return head == PARQUET_MAGIC and handle.read(4) == PARQUET_MAGIC


def _scan_parquet(path: Path, salt: str, wanted: frozenset[str]) -> list[Hit]:
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(path)
    table = parquet.read()
    hits: Counter[str] = Counter()
    for name, column in zip(table.column_names, table.columns, strict=True):
        for value in _texts(_distinct(column)):
            if _matches(value, salt, wanted):
                hits[name] += 1
    # the footer's statistics (min/max per row group) are metadata too
    stats = _matches(str(parquet.metadata.to_dict()), salt, wanted)
    if stats:
        hits["footer statistics"] += stats
    return [Hit(str(path), where, count) for where, count in sorted(hits.items())]


def _distinct(column: Any) -> list[object]:
    """A column's distinct text values (flattened when it holds lists; none for other types)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
        column = pc.list_flatten(column)
    if (
        pa.types.is_string(column.type)
        or pa.types.is_large_string(column.type)
        or pa.types.is_binary(column.type)
    ):
        values: list[object] = pc.unique(column).to_pylist()
        return values
    return []


def _texts(values: Iterable[object]) -> Iterator[str]:
    for value in values:
        if isinstance(value, str):
            yield value
        elif isinstance(value, bytes):
            yield value.decode("latin-1")
        elif isinstance(value, list | tuple):
            yield from _texts(value)
        elif isinstance(value, dict):
            yield from _texts(value.values())


def _matches(text: str, salt: str, wanted: frozenset[str]) -> int:
    return sum(1 for token in tokens(text) if identifier_digest(salt, token) in wanted)
