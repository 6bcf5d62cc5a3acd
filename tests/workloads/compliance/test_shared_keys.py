"""Shared keys: an entity id a resolver gave the subject and other persons. The subject's own
id (derived from its keys) is re-keyed in the others' rows, the same way in every table and
every rerun; another person's own id stays theirs. Plain Python, no JVM."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from lakehouse.tables.base import merge_clauses
from workloads.compliance.erasure import (
    SECRETS_DIR,
    forget_request_secret,
    kept_places,
    replacer,
    request_secret,
)
from workloads.compliance.subject import (
    ENTITY_COLUMNS,
    REDACTIONS,
    REKEYED_HEX,
    REKEYED_PREFIX,
    RULES,
    TREATMENTS,
    Subject,
    key_values,
    rekeyed_id,
    rekeys,
    split_entities,
    unlinked_id,
)
from workloads.vocabulary import TableName

MINE = "e1-00000000000000a1"
"""The subject's own v1 id: ER v2 named the ring after it (the smallest v1 id)."""
BOBS = "e1-00000000000000b0"
"""Bob's own v1 id: ER v2 named another ring after it, and gave it to the subject too."""
ALONE = "e1-00000000000000a2"
"""An id only the subject's rows hold."""


def test_an_id_nobody_else_holds_is_the_subjects_whatever_derived_it() -> None:
    split = split_entities([ALONE], derived=[], held_by_others=[])
    assert (split.own, split.shared, split.borrowed) == ((ALONE,), (), ())


def test_a_shared_id_derived_from_the_subjects_keys_is_its_own_and_rekeyed() -> None:
    split = split_entities([MINE, ALONE], derived=[MINE, ALONE], held_by_others=[MINE])
    assert split.own == tuple(sorted((MINE, ALONE)))
    assert split.shared == (MINE,)
    assert split.borrowed == ()


def test_another_persons_own_id_given_to_the_subject_too_is_borrowed_and_not_sought() -> None:
    split = split_entities([MINE, BOBS], derived=[MINE], held_by_others=[BOBS])
    assert split.own == (MINE,)
    assert split.shared == ()
    assert split.borrowed == (BOBS,)
    subject = Subject(("a@x.org",), ("o-1",), split.own, shared=split.shared, borrowed=split.borrowed)
    assert BOBS not in subject.identifiers, "the scan does not look for Bob's own id"
    assert subject.counts() == {
        "emails": 1,
        "orders": 1,
        "entities": 1,
        "shared_entities": 0,
        "borrowed_entities": 1,
        "correlations": 0,
    }


def test_a_rekeyed_id_is_keyed_by_the_request_secret_deterministic_and_not_the_old() -> None:
    new = rekeyed_id("s3cret", MINE)
    assert re.fullmatch(rf"{REKEYED_PREFIX}[0-9a-f]{{{REKEYED_HEX}}}", new)
    assert new == rekeyed_id("s3cret", MINE), "a rerun with the request's secret maps it alike"
    assert new != rekeyed_id("other", MINE), "without the secret nobody can map the old id to it"
    assert rekeyed_id("s3cret", ALONE) != new
    assert rekeys("s3cret", [MINE, MINE]) == {MINE: new}


def test_the_key_row_binds_only_exclusive_ids_as_the_subjects_and_maps_the_shared_ones() -> None:
    subject = Subject(("a@x.org",), ("O-1",), (MINE, ALONE), shared=(MINE,), borrowed=(BOBS,))
    emails, orders, entities, tokens, mapping, correlations, replacement, secret = key_values(
        subject, "redacted:C", "k"
    )
    assert correlations == []
    assert (emails, orders, entities) == (["a@x.org"], ["O-1"], [ALONE])
    assert mapping == {MINE: rekeyed_id("k", MINE)}
    assert set(tokens) == {"a@x.org", "o-1", MINE, ALONE}, "text naming a re-keyed old id is the subject's"
    assert (replacement, secret) == ("redacted:C", "k")
    assert BOBS not in tokens


def test_every_table_with_entity_columns_rekeys_them_in_the_rows_it_keeps() -> None:
    assert set(ENTITY_COLUMNS) <= set(RULES)
    for table, columns in ENTITY_COLUMNS.items():
        treatment = TREATMENTS[table]
        assert treatment.update is not None
        for column in columns:
            assert f"map_contains_key(s.rekeys, t.{column})" in treatment.match, (table, column)
            assert f"try_element_at(s.rekeys, t.{column})" in treatment.update[column], (table, column)
        if table in REDACTIONS:
            assert treatment.delete is None, "a correlation is redacted, never deleted"
        else:
            assert treatment.delete == RULES[table], "the subject's own rows are deleted"


