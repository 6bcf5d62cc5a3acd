"""Declared engine versions: strict loading, resolution by date, code fingerprints, declaration,
and the ``lakehouse engines`` verbs that expose them.

Pure tests: no Spark. Engine code lives in throwaway packages under tmp_path, found
through an explicit search path, so nothing here imports an engine module.
"""

from __future__ import annotations

import json
import sys
import textwrap
from datetime import date
from pathlib import Path

import pytest
import yaml

from jobs.cli import main
from lakehouse.digest import digest_of
from lakehouse.errors import ConfigError, EngineError, EngineFingerprintError, UnknownEngineError
from ledger.engines import (
    PENDING,
    EngineSpec,
    declare,
    fill_fingerprints,
    fingerprint,
    load_engines,
    verify_fingerprint,
)
from ledger.entries import EngineDeclared, parse_entry

REPO = Path(__file__).resolve().parents[2]

ENGINE_SOURCE = '''\
"""A throwaway engine."""

from __future__ import annotations

import math
from os import path, sep

SCALE = 3
UNUSED = 1


def _helper(x: int) -> int:
    """Docstrings do not count."""
    return x * SCALE


def run_v1(x: int) -> float:
    """Version 1."""
    # comments do not count either
    return math.sqrt(_helper(x))
'''


@pytest.fixture
def engine_pkg(tmp_path: Path) -> Path:
    """A package ``tmpeng`` with module ``logic`` holding ``run_v1``; returns the module file."""
    package = tmp_path / "src" / "tmpeng"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('the package must not be imported')\n")
    module = package / "logic.py"
    module.write_text(ENGINE_SOURCE)
    return module


def search(module: Path) -> list[str]:
    return [str(module.parents[1])]


def fp(module: Path, impl: str = "tmpeng.logic:run_v1") -> str:
    return fingerprint(impl, search_path=search(module))


def edit(module: Path, old: str, new: str) -> None:
    text = module.read_text()
    assert old in text, old
    module.write_text(text.replace(old, new))


# -- fingerprints -----------------------------------------------------------------------------


def test_fingerprint_reads_source_without_importing_it(engine_pkg: Path) -> None:
    digest = fp(engine_pkg)
    assert len(digest) == 64
    assert int(digest, 16) >= 0
    assert "tmpeng" not in sys.modules
    assert "tmpeng.logic" not in sys.modules
    assert fp(engine_pkg) == digest  # stable


def test_fingerprint_ignores_comments_docstrings_and_formatting(engine_pkg: Path) -> None:
    before = fp(engine_pkg)
    edit(engine_pkg, "# comments do not count either", "# reworded comment")
    edit(engine_pkg, '"""Docstrings do not count."""', '"""Reworded documentation."""')
    edit(engine_pkg, "return x * SCALE", "return (x   *   SCALE)")
    assert fp(engine_pkg) == before


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("return math.sqrt(_helper(x))", "return math.sqrt(_helper(x)) + 0"),  # the function itself
        ("return x * SCALE", "return x * SCALE + 1"),  # a helper it calls
        ("SCALE = 3", "SCALE = 4"),  # a constant the helper uses
        ("import math", "import cmath as math"),  # an import binding a name it uses
    ],
    ids=["function", "helper", "constant", "import"],
)
def test_fingerprint_changes_with_any_code_the_function_reaches(engine_pkg: Path, old: str, new: str) -> None:
    before = fp(engine_pkg)
    edit(engine_pkg, old, new)
    assert fp(engine_pkg) != before


def test_fingerprint_ignores_code_the_function_does_not_reach(engine_pkg: Path) -> None:
    """Adding v2 beside v1 must not change v1's fingerprint, or v1 could not be rerun."""
    before = fp(engine_pkg)
    edit(engine_pkg, "UNUSED = 1", "UNUSED = 2")
    edit(engine_pkg, "from os import path, sep", "from os import path, sep, linesep")
    engine_pkg.write_text(engine_pkg.read_text() + "\n\ndef run_v2(x: int) -> float:\n    return float(x)\n")
    assert fp(engine_pkg) == before
    assert fp(engine_pkg, "tmpeng.logic:run_v2") != before


