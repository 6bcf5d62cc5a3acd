"""One Spark session per test process, with Delta and Iceberg loaded, table factories, and the
shared lifecycle history (built once per format through the product, read by many tests).

Which tests run on which formats:

* every table operation (``tests/lakehouse``), the ledger's storage (``tests/ledger``), the
  Bronze ingest, the entity index's file pruning and the lifecycle behind ``asof``
  (publication, rollback, time travel, expiry, both readers) run once per format
  (``table_format``, ``lakehouse``, ``lifecycle``): that is where the formats differ;
* the workload stories above the table interface (Silver and Gold builds, the replay flow,
  the engines in force, the exceptions queue, the independent recount, the producer and
  quality histories) run on the shipped mixed-format default (``shipped_lakehouse``):
  Delta Bronze; Iceberg Silver, Gold and ops (so the ledger, the outbox and the exceptions
  queue). Their code never branches on a format (``tests/test_layers.py`` checks which
  modules name one), so running each story once per forced format tested the table
  interface again, at twice the cost of the suite's slowest part.

Which tests start a JVM is enforced, not remembered: a test whose fixtures include the Spark
session is marked ``spark`` at collection; a run that deselects ``spark`` (``make check``) gets a
``JAVA_HOME`` whose ``java`` refuses to start (``tests/no_jvm``), so a test that starts Spark in
a CLI process without the marker fails there with one line, and the session fixture itself
refuses to start.

The fixture is named ``spark_session`` on purpose: it replaces pytest-spark's fixture of
that name, so that tests get the session the toolkit itself builds (lakehouse.session),
not a second, differently configured one.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from lakehouse.config import LakehouseConfig, TableFormat, Zone, load_config
from lakehouse.tables import Table, TableSpec, open_table
from local_services.postgres import LocalPostgres, local_postgres

if TYPE_CHECKING:
    from tests.replay_history import Lifecycle

REPO = Path(__file__).resolve().parents[1]
NO_JVM_HOME = REPO / "tests" / "no_jvm"
"""The ``JAVA_HOME`` of a run without the ``spark`` tests: its ``java`` fails in one line."""
FORMATS = [TableFormat.DELTA, TableFormat.ICEBERG]

TEST_JAVA_OPTIONS = "-XX:+UseSerialGC"
"""The test driver's JVM: one garbage-collector thread (parallel GC threads cost two cores more
than they return on tiny data). The JIT is the JVM's default: a worker's driver lives for the
whole suite, and C2's compiled Catalyst, closure cleaning and serialization pay for their
compilation (four slow modules on two workers took 472 s with C2 against 605 s with C1 only,
``-XX:TieredStopAtLevel=1``, which had been measured faster on short single-module runs)."""


INTERPRETED = {"spark.sql.codegen.factoryMode": "NO_CODEGEN", "spark.sql.codegen.wholeStage": "false"}
"""Spark evaluates expressions without generating code, in every module: on tests' tiny data,
compiling each query's code costs more than running it (the suite's builds and replays took
15-30% less, measured in the closing note of issue 13's second stop; the demo's module 272-290 s
against 307-313 s with code generation, alternated, 2026-12-06). The product path with Spark's
code generation, as users get it, is ``make cluster-demo``, which CI runs after the suite: every
kind of job submitted to a standalone cluster with the product's own settings. PySpark's call
sites are off for every module, as the product sets them (``lakehouse.session.PYTHON_CALL_SITES``)."""


TINY_DATA = {"spark.sql.adaptive.enabled": "false"}
"""Adaptive query execution off, in every module: on tests' tiny data there is nothing to
coalesce or split, and each shuffle it materialises is a Spark job of its own (a replay on the
20-person history ran 304 jobs with it and 113 without, 24.0-24.4 s against 25.3-27.1 s,
alternated, 2026-12-06). The product keeps Spark's default (on); ``make cluster-demo`` runs
with it."""


def spark_deselected(config: pytest.Config) -> bool:
    """Whether the run's ``-m`` expression leaves out a test marked ``spark``."""
    from _pytest.mark.expression import Expression

    markexpr = config.option.markexpr
    if not markexpr:
        return False
    return not Expression.compile(markexpr).evaluate(lambda name, **_: name == "spark")


