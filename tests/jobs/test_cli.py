"""The command line as a user meets it: help, one-line errors, JSON, spark-submit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
LAKEHOUSE = [sys.executable, "-m", "jobs"]


def run(*args: str, cwd: Path = REPO, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LAKEHOUSE, *args], cwd=cwd, capture_output=True, text=True, env=env, check=False, timeout=600
    )


def test_help_lists_the_commands() -> None:
    result = run("--help")
    assert result.returncode == 0
    for command in ("demo", "tables", "submit-args", "replay", "approve", "ack", "publish", "rollback"):
        assert command in result.stdout
    for command in (
        "engines",
        "asof",
        "ledger",
        "reindex",
        "reconcile",
        "protect",
        "maintain",
        "progress",
        "erase",
        "hold",
        "extract",
    ):
        assert command in result.stdout


def test_help_lists_new_command_names_only() -> None:
    """``calibration-at`` and ``verify-publication``; the old names work but are not listed."""
    listed = run("--help").stdout
    assert "calibration-at" in listed
    assert "verify-publication" in listed
    commands = {line.split()[0] for line in listed.splitlines() if line.startswith("    ") and line.split()}
    assert not {"calibration", "verify"} & commands


@pytest.mark.parametrize(
    ("command", "own", "others"),
    [
        (("engines", "list"), ["--engines"], ["--name", "--implementation", "--param"]),
        (("engines", "fingerprint"), ["--implementation"], ["--engines", "--name", "--param"]),
        (("engines", "declare"), ["--name", "--implementation", "--effective-from", "--param"], []),
        (("ledger", "show"), ["--run", "--kind"], ["--history", "--version", "TABLE"]),
        (("ledger", "verify"), ["--history", "--policies"], ["--run", "--kind", "--version"]),
        (("ledger", "lineage"), ["TABLE", "--version"], ["--history", "--run", "--kind"]),
        (("hold", "add"), ["HOLD", "--subject-email", "--entity", "--by", "--reason"], []),
        (("hold", "release"), ["HOLD", "--by", "--reason"], ["--subject-email", "--entity"]),
        (("hold", "list"), [], ["HOLD", "--by", "--reason", "--subject-email"]),
        (("exceptions", "list"), ["--status"], ["EXCEPTION_ID", "--by", "--reason"]),
        (("exceptions", "approve"), ["EXCEPTION_ID", "--by", "--reason"], ["--status"]),
        (("build", "silver"), ["--since", "--until", "--engine"], ["--full"]),
        (("build", "gold"), ["--full", "--engine"], ["--since", "--until"]),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, tuple) else None,
)
def test_each_sub_action_is_a_subcommand_whose_help_lists_only_its_own_options(
    command: tuple[str, ...], own: list[str], others: list[str]
) -> None:
    result = run(*command, "--help", env=NO_JVM)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: lakehouse {' '.join(command)} ")
    for option in ("--conf", "--workdir", "--json", *own):
        assert option in result.stdout
    for option in others:
        assert option not in result.stdout, option


@pytest.mark.parametrize(
    "argv",
    [
        ("--json", "--workdir", "{tmp}", "engines", "list", "--engines", "{engines}"),
        ("engines", "--json", "list", "--engines", "{engines}"),
        ("engines", "list", "--json", "--engines", "{engines}"),
        ("--quiet", "engines", "--workdir", "{tmp}", "list", "--json", "--engines", "{engines}"),
    ],
    ids=["before-the-command", "between-command-and-action", "after-the-action", "at-every-level"],
)
def test_global_options_are_taken_at_every_level_of_a_subcommand(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    tampered = tampered_engines(tmp_path)
    result = run(*[a.format(engines=tampered, tmp=tmp_path) for a in argv], env=NO_JVM)
    assert result.returncode == 4, result.stderr
    codes = {e["engine"]: e["code"] for e in json.loads(result.stdout)["engines"]}
    assert codes["entity_resolution@1"].startswith("CHANGED")


NO_JVM = {**os.environ, "JAVA_HOME": str(REPO / "tests" / "no_jvm")}
"""A process whose ``java`` refuses to start: a refusal that needs no JVM must not reach it."""


def assert_refused_before_spark(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    """Exit 2, one ``error: ...`` line on stderr naming what was wrong, no JVM started."""
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: "), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr
    assert "starting Spark" not in result.stderr
    assert "java" not in result.stderr.lower(), result.stderr


def test_an_option_is_never_read_as_a_longer_one_it_prefixes() -> None:
    """``--engine`` is not ``--engines`` (argparse's prefix matching is off everywhere)."""
    result = run("replay", "--plan", "P", "--engine", "correlation@2", "--dry-run", env=NO_JVM)
    assert_refused_before_spark(result, "unrecognized arguments: --engine correlation@2")
    result = run("replay", "--pla", "conf/plans/er-v2-recorrelation.yaml", "--dry-run", env=NO_JVM)
    assert_refused_before_spark(result, "--plan")


def test_version_names_the_package_spark_and_the_pinned_jars_without_a_jvm() -> None:
    from importlib.metadata import version

    result = run("--version", env=NO_JVM)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        f"lakehouse-replay {version('lakehouse-replay')} (Spark {version('pyspark')}, "
        "Delta Lake 4.4.0, Iceberg 1.11.0)\n"
    )
    assert result.stderr == ""


@pytest.mark.parametrize("where", ["before", "after", "split"])
def test_global_options_are_taken_before_or_after_the_command(tmp_path: Path, where: str) -> None:
    """``--json --workdir W`` before the command, after it, or some of each (the later wins)."""
    empty = tmp_path / "empty"
    command = ("erase", "--subject-email", "a@example.org", "--dry-run")
    options = ("--json", "--quiet", "--workdir", str(empty))
    argv = {
        "before": (*options, *command),
        "after": (*command, *options),
        "split": ("--json", "--workdir", str(tmp_path / "x"), *command, "--quiet", "--workdir", str(empty)),
    }[where]
    result = run(*argv, env=NO_JVM)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.splitlines()
    error = json.loads(line)
    assert error["exit_code"] == 2
    assert error["error"].startswith(f"no lakehouse in {empty}:"), error


def test_verbose_and_quiet_together_are_refused_wherever_they_are() -> None:
    result = run("--verbose", "tables", "--quiet", env=NO_JVM)
    assert_refused_before_spark(result, "--verbose and --quiet")


