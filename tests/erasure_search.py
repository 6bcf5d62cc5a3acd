"""The erasure tests' own search for a subject (not the product's scan): every file of a
lakehouse's tables, Parquet rows read with pyarrow and everything else as bytes, plus the
review files of its own replays (the work dir is shared with other tests' lakehouses)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

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
