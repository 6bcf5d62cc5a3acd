"""``lakehouse engines list|check|fingerprint|fill|declare``: the declared engine versions.

An engine is versioned transformation logic declared in ``conf/engines.yaml``. None of
these verbs needs Spark:

* ``list``: every declared version, and whether its code still matches its fingerprint;
* ``check``: the same verification, one line per version (exit 4 if any code changed);
* ``fingerprint --implementation module:function``: print the code fingerprint;
* ``fill``: replace every ``pending`` fingerprint in the file with the code's;
* ``declare``: append the next version of an engine to the file (fingerprint computed
  from the code now, comments kept) and record an ``engine_declared`` entry in the ledger
  (this one starts Spark, for the ledger).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import Action, Context, Outcome, add_engines_argument, table_lines
from lakehouse.errors import ExitCode

NAME = "engines"
HELP = (
    "list or check declared engine versions (does their code still match?), print or fill "
    "code fingerprints, or declare a new version"
)


def _engines_file(parser: argparse.ArgumentParser) -> None:
    add_engines_argument(parser, "engines file")


def _implementation(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--implementation", required=True, metavar="MODULE:FUNCTION", help=help)


def _fingerprint_arguments(parser: argparse.ArgumentParser) -> None:
    _implementation(parser, "package.module:function of the engine's code")


def _declare_arguments(parser: argparse.ArgumentParser) -> None:
    _engines_file(parser)
    parser.add_argument("--name", required=True, help="the engine (e.g. correlation)")
    _implementation(parser, "package.module:function of the new version's code")
    parser.add_argument(
        "--effective-from",
        required=True,
        type=date.fromisoformat,
        metavar="YYYY-MM-DD",
        help="first date it decides",
    )
    parser.add_argument("--description", required=True, help="what changed, in a sentence or two")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="a parameter, value as JSON (repeatable), e.g. --param max_entities_per_asset=50",
    )


def parse_parameters(items: list[str]) -> dict[str, Any]:
    """``KEY=JSON`` pairs into a dict; a value that is not JSON is taken as a string."""
    from lakehouse.errors import UsageError

    parameters: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--param {item!r}: expected KEY=VALUE, e.g. --param max_entities_per_asset=50")
        try:
            parameters[key.strip()] = json.loads(text)
        except json.JSONDecodeError:
            parameters[key.strip()] = text
    return parameters


def _list(args: argparse.Namespace, ctx: Context) -> Outcome:
    from ledger.engines import check_fingerprints, load_engines

    rows: list[dict[str, Any]] = [
        {
            "engine": c.engine.ref,
            "effective_from": c.engine.effective_from.isoformat(),
            "implementation": c.engine.implementation,
            "fingerprint": c.engine.code_fingerprint[:12],
            "code": "ok" if c.ok else f"CHANGED: {c.problem}",
        }
        for c in check_fingerprints(load_engines(args.engines).engines)
    ]
    failed = any(r["code"] != "ok" for r in rows)
    columns = ["engine", "effective_from", "implementation", "fingerprint", "code"]
    return Outcome(
        data={"engines": rows},
        lines=table_lines(rows, columns),
        exit_code=ExitCode.CHECK_FAILED if failed else ExitCode.DONE,
    )


def _check(args: argparse.Namespace, ctx: Context) -> Outcome:
    from ledger.engines import check_fingerprints, load_engines

    checks = check_fingerprints(load_engines(args.engines).engines)
    lines = [
        f"ok   {c.engine.ref} {c.engine.code_fingerprint[:12]}"
        if c.ok
        else f"FAIL {c.engine.ref}: {c.problem}"
        for c in checks
    ]
    data = {"engines": [{"engine": c.engine.ref, "ok": c.ok, "problem": c.problem} for c in checks]}
    return Outcome(
        data=data,
        lines=lines,
        exit_code=ExitCode.DONE if all(c.ok for c in checks) else ExitCode.CHECK_FAILED,
    )


def _fingerprint(args: argparse.Namespace, ctx: Context) -> Outcome:
    from ledger.engines import fingerprint

    value = fingerprint(args.implementation)
    return Outcome(data={"implementation": args.implementation, "fingerprint": value}, lines=[value])


def _fill(args: argparse.Namespace, ctx: Context) -> Outcome:
    from ledger.engines import fill_fingerprints

    filled = fill_fingerprints(args.engines)
    lines = [f"filled {ref}" for ref in filled] or [f"no pending fingerprints in {args.engines}"]
    return Outcome(data={"filled": filled}, lines=lines)


def _declare(args: argparse.Namespace, ctx: Context) -> Outcome:
    from ledger.engines import declare

    check_declaration(args)
    ctx.require_lakehouse()  # before the engines file is written: the ledger records the declaration
    entry = declare(
        args.engines,
        name=args.name,
        implementation=args.implementation,
        effective_from=args.effective_from,
        description=args.description,
        parameters=parse_parameters(args.param),
    )
    ctx.ledger.writer.append(entry)
    ref = f"{entry.engine.name}@{entry.engine.version}"
    return Outcome(
        data=entry.model_dump(mode="json"),
        lines=[f"declared {ref} in {args.engines} (fingerprint {entry.engine.code_fingerprint[:12]})"],
    )


COMMUNITY = "community"
"""The engine whose declared parameters :func:`check_declaration` checks (its own rule)."""


def check_declaration(args: argparse.Namespace) -> None:
    """Refuse, before the engines file is written and Spark starts (the ledger), what can be
    refused from the arguments alone: one line naming the flag, exit 2."""
    from lakehouse.errors import UsageError
    from ledger.engines.catalog import IMPLEMENTATION_PATTERN

    if not args.name.isidentifier():
        raise UsageError(
            f"--name {args.name!r}: an engine's name is a plain identifier (letters, digits, '_')"
        )
    if not IMPLEMENTATION_PATTERN.match(args.implementation):
        raise UsageError(f"--implementation {args.implementation!r}: expected package.module:function")
    if not args.description.strip():
        raise UsageError("--description is empty: say what changed")
    parameters = parse_parameters(args.param)
    if args.name == COMMUNITY:  # a release whose parameters have a written rule: checked now
        from lakehouse.errors import GraphParameterError
        from workloads.engines.community import community_parameters

        try:
            community_parameters(parameters)
        except GraphParameterError as exc:
            raise GraphParameterError(f"--param: {exc}") from None


ACTIONS = {
    "list": Action(
        "every declared version, and whether its code still matches its fingerprint (exit 4 if not)",
        _engines_file,
        _list,
    ),
    "check": Action(
        "verify every declared version's code against its fingerprint, one line each (exit 4 if any changed)",
        _engines_file,
        _check,
    ),
    "fingerprint": Action(
        "print the code fingerprint of an implementation", _fingerprint_arguments, _fingerprint
    ),
    "fill": Action(
        "replace every 'pending' fingerprint in the engines file with the code's", _engines_file, _fill
    ),
    "declare": Action(
        "append the next version of an engine to the engines file (fingerprint computed from the code, "
        "comments kept) and record it in the ledger (starts Spark, for the ledger)",
        _declare_arguments,
        _declare,
    ),
}


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
