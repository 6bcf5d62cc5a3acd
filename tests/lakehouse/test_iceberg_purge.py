"""When the Iceberg purge may skip ``remove_orphan_files``: no file in the table's folder is older
than the procedure's bound (the planted-orphan run on a real table is in ``test_tables.py``)."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

from lakehouse.tables.iceberg import ORPHAN_AGE, _any_file_older


def test_only_a_file_older_than_the_bound_lets_the_procedure_run(tmp_path: Path) -> None:
    bound = datetime.now(UTC) - ORPHAN_AGE
    data = tmp_path / "data" / "part=a"
    data.mkdir(parents=True)
    (data / "fresh.parquet").write_bytes(b"x")
    assert not _any_file_older(str(tmp_path), bound), "a young folder: nothing could be removed"
    old = data / "crashed.parquet"
    old.write_bytes(b"x")
    then = time.time() - 2 * ORPHAN_AGE.total_seconds()
    os.utime(old, (then, then))
    assert _any_file_older(str(tmp_path), bound), "a file past the bound, however deep"
