"""The exceptions queue through the command line: held late orders approved into Silver as
adjustments, or rejected with a reason, on the shipped mixed-format default (the queue and
the ledger in Delta, Silver in Iceberg).

One history, built once by the module fixture the way a user builds it: the
generator plants late orders for closed periods (orders' policy is ``hold``), the feeds
are ingested and Silver is built with ``lakehouse ingest`` / ``lakehouse build silver``,
then ``lakehouse exceptions list|approve|reject`` decide on the queue, with the refusals a
user meets along the way (exit 2, nothing written), and a later ``build silver`` that must
keep the approved fact exactly once. Commands run in this process through
:func:`jobs.cli.main` (the Spark session is shared).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lakehouse.config import LakehouseConfig, load_config
from lakehouse.digest import canonical_hash
from lakehouse.tables import TableRegistry
from ledger import RunFinished, RunStarted, SystemClock, open_ledger
from tests.cli_runner import instance_env, run_cli
from tests.conftest import drop_all
from workloads.synthetic.generator import GeneratorSettings, generate
from workloads.vocabulary import FEEDS, ExceptionStatus, Lateness, TableName

REPO = Path(__file__).resolve().parents[3]
CONF = REPO / "conf" / "lakehouse.yaml"
APPROVER = "risk-lead"
REJECTION = "customer cancelled before the period closed"
# 20 persons over 3 months with a higher fault rate: the forced plan's held order and a
# randomly drawn one, so one can be approved and one rejected (checked in the fixture)
SETTINGS = GeneratorSettings(entities=20, months=3, seed=7, fault_rate=0.05)


@dataclass(frozen=True)
class Step:
    """One command: its exit code, its stdout (parsed when JSON) and its stderr."""

    code: int
    data: Any
    stderr: str


class Runner:
    """Runs ``lakehouse ...`` in this process against the module's instance."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self.workdir, self.env = workdir, env

    def __call__(self, *args: str, json_out: bool = True) -> Step:
        argv = [*args, "--conf", str(CONF), "--workdir", str(self.workdir)]
        argv += ["--quiet", "--json"] if json_out else ["--quiet"]
        ran = run_cli(argv, self.env)
        data = json.loads(ran.stdout) if json_out and ran.code == 0 and ran.stdout.strip() else ran.stdout
        return Step(ran.code, data, ran.stderr)


@dataclass(frozen=True)
class Queue:
    """The module's history: the runner, a registry on its tables, the truth and steps."""

    run: Runner
    registry: TableRegistry
    held_truth: tuple[dict[str, Any], ...]
    steps: dict[str, Step]

    def rows(self, table: str) -> list[dict[str, Any]]:
        return [r.asDict() for r in self.registry.get(table).read().collect()]

    def versions(self) -> dict[str, int | None]:
        names = (TableName.SILVER_EVENTS, TableName.EXCEPTIONS, TableName.QUARANTINE, "ops.ledger")
        return {name: self.registry.get(name).current_version() for name in names}


@pytest.fixture(scope="module")
def queue(
    spark_session: Any,
    lakehouse_config: LakehouseConfig,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Queue]:
    env = instance_env(f"exc{uuid.uuid4().hex[:6]}")
    workdir = lakehouse_config.workdir_path
    config = load_config(CONF, environ=env, overrides={"workdir": str(workdir)})
    registry = TableRegistry(spark_session, config)
    deliveries = tmp_path_factory.mktemp("exceptions") / "history"
    generate(deliveries, SETTINGS)
    truth = json.loads((deliveries / "_ground_truth.json").read_text(encoding="utf-8"))
    held = tuple(f for f in truth["faults"] if f["expected_fate"] == "exceptions")
    assert len(held) >= 2, "the history must hold two late orders: one to approve, one to reject"

    run = Runner(workdir, env)
    steps: dict[str, Step] = {}
    for feed in FEEDS:
        steps[f"ingest-{feed}"] = run("ingest", "--feed", feed, "--source", str(deliveries))
    steps["build-silver"] = run("build", "silver")
    yield Queue(run, registry, held, steps)
    drop_all(registry)


