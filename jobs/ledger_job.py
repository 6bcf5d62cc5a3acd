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

from jobs.common import Action, Context, Outcome, TableView, add_policies_argument, unknown_run
from jobs.output import Block, plain
from lakehouse.errors import ExitCode
from ledger.chain import LedgerRecord
from ledger.openlineage_events import OPENING_KINDS, openlineage_run_id

NAME = "ledger"
HELP = (
    "show ledger entries, verify the hash chain (--history: and that every version it still needs "
    "is readable), or trace a table version to its run"
)


def _show_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--run", metavar="RUN", help="only this run's entries (exit 2 if the ledger holds no such run)"
    )
    parser.add_argument("--kind", help="only entries of this kind")


def _verify_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--history",
        action="store_true",
        help="also check that every version the ledger still needs (published, rollback targets, "
        "pins of open runs, served within the audit window) is readable",
    )
    add_policies_argument(parser)


def _lineage_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("table", metavar="TABLE", help="the table, e.g. gold.correlations")
    parser.add_argument("--version", type=int, help="the table version (default: current)")


def _verify(args: argparse.Namespace, ctx: Context) -> Outcome:
    policy = None
    if args.history:
        from workloads.policies import load_protection_policy

        policy = load_protection_policy(args.policies)  # a bad file: exit 2, before Spark
    ctx.require_lakehouse()
    reader = ctx.ledger.reader
    report = reader.verify()
    status = "ok" if report.ok else f"BROKEN at seq {report.first_broken_seq}: {report.problem}"
    lines: list[Block] = [f"ledger: {report.entries} entries, {status}"]
    if policy is None:
        return Outcome(
            data=report, lines=lines, exit_code=ExitCode.DONE if report.ok else ExitCode.CHECK_FAILED
        )
    from jobs.render import render_history_check
    from workloads.replay import check_history

    history = check_history(ctx.registry, reader.records(), policy, ctx.clock.now())
    lines.extend(render_history_check(history))
    ok = report.ok and history.ok
    return Outcome(
        data={"chain": report, "history": history},
        lines=lines,
        exit_code=ExitCode.DONE if ok else ExitCode.CHECK_FAILED,
    )


def _lineage(args: argparse.Namespace, ctx: Context) -> Outcome:
    from lakehouse.errors import UnknownTableError, UsageError

    # Arguments are checked before Spark starts (ctx.ledger starts it): one line, exit 2.
    if args.table not in ctx.config.tables:
        known = ", ".join(sorted(ctx.config.tables))
        raise UnknownTableError(f"unknown table {args.table!r}; known tables: {known}")
    if args.version is not None and args.version < 0:
        raise UsageError(f"--version {args.version}: a table version is 0 or more")
    ctx.require_lakehouse()
    reader = ctx.ledger.reader
    table = ctx.registry.get(args.table)
    version = args.version if args.version is not None else table.current_version()
    found = reader.lineage(args.table, version) if version is not None else None
    if found is None:
        return Outcome(
            data={"table": args.table, "version": version, "lineage": None},
            lines=[f"{args.table}@{version}: no run in the ledger produced this version"],
            exit_code=ExitCode.CHECK_FAILED,
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


def _show(args: argparse.Namespace, ctx: Context) -> Outcome:
    from lakehouse.errors import UnknownRunError, UsageError

    # Arguments are checked before Spark starts (ctx.ledger starts it): one line, exit 2.
    if args.kind is not None:
        from ledger.entries import KINDS

        if args.kind not in KINDS:
            raise UsageError(f"--kind {args.kind!r} is not a ledger entry kind; kinds: {', '.join(KINDS)}")
    if args.run is not None:
        ctx.require_run(args.run, what="--run")  # its shape, then the ledger read without a JVM
    ctx.require_lakehouse()
    records = ctx.ledger.reader.records(run_id=args.run)
    if args.run is not None and not records:  # a ledger only Spark reads
        raise UnknownRunError(unknown_run("--run", args.run))
    records = [r for r in records if args.kind is None or r.kind == args.kind]
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
    data = {"entries": [{**plain(r), "body": json.loads(r.body), **_openlineage(r)} for r in records]}
    columns = ["seq", "recorded_at", "kind", "run_id", "hash", "body"]
    return Outcome(data=data, lines=[TableView(rows, columns)])


ACTIONS = {
    "show": Action("show ledger entries (all, one run's, or one kind's)", _show_arguments, _show),
    "verify": Action(
        "verify the hash chain (--history: and that every version it still needs is readable); exit 4 "
        "if broken",
        _verify_arguments,
        _verify,
    ),
    "lineage": Action(
        "trace a table version to the run, engines and inputs that produced it (exit 4 if none did)",
        _lineage_arguments,
        _lineage,
    ),
}


def _openlineage(record: LedgerRecord) -> dict[str, str]:
    """The OpenLineage run id of the run an entry opened (docs/reference/openlineage.md)."""
    if record.kind not in OPENING_KINDS or record.run_id is None:
        return {}
    return {"openlineage_run_id": openlineage_run_id(record.run_id, record.entry_id)}


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
