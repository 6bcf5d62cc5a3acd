"""``make cluster-demo``: the whole story, job by job, on a real Spark standalone cluster here.

1. Start a master and one worker on 127.0.0.1 (:mod:`local_services.spark_standalone`).
2. Build the distributable: a zip of ``lakehouse``, ``ledger``, ``workloads`` and ``jobs`` for
   ``--py-files`` (``--py-files`` takes ``.py``/``.zip``/``.egg``, not wheels). The worker runs
   on this host, so its executors use the project venv's interpreter
   (``spark.pyspark.python``); a cluster of other machines ships a packed venv instead
   (``venv-pack`` + ``--archives``, docs/deployment.md).
3. Write the cluster's lakehouse configuration (``conf/lakehouse.yaml`` with the work dir
   under this run's folder, and the Iceberg catalog: SQLite under the work dir, or
   PostgreSQL) and submit every command of the story with ``spark-submit --master
   spark://...``, the arguments ``lakehouse submit-args --conf <it>`` prints, and the
   cluster's own layout (``--py-files``, the interpreter, event logs).
4. Prove executors did the work: the master's ``/json/`` (applications FINISHED), the
   worker's ``/json/`` (executors per application) and each application's event log (tasks
   per executor; the driver runs none in a cluster). A job whose executors ran no task fails
   the demo.
5. Bad input: a master nobody listens at (one line naming it, exit 3); the worker killed in
   the middle of a Silver build and started again (Spark retries, or the run is recorded
   failed, serving is untouched and a rerun completes).

The cluster is stopped at the end, also on failure and on Ctrl-C. Exit 0 when every check
held, 1 otherwise. Not part of the product: nothing in the product imports this module.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from local_services.ports import free_port
from local_services.spark_standalone import ClusterSettings, StandaloneCluster, spark_home

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("lakehouse", "ledger", "workloads", "jobs")
"""What the distributable holds: the product's four layers."""
PLAN = "conf/plans/er-v3-recorrelation.yaml"
JOB_TIMEOUT_S = 900.0
SHORT_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
DRILL_KILL_AFTER_JOBS = 10
"""The worker is killed once the Silver build's application has finished this many Spark jobs."""


# -- the distributable -------------------------------------------------------------------------