def pytest_configure(config: pytest.Config) -> None:
    """A run without the ``spark`` tests starts no JVM: every ``java`` it would start refuses."""
    if spark_deselected(config):
        os.environ["JAVA_HOME"] = str(NO_JVM_HOME)
    config.pluginmanager.register(UnitClock(config), "lakehouse-unit-clock")


def _test_config(workdir: Path, **overrides: Any) -> LakehouseConfig:
    """The shipped configuration, pointed at ``workdir`` and sized for tests."""
    shipped = load_config(REPO / "conf" / "lakehouse.yaml", environ={})
    return load_config(
        REPO / "conf" / "lakehouse.yaml",
        environ={},
        overrides={
            "workdir": str(workdir),
            "spark.master": "local[2]",
            "spark.shuffle_partitions": 2,
            "spark.conf": {**INTERPRETED, **TINY_DATA},
            "spark.java_options": os.environ.get("LAKEHOUSE_TEST_JAVA_OPTIONS", TEST_JAVA_OPTIONS),
            # the shared session also serves the PostgreSQL catalog (postgres_config)
            "jars.packages": [*shipped.jars.packages, shipped.jars.postgres_driver],
            **overrides,
        },
    )


@pytest.fixture(scope="session")
def lakehouse_config(tmp_path_factory: pytest.TempPathFactory) -> LakehouseConfig:
    """The shipped configuration, pointed at a fresh work dir and sized for tests."""
    return _test_config(tmp_path_factory.mktemp("lakehouse"))


POSTGRES_CATALOG = "lakepg"
"""The name of the PostgreSQL Iceberg catalog in the shared session (beside ``lake`` on SQLite)."""


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[LocalPostgres]:
    """A real PostgreSQL server on loopback for the whole run (local_services.postgres), started
    by the first test that needs it, stopped at the end."""
    with local_postgres() as server:
        yield server


@pytest.fixture(scope="session")
def postgres_config(
    spark_session: Any, lakehouse_config: LakehouseConfig, postgres_server: LocalPostgres
) -> LakehouseConfig:
    """The test configuration with its Iceberg catalog on PostgreSQL, as a cluster's team would
    share it: a JDBC catalog with a user and password, registered in the shared session as a
    second Iceberg catalog (Spark loads catalogs on first use, so no second session is needed)."""
    from lakehouse.session import catalog_conf, catalog_secrets

    config = _test_config(
        lakehouse_config.workdir_path,
        **postgres_server.lakehouse_overrides(),
        **{"iceberg.name": POSTGRES_CATALOG, "iceberg.warehouse": str(lakehouse_config.workdir_path / "pg")},
    )
    prefix = f"spark.sql.catalog.{POSTGRES_CATALOG}"
    for key, value in (catalog_conf(config) | catalog_secrets(config)).items():
        if key == prefix or key.startswith(prefix + "."):
            spark_session.conf.set(key, value)
    return config


@pytest.fixture(scope="session")
def spark_session(request: pytest.FixtureRequest, lakehouse_config: LakehouseConfig) -> Iterator[object]:
    from lakehouse.session import build_session

    if spark_deselected(request.config):
        pytest.fail(
            f"{request.node.nodeid} asks for the Spark session in a run that deselects 'spark' "
            f"(make check); mark it spark",
            pytrace=False,
        )

    spark = build_session(lakehouse_config)
    yield spark
    spark.stop()


@pytest.fixture(params=FORMATS, ids=[f.value for f in FORMATS])
def table_format(request: pytest.FixtureRequest) -> TableFormat:
    """Every table behaviour runs once per format."""
    return TableFormat(request.param)


@pytest.fixture
def catalog_config(lakehouse_config: LakehouseConfig) -> LakehouseConfig:
    """The configuration :func:`make_table` makes its tables in: the Iceberg catalog on SQLite
    (``tests/lakehouse`` adds the one on PostgreSQL)."""
    return lakehouse_config


TableFactory = Callable[..., Table]


