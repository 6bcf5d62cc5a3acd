"""Auditors' time travel on real tables, once per format: two routes, provenance, expiry, hostile input.

The history is the hand-written one of :mod:`tests.replay_history`, delivered and built
through the product (its recorded ingest, Silver and Gold runs), then the ER v2 correction
published, rolled back and published again: the shared
:class:`~tests.replay_history.Lifecycle`. Tests that change a history build their own:
the hand-written Silver, and Gold built by the product's recorded Gold run, so the ledger
holds only what the product writes. Every instant asked about is a known ledger time (a
fixed clock).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from jobs.output import plain
from jobs.render import render_asof
from lakehouse.errors import UnknownTableError, UsageError
from lakehouse.expressions import parse_instant
from ledger.clock import FixedClock
from tests.replay_history import (
    ANN,
    CAROL,
    GOLD,
    LABEL,
    LATER_EVENTS,
    PROMO,
    START,
    Built,
    Lifecycle,
    gold_build,
    seed_inputs,
)
from workloads.asof import PythonReader, SparkReader, asof, entity_history, timeline
from workloads.asof.answer import ROUTES_DISAGREE_EXIT

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[3]
NOTEBOOK = REPO / "notebooks" / "auditor_time_travel.ipynb"


def built(lh: Any, clock: FixedClock) -> Built:
    """The hand-written Silver, and Gold built from it by the product's recorded Gold run:
    the ledger holds only what the product wrote."""
    seed_inputs(lh)
    return gold_build(lh, clock)


def known(lh: Any) -> list[str]:
    return sorted(lh.config.tables)


def content(answer: Any) -> list[dict[str, Any]]:
    """An answer's rows without what is learnt later (``since``): what was known at T."""
    return [{k: v for k, v in row.items() if k != "since"} for row in answer.rows]