def queued(q: Queue, status: str | None = None) -> list[dict[str, Any]]:
    step = q.run("exceptions", "list", *(["--status", status] if status else []))
    assert step.code == 0, step.stderr
    rows: list[dict[str, Any]] = step.data
    return rows


def started(q: Queue, run_id: str) -> RunStarted:
    ledger = open_ledger(q.registry, clock=SystemClock())
    (entry,) = [
        e for e in ledger.reader.entries(kind="run_started", run_id=run_id) if isinstance(e, RunStarted)
    ]
    return entry


def finished(q: Queue, run_id: str) -> RunFinished:
    ledger = open_ledger(q.registry, clock=SystemClock())
    (entry,) = [
        e for e in ledger.reader.entries(kind="run_finished", run_id=run_id) if isinstance(e, RunFinished)
    ]
    return entry


def refused(q: Queue, *args: str) -> str:
    """Run a command that must be refused: exit 2, one line on stderr, nothing written."""
    before = q.versions()
    step = q.run(*args, json_out=False)
    assert step.code == 2, (args, step.data, step.stderr)
    assert step.stderr.startswith("error: "), step.stderr
    assert step.stderr.count("\n") == 1, step.stderr
    assert q.versions() == before, f"{args} wrote something"
    return step.stderr


@pytest.mark.spark
@pytest.mark.slow
def test_held_orders_are_queued_with_an_id_and_awaiting_approval(queue: Queue) -> None:
    assert all(step.code == 0 for step in queue.steps.values()), {
        name: step.stderr for name, step in queue.steps.items() if step.code
    }
    rows = queued(queue)
    assert {(r["domain"], r["event_id"]) for r in rows} == {
        (f["feed"], f["event_id"]) for f in queue.held_truth
    }
    assert {r["status"] for r in rows} == {ExceptionStatus.AWAITING_APPROVAL}
    assert all(r["exception_id"].startswith("exc-") and len(r["exception_id"]) == 20 for r in rows)
    assert len({r["exception_id"] for r in rows}) == len(rows)
    assert all(r["decided_by"] is None and r["decided_at"] is None for r in rows)
    silver_ids = {r["event_id"] for r in queue.rows(TableName.SILVER_EVENTS)}
    assert not silver_ids & {r["event_id"] for r in rows}

    people = queue.run("exceptions", "list", json_out=False)
    assert people.code == 0
    header = next(line for line in people.data.splitlines() if "exception_id" in line)
    assert header.split() == [
        "exception_id",
        "domain",
        "event_id",
        "period",
        "status",
        "event_time",
        "decided_by",
        "decided_at",
        "decision_reason",
    ]
    assert all(r["exception_id"] in people.data for r in rows)


@pytest.mark.spark
@pytest.mark.slow
def test_refusals_before_spark_name_the_argument(queue: Queue) -> None:
    some_id = queued(queue)[0]["exception_id"]
    assert "EXCEPTION_ID" in refused(queue, "exceptions", "approve", "--by", APPROVER)
    assert "--by" in refused(queue, "exceptions", "approve", some_id)
    assert "--by" in refused(queue, "exceptions", "approve", some_id, "--by", "  ")
    assert "--reason" in refused(queue, "exceptions", "reject", some_id, "--by", APPROVER)
    assert "--status" in refused(
        queue, "exceptions", "approve", some_id, "--by", APPROVER, "--status", "approved"
    )
    assert "exceptions list: unrecognized arguments" in refused(queue, "exceptions", "list", some_id)
    assert "invalid choice" in refused(queue, "exceptions", "list", "--status", "maybe")
    unknown = refused(queue, "exceptions", "approve", "exc-0000000000000000", "--by", APPROVER)
    assert "exception 'exc-0000000000000000': no such exception in ops.exceptions" in unknown
    assert {r["status"] for r in queued(queue)} == {ExceptionStatus.AWAITING_APPROVAL}