def build_py_files(out: Path) -> Path:
    """A zip of the product's packages for ``--py-files`` (sorted entries, fixed times: the
    same tree gives the same bytes)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for package in PACKAGES:
            for path in sorted((REPO / package).rglob("*")):
                if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".pyc":
                    continue
                info = zipfile.ZipInfo(str(path.relative_to(REPO)), date_time=(2026, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, path.read_bytes())
    return out


# -- the cluster's lakehouse configuration -------------------------------------------------------


def write_config(out: Path, workdir: Path, overrides: Mapping[str, str] | None = None) -> Path:
    """``conf/lakehouse.yaml`` with this run's work dir, 2 shuffle partitions (2 cores) and the
    given dotted-key overrides (the Iceberg catalog's ``iceberg.uri`` and so on)."""
    raw = yaml.safe_load((REPO / "conf" / "lakehouse.yaml").read_text())
    settings = {"workdir": str(workdir), "spark.shuffle_partitions": 2, **(overrides or {})}
    for dotted, value in settings.items():
        *parents, key = dotted.split(".")
        node = raw
        for part in parents:
            node = node.setdefault(part, {})
        node[key] = value
    out.write_text(yaml.safe_dump(raw, sort_keys=False))
    return out


# -- submitting ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Submitted:
    """One ``spark-submit``: what ran, how it ended, and the applications it registered."""

    step: str
    args: tuple[str, ...]
    exit_code: int
    seconds: float
    data: Any
    """Its ``--json`` output (None when it printed none)."""
    error: str
    """The last line of its stderr when it failed."""
    apps: tuple[str, ...] = ()


class Submitter:
    """``spark-submit --master URL <lakehouse submit-args> <the cluster's layout> jobs/X.py ARGS``."""

    def __init__(
        self,
        master: str,
        conf: Path,
        root: Path,
        py_files: Path,
        submit_args: Sequence[str],
        secrets: Mapping[str, str] | None = None,
    ) -> None:
        self.master = master
        self.secrets = dict(secrets or {})
        """Environment every driver gets (the catalog's password)."""
        self.conf = conf
        self.logs = root / "logs"
        self.events = root / "events"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.events.mkdir(parents=True, exist_ok=True)
        self.submit_args = list(submit_args)
        self.py_files = py_files
        self._count = 0

    def layout_args(self) -> list[str]:
        """What this cluster needs beyond the lakehouse's own arguments."""
        from lakehouse.config import JarSettings
        from lakehouse.session import LOG4J_CONFIG

        cache = Path(JarSettings().cache_dir).expanduser()
        quiet = f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}"
        conf = {
            # the same host: the project venv serves the driver and the executors
            "spark.pyspark.python": sys.executable,
            # evidence of who ran what, read after each job (plain JSON lines, one file an app)
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": self.events.as_uri(),
            "spark.eventLog.compress": "false",
            "spark.eventLog.rolling.enabled": "false",
            "spark.ui.enabled": "false",
            # short-lived JVMs on 2 shared cores: one GC thread, and the quick JIT only
            "spark.driver.extraJavaOptions": f"{quiet} {SHORT_JVM}",
            "spark.executor.extraJavaOptions": f"{quiet} {SHORT_JVM}",
            "spark.executor.memory": "1g",
            # --packages resolves into the cache `make setup` filled, not a second copy in ~/.ivy2
            "spark.jars.ivy": str(cache),
            "spark.jars.ivySettings": str(cache / "ivysettings.xml"),
        }
        args = ["--py-files", str(self.py_files)]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        return args

    def command(self, job: str, args: Sequence[str], master: str | None = None) -> list[str]:
        submit = str(spark_home() / "bin" / "spark-submit")
        head = [submit, "--master", master or self.master, *self.submit_args, *self.layout_args()]
        return [*head, f"jobs/{job}.py", *args, "--conf", str(self.conf), "--json", "--quiet"]

    def start(self, step: str, job: str, args: Sequence[str], master: str | None = None) -> Running:
        self._count += 1
        stem = self.logs / f"{self._count:02d}-{step}"
        env = {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
            "LAKEHOUSE__SPARK__APP_NAME": f"lakehouse-{step}",
            **self.secrets,
        }
        out, err = stem.with_suffix(".out").open("wb"), stem.with_suffix(".err").open("wb")
        process = subprocess.Popen(
            self.command(job, args, master),
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        return Running(step, tuple(args), process, stem, time.monotonic(), (out, err))


@dataclass
class Running:
    """A submission in flight."""

    step: str
    args: tuple[str, ...]
    process: subprocess.Popen[bytes]
    stem: Path
    started: float
    files: tuple[Any, Any]

    def wait(self, timeout: float = JOB_TIMEOUT_S) -> Submitted:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.process.wait()
        except BaseException:  # Ctrl-C or SIGTERM: the job goes with the cluster
            self.kill()
            raise
        finally:
            for handle in self.files:
                handle.close()
        seconds = time.monotonic() - self.started
        # spark-submit runs the Python driver with its stderr merged into stdout (PythonRunner),
        # beside Ivy's own lines: the JSON result and a JSON error line are found among them
        printed = json_documents(self.stem.with_suffix(".out").read_text())
        errors = [d for d in printed if isinstance(d, dict) and set(d) == {"error", "exit_code"}]
        results = [d for d in printed if d not in errors]
        data = results[0] if results else None
        error = str(errors[-1]["error"]) if errors else ""
        if code != 0 and not error:
            stderr = self.stem.with_suffix(".err").read_text().strip().splitlines()
            error = stderr[-1] if stderr else f"exit {code}"
        return Submitted(self.step, self.args, code, round(seconds, 1), data, error)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)


