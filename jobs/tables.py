"""``lakehouse tables``: every configured table, where it lives, whether it exists, its version."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome, TableView

NAME = "tables"
HELP = "list every configured table with its zone, format, location, existence and version"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options beyond the common ones (``--format`` forces one format for every table)."""


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    rows = []
    for table in ctx.registry:
        exists = table.exists()
        rows.append(
            {
                "name": table.name,
                "zone": table.spec.zone.value,
                "format": table.format.value,
                "location": table.location,
                "exists": exists,
                "current_version": table.current_version() if exists else None,
            }
        )
    columns = ["name", "zone", "format", "exists", "current_version", "location"]
    return Outcome(data={"tables": rows}, lines=[TableView(rows, columns)])


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
