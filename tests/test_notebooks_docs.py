"""The notebooks on the documentation site: executed, complete, and their text true to their outputs.

``docs/notebooks/*.ipynb`` are the executed copies ``make notebooks`` writes (the demo's lake,
Spark); ``notebooks/*.ipynb`` the clean sources. Everything here reads files (and, once, runs
a tiny notebook in a Python kernel): no JVM. :mod:`docs_tools.notebooks` says what is checked;
the tests below tamper with copies in a temporary folder to show that each check can fail.
"""

from __future__ import annotations

import base64
import copy
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from docs_tools import notebooks as nb

NAMES = nb.names(nb.SOURCES)
PNG = base64.b64encode(bytes.fromhex("89504e470d0a1a0a")).decode()


@pytest.mark.parametrize("name", NAMES)
def test_the_docs_notebook_is_executed_and_true_to_its_outputs(name: str) -> None:
    problems = nb.check_notebook(nb.EXECUTED / name, nb.SOURCES / name)
    assert not problems, "\n".join(problems)


def test_the_sources_are_clean_and_each_has_an_executed_copy() -> None:
    assert NAMES, "no notebooks"
    for name in NAMES:
        assert not nb.check_source(nb.SOURCES / name), name
    assert nb.names(nb.EXECUTED) == NAMES


# --- the check can fail: copies tampered with in a temporary folder ---------------------------