def test_engines_list_checks_every_fingerprint_without_spark(tmp_path: Path) -> None:
    result = run("engines", "list", "--json")
    assert result.returncode == 0, result.stderr
    listed = {e["engine"]: e["code"] for e in json.loads(result.stdout)["engines"]}
    assert listed == {
        "entity_resolution@1": "ok",
        "entity_resolution@2": "ok",
        "entity_resolution@3": "ok",
        "correlation@1": "ok",
        "correlation@2": "ok",
        "entity_daily@1": "ok",
        "baselines@1": "ok",
        "community@1": "ok",
    }
    assert "starting Spark" not in result.stderr

    shipped = (REPO / "conf" / "engines.yaml").read_text(encoding="utf-8")
    first = shipped.index("\n    code_fingerprint: ") + len("\n    code_fingerprint: ")
    tampered = tmp_path / "engines.yaml"
    tampered.write_text(shipped[:first] + "ab" * 32 + shipped[first + 64 :], encoding="utf-8")
    result = run("engines", "list", "--engines", str(tampered), "--json")
    assert result.returncode == 4, "a check found a problem (README: Exit codes)"
    codes = {e["engine"]: e["code"] for e in json.loads(result.stdout)["engines"]}
    assert [engine for engine, code in codes.items() if code != "ok"] == ["entity_resolution@1"]
    assert codes["entity_resolution@1"].startswith("CHANGED")


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ("min_confidence: 1.5", "min_confidence must be a number from 0 to 1, not 1.5"),
        ("min_confidence: -0.5", "min_confidence must be a number from 0 to 1, not -0.5"),
        ("method: louvain", "method must be one of label_propagation, connected_components, not 'louvain'"),
    ],
)
def test_a_community_release_s_bad_parameter_is_refused_before_a_jvm_starts(
    tmp_path: Path, declared: str, message: str
) -> None:
    shipped = (REPO / "conf" / "engines.yaml").read_text(encoding="utf-8")
    community = shipped.index("  - name: community\n")
    key = declared.split(":")[0]
    start = shipped.index(f"      {key}: ", community)
    end = shipped.index("\n", start)
    engines = tmp_path / "engines.yaml"
    engines.write_text(shipped[:start] + f"      {declared}" + shipped[end:], encoding="utf-8")
    lake = tmp_path / "lake"
    (lake / "warehouse").mkdir(parents=True)
    result = run("communities", "--engines", str(engines), "--workdir", str(lake), env=NO_JVM)
    assert_refused_before_spark(result, message)
    assert sorted(lake.rglob("*")) == [lake / "warehouse"], "nothing was written"


def tampered_engines(tmp_path: Path) -> Path:
    """The shipped engines file with entity_resolution@1's fingerprint changed."""
    shipped = (REPO / "conf" / "engines.yaml").read_text(encoding="utf-8")
    first = shipped.index("\n    code_fingerprint: ") + len("\n    code_fingerprint: ")
    tampered = tmp_path / "engines.yaml"
    tampered.write_text(shipped[:first] + "ab" * 32 + shipped[first + 64 :], encoding="utf-8")
    return tampered


def test_the_engines_and_policies_files_come_from_the_configuration_unless_given(tmp_path: Path) -> None:
    """``engines_file`` and ``policies_file`` in lakehouse.yaml (here through the environment):
    later commands need no ``--engines``/``--policies``; the flag still wins."""
    tampered = tampered_engines(tmp_path)
    configured = {**NO_JVM, "LAKEHOUSE__ENGINES_FILE": str(tampered)}
    result = run("engines", "list", "--json", env=configured)
    assert result.returncode == 4, result.stderr
    codes = {e["engine"]: e["code"] for e in json.loads(result.stdout)["engines"]}
    assert codes["entity_resolution@1"].startswith("CHANGED")
    shipped = run("engines", "list", "--json", "--engines", "conf/engines.yaml", env=configured)
    assert shipped.returncode == 0, shipped.stderr

    policies = tmp_path / "policies.yaml"
    text = (REPO / "conf" / "policies.yaml").read_text(encoding="utf-8")
    policies.write_text(text.replace("  silver_days: 2555", "  silver_days: -1"), encoding="utf-8")
    result = run(
        "maintain",
        "--workdir",
        str(tmp_path / "empty"),
        env={**NO_JVM, "LAKEHOUSE__POLICIES_FILE": str(policies)},
    )
    assert_refused_before_spark(result, str(policies), "retention.silver_days")


@pytest.mark.parametrize("instance", ["", "dev"])
def test_a_work_dir_s_own_engines_and_policies_files_are_read_when_no_other_is_named(
    tmp_path: Path, instance: str
) -> None:
    """After ``lakehouse demo`` the work dir holds ``engines.yaml`` (``engines-<instance>.yaml``):
    later commands on it read it with no flag. ``engines_file`` in the configuration, then
    ``--engines``, win over it; a work dir without one reads conf/engines.yaml. The same rule
    for ``policies.yaml``."""
    workdir = tmp_path / "lake"
    workdir.mkdir()
    suffix = f"-{instance}" if instance else ""
    tampered = tampered_engines(tmp_path)
    (workdir / f"engines{suffix}.yaml").write_bytes(tampered.read_bytes())
    env = {**NO_JVM, "LAKEHOUSE__INSTANCE": instance} if instance else NO_JVM

    def listed(*extra: str, environ: dict[str, str] = env) -> int:
        result = run("engines", "list", "--json", "--workdir", str(workdir), *extra, env=environ)
        return result.returncode

    assert listed() == 4, "the work dir's file: its tampered fingerprint is found"
    assert listed("--engines", "conf/engines.yaml") == 0, "the flag wins"
    assert listed(environ={**env, "LAKEHOUSE__ENGINES_FILE": "conf/engines.yaml"}) == 0, (
        "the configuration wins"
    )
    other = "other" if instance else "dev"
    assert listed(environ={**NO_JVM, "LAKEHOUSE__INSTANCE": other}) == 0, (
        "another instance's file is not read"
    )

    shipped = (REPO / "conf" / "policies.yaml").read_text(encoding="utf-8")
    policies = workdir / f"policies{suffix}.yaml"
    policies.write_text(shipped.replace("  silver_days: 2555", "  silver_days: -1"), encoding="utf-8")
    result = run("maintain", "--workdir", str(workdir), env=env)
    assert_refused_before_spark(result, str(policies), "retention.silver_days")


def test_an_invalid_plan_is_refused_with_the_key_before_spark_starts(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    shipped = (REPO / "conf" / "plans" / "er-v2-recorrelation.yaml").read_text(encoding="utf-8")
    plan.write_text(shipped.replace("rollback_window_days: 30", "rollback_window_dayz: 30"), encoding="utf-8")
    result = run("replay", "--plan", str(plan), "--dry-run")
    assert result.returncode == 2
    assert result.stderr.startswith("error: ")
    assert result.stderr.count("\n") == 1, result.stderr
    assert "rollback_window_dayz" in result.stderr
    assert "starting Spark" not in result.stderr


def test_reconcile_refuses_different_key_types_before_spark_starts(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run(
        "reconcile", "silver.events", "gold.training_sets", "--key", "label", "--workdir", str(tmp_path)
    )
    assert result.returncode == 2, result.stderr
    assert "key types differ" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert time.monotonic() - started < 60, "no JVM was started"
    assert not (tmp_path / "warehouse").exists()


def test_reindex_refuses_a_bucket_count_below_one_before_spark_starts() -> None:
    result = run("reindex", "--buckets", "0")
    assert result.returncode == 2
    assert result.stderr.startswith("error: ")
    assert result.stderr.count("\n") == 1, result.stderr
    assert "--buckets must be at least 1" in result.stderr
    assert "starting Spark" not in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("verify-publication", "not-a-run"), "RUN 'not-a-run' is not a replay run id"),
        (
            ("verify-publication", "replay-0123456789abcdef", "--engines", "missing-engines.yaml"),
            "missing-engines.yaml",
        ),
    ],
    ids=["run-id", "engines-file"],
)
def test_verify_refuses_bad_input_before_spark_starts(args: tuple[str, ...], message: str) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert result.stderr.startswith("error: ")
    assert result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr
    assert "starting Spark" not in result.stderr


