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
from typing import Any, NoReturn

from jobs.common import GLOBAL_OPTIONS_WITH_A_VALUE, Action, add_common_arguments, deprecation, execute
from jobs.output import output_for
from lakehouse.errors import EXIT_CODE_MEANINGS, ExitCode

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
    "verify-publication": "jobs.verify",
    "erase": "jobs.erase",
    "hold": "jobs.hold",
    "exceptions": "jobs.exceptions",
    "engines": "jobs.engines",
    "asof": "jobs.asof",
    "extract": "jobs.extract",
    "training-set": "jobs.training_set",
    "train": "jobs.train",
    "score": "jobs.score",
    "communities": "jobs.communities",
    "calibrate": "jobs.calibrate",
    "calibration-at": "jobs.calibration",
    "reindex": "jobs.reindex",
    "reconcile": "jobs.reconcile",
    "ledger": "jobs.ledger_job",
    "tables": "jobs.tables",
    "submit-args": "jobs.submit_args",
    "jars": "jobs.jars",
}
"""Command name -> module. Each module defines NAME, HELP, and either add_arguments(parser) and
run(args, ctx), or ACTIONS (name -> :class:`~jobs.common.Action`): one subcommand each."""

RENAMED: dict[str, str] = {
    "calibration": "calibration-at",
    "verify": "verify-publication",
}
"""Old command name -> new: the old one still works for one release, with a deprecation line
on stderr (as ``--as-of`` and ``--from`` do); neither ``--help`` nor the reference lists it."""


def _load(module_name: str) -> ModuleType:
    return importlib.import_module(module_name)


class ArgumentsRefused(Exception):
    """A command line argparse refuses; :func:`main` reports it like any other error (exit 2)."""

    exit_code = ExitCode.BAD_INPUT


class _Parser(argparse.ArgumentParser):
    """An argument parser that raises instead of printing usage and exiting, so that the
    refusal reaches the output layer (one line, or one JSON line with ``--json``)."""

    def error(self, message: str) -> NoReturn:
        raise ArgumentsRefused(f"{self.prog}: {message} (see {self.prog} --help)")


JVM_COMPONENTS = {
    "io.delta:delta-spark_": "Delta Lake",
    "org.apache.iceberg:iceberg-spark-runtime-": "Iceberg",
}
"""Coordinate prefix of a pinned JVM package (``jars.packages``' default) -> the name ``--version`` shows."""


def version_text() -> str:
    """``lakehouse-replay X (Spark Y, Delta Lake Z, Iceberg W)``: the installed package, the
    installed pyspark and the Delta and Iceberg jars pinned by default; nothing starts a JVM."""
    from importlib.metadata import PackageNotFoundError, version

    from lakehouse.config import JarSettings

    def installed(distribution: str) -> str:
        try:
            return version(distribution)
        except PackageNotFoundError:
            return "not installed"

    parts = [f"Spark {installed('pyspark')}"]
    for prefix, label in JVM_COMPONENTS.items():
        parts += [f"{label} {p.rsplit(':', 1)[1]}" for p in JarSettings().packages if p.startswith(prefix)]
    return f"lakehouse-replay {installed('lakehouse-replay')} ({', '.join(parts)})"


def exit_codes_text() -> str:
    """The exit-code table for ``lakehouse --help``, from :data:`lakehouse.errors.EXIT_CODE_MEANINGS`."""
    import textwrap

    return "exit codes:\n" + "\n".join(
        textwrap.fill(
            meaning.replace("`", ""),
            width=88,
            initial_indent=f"  {code.value:>3}  ",
            subsequent_indent=" " * 7,
        )
        for code, meaning in EXIT_CODE_MEANINGS.items()
    )


class _VersionAction(argparse.Action):
    """``--version``: print :func:`version_text` and exit 0 (computed only when asked for)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> NoReturn:
        sys.stdout.write(version_text() + "\n")
        sys.stdout.flush()
        parser.exit(0)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="lakehouse",
        description="A replayable medallion lakehouse on Spark, Delta Lake and Apache Iceberg.",
        allow_abbrev=False,  # an option is spelled out: --engine is never read as --engines
        epilog=exit_codes_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action=_VersionAction,
        help="print the version of lakehouse-replay, Spark and the pinned Delta Lake and Iceberg jars",
    )
    add_common_arguments(parser)  # global options: before the command, or after it (below)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name, allow_abbrev=False)
            continue
        module = _load(module_name)
        command = sub.add_parser(name, help=module.HELP, description=module.HELP, allow_abbrev=False)
        _add_command(command, module)
    if only in RENAMED:  # the old name, listed nowhere (no help=: argparse shows no line for it)
        new = RENAMED[only]
        module = _load(COMMANDS[new])
        command = sub.add_parser(only, description=module.HELP, allow_abbrev=False)
        _add_command(command, module)
        command.set_defaults(deprecations=[deprecation(f"lakehouse {only}", f"lakehouse {new}")])
    return parser


def _add_command(command: argparse.ArgumentParser, module: ModuleType) -> None:
    """A command's options, or its sub-actions as subcommands (each with its own options and
    help); the global options are taken at every level."""
    add_common_arguments(command, defaults=False)
    gated = bool(getattr(module, "QUALITY_GATES", False))  # see Context.spark
    actions: dict[str, Action] | None = getattr(module, "ACTIONS", None)
    if actions is None:
        module.add_arguments(command)
        command.set_defaults(handler=module.run, command_prog=command.prog, quality_gates=gated)
        return
    nested = command.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, action in actions.items():
        leaf = nested.add_parser(name, help=action.help, description=action.help, allow_abbrev=False)
        add_common_arguments(leaf, defaults=False)
        action.add_arguments(leaf)
        leaf.set_defaults(handler=action.run, command_prog=leaf.prog, quality_gates=gated)


def command_in(args_list: Sequence[str]) -> str | None:
    """The command a command line names: its first word that is neither an option nor a
    global option's value (``lakehouse --conf c.yaml asof ...`` is ``asof``)."""
    words = iter(args_list)
    for word in words:
        if word in GLOBAL_OPTIONS_WITH_A_VALUE:
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    chosen = command_in(args_list)
    parser = build_parser(only=chosen if chosen in COMMANDS or chosen in RENAMED else None)
    try:
        args, extra = parser.parse_known_args(args_list)
        if extra:  # named with the (sub)command that refused them, and its --help
            prog = getattr(args, "command_prog", parser.prog)
            raise ArgumentsRefused(f"{prog}: unrecognized arguments: {' '.join(extra)} (see {prog} --help)")
        if args.verbose and args.quiet:
            raise ArgumentsRefused("lakehouse: --verbose and --quiet: choose one")
    except ArgumentsRefused as exc:
        output_for("--json" in args_list).error(str(exc), exc.exit_code)
        return exc.exit_code
    if args.command is None:
        parser.print_help()
        return ExitCode.BAD_INPUT
    return execute(args.handler, args)


def run_as_script(command: str) -> int:
    """Entry point for ``spark-submit jobs/<module>.py ARGS``: same as ``lakehouse COMMAND ARGS``."""
    return main([command, *sys.argv[1:]])


if __name__ == "__main__":
    raise SystemExit(main())
