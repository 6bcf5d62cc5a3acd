"""What every job shares: common flags, the session, logging, and turning errors into exit codes.

A job is a function ``run(args, ctx) -> Outcome``. This module is the only place where a
:class:`~lakehouse.errors.LakehouseError` becomes an error on stderr (one line, or one JSON
line with ``--json``) and an exit code; ``--debug`` shows the traceback as well. What a
job returns is written by the output layer (:mod:`jobs.output`).
"""

from __future__ import annotations

import argparse
import logging
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote, urlparse

from rich.console import Console

from jobs.output import Block, Outcome, Output, TableView, output_for, table_lines
from jobs.progress import StepProgress, configure_logging, log_level
from lakehouse.config import DEFAULT_CONF_PATH, LakehouseConfig, load_config
from lakehouse.errors import ExitCode, LakehouseError
from workloads.runs import RUN_STAMP

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakehouse.tables import TableRegistry
    from ledger import Clock, Ledger
    from ledger.chain import LedgerRecord
    from ledger.engines import EngineCatalog, EngineSpec
    from workloads.asof import PythonReader
    from workloads.replay.state import RunState

__all__ = [
    "Action",
    "Block",
    "Context",
    "EngineRelease",
    "Outcome",
    "TableView",
    "add_common_arguments",
    "execute",
    "table_lines",
]

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class Context:
    """Configuration and a lazily built Spark session for one command invocation."""

    args: argparse.Namespace
    config: LakehouseConfig
    steps: StepProgress = field(default_factory=StepProgress)

    @cached_property
    def spark(self) -> SparkSession:
        from lakehouse.catalog import check_catalog_reachable
        from lakehouse.session import build_session

        check_catalog_reachable(self.config)  # a catalog server that is down: one line, nothing started
        gated = bool(getattr(self.args, "quality_gates", False))
        if gated:
            # Great Expectations' import (3 s) overlaps the JVM's start. pyspark.sql is imported
            # first and the thread is awaited before the command goes on, so the command's own
            # imports never run beside it.
            import pyspark.sql  # noqa: F401

            from lakehouse.quality.runner import import_in_background

            import_in_background()
        self.progress("starting Spark (Delta + Iceberg)")
        session = build_session(self.config)
        if gated:
            from lakehouse.quality.runner import await_background_import

            await_background_import()
        return session

    @cached_property
    def registry(self) -> TableRegistry:
        from lakehouse.tables import TableRegistry

        return TableRegistry(self.spark, self.config)

    @cached_property
    def ledger(self) -> Ledger:
        from ledger import SystemClock, open_ledger

        return open_ledger(self.registry, clock=SystemClock())

    @property
    def clock(self) -> Clock:
        from ledger import SystemClock

        return SystemClock()

    def require_lakehouse(self) -> None:
        """Refuse, before Spark starts, a work dir that holds no lakehouse yet, saying how to make one."""
        from lakehouse.errors import UsageError

        warehouse = urlparse(self.config.warehouse_uri)
        if warehouse.scheme != "file":  # an object store: whether it holds tables, Spark will tell
            return
        if not Path(unquote(warehouse.path)).is_dir():
            raise UsageError(
                f"no lakehouse in {self.config.workdir_path}: build one first "
                f"(lakehouse demo, or generate + ingest + build), or pass --workdir"
            )

    def require_replay_run(self, run_id: str) -> RunState | None:
        """Refuse, before Spark starts, a RUN that is not a replay run id, a work dir without a
        lakehouse, and a run the ledger does not hold (read without a JVM, by deltalake or
        pyiceberg as ``asof --reader pyiceberg`` reads it); returns the run's state so read, for
        the command's own checks (its plan's approvers and consumers). A ledger that cannot be
        read that way is left to the command (None), which refuses an unknown run with the same
        line (exit 2)."""
        from lakehouse.errors import UsageError

        if not REPLAY_RUN_ID.fullmatch(run_id):
            raise UsageError(f"RUN {run_id!r} is not a replay run id (replay- and 16 hex digits)")
        mine = self.ledger_without_jvm(lambda reader: reader.run_records(run_id))
        if mine is None:
            return None
        from workloads.replay.state import run_state

        return run_state(run_id, [r.entry() for r in mine])  # UnknownRunError: exit 2

    def require_run(self, run_id: str, *, what: str, noun: str = "run") -> None:
        """Refuse, before Spark starts, a run id of the wrong shape (:data:`RUN_ID`), a work dir
        without a lakehouse, and a run the ledger does not hold (read without a JVM, as
        :meth:`require_replay_run` reads it): one line naming ``what`` (and the run as a
        ``noun``: a training set is its run), exit 2. A ledger that cannot be read that way is
        left to the command, which refuses an unknown run itself."""
        from lakehouse.errors import UnknownRunError, UsageError

        if not RUN_ID.fullmatch(run_id):
            raise UsageError(
                f"{what} {run_id!r} is not a run id (replay- and 16 hex digits, or "
                f"<command>-<UTC time>-<8 hex> as the command printed it)"
            )
        mine = self.ledger_without_jvm(lambda reader: reader.run_records(run_id))
        if mine is not None and not mine:
            raise UnknownRunError(unknown_run(what, run_id, noun))

    def ledger_without_jvm(
        self, read: Callable[[PythonReader], list[LedgerRecord]]
    ) -> list[LedgerRecord] | None:
        """What ``read`` finds in the ledger read without a JVM: :meth:`without_jvm`."""
        from ledger.store import LEDGER_TABLE

        return self.without_jvm(LEDGER_TABLE, read)

    def without_jvm(self, table: str, read: Callable[[PythonReader], list[T]]) -> list[T] | None:
        """What ``read`` finds in ``table`` read without a JVM (deltalake or pyiceberg), after
        refusing a work dir without a lakehouse; [] when the table does not exist yet; None
        when it cannot be read that way (the command reads it once Spark runs)."""
        self.require_lakehouse()
        if not self._may_exist(table):
            return []
        from deltalake.exceptions import TableNotFoundError
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        from workloads.asof import PythonReader

        try:
            return read(PythonReader(self.config))
        except (NoSuchTableError, NoSuchNamespaceError, TableNotFoundError):
            return []  # the catalog or the folder is there, the table not yet
        except Exception as exc:  # no JVM-free route to this table: the command will tell
            log.debug(
                "%s not read without a JVM (%s: %s); checked after Spark starts",
                table,
                type(exc).__name__,
                exc,
            )
            return None

    def _may_exist(self, table: str) -> bool:
        """False when ``table`` certainly does not exist yet, found without opening anything
        (opening the embedded SQLite catalog would create its file): an Iceberg table whose
        SQLite catalog file is missing, or a Delta table on local disk without its _delta_log."""
        from lakehouse.config import TableFormat
        from lakehouse.tables.registry import table_location, table_spec

        settings = self.config.tables.get(table)
        if settings is None:
            return True
        spec = table_spec(self.config, table, settings)
        if spec.format is TableFormat.ICEBERG:
            sqlite = "jdbc:sqlite:"
            if not self.config.iceberg_uri.startswith(sqlite):
                return True
            return Path(self.config.iceberg_uri.removeprefix(sqlite)).exists()
        location = urlparse(table_location(self.config, spec))
        if location.scheme != "file":  # an object store: deltalake will tell
            return True
        return (Path(unquote(location.path)) / "_delta_log").is_dir()

    def progress(self, message: str, *, done: int | None = None, total: int | None = None) -> None:
        """One step of long work (the callback library functions are handed), on stderr."""
        self.steps(message, done=done, total=total)


