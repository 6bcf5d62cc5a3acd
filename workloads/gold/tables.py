"""Reading and writing Gold tables: pinned reads and month rewrites.

Each write replaces whole ``month`` partitions in one commit (months that become empty
are deleted in a second one), carrying the run id, the pinned Silver version and the
engine in the commit metadata (:data:`INPUTS_KEY`, :data:`ENGINE_KEY`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final

from lakehouse.tables.base import sql_literal

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakehouse.quality import Gate
    from lakehouse.tables import Table

__all__ = ["ENGINE_KEY", "INPUTS_KEY", "read_pinned", "replace_months"]

log = logging.getLogger(__name__)

INPUTS_KEY: Final = "lakehouse.inputs"
"""Commit metadata key: the pinned input versions, as canonical JSON."""
ENGINE_KEY: Final = "lakehouse.engine"
"""Commit metadata key: the ``name@version`` of the engine that computed the rows."""


def read_pinned(table: Table, version: int | None) -> DataFrame:
    """The table as of ``version``; an Iceberg table never written has no version: read it empty."""
    return table.read() if version is None else table.read(as_of=version)


def months_predicate(months: Iterable[str]) -> str:
    """``month IN (...)`` as SQL, for deleting whole month partitions."""
    return "`month` IN (" + ", ".join(sql_literal(m) for m in sorted(months)) + ")"


def replace_months(
    table: Table,
    content: DataFrame,
    *,
    months: Iterable[str],
    present: Iterable[str],
    run_id: str,
    metadata: Mapping[str, str],
    gate: Gate | None,
) -> tuple[str, ...]:
    """Make the ``months`` partitions of ``table`` hold exactly ``content``'s rows of them.

    ``present`` are the months in which ``content`` has rows; months of ``months`` without
    rows are emptied. Returns the months replaced or emptied.
    """
    from pyspark.sql import functions as F

    wanted = set(months)
    written = sorted(wanted & set(present))
    emptied = sorted(wanted - set(present))
    if written:
        rows = content.where(F.col("month").isin(*written))
        if gate is not None:
            gate(table.name, rows)
        table.overwrite_partitions(rows, run_id=run_id, metadata=metadata)
        log.info("%s: replaced month(s) %s", table.name, ", ".join(written))
    if emptied:
        log.info("%s: emptied month(s) %s", table.name, ", ".join(emptied))
        table.delete_where(months_predicate(emptied), run_id=run_id, metadata=metadata)
    return tuple(sorted(wanted))