@pytest.mark.spark
@pytest.mark.slow
def test_approve_one_reject_one_then_rebuild(queue: Queue) -> None:
    awaiting = queued(queue, ExceptionStatus.AWAITING_APPROVAL)
    # approve the forced plan's held order, reject another one
    first = min(awaiting, key=lambda r: r["event_id"])
    second = next(r for r in awaiting if r["exception_id"] != first["exception_id"])
    held_before = {r["exception_id"]: r for r in queue.rows(TableName.EXCEPTIONS)}

    # -- approve: in Silver as an adjustment, in a recorded run naming the approver -------
    approved = queue.run("exceptions", "approve", first["exception_id"], "--by", APPROVER)
    assert approved.code == 0, approved.stderr
    assert approved.data["decision"] == ExceptionStatus.APPROVED
    assert approved.data["decided_by"] == APPROVER
    run_id = approved.data["run_id"]
    assert run_id.startswith("exception-")

    row = {r["exception_id"]: r for r in queue.rows(TableName.EXCEPTIONS)}[first["exception_id"]]
    assert (row["status"], row["decided_by"], row["decision_run_id"]) == (
        ExceptionStatus.APPROVED,
        APPROVER,
        run_id,
    )
    assert row["decision_reason"] is None
    decided_at = datetime.fromisoformat(approved.data["decided_at"])
    approval_day = decided_at.astimezone(UTC).date()
    assert approved.data["accounting_date"] == approval_day.isoformat()

    silver = queue.rows(TableName.SILVER_EVENTS)
    (fact,) = [r for r in silver if (r["domain"], r["event_id"]) == (first["domain"], first["event_id"])]
    assert fact["lateness"] == Lateness.ADJUSTMENT
    assert fact["accounting_date"] == approval_day
    assert fact["event_time"] == held_before[first["exception_id"]]["event_time"]  # event time stays true
    assert fact["event_month"] == first["period"]
    assert fact["event_date"] < approval_day
    assert (fact["_manifest_id"], fact["_source_file"], fact["_line"]) == (
        row["_manifest_id"],
        row["_source_file"],
        row["_line"],
    )
    assert fact["entity_id"] is not None
    # its followers (settlements, refunds, outcomes of this order) now resolve through it
    followers = [r for r in silver if r["order_id"] == fact["event_id"] and r["domain"] != "orders"]
    assert all(r["entity_id"] == fact["entity_id"] for r in followers)

    entry = started(queue, run_id)
    assert entry.purpose == "exception"
    assert entry.command == f"exceptions approve {first['exception_id']}"
    assert entry.parameters["by"] == APPROVER
    assert entry.parameters["decision"] == ExceptionStatus.APPROVED
    assert entry.parameters["exception_id"] == first["exception_id"]
    assert [e.name for e in entry.engines] == ["entity_resolution"]
    assert TableName.EXCEPTIONS in entry.inputs
    done = finished(queue, run_id)
    assert done.status == "ok"
    assert set(done.outputs) >= {TableName.SILVER_EVENTS, TableName.EXCEPTIONS}

    # -- conservation: the approved fact counted once, in Silver, no longer held ---------
    balances = approved.data["silver"]["conservation"]
    assert all(b["balanced"] for b in balances)
    assert sum(b["held"] for b in balances) == len(awaiting) - 1
    by_manifest = {b["manifest_id"]: b for b in balances}
    manifest = by_manifest[row["_manifest_id"]]
    assert manifest["silver"] == sum(r["_manifest_id"] == row["_manifest_id"] for r in silver)
    still_held = [
        r
        for r in queue.rows(TableName.EXCEPTIONS)
        if r["_manifest_id"] == row["_manifest_id"] and r["status"] != ExceptionStatus.APPROVED
    ]
    assert manifest["held"] == len(still_held)

    # -- reject: stays out of Silver, with its reason -------------------------------------
    rejected = queue.run(
        "exceptions", "reject", second["exception_id"], "--by", APPROVER, "--reason", REJECTION
    )
    assert rejected.code == 0, rejected.stderr
    assert rejected.data["decision"] == ExceptionStatus.REJECTED
    assert rejected.data["silver"] is None
    row = {r["exception_id"]: r for r in queue.rows(TableName.EXCEPTIONS)}[second["exception_id"]]
    assert (row["status"], row["decided_by"], row["decision_reason"]) == (
        ExceptionStatus.REJECTED,
        APPROVER,
        REJECTION,
    )
    assert row["decided_at"] is not None
    entry = started(queue, rejected.data["run_id"])
    assert (entry.purpose, entry.parameters["by"], entry.parameters["reason"]) == (
        "exception",
        APPROVER,
        REJECTION,
    )
    assert not any(r["event_id"] == second["event_id"] for r in queue.rows(TableName.SILVER_EVENTS))

    # -- the queue by status ---------------------------------------------------------------
    assert [r["exception_id"] for r in queued(queue, ExceptionStatus.APPROVED)] == [first["exception_id"]]
    assert [r["exception_id"] for r in queued(queue, ExceptionStatus.REJECTED)] == [second["exception_id"]]
    assert len(queued(queue, ExceptionStatus.AWAITING_APPROVAL)) == len(awaiting) - 2

    # -- a decision is final: refused, one line, exit 2, nothing written ------------------
    again = refused(queue, "exceptions", "approve", first["exception_id"], "--by", "someone-else")
    assert f"exception {first['exception_id']}: already approved by {APPROVER}" in again
    assert "already approved" in refused(
        queue, "exceptions", "reject", first["exception_id"], "--by", APPROVER, "--reason", "late"
    )
    assert "already rejected" in refused(
        queue, "exceptions", "approve", second["exception_id"], "--by", APPROVER
    )

    # -- a later Silver build keeps the approved fact once, and holds nothing again -------
    silver_hash = canonical_hash(queue.registry.get(TableName.SILVER_EVENTS).read())
    queue_hash = canonical_hash(queue.registry.get(TableName.EXCEPTIONS).read())
    rebuilt = queue.run("build", "silver")
    assert rebuilt.code == 0, rebuilt.stderr
    assert rebuilt.data["exceptions_added"] == 0
    assert all(b["balanced"] for b in rebuilt.data["conservation"])
    assert sum(b["held"] for b in rebuilt.data["conservation"]) == len(awaiting) - 1
    assert canonical_hash(queue.registry.get(TableName.SILVER_EVENTS).read()) == silver_hash
    assert canonical_hash(queue.registry.get(TableName.EXCEPTIONS).read()) == queue_hash
    after = queue.rows(TableName.SILVER_EVENTS)
    assert sum(r["event_id"] == first["event_id"] for r in after) == 1
    assert sum(r["event_id"] == second["event_id"] for r in after) == 0


