"""``lakehouse ...`` in the test process, as a user's run would see it.

The Spark session is shared with the tests (a real subprocess would start a second JVM),
so the command reads its instance and sizes from the environment the test gives it, and
what it printed is captured. argparse's own refusals (``SystemExit``) become their exit code.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass(frozen=True)
class Ran:
    """One command's exit code and what it printed on each stream."""

    code: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class Step:
    """One command of a history: its exit code and what it printed (parsed JSON when it printed some)."""

    args: tuple[str, ...]
    code: int
    data: Any
    stderr: str


class Runner:
    """Runs ``lakehouse ...`` in this process with a history's configuration, work dir and
    instance, and keeps each step by name."""

    def __init__(self, conf: Path, workdir: Path, env: dict[str, str]) -> None:
        self.conf, self.workdir, self.env = conf, workdir, env
        self.steps: dict[str, Step] = {}

    def __call__(self, name: str, *args: str, json_out: bool = True) -> Step:
        argv = [*args, "--conf", str(self.conf), "--workdir", str(self.workdir), "--quiet"]
        argv += ["--json"] if json_out else []
        ran = run_cli(argv, self.env)
        text = ran.stdout
        data = json.loads(text) if json_out and ran.code in (0, 1, 4, 5, 7) and text.strip() else text
        step = Step(tuple(argv), ran.code, data, ran.stderr)
        self.steps[name] = step
        return step


def instance_env(instance: str) -> dict[str, str]:
    """The environment of a command run against a test's own lakehouse instance."""
    return {"LAKEHOUSE__INSTANCE": instance, "LAKEHOUSE__SPARK__SHUFFLE_PARTITIONS": "2"}


def run_cli(argv: list[str], env: Mapping[str, str]) -> Ran:
    """Run ``lakehouse ARGV`` through :func:`jobs.cli.main` with ``env`` set for its duration.

    A command configures logging for its process; here the process goes on, so the logging
    configuration is put back afterwards (a later test must not print through it).
    """
    from jobs.cli import main

    out, err = io.StringIO(), io.StringIO()
    began = time.monotonic()
    with pytest.MonkeyPatch.context() as patch, _logging_restored():
        for key, value in env.items():
            patch.setenv(key, value)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse's own refusals
                code = int(exc.code or 0)
    _record_time(argv, code, time.monotonic() - began)
    return Ran(code, out.getvalue(), err.getvalue())


TIMES_FILE = "LAKEHOUSE_TEST_COMMAND_TIMES"
"""When set, each command run by a test appends a line to this file: the test, the command
(its first two words), its exit code and its wall time, tab-separated (a profile of where a
history's setup goes; ``python -m tests.command_times FILE`` sums it)."""


def _record_time(argv: list[str], code: int, seconds: float) -> None:
    path = os.environ.get(TIMES_FILE)
    if not path:
        return
    test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
    words = [word for word in argv[:2] if not word.startswith("-")]
    with open(path, "a", encoding="utf-8") as out:
        out.write(f"{test}\t{' '.join(words)}\t{code}\t{seconds:.2f}\n")


@contextlib.contextmanager
def _logging_restored() -> Iterator[None]:
    from jobs.progress import OUR_PACKAGES

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in OUR_PACKAGES}
    try:
        yield
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
        for handler in handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(level)
        for name, previous in levels.items():
            logging.getLogger(name).setLevel(previous)
