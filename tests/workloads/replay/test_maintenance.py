"""Routine table maintenance, run as a platform team runs it, must not break replay, rollback or
audit; where an aggressive one removes history anyway, every command degrades clearly.

One story on the shipped mixed default, where both formats meet in one history (Delta Bronze:
the open run's pins; Iceberg Silver and Gold: the published version and its rollback target),
built through the product: a corrected history is published, and a comparison replay dies
after its candidate (a run that can still resume). What each format's primitives do under
its own maintenance (tags, kept history, readability, what removed a version) is tested per
format in ``tests/lakehouse/test_tables.py``. Then:

0. **The product's own maintenance**, ``lakehouse maintain`` with no history kept by any zone
   and every table worth compacting: a dry run writes nothing; under a legal hold nothing is
   expired; after it, small files are compacted and old history expired in both formats,
   while the published answer table (in its rollback window, with an open candidate) is not
   compacted and every version the ledger protects stays. Every check below runs after it.
1. **The formats' own maintenance, by plain Spark SQL** (not the project's code): Iceberg's
   ``expire_snapshots`` of every snapshot older than now (stronger than its defaults) on
   every Iceberg table; Delta's ``VACUUM`` with default settings, and ``RETAIN 0 HOURS``,
   which Delta's own check refuses. Afterwards a dry run, ``ledger verify --history``,
   ``asof`` route (b), the open replay's dry run on its pins, a rollback and a
   re-publication all still work.
2. **An aggressive maintenance**, after Silver moved on past the open run's pin: every tag
   dropped and every snapshot expired; Delta's check turned off, ``OPTIMIZE`` and
   ``VACUUM RETAIN 0 HOURS``. The open run loses its pins. Then: the
   published plan's dry run says so (exit 0, nothing written); the resume is refused with
   the table, the version and what removed it (exit 2) and ``--rebuild`` starts a new run
   on the current versions; the rollback is refused naming the version and the rule that
   should have kept it (exit 2); ``ledger verify --history`` names what is gone (exit 4);
   ``asof`` route (b) says the history is gone while route (a) answers. Nothing refused
   wrote anything.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lakehouse.config import TableFormat, load_config
from lakehouse.errors import InjectedFailure
from lakehouse.tables import Table
from ledger.clock import FixedClock
from ledger.entries import RunStarted
from ledger.reader import LedgerReader
from tests.cli_runner import Ran, instance_env, run_cli
from tests.conftest import Lakehouse, drop_all
from tests.replay_history import GOLD, LATER_EVENTS, PLAN, build, declared_engines, plan_with, seed_inputs
from workloads.asof import AsOfAnswer, SparkReader, asof
from workloads.replay import ack, approve, publish, rollback, run_replay
from workloads.replay.faults import FailPoint
from workloads.replay.plan import Purpose
from workloads.replay.state import run_state

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]
CONF = REPO / "conf" / "lakehouse.yaml"
CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"


@dataclass(frozen=True)
class Maintenance:
    """What one pass of the formats' own maintenance did."""

    iceberg_tables: int
    tags_dropped: int
    delta_tables: int
    delta_refusals: int
    """``VACUUM ... RETAIN 0 HOURS`` statements Delta's own check refused."""


def plain_maintenance(lh: Lakehouse, *, aggressive: bool) -> Maintenance:
    """Maintenance as a platform team runs it: plain Spark SQL on every table, none of our code.

    Gentle: Iceberg expires every snapshot older than now (keeping the last); Delta vacuums with
    its defaults and tries ``RETAIN 0 HOURS`` (refused by its check). Aggressive: Iceberg's tags
    are dropped first; Delta's check is turned off, Silver and Bronze are compacted, and
    ``VACUUM RETAIN 0 HOURS`` runs.
    """
    spark: Any = lh.spark
    iceberg, delta, dropped, refused = 0, 0, 0, 0
    time.sleep(1.1)  # expire_snapshots takes whole seconds: let every snapshot be older than now
    for table in lh.registry:
        if not table.exists():
            continue
        if table.format is TableFormat.ICEBERG:
            iceberg += 1
            if aggressive:
                tags = spark.sql(f"SELECT name FROM {table.sql_name}.`refs` WHERE type = 'TAG'").collect()
                for row in tags:
                    spark.sql(f"ALTER TABLE {table.sql_name} DROP TAG `{row['name']}`")
                    dropped += 1
            catalog, namespace, name = table.location.split(".")
            spark.sql(
                f"CALL `{catalog}`.system.expire_snapshots(table => '{namespace}.{name}', "
                f"older_than => TIMESTAMP '{datetime.now(UTC):%Y-%m-%d %H:%M:%S}', retain_last => 1)"
            )
            continue
        delta += 1
        if not aggressive:
            spark.sql(f"VACUUM {table.sql_name}")
            try:
                spark.sql(f"VACUUM {table.sql_name} RETAIN 0 HOURS")
            except Exception as exc:
                refused += "RETENTION_PERIOD_TOO_SHORT" in str(exc)
            continue
        if table.name != GOLD:  # compaction elsewhere: the answer table stays as published
            spark.sql(f"OPTIMIZE {table.sql_name}")
        spark.conf.set(CHECK, "false")
        try:
            spark.sql(f"VACUUM {table.sql_name} RETAIN 0 HOURS")
        finally:
            spark.conf.unset(CHECK)
    return Maintenance(iceberg, dropped, delta, refused)


