"""``lakehouse communities [--engine community@N] [--truth PATH]``: communities over the correlation graph.

Runs a community release over the serving correlations and keeps ``gold.communities``
bitemporal (an entity's earlier row superseded or retracted, with the reason); the
communities are measured against the true rings when the data has labelled truth.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.common import (
    Context,
    EngineRelease,
    Outcome,
    add_engine_argument,
    add_engines_argument,
    resolve_release,
)

NAME = "communities"
HELP = "group the entities of the correlation graph into communities, with each entity's degree and PageRank"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_engine_argument(
        parser,
        "the community release to run (default: community, the version in force today)",
        name_alone="the version in force today (the latest effective)",
    )
    parser.add_argument(
        "--truth",
        type=Path,
        help="labelled truth file to measure the communities against (default: the _ground_truth.json "
        "beside the ingested deliveries, if any)",
    )
    add_engines_argument(parser)


def run(args: argparse.Namespace, ctx: Context) -> Outcome:
    from jobs.render import render_communities
    from lakehouse.errors import UsageError
    from ledger.engines import load_engines
    from workloads.engines.community import NAME as ENGINE
    from workloads.engines.community import community_parameters
    from workloads.evaluation import load_truth

    # every argument is checked before Spark starts: one line, exit 2
    catalog = load_engines(args.engines)
    release = args.engine or EngineRelease(ENGINE)
    spec = resolve_release(catalog, release, at=datetime.now(UTC).date(), name_alone=True)
    if spec.name != ENGINE:
        raise UsageError(f"--engine {spec.ref} is not a {ENGINE} release")
    community_parameters(spec.parameters)
    truth = load_truth(args.truth) if args.truth is not None else None
    ctx.require_lakehouse()

    from workloads.communities import run_communities

    result = run_communities(ctx.registry, ctx.ledger, ctx.clock, spec, truth=truth, progress=ctx.progress)
    return Outcome(data=result, lines=render_communities(result))


if __name__ == "__main__":
    from jobs.cli import run_as_script

    raise SystemExit(run_as_script(NAME))
