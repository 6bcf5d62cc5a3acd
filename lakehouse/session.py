"""The one place a SparkSession is built.

Delta Lake is Spark's ``spark_catalog`` (Delta tables are addressed by path, so nothing
depends on a metastore) and Iceberg is a second, named catalog in the same session. On a
cluster the same settings come from ``lakehouse submit-args``; locally the jars come from
the resolved cache (see :mod:`lakehouse.jars`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from lakehouse.catalog import catalog_password, check_catalog_reachable
from lakehouse.config import LakehouseConfig
from lakehouse.jars import check_java, resolve_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")

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
            "spark.sql.adaptive.enabled": "true",
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
        log.debug("joining the session spark-submit started (%s)", config.spark.app_name)
        builder = SparkSession.builder.appName(config.spark.app_name)
        for key, value in runtime_conf(config).items():
            builder = builder.config(key, value)
    else:
        check_java()
        jars = resolve_jars(
            config.jar_cache_path, config.jar_packages, config.jars.excludes, config.jars.repository
        )
        os.environ.setdefault("PYSPARK_PYTHON", _python())
        if config.spark.master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = SparkSession.builder.master(config.spark.master).appName(config.spark.app_name)
        builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
        log.debug(
            "starting Spark: master %s, %d jars from %s",
            config.spark.master,
            len(jars),
            config.jar_cache_path,
        )
        for key, value in session_conf(config).items():
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(config.spark.log_level)
    return spark


def runtime_conf(config: LakehouseConfig) -> dict[str, str]:
    """Settings that may still change after the JVM started (SQL settings, the catalog's secrets)."""
    conf = {
        "spark.sql.shuffle.partitions": str(config.spark.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        **catalog_secrets(config),
    }
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
