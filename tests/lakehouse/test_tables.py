"""Table behaviours every caller relies on, run once per format (delta, iceberg); those marked
``catalog`` also on the Iceberg catalog on PostgreSQL (iceberg-pg, see tests/lakehouse/conftest.py)."""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lakehouse.config import Zone
from lakehouse.errors import (
    CandidateError,
    TableError,
    UsageError,
    VersionNotFoundError,
    ZonePolicyError,
)
from lakehouse.tables import Table
from lakehouse.tables.base import Found, Search, file_path, files_matching_tables
from tests.lakehouse.conftest import ICEBERG

pytestmark = pytest.mark.spark

SCHEMA = "id INT NOT NULL, part STRING NOT NULL, value INT"


def rows(table: Table, **read: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in table.read(**read).collect())


def frame(spark: Any, data: list[tuple[Any, ...]]) -> Any:
    return spark.createDataFrame(data, SCHEMA)


@pytest.fixture
def table(make_table: Any) -> Table:
    return make_table(SCHEMA, partition_by=("part",), sort_by=("id",))  # type: ignore[no-any-return]


def test_as_of_reads_return_exactly_each_versions_content(table: Table, spark_session: Any) -> None:
    table.append(frame(spark_session, [(1, "a", 10)]), run_id="run-1")
    first = table.current_version()
    time.sleep(0.05)
    between = datetime.now(UTC)
    time.sleep(0.05)
    table.append(frame(spark_session, [(2, "b", 20)]), run_id="run-2")
    second = table.current_version()
    table.overwrite_partitions(frame(spark_session, [(3, "a", 30)]), run_id="run-3")

    assert first is not None
    assert second is not None
    assert rows(table, as_of=first) == [(1, "a", 10)]
    assert rows(table, as_of=second) == [(1, "a", 10), (2, "b", 20)]
    assert rows(table, as_of=str(first)) == [(1, "a", 10)]
    assert rows(table, as_of=between) == [(1, "a", 10)]
    assert rows(table, as_of=between.isoformat()) == [(1, "a", 10)]
    naive_utc = between.astimezone(UTC).replace(tzinfo=None)
    assert rows(table, as_of=naive_utc) == [(1, "a", 10)]
    assert rows(table) == [(2, "b", 20), (3, "a", 30)]


def test_as_of_refuses_unknown_versions_and_times_before_the_table(table: Table, spark_session: Any) -> None:
    table.append(frame(spark_session, [(1, "a", 10)]))
    with pytest.raises(VersionNotFoundError, match="has no version 987654"):
        table.read(as_of=987654)
    with pytest.raises(VersionNotFoundError, match="did not exist yet"):
        table.read(as_of="2001-01-01T00:00:00+00:00")
    with pytest.raises(UsageError, match="neither a version number nor an ISO-8601"):
        table.read(as_of="last tuesday")


def test_run_id_written_at_commit_shows_up_in_history(table: Table, spark_session: Any) -> None:
    table.append(frame(spark_session, [(1, "a", 10)]), run_id="run-append")
    table.merge(frame(spark_session, [(1, "a", 11)]), keys=["id"], run_id="run-merge")
    table.delete_where("id = 1", run_id="run-delete")
    run_ids = [c.run_id for c in table.history() if c.run_id]
    assert run_ids[-3:] == ["run-append", "run-merge", "run-delete"]


def test_merge_by_key_updates_matches_and_inserts_new_keys(table: Table, spark_session: Any) -> None:
    table.append(frame(spark_session, [(1, "a", 10), (2, "b", 20)]))
    table.merge(frame(spark_session, [(2, "b", 21), (3, "c", 30)]), keys=["id"], run_id="m")
    assert rows(table) == [(1, "a", 10), (2, "b", 21), (3, "c", 30)]


