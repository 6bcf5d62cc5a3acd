"""``lakehouse build silver|gold``: rebuild a zone from pinned inputs, behind quality gates."""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import (
    Action,
    Context,
    EngineRelease,
    Outcome,
    add_engine_argument,
    add_engines_argument,
    add_policies_argument,
)

if TYPE_CHECKING:
    from ledger.engines import EngineCatalog

NAME = "build"
HELP = "build Silver (canonical, deduplicated, entity-resolved) or Gold (features, baselines, correlations)"


QUALITY_GATES = True
"""It validates with Great Expectations: GX is imported while the JVM starts."""


def add_engine_pins_argument(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--engine NAME@VERSION`` (repeatable) into ``args.pins``: the releases a run takes instead
    of the ones in force; shared by ``build`` and ``stream`` so both pin the same way."""
    add_engine_argument(parser, help_text, dest="pins", action="append", default=[])


def _shared(parser: argparse.ArgumentParser) -> None:
    add_policies_argument(parser)
    add_engines_argument(parser)
    add_engine_pins_argument(
        parser,
        "run it instead of the version in force (repeatable; recorded with the rule's own choice), "
        "e.g. entity_resolution@1 to start a fresh lakehouse under v1",
    )


def _silver_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--since", type=date.fromisoformat, metavar="YYYY-MM-DD", help="first event date to rebuild"
    )
    parser.add_argument(
        "--until", type=date.fromisoformat, metavar="YYYY-MM-DD", help="event date to stop before"
    )
    _shared(parser)


def _gold_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--full", action="store_true", help="recompute everything, not only changes")
    _shared(parser)


def pinned_versions(catalog: EngineCatalog, pins: list[EngineRelease]) -> dict[str, int]:
    """``--engine`` pins checked against the engines file before a JVM starts: name -> version."""
    from jobs.common import resolve_release

    return {pin.name: resolve_release(catalog, pin).version for pin in pins}


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_gold, render_silver
    from lakehouse.errors import UsageError
    from ledger.engines import load_engines
    from workloads.gold.quality import medallion_gate as gate
    from workloads.pipeline import run_gold, run_silver
    from workloads.policies import load_streaming_policy
    from workloads.silver.lateness import load_lateness_policy

    catalog = load_engines(args.engines)  # a bad file or pin: exit 2, before Spark
    pinned = pinned_versions(catalog, args.pins)
    if args.action == "silver":
        if args.since and args.until and args.since >= args.until:
            raise UsageError(f"--since {args.since} must be before --until {args.until}")
        lateness = load_lateness_policy(args.policies)  # a bad file: exit 2, before Spark
        ctx.require_lakehouse()  # nothing ingested yet: exit 2, before Spark
        ctx.progress("building Silver from pinned Bronze")
        silver = run_silver(
            ctx.registry,
            ctx.ledger,
            ctx.clock,
            policy=lateness,
            since=args.since,
            until=args.until,
            gate=gate,
            engines_path=args.engines,
            pinned=pinned,
        )
        return Outcome(data=silver, lines=render_silver(silver))
    streaming = load_streaming_policy(args.policies)  # a bad file: exit 2, before Spark
    ctx.require_lakehouse()
    ctx.progress("building Gold from pinned Silver")
    gold = run_gold(
        ctx.registry,
        ctx.ledger,
        ctx.clock,
        full=args.full,
        gate=gate,
        engines_path=args.engines,
        pinned=pinned,
        streaming=streaming,
    )
    return Outcome(data=gold, lines=render_gold(gold))


ACTIONS = {
    "silver": Action(
        "Silver from pinned Bronze: canonical, deduplicated, entity-resolved, behind its quality gate",
        _silver_arguments,
        run,
    ),
    "gold": Action(
        "Gold from pinned Silver: daily features, baselines, correlations, behind its quality gate",
        _gold_arguments,
        run,
    ),
}


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
