"""Auditors' time travel: what the system knew at T, by two routes that must agree.

* :func:`asof` — ``lakehouse asof TABLE --at T [--entity ID] [--where EXPR]``;
* :func:`entity_history` — ``lakehouse asof TABLE --history --entity ID``;
* readers: :class:`SparkReader` (a Spark session) and :class:`PythonReader` (pyiceberg and
  deltalake, no JVM).

Modules: :mod:`~ledger.timeline` (the ledger's serving timeline, pure),
:mod:`~workloads.asof.readers` (I/O), :mod:`~workloads.asof.answer` (the routes).
"""

from __future__ import annotations

from ledger.timeline import RunFacts, ServingEpoch, Timeline, timeline
from workloads.asof.answer import ROUTES_DISAGREE_EXIT, AsOfAnswer, EntityHistory, Route, asof, entity_history
from workloads.asof.readers import PythonReader, Reader, Scope, SparkReader

__all__ = [
    "ROUTES_DISAGREE_EXIT",
    "AsOfAnswer",
    "EntityHistory",
    "PythonReader",
    "Reader",
    "Route",
    "RunFacts",
    "Scope",
    "ServingEpoch",
    "SparkReader",
    "Timeline",
    "asof",
    "entity_history",
    "timeline",
]
