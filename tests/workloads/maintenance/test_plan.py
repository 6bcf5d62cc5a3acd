"""The maintenance decision per table: what may be expired and compacted, and what is kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from workloads.maintenance import Guard, TableFacts, decide
from workloads.policies import MaintenancePolicy, RetentionPolicy
from workloads.vocabulary import ProtectionReason

NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)
RETENTION = RetentionPolicy(bronze_days=30, silver_days=10, gold_days=10, ops_days=100)
POLICY = MaintenancePolicy(owner="data-platform", target_file_bytes=4096, compact_min_small_files=3)


def facts(
    *, tags: bool = True, candidates: tuple[str, ...] = (), small: int = 5, zone: str = "silver"
) -> TableFacts:
    """Versions 1..4 committed 40, 20, 5 and 1 days ago."""
    ages = {1: 40, 2: 20, 3: 5, 4: 1}
    return TableFacts(
        name=f"{zone}.t",
        zone=zone,
        format="iceberg" if tags else "delta",
        version_tags=tags,
        versions={v: NOW - timedelta(days=d) for v, d in ages.items()},
        candidates=candidates,
        small_files=small,
        live_files=small + 1,
    )


def guard(version: int, reason: ProtectionReason = ProtectionReason.PUBLISHED) -> Guard:
    return Guard(version, NOW + timedelta(days=3), reason, f"{reason.value} by run r-{version}")


def test_history_older_than_the_zones_retention_is_expired_and_small_files_compacted() -> None:
    silver = decide(facts(), [], [], RETENTION, POLICY, NOW)
    assert silver.expire_before == NOW - timedelta(days=10)
    assert silver.compact is True
    assert silver.kept == ()
    bronze = decide(facts(zone="bronze"), [], [], RETENTION, POLICY, NOW)
    assert bronze.expire_before == NOW - timedelta(days=30), "each zone has its own retention"


def test_nothing_is_expired_when_no_version_is_older_than_the_retention() -> None:
    ops = decide(facts(zone="ops"), [], [], RETENTION, POLICY, NOW)
    assert ops.expire_before is None
    assert decide(facts(small=2), [], [], RETENTION, POLICY, NOW).compact is False, "below the threshold"


def test_a_legal_hold_keeps_all_history_but_compaction_still_runs() -> None:
    decision = decide(facts(), [], ["LH-1 (placed by counsel)"], RETENTION, POLICY, NOW)
    assert decision.expire_before is None
    assert decision.compact is True
    assert decision.kept == ("all history: legal hold LH-1 (placed by counsel) is placed",)


def test_delta_keeps_every_file_a_protected_version_needs_by_moving_its_cutoff_back() -> None:
    delta = decide(facts(tags=False), [guard(1), guard(3)], [], RETENTION, POLICY, NOW)
    assert delta.expire_before == NOW - timedelta(days=40), "the oldest protected version's commit"
    assert delta.kept == ("version 1: published by run r-1",)
    iceberg = decide(facts(tags=True), [guard(1)], [], RETENTION, POLICY, NOW)
    assert iceberg.expire_before == NOW - timedelta(days=10), "Iceberg keeps it by its tag"
    assert iceberg.kept == ("version 1: published by run r-1",)


def test_an_open_candidate_stops_delta_vacuum_and_any_compaction() -> None:
    delta = decide(facts(tags=False, candidates=("replay-x",)), [], [], RETENTION, POLICY, NOW)
    assert delta.expire_before is None
    assert delta.compact is False
    assert any("open candidate replay-x" in why and "VACUUM" in why for why in delta.kept)
    iceberg = decide(facts(tags=True, candidates=("replay-x",)), [], [], RETENTION, POLICY, NOW)
    assert iceberg.expire_before == NOW - timedelta(days=10), "branches are kept by Iceberg"
    assert iceberg.compact is False


def test_a_rollback_window_stops_compaction() -> None:
    target = guard(3, ProtectionReason.ROLLBACK_TARGET)
    decision = decide(facts(), [target], [], RETENTION, POLICY, NOW)
    assert decision.compact is False
    assert decision.expire_before == NOW - timedelta(days=10)
    assert decision.kept == (
        "small files: rollback-target by run r-3; a rollback refuses once serving moved",
    )
