"""``lakehouse maintain [--dry-run]``: retention per zone and compaction, as a recorded run.

Expires (Iceberg) or vacuums (Delta) each table's history older than its zone's
``retention.<zone>_days`` and compacts small data files (``maintenance`` in the policy
file), never against what the ledger protects (published versions in their rollback and
audit windows, an open replay's pins), an open candidate needs, or a placed legal hold keeps.
Reports files and bytes before and after; a real run is recorded in the ledger.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome, add_policies_argument

NAME = "maintain"
HELP = (
    "expire history older than each zone's retention and compact small files, "
    "keeping what the ledger, open candidates and legal holds need"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true", help="say what would be done; write nothing")
    add_policies_argument(parser)


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_maintenance
    from workloads.maintenance import maintain
    from workloads.policies import load_maintenance_policies, load_protection_policy

    retention, policy = load_maintenance_policies(args.policies)  # a bad file: exit 2, before Spark
    protection = load_protection_policy(args.policies)
    ctx.require_lakehouse()
    report = maintain(
        ctx.registry, ctx.ledger, retention, policy, protection, dry_run=args.dry_run, progress=ctx.progress
    )
    return Outcome(data=report, lines=render_maintenance(report))


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