def test_overwrite_partitions_replaces_only_partitions_present(table: Table, spark_session: Any) -> None:
    table.append(frame(spark_session, [(1, "a", 10), (2, "a", 20), (3, "b", 30)]))
    table.overwrite_partitions(frame(spark_session, [(9, "a", 90)]))
    assert rows(table) == [(3, "b", 30), (9, "a", 90)]


def test_replace_empties_partitions_absent_from_the_data_in_one_commit(
    table: Table, spark_session: Any
) -> None:
    table.append(frame(spark_session, [(1, "a", 10), (2, "b", 20)]), run_id="run-1")
    before = len(table.history())
    table.replace(frame(spark_session, [(3, "c", 30), (4, "c", 40)]), run_id="run-replace")
    assert rows(table) == [(3, "c", 30), (4, "c", 40)]
    assert len(table.history()) == before + 1
    assert table.history()[-1].run_id == "run-replace"


def test_writes_align_columns_and_refuse_schema_mismatch(table: Table, spark_session: Any) -> None:
    reordered = frame(spark_session, [(1, "a", 10)]).select("value", "part", "id")
    table.append(reordered)
    assert rows(table) == [(1, "a", 10)]
    with pytest.raises(UsageError, match="missing columns \\['value'\\]"):
        table.append(frame(spark_session, [(2, "a", 1)]).drop("value"))


def test_candidate_is_invisible_until_published(table: Table, spark_session: Any) -> None:
    table.append(frame(spark_session, [(1, "a", 10), (2, "b", 20)]), run_id="base")
    candidate = table.stage_candidate("replay_1")
    table.overwrite_partitions(frame(spark_session, [(5, "a", 50)]), run_id="cand", candidate=candidate)
    table.append(frame(spark_session, [(6, "c", 60)]), run_id="cand", candidate=candidate)

    assert rows(table) == [(1, "a", 10), (2, "b", 20)]
    assert sorted(tuple(r) for r in table.read_candidate(candidate).collect()) == [
        (2, "b", 20),
        (5, "a", 50),
        (6, "c", 60),
    ]
    assert table.list_candidates() == ["replay_1"]

    table.publish(candidate, run_id="publish")
    assert rows(table) == [(2, "b", 20), (5, "a", 50), (6, "c", 60)]
    assert table.list_candidates() == []


def test_candidate_merge_and_delete_publish_whole_effect(table: Table, spark_session: Any) -> None:
    table.append(frame(spark_session, [(1, "a", 10), (2, "b", 20), (3, "c", 30)]))
    candidate = table.stage_candidate("fix")
    table.merge(frame(spark_session, [(1, "a", 11)]), keys=["id"], candidate=candidate)
    table.delete_where("id = 3", candidate=candidate)
    table.publish(candidate)
    assert rows(table) == [(1, "a", 11), (2, "b", 20)]


def test_dropping_a_candidate_leaves_serving_untouched(table: Table, spark_session: Any) -> None:
    table.append(frame(spark_session, [(1, "a", 10)]))
    before_version = table.current_version()
    candidate = table.stage_candidate("discard_me")
    table.overwrite_partitions(frame(spark_session, [(7, "a", 70)]), candidate=candidate)
    table.drop_candidate(candidate)
    assert rows(table) == [(1, "a", 10)]
    assert table.current_version() == before_version
    assert table.list_candidates() == []
    with pytest.raises(CandidateError, match="does not exist"):
        table.publish(candidate)


def test_publish_is_refused_when_serving_moved_after_staging(table: Table, spark_session: Any) -> None:
    table.append(frame(spark_session, [(1, "a", 10)]))
    candidate = table.stage_candidate("stale")
    table.overwrite_partitions(frame(spark_session, [(2, "a", 20)]), candidate=candidate)
    table.append(frame(spark_session, [(3, "b", 30)]), run_id="late-arrival")
    with pytest.raises(CandidateError, match="moved"):
        table.publish(candidate)
    assert rows(table) == [(1, "a", 10), (3, "b", 30)]


