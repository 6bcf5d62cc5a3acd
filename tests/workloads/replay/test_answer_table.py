"""The answer-table declarations the replay flow reads (:mod:`workloads.replay.answer`).

No JVM: the declarations are checked against the schemas ``conf/lakehouse.yaml`` configures
(parsed here as text), and a plan naming a table without a declaration is refused by the
real process before Spark starts.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lakehouse.config import load_config
from lakehouse.errors import ConfigError, UsageError
from workloads.replay import candidate as cand
from workloads.replay.answer import (
    ANSWER_TABLES,
    CORRELATIONS,
    LIFECYCLE,
    WHEN,
    AnswerTable,
    ReasonTemplate,
    answer_table,
)
from workloads.replay.plan import load_plan

REPO = Path(__file__).resolve().parents[3]
PLANS = sorted((REPO / "conf" / "plans").glob("*.yaml"))
NO_JVM = {**os.environ, "JAVA_HOME": str(REPO / "tests" / "no_jvm")}


def schema_of(ddl: str) -> dict[str, str]:
    """Column -> its DDL type and constraints, from a flat ``name TYPE [NOT NULL], ...`` schema."""
    columns: dict[str, str] = {}
    for part in re.split(r",(?![^(<]*[)>])", ddl):
        name, _, rest = part.strip().partition(" ")
        columns[name.strip("`")] = rest.strip().upper()
    return columns


@pytest.fixture(scope="module")
def config_tables() -> dict[str, object]:
    return dict(load_config(REPO / "conf" / "lakehouse.yaml", environ={}).tables)


@pytest.mark.parametrize("answer", list(ANSWER_TABLES.values()), ids=list(ANSWER_TABLES))
def test_every_column_a_declaration_names_is_in_the_configured_schema(
    answer: AnswerTable, config_tables: dict[str, object]
) -> None:
    settings = config_tables[answer.name]
    schema = schema_of(settings.schema_ddl)  # type: ignore[attr-defined]
    assert [c for c in answer.columns if c not in schema] == []
    assert set(LIFECYCLE) <= set(schema), "an answer table is bitemporal"
    assert settings.partition_by == (answer.partition,)  # type: ignore[attr-defined]
    assert "NOT NULL" in schema[answer.key]
    assert "NOT NULL" in schema[answer.partition]
    assert schema[answer.impact].split()[0] in ("DOUBLE", "FLOAT"), "the impact is a number"
    assert set(answer.compared) <= set(answer.content)
    assert not set(answer.content) & {answer.key, *LIFECYCLE}, "content excludes key, run and lifecycle"
    assert len(answer.subjects) == 2
    assert set(answer.subjects) <= set(answer.content)


def test_the_correlations_declaration_is_what_the_flow_always_used() -> None:
    """gold.correlations' row identity, partition and content, as the flow hard-coded them."""
    assert answer_table("gold.correlations") is CORRELATIONS
    assert CORRELATIONS.identity == ("correlation_id", "run_id")
    assert CORRELATIONS.partition == "valid_month"
    assert CORRELATIONS.content == (
        "correlation_type",
        "entity_a",
        "entity_b",
        "valid_from",
        "valid_to",
        "valid_month",
        "confidence",
        "evidence",
    )
    assert CORRELATIONS.compared == (
        "entity_a",
        "entity_b",
        "valid_from",
        "valid_to",
        "confidence",
        "evidence",
    )
    assert (CORRELATIONS.kind, CORRELATIONS.subjects, CORRELATIONS.impact) == (
        "correlation_type",
        ("entity_a", "entity_b"),
        "confidence",
    )
    assert WHEN == ("recorded_at", "superseded_at")
    # the candidate module's names are the declaration's
    assert CORRELATIONS.identity == cand.IDENTITY
    assert CORRELATIONS.content == cand.CONTENT_COLUMNS
    assert CORRELATIONS.partition == cand.PARTITION
    assert cand.WHEN_COLUMNS == WHEN


def test_the_content_agrees_with_the_forward_build() -> None:
    """The forward Gold build keeps a row by the same content (plus its id)."""
    from workloads.gold.correlations import CONTENT_COLUMNS, CORRELATION_MERGE_KEYS

    assert set(CONTENT_COLUMNS) == {CORRELATIONS.key, *CORRELATIONS.content}
    assert set(CORRELATION_MERGE_KEYS) == {CORRELATIONS.partition, *CORRELATIONS.identity}


