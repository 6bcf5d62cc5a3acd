"""``lakehouse ...`` in the test process, as a user's run would see it.

The Spark session is shared with the tests (a real subprocess would start a second JVM),
so the command reads its instance and sizes from the environment the test gives it, and
what it printed is captured. argparse's own refusals (``SystemExit``) become their exit code.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class Ran:
    """One command's exit code and what it printed on each stream."""

    code: int
    stdout: str
    stderr: str


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
    with pytest.MonkeyPatch.context() as patch, _logging_restored():
        for key, value in env.items():
            patch.setenv(key, value)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse's own refusals
                code = int(exc.code or 0)
    return Ran(code, out.getvalue(), err.getvalue())


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
