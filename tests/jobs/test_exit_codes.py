"""Exit codes follow one documented table, one meaning per code: the reference page's table, the
``--help`` text and every command take them from :class:`lakehouse.errors.ExitCode`."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakehouse.errors import EXIT_CODE_MEANINGS, ExitCode, LakehouseError

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("jobs", "workloads", "ledger", "lakehouse")


def documented_table() -> dict[int, str]:
    section = (REPO / "docs" / "reference" / "exit-codes.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", section, flags=re.MULTILINE)
    return {int(code): meaning for code, meaning in rows}


def test_the_documented_table_is_the_code_s_table() -> None:
    assert documented_table() == {code.value: meaning for code, meaning in EXIT_CODE_MEANINGS.items()}
    assert set(EXIT_CODE_MEANINGS) == set(ExitCode), "every code has its meaning"


def test_help_lists_every_exit_code() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "jobs", "--help"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    epilog = result.stdout[result.stdout.index("exit codes:") :]
    assert [int(code) for code in re.findall(r"^ +(\d+)  ", epilog, flags=re.MULTILINE)] == list(ExitCode)


def _subclasses(cls: type[LakehouseError]) -> Iterator[type[LakehouseError]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


@pytest.mark.parametrize("error", [LakehouseError, *_subclasses(LakehouseError)], ids=lambda e: e.__name__)
def test_every_error_exits_with_a_documented_code(error: type[LakehouseError]) -> None:
    assert error.exit_code in set(ExitCode)
    assert isinstance(error.exit_code, ExitCode), (
        f"{error.__name__}.exit_code: write ExitCode.X, not a number"
    )


def _numeric_exit_codes(path: Path) -> Iterator[str]:
    """``exit_code=<number>`` (a keyword, an assignment or a conditional), or ``return <number>``
    in a function named ``*exit_code``, anywhere in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        values: list[ast.expr] = []
        if isinstance(node, ast.keyword) and node.arg == "exit_code":
            values = [node.value]
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id.endswith(("exit_code", "_EXIT")) for t in targets):
                values = [node.value] if node.value is not None else []
        if isinstance(node, ast.FunctionDef) and node.name.endswith("exit_code"):
            values += [r.value for r in ast.walk(node) if isinstance(r, ast.Return) and r.value is not None]
        for value in values:
            for inner in ast.walk(value):
                if isinstance(inner, ast.Constant) and type(inner.value) is int:
                    yield f"{path.relative_to(REPO)}:{inner.lineno}: exit code {inner.value}"


def test_commands_name_their_exit_codes_from_the_table() -> None:
    found = [
        hit
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
        for hit in _numeric_exit_codes(path)
    ]
    assert found == []


NAMED_BY_COMMAND = (ExitCode.CHECK_FAILED, ExitCode.HELD, ExitCode.INJECTED_FAILURE, ExitCode.ROUTES_DISAGREE)
"""The codes whose documented meaning names the commands that exit with them (0-3 and 130 are
every command's)."""


def documented_commands(code: ExitCode) -> set[str]:
    """The commands the documented table names for ``code``: each `` `span` `` of its meaning that
    starts with a command, with its sub-action if it names one (``ledger verify [--history]`` ->
    ``ledger verify``; ``erase --verify`` -> ``erase``)."""
    from jobs.cli import COMMANDS

    named: set[str] = set()
    for span in re.findall(r"`([^`]+)`", documented_table()[code.value]):
        words = span.split()
        if words and words[0] in COMMANDS:
            sub_action = len(words) > 1 and not words[1].startswith("-")
            named.add(f"{words[0]} {words[1]}" if sub_action else words[0])
    return named


def _codes_in(function: ast.AST) -> set[ExitCode]:
    return {
        ExitCode[node.attr]
        for node in ast.walk(function)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "ExitCode"
        and node.attr in ExitCode.__members__
    }


def _handlers() -> Iterator[tuple[str, Path, str]]:
    """(command as typed, its module's file, the name of the function that runs it) for every
    command and sub-action of the CLI."""
    import importlib

    from jobs.cli import COMMANDS

    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        path = Path(module.__file__ or "")
        actions = getattr(module, "ACTIONS", None)
        if actions is None:
            yield name, path, module.run.__name__
        else:
            for action, spec in actions.items():
                yield f"{name} {action}", path, spec.run.__name__


def test_each_command_exits_only_with_codes_documented_for_it() -> None:
    """A command (or sub-action) whose module names exit 4, 5, 6 or 7 in the function that runs it,
    or in a function of its module named ``*exit_code``, is one the documented table names for
    that code (docs/reference/exit-codes.md). Codes that come from raised errors are checked by
    the CLI history tests (Spark), each command's actual code against this table's meaning."""
    problems = []
    for command, path, handler in _handlers():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and (node.name == handler or node.name.endswith("exit_code"))
        ]
        codes = set().union(*(_codes_in(f) for f in functions)) if functions else set()
        for code in sorted(codes & set(NAMED_BY_COMMAND)):
            named = documented_commands(code)
            if command not in named and command.split()[0] not in named:
                problems.append(
                    f"{command} ({path.relative_to(REPO)}) exits {code.value}, not documented for it"
                )
    assert problems == []
    assert "reconcile" in documented_commands(ExitCode.HELD), "the table is read"
