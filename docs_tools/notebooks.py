"""The documentation's notebooks: executed on the demo's lake, kept with their outputs, checked
without a JVM.

Two copies of each notebook:

- ``notebooks/<name>.ipynb``, the source: cells only, no outputs. What people edit, and what
  the Spark tests execute on their own small lakes (``tests/workloads/asof``,
  ``tests/workloads/ml``).
- ``docs/notebooks/<name>.ipynb``, the executed copy: the same cells with the outputs (text,
  tables, plots) of one run on the demo's lake. What the site shows (mkdocs-jupyter with
  ``execute: false``): ``mkdocs build`` starts no Spark.

``python -m docs_tools.notebooks execute`` (``make notebooks``) builds the demo's lake (the
seeded ``lakehouse demo``; Spark) and executes every source notebook against it with nbclient,
then runs the check. ``python -m docs_tools.notebooks check`` is the check alone (no JVM, no
kernel), what ``tests/test_notebooks_docs.py`` asserts: see :func:`check_notebook`.

Numbers in a notebook's text: a number the text quotes from a run is written in bold,
``**0.912**`` or ``**80%**``, exactly as an output prints it, and the check finds it there. Any
other number in the prose fails the check, except names (``v3``, ``correlation@2``, anything in
a code span) and the numbering of lists and headings: so a figure cannot go stale unnoticed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parent.parent
SOURCES: Final = ROOT / "notebooks"
EXECUTED: Final = ROOT / "docs" / "notebooks"
DEFAULT_LAKE: Final = ROOT / ".work" / "notebooks"
"""The lake ``make notebooks`` builds from scratch (``.work/`` is ignored by git)."""
CONF: Final = ROOT / "conf" / "lakehouse.yaml"

KERNEL: Final = "python3"
CELL_TIMEOUT: Final = 1800
"""Seconds one cell may take (the ML notebook's first cell builds a training set with Spark)."""

KNOBS: Final = ("LAKEHOUSE_FORMAT", "AUDIT_ENTITY", "ML_AS_OF")
"""Environment variables the notebooks read to answer another question: removed, so the
executed copies show the defaults."""

QUOTED: Final = re.compile(r"\*\*(?P<number>[-+]?\d+(?:[.,]\d+)*%?)\*\*")
"""A number the text quotes from an output: ``**0.912**``, ``**80%**``."""
BARE_NUMBER: Final = re.compile(r"(?<![\w@/.:-])\d+(?:[.,]\d+)*(?: ?%)?(?![\w@])")
"""A number standing alone in prose (not part of a name such as ``v3`` or ``correlation@2``)."""
FENCED: Final = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN: Final = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
LINK_TARGET: Final = re.compile(r"\]\([^)]*\)")
NUMBERING: Final = re.compile(r"^(?:\s*\d+[.)]\s|#+\s+\d+[.)]?\s)", re.MULTILINE)
DRAWS: Final = re.compile(r"\bplt\.|\bdisplay\(\s*Image\b")
"""A code cell that draws a figure (matplotlib, or a PNG shown with IPython's Image)."""


def shown(path: Path) -> str:
    """A path as messages name it: from the repository root when it is inside."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.ipynb"))


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def joined(value: Any) -> str:
    """A notebook's multi-line string, stored as one string or as a list of lines."""
    return "".join(value) if isinstance(value, list) else str(value)


def text_of(cell: Mapping[str, Any]) -> str:
    return joined(cell.get("source", ""))


def output_texts(cell: Mapping[str, Any]) -> Iterator[str]:
    """What a reader sees of a code cell's outputs as text: streams, and each result's
    ``text/plain`` (a DataFrame's ``text/plain`` holds the numbers its HTML shows)."""
    for output in cell.get("outputs", []):
        if "text" in output:
            yield joined(output["text"])
        plain = output.get("data", {}).get("text/plain")
        if plain is not None:
            yield joined(plain)


def prose(markdown: str) -> str:
    """A markdown cell without what is not prose: code blocks and spans, link targets, and
    the numbering of lists and headings."""
    for pattern in (FENCED, CODE_SPAN, LINK_TARGET, NUMBERING):
        markdown = pattern.sub(" ", markdown)
    return markdown


def number_in(number: str, text: str) -> bool:
    """Whether ``text`` prints ``number`` as a whole number (0.91 is not found in 0.912)."""
    return re.search(rf"(?<![\d.]){re.escape(number)}(?![\d]|[.,]\d)", text) is not None


def check_numbers(markdown: Sequence[tuple[int, str]], outputs: str) -> list[str]:
    """Each quoted number (``**N**``) appears in ``outputs``; no other number stands in prose."""
    problems = []
    for index, text in markdown:
        for quoted in QUOTED.finditer(prose(text)):
            if not number_in(quoted["number"], outputs):
                problems.append(f"cell {index}: quotes **{quoted['number']}**, which no output prints")
        for bare in BARE_NUMBER.finditer(QUOTED.sub(" ", prose(text))):
            problems.append(
                f"cell {index}: the number {bare.group().strip()!r} stands unmarked in the text: quote a "
                f"result as **N** (exactly as an output prints it; the check finds it there), put a "
                f"name in a code span, or say it in words"
            )
    return problems


def check_source(path: Path) -> list[str]:
    """A source notebook is clean: no outputs, no execution counts."""
    problems = []
    for index, cell in enumerate(load(path)["cells"]):
        if cell["cell_type"] == "code" and (cell.get("outputs") or cell.get("execution_count") is not None):
            problems.append(
                f"cell {index}: has outputs; the source stays clean (`make notebooks` executes a copy)"
            )
    return problems


def check_notebook(executed: Path, source: Path) -> list[str]:
    """What an executed docs notebook must be, as a list of problems (empty: none):

    - a file of its own (not a link to the source, which has no outputs);
    - the source's cells, type and text, in the same order (the copies cannot drift);
    - every code cell executed, with at least one output, none of them an error;
    - every code cell that draws a figure (matplotlib, ``display(Image(...))``) shows a PNG;
    - every number its markdown quotes (``**N**``) printed by an output, and no number in its
      prose left unmarked (:func:`check_numbers`).
    """
    if executed.is_symlink() or not executed.is_file():
        return ["not executed yet: run `make notebooks` (it writes the executed copy here)"]
    ran, clean = load(executed)["cells"], load(source)["cells"]
    if [(c["cell_type"], text_of(c)) for c in ran] != [(c["cell_type"], text_of(c)) for c in clean]:
        return [
            f"its cells differ from {shown(source)}: the source changed since the notebooks "
            f"were executed (run `make notebooks`), or the copy was edited (edit the source instead)"
        ]
    problems = []
    markdown: list[tuple[int, str]] = []
    printed: list[str] = []
    for index, cell in enumerate(ran):
        if cell["cell_type"] == "markdown":
            markdown.append((index, text_of(cell)))
            continue
        if cell["cell_type"] != "code":
            continue
        outputs = cell.get("outputs", [])
        if cell.get("execution_count") is None or not outputs:
            problems.append(f"cell {index}: no output (not executed?)")
        for output in outputs:
            if output.get("output_type") == "error":
                problems.append(
                    f"cell {index}: an error output: {output.get('ename')}: {output.get('evalue')}"
                )
        if DRAWS.search(text_of(cell)) and not any("image/png" in o.get("data", {}) for o in outputs):
            problems.append(f"cell {index}: draws a figure but shows no image/png output")
        printed.extend(output_texts(cell))
    return problems + check_numbers(markdown, "\n".join(printed))


def check(sources: Path = SOURCES, executed: Path = EXECUTED) -> list[str]:
    """Every notebook: the source clean, the executed copy complete (:func:`check_notebook`);
    the same notebooks in both folders."""
    problems = []
    if names(sources) != names(executed):
        problems.append(f"{shown(executed)} holds {names(executed)}, {shown(sources)} holds {names(sources)}")
    for name in names(sources):
        problems += [f"{shown(sources / name)} {p}" for p in check_source(sources / name)]
        problems += [f"{shown(executed / name)} {p}" for p in check_notebook(executed / name, sources / name)]
    return problems


# --- execution (Spark: the demo, and the ML notebook's training set) -----------------------------


QUIETED: Final = ("ignore:IProgress not found:Warning",)
"""Warnings the kernel does not print (``PYTHONWARNINGS`` entries): environment noise, not
results. ``IProgress not found``: importing ``mlflow.tracking`` imports ``tqdm.auto`` (by way
of ``mlflow.genai``), which in a Jupyter kernel without ipywidgets warns (TqdmWarning) that
it falls back to text progress bars, naming the file of this machine's virtualenv; the
notebooks draw no progress bar."""


def kernel_env(lake: Path) -> dict[str, str]:
    """The kernel's environment: this one, pointed at ``lake``, without the notebooks' knobs
    (:data:`KNOBS`), in UTC, with :data:`QUIETED` added to ``PYTHONWARNINGS``."""
    env = {k: v for k, v in os.environ.items() if k not in KNOBS}
    warnings = [w for w in env.get("PYTHONWARNINGS", "").split(",") if w]
    env.update(
        {
            "LAKEHOUSE_WORKDIR": str(lake),
            "TZ": "UTC",
            "PYTHONHASHSEED": "0",
            "PYTHONWARNINGS": ",".join([*warnings, *QUIETED]),
        }
    )
    return env


def build_lake(lake: Path, *, reuse: bool) -> None:
    """The demo's lake in ``lake``: built from scratch (only under ``.work/``, which this
    removes first), or, with ``reuse``, used as it is when it holds a lakehouse (the demo is
    run when it holds none; the demo can run twice)."""
    if reuse and (lake / "warehouse").is_dir():
        print(f"notebooks: reusing the lake in {lake}", flush=True)
        return
    if not reuse:
        if ROOT / ".work" not in lake.parents:
            raise SystemExit(
                f"notebooks: {lake} is not under .work/: pass --reuse to use (or fill) it as it is"
            )
        if lake.exists():
            shutil.rmtree(lake)
    print(f"notebooks: building the demo's lake in {lake} (lakehouse demo, about 11 min)", flush=True)
    command = [sys.executable, "-m", "jobs", "demo", "--conf", str(CONF), "--workdir", str(lake)]
    subprocess.run(command, cwd=ROOT, check=True, env=kernel_env(lake))


def scrub(notebook: Any, lake: Path) -> None:
    """Paths of this machine in the outputs become ``<lake>``, ``<repo>`` and ``<venv>`` (the
    virtualenv, which a worktree may share from another checkout): the committed copy reads
    the same wherever it was executed."""
    replacements = [(str(lake), "<lake>"), (str(ROOT), "<repo>"), (sys.prefix, "<venv>")]

    def clean(value: Any) -> str:
        text = joined(value)
        for old, new in replacements:
            text = text.replace(old, new)
        return text

    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if "text" in output:
                output["text"] = clean(output["text"])
            for kind in ("text/plain", "text/html", "text/markdown"):
                if kind in output.get("data", {}):
                    output["data"][kind] = clean(output["data"][kind])


def execute(source: Path, target: Path, lake: Path) -> None:
    """Run ``source`` top to bottom on ``lake`` in a fresh kernel; write it, with its outputs,
    to ``target`` (replacing a link there). An error in a cell stops here, nothing written."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(source, as_version=4)  # type: ignore[no-untyped-call]
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT,
        kernel_name=KERNEL,
        record_timing=False,
        resources={"metadata": {"path": str(source.parent)}},
    )
    client.execute(env=kernel_env(lake))
    scrub(notebook, lake)
    notebook.metadata.pop("widgets", None)
    target.unlink(missing_ok=True)
    nbformat.write(notebook, target)  # type: ignore[no-untyped-call]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m docs_tools.notebooks", description=__doc__.split("\n\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("execute", help="build the demo's lake (Spark), execute every notebook, check")
    run.add_argument(
        "--lake", type=Path, default=DEFAULT_LAKE, help="the lake's work dir (default: .work/notebooks)"
    )
    run.add_argument(
        "--reuse",
        action="store_true",
        help="use the lake in --lake as it is (e.g. --lake work after make demo); "
        "the demo runs only when it holds none",
    )
    run.add_argument("names", nargs="*", help="only these notebooks (e.g. auditor_time_travel)")
    commands.add_parser("check", help="check the executed copies (no JVM, no kernel)")
    args = parser.parse_args(argv)
    if args.command == "execute":
        lake = args.lake.resolve()
        build_lake(lake, reuse=args.reuse)
        for name in names(SOURCES):
            if args.names and name.removesuffix(".ipynb") not in args.names:
                continue
            print(f"notebooks: executing {name}", flush=True)
            execute(SOURCES / name, EXECUTED / name, lake)
    problems = check()
    for problem in problems:
        print(f"notebooks: {problem}", file=sys.stderr)
    if not problems:
        print(f"notebooks: {', '.join(names(EXECUTED))}: executed, complete, every quoted number printed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