@dataclass(frozen=True)
class ProductMaintenance:
    """``lakehouse maintain`` on the story: a dry run, a run under a legal hold, a run after it."""

    steps: dict[str, Ran]
    dry_run_wrote: tuple[int, int]
    """Ledger entries and table versions that changed across the dry run (both 0 to pass)."""
    entries: list[Any]
    """The ``maintenance`` ledger entries afterwards."""
    finished: list[Any]
    """The ``run_finished`` entries of the maintenance runs."""


def retention_free_policies(folder: Path) -> Path:
    """The shipped policies with no history kept by any zone, and every table of two or more
    files worth compacting: the strongest maintenance the product will run."""
    import yaml

    policies = yaml.safe_load((REPO / "conf" / "policies.yaml").read_text())
    policies["retention"] = dict.fromkeys(policies["retention"], 0)
    policies["maintenance"].update(target_file_bytes=1 << 30, compact_min_small_files=2)
    path = folder / "policies-no-retention.yaml"
    path.write_text(yaml.safe_dump(policies))
    return path


def product_maintenance(lh: Lakehouse, cli: Runner, policies: Path) -> ProductMaintenance:
    reader = LedgerReader.for_registry(lh.registry)

    def versions() -> dict[str, int | None]:
        return {t.name: t.current_version() for t in lh.registry if t.exists()}

    entries, tables = len(reader.records()), versions()
    steps = {"dry-run": cli("maintain", "--dry-run", "--policies", str(policies))}
    moved = sum(v != tables.get(k) for k, v in versions().items())
    wrote = (len(reader.records()) - entries, moved)
    hold = ("--by", "counsel", "--reason", "case 9")
    steps["hold"] = cli("hold", "add", "LH-9", "--subject-email", "held@example.org", *hold)
    time.sleep(1.1)  # every version is older than the run's cutoff (now, with no retention)
    steps["held"] = cli("maintain", "--policies", str(policies))
    steps["release"] = cli("hold", "release", "LH-9", *hold)
    steps["maintain"] = cli("maintain", "--policies", str(policies))
    records = reader.records()
    runs = {r.run_id for r in records if r.kind == "maintenance"}
    finished = [r.entry() for r in records if r.kind == "run_finished" and r.run_id in runs]
    done = [r.entry() for r in records if r.kind == "maintenance"]
    return ProductMaintenance(steps, wrote, done, finished)


class Runner:
    """``lakehouse ...`` in this process, on the story's work dir and instance."""

    def __init__(self, workdir: Path, env: dict[str, str], engines: Path) -> None:
        self.workdir, self.env, self.engines = workdir, env, engines

    def __call__(self, *args: str, engines: bool = False) -> Ran:
        argv = [*args, "--conf", str(CONF), "--workdir", str(self.workdir), "--quiet", "--json"]
        argv += ["--engines", str(self.engines)] if engines else []
        return run_cli(argv, self.env)


def data(ran: Ran) -> Any:
    return json.loads(ran.stdout)


def error(ran: Ran) -> str:
    return str(json.loads(ran.stderr.strip().splitlines()[-1])["error"])


@dataclass(frozen=True)
class Story:
    run_id: str
    before_replay: datetime
    published_version: int
    gentle: Maintenance
    gentle_steps: dict[str, Ran]
    route_b_gentle: AsOfAnswer
    rolled_back: Any
    republished: Any
    open_run: str
    open_pin: int
    product: ProductMaintenance
    aggressive: Maintenance
    aggressive_steps: dict[str, Ran]
    route_b_aggressive: AsOfAnswer
    abandoned_status: str
    ledger_entries_around_refusals: tuple[int, int]
    gold_versions_around_refusals: tuple[int | None, int | None]


