"""Logging and progress of a command, on stderr so that stdout stays the result.

:func:`configure_logging` is called once per invocation: our packages (``lakehouse``,
``ledger``, ``workloads``, ``jobs``) log at INFO by default, DEBUG with ``--verbose`` and
WARNING with ``--quiet`` (and with ``--json``, unless ``--verbose``); other libraries log
warnings only. Every line carries the seconds elapsed since the command started.

Library code reports progress through a callback it is given (``progress(message)``, or
``progress(message, done=i, total=n)`` when it knows the counts). :class:`StepProgress`
is that callback: each call is logged at INFO and, on a terminal, also moves a
``rich.progress`` line with the current step, its count and the elapsed time. Off a
terminal, and under ``--quiet`` or ``--json``, only the log lines remain (or nothing).
"""

from __future__ import annotations

import logging
import sys
import time
from datetime import datetime
from types import TracebackType
from typing import Protocol

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import (
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

OUR_PACKAGES = ("lakehouse", "ledger", "workloads", "jobs")
"""Loggers whose level the command-line flags set; every other logger stays at WARNING."""
PYSPARK_QUERY_LOGGER = "SQLQueryContextLogger"
"""pyspark's logger that prints every failed SQL statement, with its JVM stack, as JSON on
stderr, including statements the toolkit expects to fail and handles (refreshing a table
that does not exist yet). An error that matters reaches the user as the command's own
one-line error (``--debug`` adds the traceback), so this one is silenced."""

log = logging.getLogger("jobs.progress")


class ProgressCallback(Protocol):
    """What library functions that report progress are handed (``Callable[[str], None]`` fits
    where no counts are known)."""

    def __call__(self, message: str, *, done: int | None = None, total: int | None = None) -> None: ...


def log_level(*, verbose: bool = False, quiet: bool = False, as_json: bool = False) -> int:
    """The level of our loggers: DEBUG for --verbose, WARNING for --quiet or --json, else INFO."""
    if verbose:
        return logging.DEBUG
    if quiet or as_json:
        return logging.WARNING
    return logging.INFO


class _ElapsedFormatter(logging.Formatter):
    """``[  12.3s] message``; warnings and errors name their level and logger."""

    def __init__(self, started: float) -> None:
        super().__init__()
        self.started = started

    def format(self, record: logging.LogRecord) -> str:
        elapsed = record.created - self.started
        message = record.getMessage()
        if record.levelno >= logging.WARNING:
            message = f"{record.levelname.lower()}: {record.name}: {message}"
        elif record.levelno < logging.INFO:
            message = f"debug: {record.name}: {message}"
        text = f"[{elapsed:6.1f}s] {message}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


class _StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is when a record arrives (tests swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


_INSTALLED_ATTRIBUTE = "_lakehouse_cli_handler"


def configure_logging(level: int, *, console: Console | None = None, started: float | None = None) -> None:
    """Send log records to stderr with the elapsed time, replacing a previous configuration.

    With a terminal ``console`` records go through a ``RichHandler`` on it (so they print
    above a live progress line); otherwise through a plain formatter.
    """
    origin = time.time() if started is None else started
    root = logging.getLogger()
    for previous in list(root.handlers):
        if getattr(previous, _INSTALLED_ATTRIBUTE, False):
            root.removeHandler(previous)
    handler: logging.Handler
    if console is not None and console.is_terminal:
        handler = RichHandler(
            console=console,
            show_path=False,
            markup=False,
            rich_tracebacks=False,
            log_time_format=lambda moment: _elapsed_text(moment, origin),
            omit_repeated_times=False,
        )
    else:
        handler = _StderrHandler()
        handler.setFormatter(_ElapsedFormatter(origin))
    setattr(handler, _INSTALLED_ATTRIBUTE, True)
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.WARNING:
        root.setLevel(logging.WARNING)
    for name in OUR_PACKAGES:
        logging.getLogger(name).setLevel(level)
    logging.getLogger(PYSPARK_QUERY_LOGGER).setLevel(logging.CRITICAL)


def _elapsed_text(moment: datetime, origin: float) -> Text:
    return Text(f"{moment.timestamp() - origin:6.1f}s")


class StepProgress:
    """The progress callback handed to library code: a log line per step, plus a live line on
    a terminal (current step, steps done or ``done/total``, elapsed time)."""

    def __init__(self, console: Console | None = None) -> None:
        self._console = console
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._steps = 0

    @property
    def live(self) -> bool:
        """Whether a live progress line is drawn (a terminal, and INFO messages are shown)."""
        return (
            self._console is not None
            and self._console.is_terminal
            and logging.getLogger("jobs").isEnabledFor(logging.INFO)
        )

    def __call__(self, message: str, *, done: int | None = None, total: int | None = None) -> None:
        counted = f" ({done}/{total})" if done is not None and total is not None else ""
        log.info("%s%s", message, counted)
        if not self.live:
            return
        if self._progress is None:
            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=self._console,
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(message, total=None)
        assert self._task is not None
        if done is not None:
            self._progress.update(self._task, description=message, completed=done, total=total)
        else:
            self._steps += 1
            self._progress.update(self._task, description=message, completed=self._steps, total=None)

    def stop(self) -> None:
        """Remove the live line (the log lines stay)."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
            self._task = None

    def __enter__(self) -> StepProgress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