def json_documents(text: str) -> list[Any]:
    """The JSON documents that start at the beginning of a line of ``text``, in order."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    offset = 0
    while offset < len(text):
        end = text.find("\n", offset)
        end = len(text) if end < 0 else end
        if text[offset : offset + 1] in ("{", "["):
            try:
                document, stop = decoder.raw_decode(text, offset)
            except json.JSONDecodeError:
                pass
            else:
                found.append(document)
                offset = stop
                continue
        offset = end + 1
    return found


# -- evidence ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AppWork:
    """One application, from the master's status and its event log."""

    app_id: str
    name: str
    state: str
    """The master's word: FINISHED, FAILED, KILLED..."""
    executors: tuple[str, ...]
    """Executor ids added during the application (event log)."""
    executors_on_worker: int
    """Executors the worker's ``/json/`` lists for it (finished or running)."""
    tasks: Mapping[str, int]
    """Finished tasks per executor id (``driver`` would be the driver)."""
    failed_tasks: int
    executors_removed: tuple[str, ...] = ()

    @property
    def tasks_on_executors(self) -> int:
        return sum(n for executor, n in self.tasks.items() if executor != "driver")


def read_event_log(path: Path) -> dict[str, Any]:
    """Executors added and removed, tasks per executor and failed tasks of one event log."""
    added: list[str] = []
    removed: list[str] = []
    tasks: Counter[str] = Counter()
    failed = 0
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:  # a line cut short by a killed driver
                continue
            kind = event.get("Event")
            if kind == "SparkListenerExecutorAdded":
                added.append(str(event["Executor ID"]))
            elif kind == "SparkListenerExecutorRemoved":
                removed.append(f"{event['Executor ID']}: {event.get('Removed Reason', '')}")
            elif kind == "SparkListenerTaskEnd":
                info = event["Task Info"]
                if info.get("Failed") or info.get("Killed"):
                    failed += 1
                else:
                    tasks[str(info["Executor ID"])] += 1
    return {"executors": tuple(added), "removed": tuple(removed), "tasks": dict(tasks), "failed": failed}


def app_work(cluster: StandaloneCluster, events: Path, app_ids: Sequence[str]) -> list[AppWork]:
    """The evidence for these applications: master, worker and event logs."""
    master = cluster.master_state()
    known = {a["id"]: a for a in [*master.get("completedapps", []), *master.get("activeapps", [])]}
    try:
        worker = cluster.worker_state()
        on_worker = Counter(e["appid"] for e in [*worker["executors"], *worker["finishedexecutors"]])
    except OSError:
        on_worker = Counter()
    found = []
    for app_id in app_ids:
        logged = read_event_log(events / app_id)
        app = known.get(app_id, {})
        found.append(
            AppWork(
                app_id=app_id,
                name=str(app.get("name", "?")),
                state=str(app.get("state", "unknown")),
                executors=logged["executors"],
                executors_on_worker=on_worker.get(app_id, 0),
                tasks=logged["tasks"],
                failed_tasks=logged["failed"],
                executors_removed=logged["removed"],
            )
        )
    return found


def completed_apps(cluster: StandaloneCluster) -> list[str]:
    return [str(a["id"]) for a in cluster.master_state().get("completedapps", [])]


def wait_for_app_end(cluster: StandaloneCluster, before: set[str], timeout: float = 30.0) -> list[str]:
    """Applications that completed since ``before``, once none is active any more (the master
    learns of an application's end a moment after its driver exits)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = cluster.master_state()
        if not state.get("activeapps"):
            break
        time.sleep(0.5)
    return [a for a in completed_apps(cluster) if a not in before]


# -- the story -----------------------------------------------------------------------------------


@dataclass
class Story:
    """What the demo did and found; printed as a table and written to ``report.json``."""

    catalog: str
    master: str
    steps: list[Submitted] = field(default_factory=list)
    apps: dict[str, list[AppWork]] = field(default_factory=dict)
    """Step -> its applications."""
    checks: list[tuple[str, bool, str]] = field(default_factory=list)
    """(check, held, detail)."""
    seconds: float = 0.0

    def check(self, name: str, held: bool, detail: str = "") -> bool:
        self.checks.append((name, held, detail))
        log.info("%s %s%s", "ok  " if held else "FAIL", name, f": {detail}" if detail else "")
        return held

    @property
    def ok(self) -> bool:
        return all(held for _, held, _ in self.checks)


def subject_email(history: Path) -> str:
    """The first address of the first person outside the planted fraud rings (an ordinary
    customer asking to be erased), from the generator's ground truth."""
    truth = json.loads((history / "_ground_truth.json").read_text())
    ring_members = {person for members in truth["rings"].values() for person in members}
    person = min(p for p in truth["persons"] if p not in ring_members)
    return str(truth["persons"][person]["emails"][0])


