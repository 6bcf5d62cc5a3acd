"""Quality gates: the generic runner and gate, exercised with the workloads' real suites.

Each suite passes clean rows and names every violation. Frames are built inline with the
configured table schemas (nullability relaxed so that violating rows can be expressed).
That a failing gate stops a real build's writes is tested through the product in
``tests/workloads/silver/test_quality_gate.py``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from lakehouse import quality
from lakehouse.config import LakehouseConfig
from lakehouse.errors import DataQualityError, UnknownTableError
from lakehouse.quality import (
    COLUMN_MISSING,
    CheckKind,
    ExpectationFailure,
    GateResult,
    QualityGate,
    Suite,
    in_set,
    suites_by_table,
)
from workloads.gold.quality import MEDALLION_SUITES as SUITES
from workloads.gold.quality import medallion_gate

REPO_ROOT = Path(__file__).resolve().parents[2]

T0 = datetime(2025, 3, 1, 12, 0, 0)
D0 = date(2025, 3, 1)
D1 = date(2025, 3, 2)

Row = Mapping[str, Any]


def validate(df: Any, table: str) -> GateResult:
    return medallion_gate.validate(df, table)


def enforce(df: Any, table: str) -> GateResult:
    return medallion_gate.enforce(df, table)


# -- inline frames ------------------------------------------------------------------------


def schema_of(config: LakehouseConfig, table: str, spark: Any) -> Any:
    """The configured schema of ``table`` with every column nullable (to express violations)."""
    from pyspark.sql.types import StructField, StructType

    strict = spark.createDataFrame([], config.tables[table].schema_ddl).schema
    return StructType([StructField(f.name, f.dataType, True) for f in strict.fields])


def frame(spark: Any, config: LakehouseConfig, table: str, rows: list[Row]) -> Any:
    schema = schema_of(config, table, spark)
    return spark.createDataFrame([tuple(row.get(f.name) for f in schema.fields) for row in rows], schema)


def event(event_id: str | None, domain: str, **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "event_id": event_id,
        "domain": domain,
        "event_time": T0,
        "event_date": D0,
        "event_month": "2025-03",
        "ingest_time": T0,
        "accounting_date": D0,
        "lateness": "on_time",
        "schema_version": "1",
        "revision": 1,
        "customer_email": "a@example.com",
        "entity_id": "ent-1",
        "resolver": "entity_resolution@1",
        "amount": Decimal("10.00"),
        "currency": "EUR",
        "_manifest_id": "m1",
        "_source_file": "f1",
        "_line": 1,
    }
    row.update(changes)
    return row


def daily(entity_id: str | None, day: date | None, **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "entity_id": entity_id,
        "day": day,
        "month": "2025-03",
        "resolver": "entity_resolution@1",
        "order_amount": Decimal("10.00"),
        "refund_amount": Decimal("0.00"),
        **dict.fromkeys(
            ("orders", "refunds", "logins", "failed_logins", "devices", "cards", "chargebacks"), 1
        ),
    }
    row.update(changes)
    return row


def baseline(entity_id: str | None, window_days: int, **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "entity_id": entity_id,
        "day": D0,
        "month": "2025-03",
        "metric": "orders",
        "window_days": window_days,
        "mean": 1.5,
        "stddev": 0.5,
        "observations": 30,
        "dow_factor": 1.0,
    }
    row.update(changes)
    return row


def correlation(correlation_id: str | None, a: str, b: str, **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "correlation_id": correlation_id,
        "correlation_type": "shared_device",
        "entity_a": a,
        "entity_b": b,
        "valid_from": T0,
        "valid_to": None,
        "valid_month": "2025-03",
        "confidence": 0.5,
        "evidence": '{"assets":["d1"]}',
        "engine": "correlation@1",
        "run_id": "run-1",
        "status": "authoritative",
        "recorded_at": T0,
    }
    row.update(changes)
    return row


CLEAN: dict[str, list[Row]] = {
    "silver.events": [
        event("e1", "orders"),
        event("e2", "logins", amount=None, currency=None, lateness="late", revision=2),
        # refunds may lack an entity (resolved through their order in Gold)
        event("e3", "refunds", entity_id=None, currency="GBP", lateness="adjustment"),
        event("e4", "settlements", amount=Decimal("0.00"), currency="USD", lateness="reopen"),
        event("e5", "outcomes", amount=None, currency=None),
    ],
    "gold.entity_daily": [daily("ent-1", D0), daily("ent-1", D1), daily("ent-2", D0, orders=0, cards=0)],
    "gold.baselines": [baseline("ent-1", w) for w in (30, 90, 365, 730)]
    + [baseline("ent-2", 30, stddev=0.0, observations=0)],
    "gold.correlations": [
        correlation("c1", "ent-1", "ent-2"),
        # the same id written again by a later run (a rebuilt or restated successor, possibly
        # under another engine version) is a legitimate second row version of the store
        correlation("c1", "ent-1", "ent-2", engine="correlation@2", confidence=0.999999, run_id="run-2"),
        correlation("c2", "ent-1", "ent-3", status="provisional", confidence=0.000001),
        correlation("c3", "ent-2", "ent-3", status="superseded"),
        correlation("c4", "ent-3", "ent-4", status="retracted"),
    ],
}

# Each bad row breaks exactly one rule (the last entity_daily row breaks every count rule).
VIOLATIONS: dict[str, tuple[list[Row], dict[tuple[str, str], str]]] = {
    "silver.events": (
        [
            event(None, "settlements"),
            event("e1", "orders"),
            event("x3", "payments"),
            event("x4", "orders", event_time=None),
            event("x5", "refunds", amount=Decimal("-1.00")),
            event("x6", "orders", lateness="early"),
            event("x7", "orders", currency="JPY"),
            event("x8", "orders", revision=0),
            event("x9", "logins", entity_id=None),
        ],
        {
            ("expect_column_values_to_not_be_null", "event_id"): "event_id=null",
            ("expect_column_values_to_be_unique", "event_id"): "event_id=e1",
            ("expect_column_values_to_be_in_set", "domain"): "event_id=x3, domain=payments",
            ("expect_column_values_to_not_be_null", "event_time"): "event_id=x4, event_time=null",
            ("expect_column_values_to_be_between", "amount"): "event_id=x5, amount=-1.00",
            ("expect_column_values_to_be_in_set", "lateness"): "lateness=early",
            ("expect_column_values_to_be_in_set", "currency"): "currency=JPY",
            ("expect_column_values_to_be_between", "revision"): "revision=0",
            ("expect_column_values_to_not_be_null", "entity_id"): "event_id=x9",
        },
    ),
    "gold.entity_daily": (
        [
            daily(None, D0),
            daily("ent-3", None),
            daily("ent-1", D0),
            daily(
                "ent-4",
                D0,
                **dict.fromkeys(
                    ("orders", "refunds", "logins", "failed_logins", "devices", "cards", "chargebacks"), -1
                ),
            ),
        ],
        {
            ("expect_column_values_to_not_be_null", "entity_id"): "entity_id=null",
            ("expect_column_values_to_not_be_null", "day"): "entity_id=ent-3, day=null",
            ("expect_compound_columns_to_be_unique", "entity_id, day"): "entity_id=ent-1, day=2025-03-01",
            **{
                ("expect_column_values_to_be_between", name): f"{name}=-1"
                for name in (
                    "orders",
                    "refunds",
                    "logins",
                    "failed_logins",
                    "devices",
                    "cards",
                    "chargebacks",
                )
            },
        },
    ),
    "gold.baselines": (
        [
            baseline(None, 30),
            baseline("ent-3", 30, day=None),
            baseline("ent-4", 30, metric=None),
            baseline("ent-5", 45),
            baseline("ent-6", 30, stddev=-0.5),
            baseline("ent-7", 30, observations=-1),
        ],
        {
            ("expect_column_values_to_not_be_null", "entity_id"): "entity_id=null",
            ("expect_column_values_to_not_be_null", "day"): "day=null",
            ("expect_column_values_to_not_be_null", "metric"): "metric=null",
            ("expect_column_values_to_be_in_set", "window_days"): "window_days=45",
            ("expect_column_values_to_be_between", "stddev"): "stddev=-0.5",
            ("expect_column_values_to_be_between", "observations"): "observations=-1",
        },
    ),
    "gold.correlations": (
        [
            correlation(None, "ent-5", "ent-6"),
            correlation("c2", "ent-1", "ent-3"),
            correlation("x3", "ent-1", "ent-9", confidence=1.0),
            correlation("x4", "ent-1", "ent-8", confidence=0.0),
            correlation("x5", "ent-9", "ent-1"),
            correlation("x6", "ent-7", "ent-7"),
            correlation("x7", "ent-1", "ent-6", status="pending"),
            correlation("x8", "ent-1", "ent-5", engine=None),
        ],
        {
            ("expect_column_values_to_not_be_null", "correlation_id"): "correlation_id=null",
            ("expect_compound_columns_to_be_unique", "correlation_id, run_id"): "correlation_id=c2",
            ("expect_column_values_to_be_between", "confidence"): "confidence=1.0",
            (
                "expect_column_pair_values_a_to_be_greater_than_b",
                "entity_a, entity_b",
            ): "entity_a=ent-9, entity_b=ent-1",
            ("expect_column_values_to_be_in_set", "status"): "status=pending",
            ("expect_column_values_to_not_be_null", "engine"): "correlation_id=x8, run_id=run-1, engine=null",
        },
    ),
}


def ddl_columns(ddl: str) -> list[str]:
    """Column names of a Spark DDL schema (commas inside type parameters are skipped)."""
    depth, start, names = 0, 0, []
    for i, char in enumerate(ddl + ","):
        depth += char in "(<"
        depth -= char in ")>"
        if char == "," and depth == 0:
            names.append(ddl[start:i].split()[0].strip("`"))
            start = i + 1
    return names


# -- pure: suites, rendering, imports -----------------------------------------------------


def test_every_suite_names_a_configured_table_and_only_its_columns(lakehouse_config: LakehouseConfig) -> None:
    assert set(SUITES) == {"silver.events", "gold.entity_daily", "gold.baselines", "gold.correlations"}
    for name, suite in SUITES.items():
        assert suite.table == name
        assert name in lakehouse_config.tables, f"{name} is not in conf/lakehouse.yaml"
        columns = set(ddl_columns(lakehouse_config.tables[name].schema_ddl))
        assert set(suite.columns) <= columns, f"{name}: {sorted(set(suite.columns) - columns)} not in schema"


def test_value_sets_match_what_the_producing_workloads_emit() -> None:
    from workloads.engines import correlation
    from workloads.gold import baselines
    from workloads.gold import quality as gold
    from workloads.silver import quality as silver
    from workloads.synthetic import generator, population

    assert set(silver.DOMAINS) == set(generator.FEEDS)
    assert set(silver.CURRENCIES) == set(population.CURRENCIES)
    assert set(silver.LATENESS) == {"on_time", "late", "reopen", "adjustment"}
    assert set(gold.WINDOW_DAYS) == set(baselines.WINDOWS)
    assert correlation.STATUS in gold.CORRELATION_STATUSES
    assert set(gold.CORRELATION_STATUSES) == {"provisional", "authoritative", "superseded", "retracted"}


def test_the_generic_layer_names_no_table_and_no_business_value() -> None:
    sources = "\n".join(p.read_text() for p in sorted((REPO_ROOT / "lakehouse" / "quality").glob("*.py")))
    for word in ("silver.", "gold.", "ops.", "bronze.", "orders", "EUR", "on_time", "authoritative"):
        assert word not in sources, word
    assert "import workloads" not in sources
    assert "from workloads" not in sources


def test_importing_the_gate_and_its_suites_loads_neither_gx_nor_spark() -> None:
    code = (
        "import sys, lakehouse.quality, workloads.gold.quality as q; "
        "q.medallion_gate.suite_for('silver.events'); "
        "heavy = [m for m in ('great_expectations', 'pyspark') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_gx_is_imported_in_the_background_once_and_quietly() -> None:
    """A command that will validate starts GX's import before the JVM: a daemon thread, once
    per process, writing nothing to stdout or stderr; the first validation finds it imported."""
    code = (
        "import sys, threading; from lakehouse.quality import runner; "
        "runner.import_in_background(); first = runner._IMPORTING; runner.import_in_background(); "
        "assert runner._IMPORTING is first and first.daemon, 'one thread'; "
        "first.join(60); assert 'great_expectations' in sys.modules; "
        "assert 'great_expectations.data_context.types.base' in sys.modules"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("", "")


@pytest.mark.parametrize(
    ("argv", "gated"),
    [
        (["build", "silver"], True),
        (["replay", "--plan", "p.yaml"], True),
        (["demo"], True),
        (["asof", "gold.correlations", "--at", "2026-01-01T00:00:00Z"], False),
        (["erase", "--verify", "erasure-x"], False),
        (["ledger", "verify"], False),
    ],
)
def test_only_the_commands_that_validate_import_gx_while_the_jvm_starts(argv: list[str], gated: bool) -> None:
    from jobs.cli import build_parser

    assert build_parser(argv[0]).parse_args(argv).quality_gates is gated


def test_unknown_tables_are_refused_up_front() -> None:
    with pytest.raises(UnknownTableError, match=r"no quality suite for table 'gold\.nope'.*silver\.events"):
        medallion_gate.suite_for("gold.nope")
    with pytest.raises(UnknownTableError):
        medallion_gate.for_table("gold.nope")


def test_a_gate_refuses_suites_filed_under_another_table_or_twice() -> None:
    suite = Suite(table="zone.a", checks=(in_set("kind", ("x",)),), identity=("id",))
    with pytest.raises(ValueError, match=r"suite filed under 'zone\.b' is the suite of 'zone\.a'"):
        QualityGate({"zone.b": suite})
    with pytest.raises(ValueError, match=r"two quality suites for table 'zone\.a'"):
        suites_by_table([suite, suite])


def test_a_failed_result_renders_as_one_line_naming_table_expectation_and_samples() -> None:
    failure = ExpectationFailure(
        expectation=CheckKind.BETWEEN.value,
        columns=("confidence",),
        rule="confidence in (0, 1)",
        unexpected_count=2,
        samples=("correlation_id=x3, confidence=1.0", "correlation_id=x4, confidence=0.0"),
    )
    message = GateResult("gold.correlations", False, 6, (failure,)).message()
    assert "\n" not in message
    assert "gold.correlations" in message
    assert (
        "expect_column_values_to_be_between(confidence) [confidence in (0, 1)]: 2 failing row(s)" in message
    )
    assert "correlation_id=x3, confidence=1.0; correlation_id=x4, confidence=0.0" in message


def test_a_result_for_the_ledger_names_the_failures_without_any_row_value() -> None:
    """The replay's quality gate goes into the immutable ledger: counts and rules, no values."""
    failure = ExpectationFailure(
        expectation=CheckKind.LESS_THAN.value,
        columns=("entity_a", "entity_b"),
        rule="entity_a < entity_b",
        unexpected_count=6,
        samples=("entity_a=e1-00000000000000aa, entity_b=e1-0000000000000001",),
    )
    message = GateResult("gold.correlations", False, 6, (failure,)).message(samples=0)
    assert "6 failing row(s)" in message
    assert "e1-" not in message
    assert "e1-" not in failure.describe(samples=0)
    assert "e1-00000000000000aa" in failure.describe()