@pytest.mark.catalog
def test_a_concurrent_reader_sees_old_or_new_never_a_mix(table: Table, spark_session: Any) -> None:
    old = [(i, p, 1) for i, p in enumerate(["a", "b", "c", "d"] * 5)]
    table.append(frame(spark_session, old))
    candidate = table.stage_candidate("atomic")
    new = [(100 + i, p, 2) for i, p in enumerate(["a", "b", "c", "d"] * 5)]
    table.overwrite_partitions(frame(spark_session, new), candidate=candidate)

    seen: list[tuple[int, int]] = []
    # what reads that started after the publish returned: on a loaded machine one read can
    # outlast any fixed wait, so the test waits for such a read instead of sleeping
    after: list[tuple[int, int]] = []
    published, stop = threading.Event(), threading.Event()

    def reader() -> None:
        while not stop.is_set():
            started_after = published.is_set()
            row = table.read().selectExpr("count(*) AS n", "sum(value) AS total").collect()[0]
            (after if started_after else seen).append((row["n"], row["total"]))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        time.sleep(0.5)
        table.publish(candidate)
        published.set()
        deadline = time.monotonic() + 120
        while not after and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join()
    assert seen, "the reader never ran"
    assert set(seen + after) <= {(20, 20), (20, 40)}, f"a reader saw a mixed state: {set(seen + after)}"
    assert after, "no read started after the publish"
    assert set(after) == {(20, 40)}, f"a read after the publish saw the old state: {after}"


@pytest.mark.catalog
def test_rollback_restores_the_exact_prior_content(table: Table, spark_session: Any) -> None:
    table.append(frame(spark_session, [(1, "a", 10), (2, "b", 20)]))
    good = table.current_version()
    assert good is not None
    table.overwrite_partitions(frame(spark_session, [(1, "a", -1)]), run_id="bad")
    table.rollback(good, run_id="undo")
    assert rows(table) == [(1, "a", 10), (2, "b", 20)]
    if table.capabilities.rollback_creates_commit:
        assert table.history()[-1].run_id == "undo"
    else:
        assert table.current_version() == good


def test_bronze_refuses_overwrite_merge_delete_but_allows_erasure(
    make_table: Any, spark_session: Any
) -> None:
    bronze = make_table(SCHEMA, zone=Zone.BRONZE, partition_by=("part",))
    bronze.append(frame(spark_session, [(1, "a", 10), (2, "a", 20)]))
    data = frame(spark_session, [(1, "a", 0)])
    for attempt, operation in (
        (lambda: bronze.overwrite_partitions(data), "overwrite"),
        (lambda: bronze.merge(data, keys=["id"]), "merge"),
        (lambda: bronze.delete_where("id = 1"), "delete"),
        (lambda: bronze.rollback(bronze.current_version()), "rollback"),
    ):
        with pytest.raises(ZonePolicyError, match=f"append-only: {operation} is refused"):
            attempt()
    assert rows(bronze) == [(1, "a", 10), (2, "a", 20)]

    bronze.erase("id = 1", run_id="erase-1", reason="subject erasure request 42")
    assert rows(bronze) == [(2, "a", 20)]
    last = bronze.history()[-1]
    assert last.run_id == "erase-1"
    assert last.metadata["lakehouse.erasure-reason"] == "subject erasure request 42"


@pytest.mark.catalog
def test_a_failed_create_leaves_no_table_behind(make_table: Any) -> None:
    broken = make_table("id INT, part STRING", partition_by=("no_such_column",), create=False)
    with pytest.raises(TableError, match="cannot create"):
        broken.create()
    assert not broken.exists()


def test_expire_forgets_old_states_but_keeps_the_current(table: Table, spark_session: Any) -> None:
    table.append(frame(spark_session, [(1, "a", 10)]))
    first = table.current_version()
    table.overwrite_partitions(frame(spark_session, [(2, "a", 20)]))
    time.sleep(0.05)
    table.expire(datetime.now(UTC) + timedelta(seconds=1), retain_last=1)
    assert rows(table) == [(2, "a", 20)]
    with pytest.raises(Exception):  # noqa: B017, PT011 - each format fails in its own words
        table.read(as_of=first).collect()