def ring_member_email(history: Path) -> str:
    """The first address of the first member of the first planted fraud ring (by id), from the
    generator's ground truth: a subject whose entity id a resolver may give to other members
    too (the erasure re-keys its own id in their rows and leaves an id it borrowed)."""
    truth = json.loads((history / "_ground_truth.json").read_text())
    ring = min(truth["rings"])
    person = min(truth["rings"][ring])
    return str(truth["persons"][person]["emails"][0])


def submit(
    story: Story, cluster: StandaloneCluster, submitter: Submitter, step: str, job: str, *args: str
) -> Submitted:
    """Submit one job, wait for it, and record it with the applications it ran."""
    before = set(completed_apps(cluster))
    log.info("submitting %s: jobs/%s.py %s", step, job, " ".join(args))
    done = submitter.start(step, job, args).wait()
    apps = wait_for_app_end(cluster, before)
    done = Submitted(done.step, done.args, done.exit_code, done.seconds, done.data, done.error, tuple(apps))
    story.steps.append(done)
    story.apps[step] = app_work(cluster, submitter.events, apps)
    work = story.apps[step]
    tasks = sum(a.tasks_on_executors for a in work)
    log.info(
        "  exit %d in %.0f s; %d application(s), %d executor(s), %d task(s) on executors%s",
        done.exit_code,
        done.seconds,
        len(work),
        sum(len(a.executors) for a in work),
        tasks,
        f"; {done.error}" if done.error else "",
    )
    return done


def run_story(
    story: Story,
    cluster: StandaloneCluster,
    submitter: Submitter,
    history: Path,
    entities: int,
    months: int,
    *,
    full: bool = False,
) -> bool:
    """generate -> ingest every feed (one job, ``--feed all``; ``full``: one job per feed) ->
    Silver -> Gold -> replay -> approve -> ack -> publish -> asof -> ledger verify ->
    communities -> erase a fraud-ring member (``full``: an ordinary customer first) ->
    calibrate, each its own spark-submit. False at the first step that fails (the rest would
    only fail after it)."""
    from workloads.vocabulary import Feed

    def step(name: str, job: str, *args: str) -> Submitted | None:
        done = submit(story, cluster, submitter, name, job, *args)
        held = story.check(f"{name} exits 0", done.exit_code == 0, done.error)
        return done if held else None

    sizes = ("--entities", str(entities), "--months", str(months))
    if not step("generate", "generate", "--out", str(history), *sizes):
        return False
    if full:  # each feed its own job, as a scheduler that runs one per feed would submit them
        for feed in Feed:
            if not step(f"ingest-{feed}", "ingest", "--feed", str(feed), "--source", str(history)):
                return False
    else:  # one JVM start for every feed: each is still its own recorded run
        ingested = step("ingest", "ingest", "--feed", "all", "--source", str(history))
        if not ingested:
            return False
        feeds = [report["feed"] for report in ingested.data["feeds"]]
        story.check("ingest: every feed in one job", feeds == [str(feed) for feed in Feed], ", ".join(feeds))
    # the history is decided by ER v1, which the shipped er-v3 plan restates
    if not step("build-silver", "build", "silver", "--engine", "entity_resolution@1"):
        return False
    if not step("build-gold", "build", "gold"):
        return False
    replayed = step("replay", "replay", "--plan", PLAN)
    if not replayed:
        return False
    run_id = str(replayed.data["run_id"])
    story.check("the replay awaits approval", replayed.data.get("status") == "awaiting_approval")
    if not step("approve", "approve", run_id, "--by", "risk-lead"):
        return False
    if not step("ack", "ack", "fraud-ops", run_id, "--by", "fraud-ops-oncall"):
        return False
    published = step("publish", "publish", run_id)
    if not published:
        return False
    at = str(published.data["effective_at"])
    answered = step("asof", "asof", "gold.correlations", "--at", at)
    if answered:
        story.check("asof: both routes agree", answered.data.get("routes_agree") is True)
    verified = step("ledger-verify", "ledger_job", "verify")
    if verified:
        story.check("the ledger chain verifies", verified.data.get("ok") is True)
    grouped = step("communities", "communities")
    if grouped:
        story.check(
            "communities: measured against the true rings",
            grouped.data.get("quality") is not None,
            str(grouped.data.get("quality_note")),
        )

    def erase(name: str, what: str, email: str, request: str) -> None:
        erased = step(
            name, "erase", "--subject-email", email, "--request", request, "--reason", "GDPR art. 17"
        )
        if erased:
            hits = erased.data["certificate"]["verification"]["hits"]
            story.check(
                f"erase {what}: the independent scan finds no trace", hits == [], f"{len(hits)} hit(s)"
            )

    if full:  # every kind of job is submitted without it: the ring member's erasure is the harder one
        erase("erase", "an ordinary customer", subject_email(history), "REQ-CLUSTER-1")
    erase("erase-ring-member", "a ring member", ring_member_email(history), "REQ-CLUSTER-2")
    calibrated = step("calibrate", "calibrate", "--engine", "correlation@1")
    return story.ok and calibrated is not None


