"""The Bronze -> Silver projections plan their joins above computed rows (no Spark: the frames
are stand-ins that record what was built on what).

A join planned above the canonicalisation's projections and the fates' windows makes Spark's
constraint inference explode: the reverted repair ran 1,582 s and out of heap, the next one
over ten minutes, on a few hundred orders. The Silver build and the stream compute the fated
rows first (a local checkpoint); the reconcile projections must do the same, so that entity
resolution's order lookup and the repair's semi-join on its keys read computed rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import workloads.silver.adapters as adapters
import workloads.silver.exceptions as exceptions
import workloads.silver.lateness as lateness
import workloads.silver.routing as routing
from lakehouse.config import load_config
from tests.conftest import REPO
from workloads.engines import entity_resolution
from workloads.reconciliation import pairs
from workloads.reconciliation.pairs import DeriveContext, carried_label, declared_pairs
from workloads.vocabulary import FEEDS

DECLARED = declared_pairs(load_config(REPO / "conf" / "lakehouse.yaml", environ={}))


class Frame:
    """A stand-in DataFrame: its name says how it was built."""

    def __init__(self, name: str, rows: list[tuple[Any, ...]] | None = None) -> None:
        self.name, self.rows = name, rows or []

    def unionByName(self, other: Frame) -> Frame:
        return Frame(f"{self.name} + {other.name}")

    def where(self, condition: str) -> Frame:
        return Frame(f"{self.name} where {condition}")

    def drop(self, *columns: str) -> Frame:
        return Frame(f"{self.name} drop {','.join(columns)}")

    def groupBy(self, *columns: str) -> Frame:
        return self

    def count(self) -> Frame:
        return self

    def orderBy(self, *columns: str, ascending: bool = True) -> Frame:
        assert (columns, ascending) == (("count",), False), "most rows first"
        return self

    def collect(self) -> list[tuple[Any, ...]]:
        return self.rows


class Table:
    def __init__(self, name: str, written: bool) -> None:
        self.name, self.written = name, written

    def exists(self) -> bool:
        return self.written

    def current_version(self) -> int | None:
        return 3 if self.written else None

    def read(self) -> Frame:
        return Frame(self.name)


class Registry:
    def __init__(self, written: set[str]) -> None:
        self.written = written

    def get(self, name: str) -> Table:
        return Table(str(name), str(name) in self.written)


@pytest.fixture
def resolved(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Stand-ins for the Silver build's functions; returns (fated frame, resolver) per call of
    ``silver_rows``."""
    calls: list[tuple[str, Any]] = []

    def silver_rows(fated: Frame, resolve: Any) -> Frame:
        calls.append((fated.name, resolve))
        return Frame(f"silver({fated.name})")

    monkeypatch.setattr(adapters, "canonicalise", lambda rows, adapter: Frame(f"canonical({rows.name})"))
    monkeypatch.setattr(lateness, "load_lateness_policy", lambda path: {})
    monkeypatch.setattr(
        lateness, "assign_fates", lambda rows, policy, approvals: Frame(f"fated({rows.name})")
    )
    monkeypatch.setattr(exceptions, "approvals_in_queue", lambda registry: ())
    monkeypatch.setattr(pairs, "materialize", lambda frame: Frame(f"computed[{frame.name}]"))
    monkeypatch.setattr(routing, "silver_rows", silver_rows)
    return calls


def _ctx(written: set[str], derived: Frame | None = None) -> DeriveContext:
    return DeriveContext(Registry(written), Path("policies.yaml"), derived)  # type: ignore[arg-type]


def test_the_repair_resolves_every_feed_above_the_computed_fated_rows(
    resolved: list[tuple[str, Any]],
) -> None:
    (orders, logins) = (f for f in FEEDS if f.value in ("orders", "logins"))
    ctx = _ctx({str(logins.bronze_table)}, Frame("silver", [("entity_resolution@1", 290), (None, 10)]))
    repair = next(p for p in DECLARED if p.source == orders.bronze_table).repair_rows
    assert repair is not None

    rows = repair(Frame("pinned orders"), ctx)  # type: ignore[arg-type]

    (fated, resolve), *more = resolved
    assert not more, "the fated rows are computed once, every feed together"
    assert fated == "computed[fated(canonical(pinned orders) + canonical(bronze.logins))]"
    assert resolve is entity_resolution.resolve_v1, "the version the Silver rows carry"
    assert rows.name == f"silver({fated}) where domain = 'orders'"  # type: ignore[attr-defined]


def test_the_derive_projects_the_computed_fated_rows(resolved: list[tuple[str, Any]]) -> None:
    derive = next(p for p in DECLARED if p.source == "bronze.refunds").derive
    assert derive is not None

    derive(Frame("pinned refunds"), _ctx(set()))  # type: ignore[arg-type]

    ((fated, resolve),) = resolved
    assert fated == "computed[fated(canonical(pinned refunds))]"
    assert resolve is pairs._unresolved


def test_the_carried_label_is_the_most_common_one_else_the_default() -> None:
    most = Frame("silver", [(None, 9), ("entity_resolution@3", 5), ("entity_resolution@1", 1)])
    assert carried_label(most) == "entity_resolution@3"  # type: ignore[arg-type]
    default = entity_resolution.engine_label(entity_resolution.VERSION)
    assert carried_label(Frame("silver", [(None, 4)])) == default  # type: ignore[arg-type]
    assert carried_label(Frame("silver")) == default  # type: ignore[arg-type]