def test_a_failed_gate_tells_the_user_its_rows_and_the_ledger_only_its_rules() -> None:
    from lakehouse.errors import DataQualityError
    from lakehouse.tables.base import recorded_error

    failure = ExpectationFailure(
        expectation=CheckKind.NOT_NULL.value,
        columns=("customer_email",),
        rule="customer_email not null",
        unexpected_count=1,
        samples=("event_id=o-1, customer_email=alice@example.org",),
    )
    result = GateResult("silver.events", False, 4, (failure,))
    error = DataQualityError(result.message(), recorded=result.message(samples=0))
    assert "alice@example.org" in str(error), "the person running the command sees the rows"
    assert recorded_error(error).startswith("quality gate failed for silver.events")
    assert "alice@example.org" not in recorded_error(error), "the ledger never holds them"
    assert recorded_error(ValueError("first\nsecond")) == "first"


def test_pair_samples_are_shown_in_rule_order_and_values_as_plain_text() -> None:
    suite = medallion_gate.suite_for("gold.correlations")
    check = next(c for c in suite.checks if c.kind is CheckKind.LESS_THAN)
    # GX reports the pair as (column_A, column_B) = (entity_b, entity_a)
    samples = quality.render_samples(check, suite, {"partial_unexpected_list": [("ent-1", "ent-9")]})
    assert samples == ("entity_a=ent-9, entity_b=ent-1",)
    assert quality.render_value(None) == "null"
    assert quality.render_value(Decimal("-1.50")) == "-1.50"
    assert quality.render_value(datetime(2025, 3, 1, 12)) == "2025-03-01T12:00:00"
    assert quality.render_value("x" * 200).endswith("…")