def unreachable_master(story: Story, submitter: Submitter) -> None:
    """A master nobody listens at: one line naming the URL, exit 3, in seconds."""
    url = f"spark://127.0.0.1:{free_port()}"
    done = submitter.start("master-unreachable", "tables", (), master=url).wait()
    story.steps.append(done)
    story.check(
        "an unreachable master is exit 3, one line naming its URL",
        done.exit_code == 3 and url in done.error and done.data is None,
        f"exit {done.exit_code} in {done.seconds:.0f} s: {done.error}",
    )


def jobs_finished(events: Path, app_id: str) -> int:
    """Spark jobs the application's (in-progress) event log has recorded as ended."""
    for path in (events / app_id, events / f"{app_id}.inprogress"):
        if path.is_file():
            return path.read_text().count('"Event":"SparkListenerJobEnd"')
    return 0


def worker_drill(story: Story, cluster: StandaloneCluster, submitter: Submitter) -> None:
    """Kill the worker (and its executors) during a Silver build, start it again, and see what
    the build did: Spark retried it on the new executor, or it failed, was recorded failed,
    left serving untouched, and a rerun completed."""
    serving_before = silver_serving(submitter.conf, submitter.secrets)
    before = set(completed_apps(cluster))
    log.info("drill: submitting a Silver build and killing the worker in its middle")
    # the resolver in force: ER v3 is published by now, and a pin of v1 is refused
    running = submitter.start("drill-build-silver", "build", ("silver",))
    try:
        app_id = _app_in_its_middle(cluster, submitter.events, running)
        if app_id is None:
            running.wait()
            story.check(
                "drill: the worker was killed during the Silver build", False, "the build ended first"
            )
            return
        killed_after = jobs_finished(submitter.events, app_id)
        cluster.kill_worker()
        time.sleep(3)
        cluster.start_worker()
    except BaseException:
        running.kill()
        raise
    done = running.wait()
    apps = wait_for_app_end(cluster, before)
    done = Submitted(done.step, done.args, done.exit_code, done.seconds, done.data, done.error, tuple(apps))
    story.steps.append(done)
    story.apps[done.step] = app_work(cluster, submitter.events, apps)
    story.check(
        "drill: the worker was killed during the Silver build",
        True,
        f"after {killed_after} Spark jobs of {app_id}; worker started again",
    )
    if done.exit_code == 0:
        work = story.apps[done.step][0]
        story.check(
            "drill: Spark retried on a new executor and the build completed",
            len(work.executors) >= 2 and work.tasks_on_executors > 0,
            f"executors {', '.join(work.executors)}; removed {'; '.join(work.executors_removed)}; "
            f"{work.failed_tasks} failed task(s)",
        )
        return
    story.check("drill: the build failed (exit 1)", done.exit_code == 1, done.error)
    shown = submit(
        story, cluster, submitter, "drill-ledger-show", "ledger_job", "show", "--kind", "run_finished"
    )
    failed = [
        e
        for e in (shown.data or {}).get("entries", [])
        if e["body"].get("status") == "failed" and str(e["body"].get("run_id", "")).startswith("silver-")
    ]
    story.check(
        "drill: the ledger records the Silver run failed",
        bool(failed),
        failed[-1]["body"]["error"] if failed else "",
    )
    story.check(
        "drill: serving is untouched",
        silver_serving(submitter.conf, submitter.secrets) == serving_before,
        f"silver.events at {serving_before}",
    )
    rerun = submit(story, cluster, submitter, "drill-rerun-silver", "build", "silver")
    story.check("drill: a rerun completes", rerun.exit_code == 0, rerun.error)