def test_a_shared_entitys_daily_rows_and_baselines_are_deleted_not_rekeyed() -> None:
    for table in (TableName.ENTITY_DAILY, TableName.BASELINES):
        treatment = TREATMENTS[table]
        assert table not in ENTITY_COLUMNS
        assert "map_contains_key(s.rekeys, t.entity_id)" in RULES[table], "they sum the subject's events"
        assert (treatment.delete, treatment.update) == (None, None)


def test_silver_deletes_the_subjects_events_and_rekeys_the_others_in_one_merge() -> None:
    treatment = TREATMENTS[TableName.SILVER_EVENTS]
    assert treatment.update == {"entity_id": "coalesce(try_element_at(s.rekeys, t.entity_id), t.entity_id)"}
    clauses = merge_clauses(treatment.update, treatment.delete)
    assert clauses.startswith(f"WHEN MATCHED AND ({RULES[TableName.SILVER_EVENTS]}) THEN DELETE ")
    assert clauses.endswith("WHEN MATCHED THEN UPDATE SET t.`entity_id` = " + treatment.update["entity_id"])


def test_a_correlation_keeps_its_evidence_when_only_a_shared_side_is_rekeyed() -> None:
    update = TREATMENTS[TableName.CORRELATIONS].update
    assert update is not None
    assert update["evidence"].startswith("CASE WHEN array_contains(s.entities, t.entity_a)")
    assert update["evidence"].endswith("THEN s.replacement ELSE t.evidence END")
    assert "s.replacement ELSE coalesce(try_element_at(s.rekeys, t.entity_a)" in update["entity_a"]


def test_text_tables_delete_what_names_the_subject() -> None:
    treatment = TREATMENTS[TableName.OUTBOX]
    assert (treatment.delete, treatment.update) == (None, None)
    assert merge_clauses(None) == "WHEN MATCHED THEN DELETE"
    assert merge_clauses({"c": "s.x"}) == "WHEN MATCHED THEN UPDATE SET t.`c` = s.x"


def test_a_work_file_gets_the_new_id_of_a_shared_id_and_redacted_for_the_rest() -> None:
    subject = Subject(("a@x.org",), (), (MINE, ALONE), shared=(MINE,))
    swap = replacer(subject, "erasure-1", "k")
    text = f"{MINE.upper()} {ALONE} a@x.org"
    found = re.sub(rf"{MINE}|{ALONE}|a@x\.org", swap, text, flags=re.IGNORECASE)
    assert found == f"{rekeyed_id('k', MINE)} redacted:erasure-1 redacted:erasure-1"


def test_a_work_file_gets_the_new_id_of_each_of_the_subjects_correlation_ids() -> None:
    """The same new id as the tables' (``sha2(concat(id, secret), 256)``), so a review file still
    names the rows it reviewed; a correlation id that is not the subject's stays."""
    old = "9" * 64
    subject = Subject(("a@x.org",), (), (ALONE,), correlations=(old,))
    assert old in subject.identifiers, "the scan looks for it"
    assert subject.counts()["correlations"] == 1
    swap = replacer(subject, "erasure-1", "k")
    found = re.sub(rf"{old}|a@x\.org", swap, f'{{"old_id": "{old}", "new_id": "{"8" * 64}"}}')
    assert found == f'{{"old_id": "{unlinked_id("k", old)}", "new_id": "{"8" * 64}"}}'
    assert unlinked_id("k", old) != unlinked_id("k2", old), "keyed by the request's secret"


def test_a_correlation_table_rekeys_only_the_subjects_ids_and_the_links_to_them() -> None:
    for table in REDACTIONS:
        treatment = TREATMENTS[table]
        assert "array_contains(s.correlations, t.superseded_by)" in treatment.match, table
        assert treatment.update is not None
        for column in ("correlation_id", "superseded_by"):
            assert treatment.update[column].startswith(
                f"CASE WHEN array_contains(s.correlations, t.{column})"
            )
            assert treatment.update[column].endswith(f"ELSE t.{column} END"), "another pair's id stays"


def test_the_request_secret_survives_a_crash_and_is_gone_after_the_certificate(tmp_path: Path) -> None:
    first = request_secret(tmp_path, "i\x1fREQ-1")
    assert request_secret(tmp_path, "i\x1fREQ-1") == first, "a rerun re-keys alike"
    assert request_secret(tmp_path, "j\x1fREQ-1") != first, "another lakehouse's request is another"
    secret_files = list((tmp_path / SECRETS_DIR).iterdir())
    assert len(secret_files) == 2
    assert all("REQ" not in p.name for p in secret_files), "the file name is a digest"
    forget_request_secret(tmp_path, "i\x1fREQ-1")
    forget_request_secret(tmp_path, "j\x1fREQ-1")
    assert not (tmp_path / SECRETS_DIR).exists()
    assert request_secret(tmp_path, "i\x1fREQ-1") != first, "a new erasure draws a new secret"