def test_compaction_keeps_the_rows_in_fewer_files_and_expiry_then_frees_the_old_ones(
    table: Table, spark_session: Any
) -> None:
    for value in range(3):
        table.append(frame(spark_session, [(value, "a", value)]), run_id=f"run-{value}")
    before = table.current_version()
    assert before is not None
    assert len(table.data_file_sizes()) == 3
    stored = table.stored_size()

    compacted = table.compact(1 << 27, run_id="maintain-1")

    assert compacted is not None
    assert compacted != before
    assert rows(table) == [(0, "a", 0), (1, "a", 1), (2, "a", 2)]
    assert len(table.data_file_sizes()) == 1
    assert rows(table, as_of=before) == rows(table), "the version before compaction is still readable"
    assert table.compact(1 << 27) is None, "one file per partition: nothing left to rewrite"
    grown = table.stored_size()
    assert grown.files > stored.files, "old files stay until expiry"
    assert grown.bytes > stored.bytes

    time.sleep(0.05)
    table.expire(datetime.now(UTC) + timedelta(seconds=1), retain_last=1)

    assert table.stored_size().files < grown.files
    assert rows(table) == [(0, "a", 0), (1, "a", 1), (2, "a", 2)]


def expire_everything_older_than_now(table: Table, spark: Any) -> None:
    """Iceberg's own expiry by plain SQL, stronger than its defaults: every snapshot older than now."""
    time.sleep(1.1)  # the procedure takes whole seconds
    spark.sql(
        f"CALL `{table.catalog}`.system.expire_snapshots(table => '{table.procedure_name}', "  # type: ignore[attr-defined]
        f"older_than => TIMESTAMP '{datetime.now(UTC):%Y-%m-%d %H:%M:%S}', retain_last => 1)"
    )


def test_kept_history_and_tags_survive_the_formats_own_maintenance_and_a_loss_is_named(
    table: Table, spark_session: Any
) -> None:
    """The format's maintenance runs as a platform team runs it, by plain Spark SQL."""
    table.append(frame(spark_session, [(1, "a", 10)]), run_id="run-1")
    first = table.current_version()
    table.append(frame(spark_session, [(2, "b", 20)]), run_id="run-2")
    second = table.current_version()
    table.overwrite_partitions(frame(spark_session, [(3, "a", 30)]), run_id="run-3")
    assert first is not None
    assert second is not None
    assert set(table.version_times()) >= {first, second}

    assert table.keep_history(90) != {}
    assert table.keep_history(90) == {}, "kept history is only written when it is too short"
    kept = table.history_retention_days()
    assert kept is not None
    assert kept >= 90

    if table.capabilities.version_tags:
        table.tag_version("lh-test-first", first, 30)
        assert [(t.name, t.version, t.retain_days) for t in table.tags()] == [("lh-test-first", first, 30)]
        expire_everything_older_than_now(table, spark_session)
        assert rows(table, as_of=first) == [(1, "a", 10)], "a tagged snapshot outlives an expiry"
        assert table.readable(first)
        assert not table.readable(second)
        assert "expire_snapshots" in table.removal_note(second)
        table.drop_tag("lh-test-first")
        assert table.tags() == []
        expire_everything_older_than_now(table, spark_session)
        assert not table.readable(first)
    else:
        spark_session.sql(f"VACUUM {table.sql_name}")
        assert table.readable(first)
        with pytest.raises(Exception, match="RETENTION_PERIOD_TOO_SHORT"):  # Delta's own check is on
            spark_session.sql(f"VACUUM {table.sql_name} RETAIN 0 HOURS")
        assert table.readable(first)
        check = "spark.databricks.delta.retentionDurationCheck.enabled"
        spark_session.conf.set(check, "false")
        try:
            spark_session.sql(f"VACUUM {table.sql_name} RETAIN 0 HOURS")
        finally:
            spark_session.conf.unset(check)
        assert not table.readable(first)
        assert not table.readable(second)
        assert "VACUUM (RETAIN 0 HOURS)" in table.removal_note(first)
    current = table.current_version()
    assert current is not None
    assert table.readable(current)
    assert rows(table) == [(2, "b", 20), (3, "a", 30)]