def _app_in_its_middle(cluster: StandaloneCluster, events: Path, running: Running) -> str | None:
    """The running application once it has finished :data:`DRILL_KILL_AFTER_JOBS` Spark jobs;
    None if the submission ended first."""
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline and running.process.poll() is None:
        active = cluster.master_state().get("activeapps", [])
        if active and jobs_finished(events, str(active[0]["id"])) >= DRILL_KILL_AFTER_JOBS:
            return str(active[0]["id"])
        time.sleep(0.5)
    return None


def silver_serving(conf: Path, environ: Mapping[str, str]) -> int | None:
    """``silver.events``'s current snapshot, read without a JVM (pyiceberg on the same catalog)."""
    from lakehouse.catalog import open_catalog
    from lakehouse.config import load_config

    config = load_config(conf, environ=environ)
    catalog = open_catalog(config)
    suffix = f"_{config.instance}" if config.instance else ""
    table = catalog.load_table(f"silver{suffix}.events")
    snapshot = table.current_snapshot()
    return int(snapshot.snapshot_id) if snapshot is not None else None


# -- the summary -------------------------------------------------------------------------------


def summary_lines(story: Story) -> list[str]:
    """The table of steps and applications, the totals and the checks."""
    rows = [("step", "exit", "s", "app", "state", "executors", "tasks on executors", "on driver")]
    for done in story.steps:
        work = story.apps.get(done.step, [])
        if not work:
            rows.append(
                (
                    done.step,
                    str(done.exit_code),
                    f"{done.seconds:.0f}",
                    "-",
                    "no Spark application",
                    "",
                    "",
                    "",
                )
            )
        for app in work:
            executors = f"{len(app.executors)} ({app.executors_on_worker} on the worker)"
            rows.append(
                (
                    done.step,
                    str(done.exit_code),
                    f"{done.seconds:.0f}",
                    app.app_id,
                    app.state,
                    executors,
                    str(app.tasks_on_executors),
                    str(app.tasks.get("driver", 0)),
                )
            )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    apps = [a for work in story.apps.values() for a in work]
    finished = sum(1 for a in apps if a.state == "FINISHED")
    lines += [
        "",
        f"catalog: {story.catalog}; master: {story.master}",
        f"{len(story.steps)} submissions, {len(apps)} applications ({finished} FINISHED), "
        f"{sum(len(a.executors) for a in apps)} executors launched, "
        f"{sum(a.tasks_on_executors for a in apps)} tasks on executors, "
        f"{sum(a.tasks.get('driver', 0) for a in apps)} on the driver, "
        f"{story.seconds / 60:.1f} min",
        "",
    ]
    lines += [f"{'ok  ' if held else 'FAIL'} {name}{f': {d}' if d else ''}" for name, held, d in story.checks]
    return lines


def check_evidence(story: Story) -> None:
    """Every application finished on the master and its executors ran tasks."""
    for step, work in story.apps.items():
        for app in work:
            story.check(f"{step}: {app.app_id} FINISHED on the master", app.state == "FINISHED", app.state)
            if not step.startswith("drill"):
                story.check(
                    f"{step}: executors ran its tasks",
                    app.tasks_on_executors > 0 and app.executors_on_worker > 0,
                    f"{app.tasks_on_executors} tasks on {len(app.executors)} executor(s)",
                )


