"""The ``lakehouse`` command (also ``python -m jobs``).

Each command lives in its own module under ``jobs/`` that can also be run directly with
``spark-submit jobs/<module>.py ...`` and the same arguments. Command modules are imported
only when used, so ``lakehouse --help`` does not start Python's heavy imports.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from jobs.common import add_common_arguments, execute
from jobs.output import output_for

COMMANDS: dict[str, str] = {
    "demo": "jobs.demo",
    "generate": "jobs.generate",
    "ingest": "jobs.ingest",
    "build": "jobs.build",
    "replay": "jobs.replay",
    "approve": "jobs.approve",
    "ack": "jobs.ack",
    "publish": "jobs.publish",
    "rollback": "jobs.rollback",
    "protect": "jobs.protect",
    "maintain": "jobs.maintain",
    "progress": "jobs.source_progress",
    "stream": "jobs.stream",
    "divergence": "jobs.divergence",
    "verify": "jobs.verify",
    "erase": "jobs.erase",
    "hold": "jobs.hold",
    "exceptions": "jobs.exceptions",
    "engines": "jobs.engines",
    "asof": "jobs.asof",
    "extract": "jobs.extract",
    "training-set": "jobs.training_set",
    "train": "jobs.train",
    "score": "jobs.score",
    "calibrate": "jobs.calibrate",
    "calibration": "jobs.calibration",
    "reindex": "jobs.reindex",
    "reconcile": "jobs.reconcile",
    "ledger": "jobs.ledger_job",
    "tables": "jobs.tables",
    "submit-args": "jobs.submit_args",
    "jars": "jobs.jars",
}
"""Command name -> module. Each module defines NAME, HELP, add_arguments(parser), run(args, ctx)."""


def _load(module_name: str) -> ModuleType:
    return importlib.import_module(module_name)


class ArgumentsRefused(Exception):
    """A command line argparse refuses; :func:`main` reports it like any other error (exit 2)."""

    exit_code = 2


class _Parser(argparse.ArgumentParser):
    """An argument parser that raises instead of printing usage and exiting, so that the
    refusal reaches the output layer (one line, or one JSON line with ``--json``)."""

    def error(self, message: str) -> NoReturn:
        raise ArgumentsRefused(f"{self.prog}: {message} (see {self.prog} --help)")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="lakehouse",
        description="A replayable medallion lakehouse on Spark, Delta Lake and Apache Iceberg.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name)
            continue
        module = _load(module_name)
        command = sub.add_parser(name, help=module.HELP, description=module.HELP)
        add_common_arguments(command)
        module.add_arguments(command)
        command.set_defaults(handler=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    chosen = next((a for a in args_list if not a.startswith("-")), None)
    parser = build_parser(only=chosen if chosen in COMMANDS else None)
    try:
        args = parser.parse_args(args_list)
    except ArgumentsRefused as exc:
        output_for("--json" in args_list).error(str(exc), exc.exit_code)
        return exc.exit_code
    if args.command is None:
        parser.print_help()
        return 2
    return execute(args.handler, args)


def run_as_script(command: str) -> int:
    """Entry point for ``spark-submit jobs/<module>.py ARGS``: same as ``lakehouse COMMAND ARGS``."""
    return main([command, *sys.argv[1:]])


if __name__ == "__main__":
    raise SystemExit(main())