GLOBAL_OPTIONS_WITH_A_VALUE = ("--conf", "--workdir", "--format")
"""The global options that take a value (the command line's first other word is the command)."""


def add_common_arguments(parser: argparse.ArgumentParser, *, defaults: bool = True) -> None:
    """Flags every command takes, before or after the command's name.

    The top parser has them with their defaults; each command's parser with ``defaults=False``
    (``argparse.SUPPRESS``), so that a flag given before the command is not reset by the
    command's parser when it is not repeated after it.
    """

    def default(value: object) -> object:
        return value if defaults else argparse.SUPPRESS

    parser.add_argument(
        "--conf",
        type=Path,
        default=default(DEFAULT_CONF_PATH),
        help=f"configuration file (default: {DEFAULT_CONF_PATH})",
    )
    parser.add_argument(
        "--workdir", type=Path, default=default(None), help="work directory (overrides the configuration)"
    )
    parser.add_argument(
        "--format",
        choices=["delta", "iceberg"],
        default=default(None),
        help="force one format for every table (overrides zones)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        default=default(False),
        help="print the result as JSON (errors: one JSON line on stderr)",
    )
    loudness = parser.add_mutually_exclusive_group()
    loudness.add_argument(
        "--verbose",
        action="store_true",
        default=default(False),
        help="debug messages on stderr (the JVM's start-up lines among them)",
    )
    loudness.add_argument(
        "--quiet", action="store_true", default=default(False), help="only warnings and errors on stderr"
    )
    parser.add_argument(
        "--debug", action="store_true", default=default(False), help="show tracebacks on errors"
    )


