"""``python -m benchmarks NAME ARGS``.

NAME: lake, pipeline, replay, asof, quality, training-set, erasure, reconcile, graph or communities.

``lake --events N`` builds the benchmark lake once into a cache outside git (or continues
its build); ``erasure``, ``replay``, ``training-set`` and ``quality`` take ``--events N`` and
run on a fresh copy of it (:mod:`benchmarks.lake`).

``make bench`` runs the first three small; ``quality`` measures engine versions, not time.

Each prints its figures and the ratio against a baseline run in the same process.
"""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "lake": "benchmarks.lake",
    "pipeline": "benchmarks.pipeline_throughput",
    "replay": "benchmarks.replay_cost",
    "asof": "benchmarks.asof_latency",
    "quality": "benchmarks.er_quality",
    "training-set": "benchmarks.training_set_cost",
    "erasure": "benchmarks.erasure_cost",
    "reconcile": "benchmarks.reconcile_cost",
    "graph": "benchmarks.graph_cost",
    "communities": "benchmarks.community_cost",
}

args = sys.argv[1:]
name = args.pop(0) if args and args[0] in BENCHMARKS else "pipeline"
raise SystemExit(importlib.import_module(BENCHMARKS[name]).main(args))