def test_fingerprint_names_what_it_cannot_find(engine_pkg: Path) -> None:
    with pytest.raises(EngineError, match="no top-level 'run_v9'"):
        fp(engine_pkg, "tmpeng.logic:run_v9")
    with pytest.raises(EngineError, match=r"cannot find module 'tmpeng\.nothere'"):
        fp(engine_pkg, "tmpeng.nothere:run_v1")
    with pytest.raises(EngineError, match="not an implementation path"):
        fp(engine_pkg, "tmpeng.logic.run_v1")


# -- engines.yaml -----------------------------------------------------------------------------

HEADER = "# Engines of the test.\n# This comment must survive a declaration.\n\n"


def write_engines(path: Path, items: list[dict[str, object]]) -> Path:
    path.write_text(HEADER + yaml.safe_dump({"engines": items}, sort_keys=False))
    return path


def item(
    version: int, effective: str, fingerprint_value: str = PENDING, **extra: object
) -> dict[str, object]:
    return {
        "name": "scorer",
        "version": version,
        "implementation": "tmpeng.logic:run_v1",
        "effective_from": date.fromisoformat(effective),
        "description": f"v{version}",
        "parameters": {"threshold": version},
        "code_fingerprint": fingerprint_value,
        **extra,
    }


def test_shipped_engines_file_declares_the_v1_engines() -> None:
    catalog = load_engines(REPO / "conf" / "engines.yaml")
    er = catalog.resolve("entity_resolution", at=date(2025, 1, 1))
    corr = catalog.resolve("correlation", at=date(2025, 1, 1))
    assert (er.ref, er.implementation) == (
        "entity_resolution@1",
        "workloads.engines.entity_resolution:resolve_v1",
    )
    assert (corr.ref, corr.implementation) == ("correlation@1", "workloads.engines.correlation:correlate_v1")
    for engine in catalog.engines:  # once filled in, a declared fingerprint must match the code
        if not engine.fingerprint_pending:
            verify_fingerprint(engine, search_path=[str(REPO)])


def test_load_refuses_unknown_keys_naming_file_engine_and_key(tmp_path: Path) -> None:
    path = write_engines(tmp_path / "engines.yaml", [item(1, "2025-01-01", paramters={})])
    with pytest.raises(ConfigError) as caught:
        load_engines(path)
    assert str(caught.value) == (
        f"{path}: unknown key 'engines[0] (scorer@1).paramters'; remove it or check its spelling"
    )


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([item(1, "2025-01-01"), item(1, "2025-02-01")], "scorer@1 is declared after scorer@1"),
        (
            [item(1, "2025-02-01"), item(2, "2025-01-01")],
            "scorer@2 takes effect 2025-01-01, not after scorer@1",
        ),
        (
            [item(1, "2025-01-01", "abc")],
            r"key 'engines\[0\] \(scorer@1\)\.code_fingerprint' has invalid value 'abc'",
        ),
        (
            [{k: v for k, v in item(1, "2025-01-01").items() if k != "description"}],
            r"missing key 'engines\[0\] \(scorer@1\)\.description'",
        ),
    ],
    ids=["duplicate-version", "effective-order", "bad-fingerprint", "missing-key"],
)
def test_load_refuses_inconsistent_declarations(
    tmp_path: Path, items: list[dict[str, object]], message: str
) -> None:
    path = write_engines(tmp_path / "engines.yaml", items)
    with pytest.raises(ConfigError, match=message):
        load_engines(path)