class _OldSpelling(argparse.Action):
    """An option's old spelling: stores its value where the new one does and notes a
    deprecation line, which :func:`execute` writes on stderr."""

    def __init__(self, option_strings: list[str], dest: str, *, new: str, **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kwargs)

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        setattr(namespace, self.dest, values)
        notes = [*getattr(namespace, "deprecations", ())]
        notes.append(deprecation(str(option), self.new))
        namespace.deprecations = notes


def deprecation(old: str, new: str) -> str:
    """The one line a deprecated spelling (an option's, a command's) writes on stderr."""
    return f"{old} is deprecated: use {new} (the old spelling goes in the next release)"


def add_renamed_argument(parser: argparse.ArgumentParser, new: str, old: str, **kwargs: Any) -> None:
    """``new`` as documented, and ``old`` still accepted for one release with a deprecation line
    (one name per meaning: ``--at`` for knowledge time, ``--since``/``--until`` for ranges)."""
    if kwargs.get("help"):
        kwargs["help"] += f" ({old}: the old spelling, accepted until the next release)"
    action = parser.add_argument(new, **kwargs)
    typed: dict[str, Any] = {"type": action.type} if action.type is not None else {}
    parser.add_argument(old, dest=action.dest, action=_OldSpelling, new=new, **typed)


def config_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Command-line flags that win over the file and the environment."""
    overrides: dict[str, Any] = {}
    if getattr(args, "workdir", None) is not None:
        overrides["workdir"] = str(args.workdir)
    if getattr(args, "format", None):
        overrides["force_format"] = args.format
    return overrides


Handler = Callable[[argparse.Namespace, Context], Outcome]


@dataclass(frozen=True)
class Action:
    """One sub-action of a command (``lakehouse engines declare``): a subcommand of its own,
    with its help, its options and its handler. A command module with sub-actions defines
    ``ACTIONS: dict[str, Action]`` instead of ``add_arguments`` and ``run``."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Handler


def execute(handler: Handler, args: argparse.Namespace) -> int:
    """Run one command: set up logging, load config, call the handler, write the result or
    the error, and return the exit code."""
    output = output_for(getattr(args, "json", False))
    errors = Console(stderr=True)
    configure_logging(
        log_level(
            verbose=getattr(args, "verbose", False),
            quiet=getattr(args, "quiet", False),
            as_json=getattr(args, "json", False),
        ),
        console=errors,
    )
    for note in getattr(args, "deprecations", ()):
        output.warning(note)
    with StepProgress(errors) as steps:
        try:
            config = load_config(args.conf, overrides=config_overrides(args))
            default_files(args, config)
            outcome = handler(args, Context(args=args, config=config, steps=steps))
        except LakehouseError as exc:
            steps.stop()
            return _fail(output, str(exc), exc.exit_code, debug=args.debug)
        except KeyboardInterrupt:
            steps.stop()
            return _fail(output, "interrupted", ExitCode.INTERRUPTED, debug=False)
        except Exception as exc:
            steps.stop()
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            hint = "" if args.debug else " (rerun with --debug for details)"
            return _fail(
                output, f"unexpected {type(exc).__name__}: {first}{hint}", ExitCode.FAILED, debug=args.debug
            )
    output.result(outcome)
    if outcome.error is not None:
        output.error(outcome.error, outcome.exit_code)
    return outcome.exit_code


def add_policies_argument(parser: argparse.ArgumentParser) -> None:
    """``--policies PATH``: the policy file (lateness; how long history stays protected)."""
    parser.add_argument(
        "--policies",
        type=Path,
        help="policy file (default: policies_file in the configuration, else <workdir>/policies.yaml "
        "if it exists, else conf/policies.yaml)",
    )


def add_engines_argument(parser: argparse.ArgumentParser, help: str = "declared engines") -> None:
    """``--engines PATH``: the declared engines file."""
    parser.add_argument(
        "--engines",
        type=Path,
        help=f"{help} (default: engines_file in the configuration, else <workdir>/engines.yaml if it "
        "exists, as after lakehouse demo, else conf/engines.yaml)",
    )


def default_files(args: argparse.Namespace, config: LakehouseConfig) -> None:
    """``--engines`` and ``--policies`` not given: the configuration's file, else the work dir's
    (``<workdir>/engines.yaml``, ``<workdir>/policies.yaml``: :meth:`LakehouseConfig.workdir_file`)
    if it exists, else the shipped one (docs/reference/configuration.md)."""
    if "engines" in vars(args) and args.engines is None:
        from workloads.runs import DEFAULT_ENGINES

        args.engines = _first_of(config.engines_file, config.workdir_file("engines"), DEFAULT_ENGINES)
    if "policies" in vars(args) and args.policies is None:
        from workloads.policies import DEFAULT_POLICY_PATH

        args.policies = _first_of(config.policies_file, config.workdir_file("policies"), DEFAULT_POLICY_PATH)


