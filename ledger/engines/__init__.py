"""Declared engine versions (``conf/engines.yaml``) and the code fingerprints that pin them.

* :mod:`~ledger.engines.catalog`: :class:`EngineSpec`, :class:`EngineCatalog`,
  :func:`load_engines` (strict loading, resolution by date);
* :mod:`~ledger.engines.fingerprint`: :func:`fingerprint`, :func:`verify_fingerprint`,
  :func:`check_fingerprints` (what a code fingerprint covers, and why);
* :mod:`~ledger.engines.in_force`: :func:`engines_in_force` and :func:`decide_in_force`,
  which version of an engine is in force for a processing date, and why;
* :mod:`~ledger.engines.declare`: :func:`declare` and :func:`fill_fingerprints`, which
  edit the file keeping its comments.

The command line is ``lakehouse engines list|check|fingerprint|fill|declare``
(:mod:`jobs.engines`).
"""

from __future__ import annotations

from ledger.engines.catalog import (
    DEFAULT_ENGINES_PATH,
    PENDING,
    EngineCatalog,
    EngineSpec,
    load_engines,
)
from ledger.engines.declare import declare, fill_fingerprints
from ledger.engines.fingerprint import (
    FINGERPRINT_SCHEME,
    FingerprintCheck,
    check_fingerprints,
    fingerprint,
    fingerprint_source,
    source_file,
    verify_fingerprint,
)
from ledger.engines.in_force import (
    EngineHistory,
    InForce,
    decide_in_force,
    engine_history,
    engines_in_force,
    pinned_in_force,
)

__all__ = [
    "DEFAULT_ENGINES_PATH",
    "FINGERPRINT_SCHEME",
    "PENDING",
    "EngineCatalog",
    "EngineHistory",
    "EngineSpec",
    "FingerprintCheck",
    "InForce",
    "check_fingerprints",
    "decide_in_force",
    "declare",
    "engine_history",
    "engines_in_force",
    "fill_fingerprints",
    "fingerprint",
    "fingerprint_source",
    "load_engines",
    "pinned_in_force",
    "source_file",
    "verify_fingerprint",
]