WELL_FORMED_RUN = "replay-0123456789abcdef"
TRAINING_SET = "training-set-20261205T093836066482Z-f3f7bb58"
CERTIFICATE = "erasure-20261205T093836066482Z-0a1b2c3d"
"""A well-formed run id of another command (workloads.runs.new_run_id)."""
AT = "2026-11-29T12:00:00Z"
DECLARED = (
    "--implementation",
    "workloads.engines.correlation:correlate_v1",
    "--effective-from",
    "2027-01-01",
    "--description",
    "d",
)
"""The rest of a well-formed ``engines declare``."""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("asof", "gold.correlations", "--at", "yesterday"), "--at 'yesterday' is not an ISO-8601 timestamp"),
        (("asof", "silver.events", "--at", AT), "asof answers for Gold tables only; 'silver.events'"),
        (("asof", "gold.correlations", "--at", AT, "--where", "nope > 1"), "--where: unknown column 'nope'"),
        (("asof", "gold.correlations"), "asof needs --at TIMESTAMP"),
        (("asof", "gold.correlations", "--history"), "--history needs --entity ID"),
        (("asof", "gold.correlations", "--at", AT, "--workdir", "{empty}"), "no lakehouse in {empty}"),
        (
            ("asof", "gold.correlations", "--at", AT, "--workdir", "{empty}", "--reader", "pyiceberg"),
            "no lakehouse",
        ),
        (
            ("ingest", "--feed", "bogus"),
            "--feed 'bogus' is not a configured feed; known feeds: logins, orders",
        ),
        (("ingest", "--feed", "orders", "--source", "{lake}/nothing"), "{lake}/nothing: no such folder"),
        # several feeds: each is checked before any is ingested
        (("ingest", "--feed", "orders", "--feed", "bogus"), "--feed 'bogus' is not a configured feed"),
        (("ingest", "--feed", "all", "--feed", "orders"), "--feed all names every configured feed: give"),
        (("ingest", "--feed", "refunds", "--feed", "refunds"), "--feed 'refunds' is given twice"),
        (("ingest", "--feed", "all", "--source", "{lake}/nothing"), "{lake}/nothing: no such folder"),
        (("approve", "no-such-run", "--by", "x"), "RUN 'no-such-run' is not a replay run id"),
        (("approve", WELL_FORMED_RUN, "--by", "x", "--workdir", "{empty}"), "no lakehouse in {empty}"),
        (("approve", WELL_FORMED_RUN, "--by", "x"), f"no replay run '{WELL_FORMED_RUN}' in the ledger"),
        (("ack", "consumer", "no-such-run"), "RUN 'no-such-run' is not a replay run id"),
        (("publish", WELL_FORMED_RUN), f"no replay run '{WELL_FORMED_RUN}' in the ledger"),
        (("rollback", "replay-XYZ"), "RUN 'replay-XYZ' is not a replay run id"),
        (("verify-publication", WELL_FORMED_RUN), f"no replay run '{WELL_FORMED_RUN}' in the ledger"),
        (("ledger", "lineage", "gold.nope"), "unknown table 'gold.nope'; known tables:"),
        (("ledger", "show", "--kind", "nope"), "--kind 'nope' is not a ledger entry kind"),
        (("ledger", "show", "--run", "nope"), "--run 'nope' is not a run id"),
        (("ledger", "show", "--run", "replay-XYZ"), "--run 'replay-XYZ' is not a run id"),
        (
            ("ledger", "show", "--run", WELL_FORMED_RUN),
            f"--run {WELL_FORMED_RUN}: no such run in the ledger",
        ),
        (
            ("ledger", "show", "--run", TRAINING_SET, "--format", "delta"),
            f"--run {TRAINING_SET}: no such run in the ledger",
        ),
        (("ledger", "show", "--workdir", "{empty}"), "no lakehouse in {empty}"),
        (("ledger", "verify", "--workdir", "{empty}"), "no lakehouse in {empty}"),
        (("erase", "--dry-run"), "name the subject: --subject-email ADDRESS or --entity ID"),
        (
            ("build", "silver", "--since", "2025-03-01", "--until", "2025-02-01"),
            "--since 2025-03-01 must be before",
        ),
        (("build", "silver", "--policies", "{lake}/nope.yaml"), "{lake}/nope.yaml"),
        # a sub-action missing, unknown, or given an option of another
        (("engines",), "lakehouse engines: the following arguments are required: ACTION"),
        (("ledger", "bogus"), "lakehouse ledger: argument ACTION: invalid choice: 'bogus'"),
        (("hold",), "lakehouse hold: the following arguments are required: ACTION"),
        (("exceptions", "decide"), "lakehouse exceptions: argument ACTION: invalid choice: 'decide'"),
        (("build",), "lakehouse build: the following arguments are required: ACTION"),
        (("ledger", "show", "--history"), "lakehouse ledger show: unrecognized arguments: --history"),
        (("build", "gold", "--since", "2025-01-01"), "lakehouse build gold: unrecognized arguments: --since"),
        (("hold", "list", "LH-1"), "lakehouse hold list: unrecognized arguments: LH-1"),
        (
            ("engines", "declare", "--name", "x"),
            "required: --implementation, --effective-from, --description",
        ),
        (("engines", "fingerprint"), "lakehouse engines fingerprint: the following arguments are required"),
        # --engine: an engine release, NAME@VERSION, its shape and its declaration
        (("build", "silver", "--engine", "entity_resolution"), "argument --engine: expected NAME@VERSION"),
        (("build", "gold", "--engine", "correlation@x"), "argument --engine: expected NAME@VERSION"),
        (("build", "silver", "--engine", "entity_resolution@9"), "--engine entity_resolution@9: engine"),
        (
            ("stream", "--engine", "nope@1"),
            "--engine nope@1: engine 'nope' is not declared in conf/engines.yaml",
        ),
        (("stream", "--engine", "correlation"), "argument --engine: expected NAME@VERSION"),
        (("calibrate", "--engine", "correlation"), "argument --engine: expected NAME@VERSION"),
        (("calibrate", "--engine", "correlation@9"), "--engine correlation@9: engine correlation@9 is not"),
        (("score", "--engine", "fraud@scoring"), "argument --engine: expected NAME@VERSION or NAME"),
        (("score", "--engine", "nope"), "--engine nope: engine 'nope' is not declared"),
        (("calibration-at", "--at", AT, "--engine", "nope"), "--engine nope: engine 'nope' is not declared"),
        (
            ("calibration-at", "--at", AT, "--engine", "correlation@2"),
            "give NAME alone (--engine correlation)",
        ),
        (("calibration-at", "--at", "noon"), "--at 'noon' is not an ISO-8601 timestamp"),
        (("calibration-at", "--at", AT, "--workdir", "{empty}"), "no lakehouse in {empty}"),
        # other arguments that need no JVM to check
        (("ledger", "lineage", "gold.correlations", "--version", "-1"), "--version -1: a table version"),
        (("ledger", "lineage", "gold.correlations", "--workdir", "{empty}"), "no lakehouse in {empty}"),
        (("exceptions", "approve", "exc-1", "--by", "x"), "EXCEPTION_ID 'exc-1' is not an exception id"),
        (("exceptions", "list", "--workdir", "{empty}"), "no lakehouse in {empty}"),
        (("exceptions", "reject", "exc-0123456789abcdef", "--by", "x"), "--reason"),
        (
            ("exceptions", "approve", "exc-0123456789abcdef", "--by", "x"),
            "exception 'exc-0123456789abcdef': no such exception in ops.exceptions",
        ),
        (("hold", "release", "LH-1", "--by", "x", "--reason", "y"), "no placed hold 'LH-1'"),
        (("erase", "--verify", "cert-1"), "--verify 'cert-1' is not an erasure certificate id"),
        (("erase", "--verify", CERTIFICATE), f"no erasure certificate '{CERTIFICATE}' in the ledger"),
        (
            ("train", "--training-set", TRAINING_SET),
            f"--training-set {TRAINING_SET}: no such training set in the ledger",
        ),
        (("build", "silver", "--workdir", "{empty}"), "no lakehouse in {empty}"),
        (("build", "gold", "--workdir", "{empty}"), "no lakehouse in {empty}"),
        (
            ("hold", "add", "LH-1", "--by", "x", "--reason", "y"),
            "one of the arguments --subject-email --entity",
        ),
        (("reindex", "--workdir", "{empty}"), "no lakehouse in {empty}"),
        (("protect", "--workdir", "{empty}"), "no lakehouse in {empty}"),
        (
            ("replay", "--plan", "conf/plans/er-v2-recorrelation.yaml", "--workdir", "{empty}"),
            "no lakehouse in",
        ),
        (("replay", "--plan", "{lake}/nope.yaml"), "{lake}/nope.yaml"),
        (
            ("replay", "--plan", "conf/plans/er-v2-recorrelation.yaml", "--truth", "{lake}/t.json"),
            "{lake}/t.json",
        ),
        (("train", "--training-set", "gold.training_sets"), "argument --training-set: 'gold.training_sets'"),
        (("score", "--training-set", "latest"), "argument --training-set: 'latest' is not a training set id"),
        (("demo", "--entities", "0"), "argument --entities: expected a whole number of at least 1, got '0'"),
        (("communities", "--engine", "community@9"), "--engine community@9: "),
        (("communities", "--engine", "correlation@1"), "--engine correlation@1 is not a community release"),
        (("communities", "--truth", "{lake}/t.json"), "{lake}/t.json: labelled truth file not found"),
        (("engines", "declare", "--name", "a-b", *DECLARED), "--name 'a-b': an engine's name is a plain"),
        (
            ("engines", "declare", "--name", "x", "--implementation", "x", *DECLARED[2:]),
            "--implementation 'x'",
        ),
        (
            ("engines", "declare", "--name", "x", *DECLARED, "--param", "=1"),
            "--param '=1': expected KEY=VALUE",
        ),
        (
            ("engines", "declare", "--name", "community", *DECLARED, "--param", "min_confidence=1.5"),
            "--param: min_confidence must be a number from 0 to 1, not 1.5",
        ),
        (
            (
                "engines",
                "declare",
                "--name",
                "x",
                *DECLARED,
                "--engines",
                "{lake}/e.yaml",
                "--workdir",
                "{empty}",
            ),
            "no lakehouse in {empty}",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2_before_a_jvm_starts_and_writes_nothing(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    """Each refusal runs in a process whose ``java`` refuses to start, against a work dir
    whose lakehouse folder exists but holds nothing (no catalog, so no ledger): exit 2, one
    line naming the argument, and not a file more than before."""
    lake, empty = tmp_path / "lake", tmp_path / "empty"
    (lake / "warehouse").mkdir(parents=True)
    argv = [a.format(lake=lake, empty=empty) for a in args]
    if "--workdir" not in argv:
        argv += ["--workdir", str(lake)]
    result = run(*argv, env=NO_JVM)
    assert_refused_before_spark(result, message.format(lake=lake, empty=empty))
    assert sorted(tmp_path.rglob("*")) == [lake, lake / "warehouse"], "nothing was written"


def catalog_without_jvm(workdir: Path, table: str) -> tuple[Any, tuple[str, str]]:
    """The embedded Iceberg catalog of a lakehouse in ``workdir`` (made if missing), opened by
    pyiceberg (no JVM), and the identifier of ``table`` in it, its namespace created."""
    from lakehouse.catalog import iceberg_identifier, open_catalog
    from lakehouse.config import load_config
    from lakehouse.tables.registry import table_location, table_spec

    config = load_config(REPO / "conf" / "lakehouse.yaml", environ={}, overrides={"workdir": str(workdir)})
    (workdir / "warehouse").mkdir(parents=True, exist_ok=True)
    namespace, name = iceberg_identifier(
        table_location(config, table_spec(config, table, config.tables[table]))
    )
    catalog = open_catalog(config)
    catalog.create_namespace_if_not_exists(namespace)
    return catalog, (namespace, name)


def ledger_without_jvm(workdir: Path, run_id: str, *entries: Any) -> None:
    """A lakehouse whose Iceberg ledger (written by pyiceberg, no JVM) holds one entry of
    ``run_id``, then ``entries`` (ledger entries outside that run)."""
    from datetime import UTC, datetime

    import pyarrow as pa

    catalog, identifier = catalog_without_jvm(workdir, "ops.ledger")
    schema = pa.schema(
        [
            pa.field("seq", pa.int64(), nullable=False),
            pa.field("entry_id", pa.string(), nullable=False),
            pa.field("kind", pa.string(), nullable=False),
            pa.field("run_id", pa.string()),
            pa.field("recorded_at", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("body", pa.string(), nullable=False),
            pa.field("prev_hash", pa.string(), nullable=False),
            pa.field("hash", pa.string(), nullable=False),
            pa.field("schema_version", pa.int32(), nullable=False),
            pa.field("refs", pa.list_(pa.string())),
        ]
    )
    row = {
        "seq": 1,
        "entry_id": "e1",
        "kind": "run_started",
        "run_id": run_id,
        "recorded_at": datetime(2026, 1, 1, tzinfo=UTC),
        "body": "{}",
        "prev_hash": "0" * 64,
        "hash": "1" * 64,
        "schema_version": 2,
        "refs": [],
    }
    rows = [row]
    for seq, entry in enumerate(entries, start=2):
        rows.append(
            {
                **row,
                "seq": seq,
                "entry_id": f"e{seq}",
                "kind": entry.kind,
                "run_id": None,
                "body": entry.body(),
            }
        )
    catalog.create_table(identifier, schema=schema).append(pa.Table.from_pylist(rows, schema=schema))


def exceptions_without_jvm(workdir: Path, *rows: dict[str, Any]) -> None:
    """A lakehouse whose ``ops.exceptions`` queue (Iceberg, written by pyiceberg: no JVM) holds
    ``rows``, the configured schema's other columns left null."""
    import pyarrow as pa

    from lakehouse.config import load_config
    from workloads.asof.readers import ddl_fields
    from workloads.compliance.extract import arrow_schema

    config = load_config(REPO / "conf" / "lakehouse.yaml", environ={})
    schema = arrow_schema(ddl_fields(config.tables["ops.exceptions"].schema_ddl), [])
    catalog, identifier = catalog_without_jvm(workdir, "ops.exceptions")
    full = [{column: row.get(column) for column in schema.names} for row in rows]
    catalog.create_table(identifier, schema=schema).append(pa.Table.from_pylist(full, schema=schema))


def test_a_run_the_ledger_does_not_hold_is_refused_reading_the_ledger_without_a_jvm(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    ledger_without_jvm(lake, "replay-ffffffffffffffff")
    before = sorted(lake.rglob("*"))
    result = run("approve", WELL_FORMED_RUN, "--by", "x", "--workdir", str(lake), env=NO_JVM)
    assert_refused_before_spark(result, f"no replay run '{WELL_FORMED_RUN}' in the ledger")
    assert sorted(lake.rglob("*")) == before, "nothing was written"


def test_every_run_id_a_command_records_has_the_shape_ledger_show_accepts() -> None:
    from datetime import UTC, datetime

    from jobs.common import RUN_ID
    from workloads.runs import new_run_id

    now = datetime(2026, 12, 5, 9, 38, 36, 66482, tzinfo=UTC)
    for command in ("ingest-orders", "silver", "gold", "training-set", "erase", "index", "maintain"):
        assert RUN_ID.fullmatch(new_run_id(command, now, salt="x")), command
    assert RUN_ID.fullmatch(WELL_FORMED_RUN)
    for malformed in ("nope", "replay-XYZ", "Silver-20261205T093836066482Z-f3f7bb58", "silver-2026-f3f7bb58"):
        assert not RUN_ID.fullmatch(malformed), malformed


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_ledger_show_refuses_a_run_the_ledger_does_not_hold_reading_it_without_a_jvm(
    tmp_path: Path, as_json: bool
) -> None:
    """``ledger show --run RUN``: the ledger (Iceberg here, written by pyiceberg) is read with
    pyiceberg before a JVM starts; a run it does not hold is one line naming ``--run``, exit 2
    (one JSON line under ``--json``), and nothing is written. A run it holds passes the check
    and goes on to Spark (here the refusing ``java``)."""
    lake = tmp_path / "lake"
    ledger_without_jvm(lake, TRAINING_SET)
    before = sorted(lake.rglob("*"))
    json_flag = ["--json"] if as_json else []
    result = run("ledger", "show", "--run", WELL_FORMED_RUN, "--workdir", str(lake), *json_flag, env=NO_JVM)
    message = f"--run {WELL_FORMED_RUN}: no such run in the ledger"
    if as_json:
        assert result.returncode == 2, result.stderr
        (line,) = result.stderr.splitlines()
        assert json.loads(line) == {"error": message, "exit_code": 2}
        assert result.stdout == ""
    else:
        assert_refused_before_spark(result, message)
    assert sorted(lake.rglob("*")) == before, "nothing was written"

    held = run("ledger", "show", "--run", TRAINING_SET, "--workdir", str(lake), env=NO_JVM)
    assert "no such run" not in held.stderr, held.stderr
    assert "starting Spark" in held.stderr, "past the checks, the command asked for Spark"


def placed_hold(hold_id: str) -> Any:
    from datetime import UTC, datetime

    from ledger import LegalHold

    at = datetime(2026, 12, 1, tzinfo=UTC)
    return LegalHold(
        hold_id=hold_id, action="placed", by="counsel", reason="case", salt="00", subject_digest="ab", at=at
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("hold", "add", "LH-1", "--entity", "e1-0123456789abcdef", "--by", "x", "--reason", "y"),
            "hold LH-1 is already placed",
        ),
        (("hold", "release", "LH-2", "--by", "x", "--reason", "y"), "no placed hold 'LH-2'"),
        (("erase", "--verify", CERTIFICATE), f"no erasure certificate '{CERTIFICATE}' in the ledger"),
        (
            ("train", "--training-set", TRAINING_SET),
            f"--training-set {TRAINING_SET}: no such training set in the ledger",
        ),
        (("ledger", "show", "--run", TRAINING_SET), f"--run {TRAINING_SET}: no such run in the ledger"),
    ],
    ids=[
        "hold-add-placed",
        "hold-release-not-placed",
        "erase-verify",
        "train-training-set",
        "ledger-show-run",
    ],
)
def test_what_the_ledger_does_not_hold_is_refused_reading_it_without_a_jvm(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    """A ledger (Iceberg, written by pyiceberg) holding a replay run and hold LH-1, read before a
    JVM starts: a hold placed already, one not placed, a certificate, a training set or a run
    it does not hold is one line naming the argument, exit 2, nothing written."""
    lake = tmp_path / "lake"
    ledger_without_jvm(lake, WELL_FORMED_RUN, placed_hold("LH-1"))
    before = sorted(lake.rglob("*"))
    result = run(*args, "--workdir", str(lake), env=NO_JVM)
    assert_refused_before_spark(result, message)
    assert sorted(lake.rglob("*")) == before, "nothing was written"


@pytest.mark.parametrize(
    ("exception_id", "message"),
    [
        ("exc-00000000000000ff", "exception 'exc-00000000000000ff': no such exception in ops.exceptions"),
        ("exc-0000000000000002", "exception exc-0000000000000002: already rejected by risk at 2026-12-01"),
    ],
    ids=["unknown", "decided"],
)
def test_an_exception_the_queue_cannot_decide_is_refused_reading_it_without_a_jvm(
    tmp_path: Path, exception_id: str, message: str
) -> None:
    """``exceptions approve``: the queue (ops.exceptions, Iceberg, written by pyiceberg) is read
    before a JVM starts; an id it does not hold, or one decided already, is one line, exit 2. An
    exception awaiting approval passes the check and goes on to Spark (the refusing ``java``)."""
    from datetime import UTC, datetime

    lake = tmp_path / "lake"
    decided = datetime(2026, 12, 1, tzinfo=UTC)
    exceptions_without_jvm(
        lake,
        {"exception_id": "exc-0000000000000001", "status": "awaiting_approval"},
        {
            "exception_id": "exc-0000000000000002",
            "status": "rejected",
            "decided_by": "risk",
            "decided_at": decided,
        },
    )
    before = sorted(lake.rglob("*"))
    result = run("exceptions", "approve", exception_id, "--by", "x", "--workdir", str(lake), env=NO_JVM)
    assert_refused_before_spark(result, message)
    assert sorted(lake.rglob("*")) == before, "nothing was written"

    waiting = run(
        "exceptions", "approve", "exc-0000000000000001", "--by", "x", "--workdir", str(lake), env=NO_JVM
    )
    assert "starting Spark" in waiting.stderr, waiting.stderr


HELD_ENTITY = "e1-00000000000000aa"


def hold_on(hold_id: str, key: str) -> Any:
    """Hold ``hold_id`` placed on ``key`` (an address as resolvers key it, or an entity id)."""
    from workloads.compliance.scan import identifier_digest

    return placed_hold(hold_id).model_copy(update={"subject_digest": identifier_digest("00", key)})


@pytest.mark.parametrize(
    ("subject", "hold_id"),
    [
        (("--subject-email", " Held@Example.org "), "LH-1"),
        (("--entity", HELD_ENTITY), "LH-2"),
    ],
    ids=["email", "entity"],
)
def test_an_erasure_of_a_held_subject_is_refused_reading_the_ledger_without_a_jvm(
    tmp_path: Path, subject: tuple[str, str], hold_id: str
) -> None:
    """``erase``: the ledger (Iceberg, written by pyiceberg) is read before a JVM starts; a
    subject a placed hold covers (the address as resolvers key it, or the entity id) is one
    line naming the hold, exit 2, nothing written. Another subject passes the check and goes
    on to Spark (the refusing ``java``); so does a dry run of the held one (it writes nothing)."""
    lake = tmp_path / "lake"
    ledger_without_jvm(
        lake, WELL_FORMED_RUN, hold_on("LH-1", "held@example.org"), hold_on("LH-2", HELD_ENTITY)
    )
    before = sorted(lake.rglob("*"))
    request = ("--request", "REQ-1", "--reason", "art. 17")
    result = run("erase", *subject, *request, "--workdir", str(lake), env=NO_JVM)
    assert_refused_before_spark(result, f"legal hold {hold_id}", "nothing was erased")
    assert sorted(lake.rglob("*")) == before, "nothing was written"

    for args in (("--subject-email", "free@example.org", *request), (*subject, "--dry-run")):
        passed = run("erase", *args, "--workdir", str(lake), env=NO_JVM)
        assert "legal hold" not in passed.stderr, passed.stderr
        assert "starting Spark" in passed.stderr, passed.stderr


@pytest.mark.parametrize(
    ("args", "old", "new", "message"),
    [
        (("training-set", "--as-of", "2026-01-01T00:00:00"), "--as-of", "--at", "--at '2026-01-01T00:00:00'"),
        (
            ("training-set", "--from", "2025-03-01", "--until", "2025-02-01"),
            "--from",
            "--since",
            "--since 2025-03-01",
        ),
        (
            ("calibrate", "--engine", "correlation@1", "--as-of", "2999-01-01T00:00:00Z"),
            "--as-of",
            "--at",
            "--at 2999",
        ),
        (
            ("calibrate", "--engine", "correlation@1", "--from", "2025-03-01", "--until", "2025-02-01"),
            "--from",
            "--since",
            "--since",
        ),
        (("calibration", "--at", "noon"), "lakehouse calibration", "lakehouse calibration-at", "--at 'noon'"),
        (("verify", "not-a-run"), "lakehouse verify", "lakehouse verify-publication", "RUN 'not-a-run'"),
    ],
    ids=[
        "training-set-as-of",
        "training-set-from",
        "calibrate-as-of",
        "calibrate-from",
        "command-calibration",
        "command-verify",
    ],
)
def test_an_old_spelling_is_read_as_the_new_one_with_a_deprecation_line(
    tmp_path: Path, args: tuple[str, ...], old: str, new: str, message: str
) -> None:
    """One name per meaning (``--at``: knowledge time, ``--since``/``--until``: a range;
    ``calibration-at`` reads, ``calibrate`` measures; ``verify-publication``, not the chain's
    ``ledger verify``); the old spellings work for one release. Here each value is refused,
    under its new name."""
    result = run(*args, "--workdir", str(tmp_path / "empty"), env=NO_JVM)
    assert result.returncode == 2, result.stderr
    warning, error = result.stderr.splitlines()
    assert warning == f"warning: {old} is deprecated: use {new} (the old spelling goes in the next release)"
    assert error.startswith(f"error: {message}"), error
    assert "starting Spark" not in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("erase", "--subject-email", "a@example.org", "--dry-run"),
        ("hold", "list"),
        ("hold", "add", "LH-1", "--subject-email", "a@example.org", "--by", "counsel", "--reason", "case"),
        ("maintain", "--dry-run"),
        ("extract", "gold.correlations", "--at", "2026-11-29T12:00:00Z", "--out", "x"),
    ],
    ids=["erase", "hold-list", "hold-add", "maintain", "extract"],
)
def test_a_work_dir_without_a_lakehouse_says_how_to_make_one_before_spark_starts(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    result = run(*args, "--workdir", str(tmp_path / "empty"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "no lakehouse in" in result.stderr
    assert "lakehouse demo, or generate + ingest + build" in result.stderr
    assert "starting Spark" not in result.stderr
    assert not (tmp_path / "empty" / "warehouse").exists(), "nothing was created"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda text: text.replace("  owner: data-platform", "  owner: ''"), "maintenance.owner"),
        (lambda text: text.replace("  silver_days: 2555", "  silver_days: -1"), "retention.silver_days"),
        (
            lambda text: text.replace("compact_min_small_files: 8", "compact_min_small_files: many"),
            "compact_min",
        ),
    ],
    ids=["owner", "retention", "threshold"],
)
def test_maintain_refuses_a_bad_policy_naming_the_key_before_spark_starts(
    tmp_path: Path, edit: Any, message: str
) -> None:
    policies = tmp_path / "policies.yaml"
    shipped = (REPO / "conf" / "policies.yaml").read_text(encoding="utf-8")
    policies.write_text(edit(shipped), encoding="utf-8")
    assert policies.read_text(encoding="utf-8") != shipped
    result = run("maintain", "--policies", str(policies), "--workdir", str(tmp_path / "empty"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr
    assert str(policies) in result.stderr
    assert "starting Spark" not in result.stderr


def test_missing_config_is_one_line_and_nonzero(tmp_path: Path) -> None:
    result = run("tables", "--conf", str(tmp_path / "missing.yaml"))
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "missing.yaml: configuration file not found" in result.stderr


def test_bad_key_in_config_is_one_line_naming_the_key(tmp_path: Path) -> None:
    conf = tmp_path / "bad.yaml"
    conf.write_text("sparkk: {}\n")
    result = run("demo", "--conf", str(conf))
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: {conf}: unknown key 'sparkk'; remove it or check its spelling"


def test_submit_args_json_names_packages_and_catalogs() -> None:
    result = run("submit-args", "--json")
    assert result.returncode == 0, result.stderr
    args = json.loads(result.stdout)["args"]
    packages = args[args.index("--packages") + 1]
    assert "io.delta:delta-spark_4.1_2.13" in packages
    assert "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13" in packages
    confs = [args[i + 1] for i, a in enumerate(args) if a == "--conf"]
    assert "spark.sql.catalog.lake=org.apache.iceberg.spark.SparkCatalog" in confs
    assert "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog" in confs


SECRET = "n0t-shown-7f3a"


def catalog_env(uri: str, password: str = SECRET) -> dict[str, str]:
    """The environment of a user whose Iceberg catalog is JDBC on PostgreSQL."""
    return {
        **os.environ,
        "LAKEHOUSE__ICEBERG__URI": uri,
        "LAKEHOUSE__ICEBERG__USER": "iceberg",
        "LAKEHOUSE__ICEBERG__PASSWORD": password,
    }


def test_a_catalog_server_that_is_down_is_one_line_exit_3_and_nothing_written(tmp_path: Path) -> None:
    """PostgreSQL down: ``ingest`` would write Bronze (Delta, no catalog needed) before the ledger
    (Iceberg): the command stops before Spark starts, so neither a Bronze table nor a ledger
    entry nor the work dir itself exists afterwards; ``build silver`` on a lakehouse writes
    nothing in it."""
    from local_services.ports import free_port

    deliveries = tmp_path / "history"
    made = run("generate", "--out", str(deliveries), "--entities", "3", "--months", "1", "--quiet")
    assert made.returncode == 0, made.stderr
    assert any((deliveries / "orders").iterdir())
    uri = f"jdbc:postgresql://127.0.0.1:{free_port()}/iceberg"  # nothing listens, as after a server stops
    workdir = tmp_path / "lake"
    for args, lakehouse in (
        (("ingest", "--feed", "orders", "--source", str(deliveries)), False),
        (("build", "silver"), True),  # build refuses a work dir without a lakehouse first (exit 2)
    ):
        if lakehouse:
            (workdir / "warehouse").mkdir(parents=True)
        result = run(
            *args, "--workdir", str(workdir), "--quiet", env=catalog_env(uri + f"?password={SECRET}")
        )
        assert result.returncode == 3, (args, result.stderr)
        assert result.stderr.count("\n") == 1, result.stderr
        assert result.stderr.startswith(f"error: Iceberg catalog 'lake' at {uri}?password=*** is unreachable")
        assert "Connection refused" in result.stderr
        assert SECRET not in result.stderr + result.stdout
        assert workdir.exists() == lakehouse, f"{args[0]} made the work dir"
        written = sorted(workdir.rglob("*"))
        assert written == ([workdir / "warehouse"] if lakehouse else []), f"{args[0]} wrote {written}"


def test_a_refused_catalog_password_is_exit_3_naming_the_uri_not_the_password(
    tmp_path: Path, postgres_server: Any
) -> None:
    result = run(
        "tables", "--workdir", str(tmp_path / "lake"), "--json", env=catalog_env(postgres_server.jdbc_uri)
    )
    assert result.returncode == 3, result.stderr
    error = json.loads(result.stderr.strip())
    assert error["exit_code"] == 3
    assert postgres_server.jdbc_uri in error["error"]
    assert 'password authentication failed for user "iceberg"' in error["error"]
    assert SECRET not in result.stderr
    assert postgres_server.password not in result.stderr
    assert not (tmp_path / "lake").exists()


def test_submit_args_for_a_postgresql_catalog_add_its_driver_and_never_the_password() -> None:
    result = run("submit-args", "--json", env=catalog_env("jdbc:postgresql://catalog-db:5432/iceberg"))
    assert result.returncode == 0, result.stderr
    args = json.loads(result.stdout)["args"]
    assert any(
        p.startswith("org.postgresql:postgresql:") for p in args[args.index("--packages") + 1].split(",")
    )
    assert "spark.sql.catalog.lake.uri=jdbc:postgresql://catalog-db:5432/iceberg" in args
    assert "spark.sql.catalog.lake.jdbc.user=iceberg" in args
    assert SECRET not in result.stdout
    assert "password" not in result.stdout


@pytest.mark.slow
@pytest.mark.spark
def test_a_job_runs_under_spark_submit_with_the_cli_arguments(tmp_path: Path) -> None:
    """`spark-submit jobs/tables.py ...` behaves like `lakehouse tables ...`."""
    submit = Path(sys.executable).with_name("spark-submit")
    args = json.loads(run("submit-args", "--json", "--workdir", str(tmp_path)).stdout)["args"]
    # The packages are already in the local cache; pass them as jars so no network is needed.
    from lakehouse.config import load_config
    from lakehouse.jars import cached_jars

    config = load_config(REPO / "conf" / "lakehouse.yaml", environ={})
    jars = cached_jars(config.jar_cache_path, config.jars.packages, config.jars.excludes)
    assert jars, "run `make jars` first"
    confs = [a for i, a in enumerate(args) if i > 0 and args[i - 1] == "--conf"]
    command = [str(submit), "--master", "local[1]", "--jars", ",".join(map(str, jars))]
    for conf in confs:
        command += ["--conf", conf]
    command += ["jobs/tables.py", "--json", "--workdir", str(tmp_path)]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    result = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, env=env, timeout=600, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    tables = json.loads(result.stdout)["tables"]
    assert {t["name"] for t in tables} >= {"bronze.orders", "silver.events", "gold.correlations"}
    assert all(t["exists"] is False for t in tables)


def _unused_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_master_is_one_line_naming_it_and_exit_3_before_spark_starts(tmp_path: Path) -> None:
    url = f"spark://127.0.0.1:{_unused_port()}"
    env = {**os.environ, "LAKEHOUSE__SPARK__MASTER": url}
    result = run("tables", "--json", "--workdir", str(tmp_path), env=env)
    assert result.returncode == 3, result.stderr
    (line,) = result.stderr.strip().splitlines()
    error = json.loads(line)
    assert error["exit_code"] == 3
    assert error["error"].startswith(f"the Spark master {url} is unreachable ("), error


SUBJECT_ARGS = ("--subject-email", "a@example.org")
ENTITY = "e1-0123456789abcdef"


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("--subject-email", "x' OR '1'='1", "--dry-run"), "--subject-email"),
        (("--subject-email", "a@b.c; DROP TABLE x", "--dry-run"), "--subject-email"),
        (("--subject-email", "\u0430lice@example.org", "--dry-run"), "--subject-email"),
        (("--subject-email", "alice\uff20example.org", "--dry-run"), "--subject-email"),
        (("--subject-email", "a\u200b@example.org", "--dry-run"), "--subject-email"),
        (("--subject-email", "a\x1b[2J@example.org", "--dry-run"), "--subject-email"),
        (("--subject-email", "a" * 3988 + "@example.org", "--dry-run"), "--subject-email"),
        (("--subject-email", "", "--dry-run"), "--subject-email"),
        (("--subject-email", "   ", "--dry-run"), "--subject-email"),
        (("--entity", "x' OR '1'='1", "--dry-run"), "--entity"),
        (("--entity", "e1-%", "--dry-run"), "--entity"),
        (("--entity", "", "--dry-run"), "--entity"),
        (("--entity", "e" * 4000, "--request", "REQ-1", "--reason", "art. 17"), "--entity"),
        (("--entity", "redacted:erasure-x", "--dry-run"), "--entity"),
        ((*SUBJECT_ARGS, "--request", "", "--dry-run"), "--request"),
        ((*SUBJECT_ARGS, "--request", "REQ\n-1", "--reason", "art. 17"), "--request"),
        ((*SUBJECT_ARGS, "--request", "r" * 4000, "--reason", "art. 17"), "--request"),
        (("--entity", ENTITY, "--request", "REQ-1", "--reason", " "), "--reason"),
        (("--entity", ENTITY, "--request", "REQ-1", "--reason", "art.\u200b17"), "--reason"),
        (("--entity", ENTITY, "--request", "REQ-1", "--reason", "r" * 4000), "--reason"),
        (("--verify", ""), "--verify"),
    ],
    ids=[
        "email-sql-quote",
        "email-sql-drop",
        "email-cyrillic",
        "email-fullwidth-at",
        "email-zero-width",
        "email-control",
        "email-4000",
        "email-empty",
        "email-blank",
        "entity-sql",
        "entity-wildcard",
        "entity-empty",
        "entity-4000",
        "entity-redacted",
        "request-empty",
        "request-newline",
        "request-4000",
        "reason-blank",
        "reason-zero-width",
        "reason-4000",
        "verify-empty",
    ],
)
def test_erase_refuses_a_hostile_subject_before_a_jvm_starts_and_writes_nothing(
    tmp_path: Path, args: tuple[str, ...], flag: str
) -> None:
    """Issue 37 item 3: one ``error:`` line naming the flag (the value not echoed), exit 2, no JVM,
    and no file more in a work dir that would otherwise be checked for a lakehouse."""
    lake = tmp_path / "lake"
    (lake / "warehouse").mkdir(parents=True)
    result = run("erase", *args, "--workdir", str(lake), env=NO_JVM)
    assert_refused_before_spark(result, f"error: {flag} ")
    assert len(result.stderr) < 300, "the hostile value is not echoed"
    assert sorted(tmp_path.rglob("*")) == [lake, lake / "warehouse"], "nothing was written"


