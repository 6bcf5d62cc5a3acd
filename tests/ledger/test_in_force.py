"""Which engine version is in force for a processing date (pure decision, ledger facts, catalog keys).

No Spark: the decision is a pure function, and the ledger facts are typed entries as the
product records them (built here with the same constructors the product uses, never
written to a ledger table).
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from lakehouse.errors import ConfigError, UnknownEngineError
from ledger.engines import (
    EngineHistory,
    EngineSpec,
    decide_in_force,
    engine_history,
    engines_in_force,
    load_engines,
    pinned_in_force,
)
from ledger.entries import Publication, Rollback, RunFinished, RunStarted
from ledger.identity import OutputWritten

REPO = Path(__file__).resolve().parents[2]
FP = "0" * 64


def spec(version: int, effective: str, name: str = "entity_resolution", **extra: Any) -> EngineSpec:
    return EngineSpec(
        name=name,
        version=version,
        implementation=f"pkg.mod:run_v{version}",
        effective_from=date.fromisoformat(effective),
        description=f"v{version}",
        code_fingerprint=FP,
        **extra,
    )


V1, V2, V3 = spec(1, "2024-01-01"), spec(2, "2026-11-01"), spec(3, "2027-03-01")
BEFORE, AFTER, LATER = date(2026, 10, 31), date(2026, 11, 1), date(2027, 3, 2)


def test_before_the_effective_date_the_earlier_version_decides_and_says_what_comes() -> None:
    chosen = decide_in_force([V1, V2], BEFORE, EngineHistory(produced=frozenset({1})))
    assert chosen.ref == "entity_resolution@1"
    assert chosen.reason.startswith("latest version effective on 2026-10-31")
    assert "entity_resolution@2 takes effect 2026-11-01" in chosen.reason


def test_a_version_restating_history_waits_for_its_publication() -> None:
    waiting = decide_in_force([V1, V2], AFTER, EngineHistory(produced=frozenset({1})))
    assert waiting.ref == "entity_resolution@1"
    assert "entity_resolution@2 (effective 2026-11-01) restates history built by entity_resolution@1" in (
        waiting.reason
    )
    assert "waits for a replay publishing it" in waiting.reason

    published = EngineHistory(produced=frozenset({1, 2}), published={2: "replay-abc"})
    chosen = decide_in_force([V1, V2], AFTER, published)
    assert chosen.ref == "entity_resolution@2"
    assert "was published by run replay-abc" in chosen.reason


def test_without_history_to_restate_the_latest_effective_version_decides() -> None:
    assert decide_in_force([V2, V1], AFTER, EngineHistory()).ref == "entity_resolution@2"


def test_a_pin_starts_a_fresh_lakehouse_under_an_older_version_and_keeps_the_rules_choice() -> None:
    rule = decide_in_force([V1, V2], AFTER, EngineHistory())
    pinned = pinned_in_force(V1, rule, EngineHistory())
    assert pinned.ref == "entity_resolution@1"
    assert pinned.reason.startswith("pinned by the operator; the rule alone would choose entity_resolution@2")
    assert pinned_in_force(V2, rule, EngineHistory()) == rule, "pinning the rule's choice changes nothing"


def test_a_pin_that_would_mix_versions_or_is_not_effective_yet_is_refused() -> None:
    published = EngineHistory(produced=frozenset({1, 2}), published={2: "replay-abc"})
    rule = decide_in_force([V1, V2], AFTER, published)
    with pytest.raises(UnknownEngineError, match=r"cannot pin entity_resolution@1: .*run replay-abc"):
        pinned_in_force(V1, rule, published)
    early = decide_in_force([V1, V2], BEFORE, EngineHistory())
    with pytest.raises(UnknownEngineError, match=r"pin entity_resolution@2: it takes effect 2026-11-01"):
        pinned_in_force(V2, early, EngineHistory())


def test_an_unpublished_v3_falls_back_to_the_published_v2_not_to_v1() -> None:
    history = EngineHistory(produced=frozenset({1, 2}), published={2: "replay-abc"})
    chosen = decide_in_force([V1, V2, V3], LATER, history)
    assert chosen.ref == "entity_resolution@2"
    assert "not in force yet: entity_resolution@3" in chosen.reason


def test_no_version_effective_yet_is_refused() -> None:
    with pytest.raises(UnknownEngineError, match="no version of engine 'entity_resolution' is effective"):
        decide_in_force([V1], date(2023, 1, 1), EngineHistory())


def identity(version: int, name: str = "entity_resolution") -> Any:
    return spec(version, "2024-01-01", name=name).identity()


def started(run: str, *versions: int) -> RunStarted:
    return RunStarted(run_id=run, command="x", purpose="build", engines=tuple(identity(v) for v in versions))


def finished(run: str, *, candidate: str | None = None) -> RunFinished:
    return RunFinished(
        run_id=run, status="ok", outputs={"silver.events": OutputWritten(version=1, candidate=candidate)}
    )


AT = datetime(2026, 11, 5, tzinfo=UTC)


def publication(run: str) -> Publication:
    return Publication(run_id=run, tables={"gold.correlations": 3}, effective_at=AT)


def test_the_ledger_says_which_versions_produced_output_and_which_are_published() -> None:
    entries = [
        started("silver-1", 1),
        finished("silver-1"),
        started("replay-1", 1, 2),
        finished("replay-1", candidate="c1"),  # a candidate is not output
        RunFinished(run_id="failed-1", status="failed", error="boom"),
    ]
    history = engine_history(entries)["entity_resolution"]
    assert history.produced == frozenset({1})
    assert history.published == {}

    history = engine_history([*entries, publication("replay-1")])["entity_resolution"]
    assert history.produced == frozenset({1, 2})
    assert history.published == {2: "replay-1"}

    rolled_back = Rollback(
        run_id="replay-1", table="gold.correlations", from_version=3, to_version=2, new_version=4, reason="r"
    )
    assert (
        engine_history([*entries, publication("replay-1"), rolled_back])["entity_resolution"].published == {}
    )


def catalog_file(tmp_path: Path, *specs: EngineSpec) -> Path:
    items = [s.model_dump(mode="json") for s in specs]
    path = tmp_path / "engines.yaml"
    path.write_text(yaml.safe_dump({"engines": items}, sort_keys=False), encoding="utf-8")
    return path


def test_engines_in_force_reads_the_catalog_and_refuses_an_edited_declaration(tmp_path: Path) -> None:
    catalog = load_engines(catalog_file(tmp_path, V1, V2))
    entries = [started("silver-1", 1), finished("silver-1")]
    assert engines_in_force(catalog, entries, ["entity_resolution"], AFTER)["entity_resolution"].ref == (
        "entity_resolution@1"
    )
    assert engines_in_force(
        catalog, [*entries, started("r", 1, 2), publication("r")], ["entity_resolution"], AFTER
    )["entity_resolution"].ref == ("entity_resolution@2")
    with pytest.raises(UnknownEngineError, match="'scorer' is not declared"):
        engines_in_force(catalog, entries, ["scorer"], AFTER)
    fresh = engines_in_force(catalog, [], ["entity_resolution"], AFTER, pinned={"entity_resolution": 1})
    assert fresh["entity_resolution"].ref == "entity_resolution@1"
    with pytest.raises(UnknownEngineError, match=r"correlation@1: this build runs entity_resolution"):
        engines_in_force(catalog, [], ["entity_resolution"], AFTER, pinned={"correlation": 1})

    # the ledger recorded V2's declaration; the file now says another effective date
    edited = load_engines(
        catalog_file(tmp_path, V1, V2.model_copy(update={"effective_from": date(2026, 12, 1)}))
    )
    with pytest.raises(
        ConfigError, match=r"entity_resolution@2 differs from its declaration recorded in the"
    ):
        engines_in_force(edited, [V2.declared_entry(), *entries], ["entity_resolution"], AFTER)
    assert engines_in_force(catalog, [V2.declared_entry(), *entries], ["entity_resolution"], AFTER)


def test_a_catalog_without_a_version_that_produced_output_is_refused(tmp_path: Path) -> None:
    """Otherwise the rule would quietly choose v1 again after v2's publication (a copy of the
    catalog without the versions this lakehouse declared, or another lakehouse's file)."""
    only_v1 = load_engines(catalog_file(tmp_path, V1))
    built = [started("silver-1", 1), finished("silver-1")]
    assert engines_in_force(only_v1, built, ["entity_resolution"], AFTER)["entity_resolution"].ref == (
        "entity_resolution@1"
    )
    assert engines_in_force(only_v1, [*built, started("r", 1, 2)], ["entity_resolution"], AFTER), (
        "a replay that wrote no output yet (or only a candidate) is no output"
    )
    published = [*built, started("r", 1, 2), finished("r", candidate="c"), publication("r")]
    with pytest.raises(ConfigError, match=r"records output of entity_resolution@2, which this file does not"):
        engines_in_force(only_v1, published, ["entity_resolution"], AFTER)


def test_consumes_and_produces_derive_the_downstream_chain_of_the_shipped_engines() -> None:
    catalog = load_engines(REPO / "conf" / "engines.yaml")
    chain = ["correlation", "entity_daily", "community", "baselines"]
    assert catalog.downstream("entity_resolution") == chain
    assert catalog.downstream("entity_daily") == ["baselines"]
    assert catalog.downstream("correlation") == ["community"], "communities group the correlations"
    assert catalog.downstream("community") == []
    baselines = catalog.resolve("baselines", 1)
    assert (baselines.consumes, baselines.produces) == (("gold.entity_daily",), ("gold.baselines",))
    for engine in catalog.engines:  # nothing applies reference data or a model yet: empty on purpose
        assert (engine.reference_data, engine.model_versions) == ({}, {})


def test_a_bad_consumes_entry_is_refused_with_the_file_engine_and_key(tmp_path: Path) -> None:
    item = V1.model_dump(mode="json") | {"consumes": ["silver events"]}
    path = tmp_path / "engines.yaml"
    path.write_text(yaml.safe_dump({"engines": [item]}), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"engines\[0\] \(entity_resolution@1\)\.consumes"):
        load_engines(path)
