"""``lakehouse engines list|declare``: the declared engine versions (``conf/engines.yaml``).

``list`` needs no Spark: it reads the file and checks every version's code fingerprint.
``declare`` appends the next version of an engine to the file (fingerprint computed from
the code now, comments kept) and records an ``engine_declared`` entry in the ledger.
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

from jobs.common import Context, Outcome, table_lines

NAME = "engines"
HELP = "list declared engine versions (and whether their code still matches), or declare a new one"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["list", "declare"])
    parser.add_argument("--engines", type=Path, default=Path("conf/engines.yaml"), help="engines file")
    parser.add_argument("--name", help="declare: the engine (e.g. correlation)")
    parser.add_argument("--implementation", help="declare: package.module:function")
    parser.add_argument(
        "--effective-from", type=date.fromisoformat, help="declare: first date it decides (YYYY-MM-DD)"
    )
    parser.add_argument("--description", help="declare: what changed, in a sentence or two")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="declare: a parameter, value as JSON (repeatable), e.g. --param max_entities_per_asset=50",
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


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from lakehouse.errors import LakehouseError, UsageError
    from ledger.engines import declare, load_engines, verify_fingerprint

    if args.action == "list":
        rows: list[dict[str, Any]] = []
        for spec in load_engines(args.engines).engines:
            try:
                verify_fingerprint(spec)
                code = "ok"
            except LakehouseError as exc:
                code = f"CHANGED: {exc}"
            rows.append(
                {
                    "engine": spec.ref,
                    "effective_from": spec.effective_from.isoformat(),
                    "implementation": spec.implementation,
                    "fingerprint": spec.code_fingerprint[:12],
                    "code": code,
                }
            )
        failed = any(r["code"] != "ok" for r in rows)
        columns = ["engine", "effective_from", "implementation", "fingerprint", "code"]
        return Outcome(data={"engines": rows}, lines=table_lines(rows, columns), exit_code=1 if failed else 0)
    missing = [
        flag
        for flag, value in (
            ("--name", args.name),
            ("--implementation", args.implementation),
            ("--effective-from", args.effective_from),
            ("--description", args.description),
        )
        if not value
    ]
    if missing:
        raise UsageError(f"engines declare needs {', '.join(missing)}")
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


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
