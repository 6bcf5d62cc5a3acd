"""The operational view: progress per source, a stopped feed flagged while the others deliver."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.cli_runner import instance_env, run_cli
from workloads.operations import (
    ACTIVE,
    NEVER_DELIVERED,
    STALLED,
    FeedStats,
    ProgressPolicy,
    load_progress_policy,
    source_progress,
)
from workloads.silver.lateness import load_lateness_policy
from workloads.vocabulary import FEEDS

REPO = Path(__file__).resolve().parents[3]
CONF = REPO / "conf" / "lakehouse.yaml"
AT = datetime(2025, 1, 6, 2, tzinfo=UTC)


def policy() -> ProgressPolicy:
    return load_progress_policy()


def stats(feed: str, last_ingest: datetime | None, rows: int = 10) -> FeedStats:
    last_event = last_ingest - timedelta(hours=5) if last_ingest else None
    return FeedStats(feed, rows if last_ingest else 0, 2 if last_ingest else 0, last_event, last_ingest)


def test_each_feed_is_judged_against_its_own_cadence_so_an_active_one_hides_no_stopped_one() -> None:
    report = source_progress(
        [
            stats("orders", AT - timedelta(hours=2)),
            stats("logins", AT - timedelta(hours=49)),
            stats("refunds", None),
        ],
        load_lateness_policy(),
        policy(),
        AT,
    )
    by_feed = {s.feed: s for s in report.sources}
    assert by_feed["orders"].status == ACTIVE
    assert by_feed["logins"].status == STALLED, "48 h is twice its 24 h cadence"
    assert by_feed["refunds"].status == NEVER_DELIVERED
    assert report.stalled == ("logins", "refunds")
    orders = by_feed["orders"]
    assert orders.ingest_lag_hours == 2
    assert orders.event_lag_hours == 7
    assert orders.watermark == AT - timedelta(hours=7) - timedelta(days=3), "allowed_lateness_days = 3"
    assert orders.stalled_after_hours == 48


def test_the_policy_needs_a_cadence_for_every_feed(tmp_path: Path) -> None:
    shipped = (REPO / "conf" / "policies.yaml").read_text(encoding="utf-8")
    broken = tmp_path / "policies.yaml"
    broken.write_text(shipped.replace("    outcomes: {cadence_hours: 24}\n", ""), encoding="utf-8")
    with pytest.raises(ValueError, match=r"progress.feeds has no cadence for outcomes"):
        load_progress_policy(broken)
    assert {f.value for f in policy().feeds} == {f.value for f in FEEDS}


def deliver(root: Path, feed: str, day: date, lines: int = 2) -> None:
    """One partner delivery of ``feed`` on ``day``: ``lines`` orders or logins of that day."""
    folder = root / feed / day.isoformat()
    folder.mkdir(parents=True, exist_ok=True)
    rows = [
        json.dumps(
            {
                "schema_version": "2",
                "event_id": f"{feed}-{day:%m%d}-{n}",
                "event_time": f"{day - timedelta(days=1)}T1{n}:00:00Z",
            }
        )
        for n in range(lines)
    ]
    (folder / f"{feed}-{day}-1.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")


@pytest.mark.spark
def test_progress_flags_the_feed_that_stopped_delivering_and_clears_it_when_it_resumes(
    spark_session: Any, lakehouse_config: Any, tmp_path: Path
) -> None:
    from lakehouse.config import load_config
    from tests.conftest import Lakehouse, drop_all

    env = instance_env(f"prg{uuid.uuid4().hex[:6]}")
    workdir = lakehouse_config.workdir_path

    def cli(*args: str) -> Any:
        return run_cli([*args, "--conf", str(CONF), "--workdir", str(workdir), "--quiet", "--json"], env)

    days = [date(2025, 1, d) for d in range(1, 6)]
    early, late = tmp_path / "early", tmp_path / "late"
    for day in days:
        deliver(early, "orders", day)
        deliver(early if day <= days[1] else late, "logins", day)
    at = "2025-01-05T06:00:00Z"
    lh = Lakehouse(spark_session, load_config(CONF, environ=env, overrides={"workdir": str(workdir)}))
    try:
        assert cli("ingest", "--feed", "orders", "--source", str(early / "orders")).code == 0
        assert cli("ingest", "--feed", "logins", "--source", str(early / "logins")).code == 0
        stopped = cli("progress", "--at", at)
        assert cli("ingest", "--feed", "logins", "--source", str(late / "logins")).code == 0
        resumed = cli("progress", "--at", at)
        before_logins = cli("progress", "--at", "2025-01-02T06:00:00Z")
    finally:
        drop_all(lh.registry)

    assert stopped.code == 4, stopped.stderr
    sources = {s["feed"]: s for s in json.loads(stopped.stdout)["sources"]}
    assert sources["orders"]["status"] == ACTIVE
    assert sources["orders"]["rows_in_interval"] == 2, "the 2025-01-05 delivery"
    assert sources["orders"]["rows"] == 10
    assert sources["orders"]["last_ingest_time"].startswith("2025-01-05T00:00:00")
    assert sources["orders"]["last_event_time"].startswith("2025-01-04T11:00:00")
    assert sources["logins"]["status"] == STALLED, "its last delivery was 2025-01-02: 78 h ago"
    assert sources["logins"]["ingest_lag_hours"] == 78
    assert sources["refunds"]["status"] == NEVER_DELIVERED
    assert resumed.code == 4, "refunds, settlements and outcomes never delivered"
    sources = {s["feed"]: s for s in json.loads(resumed.stdout)["sources"]}
    assert sources["logins"]["status"] == ACTIVE
    assert sources["logins"]["rows"] == 10
    earlier = {s["feed"]: s for s in json.loads(before_logins.stdout)["sources"]}
    assert earlier["orders"]["rows"] == 4, "--at counts only what was delivered by then"
    assert earlier["orders"]["status"] == ACTIVE


def test_progress_refuses_a_bad_instant_before_spark_starts(tmp_path: Path) -> None:
    ran = run_cli(["progress", "--at", "2025-01-05", "--workdir", str(tmp_path / "none")], {})
    assert ran.code == 2
    assert "--at" in ran.stderr
    assert "starting Spark" not in ran.stderr