def test_the_reason_template_renders_the_texts_the_flow_always_wrote() -> None:
    reasons = cand.Reasons.of(
        plan="er-v3-recorrelation",
        run_id="r-1",
        change="entity_resolution 1 -> 3",
        new_engine="entity_resolution@3",
    )
    tail = "(plan er-v3-recorrelation, run r-1: entity_resolution 1 -> 3)"
    assert reasons == cand.Reasons(
        superseded=f"restated under entity_resolution@3 {tail}",
        merged=f"retracted: both entities resolve to one entity under entity_resolution@3 {tail}",
        no_longer=f"retracted: pair no longer correlated under entity_resolution@3 {tail}",
    )
    recalibrated = CORRELATIONS.reasons.render(
        plan="p", run_id="r-2", change="c", new_engine="correlation@3", verb="recalibrated"
    )
    assert recalibrated["superseded"] == "recalibrated under correlation@3 (plan p, run r-2: c)"


@pytest.mark.parametrize("answer", list(ANSWER_TABLES.values()), ids=list(ANSWER_TABLES))
def test_every_reason_names_its_run_as_a_resumed_build_looks_for_it(answer: AnswerTable) -> None:
    rendered = answer.reasons.render(plan="p", run_id="abc123", change="x 1 -> 2", new_engine="x@2")
    assert set(rendered) == {"superseded", "merged", "no_longer"}
    for text in rendered.values():
        assert ReasonTemplate.run_marker("abc123") in text, text


@pytest.mark.parametrize("answer", list(ANSWER_TABLES.values()), ids=list(ANSWER_TABLES))
def test_the_independent_check_and_the_index_are_functions(answer: AnswerTable) -> None:
    assert callable(answer.recount())
    index = answer.index_refresh()
    assert index is None or callable(index)
    provisional = answer.provisional_reconciliation()
    assert provisional is None or callable(provisional)


def test_the_correlations_declaration_points_at_todays_recount_and_index() -> None:
    from workloads.gold.entity_index import ENTITY_SIDES, SOURCE, refresh_entity_index
    from workloads.replay.evaluate import independent_recount
    from workloads.replay.provisional import reconcile_and_record

    assert CORRELATIONS.recount() is independent_recount
    assert CORRELATIONS.index_refresh() is refresh_entity_index
    assert CORRELATIONS.name == SOURCE
    assert CORRELATIONS.subjects == ENTITY_SIDES
    assert CORRELATIONS.provisional_reconciliation() is reconcile_and_record


def test_an_unknown_answer_table_is_one_line() -> None:
    with pytest.raises(UsageError) as caught:
        answer_table("gold.fraud_scores")
    message = str(caught.value)
    assert "\n" not in message
    assert message == "'gold.fraud_scores' is not a declared answer table (declared: gold.correlations)"


@pytest.mark.parametrize("path", PLANS, ids=[p.name for p in PLANS])
def test_every_shipped_plan_names_a_declared_table(path: Path) -> None:
    plan = load_plan(path)
    assert plan.answer.declaration is ANSWER_TABLES[plan.answer.table]


def undeclared_plan(tmp_path: Path) -> Path:
    shipped = (REPO / "conf" / "plans" / "er-v3-recorrelation.yaml").read_text(encoding="utf-8")
    assert "  table: gold.correlations\n" in shipped
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        shipped.replace("  table: gold.correlations\n", "  table: gold.fraud_scores\n"), encoding="utf-8"
    )
    return plan


def test_a_plan_naming_a_table_without_a_declaration_is_refused_with_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_plan(undeclared_plan(tmp_path))
    message = str(caught.value)
    assert "\n" not in message
    assert "answer.table" in message
    assert "'gold.fraud_scores' is not a declared answer table" in message


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "replay"])
def test_the_cli_refuses_a_plan_without_a_declaration_before_spark(tmp_path: Path, dry_run: bool) -> None:
    plan = undeclared_plan(tmp_path)
    argv = [sys.executable, "-m", "jobs", "replay", "--plan", str(plan), "--workdir", str(tmp_path / "w")]
    result = subprocess.run(
        [*argv, *(["--dry-run"] if dry_run else [])],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=NO_JVM,
        check=False,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: "), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "'gold.fraud_scores' is not a declared answer table" in result.stderr
    assert "starting Spark" not in result.stderr
    assert "java" not in result.stderr.lower(), result.stderr
