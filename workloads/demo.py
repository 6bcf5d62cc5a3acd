"""The demo story on the embedded default, as one function the CLI and notebooks call.

Each chapter is a library call the user could run alone; the demo only strings them
together and collects what to show.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lakehouse.tables import TableRegistry

Progress = Callable[[str], None]


@dataclass(frozen=True)
class DemoReport:
    """What the demo did, chapter by chapter, as plain data."""

    tables: list[dict[str, Any]]
    chapters: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"tables": self.tables, "chapters": self.chapters}


def create_zones(registry: TableRegistry, progress: Progress) -> list[dict[str, Any]]:
    """Create every configured table that does not exist yet; describe them all."""
    described = []
    for table in registry:
        created = not table.exists()
        if created:
            progress(f"creating {table.name} ({table.format.value})")
            table.create(if_not_exists=True)
        described.append(
            {
                "name": table.name,
                "zone": table.spec.zone.value,
                "format": table.format.value,
                "location": table.location,
                "created_now": created,
                "current_version": table.current_version(),
            }
        )
    return described


def run_demo(registry: TableRegistry, progress: Progress) -> DemoReport:
    """The whole story, in order."""
    tables = create_zones(registry, progress)
    return DemoReport(tables=tables)