PERSONAL_SCHEMA = "id INT NOT NULL, part STRING NOT NULL, who STRING"
SUBJECT = "zed.subject@example.org"


def subject_keys(spark: Any) -> Any:
    return spark.createDataFrame([([SUBJECT],)], "who array<string>")


def files_naming(table: Table, needle: str) -> list[str]:
    """Every file under the table's folders that still holds ``needle``: Parquet read by its
    rows with pyarrow (rows a log or delete file hides included), anything else by its bytes."""
    import os

    import pyarrow.parquet as pq

    found = []
    for location in table.storage_locations():
        root = file_path(location)
        for folder, _, names in os.walk(root):
            for name in names:
                path = os.path.join(folder, name)
                if name.endswith(".parquet"):
                    values = pq.read_table(path).to_pylist()
                    if any(needle in str(row) for row in values):
                        found.append(path)
                else:
                    with open(path, "rb") as handle:
                        if needle.encode() in handle.read():
                            found.append(path)
    return sorted(found)


BEFORE_SUBJECT = [(1, "a", "bob@example.org"), (2, "b", "carol@example.org")]


def subject_history(make_table: Any, spark: Any) -> tuple[Table, int, int]:
    """A Bronze table of two versions: ``before`` (:data:`BEFORE_SUBJECT`), then ``held``, which
    adds the subject's row and another person's."""
    table = make_table(PERSONAL_SCHEMA, zone=Zone.BRONZE, partition_by=("part",), personal=("who",))
    table.append(spark.createDataFrame(BEFORE_SUBJECT, PERSONAL_SCHEMA), run_id="r1")
    before = table.current_version()
    table.append(
        spark.createDataFrame([(3, "a", SUBJECT), (4, "b", "dave@example.org")], PERSONAL_SCHEMA), run_id="r2"
    )
    held = table.current_version()
    assert before is not None
    assert held is not None
    return table, before, held


def test_an_erasure_rewrites_the_subjects_files_and_purges_only_the_versions_that_held_them(
    make_table: Any, spark_session: Any
) -> None:
    table, before, held = subject_history(make_table, spark_session)
    if table.capabilities.version_tags:
        table.tag_version("audit-keep", held, 30)
    keys = subject_keys(spark_session)
    on = "array_contains(s.who, t.who)"

    by_version = table.files_matching_versions(keys, on, table.retained_versions())
    assert by_version == {v: table.files_matching(keys, on, version=v) for v in table.retained_versions()}, (
        "one job over every version finds what one job per version finds"
    )
    other = make_table("id INT, who STRING")
    other.append(
        spark_session.createDataFrame([(9, SUBJECT), (10, "erin@example.org")], "id INT, who STRING")
    )
    mine = other.current_version()
    assert mine is not None
    both = files_matching_tables(
        keys, [Search(table, on, table.retained_versions()), Search(other, "t.who = s.who[0]", [mine])]
    )
    assert both[0] == Found(by_version, {}), "one job over several tables finds what one per table finds"
    assert both[1] == Found({mine: other.files_matching(keys, "t.who = s.who[0]")}, {})
    assert sum(both[1].versions[mine].values()) == 1
    holding = sorted(v for v, files in by_version.items() if files)
    files = sorted({f for found in by_version.values() for f in found})
    assert holding == [held]
    assert [sum(found.values()) for found in by_version.values() if found] == [1]
    assert files_naming(table, SUBJECT), "the subject is on disk before the erasure"

    with pytest.raises(UsageError, match="needs a reason"):
        table.erase_matching(keys, on, run_id="erase-1", reason=" ")
    table.erase_matching(keys, on, run_id="erase-1", reason="request 7")
    others = [(1, "a", "bob@example.org"), (2, "b", "carol@example.org"), (4, "b", "dave@example.org")]
    assert rows(table) == others
    assert table.history()[-1].metadata["lakehouse.erasure-reason"] == "request 7"
    done = table.purge(holding, files, note="erasure certificate C-1")

    assert files_naming(table, SUBJECT) == [], "no data, log, manifest or metadata file names the subject"
    assert held not in table.retained_versions(), "the version that held the subject is gone"
    if not table.capabilities.version_tags:
        assert table.removal_note(held).endswith("was purged: erasure certificate C-1")
    assert rows(table, as_of=before) == BEFORE_SUBJECT
    assert table.readable(before), "a version that never held the subject stays readable"
    if table.capabilities.version_tags:
        assert "dropped tag audit-keep" in " ".join(done)
        assert all(t.name != "audit-keep" for t in table.tags())
    assert files_naming(table, "dave@example.org"), "other subjects' rows stay"


