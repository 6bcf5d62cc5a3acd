"""A pinned mermaid build for the site, so that its diagrams render without internet.

Material for MkDocs draws a ```` ```mermaid ```` block with the global ``mermaid`` when a page
already defines one, and otherwise loads ``mermaid@11`` from unpkg.com. ``mkdocs.yml`` lists
:data:`TARGET` in ``extra_javascript``; ``make docs`` runs this module first, which puts the
pinned release there: the npm registry's tarball, checked against its pinned sha256, and the
one file taken out of it, checked again (the tarball is 17 MB, the file 3.5 MB: fetched, not
committed; ``.gitignore`` lists it).

Without network the build goes on (a warning, exit 0): the page then asks for a file that is
not there, and Material falls back to the CDN, as before. A download that does not match its
checksum is an error (exit 1), and nothing is written.
"""

from __future__ import annotations

import hashlib
import io
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
VERSION: Final = "11.17.2"
"""The newest mermaid 11 when pinned: the major version Material 9 loads from its CDN."""
TARBALL: Final = f"https://registry.npmjs.org/mermaid/-/mermaid-{VERSION}.tgz"
TARBALL_SHA256: Final = "6ad2f42c3fc26bbf9e45cbb6d11898972573ea52b33a5f4ff51952899f950ffd"
MEMBER: Final = "package/dist/mermaid.min.js"
SHA256: Final = "581ed7d74bd9048d0e3a91363927d72ef22942d7722546b27f7cc29e35390eb8"
LICENSE_MEMBER: Final = "package/LICENSE"
SITE_PATH: Final = "assets/javascripts/mermaid.min.js"
"""Where the site serves it (relative to ``docs/``), as ``extra_javascript`` in ``mkdocs.yml`` names it."""
TARGET: Final = ROOT / "docs" / SITE_PATH
LICENSE: Final = TARGET.with_name("mermaid.LICENSE")
TIMEOUT: Final = 120


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def present(target: Path = TARGET) -> bool:
    """Whether ``target`` holds the pinned build."""
    return target.is_file() and sha256(target.read_bytes()) == SHA256


def extract(tarball: bytes) -> tuple[bytes, bytes]:
    """The minified build and its licence out of the npm tarball, each checked."""
    if sha256(tarball) != TARBALL_SHA256:
        raise ValueError(f"{TARBALL}: sha256 {sha256(tarball)}, pinned {TARBALL_SHA256}")
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as archive:
        script, licence = (archive.extractfile(name) for name in (MEMBER, LICENSE_MEMBER))
        if script is None or licence is None:
            raise ValueError(f"{TARBALL}: {MEMBER} or {LICENSE_MEMBER} is not a file")
        build, text = script.read(), licence.read()
    if sha256(build) != SHA256:
        raise ValueError(f"{MEMBER} of {TARBALL}: sha256 {sha256(build)}, pinned {SHA256}")
    return build, text


def write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as handle:
        handle.write(data)
    Path(handle.name).replace(path)


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def fetch(target: Path) -> str:
    """Put the pinned build at ``target`` unless it is there; what was done, as a line."""
    if present(target):
        return f"mermaid {VERSION}: {shown(target)} is in place"
    with urllib.request.urlopen(TARBALL, timeout=TIMEOUT) as response:
        tarball = response.read()
    build, licence = extract(tarball)
    write_atomically(target.with_name(LICENSE.name), licence)
    write_atomically(target, build)
    return f"mermaid {VERSION}: fetched into {shown(target)} ({len(build) // 1024} KiB, sha256 checked)"


def main() -> int:
    try:
        print(fetch(TARGET))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(
            f"warning: mermaid {VERSION} not fetched ({exc}); the site's diagrams will load mermaid "
            "from unpkg.com instead (needs internet when viewed)",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
