"""The one place a SparkSession is built.

Delta Lake is Spark's ``spark_catalog`` (Delta tables are addressed by path, so nothing
depends on a metastore) and Iceberg is a second, named catalog in the same session. On a
cluster the same settings come from ``lakehouse submit-args``; locally the jars come from
the resolved cache (see :mod:`lakehouse.jars`).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from lakehouse.catalog import catalog_password, check_catalog_reachable
from lakehouse.config import LakehouseConfig
from lakehouse.errors import EnvironmentProblem
from lakehouse.jars import check_java, resolve_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")

MASTER_CONNECT_TIMEOUT_S = 5.0
"""How long a standalone master's port may take to accept a connection before it counts as unreachable."""

SPARK_EXTENSIONS = (
    "io.delta.sql.DeltaSparkSessionExtension,"
    "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
)


def catalog_conf(config: LakehouseConfig) -> dict[str, str]:
    """Spark settings for the catalogs and formats: the part a cluster submission needs too."""
    name = config.iceberg.name
    prefix = f"spark.sql.catalog.{name}"
    conf = {
        "spark.sql.extensions": SPARK_EXTENSIONS,
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": config.iceberg.type,
        f"{prefix}.warehouse": config.iceberg_warehouse_uri,
        "spark.sql.session.timeZone": "UTC",
    }
    if config.iceberg.type in ("jdbc", "rest", "hive"):
        conf[f"{prefix}.uri"] = config.iceberg_uri
    if config.iceberg.type == "jdbc":
        conf[f"{prefix}.jdbc.schema-version"] = "V1"
    if config.iceberg.user:
        conf[f"{prefix}.jdbc.user"] = config.iceberg.user
    for key, value in config.iceberg.properties.items():
        conf[f"{prefix}.{key}"] = value
    return conf


def catalog_secrets(config: LakehouseConfig) -> dict[str, str]:
    """The catalog settings that are never printed (the JDBC catalog's password).

    Kept out of :func:`catalog_conf`, so ``submit-args`` cannot show them: under
    ``spark-submit`` the driver sets them when it joins the session (:func:`runtime_conf`),
    before the catalog is first used; Spark redacts them in its UI and event log.
    """
    password = catalog_password(config)
    if password is None:
        return {}
    return {f"spark.sql.catalog.{config.iceberg.name}.jdbc.password": password}


PYTHON_CALL_SITES = "spark.python.sql.dataFrameDebugging.enabled"
"""PySpark's setting for recording Python call sites in DataFrame errors (off here: see
:func:`session_conf`); PySpark reads it once per process, from the active session."""


def session_conf(config: LakehouseConfig) -> dict[str, str]:
    """Every setting of the local session, before user overrides in ``spark.conf``."""
    conf = catalog_conf(config) | catalog_secrets(config)
    conf.update(
        {
            "spark.sql.shuffle.partitions": str(config.spark.shuffle_partitions),
            "spark.default.parallelism": str(max(2, config.spark.shuffle_partitions)),
            "spark.driver.memory": config.spark.driver_memory,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            # Adaptive query execution stays on (Spark's default): it coalesces and splits
            # shuffle partitions at run time. The test suite turns it off for its tiny data.
            # PySpark records the Python caller of every Column and functions call for its
            # DataFrame error messages, about ten round trips to the JVM instead of one; the
            # product builds wide column lists on the driver, where that cost dominates small data.
            PYTHON_CALL_SITES: "false",
            # Delta rebuilds table state with this many shuffle partitions (default 50),
            # which dominates small-table latency on a 2-core machine.
            "spark.databricks.delta.snapshotPartitions": str(config.spark.shuffle_partitions),
            # Delta's VACUUM lists files with this many tasks (default 10000).
            "spark.sql.sources.parallelPartitionDiscovery.parallelism": str(
                max(2, config.spark.shuffle_partitions)
            ),
            "spark.sql.catalogImplementation": "in-memory",
            "spark.sql.warehouse.dir": str(config.workdir_path / "spark-warehouse"),
            "spark.driver.extraJavaOptions": " ".join(
                (
                    f"-Dderby.system.home={config.workdir_path}",
                    f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}",
                    *config.spark.java_options.split(),
                )
            ),
        }
    )
    conf.update(config.spark.conf)
    return conf


def build_session(config: LakehouseConfig) -> SparkSession:
    """Build (or return the already running) session for this configuration."""
    from pyspark.sql import SparkSession

    check_catalog_reachable(config)  # before Spark starts and before anything is written
    config.workdir_path.mkdir(parents=True, exist_ok=True)
    if launched_by_spark_submit():
        # spark-submit already started the JVM with the cluster's master, packages and
        # catalog settings (see `lakehouse submit-args`); only runtime settings apply now.
        check_master(_submitted_master())
        log.debug("joining the session spark-submit started (%s)", config.spark.app_name)
        builder = SparkSession.builder.appName(config.spark.app_name)
        for key, value in runtime_conf(config).items():
            builder = builder.config(key, value)
    else:
        check_master(config.spark.master)
        check_java()
        jars = resolve_jars(
            config.jar_cache_path, config.jar_packages, config.jars.excludes, config.jars.repository
        )
        os.environ.setdefault("PYSPARK_PYTHON", _python())
        if config.spark.master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        options = {
            "spark.master": config.spark.master,
            "spark.app.name": config.spark.app_name,
            "spark.jars": ",".join(str(j) for j in jars),
            **session_conf(config),
        }
        log.debug(
            "starting Spark: master %s, %d jars from %s",
            config.spark.master,
            len(jars),
            config.jar_cache_path,
        )
        launch_jvm(options)
        builder = SparkSession.builder
        for key, value in options.items():
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if spark.sparkContext._jsc.sc().isStopped():
        # a standalone client that could not register (a port that answers but is no master)
        # stops its context after its own retries
        raise EnvironmentProblem(
            f"the Spark master {spark.sparkContext.master} did not accept the application: "
            f"check that it is a Spark master and has workers"
        )
    spark.sparkContext.setLogLevel(config.spark.log_level)
    return spark


