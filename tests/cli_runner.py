"""``lakehouse ...`` in the test process, as a user's run would see it.

The Spark session is shared with the tests (a real subprocess would start a second JVM),
so the command reads its instance and sizes from the environment the test gives it, and
what it printed is captured. argparse's own refusals (``SystemExit``) become their exit code.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping
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
    """Run ``lakehouse ARGV`` through :func:`jobs.cli.main` with ``env`` set for its duration."""
    from jobs.cli import main

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse's own refusals
                code = int(exc.code or 0)
    return Ran(code, out.getvalue(), err.getvalue())