@pytest.mark.parametrize(
    "args",
    [
        (
            "--subject-email",
            " A%B_c@Example.org ",
            "--request",
            "x' OR '1'='1",
            "--reason",
            "a@b.c; DROP TABLE x",
        ),
        ("--entity", ENTITY, "--request", "REQ-7", "--reason", 'Art. 17 – "Löschung", 50% _done_'),
    ],
    ids=["email-with-wildcards", "entity"],
)
def test_erase_binds_quotes_sql_and_wildcards_as_data_and_reaches_the_lakehouse_check(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    """Accepted values pass every argument check: the next refusal is the missing lakehouse."""
    result = run("erase", *args, "--workdir", str(tmp_path / "empty"), env=NO_JVM)
    assert_refused_before_spark(result, "no lakehouse in")
    assert not (tmp_path / "empty").exists()


def test_generate_holds_back_a_feed_and_refuses_a_bad_hold_before_writing(tmp_path: Path) -> None:
    """``generate --hold-back FEED``: the feed's newest deliveries (3 days by default) go to
    ``OUT/_held/FEED``, listed in the JSON summary and named in the text; moved back, they are the
    files a plain run writes. An unknown feed or ``--hold-back-days 0`` is one line, exit 2,
    nothing written (no JVM: ``generate`` never starts one)."""
    plain_out, held_out = tmp_path / "plain", tmp_path / "held"
    size = ("--entities", "5", "--months", "1", "--quiet")
    assert run("generate", "--out", str(plain_out), *size, env=NO_JVM).returncode == 0
    made = run("generate", "--out", str(held_out), *size, "--hold-back", "orders", "--json", env=NO_JVM)
    assert made.returncode == 0, made.stderr
    held = json.loads(made.stdout)["held"]
    from datetime import date, timedelta

    dates = sorted(date.fromisoformat(p.name) for p in (plain_out / "orders").iterdir())
    last_days = [d.isoformat() for d in dates if d > dates[-1] - timedelta(days=3)]
    assert held["feed"] == "orders"
    assert held["deliveries"] == last_days, "every delivery of the feed's last 3 days"
    assert held["newest"] == dates[-1].isoformat()
    assert sorted(p.name for p in (held_out / "_held" / "orders").iterdir()) == held["deliveries"]
    assert not set(held["deliveries"]) & {p.name for p in (held_out / "orders").iterdir()}
    text = run("generate", "--out", str(tmp_path / "text"), *size[:-1], "--hold-back", "logins", env=NO_JVM)
    assert "deliveries of logins" in text.stdout, text.stdout
    for name in held["deliveries"]:
        (held_out / "_held" / "orders" / name).rename(held_out / "orders" / name)

    def files(root: Path) -> dict[str, bytes]:
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}

    assert files(held_out) == files(plain_out), "released, the history is the one a plain run writes"

    for args, message in (
        (("--hold-back", "nope"), "argument --hold-back: invalid choice: 'nope'"),
        (("--hold-back", "orders", "--hold-back-days", "0"), "--hold-back-days must be at least 1, not 0"),
    ):
        out = tmp_path / "refused"
        result = run("generate", "--out", str(out), *size, *args, env=NO_JVM)
        assert_refused_before_spark(result, message)
        assert not out.exists(), "nothing written"


def test_ingest_checks_every_named_feed_s_folder_before_a_jvm_starts(tmp_path: Path) -> None:
    """``ingest --feed orders --feed refunds`` (and ``--feed all``) on a history that holds the
    orders folder only: the refunds folder's absence is the one line, exit 2, before orders is
    ingested or anything is written."""
    lake, history = tmp_path / "lake", tmp_path / "history"
    (lake / "warehouse").mkdir(parents=True)
    (history / "orders" / "2025-01-01").mkdir(parents=True)
    before = sorted(tmp_path.rglob("*"))
    for feeds in (("--feed", "orders", "--feed", "refunds"), ("--feed", "all")):
        result = run("ingest", *feeds, "--source", str(history), "--workdir", str(lake), env=NO_JVM)
        assert_refused_before_spark(result, f"{history} is neither the history root (it has no 'refunds'")
    assert sorted(tmp_path.rglob("*")) == before, "nothing was written"