def plant_unreferenced_copy(source: str, label: str, age: timedelta) -> str:
    """A data file no snapshot references, beside ``source`` (a copy of it) and ``age`` old by
    its modification time: what a writer that died before its commit leaves."""
    planted = os.path.join(os.path.dirname(source), f"00000-0-{uuid.uuid4()}-{label}.parquet")
    shutil.copyfile(source, planted)
    then = time.time() - age.total_seconds()
    os.utime(planted, (then, then))
    return planted


@pytest.mark.parametrize("storage", [ICEBERG], ids=["iceberg"])
def test_an_iceberg_purge_removes_a_crashed_writers_file_of_the_subject_and_keeps_every_referenced_one(
    make_table: Any, spark_session: Any, catalog_config: Any
) -> None:
    """``remove_orphan_files`` after the expiry: a day-old unreferenced file holding the subject
    goes; a fresh one (a writer that may still commit) and every file a snapshot references stay."""
    from lakehouse.catalog import iceberg_identifier, open_catalog

    table, before, held = subject_history(make_table, spark_session)
    keys, on = subject_keys(spark_session), "array_contains(s.who, t.who)"
    files = sorted(table.files_matching(keys, on, version=held))
    crashed = plant_unreferenced_copy(files[0], "crashed", timedelta(days=2))
    running = plant_unreferenced_copy(sorted(table.data_files_at(before))[0], "running", timedelta(0))

    table.erase_matching(keys, on, run_id="erase-1", reason="request 7")
    current = rows(table)
    done = table.purge([held], files, note="erasure certificate C-1")

    assert f"removed orphan file {file_path(crashed)}" in done
    assert done[-2].startswith("removed 1 orphan file(s)"), done
    assert not os.path.exists(crashed)
    assert os.path.exists(running), "a file younger than a day may be a running writer's: kept"
    referenced = {f for version in table.retained_versions() for f in table.data_files_at(version)}
    assert referenced
    assert all(os.path.exists(f) for f in referenced)
    assert rows(table) == current
    assert rows(table, as_of=before) == BEFORE_SUBJECT
    assert files_naming(table, SUBJECT) == []

    with pytest.raises(VersionNotFoundError, match=f"has no version {held}"):
        table.read(as_of=held)
    with pytest.raises(Exception, match=f"Cannot find snapshot with ID {held}"):
        spark_session.sql(f"SELECT * FROM {table.sql_name} VERSION AS OF {held}").collect()
    loaded = open_catalog(catalog_config).load_table(iceberg_identifier(table.location))
    with pytest.raises(ValueError, match=f"Snapshot not found: {held}"):
        loaded.scan(snapshot_id=held).to_arrow()