# -- Spark: suites on inline frames -------------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize("table", sorted(CLEAN))
def test_clean_rows_pass_their_suite(
    table: str, spark_session: Any, lakehouse_config: LakehouseConfig
) -> None:
    result = validate(frame(spark_session, lakehouse_config, table, CLEAN[table]), table)
    assert result.success, result.message()
    assert result.failures == ()
    assert result.checks == len(SUITES[table].checks)


@pytest.mark.spark
@pytest.mark.parametrize("table", sorted(VIOLATIONS))
def test_every_rule_of_a_suite_catches_its_violation_and_only_that(
    table: str, spark_session: Any, lakehouse_config: LakehouseConfig
) -> None:
    bad_rows, expected = VIOLATIONS[table]
    result = validate(frame(spark_session, lakehouse_config, table, CLEAN[table] + bad_rows), table)

    assert not result.success
    found = {(f.expectation, f.column): f for f in result.failures}
    assert set(found) == set(expected)
    for key, sample in expected.items():
        failure = found[key]
        assert failure.unexpected_count, key
        assert any(sample in s for s in failure.samples), (key, failure.samples)


def _only(table: str, row: Row) -> tuple[str, list[Row]]:
    return table, [*CLEAN[table], row]


@pytest.mark.spark
@pytest.mark.parametrize(
    ("case", "expected"),
    [
        pytest.param(
            _only("silver.events", event(None, "orders")),
            ("expect_column_values_to_not_be_null(event_id)", "event_id=null"),
            id="null-key",
        ),
        pytest.param(
            _only("gold.entity_daily", daily("ent-1", D1, orders=5)),
            ("expect_compound_columns_to_be_unique(entity_id, day)", "entity_id=ent-1, day=2025-03-02"),
            id="duplicate-key",
        ),
        pytest.param(
            _only("gold.correlations", correlation("x9", "ent-1", "ent-9", confidence=1.5)),
            ("expect_column_values_to_be_between(confidence)", "confidence=1.5"),
            id="confidence-out-of-range",
        ),
        pytest.param(
            _only("gold.correlations", correlation("x9", "ent-1", "ent-9", status="pending")),
            ("expect_column_values_to_be_in_set(status)", "status=pending"),
            id="unknown-status",
        ),
    ],
)
def test_enforce_raises_one_line_naming_table_expectation_and_failing_values(
    case: tuple[str, list[Row]],
    expected: tuple[str, str],
    spark_session: Any,
    lakehouse_config: LakehouseConfig,
) -> None:
    table, rows = case
    with pytest.raises(DataQualityError) as raised:
        enforce(frame(spark_session, lakehouse_config, table, rows), table)
    message = str(raised.value)
    assert "\n" not in message
    assert f"quality gate failed for {table}: 1 of" in message
    for part in expected:
        assert part in message, message