def execute_notebook(lh: Any, table_format: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Run the auditor notebook on ``lh``; returns its text outputs (raises on any error)."""
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("LAKEHOUSE_WORKDIR", str(lh.config.workdir_path))
    monkeypatch.setenv("LAKEHOUSE_FORMAT", table_format.value)
    monkeypatch.setenv("LAKEHOUSE__INSTANCE", lh.config.instance)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    )
    client.execute()
    texts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            texts.append(output.get("text", "") + str(output.get("data", {}).get("text/plain", "")))
            if "image/png" in output.get("data", {}):
                texts.append("<image/png>")
    return texts


@pytest.mark.slow
@pytest.mark.notebook
def test_answers_hold_across_a_replay_and_both_routes_and_readers_agree(
    lifecycle: Lifecycle, monkeypatch: pytest.MonkeyPatch
) -> None:
    lakehouse, registry = lifecycle.lakehouse, lifecycle.registry
    spark, python = SparkReader(registry), PythonReader(lakehouse.config)
    before_replay, out = lifecycle.before_replay, lifecycle.replayed
    first = lifecycle.answer_before_replay
    assert first.routes_agree is True
    assert {r["engine"] for r in first.rows} == {"correlation@1"}
    assert len(first.rows) == 2, "ann+promo: shared card with ann, shared device with carol"
    assert all(r["provenance"]["run_id"] == lifecycle.built.gold_run for r in first.rows)
    assert first.rows[0]["provenance"]["inputs"] == {"silver.events": lifecycle.built.silver_version}

    again = asof(spark, GOLD, before_replay, known_tables=known(lakehouse), entity=PROMO)
    assert content(again) == content(first), "what was known before the replay does not change"
    assert {r["since"]["status"] for r in again.rows} == {"retracted", "superseded"}
    assert all(out.run_id in r["since"]["reason"] for r in again.rows)

    published, after = lifecycle.published, lifecycle.answer_at_publication
    assert after.routes_agree is True
    assert published.entity_index is not None
    assert published.entity_index.status == "rebuilt"
    assert "read through gold.correlations_by_entity" in after.route_a.note, "publish rebuilt the index"
    assert LABEL in {r["engine"] for r in after.rows}
    assert PROMO not in {r["entity_a"] for r in after.rows} | {r["entity_b"] for r in after.rows}
    new = next(r for r in after.rows if r["engine"] == LABEL)
    assert new["provenance"]["run_id"] == out.run_id
    assert new["provenance"]["published_at"] == published.effective_at

    back, republished = lifecycle.rolled_back, lifecycle.republished
    assert back.entity_index is not None
    assert back.entity_index.source_version == back.new_version
    window = asof(spark, GOLD, published.effective_at, known_tables=known(lakehouse), entity=ANN)
    assert window.route_a.available is False
    assert "rolled back" in window.route_a.note
    assert window.route_b.version == published.version
    assert content(window) == content(after), "route (b) still answers inside the rolled-back window"
    assert back.new_version != republished.version

    points = timeline(spark.ledger_records(), GOLD).published_points()
    assert len(points) == 4, "build, publication, rollback, re-publication"
    for point in points:
        answers = {
            reader.name: asof(reader, GOLD, point, known_tables=known(lakehouse))
            for reader in (spark, python)
        }
        for name, answer in answers.items():
            if answer.route_a.available:
                assert answer.routes_agree is True, (name, point, answer.first_difference)
            else:
                assert answer.route_b.available
        ours, theirs = content(answers["spark"]), content(answers["pyiceberg"])
        assert ours == theirs, f"pyiceberg/deltalake and Spark readers differ at {point}"

    story = entity_history(spark, GOLD, PROMO, known_tables=known(lakehouse))
    assert sorted(v["status"] for v in story.versions) == ["retracted", "superseded"]
    assert all(v["known_until"] == republished.effective_at for v in story.versions)
    assert all(out.run_id in v["supersede_reason"] for v in story.versions)
    by_python = entity_history(python, GOLD, PROMO, known_tables=known(lakehouse))
    assert plain(by_python)["versions"] == plain(story)["versions"]

    # the auditor notebook answers its questions on this history, without a JVM
    table_format = lakehouse.config.force_format
    outputs = "\n".join(execute_notebook(lakehouse, table_format, monkeypatch))
    assert "JVM started: False" in outputs
    assert f"replay {out.run_id}" in outputs
    assert any(f"entity X: {who}" in outputs for who in (PROMO, CAROL)), outputs
    assert "routes agree" in outputs
    assert "ROUTES DISAGREE" not in outputs
    assert "<image/png>" in outputs, "the confidence plot is drawn"


def test_a_corrupted_bitemporal_column_makes_the_routes_disagree(lakehouse: Any) -> None:
    clock = FixedClock(START, step=timedelta(seconds=1))
    history = built(lakehouse, clock)
    gold = history.gold
    at = clock.now()
    reader = SparkReader(lakehouse.registry)
    assert asof(reader, GOLD, at, known_tables=known(lakehouse)).routes_agree is True

    victim = gold.read().where(F.col("entity_b") == PROMO).orderBy("correlation_id").limit(1)
    key = victim.first()["correlation_id"]
    # built from collected rows: an Iceberg MERGE whose source reads its own target cannot be planned
    rows = lakehouse.spark.createDataFrame(victim.collect(), victim.schema)
    later = rows.withColumn("recorded_at", F.lit(datetime(2030, 1, 1)).cast("timestamp"))
    gold.merge(later, ["correlation_id", "run_id"], run_id="tamper")

    answer = asof(reader, GOLD, at, known_tables=known(lakehouse))
    assert answer.routes_agree is False
    assert answer.exit_code == ROUTES_DISAGREE_EXIT
    assert answer.first_difference is not None
    assert answer.first_difference["key"] == {"correlation_id": key, "run_id": history.gold_run}
    assert answer.first_difference["route_a"] is None, "route (a) no longer sees the tampered row at T"
    assert any("ROUTES DISAGREE" in line for line in render_asof(answer))


def test_route_a_answers_after_the_formats_history_is_expired(lakehouse: Any, table_format: Any) -> None:
    clock = FixedClock(START, step=timedelta(seconds=1))
    gold = built(lakehouse, clock).gold
    at = clock.now()
    spark, python = SparkReader(lakehouse.registry), PythonReader(lakehouse.config)
    before = asof(spark, GOLD, at, known_tables=known(lakehouse))
    assert before.routes_agree is True
    assert before.rows

    seed_inputs(lakehouse, LATER_EVENTS)
    later = gold_build(lakehouse, clock)  # a second recorded Gold build
    assert later.gold_run in {r["run_id"] for r in gold.read().collect()}
    if table_format.value == "delta":
        # compaction, as a maintenance job would: rewrites the files version 1 needs, VACUUM deletes them
        lakehouse.spark.sql(f"OPTIMIZE {gold.sql_name}")
    gold.expire(datetime(2100, 1, 1, tzinfo=UTC), retain_last=1)

    for reader in (spark, python):
        after = asof(reader, GOLD, at, known_tables=known(lakehouse))
        assert after.route_b.available is False, reader.name
        assert "history for T is gone" in after.route_b.note
        assert after.route_a.available
        assert after.routes_agree is None
        assert content(after) == content(before), reader.name


def test_hostile_input_is_refused_or_taken_as_a_plain_value(lifecycle: Lifecycle) -> None:
    lakehouse, at = lifecycle.lakehouse, lifecycle.before_replay
    table_format = lakehouse.config.force_format
    reader = SparkReader(lakehouse.registry)
    tables = known(lakehouse)

    injected = asof(reader, GOLD, at, known_tables=tables, entity="x' OR '1'='1")
    assert injected.rows == ()
    assert injected.routes_agree is True
    with pytest.raises(UsageError, match="Gold tables only"):
        asof(reader, "silver.events", at, known_tables=tables)
    with pytest.raises(UsageError, match="Gold tables only"):
        asof(reader, "gold.correlations; drop table x", at, known_tables=tables)
    with pytest.raises(UsageError):
        asof(reader, GOLD, at, known_tables=tables, where="entity_a = 'x'; drop table t")
    with pytest.raises(UsageError, match="nope"):
        asof(reader, GOLD, at, known_tables=tables, where="nope = 1")
    for text in ("yesterday", "2026-03-01T00:00:00", "2026-13-01T00:00:00Z", "1' or '1'='1"):
        with pytest.raises(UsageError):
            parse_instant(text)
    with pytest.raises(UnknownTableError):
        PythonReader(lakehouse.config).columns("gold.nope")

    # the command, without a JVM: answers, and refuses with one line and exit code 2
    env = {**os.environ, "LAKEHOUSE__INSTANCE": lakehouse.config.instance}
    base = [sys.executable, "-m", "jobs", "asof", "--workdir", str(lakehouse.config.workdir_path)]
    base += ["--format", table_format.value, "--reader", "pyiceberg"]
    ok = subprocess.run(
        [*base, GOLD, "--at", at.isoformat(), "--entity", PROMO, "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    answer = json.loads(ok.stdout)
    expected = plain(asof(reader, GOLD, at, known_tables=tables, entity=PROMO))
    assert answer["rows"] == expected["rows"]
    assert set(answer["routes"]["a"]) == {"route", "available", "rows", "version", "note"}
    assert answer["routes_agree"] is True
    assert "pyspark" not in ok.stderr
    for bad in (["gold.nope", "--at", at.isoformat()], [GOLD, "--at", "2026-03-01T00:00:00"]):
        refused = subprocess.run(
            [*base, *bad], capture_output=True, text=True, cwd=REPO, env=env, check=False
        )
        assert refused.returncode == 2, refused.stderr