def test_resolve_by_version_by_date_and_latest(tmp_path: Path) -> None:
    path = write_engines(tmp_path / "engines.yaml", [item(1, "2025-01-01"), item(2, "2025-06-01")])
    catalog = load_engines(path)
    assert catalog.resolve("scorer").version == 2
    assert catalog.resolve("scorer", at=date(2025, 5, 31)).version == 1
    assert catalog.resolve("scorer", at=date(2025, 6, 1)).version == 2
    assert catalog.resolve("scorer", version=1).version == 1
    with pytest.raises(UnknownEngineError, match="no version of engine 'scorer' is effective at 2024-12-31"):
        catalog.resolve("scorer", at=date(2024, 12, 31))
    with pytest.raises(UnknownEngineError, match="scorer@2 takes effect 2025-06-01, after 2025-03-01"):
        catalog.resolve("scorer", version=2, at=date(2025, 3, 1))
    with pytest.raises(UnknownEngineError, match="scorer@3 is not declared"):
        catalog.resolve("scorer", version=3)
    with pytest.raises(UnknownEngineError, match="engine 'ranker' is not declared"):
        catalog.resolve("ranker")


def test_identity_digests_cover_parameters_reference_data_and_models() -> None:
    base = EngineSpec.model_validate(item(1, "2025-01-01", "a" * 64))
    identity = base.identity()
    assert identity.ref == "scorer@1"
    assert identity.config_digest == digest_of({"threshold": 1})
    variants = [
        base.model_copy(update={"parameters": {"threshold": 2}}),
        base.model_copy(update={"reference_data": {"countries": "ref.countries@3"}}),
        base.model_copy(update={"model_versions": {"fraud": "7"}}),
        base.model_copy(update={"code_fingerprint": "b" * 64}),
    ]
    digests = {identity.digest} | {v.identity().digest for v in variants}
    assert len(digests) == 5
    # YAML integers for versions are identifiers: 7 and "7" are the same model version
    assert (
        EngineSpec.model_validate({**item(1, "2025-01-01", "a" * 64), "model_versions": {"fraud": 7}})
        .identity()
        .digest
        == variants[2].identity().digest
    )


def test_verify_fingerprint_refuses_changed_code_with_the_exact_message(
    engine_pkg: Path, tmp_path: Path
) -> None:
    declared = fp(engine_pkg)
    spec = EngineSpec.model_validate(item(1, "2025-01-01", declared))
    assert verify_fingerprint(spec, search_path=search(engine_pkg)).code_fingerprint == declared
    edit(engine_pkg, "SCALE = 3", "SCALE = 5")
    actual = fp(engine_pkg)
    with pytest.raises(EngineFingerprintError) as caught:
        verify_fingerprint(spec, search_path=search(engine_pkg))
    assert str(caught.value) == (
        f"engine scorer@1's code changed (declared fingerprint {declared}, actual {actual}) "
        f"without a version bump — declare a new version"
    )
    pending = EngineSpec.model_validate(item(1, "2025-01-01"))
    with pytest.raises(EngineFingerprintError, match="has no declared code fingerprint yet"):
        verify_fingerprint(pending, search_path=search(engine_pkg))


def test_declare_appends_the_next_version_keeping_comments(engine_pkg: Path, tmp_path: Path) -> None:
    path = write_engines(tmp_path / "engines.yaml", [item(1, "2025-01-01", fp(engine_pkg))])
    edit(engine_pkg, "SCALE = 3", "SCALE = 5")

    entry = declare(
        path,
        name="scorer",
        implementation="tmpeng.logic:run_v1",
        effective_from=date(2025, 7, 1),
        description="rescaled",
        parameters={"threshold": 1},
        model_versions={"fraud": "2"},
        search_path=search(engine_pkg),
    )

    assert path.read_text().startswith(HEADER)
    catalog = load_engines(path)
    v2 = catalog.resolve("scorer")
    assert (v2.version, v2.code_fingerprint, v2.effective_from) == (2, fp(engine_pkg), date(2025, 7, 1))
    assert catalog.resolve("scorer", at=date(2025, 6, 30)).version == 1
    assert isinstance(entry, EngineDeclared)
    assert entry.engine == v2.identity()
    assert parse_entry(entry.kind, entry.run_id, entry.body()) == entry
    assert verify_fingerprint(v2, search_path=search(engine_pkg)) == v2.identity()