def test_the_certificate_says_what_happens_to_shared_entity_ids(tmp_path: Path) -> None:
    kept = kept_places(tmp_path)
    assert "re-keyed" in kept["shared entity ids"]
    assert "stays in that person's rows" in kept["shared entity ids"]


# -- the same rules in Spark SQL, over a few rows of each kind of table ---------------------------


def _after(spark: Any, table: str, schema: str, rows: list[tuple[Any, ...]], subject: Subject) -> list[Any]:
    """The rows of ``table`` a full rewrite without the subject keeps (the benchmark's baseline,
    the same SQL the erasure's MERGE runs)."""
    from benchmarks.erasure_cost import without_subject
    from workloads.compliance.subject import key_row

    keys = key_row(spark, subject, "redacted:C", "k")
    kept = without_subject(spark.createDataFrame(rows, schema), keys, TREATMENTS[table])
    return sorted((tuple(r) for r in kept.collect()), key=repr)


RING = Subject(
    ("a@x.org",), ("o-a",), (MINE, ALONE), shared=(MINE,), borrowed=(BOBS,), correlations=("c1", "c2", "c3")
)
NEW = rekeyed_id("k", MINE)


@pytest.mark.spark
def test_spark_erases_the_subjects_events_and_rekeys_the_rings_others(spark_session: Any) -> None:
    schema = "domain string, event_id string, customer_email string, order_id string, entity_id string"
    rows = [
        ("orders", "o-a", " A@x.org ", None, MINE),  # the subject's order
        ("settlements", "s-a", None, "o-a", MINE),  # its settlement, no email
        ("orders", "o-b", "b@x.org", None, MINE),  # a ring member under the subject's id
        ("settlements", "s-b", None, "o-b", MINE),  # the member's settlement, no email
        ("orders", "o-c", "c@x.org", None, BOBS),  # Bob's id: borrowed, stays
        ("orders", "o-d", "d@x.org", None, None),  # no entity
    ]
    kept = _after(spark_session, TableName.SILVER_EVENTS, schema, rows, RING)
    assert {r[1]: r[4] for r in kept} == {"o-b": NEW, "s-b": NEW, "o-c": BOBS, "o-d": None}


@pytest.mark.spark
def test_spark_deletes_the_subjects_entity_rows_and_rekeys_the_shared_ones(spark_session: Any) -> None:
    schema = "entity_id string, decision_id string"
    rows = [(ALONE, "o-x"), (MINE, "o-a"), (MINE, "o-b"), (BOBS, "o-c")]
    kept = _after(spark_session, TableName.TRAINING_SETS, schema, rows, RING)
    assert kept == sorted([(NEW, "o-b"), (BOBS, "o-c")])


@pytest.mark.spark
def test_spark_redacts_the_subjects_side_and_rekeys_a_shared_side_of_a_correlation(
    spark_session: Any,
) -> None:
    schema = "correlation_id string, entity_a string, entity_b string, evidence string, superseded_by string"
    rows = [
        ("c1", ALONE, BOBS, "ev1", None),  # about the subject: its side and the evidence redacted
        ("c2", MINE, BOBS, "ev2", "c3"),  # the ring's: its side re-keyed, evidence kept
        ("c4", BOBS, "e1-zz", "ev4", None),  # nobody's concern
        ("c5", BOBS, "e1-zz", "ev5", "c1"),  # another pair's, superseded by the subject's c1
    ]
    kept = {r[3]: r for r in _after(spark_session, TableName.CORRELATIONS, schema, rows, RING)}
    assert kept["redacted:C"][1:3] == ("redacted:C", BOBS)
    assert kept["redacted:C"][0] == unlinked_id("k", "c1"), "Spark's re-keyed id is the work files' one"
    assert kept["ev2"][1:3] == (NEW, BOBS)
    assert kept["ev2"][0] == unlinked_id("k", "c2"), "the id digests the old side: re-keyed"
    assert kept["ev2"][4] == unlinked_id("k", "c3"), "the chain stays linked"
    assert kept["ev4"] == ("c4", BOBS, "e1-zz", "ev4", None)
    assert kept["ev5"] == ("c5", BOBS, "e1-zz", "ev5", unlinked_id("k", "c1")), "its link, and only it"
