"""Reconciliation that can disagree with the engine under test.

One history on the shipped mixed-format default (the hand-written one of
:mod:`tests.replay_history`, delivered, ingested and built by the product's recorded runs
under ER v1), then:

* ``entity_resolution@8`` (test only, :mod:`tests.faulty_resolvers`): v2 that leaves carol's
  events without an entity, so the (ann, carol) pair of 2025-02 quietly disappears;
* ``entity_resolution@9`` (test only): v2 that gives erin an id no rule gives, so the
  2025-03 pair with dave is invented anew (and the true one is gone);

both declared with v2's parameters (the rule they claim) and their real fingerprints. A
recount from the engine's own output agrees with both; the independent recount must end
in ``investigate`` naming ``expected_pairs`` and the first bad partition. Then the correct
v2 ends in ``publish``, a plan whose range holds no change in ``suppress``, and after
publication the check agrees (``publish``) until serving is made to disagree (``rollback``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from lakehouse.config import LakehouseConfig
from lakehouse.meter import newest_job_id
from ledger.clock import FixedClock
from ledger.entries import ReconciliationDecision
from tests.cli_runner import instance_env, run_cli
from tests.conftest import Lakehouse, drop_all
from tests.faulty_resolvers import INVENTED_ID
from tests.replay_history import (
    ANN,
    CAROL,
    ER_V2_PARAMETERS,
    PLAN,
    PROMO,
    START,
    build,
    declared_engines,
    ledger_of,
    v1_id,
)
from workloads.replay import ack, approve, publish, run_replay
from workloads.replay.plan import CorrectionPlan, load_plan
from workloads.replay.verify import AFTER_PUBLICATION

pytestmark = pytest.mark.spark

FAULTY = (
    ("entity_resolution", 8, "tests.faulty_resolvers:resolve_drops_a_pair", "2026-01-02", ER_V2_PARAMETERS),
    ("entity_resolution", 9, "tests.faulty_resolvers:resolve_invents_a_pair", "2026-01-03", ER_V2_PARAMETERS),
)
CONF = Path(__file__).resolve().parents[3] / "conf" / "lakehouse.yaml"
DAVE, ERIN = v1_id("dave@example.com"), v1_id("erin@example.com")


def plan_to(version: int = 2, *, event_from: str | None = None) -> CorrectionPlan:
    """The shipped ER correction plan, to another version of ER or over a narrower range."""
    raw = load_plan(PLAN).model_dump(mode="json", by_alias=True)
    raw["engine_change"]["to"] = str(version)
    if event_from is not None:
        raw["range"]["event_from"] = event_from
    return CorrectionPlan.model_validate(raw)


@dataclass(frozen=True)
class Judged:
    """What each replay of the shared history decided, and the checks after publication."""

    lakehouse: Any
    drops: Any
    invents: Any
    unchanged: Any
    correct: Any
    verified: Verified
    tampered: Verified
    unknown: Verified
    again: Any
    """The correct plan run again before its approval: its recorded outcome, nothing computed."""
    correct_jobs: int
    """The Spark jobs the correct plan's replay started, counted around the call."""


@dataclass(frozen=True)
class Verified:
    """``lakehouse verify-publication RUN --json``: exit code, the result's fields, stderr."""

    code: int
    data: dict[str, Any] | None
    stderr: str


def cli(workdir: Path, instance: str, *args: str | Path) -> tuple[int, str, str]:
    """``lakehouse ARGS --json`` in this process (the Spark session is shared)."""
    argv = [str(a) for a in args]
    argv += ["--conf", str(CONF), "--workdir", str(workdir), "--quiet", "--json"]
    ran = run_cli(argv, instance_env(instance))
    return ran.code, ran.stdout, ran.stderr