def die_after_candidate(lh: Lakehouse, engines: Any, clock: Any) -> str:
    """A comparison replay that dies after building its candidate: it can still resume."""
    plan = plan_with(Purpose.COMPARISON)
    with pytest.raises(InjectedFailure) as failed:
        run_replay(lh.registry, plan, engines=engines, clock=clock, fail_at=FailPoint.AFTER_CANDIDATE)
    return str(failed.value).split(" in replay ", 1)[1].split(";", 1)[0]


@pytest.fixture(scope="module")
def story(
    spark_session: Any,
    lakehouse_config: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Story]:
    env = instance_env(f"mnt{uuid.uuid4().hex[:6]}")
    workdir = lakehouse_config.workdir_path
    lh = Lakehouse(spark_session, load_config(CONF, environ=env, overrides={"workdir": str(workdir)}))
    folder = tmp_path_factory.mktemp("maintenance")
    engines = declared_engines(folder)
    cli = Runner(workdir, env, folder / "engines.yaml")
    registry = lh.registry
    # the command line records on the machine's clock: the story's clock runs just before it
    clock = FixedClock(datetime.now(UTC) - timedelta(hours=1), step=timedelta(seconds=1))
    try:
        build(lh, clock, folder / "history", pin_v1=True)
        before_replay = clock.now()
        out = run_replay(registry, plan_with(), engines=engines, clock=clock)
        approve(registry, out.run_id, by="risk-lead", clock=clock)
        for consumer in ("analytics", "fraud-ops"):
            ack(registry, consumer, out.run_id, by="bot", clock=clock)
        published = publish(registry, out.run_id, clock=clock)
        open_run = die_after_candidate(lh, engines, clock)
        started = LedgerReader.for_registry(registry).by_run(open_run)[0]
        assert isinstance(started, RunStarted)
        open_pin = started.inputs["silver.events"].version

        product = product_maintenance(lh, cli, retention_free_policies(folder))
        gentle = plain_maintenance(lh, aggressive=False)
        gentle_steps = {
            "dry-run": cli("replay", "--plan", str(PLAN), "--dry-run", engines=True),
            "resume-dry-run": cli(
                "replay", "--plan", str(PLAN), "--purpose", "comparison", "--dry-run", engines=True
            ),
            "verify": cli("ledger", "verify", "--history"),
            "protect": cli("protect", "--dry-run"),
        }
        route_b_gentle = asof(SparkReader(registry), GOLD, before_replay, known_tables=registry.names())
        rolled_back = rollback(registry, out.run_id, clock=clock)
        republished = publish(registry, out.run_id, clock=clock)
        seed_inputs(lh, LATER_EVENTS)  # Silver moves on: the open run's pin is no longer current
        aggressive = plain_maintenance(lh, aggressive=True)

        gold: Table = registry.get(GOLD)
        entries_before = len(LedgerReader.for_registry(registry).records())
        gold_before = gold.current_version()
        aggressive_steps = {
            "dry-run": cli("replay", "--plan", str(PLAN), "--dry-run", engines=True),
            "resume-dry-run": cli(
                "replay", "--plan", str(PLAN), "--purpose", "comparison", "--dry-run", engines=True
            ),
            "resume": cli("replay", "--plan", str(PLAN), "--purpose", "comparison", engines=True),
            "rollback": cli("rollback", out.run_id),
        }
        entries_after = len(LedgerReader.for_registry(registry).records())
        gold_after = gold.current_version()
        aggressive_steps["verify"] = cli("ledger", "verify", "--history")
        aggressive_steps["rebuild-dry-run"] = cli(
            "replay", "--plan", str(PLAN), "--purpose", "comparison", "--dry-run", "--rebuild", engines=True
        )
        aggressive_steps["rebuild"] = cli(
            "replay", "--plan", str(PLAN), "--purpose", "comparison", "--rebuild", engines=True
        )
        aggressive_steps["protect"] = cli("protect")
        route_b_aggressive = asof(SparkReader(registry), GOLD, before_replay, known_tables=registry.names())
        abandoned_status = run_state(open_run, LedgerReader.for_registry(registry).by_run(open_run)).status
        yield Story(
            run_id=out.run_id,
            before_replay=before_replay,
            published_version=published.version,
            gentle=gentle,
            gentle_steps=gentle_steps,
            route_b_gentle=route_b_gentle,
            rolled_back=rolled_back,
            republished=republished,
            open_run=open_run,
            open_pin=open_pin,
            product=product,
            aggressive=aggressive,
            aggressive_steps=aggressive_steps,
            route_b_aggressive=route_b_aggressive,
            abandoned_status=abandoned_status,
            ledger_entries_around_refusals=(entries_before, entries_after),
            gold_versions_around_refusals=(gold_before, gold_after),
        )
    finally:
        drop_all(registry)


