"""The benchmark lake's cache without Spark (benchmarks/lake.py): the key, the state file, which
stages a build runs and a stopped build continues with, and the pristine copy's links."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchmarks import lake as bench_lake
from benchmarks.lake import (
    STAGES,
    CachedLake,
    LakeState,
    cache_root,
    copy_lake,
    differences,
    digest_sources,
    ensure_lake,
    lake_key,
    listing,
    read_state,
    remaining,
    stale_reason,
    write_state,
)
from workloads.vocabulary import FEEDS


def test_the_cache_is_the_variable_or_under_the_home_cache() -> None:
    home = Path("/home/u")
    assert cache_root({}, home) == home / ".cache" / "lakehouse-replay" / "lakes"
    assert cache_root({"LAKEHOUSE_BENCH_CACHE": " "}, home) == home / ".cache" / "lakehouse-replay" / "lakes"
    assert cache_root({"LAKEHOUSE_BENCH_CACHE": "/data/lakes"}, home) == Path("/data/lakes")


def test_the_key_names_size_seed_formats_and_generator_version() -> None:
    assert lake_key("abc123", 7, 20_000) == "20000ev-seed7-mixed-genabc123"
    assert lake_key("abc123", 8, 20_000, "delta") == "20000ev-seed8-delta-genabc123"
    keys = {
        lake_key("abc", 7, 20_000),
        lake_key("abd", 7, 20_000),
        lake_key("abc", 8, 20_000),
        lake_key("abc", 7, 20_001),
        lake_key("abc", 7, 20_000, "iceberg"),
    }
    assert len(keys) == 5
    with pytest.raises(ValueError, match="events"):
        lake_key("abc", 7, 0)


def test_the_generator_version_follows_the_contents_not_their_order() -> None:
    one = digest_sources({"a.py": b"x = 1", "b.py": b"y = 2"})
    assert one == digest_sources({"b.py": b"y = 2", "a.py": b"x = 1"})
    assert one != digest_sources({"a.py": b"x = 1", "b.py": b"y = 3"})
    assert digest_sources({"a": b"bc"}) != digest_sources({"ab": b"c"})
    assert len(one) == 12


def test_the_generator_version_reads_the_generator_and_its_lateness_policy_not_the_demo() -> None:
    sources = bench_lake.generator_sources()
    assert {"generator.py", "events.py", "lateness policy"} <= set(sources)
    assert "demo.py" not in sources


def test_the_stages_ingest_every_feed_then_build_silver_gold_and_the_pristine_copy() -> None:
    expected = ("generate", *(f"ingest {f}" for f in FEEDS), "silver", "gold", "pristine")
    assert expected == STAGES


def test_a_build_runs_from_the_first_stage_not_done() -> None:
    assert remaining(STAGES, ()) == STAGES
    assert remaining(STAGES, STAGES) == ()
    assert remaining(STAGES, STAGES[:3]) == STAGES[3:]
    # a stage after one not done runs again whatever the state says
    assert remaining(STAGES, ("generate", "silver")) == STAGES[1:]


def _state(path: str = "/c/k/live", **changes: object) -> LakeState:
    state = LakeState("20ev-seed7-mixed-genabc", 20, 7, None, "abc", path)
    return LakeState(**{**state.__dict__, **changes})


def test_the_state_file_round_trips_and_a_finished_stage_is_recorded_once(tmp_path: Path) -> None:
    state = _state().with_stage("generate", 1.234).with_stage("ingest orders", 2.0)
    state = state.with_stage("generate", 3.0)  # run again: once, last
    assert state.done == ("ingest orders", "generate")
    assert state.seconds == {"generate": 3.0, "ingest orders": 2.0}
    write_state(tmp_path / "state.json", state)
    assert read_state(tmp_path / "state.json") == state
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temporary file left
    assert not state.finished
    assert _state(done=STAGES).finished


def test_a_missing_or_unreadable_state_starts_the_build_over(tmp_path: Path) -> None:
    assert read_state(tmp_path / "state.json") is None
    (tmp_path / "state.json").write_text("{not json")
    assert read_state(tmp_path / "state.json") is None
    (tmp_path / "state.json").write_text(json.dumps({"key": "k"}))
    assert read_state(tmp_path / "state.json") is None


def test_a_state_of_another_lake_or_another_folder_is_stale() -> None:
    expected = _state()
    assert stale_reason(None, expected) is None
    assert stale_reason(_state(done=("generate",), commit="abc"), expected) is None
    assert "path" in str(stale_reason(_state(path="/elsewhere/live"), expected))
    assert "generator_version" in str(stale_reason(_state(generator_version="def"), expected))


def test_the_listing_tells_a_changed_copy(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.parquet").write_bytes(b"12345")
    (tmp_path / "b.json").write_text("{}")
    before = listing(tmp_path)
    assert set(before) == {"a/x.parquet", "b.json"}
    assert differences(before, listing(tmp_path)) == []
    (tmp_path / "b.json").write_text("{1}")
    (tmp_path / "a" / "x.parquet").unlink()
    (tmp_path / "c").write_text("")
    assert differences(before, listing(tmp_path)) == ["missing a/x.parquet", "added c", "changed b.json"]


def test_a_copy_links_data_files_and_deliveries_and_copies_the_rest(tmp_path: Path) -> None:
    source = tmp_path / "source"
    for relative in ("lake/warehouse/t/part-0.parquet", "history/orders/2025-01-01/o.jsonl", "lake/cat.db"):
        (source / relative).parent.mkdir(parents=True, exist_ok=True)
        (source / relative).write_text(relative)
    (source / "lake" / "empty").mkdir()
    recorded = listing(source)
    assert copy_lake(source, tmp_path / "copy") == (2, 1)
    copy = tmp_path / "copy"
    assert (copy / "lake" / "empty").is_dir()
    data_file = "lake/warehouse/t/part-0.parquet"
    assert os.path.samefile(source / data_file, copy / data_file)
    assert not os.path.samefile(source / "lake/cat.db", copy / "lake/cat.db")
    # what a benchmark does to its copy (write the catalog in place, delete data files)
    (copy / "lake" / "cat.db").write_text("changed")
    (copy / data_file).unlink()
    assert differences(recorded, listing(source)) == []


class FakeStages:
    """Stages that record what ran and fail once at ``fail_at`` (a build stopped there)."""

    def __init__(self, ran: list[str], fail_at: str | None) -> None:
        self.ran, self.fail_at = ran, fail_at

    def __call__(self, lake: CachedLake, state: LakeState, say: object) -> FakeStages:
        self.state, self.lake = state, lake
        return self

    def run(self, stage: str) -> None:
        if stage == self.fail_at:
            self.fail_at = None
            raise KeyboardInterrupt(stage)
        if stage == "generate":
            self.state = LakeState(**{**self.state.__dict__, "generated_events": 21})
        if stage == "pristine":
            (self.lake.folder / bench_lake.PRISTINE_FILES).write_text("{}")
        self.ran.append(stage)

    def stop(self) -> None:
        self.ran.append("stop")


def test_a_stopped_build_continues_where_it_stopped_and_a_finished_one_is_reused(tmp_path: Path) -> None:
    ran: list[str] = []
    stages = FakeStages(ran, fail_at="silver")
    messages: list[str] = []

    def build(**options: object) -> CachedLake:
        return ensure_lake(20, cache=tmp_path, progress=messages.append, builder=stages, **options)  # type: ignore[arg-type]

    with pytest.raises(KeyboardInterrupt):
        build()
    lake = CachedLake(next(tmp_path.iterdir()))
    assert ran == [*STAGES[: STAGES.index("silver")], "stop"]
    state = lake.state()
    assert state is not None
    assert state.done == STAGES[: STAGES.index("silver")]
    assert state.generated_events == 21
    assert state.path == str(lake.live)

    ran.clear()
    assert build() == lake
    assert ran == ["silver", "gold", "pristine", "stop"]
    assert any(m.startswith("continuing the build") and "at silver" in m for m in messages)
    finished = lake.state()
    assert finished is not None
    assert finished.finished

    ran.clear()
    build()
    assert ran == []
    assert messages[-1].startswith(f"reusing the lake in {lake.folder}")

    build(rebuild=True)
    assert ran == [*STAGES, "stop"]
