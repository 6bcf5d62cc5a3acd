"""The command-time profile of a test run (tests/command_times.py) sums per module and command."""

from __future__ import annotations

from tests.command_times import summarise


def test_times_are_summed_per_module_and_command_slowest_first() -> None:
    lines = [
        "tests/a.py::test_x\tbuild silver\t0\t10.50",
        "tests/a.py::test_x\tbuild silver\t0\t4.50",
        "tests/a.py::test_y\tingest\t2\t1.00",
        "tests/b.py::test_z\tbuild silver\t0\t12.00",
    ]
    assert summarise(lines) == [
        ("tests/a.py", "build silver", 2, 15.0),
        ("tests/b.py", "build silver", 1, 12.0),
        ("tests/a.py", "ingest", 1, 1.0),
    ]