def test_decision_arguments_are_checked_without_spark() -> None:
    from jobs.cli import ArgumentsRefused, build_parser
    from jobs.exceptions import check_arguments
    from lakehouse.errors import UsageError

    parser = build_parser(only="exceptions")
    some = "exc-0123456789abcdef"
    check_arguments(parser.parse_args(["exceptions", "list", "--status", "approved"]))
    check_arguments(parser.parse_args(["exceptions", "approve", some, "--by", "a"]))
    check_arguments(parser.parse_args(["exceptions", "reject", some, "--by", "a", "--reason", "r"]))
    for argv, field in (
        (["exceptions", "approve", "exc-1", "--by", "a"], "EXCEPTION_ID 'exc-1' is not an exception id"),
        (["exceptions", "reject", some, "--reason", "r"], "--by"),
        (["exceptions", "reject", some, "--by", "a", "--reason", " "], "--reason"),
    ):
        with pytest.raises(UsageError, match=field):
            check_arguments(parser.parse_args(argv))
    for argv, field in (  # each sub-action is a subcommand: argparse refuses what it does not take
        (["exceptions", "approve", "--by", "a"], "EXCEPTION_ID"),
        (["exceptions", "list", some], f"unrecognized arguments: {some}"),
        (["exceptions", "approve", some, "--status", "approved"], "unrecognized arguments: --status"),
    ):
        with pytest.raises(ArgumentsRefused, match=field):
            parser.parse_args(argv)