@pytest.fixture
def make_table(
    spark_session: object, catalog_config: LakehouseConfig, table_format: TableFormat
) -> Iterator[TableFactory]:
    """Create uniquely named tables of the parametrised format; dropped after the test."""
    created: list[Table] = []

    def factory(
        schema: str,
        *,
        zone: Zone = Zone.SILVER,
        partition_by: tuple[str, ...] = (),
        sort_by: tuple[str, ...] = (),
        personal: tuple[str, ...] = (),
        create: bool = True,
    ) -> Table:
        spec = TableSpec(
            name=f"{zone.value}.t_{uuid.uuid4().hex[:10]}",
            zone=zone,
            format=table_format,
            schema_ddl=schema,
            partition_by=partition_by,
            sort_by=sort_by,
            personal_columns=personal,
        )
        table = open_table(spark_session, catalog_config, spec)  # type: ignore[arg-type]
        if create:
            table.create()
        created.append(table)
        return table

    yield factory
    for table in created:
        table.drop()


class Lakehouse:
    """A whole configured lakehouse, isolated from every other test by its own instance."""

    def __init__(self, spark: object, config: LakehouseConfig) -> None:
        from lakehouse.tables import TableRegistry

        self.spark = spark
        self.config = config
        self.registry = TableRegistry(spark, config)  # type: ignore[arg-type]


def drop_all(tables: Iterable[Table]) -> None:
    """Drop every table that exists (a fixture's teardown of its lakehouse instance)."""
    for table in tables:
        if table.exists():
            table.drop()


def fresh_lakehouse(
    spark: object, config: LakehouseConfig, table_format: TableFormat | None
) -> Iterator[Lakehouse]:
    """Every configured table in a fresh instance, forced to ``table_format`` (None: the
    shipped zone formats); nothing is created, everything is dropped afterwards."""
    config = config.model_copy(update={"force_format": table_format, "instance": f"t{uuid.uuid4().hex[:8]}"})
    env = Lakehouse(spark, config)
    yield env
    drop_all(env.registry)


@pytest.fixture
def lakehouse(
    spark_session: object, lakehouse_config: LakehouseConfig, table_format: TableFormat
) -> Iterator[Lakehouse]:
    """Every configured table, forced to the parametrised format, in a fresh instance.

    Tables are not created; the test (or the code under test) creates what it needs.
    """
    yield from fresh_lakehouse(spark_session, lakehouse_config, table_format)


@pytest.fixture
def shipped_lakehouse(spark_session: object, lakehouse_config: LakehouseConfig) -> Iterator[Lakehouse]:
    """Every configured table in the shipped mixed-format layout, in a fresh instance (the
    workload stories' lakehouse: see the module docstring)."""
    yield from fresh_lakehouse(spark_session, lakehouse_config, None)


@pytest.fixture(scope="session", params=FORMATS, ids=[f.value for f in FORMATS])
def lifecycle(
    request: pytest.FixtureRequest,
    spark_session: object,
    lakehouse_config: LakehouseConfig,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Lifecycle]:
    """The hand-written history delivered, built, corrected, published, rolled back and
    re-published through the product, once per format for the whole run (see
    :class:`tests.replay_history.Lifecycle`). Tests only read it: one that must change
    a history builds its own."""
    from tests.replay_history import declared_engines, live_lifecycle

    table_format = TableFormat(request.param)
    config = lakehouse_config.model_copy(
        update={"force_format": table_format, "instance": f"life{table_format.value[:3]}"}
    )
    env = Lakehouse(spark_session, config)
    folder = tmp_path_factory.mktemp(f"lifecycle-{table_format.value}")
    yield live_lifecycle(env, declared_engines(folder), folder / "history")
    drop_all(env.registry)


LIFECYCLE_READERS = (
    "tests/workloads/asof/test_asof.py",
    "tests/workloads/replay/test_replay_flow.py",
    "tests/workloads/replay/test_replay_quality.py",
)
"""The modules that read the session-wide :func:`lifecycle`: one worker runs their tests on
each format, so each format's history is built once in the whole run, not once per worker
(checked at collection: a new reader must be listed here)."""