def test_the_formats_own_maintenance_ran_and_delta_refused_what_would_break_history(story: Story) -> None:
    gentle = story.gentle
    assert gentle.iceberg_tables > 0
    assert gentle.delta_tables > 0
    assert gentle.delta_refusals == gentle.delta_tables, "Delta's own check refuses VACUUM RETAIN 0 HOURS"


def test_lakehouse_maintain_dry_run_says_what_it_would_do_and_writes_nothing(story: Story) -> None:
    ran = story.product.steps["dry-run"]
    assert ran.code == 0, ran.stderr
    report = data(ran)
    assert report["dry_run"] is True
    assert report["run_id"] is None
    assert story.product.dry_run_wrote == (0, 0), "(ledger entries, table versions) written by a dry run"
    planned = {t["table"]: t for t in report["tables"]}
    assert planned[GOLD]["compact"] is False, "the published answer table is in its rollback window"
    assert any(t["compact"] for t in planned.values())
    assert any(t["expire_before"] for t in planned.values())


def test_lakehouse_maintain_expires_nothing_under_a_legal_hold_and_names_it(story: Story) -> None:
    steps = story.product.steps
    assert steps["hold"].code == 0
    assert steps["release"].code == 0
    ran = steps["held"]
    assert ran.code == 0, ran.stderr
    report = data(ran)
    assert all(t["expire_before"] is None for t in report["tables"])
    assert report["holds"] == ["LH-9 (placed by counsel)"]
    kept = [why for t in report["tables"] for why in t["kept"]]
    assert any("legal hold LH-9" in why for why in kept), kept
    assert all(t["stored_files_after"] >= t["stored_files_before"] for t in report["tables"])


def test_lakehouse_maintain_compacts_and_expires_but_keeps_what_the_ledger_and_candidates_need(
    story: Story,
) -> None:
    ran = story.product.steps["maintain"]
    assert ran.code == 0, ran.stderr
    report = data(ran)
    tables = {t["table"]: t for t in report["tables"]}
    gold = tables[GOLD]
    assert gold["owner"] == "data-platform", "the policy's owner, for a table that declares none"
    assert {t["owner"] for name, t in tables.items() if name.startswith("bronze.")} == {"ingestion"}
    assert gold["compacted_to"] is None
    assert any("rollback-target by run " + story.run_id in why for why in gold["kept"]), gold["kept"]
    assert any("open candidate" in why for why in gold["kept"]), gold["kept"]
    compacted = [t for t in tables.values() if t["compacted_to"] is not None]
    assert compacted, tables
    assert all(t["live_files_after"] < t["live_files_before"] for t in compacted)
    freed = [t for t in tables.values() if t["stored_files_after"] < t["stored_files_before"]]
    assert "iceberg" in {t["format"] for t in freed}, "Iceberg expired history older than 0 days"
    pinned = [
        t
        for t in tables.values()
        if t["format"] == "delta" and any(f"pinned by run {story.open_run}" in why for why in t["kept"])
    ]
    assert pinned, "Delta has no tags: the open run's Bronze pins keep the vacuum's cutoff back"
    assert all(t["stored_files_after"] >= t["stored_files_before"] for t in pinned), pinned
    entries = {e.run_id: e for e in story.product.entries}
    assert set(entries) == {data(story.product.steps["held"])["run_id"], report["run_id"]}
    recorded = entries[report["run_id"]]
    assert recorded.owner == "data-platform"
    assert {t: m.compacted_to for t, m in recorded.tables.items() if m.compacted_to is not None} == {
        t["table"]: t["compacted_to"] for t in compacted
    }
    outputs = [{t: o.version for t, o in f.outputs.items()} for f in story.product.finished]
    assert {t["table"]: t["compacted_to"] for t in compacted} in outputs, (
        "compacted versions are served from now on"
    )


