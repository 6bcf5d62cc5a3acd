"""Reading ``ops.stream_divergence``: streaming against batch, per scope and release.

Each reconciliation (a batch Gold build, a replay's publication) appends one row per scope
(``correlation_type``) and release (the engines that decided the streaming rows); the history
is kept. :func:`read_divergence` answers with the newest reconciliation's rows, which is what
``lakehouse divergence`` shows, and how many reconciliations the table holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from workloads.gold.provisional import ScopeDivergence
from workloads.vocabulary import TableName

if TYPE_CHECKING:
    from lakehouse.tables import TableRegistry

__all__ = ["DivergenceView", "read_divergence"]


@dataclass(frozen=True)
class DivergenceView:
    """The newest reconciliation's divergence per scope and release (``--json`` prints it)."""

    run_id: str | None
    """The reconciling run (None: no reconciliation yet)."""
    recorded_at: datetime | None
    reconciliations: int
    """How many reconciliations the table records (its history is kept)."""
    scopes: tuple[ScopeDivergence, ...] = ()

    @property
    def flagged(self) -> tuple[str, ...]:
        return tuple(sorted({s.scope for s in self.scopes if s.flagged}))


def read_divergence(registry: TableRegistry) -> DivergenceView:
    """The newest reconciliation's rows of ``ops.stream_divergence`` (one small read)."""
    table = registry.get(TableName.STREAM_DIVERGENCE)
    if not table.exists() or table.current_version() is None:
        return DivergenceView(run_id=None, recorded_at=None, reconciliations=0)
    rows = table.read().collect()
    if not rows:
        return DivergenceView(run_id=None, recorded_at=None, reconciliations=0)
    newest = max(rows, key=lambda r: (r["recorded_at"], r["run_id"]))
    mine = sorted(
        (r for r in rows if r["run_id"] == newest["run_id"]), key=lambda r: (r["scope"], r["release"])
    )
    moment: datetime = newest["recorded_at"]
    return DivergenceView(
        run_id=str(newest["run_id"]),
        recorded_at=moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC),
        reconciliations=len({r["run_id"] for r in rows}),
        scopes=tuple(
            ScopeDivergence(
                scope=str(r["scope"]),
                release=str(r["release"]),
                agree=int(r["agree"]),
                batch_stronger=int(r["batch_stronger"]),
                false_positive=int(r["false_positive"]),
                missed=int(r["missed"]),
                precision=r["stream_precision"],
                recall=r["stream_recall"],
                threshold=float(r["threshold"]),
                flagged=bool(r["flagged"]),
            )
            for r in mine
        ),
    )
