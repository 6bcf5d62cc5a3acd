"""How a command's result reaches people and programs: one output layer for every job.

A job returns an :class:`Outcome`: the result object itself (dumped generically for
``--json`` by :func:`plain`, so result types need no ``to_dict``) and the blocks people
read (lines of text and :class:`TableView` tables, drawn with ``rich``). An
:class:`Output` writes the outcome on stdout and errors on stderr: :class:`ConsoleOutput`
for people, :class:`JsonOutput` for programs (``--json``), where an error is one JSON line
``{"error": ..., "exit_code": ...}``.
"""

from __future__ import annotations

import dataclasses
import io
import json
import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from enum import Enum
from pathlib import PurePath
from typing import Any
from uuid import UUID

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from lakehouse.errors import ExitCode

NON_TERMINAL_WIDTH = 10_000
"""Output that is not a terminal (a pipe, a file, a test) is never wrapped or folded."""


def plain(value: object) -> Any:
    """``value`` as JSON-able data: dicts, lists, strings, numbers, booleans and None.

    Frozen dataclasses become a dict of their fields, pydantic models their JSON dump
    (``model_dump(mode="json")``: aliases and computed fields as the model declares them),
    enums their value, dates and times ISO-8601 text, paths and decimals text, mappings
    dicts with text keys, and other sequences and sets lists (sets sorted). Anything
    else becomes ``str(value)``, as ``json.dumps(default=str)`` did before.
    """
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, Enum):
        return plain(value.value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump) and not isinstance(value, type):
        return model_dump(mode="json")
    if isinstance(value, Mapping):
        return {_key(k): plain(v) for k, v in value.items()}
    if isinstance(value, Set):
        items = [plain(v) for v in value]
        return sorted(items, key=json.dumps)
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [plain(v) for v in value]
    if isinstance(value, PurePath | Decimal | UUID | timedelta):
        return str(value)
    return str(value)


def _key(key: object) -> str:
    converted = plain(key)
    return converted if isinstance(converted, str) else json.dumps(converted)


@dataclass(frozen=True)
class TableView:
    """Rows shown to people as a table; the JSON output is the result, not this view."""

    rows: Sequence[Mapping[str, Any]]
    columns: Sequence[str]
    title: str | None = None


Block = str | TableView
"""One piece of human output: a line of text (printed as is, never as markup) or a table."""


@dataclass(frozen=True)
class Outcome:
    """What a command produced: the result (``--json`` prints :func:`plain` of it) and
    the blocks people read."""

    data: object
    lines: Sequence[Block] = ()
    exit_code: int = ExitCode.DONE
    error: str | None = None
    """Written as an error (stderr) after the result, for a result that is also a failure."""


def table_lines(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> list[Block]:
    """A table among the human lines of an :class:`Outcome` (drawn by the output layer)."""
    return [TableView(rows=rows, columns=columns)]


class Output(ABC):
    """Where one invocation writes its result (stdout) and its errors (stderr)."""

    @abstractmethod
    def result(self, outcome: Outcome) -> None:
        """Write what the command produced."""

    @abstractmethod
    def error(self, message: str, exit_code: int) -> None:
        """Write one error; the caller returns ``exit_code``."""

    @abstractmethod
    def warning(self, message: str) -> None:
        """Write one warning (a deprecated spelling, say); the command goes on."""


class JsonOutput(Output):
    """For programs: the result as indented JSON on stdout, an error as one JSON line on stderr."""

    def result(self, outcome: Outcome) -> None:
        sys.stdout.write(json.dumps(plain(outcome.data), indent=2, sort_keys=True) + "\n")
        sys.stdout.flush()

    def error(self, message: str, exit_code: int) -> None:
        sys.stderr.write(json.dumps({"error": message, "exit_code": exit_code}) + "\n")
        sys.stderr.flush()

    def warning(self, message: str) -> None:
        sys.stderr.write(json.dumps({"warning": message}) + "\n")
        sys.stderr.flush()


class ConsoleOutput(Output):
    """For people: text lines and rich tables on stdout, ``error: ...`` on stderr.

    On a terminal tables have a bold header and fit its width; elsewhere (a pipe, a file,
    a test) there are no colours or control codes and nothing is wrapped.
    """

    def result(self, outcome: Outcome) -> None:
        console = Console(highlight=False, emoji=False)
        if console.is_terminal:
            for block in outcome.lines:
                _print_block(console, block)
            return
        sys.stdout.write(render_plain(outcome.lines))
        sys.stdout.flush()

    def error(self, message: str, exit_code: int) -> None:
        del exit_code
        sys.stderr.write(f"error: {message}\n")
        sys.stderr.flush()

    def warning(self, message: str) -> None:
        sys.stderr.write(f"warning: {message}\n")
        sys.stderr.flush()


def render_plain(blocks: Sequence[Block]) -> str:
    """The human output as plain text: no colours, no wrapping, no trailing spaces."""
    buffer = io.StringIO()
    console = Console(
        file=buffer, width=NON_TERMINAL_WIDTH, color_system=None, force_terminal=False, highlight=False
    )
    for block in blocks:
        _print_block(console, block)
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())


def _print_block(console: Console, block: Block) -> None:
    if isinstance(block, TableView):
        console.print(rich_table(block))
    else:
        console.print(block, markup=False, highlight=False, emoji=False, soft_wrap=True)


def rich_table(view: TableView) -> Table:
    """A compact table: a header, a rule under it, no outer border, cells as text."""
    table = Table(
        title=view.title,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        header_style="bold",
        highlight=False,
    )
    for column in view.columns:
        table.add_column(column, overflow="fold")
    for row in view.rows:
        table.add_row(*(_cell(row.get(column)) for column in view.columns))
    return table


def _cell(value: object) -> Text:
    """A cell's text, never read as markup: scalars as ``str`` shows them, structures as JSON."""
    if value is None:
        return Text("")
    converted = plain(value)
    if isinstance(converted, str):
        return Text(converted)
    return Text(json.dumps(converted) if isinstance(converted, dict | list) else str(value))


def output_for(as_json: bool) -> Output:
    """The output of one invocation: JSON for ``--json``, else the console."""
    return JsonOutput() if as_json else ConsoleOutput()
