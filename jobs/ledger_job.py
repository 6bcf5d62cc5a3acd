"""``lakehouse ledger show|verify|lineage``: read and check the provenance ledger.

(The module is not called ``ledger.py``: run as a file by spark-submit, it would shadow
the ``ledger`` package.)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome, TableView
from jobs.output import plain

NAME = "ledger"
HELP = "show ledger entries, verify the hash chain, or trace a table version to its run"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["show", "verify", "lineage"])
    parser.add_argument("table", nargs="?", help="lineage: the table (e.g. gold.correlations)")
    parser.add_argument("--run", help="show: only this run's entries")
    parser.add_argument("--kind", help="show: only entries of this kind")
    parser.add_argument("--version", type=int, help="lineage: the table version (default: current)")


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    reader = ctx.ledger.reader
    if args.action == "verify":
        report = reader.verify()
        status = "ok" if report.ok else f"BROKEN at seq {report.first_broken_seq}: {report.problem}"
        return Outcome(
            data=report,
            lines=[f"ledger: {report.entries} entries, {status}"],
            exit_code=0 if report.ok else 4,
        )
    if args.action == "lineage":
        if not args.table:
            from lakehouse.errors import UsageError

            raise UsageError("ledger lineage needs a TABLE, e.g. lakehouse ledger lineage gold.correlations")
        table = ctx.registry.get(args.table)
        version = args.version if args.version is not None else table.current_version()
        found = reader.lineage(args.table, version) if version is not None else None
        if found is None:
            return Outcome(
                data={"table": args.table, "version": version, "lineage": None},
                lines=[f"{args.table}@{version}: no run in the ledger produced this version"],
                exit_code=1,
            )
        lines = [
            f"{args.table}@{version} was produced by run {found.run_id} "
            f"({found.command}, purpose {found.purpose})",
            "engines: " + (", ".join(e.ref for e in found.engines) or "none"),
            "inputs:  " + (", ".join(f"{t}@{i.version}" for t, i in found.inputs.items()) or "none"),
        ]
        if found.effective_at:
            lines.append(f"published: {found.effective_at.isoformat()}")
        return Outcome(data=found, lines=lines)
    records = reader.records(kind=args.kind, run_id=args.run)
    rows = [
        {
            "seq": r.seq,
            "recorded_at": r.recorded_at.isoformat(),
            "kind": r.kind,
            "run_id": r.run_id,
            "hash": r.hash[:12],
            "body": r.body if len(r.body) <= 80 else r.body[:77] + "...",
        }
        for r in records
    ]
    data = {"entries": [{**plain(r), "body": json.loads(r.body)} for r in records]}
    columns = ["seq", "recorded_at", "kind", "run_id", "hash", "body"]
    return Outcome(data=data, lines=[TableView(rows, columns)])


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