def test_after_routine_maintenance_dry_runs_verify_asof_replay_and_rollback_still_work(story: Story) -> None:
    steps = story.gentle_steps
    assert steps["dry-run"].code == 0, steps["dry-run"].stderr
    assert data(steps["dry-run"])["run_id"] == story.run_id
    assert data(steps["dry-run"])["version"] == story.published_version
    resume = steps["resume-dry-run"]
    assert resume.code == 0, resume.stderr
    assert "resumed" in data(resume)["inputs_route"]
    verify = steps["verify"]
    assert verify.code == 0, verify.stderr
    history = data(verify)["history"]
    assert history["gone"] == []
    assert history["checked"] >= 3  # the published version, its rollback target, the open run's pins
    protected = {(p["reason"], p["table"]) for p in data(steps["protect"])["protections"]}
    assert {("published", GOLD), ("rollback-target", GOLD), ("pinned", "silver.events")} <= protected
    route_b = story.route_b_gentle.route_b
    assert route_b.available, route_b.note
    assert story.route_b_gentle.routes_agree is True
    assert story.rolled_back.to_version != story.rolled_back.from_version
    assert story.republished.status == "published"


def test_a_published_plan_says_so_and_writes_nothing_even_when_its_pins_are_gone(story: Story) -> None:
    ran = story.aggressive_steps["dry-run"]
    assert ran.code == 0, ran.stderr
    answer = data(ran)
    assert answer["run_id"] == story.run_id
    assert answer["version"] == story.republished.version


def test_a_resume_whose_pins_were_removed_names_them_and_rebuild_starts_on_current_versions(
    story: Story,
) -> None:
    steps = story.aggressive_steps
    assert story.aggressive.tags_dropped > 0 or story.aggressive.iceberg_tables == 0
    for name in ("resume-dry-run", "resume"):
        ran = steps[name]
        assert ran.code == 2, (name, ran.stdout, ran.stderr)
        message = error(ran)
        assert "\n" not in message
        assert f"run {story.open_run} cannot resume" in message
        assert f"silver.events@{story.open_pin} is gone" in message
        assert ("expire_snapshots" in message) or ("VACUUM" in message), message
        assert "--rebuild" in message
    scope = steps["rebuild-dry-run"]
    assert scope.code == 0, scope.stderr
    assert f"the pins of run {story.open_run} are gone" in data(scope)["inputs_route"]
    rebuilt = steps["rebuild"]
    assert rebuilt.code == 0, rebuilt.stderr
    assert data(rebuilt)["status"] == "compared"
    assert data(rebuilt)["run_id"] != story.open_run
    assert story.abandoned_status == "abandoned", "the given-up run never resumes again"


def test_a_rollback_whose_target_is_gone_is_refused_naming_the_version_and_the_policy(story: Story) -> None:
    ran = story.aggressive_steps["rollback"]
    assert ran.code == 2, ran.stderr
    message = error(ran)
    assert f"version {story.republished.previous}" in message
    assert "rollback_window_days = 30" in message
    assert story.ledger_entries_around_refusals[0] == story.ledger_entries_around_refusals[1]
    assert story.gold_versions_around_refusals[0] == story.gold_versions_around_refusals[1]


def test_verify_history_names_every_needed_version_that_is_gone(story: Story) -> None:
    ran = story.aggressive_steps["verify"]
    assert ran.code == 4, ran.stderr
    gone = {(g["table"], g["version"]): g for g in data(ran)["history"]["gone"]}
    rollback_target = gone[(GOLD, story.republished.previous)]
    assert any(r.startswith("rollback-target") for r in rollback_target["reasons"])
    assert ("silver.events", story.open_pin) in gone
    assert data(ran)["chain"]["ok"] is True


def test_asof_route_b_says_the_history_is_gone_and_route_a_still_answers(story: Story) -> None:
    answer = story.route_b_aggressive
    assert answer.route_b.available is False
    assert "history for T is gone" in answer.route_b.note
    assert answer.route_a.available
    assert answer.route_a.rows == story.route_b_gentle.route_a.rows


def test_protect_drops_the_tags_of_finished_runs_and_names_what_it_cannot_tag(story: Story) -> None:
    ran = story.aggressive_steps["protect"]
    assert ran.code == 0, ran.stderr
    tables = {t["table"]: t for t in data(ran)["tables"]}
    assert story.republished.previous in tables[GOLD]["gone"], "the rollback target cannot be tagged again"
    dropped = [tag for t in tables.values() for tag in t["tags_dropped"]]
    assert dropped, "the rebuilt comparison's pins were tagged at its start; compared, it needs none"
    assert all(tag.startswith("lh-pinned-") for tag in dropped), dropped