@pytest.fixture(scope="module")
def judged(
    spark_session: Any,
    lakehouse_config: LakehouseConfig,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Judged]:
    config = lakehouse_config.model_copy(update={"instance": f"rc{uuid.uuid4().hex[:6]}"})
    lh = Lakehouse(spark_session, config)
    folder = tmp_path_factory.mktemp("recount")
    clock = FixedClock(START, step=timedelta(seconds=1))
    built = build(lh, clock, folder / "history")
    engines = declared_engines(folder, FAULTY)
    registry = lh.registry

    drops = run_replay(registry, plan_to(8), engines=engines, clock=clock)
    invents = run_replay(registry, plan_to(9), engines=engines, clock=clock)
    unchanged = run_replay(registry, plan_to(2, event_from="2025-03-01"), engines=engines, clock=clock)
    first_job = newest_job_id(spark_session)
    correct = run_replay(registry, plan_to(2), engines=engines, clock=clock)
    correct_jobs = newest_job_id(spark_session) - first_job
    again = run_replay(registry, plan_to(2), engines=engines, clock=clock)
    approve(registry, correct.run_id, by="risk-lead", clock=clock)
    for consumer in ("fraud-ops", "analytics"):
        ack(registry, consumer, correct.run_id, by="oncall", clock=clock)
    publish(registry, correct.run_id, clock=clock)

    def verify(run_id: str) -> Verified:
        workdir, instance = lakehouse_config.workdir_path, config.instance
        code, out, err = cli(workdir, instance, "verify-publication", run_id, "--engines", engines.path)
        return Verified(code, json.loads(out) if out.strip() else None, err)

    verified = verify(correct.run_id)
    unknown = verify("replay-0000000000000000")

    # Serving made to disagree after publication: v1's (ann, ann+promo) shared_card row,
    # retracted by the publication (one entity under v2), is current again.
    gold = built.gold
    revived = (
        gold.read()
        .where((F.col("status") == "retracted") & (F.col("correlation_type") == "shared_card"))
        .withColumn("status", F.lit("authoritative"))
        .withColumn("run_id", F.lit("late-writer"))
        .withColumn("superseded_at", F.lit(None).cast("timestamp"))
        .withColumn("superseded_by", F.lit(None).cast("string"))
        .withColumn("supersede_reason", F.lit(None).cast("string"))
    )
    gold.append(revived, run_id="late-writer")
    tampered = verify(correct.run_id)
    yield Judged(lh, drops, invents, unchanged, correct, verified, tampered, unknown, again, correct_jobs)
    drop_all(registry)


def _recorded(judged: Judged, run_id: str) -> ReconciliationDecision:
    decisions = ledger_of(judged.lakehouse, run_id, ReconciliationDecision)
    assert decisions, f"run {run_id} recorded no decision"
    last: ReconciliationDecision = decisions[-1]
    return last


def test_a_version_that_quietly_drops_a_pair_is_caught(judged: Judged) -> None:
    out = judged.drops
    assert (out.status, out.decision["verdict"]) == ("blocked", "investigate")
    assert out.decision["failed_invariant"] == "expected_pairs"
    assert out.decision["first_bad_partition"] == "2025-02"
    check = out.decision["checks"]["expected_pairs"]
    a, b = sorted([ANN, CAROL])
    assert check["examples"] == [f"shared_device {a} {b} 2025-02 (missing)"]
    assert check["counts"]["per_partition"]["2025-02"]["missing"] == 1
    assert Decimal(str(out.decision["residual_delta"])) == -1, "one pair fewer than the rule gives"
    recorded = _recorded(judged, out.run_id)
    assert (recorded.verdict, recorded.failed_invariant, recorded.first_bad_partition) == (
        "investigate",
        "expected_pairs",
        "2025-02",
    )
    recorded_check = recorded.checks["expected_pairs"]
    assert isinstance(recorded_check, dict)
    assert recorded_check["violations"] == 1
    assert "examples" not in recorded_check, "row values never go into the ledger (no erasure reaches it)"
    recorded_json = recorded.model_dump_json()
    assert a not in recorded_json
    assert b not in recorded_json
    review = json.loads((Path(str(out.review_location)) / "review.json").read_text(encoding="utf-8"))
    assert review["examples"]["expected_pairs"] == check["examples"], "kept in the review file instead"


