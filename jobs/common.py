"""What every job shares: common flags, the session, output, and turning errors into exit codes.

A job is a function ``run(args, ctx) -> Outcome``. This module is the only place where a
:class:`~lakehouse.errors.LakehouseError` becomes one line on stderr and an exit code;
``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.config import DEFAULT_CONF_PATH, LakehouseConfig, load_config
from lakehouse.errors import LakehouseError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakehouse.tables import TableRegistry
    from ledger import Clock, Ledger


@dataclass(frozen=True)
class Outcome:
    """What a command produced: a plain-data payload for ``--json`` and lines for people."""

    data: Mapping[str, Any]
    lines: Sequence[str] = ()
    exit_code: int = 0


@dataclass
class Context:
    """Configuration and a lazily built Spark session for one command invocation."""

    args: argparse.Namespace
    config: LakehouseConfig
    progress_enabled: bool = True
    _started: float = field(default_factory=time.monotonic)

    @cached_property
    def spark(self) -> SparkSession:
        from lakehouse.session import build_session

        self.progress("starting Spark (Delta + Iceberg)")
        return build_session(self.config)

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

    def progress(self, message: str) -> None:
        """Progress goes to stderr so that stdout stays clean for ``--json``."""
        if self.progress_enabled:
            elapsed = time.monotonic() - self._started
            print(f"[{elapsed:6.1f}s] {message}", file=sys.stderr, flush=True)


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags every command takes."""
    parser.add_argument(
        "--conf",
        type=Path,
        default=DEFAULT_CONF_PATH,
        help=f"configuration file (default: {DEFAULT_CONF_PATH})",
    )
    parser.add_argument("--workdir", type=Path, help="work directory (overrides the configuration)")
    parser.add_argument(
        "--format", choices=["delta", "iceberg"], help="force one format for every table (overrides zones)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--quiet", action="store_true", help="no progress messages on stderr")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def config_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Command-line flags that win over the file and the environment."""
    overrides: dict[str, Any] = {}
    if getattr(args, "workdir", None) is not None:
        overrides["workdir"] = str(args.workdir)
    if getattr(args, "format", None):
        overrides["force_format"] = args.format
    return overrides


Handler = Callable[[argparse.Namespace, Context], Outcome]


def execute(handler: Handler, args: argparse.Namespace) -> int:
    """Run one command: load config, call the handler, print, map errors to exit codes."""
    try:
        config = load_config(args.conf, overrides=config_overrides(args))
        ctx = Context(args=args, config=config, progress_enabled=not (args.quiet or args.json))
        outcome = handler(args, ctx)
    except LakehouseError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            traceback.print_exc()
        else:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            print(
                f"error: unexpected {type(exc).__name__}: {first} (rerun with --debug for details)",
                file=sys.stderr,
            )
        return 1
    emit(outcome, as_json=args.json)
    return outcome.exit_code


def emit(outcome: Outcome, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(outcome.data, indent=2, sort_keys=True, default=str))
    else:
        for line in outcome.lines:
            print(line)


def table_lines(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> list[str]:
    """A plain-text table for people."""
    cells = [[("" if r.get(c) is None else str(r.get(c))) for c in columns] for r in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    header = "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))
    rule = "  ".join("-" * w for w in widths)
    body = ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return [header, rule, *body]