def module_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks ``spark`` every test whose fixtures include the Spark session (before ``-m``
    deselects: this hook runs first). Modules with slow tests first (a stable sort): each
    worker of a parallel run starts on a long history while the short modules fill the gaps
    at the end. Refuses a reader of the lifecycle that :data:`LIFECYCLE_READERS` does not
    list."""
    readers = [item for item in items if "lifecycle" in getattr(item, "fixturenames", ())]
    unlisted = {module_of(item) for item in readers} - set(LIFECYCLE_READERS)
    if unlisted:
        raise pytest.UsageError(f"add {sorted(unlisted)} to LIFECYCLE_READERS in tests/conftest.py")
    unscheduled = [item.nodeid for item in readers if not unit_of(item.nodeid).startswith("lifecycle-")]
    if unscheduled:
        raise pytest.UsageError(f"no format in the ids of {unscheduled}: unit_of cannot schedule them")
    for item in items:
        if "spark_session" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("spark"):
            item.add_marker(pytest.mark.spark)
    slow = {module_of(item) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: module_of(item) not in slow)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """``make test`` runs on two workers (pytest-xdist). Each module is one unit of work, so a
    module-scoped history is built once; the lifecycle's readers share one unit."""
    from xdist.scheduler import LoadScopeScheduling

    class HistoryScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return HistoryScheduling(config, log)  # type: ignore[arg-type]


LAYOUT_UNITS = ("tests/jobs/test_cli_ring_erasure.py",)
"""Modules whose module-scoped history is parametrised by layout (its first parameter): each
layout's history is a scheduling unit of its own, so the layouts run on both workers."""


def unit_of(nodeid: str) -> str:
    """A test's scheduling unit: its module, or ``lifecycle-<format>`` for a test of the
    lifecycle's readers run on that format's lifecycle (so the two formats' lifecycles are
    built on different workers, each once), or ``<module>[<layout>]`` for a module of
    :data:`LAYOUT_UNITS`."""
    module = nodeid.split("::", 1)[0]
    if module in LAYOUT_UNITS and nodeid.endswith("]"):
        return f"{module}[{nodeid.rpartition('[')[2][:-1].split('-')[0]}]"
    if module in LIFECYCLE_READERS and nodeid.endswith("]"):
        params = nodeid.rpartition("[")[2][:-1].split("-")
        for table_format in FORMATS:
            if table_format.value in params:
                return f"lifecycle-{table_format.value}"
    return module


class UnitClock:
    """Prints each scheduling unit's wall time as the unit ends (its first test's start to its
    last test's teardown), so a slow unit shows in the log while the suite still runs. In an
    xdist run it is the controller that prints, from the workers' reports."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.left: dict[str, int] = {}
        self.span: dict[str, tuple[float, float]] = {}
        self.worker: dict[str, str] = {}

    def _expect(self, nodeids: Iterable[str]) -> None:
        if self.left:
            return  # every xdist worker reports the same collection
        for nodeid in nodeids:
            unit = unit_of(nodeid)
            self.left[unit] = self.left.get(unit, 0) + 1

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        self._expect(ids)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not hasattr(self.config, "workerinput"):
            self._expect(item.nodeid for item in session.items)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if hasattr(self.config, "workerinput"):
            return  # the controller prints
        unit = unit_of(report.nodeid)
        start, stop = self.span.get(unit, (report.start, report.stop))
        self.span[unit] = (min(start, report.start), max(stop, report.stop))
        node = getattr(report, "node", None)  # an xdist worker's controller
        self.worker[unit] = node.gateway.id if node is not None else "this process"
        if report.when != "teardown" or unit not in self.left:
            return
        self.left[unit] -= 1
        if self.left[unit] == 0:
            start, stop = self.span[unit]
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(f"[unit] {unit}: {stop - start:.1f} s on {self.worker[unit]}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A test stopped by pytest-timeout's ceiling cancels the Spark jobs it left running, so
    the next test in this process gets the driver back instead of queueing behind them."""
    report: pytest.TestReport = yield
    if report.failed and "Timeout (>" in str(report.longrepr) and "pyspark" in sys.modules:
        from pyspark import SparkContext

        context = SparkContext._active_spark_context
        try:
            if context is not None:
                context.cancelAllJobs()
        except Exception as exc:  # the timeout may have cut a py4j call in half
            report.sections.append(("spark", f"could not cancel the Spark jobs left running: {exc!r}"))
    return report  # type: ignore[return-value]