JVM_NOISE = re.compile(
    r"WARNING: "  # the JDK's own warnings: "Using incubator modules" (Spark's launcher always adds
    # --add-modules=jdk.incubator.vector), restricted or deprecated methods called
    r"|Using Spark's default log4j profile"
    r"|Setting default log level to"
    r"|To adjust logging level use sc\.setLogLevel"
    r"|(\d\d/\d\d/\d\d )?\d\d:\d\d:\d\d (WARN|INFO|DEBUG|TRACE) "  # log4j below ERROR (ours, Spark's default)
)
"""The lines a JVM writes on stderr that are not for people: its start-up lines and log4j
records below ERROR. Shown only as debug log lines (``--verbose``)."""


def is_jvm_noise(line: str, *, after_noise: bool = False) -> bool:
    """True for a line of :data:`JVM_NOISE`, or one continuing a noise record (an indented
    stack frame or a ``Caused by``) when the line before it was noise."""
    if JVM_NOISE.match(line):
        return True
    return after_noise and (line[:1] in (" ", "\t") or line.startswith("Caused by"))


def forward_jvm_stderr(stream: BinaryIO, write: Callable[[bytes], object] = lambda b: os.write(2, b)) -> None:
    """For the JVM's life (a daemon thread): its noise becomes debug log lines, and every
    other line (a JVM that fails to start, an ERROR record) reaches stderr as before."""
    after_noise = False
    for raw in iter(stream.readline, b""):
        try:
            line = raw.decode(errors="replace").rstrip("\r\n")
            after_noise = is_jvm_noise(line, after_noise=after_noise)
            if after_noise:
                log.debug("JVM: %s", line)
            else:
                write(raw)
        except Exception:  # never stop draining: a JVM whose stderr pipe fills up blocks
            after_noise = False


def launch_jvm(options: Mapping[str, str]) -> None:
    """Start the driver JVM as pyspark does (spark-submit with ``options``), but with its
    stderr through :func:`forward_jvm_stderr`, so its start-up lines reach the terminal only
    with ``--verbose``. No-op when this process already has a JVM (the session is reused).

    pyspark's own launch inherits the terminal: the JDK's warning about the incubator module
    Spark's launcher always adds (``--add-modules=jdk.incubator.vector``, which no JVM option
    silences) and Spark's shell banner would reach it.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    conf = SparkConf(loadDefaults=False)
    conf.setAll(list(options.items()))
    read_end, write_end = os.pipe()
    reader = os.fdopen(read_end, "rb")
    threading.Thread(target=forward_jvm_stderr, args=(reader,), name="jvm-stderr", daemon=True).start()
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": write_end})  # type: ignore[no-untyped-call]
    finally:
        os.close(write_end)  # the JVM holds its copy; the pipe ends when the JVM does
    SparkContext._ensure_initialized(gateway=gateway)


def check_master(master: str, timeout: float = MASTER_CONNECT_TIMEOUT_S) -> None:
    """Refuse at once a standalone master (``spark://host:port[,host:port]``) nobody listens at.

    Spark's standalone client tries to register three times, 20 s apart, before it gives up
    (fixed in ``StandaloneAppClient``: no setting bounds it), and a job then fails on a
    stopped context. A TCP connection to each master of the URL tells within ``timeout``
    seconds. Other masters (``local``, ``yarn``, ``k8s://``) are left to Spark.
    """
    if not master.startswith("spark://"):
        return
    failures = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return
        except ValueError:
            failures.append(f"{address}: no port")
        except OSError as exc:
            failures.append(f"{address}: {exc.strerror or type(exc).__name__}")
    raise EnvironmentProblem(
        f"the Spark master {master} is unreachable ({'; '.join(failures)}): start it, or fix --master "
        f"(spark.master)"
    )


def _submitted_master() -> str:
    """The master ``spark-submit`` was given, read from the JVM it started (no context yet)."""
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    return str(SparkConf().get("spark.master", ""))


def runtime_conf(config: LakehouseConfig) -> dict[str, str]:
    """Settings that may still change after the JVM started (SQL settings, Delta's among them,
    and the catalog's secrets)."""
    runtime = (
        PYTHON_CALL_SITES,
        "spark.sql.shuffle.partitions",
        "spark.sql.session.timeZone",
        "spark.databricks.delta.snapshotPartitions",
        "spark.sql.sources.parallelPartitionDiscovery.parallelism",
    )
    local = session_conf(config)
    conf = {key: local[key] for key in runtime}
    conf.update(catalog_secrets(config))
    conf.update({k: v for k, v in config.spark.conf.items() if k.startswith("spark.sql.")})
    return conf


def launched_by_spark_submit() -> bool:
    """True inside a Python application started by ``spark-submit``."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def submit_args(config: LakehouseConfig) -> list[str]:
    """The ``spark-submit`` arguments a cluster needs for the configured catalogs (never a
    password: see :func:`catalog_secrets`)."""
    args = ["--packages", ",".join(config.jar_packages)]
    args += ["--exclude-packages", ",".join(config.jars.excludes)]
    for key, value in catalog_conf(config).items():
        args += ["--conf", f"{key}={value}"]
    return args


def _python() -> str:
    import sys

    return sys.executable