@pytest.mark.spark
def test_a_missing_column_is_a_failure_and_the_other_rules_still_run(
    spark_session: Any, lakehouse_config: LakehouseConfig
) -> None:
    rows = [*CLEAN["silver.events"], event("x1", "orders", revision=0)]
    df = frame(spark_session, lakehouse_config, "silver.events", rows).drop("currency")
    result = validate(df, "silver.events")
    assert {(f.expectation, f.column) for f in result.failures} == {
        (COLUMN_MISSING, "currency"),
        ("expect_column_values_to_be_between", "revision"),
    }
    assert result.checks == len(SUITES["silver.events"].checks)


@pytest.mark.spark
def test_a_column_of_the_wrong_type_fails_the_gate_not_the_process(
    spark_session: Any, lakehouse_config: LakehouseConfig
) -> None:
    from pyspark.sql import functions as F

    df = frame(spark_session, lakehouse_config, "gold.baselines", CLEAN["gold.baselines"])
    result = validate(df.withColumn("stddev", F.lit("wide")), "gold.baselines")
    (failure,) = result.failures
    assert (failure.expectation, failure.column) == ("expect_column_values_to_be_between", "stddev")
    assert failure.observed is not None
    assert "type" in failure.observed.lower(), failure.observed


@pytest.mark.spark
def test_an_empty_frame_passes(spark_session: Any, lakehouse_config: LakehouseConfig) -> None:
    assert validate(frame(spark_session, lakehouse_config, "gold.baselines", []), "gold.baselines").success


