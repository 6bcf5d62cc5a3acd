"""``lakehouse erase``: erase a data subject everywhere, with a certificate anyone can check.

``--dry-run`` lists every place that holds the subject and writes nothing; without it the
subject is erased from every table, retained version, candidate and work file, an
independent scan checks that nothing is left, and the ledger gets the certificate.
``--verify CERT`` runs that scan again, at any later time, from the certificate alone.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Context, Outcome
from lakehouse.errors import ExitCode

NAME = "erase"
HELP = (
    "erase a data subject from every zone, retained version, candidate and work file, verified "
    "by an independent scan and certified in the ledger (--dry-run: list where it is)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    subject = parser.add_mutually_exclusive_group()
    subject.add_argument("--subject-email", metavar="ADDRESS", help="the subject's email address")
    subject.add_argument("--entity", metavar="ID", help="an entity id of the subject (any engine version)")
    subject.add_argument(
        "--verify", metavar="CERT", help="re-run the independent scan of an erasure certificate"
    )
    parser.add_argument("--request", metavar="REQ", help="the erasure request's id (required to erase)")
    parser.add_argument("--reason", metavar="TEXT", help="why: the legal basis (required to erase)")
    parser.add_argument("--dry-run", action="store_true", help="list every place that holds the subject")
    parser.add_argument(
        "--deliveries",
        type=Path,
        help="the partners' delivery folder, left alone and not scanned (default: <workdir>/history)",
    )


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_erasure, render_erasure_check
    from lakehouse.errors import UsageError
    from workloads.compliance import ErasureRequest, erase, find_certificate, reverify

    if args.verify and (args.request or args.reason or args.dry_run):
        raise UsageError("--verify CERT takes no --request, --reason or --dry-run")
    if not (args.verify or args.subject_email or args.entity):
        raise UsageError("name the subject: --subject-email ADDRESS or --entity ID (or --verify CERT)")
    deliveries = args.deliveries or ctx.config.workdir_path / "history"
    ctx.require_lakehouse()
    if args.verify:
        certificate = find_certificate(ctx.ledger, args.verify)
        check = reverify(ctx.registry, ctx.ledger, certificate, deliveries, ctx.progress)
        passed = check.passed
        return Outcome(
            data=check,
            lines=render_erasure_check(certificate.certificate_id, check),
            exit_code=ExitCode.DONE if passed else ExitCode.CHECK_FAILED,
        )
    request = ErasureRequest(
        request_id=args.request or "",
        reason=args.reason or "",
        email=args.subject_email,
        entity=args.entity,
        dry_run=args.dry_run,
    )  # refused here (exit 2) before Spark starts
    result = erase(ctx.registry, ctx.ledger, request, deliveries=deliveries, progress=ctx.progress)
    return Outcome(data=result, lines=render_erasure(result))


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
