"""The documentation: the CLI reference matches the parser (rendered from argparse alone, no JVM)."""

from __future__ import annotations

from pathlib import Path

from jobs import cli_reference

ROOT = Path(__file__).resolve().parent.parent


def test_cli_reference_matches_the_parser() -> None:
    committed = cli_reference.PAGE.read_text(encoding="utf-8")
    assert committed == cli_reference.render(), (
        f"{cli_reference.PAGE.relative_to(ROOT)} differs from the parser: "
        f"run `make docs` or `{cli_reference.REGENERATE}` and commit the page"
    )


def test_cli_reference_is_deterministic() -> None:
    assert cli_reference.render() == cli_reference.render()
