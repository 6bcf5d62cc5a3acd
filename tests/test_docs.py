"""The documentation: the CLI reference matches the parser, the site builds strictly, and its
diagrams load the pinned mermaid the site serves itself.

All start no JVM: the reference is rendered from the argparse parser alone, and
``mkdocs build --strict`` shows the notebooks as committed, with the outputs ``make notebooks``
gave them (checked by ``tests/test_notebooks_docs.py``), without executing them.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from docs_tools import mermaid
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


def test_the_site_loads_the_mermaid_build_make_docs_fetches() -> None:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    config = yaml.load(text, Loader=yaml.BaseLoader)  # not SafeLoader: mkdocs.yml names a Python function
    assert mermaid.SITE_PATH in config["extra_javascript"]
    assert ROOT / config["docs_dir"] / mermaid.SITE_PATH == mermaid.TARGET
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert str(mermaid.TARGET.relative_to(ROOT)) in ignored, "3.5 MB of vendored JavaScript stays out of git"


def tarball(build: bytes) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name, data in ((mermaid.MEMBER, build), (mermaid.LICENSE_MEMBER, b"MIT")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_mermaid_build_is_taken_only_with_its_pinned_checksums(monkeypatch: pytest.MonkeyPatch) -> None:
    good = tarball(b"globalThis.mermaid = {};")
    monkeypatch.setattr(mermaid, "TARBALL_SHA256", sha(good))
    monkeypatch.setattr(mermaid, "SHA256", sha(b"globalThis.mermaid = {};"))
    assert mermaid.extract(good) == (b"globalThis.mermaid = {};", b"MIT")
    with pytest.raises(ValueError, match="sha256"):
        mermaid.extract(tarball(b"globalThis.mermaid = evil;"))
    other = tarball(b"globalThis.mermaid = evil;")
    monkeypatch.setattr(mermaid, "TARBALL_SHA256", sha(other))
    with pytest.raises(ValueError, match=re.escape(mermaid.MEMBER)):
        mermaid.extract(other)


def test_without_network_make_docs_goes_on_and_writes_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def offline(*args: Any, **kwargs: Any) -> Any:
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    monkeypatch.setattr(mermaid, "TARGET", tmp_path / "mermaid.min.js")
    assert mermaid.main() == 0
    assert "not fetched (<urlopen error no network>)" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_build_that_is_not_the_pinned_one_is_an_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    class Response(io.BytesIO):
        def __enter__(self) -> Response:
            return self

    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: Response(tarball(b"not mermaid")))
    monkeypatch.setattr(mermaid, "TARGET", tmp_path / "mermaid.min.js")
    assert mermaid.main() == 1
    assert "sha256" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