def test_declare_refuses_a_version_that_changes_nothing_or_goes_back_in_time(
    engine_pkg: Path, tmp_path: Path
) -> None:
    path = write_engines(tmp_path / "engines.yaml", [item(1, "2025-01-01", fp(engine_pkg))])
    before = path.read_text()
    common = {"name": "scorer", "implementation": "tmpeng.logic:run_v1", "description": "again"}
    with pytest.raises(EngineError, match="already declares this code and these parameters"):
        declare(
            path,
            effective_from=date(2025, 7, 1),
            parameters={"threshold": 1},
            search_path=search(engine_pkg),
            **common,
        )
    with pytest.raises(EngineError, match="must take effect after scorer@1"):
        declare(
            path,
            effective_from=date(2024, 7, 1),
            parameters={"threshold": 9},
            search_path=search(engine_pkg),
            **common,
        )
    assert path.read_text() == before


def test_fill_replaces_pending_fingerprints_in_place(engine_pkg: Path, tmp_path: Path) -> None:
    path = tmp_path / "engines.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            # keep me
            engines:
              - name: scorer
                version: 1
                implementation: tmpeng.logic:run_v1
                effective_from: 2025-01-01
                description: first
                code_fingerprint: pending  # filled later
            """
        )
    )
    assert fill_fingerprints(path, search_path=search(engine_pkg)) == ["scorer@1"]
    text = path.read_text()
    assert "# keep me" in text
    assert f"code_fingerprint: {fp(engine_pkg)}  # filled later" in text
    assert fill_fingerprints(path, search_path=search(engine_pkg)) == []


def engines_cli(*args: str) -> int:
    """``lakehouse engines ARGS`` in this process; returns the exit code."""
    return main(["engines", *args, "--conf", str(REPO / "conf" / "lakehouse.yaml")])


def test_engines_command_prints_fingerprints_and_fails_on_changed_code(
    engine_pkg: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(engine_pkg.parents[1]))
    assert engines_cli("fingerprint", "--implementation", "tmpeng.logic:run_v1") == 0
    assert capsys.readouterr().out.strip() == fp(engine_pkg)
    path = write_engines(tmp_path / "engines.yaml", [item(1, "2025-01-01", fp(engine_pkg))])
    assert engines_cli("check", "--engines", str(path)) == 0
    assert capsys.readouterr().out.startswith("ok   scorer@1 ")
    edit(engine_pkg, "SCALE = 3", "SCALE = 6")
    assert engines_cli("check", "--engines", str(path)) == 4
    assert "FAIL scorer@1: engine scorer@1's code changed" in capsys.readouterr().out
    assert engines_cli("list", "--engines", str(path)) == 4
    assert "CHANGED: engine scorer@1's code changed" in capsys.readouterr().out
    assert engines_cli("fingerprint", "--implementation", "tmpeng.gone:run_v1") == 2
    assert "cannot find module 'tmpeng.gone'" in capsys.readouterr().err
    assert engines_cli("fingerprint") == 2
    assert "required: --implementation" in capsys.readouterr().err
    assert "tmpeng.logic" not in sys.modules


def test_engines_fill_command_fills_pending_fingerprints_in_place(
    engine_pkg: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(engine_pkg.parents[1]))
    path = write_engines(tmp_path / "engines.yaml", [item(1, "2025-01-01")])
    assert engines_cli("fill", "--engines", str(path), "--json") == 0
    assert json.loads(capsys.readouterr().out) == {"filled": ["scorer@1"]}
    assert path.read_text().startswith(HEADER)
    assert load_engines(path).resolve("scorer").code_fingerprint == fp(engine_pkg)
    assert engines_cli("fill", "--engines", str(path)) == 0
    assert "no pending fingerprints" in capsys.readouterr().out
    assert engines_cli("fill", "--engines", str(tmp_path / "missing.yaml")) == 2
    assert "engines file not found" in capsys.readouterr().err
