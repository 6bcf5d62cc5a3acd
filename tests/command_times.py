"""Sum the command times a test run recorded (``LAKEHOUSE_TEST_COMMAND_TIMES``, see
:mod:`tests.cli_runner`): per module and command, the calls and the seconds, slowest first.

    LAKEHOUSE_TEST_COMMAND_TIMES=/tmp/times.tsv pytest tests/jobs/test_cli_history.py
    python -m tests.command_times /tmp/times.tsv
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path


def summarise(lines: list[str]) -> list[tuple[str, str, int, float]]:
    """(module, command, calls, seconds) for each module and command, slowest first."""
    calls: dict[tuple[str, str], int] = defaultdict(int)
    seconds: dict[tuple[str, str], float] = defaultdict(float)
    for line in lines:
        test, command, _code, took = line.rstrip("\n").split("\t")
        key = (test.split("::")[0], command)
        calls[key] += 1
        seconds[key] += float(took)
    rows = [(*key, calls[key], seconds[key]) for key in calls]
    return sorted(rows, key=lambda row: -row[3])


def main(argv: list[str]) -> int:
    rows = summarise(Path(argv[0]).read_text(encoding="utf-8").splitlines())
    for module, command, count, took in rows:
        print(f"{took:8.1f} s {count:4d}x  {command:<28} {module}")
    print(f"{sum(row[3] for row in rows):8.1f} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