def executed_like(source: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``source`` as if executed: every code cell prints what its markdown quotes and
    shows a PNG where it draws. It passes the check; each tampering below breaks one thing."""
    executed = copy.deepcopy(source)
    quoted = [m["number"] for c in source["cells"] for m in nb.QUOTED.finditer(nb.text_of(c))]
    for count, cell in enumerate((c for c in executed["cells"] if c["cell_type"] == "code"), start=1):
        cell["execution_count"] = count
        cell["outputs"] = [
            {"output_type": "stream", "name": "stdout", "text": [f"printed {' '.join(quoted)}\n"]}
        ]
        if nb.DRAWS.search(nb.text_of(cell)):
            cell["outputs"].append(
                {
                    "output_type": "display_data",
                    "metadata": {},
                    "data": {"image/png": PNG, "text/plain": "<Figure>"},
                }
            )
    return executed


def write(path: Path, notebook: dict[str, Any]) -> Path:
    path.write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    return path


def code_cells(notebook: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in notebook["cells"] if c["cell_type"] == "code"]


def cleaned(notebook: dict[str, Any]) -> dict[str, Any]:
    """``notebook`` as its source would be: the same cells, no outputs."""
    clean = copy.deepcopy(notebook)
    for cell in code_cells(clean):
        cell["outputs"], cell["execution_count"] = [], None
    return clean


def drop_an_output(n: dict[str, Any]) -> None:
    code_cells(n)[-1]["outputs"] = []


def add_an_error(n: dict[str, Any]) -> None:
    code_cells(n)[0]["outputs"].append(
        {"output_type": "error", "ename": "KeyError", "evalue": "'x'", "traceback": []}
    )


def drop_the_images(n: dict[str, Any]) -> None:
    for cell in code_cells(n):
        cell["outputs"] = [o for o in cell["outputs"] if "image/png" not in o.get("data", {})]


def edit_the_code(n: dict[str, Any]) -> None:
    code_cells(n)[0]["source"] = nb.text_of(code_cells(n)[0]) + "\nprint('edited in the copy')"


def quote_a_number_nobody_printed(n: dict[str, Any]) -> None:
    first = next(c for c in n["cells"] if c["cell_type"] == "markdown")
    first["source"] = nb.text_of(first) + "\n\nThe model scored **0.987**."


def leave_a_number_unmarked(n: dict[str, Any]) -> None:
    first = next(c for c in n["cells"] if c["cell_type"] == "markdown")
    first["source"] = nb.text_of(first) + "\n\nIt read 1234 decisions."


TAMPERINGS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "an output missing": (drop_an_output, "no output"),
    "an error output": (add_an_error, "an error output: KeyError"),
    "the plots missing": (drop_the_images, "draws a figure but shows no image/png"),
    "code edited in the copy": (edit_the_code, "its cells differ from"),
    "a quoted number no output prints": (
        quote_a_number_nobody_printed,
        "quotes **0.987**, which no output prints",
    ),
    "an unmarked number": (leave_a_number_unmarked, "the number '1234' stands unmarked"),
}
"""What is done to an executed copy, and the problem the check must report. Text edited in
both copies (the last two) is checked against a source with the same edit."""
EDITS_THE_SOURCE_TOO = {"a quoted number no output prints", "an unmarked number"}


@pytest.mark.parametrize("name", NAMES)
def test_an_executed_copy_as_it_should_be_passes(name: str, tmp_path: Path) -> None:
    source = nb.load(nb.SOURCES / name)
    executed = write(tmp_path / name, executed_like(source))
    assert nb.check_notebook(executed, nb.SOURCES / name) == []


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("tampering", TAMPERINGS)
def test_a_tampered_copy_fails(name: str, tampering: str, tmp_path: Path) -> None:
    tamper, expected = TAMPERINGS[tampering]
    executed = executed_like(nb.load(nb.SOURCES / name))
    tamper(executed)
    source = nb.SOURCES / name
    if tampering in EDITS_THE_SOURCE_TOO:
        source = write(tmp_path / "source.ipynb", cleaned(executed))
    problems = nb.check_notebook(write(tmp_path / name, executed), source)
    assert any(expected in p for p in problems), problems


def unprint(notebook: dict[str, Any], number: str) -> None:
    """Every output that prints ``number`` prints something else instead."""
    for cell in code_cells(notebook):
        for output in cell["outputs"]:
            if "text" in output:
                output["text"] = nb.joined(output["text"]).replace(number, "<changed>")
            if "text/plain" in output.get("data", {}):
                output["data"]["text/plain"] = nb.joined(output["data"]["text/plain"]).replace(
                    number, "<changed>"
                )


@pytest.mark.parametrize("name", NAMES)
def test_the_committed_copy_tampered_fails(name: str, tmp_path: Path) -> None:
    """The same on the committed executed copy: the numbers its text quotes, no longer
    printed, a number added to its text, and its plots removed, are each found."""
    committed = nb.EXECUTED / name
    if committed.is_symlink() or not committed.is_file():
        pytest.skip("not executed yet (test_the_docs_notebook_is_executed_and_true_to_its_outputs fails)")
    executed = nb.load(committed)
    quoted = sorted({m["number"] for c in executed["cells"] for m in nb.QUOTED.finditer(nb.text_of(c))})
    for number in quoted:
        unprint(executed, number)
    quote_a_number_nobody_printed(executed)
    drop_the_images(executed)
    source = write(tmp_path / "source.ipynb", cleaned(executed))
    problems = nb.check_notebook(write(tmp_path / name, executed), source)
    for number in [*quoted, "0.987"]:
        assert any(f"quotes **{number}**, which no output prints" in p for p in problems), (number, problems)
    if any(nb.DRAWS.search(nb.text_of(c)) for c in code_cells(executed)):
        assert any("shows no image/png" in p for p in problems), problems


def test_a_link_to_the_source_is_not_an_executed_copy(tmp_path: Path) -> None:
    name = NAMES[0]
    (tmp_path / name).symlink_to(nb.SOURCES / name)
    assert nb.check_notebook(tmp_path / name, nb.SOURCES / name) == [
        "not executed yet: run `make notebooks` (it writes the executed copy here)"
    ]


def test_a_source_with_outputs_is_not_clean(tmp_path: Path) -> None:
    name = NAMES[0]
    dirty = write(tmp_path / name, executed_like(nb.load(nb.SOURCES / name)))
    assert nb.check_source(dirty)


@pytest.mark.parametrize(
    ("markdown", "printed", "problems"),
    [
        ("ER v3 and correlation@2 in `conf 12`, [a](x/1.md)", "", 0),
        ("1. first\n2. second\n\n## 3. A heading", "", 0),
        ("AUC **0.912**", "roc 0.912 (x)", 0),
        ("AUC **0.91**", "roc 0.912", 1),
        ("**80%** of it", "split at 80% by time", 0),
        ("the earliest 80 % of it, on 2026-11-25", "", 2),
        ("```bash\nlakehouse asof --at 2026-11-29\n```", "", 0),
    ],
)
def test_numbers_in_the_text(markdown: str, printed: str, problems: int) -> None:
    assert len(nb.check_numbers([(0, markdown)], printed)) == problems


# --- the executor: the lake (the demo replaced by a stub), then a tiny notebook (a Python kernel) -


@pytest.fixture
def demo_runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The commands ``build_lake`` would run (``lakehouse demo`` starts Spark: never here)."""
    ran: list[list[str]] = []
    monkeypatch.setattr(nb.subprocess, "run", lambda command, **kwargs: ran.append(command))
    return ran


def test_a_fresh_lake_is_built_only_under_dot_work(demo_runs: list[list[str]], tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"not under \.work/"):
        nb.build_lake(tmp_path / "lake", reuse=False)
    assert demo_runs == []


def test_a_fresh_lake_replaces_the_old_one(
    demo_runs: list[list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nb, "ROOT", tmp_path)
    lake = tmp_path / ".work" / "notebooks"
    (lake / "warehouse").mkdir(parents=True)
    nb.build_lake(lake, reuse=False)
    assert not lake.exists(), "removed before the demo builds it again"
    assert demo_runs == [
        [nb.sys.executable, "-m", "jobs", "demo", "--conf", str(nb.CONF), "--workdir", str(lake)]
    ]


def test_reuse_keeps_a_lake_and_fills_an_empty_one(demo_runs: list[list[str]], tmp_path: Path) -> None:
    (tmp_path / "work" / "warehouse").mkdir(parents=True)
    nb.build_lake(tmp_path / "work", reuse=True)
    assert demo_runs == []
    nb.build_lake(tmp_path / "empty", reuse=True)
    assert [command[-1] for command in demo_runs] == [str(tmp_path / "empty")]


def test_execute_writes_outputs_plots_and_no_paths_of_this_machine(tmp_path: Path) -> None:
    import nbformat

    source = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("Prints **42**."),
            nbformat.v4.new_code_cell("import os\nprint(40 + 2, os.environ['LAKEHOUSE_WORKDIR'])"),
            nbformat.v4.new_code_cell(
                "import matplotlib.pyplot as plt\nplt.plot([0, 1], [1, 0])\nprint('drawn')"
            ),
            # tqdm.auto in a kernel without ipywidgets warns, naming the virtualenv (as mlflow
            # imports it); the kernel runs with that warning filtered, and paths are scrubbed
            nbformat.v4.new_code_cell("import sys\nfrom tqdm.auto import tqdm\nprint(sys.prefix)"),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    nbformat.write(source, tmp_path / "source.ipynb")
    target = tmp_path / "executed.ipynb"
    target.symlink_to(tmp_path / "source.ipynb")
    nb.execute(tmp_path / "source.ipynb", target, tmp_path / "lake")
    assert not target.is_symlink()
    assert nb.check_notebook(target, tmp_path / "source.ipynb") == []
    text = target.read_text(encoding="utf-8")
    assert "42 <lake>" in text
    assert str(tmp_path) not in text
    assert "IProgress not found" not in text
    assert sys.prefix not in text, "the virtualenv is scrubbed too"
    assert '"execution"' not in text, "no timings: the copy changes only when an output does"
