"""The documentation: the CLI reference matches the parser, and the site builds strictly.

Both start no JVM: the reference is rendered from the argparse parser alone, and
``mkdocs build --strict`` shows the notebooks as committed, without executing them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
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


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"mkdocs build --strict failed (run `make docs`):\n{result.stderr}"
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").is_file()
    assert (tmp_path / "site" / "notebooks" / "auditor_time_travel" / "index.html").is_file()


def test_readme_is_short_and_its_links_exist() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
        assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"
