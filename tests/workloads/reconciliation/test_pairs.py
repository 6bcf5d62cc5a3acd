"""The pairs declared in ``reconcile.pairs`` of the configuration, checked without Spark.

The shipped declarations give the pairs the Python list used to (Bronze -> Silver per feed,
the entity index) plus the provisional view's, report-only; a wrong declaration is one line
naming the key, from the configuration's model (its shape) or from
:func:`~workloads.reconciliation.pairs.declared_pairs` (its tables, key and projection).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from lakehouse.config import LakehouseConfig, load_config
from lakehouse.errors import ConfigError, UsageError
from tests.conftest import REPO
from workloads.reconciliation.pairs import PROJECTIONS, declared_pairs, resolve_pair
from workloads.reconciliation.run import check_repair, load_reconcile_policy, reconcile
from workloads.vocabulary import FEEDS

CONF = REPO / "conf" / "lakehouse.yaml"


def configured(tmp_path: Path, pairs: dict[str, Any]) -> LakehouseConfig:
    """The shipped configuration with ``pairs`` declared over its own (a file that extends it)."""
    path = tmp_path / "lakehouse.yaml"
    path.write_text(yaml.safe_dump({"extends": str(CONF), "reconcile": {"pairs": pairs}}))
    return load_config(path, environ={})


def one_line(error: pytest.ExceptionInfo[Exception]) -> str:
    message = str(error.value)
    assert "\n" not in message, message
    return message


def test_the_shipped_declarations_are_the_pairs_users_reconcile() -> None:
    pairs = declared_pairs(load_config(CONF, environ={}))
    by_label = {p.label: p for p in pairs}
    assert list(by_label) == [*(f.value for f in FEEDS), "entity_index", "provisional"]
    for feed in FEEDS:
        silver = by_label[feed.value]
        assert (silver.source, silver.derived, silver.key_text) == (
            feed.bronze_table,
            "silver.events",
            "_event_id:event_id",
        )
        assert (silver.authority, silver.derived_where, silver.columns) == (
            "source",
            f"domain = '{feed.value}'",
            None,
        )
        assert silver.derive is not None
        assert silver.repair_rows is not None
        assert silver.report_only is None
    index = by_label["entity_index"]
    assert (index.name, index.key_text, index.authority) == (
        "gold.correlations -> gold.correlations_by_entity",
        "correlation_id",
        "source",
    )
    assert (index.derived_where, index.columns, index.repair_rows, index.report_only) == (
        None,
        None,
        None,
        None,
    )
    provisional = by_label["provisional"]
    assert provisional.name == "gold.correlations -> gold.provisional_correlations"
    assert (provisional.key_text, provisional.authority) == ("correlation_id", "source")
    assert provisional.derived_where == "status = 'authoritative'"
    assert provisional.columns is not None
    assert not {"stream_batch", "window_start", "window_end", "outcome"} & set(provisional.columns)
    assert provisional.derive is PROJECTIONS["provisional_batch_copies"].derive("gold.correlations")
    assert provisional.report_only


def test_the_provisional_pair_is_report_only_before_anything_is_read() -> None:
    config = load_config(CONF, environ={})
    pair = resolve_pair(config, "gold.correlations", "gold.provisional_correlations", None)
    with pytest.raises(UsageError, match="is report-only") as refused:
        check_repair(pair)
    assert "never deletes" in one_line(refused)
    with pytest.raises(UsageError, match="is report-only"):  # refused before the registry is touched
        reconcile(None, None, None, pair, policy=load_reconcile_policy(), repair=True)  # type: ignore[arg-type]
    check_repair(resolve_pair(config, "bronze.orders", "silver.events", None))  # the others may repair


GOOD = {"source": "gold.correlations", "derived": "gold.provisional_correlations", "key": "correlation_id"}
"""A declaration of the provisional tables (over the shipped one, key by key, where it is named so)."""


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"projecton": "x"}, "unknown key 'reconcile.pairs.bad.projecton'"),
        ({"authority": "derived"}, "key 'reconcile.pairs.bad.authority' has invalid value 'derived'"),
        ({"key": "a:b:c"}, "key 'reconcile.pairs.bad.key' has invalid value 'a:b:c'"),
        ({"columns": "confidence"}, "key 'reconcile.pairs.bad.columns'"),
    ],
    ids=["misspelt-key", "authority", "key-syntax", "columns-not-a-list"],
)
def test_a_malformed_declaration_is_one_line_naming_the_key(
    tmp_path: Path, changes: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        configured(tmp_path, {"bad": {**GOOD, **changes}})
    assert expected in one_line(refused)


def test_two_declarations_of_one_pair_are_refused(tmp_path: Path) -> None:
    index = {**GOOD, "derived": "gold.correlations_by_entity"}
    with pytest.raises(ConfigError) as refused:
        configured(tmp_path, {"again": index})
    message = one_line(refused)
    assert (
        "'entity_index' and 'again' both declare gold.correlations -> gold.correlations_by_entity" in message
    )


@pytest.mark.parametrize(
    ("changes", "key", "expected"),
    [
        ({"source": "gold.correlation"}, "source", "unknown table 'gold.correlation'"),
        ({"derived": "silver.event"}, "derived", "unknown table 'silver.event'"),
        ({"projection": "provisional_copies"}, "projection", "no projection of that name is registered"),
        (
            {"source": "silver.events", "key": "event_id:correlation_id", "projection": "entity_index"},
            "source",
            "reads gold.correlations",
        ),
        ({"projection": "entity_index"}, "derived", "writes rows for gold.correlations_by_entity"),
        ({"key": "correlation_id:stream_batch"}, "key", "the key types differ"),
        ({"key": "correlation_id:run_id"}, "key", None),
        ({"key": "event_id"}, "key", "gold.correlations has no column 'event_id'"),
        ({"columns": ["confidence", "confidance"]}, "columns", "has no column 'confidance'"),
    ],
    ids=[
        "source-table",
        "derived-table",
        "projection",
        "projection-source",
        "projection-derived",
        "key-types",
        "key-same-type",
        "key-column",
        "compared-column",
    ],
)
def test_a_declaration_naming_what_is_not_there_is_one_line_naming_the_key(
    tmp_path: Path, changes: dict[str, Any], key: str, expected: str | None
) -> None:
    config = configured(tmp_path, {"provisional": {**GOOD, **changes}})
    if expected is None:  # two columns of one type: a sound declaration
        assert declared_pairs(config)[-1].key_text == "correlation_id:run_id"
        return
    with pytest.raises(ConfigError) as refused:
        declared_pairs(config)
    message = one_line(refused)
    assert f"key 'reconcile.pairs.provisional.{key}'" in message
    assert expected in message
    assert str(tmp_path / "lakehouse.yaml") in message
    with pytest.raises(ConfigError):  # and so is every reconcile, whichever pair it names
        resolve_pair(config, "bronze.orders", "silver.events", None)


def test_an_undeclared_pair_names_the_declared_ones(tmp_path: Path) -> None:
    config = load_config(CONF, environ={})
    with pytest.raises(UsageError) as refused:
        resolve_pair(config, "silver.events", "gold.entity_daily", "entity_id")
    message = one_line(refused)
    assert "silver.events -> gold.entity_daily is not a declared pair" in message
    assert "gold.correlations -> gold.correlations_by_entity" in message
    empty = tmp_path / "empty.yaml"
    empty.write_text(
        yaml.safe_dump(
            {"tables": {k: v.model_dump(by_alias=True, mode="json") for k, v in config.tables.items()}}
        )
    )
    with pytest.raises(UsageError, match=r"\(declared in reconcile.pairs of the configuration: none\)"):
        resolve_pair(load_config(empty, environ={}), "bronze.orders", "silver.events", None)
