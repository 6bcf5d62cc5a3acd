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
    subject.add_argument(
        "--subject-email",
        metavar="ADDRESS",
        help=(
            "the subject's email address, keyed as resolvers key it (surrounding whitespace "
            "dropped, lower-cased, nothing else): one '@', a local part (at most 64 characters) "
            "and a domain, at most 254 characters, ASCII letters, digits and . _ %% + - only. "
            "Nothing is normalised further: a look-alike (a Cyrillic 'а', a fullwidth '＠') is "
            "never mapped onto an ASCII address, which would be someone else's; it is refused, "
            "since raw text and the independent scan see ASCII tokens only"
        ),
    )
    subject.add_argument(
        "--entity",
        metavar="ID",
        help="an entity id of the subject (any engine version): 'e1-' and 16 lower-case hex digits",
    )
    subject.add_argument(
        "--verify", metavar="CERT", help="re-run the independent scan of an erasure certificate"
    )
    parser.add_argument(
        "--request",
        metavar="REQ",
        help="the erasure request's id (required to erase): one printable line, at most 128 characters",
    )
    parser.add_argument(
        "--reason",
        metavar="TEXT",
        help="why: the legal basis (required to erase): one printable line, at most 1000 characters",
    )
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
    from workloads.compliance.erasure import certificate_in, check_certificate_id
    from workloads.compliance.holds import placed_holds, refuse_if_held
    from workloads.compliance.subject import check_text

    if args.verify is not None and (args.request is not None or args.reason is not None or args.dry_run):
        raise UsageError("--verify CERT takes no --request, --reason or --dry-run")
    if args.verify is None and args.subject_email is None and args.entity is None:
        raise UsageError("name the subject: --subject-email ADDRESS or --entity ID (or --verify CERT)")
    if args.verify is not None:
        check_certificate_id(args.verify)
    request = None
    if args.verify is None:  # every argument checked here: exit 2 before Spark starts, nothing written
        for flag, text in (("--request", args.request), ("--reason", args.reason)):
            if text is not None:
                check_text(flag, text)
        request = ErasureRequest(
            request_id=args.request or "",
            reason=args.reason or "",
            email=args.subject_email,
            entity=args.entity,
            dry_run=args.dry_run,
        )
    deliveries = args.deliveries or ctx.config.workdir_path / "history"
    ctx.require_lakehouse()
    if request is not None and not request.dry_run:
        holds = ctx.ledger_without_jvm(lambda reader: reader.kind_records("legal_hold"))
        if holds is not None:  # exit 2 before Spark: a placed hold covers the key asked for
            refuse_if_held(placed_holds(holds), [request.subject_key])
    if request is None:
        certificates = ctx.ledger_without_jvm(lambda reader: reader.kind_records("erasure_certificate"))
        if certificates is not None:  # exit 2 before Spark: no such certificate in the ledger
            certificate_in(certificates, args.verify)
        certificate = find_certificate(ctx.ledger, args.verify)
        check = reverify(ctx.registry, ctx.ledger, certificate, deliveries, ctx.progress)
        passed = check.passed
        return Outcome(
            data=check,
            lines=render_erasure_check(certificate.certificate_id, check),
            exit_code=ExitCode.DONE if passed else ExitCode.CHECK_FAILED,
        )
    result = erase(ctx.registry, ctx.ledger, request, deliveries=deliveries, progress=ctx.progress)
    return Outcome(data=result, lines=render_erasure(result))


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