def test_a_version_that_quietly_invents_a_pair_is_caught(judged: Judged) -> None:
    out = judged.invents
    assert (out.status, out.decision["verdict"]) == ("blocked", "investigate")
    assert out.decision["failed_invariant"] == "expected_pairs"
    assert out.decision["first_bad_partition"] == "2025-03"
    examples = out.decision["checks"]["expected_pairs"]["examples"]
    assert DAVE < INVENTED_ID
    assert f"shared_device {DAVE} {INVENTED_ID} 2025-03 (unexpected)" in examples
    assert f"shared_device {min(DAVE, ERIN)} {max(DAVE, ERIN)} 2025-03 (missing)" in examples
    assert _recorded(judged, out.run_id).verdict == "investigate"


def test_the_correct_version_publishes_and_a_range_without_change_is_suppressed(judged: Judged) -> None:
    correct = judged.correct
    assert (correct.status, correct.decision["verdict"]) == ("awaiting_approval", "publish")
    check = correct.decision["checks"]["expected_pairs"]
    assert check["passed"]
    assert check["violations"] == 0
    assert check["counts"]["entities_in_scope"] == 2, "ann and ann+promo, found by the recount itself"
    assert Decimal(str(correct.decision["residual_delta"])) == 0
    assert (judged.unchanged.status, judged.unchanged.decision["verdict"]) == ("suppressed", "suppress")


def test_a_check_after_publication_agrees_then_finds_the_revived_pair_and_says_rollback(
    judged: Judged,
) -> None:
    verified = judged.verified
    assert verified.code == 0, verified.stderr
    assert verified.data is not None
    assert (verified.data["verdict"], verified.data["failed_check"]) == ("publish", None)
    tampered = judged.tampered
    assert tampered.code == 4, "a disagreement after publication: a check found a problem"
    assert tampered.data is not None
    assert (
        tampered.data["verdict"],
        tampered.data["failed_check"],
        tampered.data["first_bad_partition"],
    ) == (
        "rollback",
        "expected_pairs",
        "2025-02",
    )
    assert f"lakehouse rollback {judged.correct.run_id}" in tampered.stderr
    a, b = sorted([ANN, PROMO])
    assert f"shared_card {a} {b} 2025-02 (unexpected)" in tampered.data["check"]["examples"]
    decisions = ledger_of(judged.lakehouse, judged.correct.run_id, ReconciliationDecision)
    after = [d for d in decisions if AFTER_PUBLICATION in d.checks]
    assert [d.verdict for d in after] == ["publish", "rollback"]
    assert after[-1].first_bad_partition == "2025-02"
    assert a not in after[-1].model_dump_json(), "the examples are printed, not recorded"
    assert judged.correct.status == "awaiting_approval", "the replay's own outcome, taken before publication"


def test_verifying_a_run_that_is_not_published_is_refused(judged: Judged) -> None:
    assert judged.unknown.code == 2, "an unknown run is bad input"
    assert "no replay run 'replay-0000000000000000'" in judged.unknown.stderr


REPLAY_STEPS = ("setup", "analyse", "scope", "candidate", "diff", "gate", "recount", "reconcile", "decision")


def test_a_replay_reports_its_wall_time_and_spark_jobs_per_step(judged: Judged) -> None:
    """Issue 42: every replay that built names its steps in order, each with its seconds and the
    Spark jobs it started (the jobs of the whole run add up from them); a rerun that only read
    back its recorded outcome computed nothing and reports no step."""
    for outcome in (judged.drops, judged.invents, judged.unchanged, judged.correct):
        steps = outcome.steps
        assert tuple(s.step for s in steps) == REPLAY_STEPS, outcome.run_id
        assert all(s.seconds > 0 and s.spark_jobs >= 0 for s in steps)
        by_step = {s.step: s.spark_jobs for s in steps}
        assert by_step["analyse"] > 0, by_step
        assert by_step["reconcile"] > 0, by_step
    assert sum(s.spark_jobs for s in judged.correct.steps) == judged.correct_jobs, "the steps cover the run"
    assert judged.again.run_id == judged.correct.run_id
    assert judged.again.steps == ()
