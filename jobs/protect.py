"""``lakehouse protect [--dry-run]``: make the formats' own maintenance keep what the ledger needs.

Replays, publications and rollbacks keep their protections up to date by themselves; this
command does the same on demand (before a maintenance window, after restoring a lakehouse,
or after changing ``protection.audit_window_days``), and also raises each table's retention
properties to the longest window (on Delta that is a metadata commit, a new version).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome, add_policies_argument

NAME = "protect"
HELP = "protect the versions the ledger points to from the formats' own maintenance (Iceberg tags, retention)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true", help="list the protections and what would change")
    add_policies_argument(parser)


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_protection
    from workloads.policies import load_protection_policy
    from workloads.replay import protect

    policy = load_protection_policy(args.policies)  # a bad file: exit 2, before Spark
    ctx.require_lakehouse()
    records = ctx.ledger.reader.records()
    report = protect(ctx.registry, records, policy, ctx.clock.now(), dry_run=args.dry_run)
    return Outcome(data=report, lines=render_protection(report))


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