# -- main -----------------------------------------------------------------------------------


@contextlib.contextmanager
def stopped_on_sigterm() -> Iterator[None]:
    """SIGTERM (CI cancelling the job) unwinds like Ctrl-C, so the cluster is stopped."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


CATALOGS = ("sqlite", "postgres")


@contextlib.contextmanager
def iceberg_catalog(kind: str) -> Iterator[tuple[dict[str, str], dict[str, str]]]:
    """The Iceberg catalog of the story: configuration overrides for the file, and the
    environment of every command (the password, never in a file). Nothing for the embedded
    SQLite catalog under the work dir; a throwaway PostgreSQL server on loopback
    (:mod:`local_services.postgres`), stopped afterwards, for ``postgres``."""
    if kind == "sqlite":
        yield {}, {}
        return
    from local_services.postgres import local_postgres

    with local_postgres() as server:
        log.info("Iceberg catalog: PostgreSQL at %s", server.jdbc_uri)
        overrides = server.lakehouse_overrides()
        password = overrides.pop("iceberg.password")
        yield overrides, {"LAKEHOUSE__ICEBERG__PASSWORD": password}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--root", type=Path, help="folder for everything (default: a new temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the folder (kept anyway on failure)")
    parser.add_argument(
        "--catalog",
        choices=CATALOGS,
        default="sqlite",
        help="the Iceberg catalog: sqlite under the work dir (default) or a throwaway PostgreSQL",
    )
    parser.add_argument("--entities", type=int, default=20, help="persons in the generated history")
    parser.add_argument("--months", type=int, default=2, help="months of history")
    parser.add_argument("--cores", type=int, default=2, help="the worker's cores")
    parser.add_argument("--no-drill", dest="drill", action="store_false", help="skip the worker-loss drill")
    parser.add_argument(
        "--full",
        action="store_true",
        help="the whole story: each feed ingested by its own job (a JVM start each), and an ordinary "
        "customer erased before the ring member (about 1.5 min more)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    root = (args.root or Path(tempfile.mkdtemp(prefix="lakehouse-cluster-"))).resolve()
    root.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    story = Story(catalog=args.catalog, master="")
    try:
        with stopped_on_sigterm(), iceberg_catalog(args.catalog) as (catalog, secrets):
            conf = write_config(root / "cluster.yaml", root / "lake", catalog)
            py_files = build_py_files(root / "dist" / "lakehouse_replay.zip")
            log.info(
                "distributable: %s (%d KB); configuration: %s",
                py_files,
                py_files.stat().st_size // 1024,
                conf,
            )
            printed = subprocess.run(
                [sys.executable, "-m", "jobs", "submit-args", "--conf", str(conf), "--json"],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            )
            submit_args = json.loads(printed.stdout)["args"]
            settings = ClusterSettings(cores=args.cores)
            with StandaloneCluster(root / "cluster", settings) as cluster:
                story.master = cluster.master_url
                log.info("cluster: %s, master UI %s", cluster.master_url, cluster.master_webui)
                submitter = Submitter(cluster.master_url, conf, root, py_files, submit_args, secrets)
                unreachable_master(story, submitter)
                run_story(
                    story, cluster, submitter, root / "history", args.entities, args.months, full=args.full
                )
                built = any(s.step == "build-silver" and s.exit_code == 0 for s in story.steps)
                if args.drill and built:
                    worker_drill(story, cluster, submitter)
                check_evidence(story)
    except KeyboardInterrupt:
        story.check("not interrupted", False, "stopped by a signal; the cluster was stopped")
    story.seconds = time.monotonic() - started
    report = root / "report.json"
    report.write_text(json.dumps(asdict(story), indent=2, default=str))
    print("\n".join(summary_lines(story)))
    if story.ok and not args.keep and args.root is None:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"\nlogs and the report: {root}", file=sys.stderr)
    return 0 if story.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
