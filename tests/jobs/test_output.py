"""The output layer: the generic JSON dump, tables for people, errors and log levels."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

import jobs.submit_args
from jobs.cli import main
from jobs.common import Context, Outcome
from jobs.output import TableView, plain, render_plain
from jobs.progress import OUR_PACKAGES
from lakehouse.errors import UsageError

REPO = Path(__file__).resolve().parents[2]
CONF = str(REPO / "conf" / "lakehouse.yaml")


class Colour(StrEnum):
    RED = "red"
    BLUE = "blue"


class Engine(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    declared_at: datetime


@dataclass(frozen=True)
class Inner:
    colour: Colour
    day: date
    where: Path


@dataclass(frozen=True)
class Result:
    run_id: str
    inner: Inner
    engine: Engine
    by_colour: dict[Colour, int]
    pairs: tuple[tuple[str, int], ...]
    tags: frozenset[str]
    amount: Decimal
    missing: str | None = None
    nested: list[Inner] = field(default_factory=list)


def test_plain_dumps_nested_dataclasses_models_enums_dates_and_paths() -> None:
    at = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    inner = Inner(Colour.RED, date(2025, 1, 2), Path("/tmp/x"))
    result = Result(
        run_id="run-1",
        inner=inner,
        engine=Engine(name="correlation", declared_at=at),
        by_colour={Colour.BLUE: 2},
        pairs=(("a", 1),),
        tags=frozenset({"z", "a"}),
        amount=Decimal("1.10"),
        nested=[inner],
    )
    expected_inner = {"colour": "red", "day": "2025-01-02", "where": "/tmp/x"}
    dumped = plain(result)
    assert dumped == {
        "run_id": "run-1",
        "inner": expected_inner,
        "engine": {"name": "correlation", "declared_at": "2026-11-29T12:00:00Z"},
        "by_colour": {"blue": 2},
        "pairs": [["a", 1]],
        "tags": ["a", "z"],
        "amount": "1.10",
        "missing": None,
        "nested": [expected_inner],
    }
    assert type(dumped["inner"]["colour"]) is str
    assert json.loads(json.dumps(dumped)) == dumped


def test_a_result_is_dumped_as_its_fields_and_drawn_by_jobs_render() -> None:
    from jobs.render import render_index_refresh
    from workloads.gold.entity_index import IndexRefresh

    refresh = IndexRefresh("rebuilt", source_version=3, index_version=4, rows=10, run_id="r", buckets=2)
    assert plain(refresh) == {
        "status": "rebuilt",
        "source_version": 3,
        "index_version": 4,
        "rows": 10,
        "run_id": "r",
        "buckets": 2,
    }
    assert render_index_refresh(refresh) == (
        "entity index gold.correlations_by_entity@4 rebuilt from gold.correlations@3 "
        "(10 rows in 2 buckets, run r)"
    )


def test_tables_for_people_are_plain_text_off_a_terminal() -> None:
    text = render_plain(
        [
            "tables:",
            TableView(
                [{"name": "[bold]x[/]", "exists": True, "version": None}], ["name", "exists", "version"]
            ),
        ]
    )
    lines = text.splitlines()
    assert lines[0] == "tables:"
    assert lines[1].split() == ["name", "exists", "version"]
    assert lines[3].split() == ["[bold]x[/]", "True"]
    assert "\x1b" not in text
    assert all(line == line.rstrip() for line in lines)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    yield
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_lakehouse_cli_handler", False):
            root.removeHandler(handler)
    for name in OUR_PACKAGES:
        logging.getLogger(name).setLevel(logging.NOTSET)


def replace_submit_args(monkeypatch: pytest.MonkeyPatch, run: Any) -> None:
    """``lakehouse submit-args`` (needs no Spark) runs ``run`` instead."""
    monkeypatch.setattr(jobs.submit_args, "run", run)


def test_an_argument_error_with_json_is_one_json_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["build", "bronze", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    error = json.loads(captured.err)
    assert error["exit_code"] == 2
    assert "invalid choice: 'bronze'" in error["error"]


def test_an_argument_error_without_json_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["build", "silver", "--since", "yesterday"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: lakehouse build silver: argument --since")
    assert err.count("\n") == 1


def test_a_lakehouse_error_with_json_carries_its_exit_code(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(args: argparse.Namespace, ctx: Context) -> Outcome:
        raise UsageError("no such run: replay-x")

    replace_submit_args(monkeypatch, refuse)
    assert main(["submit-args", "--json", "--conf", CONF]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert json.loads(captured.err) == {"error": "no such run: replay-x", "exit_code": 2}


def test_an_unexpected_exception_with_json_is_exit_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(args: argparse.Namespace, ctx: Context) -> Outcome:
        raise RuntimeError("boom\nsecond line")

    replace_submit_args(monkeypatch, crash)
    assert main(["submit-args", "--json", "--conf", CONF]) == 1
    error = json.loads(capsys.readouterr().err)
    assert error == {
        "error": "unexpected RuntimeError: boom (rerun with --debug for details)",
        "exit_code": 1,
    }


def test_a_result_that_fails_prints_the_result_then_the_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def disagree(args: argparse.Namespace, ctx: Context) -> Outcome:
        return Outcome(data={"routes_agree": False}, lines=["!!!"], exit_code=7, error="routes disagree")

    replace_submit_args(monkeypatch, disagree)
    assert main(["submit-args", "--json", "--conf", CONF]) == 7
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"routes_agree": False}
    assert json.loads(captured.err) == {"error": "routes disagree", "exit_code": 7}
    assert main(["submit-args", "--conf", CONF]) == 7
    captured = capsys.readouterr()
    assert captured.out == "!!!\n"
    assert captured.err == "error: routes disagree\n"


@pytest.mark.parametrize(
    ("flags", "level", "shown"),
    [
        ([], logging.INFO, ["starting", "work", "careful"]),
        (["--verbose"], logging.DEBUG, ["starting", "work", "detail", "careful"]),
        (["--quiet"], logging.WARNING, ["careful"]),
        (["--json"], logging.WARNING, ["careful"]),
    ],
)
def test_verbose_and_quiet_set_the_level_of_library_logging(
    flags: list[str],
    level: int,
    shown: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def work(args: argparse.Namespace, ctx: Context) -> Outcome:
        library = logging.getLogger("workloads.example")
        ctx.progress("starting")
        library.info("work")
        library.debug("detail")
        library.warning("careful")
        logging.getLogger("py4j.example").info("third-party chatter")
        return Outcome(data={}, lines=[])

    replace_submit_args(monkeypatch, work)
    assert main(["submit-args", *flags, "--conf", CONF]) == 0
    assert logging.getLogger("workloads").level == level
    err = capsys.readouterr().err.splitlines()
    words = [line.split("] ", 1)[1].rsplit(": ", 1)[-1] for line in err]
    assert words == shown
    assert all(line.startswith("[") and "s] " in line for line in err)
    assert "third-party chatter" not in "\n".join(err)


def test_jars_resolved_once_are_listed_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    from lakehouse.config import load_config
    from lakehouse.jars import cached_jars

    config = load_config(CONF, environ={})
    if cached_jars(config.jar_cache_path, config.jars.packages, config.jars.excludes) is None:
        pytest.skip("run `make jars` first (resolving needs the network)")
    assert main(["jars", "--json", "--conf", CONF]) == 0
    ready = json.loads(capsys.readouterr().out)
    assert ready["packages"] == list(config.jars.packages)
    assert ready["jars"]
    assert all(Path(jar).is_file() for jar in ready["jars"])
    assert main(["jars", "--conf", CONF]) == 0
    assert capsys.readouterr().out == f"{len(ready['jars'])} jars ready in {config.jar_cache_path}\n"


def test_generate_json_is_the_generic_dump_of_its_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "history"
    argv = ["generate", "--out", str(out), "--entities", "5", "--months", "1", "--json", "--conf", CONF]
    assert main(argv) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["out_dir"] == str(out)
    assert summary["first_delivery"] == "2025-01-01"
    assert summary["total_events"] > 0
    assert captured.err == ""