def test_a_redacting_erasure_keeps_the_rows_and_replaces_only_the_subjects_values(
    make_table: Any, spark_session: Any
) -> None:
    table = make_table(PERSONAL_SCHEMA, zone=Zone.GOLD, partition_by=("part",), personal=("who",))
    table.append(
        spark_session.createDataFrame([(1, "a", SUBJECT), (2, "a", "bob@example.org")], PERSONAL_SCHEMA),
        run_id="r1",
    )
    keys = spark_session.createDataFrame(
        [([SUBJECT], "redacted:C-2")], "who array<string>, replacement string"
    )
    on = "array_contains(s.who, t.who)"
    before = table.current_version()
    with pytest.raises(UsageError, match=r"cannot redact \['nope'\]"):
        table.erase_matching(keys, on, run_id="erase-2", reason="request 8", redact={"nope": "s.replacement"})
    assert table.current_version() == before, "the refused redaction wrote nothing"
    table.erase_matching(keys, on, run_id="erase-2", reason="request 8", redact={"who": "s.replacement"})

    assert rows(table) == [(1, "a", "redacted:C-2"), (2, "a", "bob@example.org")]
    assert table.history()[-1].metadata["lakehouse.erasure-reason"] == "request 8"


def test_an_erasure_deletes_the_subjects_rows_and_rekeys_a_shared_key_in_one_commit(
    make_table: Any, spark_session: Any
) -> None:
    """The erasure of a subject who shares a key (``part`` here) with others: the subject's rows
    deleted, the shared key re-keyed in the rows that remain, one MERGE, one new version."""
    table = make_table(PERSONAL_SCHEMA, zone=Zone.SILVER, personal=("who",))
    table.append(
        spark_session.createDataFrame(
            [(1, "a", SUBJECT), (2, "a", "bob@example.org"), (3, "b", "carol@example.org")], PERSONAL_SCHEMA
        ),
        run_id="r1",
    )
    commits = len(table.history())
    keys = spark_session.createDataFrame(
        [([SUBJECT], {"a": "rk-1"})], "who array<string>, rekeys map<string,string>"
    )
    own = "array_contains(s.who, t.who)"
    on = f"({own}) OR map_contains_key(s.rekeys, t.part)"
    update = {"part": "coalesce(try_element_at(s.rekeys, t.part), t.part)"}
    table.erase_matching(keys, on, run_id="erase-3", reason="request 9", redact=update, delete_when=own)

    assert rows(table) == [(2, "rk-1", "bob@example.org"), (3, "b", "carol@example.org")]
    assert len(table.history()) == commits + 1, "one MERGE: no version holds the half-done state"
    assert table.history()[-1].metadata["lakehouse.erasure-reason"] == "request 9"


def test_a_streaming_read_takes_each_append_once_across_restarts_and_skips_an_erasure(
    make_table: Any, spark_session: Any, tmp_path: Any
) -> None:
    """What ``lakehouse stream`` relies on: an available-now query over a Bronze table takes the
    rows appended since its checkpoint, one file per micro-batch when capped, and a commit that
    only deletes rows (an erasure) neither fails the query nor comes back as rows."""
    bronze = make_table(SCHEMA, zone=Zone.BRONZE, partition_by=("part",))
    bronze.append(frame(spark_session, [(1, "a", 10)]))
    bronze.append(frame(spark_session, [(2, "b", 20)]))
    seen: list[tuple[int, list[tuple[Any, ...]]]] = []

    def collect(df: Any, batch: int) -> None:
        seen.append((batch, sorted(tuple(r) for r in df.collect())))

    def drain() -> None:
        query = (
            bronze.read_stream(max_files_per_batch=1)
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()

    drain()
    assert [rows for _, rows in seen] == [[(1, "a", 10)], [(2, "b", 20)]]
    bronze.erase("id = 1", run_id="erase-1", reason="subject erasure request 7")
    bronze.append(frame(spark_session, [(3, "a", 30)]))
    drain()
    assert [batch for batch, _ in seen] == [0, 1, 2]
    assert seen[-1][1] == [(3, "a", 30)]