def _first_of(configured: Path | None, in_workdir: Path, shipped: Path) -> Path:
    if configured is not None:
        return configured
    return in_workdir if in_workdir.is_file() else shipped


def positive_int(text: str) -> int:
    """A whole number of at least 1 (argparse refuses anything else: exit 2, naming the flag)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


REPLAY_RUN_ID = re.compile(r"replay-[0-9a-f]{16}")
"""A replay's run id: ``replay-`` and 16 hex digits of its identity (workloads.replay.identity)."""

RUN_ID = re.compile(rf"{REPLAY_RUN_ID.pattern}|[a-z][a-z0-9-]*-{RUN_STAMP}")
"""Any run id the ledger records: a replay's, or another recorded run's, ``<command>-<UTC time>-<8
hex>`` (workloads.runs.new_run_id: ``ingest-orders-...``, ``training-set-...``, ``erase-...``)."""


def unknown_run(what: str, run_id: str, noun: str = "run") -> str:
    """The line that refuses a well-formed run id the ledger does not hold (as the line that
    refuses a training set gold.training_sets does not hold names it: unquoted)."""
    return f"{what} {run_id}: no such {noun} in the ledger"


TRAINING_SET_ID = re.compile(rf"training-set-{RUN_STAMP}")
"""A training set's id: the run id ``lakehouse training-set`` printed (workloads.runs.new_run_id)."""


def training_set_id(text: str) -> str:
    """``--training-set ID``, checked for its shape before Spark reads gold.training_sets."""
    if not TRAINING_SET_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a training set id (training-set-<UTC time>-<8 hex>, as training-set prints)"
        )
    return text


@dataclass(frozen=True)
class EngineRelease:
    """``--engine``'s value, one meaning everywhere: an engine release ``NAME@VERSION``; where a
    command allows it, ``NAME`` alone (``version`` None) means the version in force."""

    name: str
    version: int | None = None

    def __str__(self) -> str:
        return self.name if self.version is None else f"{self.name}@{self.version}"


ENGINE_MEANING = "an engine release, NAME@VERSION (e.g. correlation@1)"
"""How every command's help begins ``--engine``'s (docs/concepts.md, glossary: engine release)."""


def engine_release(text: str, *, name_alone: bool = False) -> EngineRelease:
    """``NAME@VERSION`` (or ``NAME``, where ``name_alone``) -> :class:`EngineRelease`; argparse
    refuses a malformed value (exit 2, one line naming ``--engine``). Whether the release is
    declared is checked against the engines file by :func:`resolve_release`."""
    name, sep, version = text.partition("@")
    if not name.isidentifier() or (sep and not (version.isdigit() and int(version) >= 1)):
        expected = "NAME@VERSION or NAME" if name_alone else "NAME@VERSION"
        raise argparse.ArgumentTypeError(f"expected {expected} (e.g. entity_resolution@1), got {text!r}")
    if not sep and not name_alone:
        raise argparse.ArgumentTypeError(
            f"expected NAME@VERSION (e.g. {name}@1), got {text!r}: this command runs one declared release"
        )
    return EngineRelease(name, int(version) if sep else None)


def add_engine_argument(
    parser: argparse.ArgumentParser, help: str, *, name_alone: str | None = None, **kwargs: Any
) -> None:
    """``--engine``: :data:`ENGINE_MEANING`, then ``name_alone`` (what NAME alone means for this
    command; None: NAME@VERSION is required), then the command's ``help``."""
    alone = f"; NAME alone: {name_alone}" if name_alone else ""
    kwargs.setdefault("metavar", "NAME@VERSION" if name_alone is None else "NAME[@VERSION]")
    parser.add_argument(
        "--engine",
        type=partial(engine_release, name_alone=name_alone is not None),
        help=f"{ENGINE_MEANING}{alone}: {help}",
        **kwargs,
    )


def resolve_release(
    catalog: EngineCatalog, release: EngineRelease, *, at: date | None = None, name_alone: bool = False
) -> EngineSpec:
    """The declared version ``--engine`` names (NAME alone: the newest effective at ``at``, where
    ``name_alone``), checked against the engines file before a JVM starts: exit 2, one line
    naming ``--engine``."""
    from lakehouse.errors import UnknownEngineError, UsageError

    if release.version is None and not name_alone:
        raise UsageError(f"--engine {release}: expected NAME@VERSION (e.g. {release}@1)")
    try:
        return catalog.resolve(release.name, release.version, at=at if release.version is None else None)
    except UnknownEngineError as exc:
        raise UnknownEngineError(f"--engine {release}: {exc}") from None


def _fail(output: Output, message: str, exit_code: int, *, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    output.error(message, exit_code)
    return exit_code
