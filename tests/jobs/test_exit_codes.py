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
    """``exit_code=<number>`` (a keyword, an assignment or a conditional) anywhere in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        values: list[ast.expr] = []
        if isinstance(node, ast.keyword) and node.arg == "exit_code":
            values = [node.value]
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id.endswith(("exit_code", "_EXIT")) for t in targets):
                values = [node.value] if node.value is not None else []
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
