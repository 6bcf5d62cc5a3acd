"""Where a run's time goes: wall seconds and Spark jobs per named step.

A Spark job is the unit a small-data run pays for most (a few tenths of a second each,
whatever its size), so a run that reports its steps reports both. Jobs are counted from the
SparkContext's job ids, which count up from 0: the newest id before and after a step gives
the jobs it started (counting the status tracker's list instead would stop at the number
of jobs it keeps, ``spark.ui.retainedJobs``). Jobs other threads start meanwhile are
counted too; a command runs one thing at a time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class StepCost:
    """One step of a run: its wall time and the Spark jobs it started."""

    step: str
    seconds: float
    spark_jobs: int


def newest_job_id(spark: SparkSession) -> int:
    """The id of the newest Spark job of ``spark``'s context (-1 before the first)."""
    return max(spark.sparkContext.statusTracker().getJobIdsForGroup(), default=-1)


class StepMeter:
    """Marks the steps of one run: each :meth:`mark` ends the step before it and starts the next.

    >>> meter = StepMeter(spark, "setup")    # doctest: +SKIP
    >>> meter.mark("analyse")                # setup ends here
    >>> steps = meter.close()                # analyse ends here
    """

    def __init__(self, spark: SparkSession, first: str) -> None:
        self._spark = spark
        self._done: list[StepCost] = []
        self._open: tuple[str, float, int] | None = (first, time.monotonic(), newest_job_id(spark))

    def mark(self, step: str) -> None:
        """End the current step (if one is open) and start ``step``."""
        self._end()
        self._open = (step, time.monotonic(), newest_job_id(self._spark))

    def close(self) -> tuple[StepCost, ...]:
        """End the current step; every step so far, in order."""
        self._end()
        return tuple(self._done)

    def _end(self) -> None:
        if self._open is None:
            return
        step, began, first_job = self._open
        jobs = newest_job_id(self._spark) - first_job
        self._done.append(StepCost(step, round(time.monotonic() - began, 3), jobs))
        self._open = None
