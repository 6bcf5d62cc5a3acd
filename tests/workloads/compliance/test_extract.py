"""Redacted audit extracts without Spark: pseudonyms, erased subjects left out, the folder and
filter checks, the files and their digests, and the command's refusals before Spark starts.
The extract of a real history, and its deletion by a later erasure, are checked in
``tests/jobs/test_cli_history.py``."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from lakehouse.config import load_config
from lakehouse.errors import UsageError
from tests.cli_runner import run_cli
from workloads.compliance.extract import (
    Erased,
    arrow_schema,
    check_out,
    check_where,
    extract_request,
    pseudonym,
    pseudonymised_columns,
    redact_rows,
    write_parts,
)
from workloads.compliance.scan import identifier_digest
from workloads.vocabulary import PSEUDONYM_PREFIX

REPO = Path(__file__).resolve().parents[3]
CONF = REPO / "conf" / "lakehouse.yaml"
CORRELATION_COLUMNS = (
    "correlation_id",
    "correlation_type",
    "entity_a",
    "entity_b",
    "valid_from",
    "confidence",
    "evidence",
    "run_id",
)
GOLD_WHERE_COLUMNS = {
    "correlation_type": "string",
    "entity_a": "string",
    "entity_b": "string",
    "confidence": "double",
}


def test_identifier_columns_are_the_personal_entity_and_derived_ones_in_table_order() -> None:
    personal = ("entity_a", "entity_b", "evidence")
    assert pseudonymised_columns("gold.correlations", CORRELATION_COLUMNS, personal) == (
        "correlation_id",
        "entity_a",
        "entity_b",
        "evidence",
    )
    daily = ("entity_id", "day", "orders")
    assert pseudonymised_columns("gold.entity_daily", daily, ("entity_id",)) == ("entity_id",)
    assert pseudonymised_columns("gold.calibration_reports", ("report_id", "engine"), ()) == ()


def test_a_pseudonym_is_stable_within_one_salt_and_unlinkable_across_salts() -> None:
    one, other = "a" * 32, "b" * 32
    assert pseudonym(one, "e1-abc") == pseudonym(one, "e1-abc")
    assert pseudonym(one, "e1-abc") != pseudonym(other, "e1-abc")
    assert pseudonym(one, "e1-abc") != pseudonym(one, "e1-abd")
    assert pseudonym(one, "e1-abc").startswith(PSEUDONYM_PREFIX)
    assert len(pseudonym(one, "e1-abc")) == len(PSEUDONYM_PREFIX) + 24
    assert "e1-abc" not in pseudonym(one, "e1-abc")


def test_rows_of_erased_subjects_are_left_out_and_identifiers_pseudonymised() -> None:
    salt, cert_salt = "s" * 32, "c" * 32
    erased = (Erased("erasure-1", cert_salt, frozenset({identifier_digest(cert_salt, "e1-gone")})),)
    rows = [
        {
            "correlation_id": "c1",
            "entity_a": "e1-x",
            "entity_b": "e1-y",
            "evidence": "card k",
            "confidence": 0.9,
        },
        {
            "correlation_id": "c2",
            "entity_a": "redacted:erasure-0",
            "entity_b": "e1-y",
            "evidence": "redacted:erasure-0",
        },
        # a row an erasure missed (as if a route brought it back): its certificate's digest finds it
        {
            "correlation_id": "c3",
            "entity_a": "e1-y",
            "entity_b": "E1-GONE",
            "evidence": "x",
            "confidence": 0.5,
        },
        {
            "correlation_id": "c4",
            "entity_a": "e1-y",
            "entity_b": None,
            "evidence": "device e1-gone.",
            "confidence": 0.1,
        },
        {
            "correlation_id": "c5",
            "entity_a": "e1-y",
            "entity_b": "e1-x",
            "evidence": "card k",
            "confidence": 0.7,
        },
    ]
    columns = ("correlation_id", "entity_a", "entity_b", "evidence", "confidence")
    hidden = ("correlation_id", "entity_a", "entity_b", "evidence")
    kept, withheld = redact_rows(rows, columns, hidden, salt, erased)
    assert withheld == {"erasure-0": 1, "erasure-1": 2}
    assert [r["confidence"] for r in kept] == [0.9, 0.7]
    first, last = kept
    assert first["entity_a"] == last["entity_b"] == pseudonym(salt, "e1-x")  # the graph still links up
    assert first["entity_b"] == last["entity_a"]
    assert first["evidence"] == last["evidence"] != "card k"
    text = json.dumps(kept)
    for identifier in ("e1-x", "e1-y", "card k", "c1", "c5"):
        assert f'"{identifier}"' not in text
    assert set(kept[0]) == set(columns)
    none_kept, _ = redact_rows([{"entity_a": None, "x": 1}], ("entity_a", "x"), ("entity_a",), salt)
    assert none_kept == [{"entity_a": None, "x": 1}]


def test_the_folder_must_be_new_or_empty_inside_the_work_dir_and_outside_table_storage(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    (work / "warehouse").mkdir(parents=True)
    assert check_out(work / "extracts" / "q4", work) == (work / "extracts" / "q4").resolve()
    (work / "empty").mkdir()
    assert check_out(work / "empty", work) == (work / "empty").resolve()
    (work / "full").mkdir()
    (work / "full" / "x.txt").write_text("x")
    (work / "file.txt").write_text("x")
    refused = {
        tmp_path / "elsewhere": "outside the work dir",
        work: "outside the work dir",
        work / "extracts" / ".." / ".." / "escape": "outside the work dir",
        work / "warehouse" / "x": "inside the table storage",
        work / "full": "not empty",
        work / "file.txt": "a file",
    }
    for out, message in refused.items():
        with pytest.raises(UsageError, match=message) as caught:
            check_out(out, work)
        assert str(out) in str(caught.value)
    (work / "link").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(UsageError, match="outside the work dir"):
        check_out(work / "link" / "x", work)


def test_the_filter_is_the_asof_grammar_and_names_no_identifier() -> None:
    hidden = ("entity_a", "entity_b")
    check_where("confidence >= 0.8 and correlation_type = 'shared_card'", GOLD_WHERE_COLUMNS, hidden)
    check_where("entity_b is not null", GOLD_WHERE_COLUMNS, hidden)
    for where in ("entity_a = 'e1-x'", "confidence > 0.1 or entity_b in ('e1-y')"):
        with pytest.raises(UsageError, match="pseudonymised"):
            check_where(where, GOLD_WHERE_COLUMNS, hidden)
    for hostile in ("confidence > 0; drop table x", "1 = 1", "confidence > 0 -- x", 'correlation_type = "x"'):
        with pytest.raises(UsageError):
            check_where(hostile, GOLD_WHERE_COLUMNS, hidden)


def test_a_request_is_checked_against_the_configuration_alone(tmp_path: Path) -> None:
    config = load_config(CONF, overrides={"workdir": str(tmp_path)})
    out = tmp_path / "extracts" / "one"
    request = extract_request(
        config, "gold.correlations", "2026-11-29T12:00:00+01:00", out, "confidence > 0.5"
    )
    assert request.at == datetime(2026, 11, 29, 11, 0, tzinfo=UTC)
    assert request.folder == out.resolve()
    with pytest.raises(UsageError, match=r"'gold\.nope'"):
        extract_request(config, "gold.nope", "2026-11-29T12:00:00Z", out, None)
    with pytest.raises(UsageError, match=r"'silver\.events'"):
        extract_request(config, "silver.events", "2026-11-29T12:00:00Z", out, None)
    with pytest.raises(UsageError, match="time zone"):
        extract_request(config, "gold.correlations", "2026-11-29T12:00:00", out, None)
    with pytest.raises(UsageError, match="--at"):
        extract_request(config, "gold.correlations", None, out, None)
    with pytest.raises(UsageError, match="--out"):
        extract_request(config, "gold.correlations", "2026-11-29T12:00:00Z", None, None)
    with pytest.raises(UsageError, match="entity_id"):
        extract_request(config, "gold.entity_daily", "2026-11-29T12:00:00Z", out, "entity_id = 'e1-x'")


def test_parts_are_listed_with_their_digest_and_rows(tmp_path: Path) -> None:
    fields = [
        ("entity_id", "STRING"),
        ("day", "DATE"),
        ("order_amount", "DECIMAL(18,2)"),
        ("orders", "BIGINT"),
    ]
    schema = arrow_schema(fields, ("entity_id",))
    rows = [
        {
            "entity_id": "ps-1",
            "day": datetime(2026, 1, 2).date(),
            "order_amount": Decimal("12.50"),
            "orders": 2,
        },
        {"entity_id": "ps-2", "day": datetime(2026, 1, 3).date(), "order_amount": None, "orders": 0},
    ]
    files = write_parts(tmp_path, rows, schema)
    assert list(files) == ["part-00000.parquet"]
    path = tmp_path / "part-00000.parquet"
    assert files[path.name].sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert files[path.name].rows == 2
    assert files[path.name].bytes == path.stat().st_size
    read = pq.read_table(path)
    assert read.schema.field("order_amount").type.scale == 2
    assert read.to_pylist()[0]["order_amount"] == Decimal("12.50")
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).statistics is None  # no values in the footer
    empty = tmp_path / "empty"
    empty.mkdir()
    assert write_parts(empty, [], schema)["part-00000.parquet"].rows == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--out", "{tmp}/elsewhere"), "outside the work dir"),
        (("--out", "{work}/full"), "not empty"),
        (("--out", "{work}/x", "--where", "entity_a = 'e1-x'"), "pseudonymised"),
        (("--out", "{work}/x", "--where", "confidence > 0; drop table t"), "';'"),
    ],
    ids=["outside", "not-empty", "identifier-filter", "hostile-filter"],
)
def test_the_command_refuses_bad_input_in_one_line_before_spark_starts(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    work = tmp_path / "work"
    (work / "warehouse").mkdir(parents=True)
    (work / "full").mkdir()
    (work / "full" / "x").write_text("x")
    argv = [a.format(tmp=tmp_path, work=work) for a in args]
    base = ["extract", "gold.correlations", "--at", "2026-11-29T12:00:00Z", "--conf", str(CONF)]
    ran = run_cli([*base, "--workdir", str(work), *argv, "--json"], {})
    assert ran.code == 2, ran.stderr
    error = json.loads(ran.stderr)
    assert message in error["error"]
    assert error["exit_code"] == 2
    assert "starting Spark" not in ran.stderr
    if "--where" not in args:
        assert argv[1] in error["error"]  # names the path
    unknown = run_cli(
        [
            "extract",
            "gold.nope",
            "--at",
            "2026-11-29T12:00:00Z",
            "--conf",
            str(CONF),
            "--workdir",
            str(work),
            "--out",
            str(work / "x"),
        ],
        {},
    )
    assert unknown.code == 2
    assert "'gold.nope'" in unknown.stderr
    assert unknown.stderr.count("\n") == 1
    assert not (work / "x").exists()