@pytest.mark.spark
def test_validation_leaves_nothing_cached_and_prints_nothing(
    spark_session: Any, lakehouse_config: LakehouseConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    from pyspark import StorageLevel

    rows = [*CLEAN["gold.baselines"], baseline("ent-9", 45)]
    df = frame(spark_session, lakehouse_config, "gold.baselines", rows)
    assert not validate(df, "gold.baselines").success
    assert df.storageLevel == StorageLevel.NONE
    assert capsys.readouterr() == ("", "")

    cached = frame(spark_session, lakehouse_config, "gold.baselines", CLEAN["gold.baselines"]).cache()
    try:
        assert validate(cached, "gold.baselines").success
        assert cached.storageLevel != StorageLevel.NONE, "a caller's cache must survive validation"
    finally:
        cached.unpersist()


# -- Spark: the gate's hooks ---------------------------------------------------------------


@pytest.mark.spark
def test_an_observed_gate_reports_every_result_and_raises_on_the_failing_one(
    spark_session: Any, lakehouse_config: LakehouseConfig
) -> None:
    name = "gold.correlations"
    clean = frame(spark_session, lakehouse_config, name, CLEAN[name])
    bad = frame(
        spark_session, lakehouse_config, name, [correlation("x1", "ent-1", "ent-2", status="pending")]
    )
    seen: list[GateResult] = []
    gate = medallion_gate.observed(seen.append)

    gate(name, clean)
    with pytest.raises(DataQualityError, match=r"gold\.correlations.*status=pending"):
        gate(name, bad)
    assert [r.success for r in seen] == [True, False], "on_result sees each result, the failing one too"

    one_table = medallion_gate.for_table(name)
    one_table(clean)
    with pytest.raises(DataQualityError):
        one_table(bad)
