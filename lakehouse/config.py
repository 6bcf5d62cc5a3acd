"""Typed, strict configuration: a YAML file, then ``LAKEHOUSE__SECTION__KEY`` environment
overrides, then command-line flags, each winning over the one before.

Unknown keys are errors that name the file and the key, so a typo never silently falls back
to a default. Relative paths are resolved against the current directory of the process that
loads the configuration, which is where ``make`` and ``spark-submit`` are started.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from lakehouse.errors import ConfigError
from lakehouse.models import StrictModel, describe_validation_error, read_yaml_mapping

ENV_PREFIX = "LAKEHOUSE__"
VERBATIM_ENV_KEYS = frozenset({"iceberg.password", "lineage.api_key"})
"""Environment overrides taken as the exact string, not read as YAML (a password of digits
stays a string)."""
POSTGRES_JDBC_PREFIX = "jdbc:postgresql:"
CREDENTIAL_PROPERTIES = frozenset({"jdbc.user", "jdbc.password"})
"""Iceberg catalog properties that ``iceberg.user`` / ``iceberg.password`` set."""
DEFAULT_CONF_PATH = Path("conf/lakehouse.yaml")


class TableFormat(StrEnum):
    """The two open table formats a table can be stored in."""

    DELTA = "delta"
    ICEBERG = "iceberg"


class Zone(StrEnum):
    """Medallion zones plus the operational namespace."""

    BRONZE = "bronze"
    SILVER = "silver"
    GOLD = "gold"
    OPS = "ops"


class SparkSettings(StrictModel):
    """How the one SparkSession of a process is built."""

    master: str = "local[*]"
    app_name: str = "lakehouse-replay"
    shuffle_partitions: int = Field(default=4, ge=1)
    driver_memory: str = "2g"
    log_level: str = "ERROR"
    java_options: str = ""
    """Extra driver JVM options, appended to the toolkit's own (a local session only)."""
    conf: dict[str, str] = Field(default_factory=dict)


class JarSettings(StrictModel):
    """JVM packages and where they are resolved once, outside git."""

    cache_dir: str = "~/.cache/lakehouse-replay/ivy"
    packages: tuple[str, ...] = (
        "io.delta:delta-spark_4.1_2.13:4.4.0",
        "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.11.0",
        "org.xerial:sqlite-jdbc:3.53.2.1",
    )
    # Transitive dependencies that Spark itself already ships; resolving them again
    # would put a second, older copy on the class path (Delta's kernel modules declare them).
    excludes: tuple[str, ...] = (
        "org.apache.hadoop:hadoop-client-runtime",
        "org.apache.hadoop:hadoop-client-api",
        "com.fasterxml.jackson.core:jackson-databind",
        "com.fasterxml.jackson.core:jackson-core",
        "com.fasterxml.jackson.core:jackson-annotations",
        "com.fasterxml.jackson.datatype:jackson-datatype-jdk8",
        "org.apache.parquet:parquet-hadoop",
        "org.scala-lang:scala-library",
        "org.slf4j:slf4j-api",
        "org.apache.logging.log4j:log4j-api",
        "org.apache.logging.log4j:log4j-core",
        "org.apache.logging.log4j:log4j-slf4j2-impl",
        "org.roaringbitmap:RoaringBitmap",
        "org.roaringbitmap:shims",
    )
    repository: str = "https://repo1.maven.org/maven2/"
    postgres_driver: str = "org.postgresql:postgresql:42.7.14"
    """The PostgreSQL JDBC driver, loaded besides ``packages`` when the Iceberg catalog is on
    PostgreSQL (``iceberg.uri: jdbc:postgresql:...``)."""


class IcebergCatalogSettings(StrictModel):
    """The Iceberg catalog; JDBC on SQLite under the work dir unless told otherwise.

    A team's catalog is JDBC on PostgreSQL (``uri: jdbc:postgresql://host:5432/iceberg``,
    see ``conf/cluster.example.yaml``): ``user`` and ``password`` become the JDBC catalog's
    ``jdbc.user`` / ``jdbc.password`` and pyiceberg's connection credentials.
    """

    name: str = "lake"
    type: Literal["jdbc", "rest", "hive", "hadoop"] = "jdbc"
    uri: str | None = None
    warehouse: str | None = None
    user: str | None = Field(default=None, min_length=1)
    """The catalog database's user (JDBC catalogs)."""
    password: SecretStr | None = None
    """Its password; set it through ``LAKEHOUSE__ICEBERG__PASSWORD`` rather than in a file.
    Never printed: ``submit-args`` leaves it out (the driver sets it when the session starts)
    and messages mask it."""
    properties: dict[str, str] = Field(default_factory=dict)

    @field_validator("properties")
    @classmethod
    def _credentials_have_their_keys(cls, value: dict[str, str]) -> dict[str, str]:
        taken = sorted(k for k in value if k in CREDENTIAL_PROPERTIES)
        if taken:
            raise ValueError(
                f"{taken}: set iceberg.user and iceberg.password (LAKEHOUSE__ICEBERG__PASSWORD) instead"
            )
        return value

    @field_validator("name")
    @classmethod
    def _plain_identifier(cls, value: str) -> str:
        if not value.isidentifier() or value == "spark_catalog":
            raise ValueError("must be a plain identifier other than 'spark_catalog'")
        return value


class MlflowSettings(StrictModel):
    """Where ML runs, datasets and models are tracked (W4/W5).

    By default MLflow runs embedded: tracking and the model registry on a SQLite file under
    the work dir, artifacts beside it, nothing to start. ``tracking_uri`` (a team's MLflow
    server, ``http://mlflow:5000``) replaces both; ``registry_uri`` defaults to it.
    """

    tracking_uri: str | None = None
    registry_uri: str | None = None
    experiment: str = "lakehouse-replay"
    """Experiment name; a lakehouse with an ``instance`` gets ``<experiment>-<instance>``."""


class LineageSettings(StrictModel):
    """Where the OpenLineage events of recorded runs go (docs/reference/openlineage.md).

    ``file`` (the default) appends one JSON line per event to ``path`` (default
    ``<workdir>/lineage/events.ndjson``); ``http`` posts each event to ``url`` + ``endpoint``
    (Marquez: ``http://marquez:5000``, ``api/v1/lineage``); ``console`` logs them; ``none``
    emits nothing. An event that cannot be sent is a warning, never a failed run.
    """

    transport: Literal["file", "http", "console", "none"] = "file"
    path: str | None = None
    url: str | None = None
    endpoint: str = "api/v1/lineage"
    api_key: str | None = None
    """Bearer token for the HTTP consumer (set it through ``LAKEHOUSE__LINEAGE__API_KEY``)."""
    timeout_seconds: float = Field(default=5.0, gt=0)
    namespace: str = Field(default="lakehouse-replay", min_length=1)
    """The jobs' namespace; a lakehouse with an ``instance`` gets ``<namespace>-<instance>``."""

    @model_validator(mode="after")
    def _url_for_http(self) -> LineageSettings:
        if self.transport == "http" and not self.url:
            raise ValueError("transport 'http' needs a url (e.g. http://marquez:5000)")
        return self


class TableSettings(StrictModel):
    """One table as configured: where it lives, what it holds and how it is laid out."""

    zone: Zone
    format: TableFormat | None = None
    schema_ddl: str = Field(alias="schema")
    partition_by: tuple[str, ...] = ()
    sort_by: tuple[str, ...] = ()
    properties: dict[str, str] = Field(default_factory=dict)
    personal: tuple[str, ...] = ()
    """Columns that hold personal data: the table's metadata never records their values
    (no per-file statistics of them), so an erasure that rewrites the data leaves no trace."""
    description: str = ""
    owner: str | None = Field(default=None, min_length=1)
    """Who answers for the table's layout (compaction); ``maintenance.owner`` in the policy
    file when not declared."""
    target_file_bytes: int | None = Field(default=None, ge=1024)
    """The data file size compaction writes; ``maintenance.target_file_bytes`` when not declared."""

    model_config = ConfigDict(populate_by_name=True)  # merged with StrictModel's

    @model_validator(mode="after")
    def _personal_columns_exist(self) -> TableSettings:
        names = set(re.findall(r"`?(\w+)`?\s+[A-Za-z]", self.schema_ddl))
        unknown = [c for c in self.personal if c not in names]
        if unknown:
            raise ValueError(f"personal columns {unknown} are not in the schema")
        return self


PAIR_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
"""A declared pair's name in ``reconcile.pairs`` (what an error names: ``reconcile.pairs.<name>.key``)."""


def key_columns(key: str) -> tuple[str, str]:
    """A pair's key, ``COLUMN`` or ``SOURCE_COLUMN:DERIVED_COLUMN``, as (source column, derived
    column); ValueError for anything else (a declaration's ``key:``, ``reconcile --key``)."""
    parts = [p.strip() for p in key.split(":")]
    if len(parts) > 2 or not all(parts):
        raise ValueError("name one column, or SOURCE_COLUMN:DERIVED_COLUMN")
    return parts[0], parts[-1]


class ReconcilePairSettings(StrictModel):
    """One declared pair of ``reconcile.pairs`` (``lakehouse reconcile SOURCE DERIVED``): which
    table derives from which, by which key and projection, and which side wins.

    Only the shape is checked here; the tables, the key's columns and their types, and the
    projection's registered name are checked when ``lakehouse reconcile`` starts, before Spark
    (:func:`workloads.reconciliation.pairs.declared_pairs`)."""

    source: str = Field(min_length=1)
    derived: str = Field(min_length=1)
    key: str
    """The key column, or ``SOURCE_COLUMN:DERIVED_COLUMN`` when the two sides name it differently."""
    authority: Literal["source"] | None = None
    """The side that wins (``source``: the derived store is repaired); none declared, ``--repair``
    is refused."""
    projection: str | None = Field(default=None, min_length=1)
    """The registered name of the projection from pinned source rows to the rows the derived
    store should hold (a Python function of ``workloads/reconciliation/pairs.py``); none: the
    source rows themselves."""
    derived_where: str | None = Field(default=None, min_length=1)
    """A SQL condition: the part of the derived store the pair covers (none: all of it)."""
    columns: tuple[str, ...] | None = None
    """The compared columns besides the key (none: every column both sides have)."""
    report_only: str | None = Field(default=None, min_length=1)
    """Why ``--repair`` is refused for this pair although it has an authority (none: allowed)."""
    description: str = ""

    @field_validator("key")
    @classmethod
    def _one_column_or_two(cls, value: str) -> str:
        source, derived = key_columns(value)
        return source if ":" not in value else f"{source}:{derived}"

    @property
    def source_key(self) -> str:
        return key_columns(self.key)[0]

    @property
    def derived_key(self) -> str:
        return key_columns(self.key)[1]


class ReconcileSettings(StrictModel):
    """``reconcile:``: the pairs ``lakehouse reconcile`` may compare (its thresholds and budgets
    are policies: ``reconcile:`` in ``conf/policies.yaml``)."""

    pairs: dict[str, ReconcilePairSettings] = Field(default_factory=dict)
    """Name -> declaration; a pair no entry declares is refused (nobody said which side wins)."""

    @field_validator("pairs")
    @classmethod
    def _one_declaration_per_pair(
        cls, pairs: dict[str, ReconcilePairSettings]
    ) -> dict[str, ReconcilePairSettings]:
        seen: dict[tuple[str, str], str] = {}
        for name, pair in pairs.items():
            if not PAIR_NAME.fullmatch(name):
                raise ValueError(f"pair name {name!r}: letters, digits, '_' and '-' only")
            other = seen.setdefault((pair.source, pair.derived), name)
            if other != name:
                raise ValueError(f"{other!r} and {name!r} both declare {pair.source} -> {pair.derived}")
        return pairs


def _default_zone_formats() -> dict[Zone, TableFormat]:
    return {
        Zone.BRONZE: TableFormat.DELTA,
        Zone.SILVER: TableFormat.ICEBERG,
        Zone.GOLD: TableFormat.ICEBERG,
        Zone.OPS: TableFormat.ICEBERG,
    }


class LakehouseConfig(StrictModel):
    """The whole configuration of one lakehouse."""

    workdir: Path = Path("work")
    warehouse: str | None = None
    spark: SparkSettings = Field(default_factory=SparkSettings)
    jars: JarSettings = Field(default_factory=JarSettings)
    iceberg: IcebergCatalogSettings = Field(default_factory=IcebergCatalogSettings)
    mlflow: MlflowSettings = Field(default_factory=MlflowSettings)
    lineage: LineageSettings = Field(default_factory=LineageSettings)
    zone_formats: dict[Zone, TableFormat] = Field(default_factory=_default_zone_formats)
    force_format: TableFormat | None = None
    reconcile: ReconcileSettings = Field(default_factory=ReconcileSettings)
    """The declared pairs of ``lakehouse reconcile`` (docs/reference/configuration.md)."""
    instance: str = ""
    """Optional suffix that gives one lakehouse its own namespaces (``silver_<instance>``)
    and Delta folder inside a shared catalog and warehouse: dev/staging side by side, or
    isolated tests in one Spark session."""
    tables: dict[str, TableSettings] = Field(default_factory=dict)
    history_days: int = Field(default=90, ge=1)
    """Days of history each table is created to keep under the formats' default maintenance
    (Iceberg ``history.expire.max-snapshot-age-ms``, Delta's file and log retention)."""
    source_path: Path | None = None
    engines_file: Path | None = None
    """The declared engines a command reads when it is given no ``--engines``; unset: the work
    dir's (:meth:`workdir_file`) if it exists, as after ``make demo``, else ``conf/engines.yaml``."""
    policies_file: Path | None = None
    """The policy file a command reads when it is given no ``--policies``; unset: the work dir's
    (:meth:`workdir_file`) if it exists, else ``conf/policies.yaml``."""

    @field_validator("instance")
    @classmethod
    def _instance_identifier(cls, value: str) -> str:
        if value and not value.isidentifier():
            raise ValueError("must be empty or a plain identifier (letters, digits, '_')")
        return value

    @field_validator("tables")
    @classmethod
    def _logical_names(cls, tables: dict[str, TableSettings]) -> dict[str, TableSettings]:
        for name, table in tables.items():
            parts = name.split(".")
            if len(parts) != 2 or not all(p.isidentifier() for p in parts):
                raise ValueError(f"table name {name!r} must look like '<zone>.<name>'")
            if parts[0] != table.zone.value:
                raise ValueError(f"table {name!r} is in zone {table.zone.value!r}; prefix differs")
        return tables

    # -- derived locations ---------------------------------------------------------------

    @property
    def workdir_path(self) -> Path:
        return self.workdir.expanduser().resolve()

    def workdir_file(self, kind: Literal["engines", "policies"]) -> Path:
        """The work dir's own engines or policies file: ``<workdir>/engines.yaml`` (with an
        ``instance``, ``<workdir>/engines-<instance>.yaml``), where ``lakehouse demo`` keeps the
        releases it declares. A command given no ``--engines`` and no ``engines_file`` reads it
        when it exists (docs/reference/configuration.md)."""
        return self.workdir_path / (f"{kind}-{self.instance}.yaml" if self.instance else f"{kind}.yaml")

    @property
    def warehouse_uri(self) -> str:
        """Where table data lives (a local folder by default, an object store on clusters)."""
        if self.warehouse:
            return _as_uri(self.warehouse)
        return (self.workdir_path / "warehouse").as_uri()

    @property
    def iceberg_uri(self) -> str:
        if self.iceberg.uri:
            return self.iceberg.uri
        return f"jdbc:sqlite:{self.workdir_path / 'iceberg_catalog.db'}"

    @property
    def iceberg_on_postgres(self) -> bool:
        """True when the Iceberg catalog is a JDBC catalog on PostgreSQL (a team's shared catalog)."""
        return self.iceberg.type == "jdbc" and self.iceberg_uri.startswith(POSTGRES_JDBC_PREFIX)

    @property
    def jar_packages(self) -> tuple[str, ...]:
        """Every JVM package a session loads: ``jars.packages``, plus the PostgreSQL JDBC driver
        when the catalog is there (unless ``jars.packages`` already names a version of it)."""
        packages = self.jars.packages
        driver = self.jars.postgres_driver.rsplit(":", 1)[0] + ":"
        if self.iceberg_on_postgres and not any(p.startswith(driver) for p in packages):
            return (*packages, self.jars.postgres_driver)
        return packages

    @property
    def iceberg_warehouse_uri(self) -> str:
        return _as_uri(self.iceberg.warehouse) if self.iceberg.warehouse else self.warehouse_uri

    @property
    def mlflow_home(self) -> Path:
        """The embedded MLflow store's folder: ``mlflow.db`` and ``artifacts/``."""
        return self.workdir_path / "mlflow"

    @property
    def mlflow_tracking_uri(self) -> str:
        """The configured tracking server, or the embedded SQLite store under the work dir."""
        if self.mlflow.tracking_uri:
            return self.mlflow.tracking_uri
        return f"sqlite:///{self.mlflow_home / 'mlflow.db'}"

    @property
    def mlflow_experiment(self) -> str:
        """This lakehouse's experiment: one per instance, so lakehouses sharing a store stay apart."""
        return f"{self.mlflow.experiment}-{self.instance}" if self.instance else self.mlflow.experiment

    @property
    def lineage_path(self) -> Path:
        """Where the file transport appends the OpenLineage events (one JSON object a line)."""
        if self.lineage.path:
            return Path(self.lineage.path).expanduser().resolve()
        return self.workdir_path / "lineage" / "events.ndjson"

    @property
    def lineage_namespace(self) -> str:
        """The OpenLineage namespace of this lakehouse's jobs: one per instance."""
        base = self.lineage.namespace
        return f"{base}-{self.instance}" if self.instance else base

    @property
    def jar_cache_path(self) -> Path:
        return Path(self.jars.cache_dir).expanduser().resolve()

    def format_of(self, table: TableSettings) -> TableFormat:
        """The format a table is stored in: forced, declared, or its zone's default."""
        if self.force_format is not None:
            return self.force_format
        if table.format is not None:
            return table.format
        return self.zone_formats.get(table.zone, TableFormat.DELTA)

    def warehouse_of(self, table: TableSettings) -> str:
        """The warehouse URI a table's data lives under (Iceberg's may be its own)."""
        if self.format_of(table) is TableFormat.ICEBERG:
            return self.iceberg_warehouse_uri
        return self.warehouse_uri


def _as_uri(location: str) -> str:
    if "://" in location or location.startswith("file:"):
        return location
    return Path(location).expanduser().resolve().as_uri()


# -- loading --------------------------------------------------------------------------------


def load_config(
    path: Path | str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> LakehouseConfig:
    """Load the configuration: file, then environment overrides, then explicit overrides.

    ``overrides`` uses dotted keys (``{"workdir": "/tmp/x", "spark.master": "local[2]"}``)
    and is how command-line flags win over everything else.
    """
    conf_path = Path(path) if path is not None else DEFAULT_CONF_PATH
    raw = _read_with_base(conf_path)
    env = os.environ if environ is None else environ
    for dotted, value in _env_overrides(env).items():
        _set_dotted(raw, dotted, value, source=f"environment variable {_env_name(dotted)}")
    for dotted, value in (overrides or {}).items():
        if value is not None:
            _set_dotted(raw, dotted, value, source=f"flag for {dotted}")
    raw["source_path"] = str(conf_path.resolve())
    try:
        return LakehouseConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(conf_path, exc)) from None


EXTENDS_KEY = "extends"


def _read_with_base(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The file's keys over those of the file it ``extends:`` (a path relative to it), merged
    section by section: ``conf/cluster.example.yaml`` changes the catalog and the warehouse and
    keeps every table of ``conf/lakehouse.yaml``."""
    raw = _read_yaml(path)
    base = raw.pop(EXTENDS_KEY, None)
    if base is None:
        return raw
    if not isinstance(base, str) or not base:
        raise ConfigError(f"{path}: key '{EXTENDS_KEY}' must be the path of another configuration file")
    base_path = (path.parent / base).resolve()
    if base_path in seen or base_path == path.resolve():
        raise ConfigError(f"{path}: key '{EXTENDS_KEY}' makes a cycle through {base_path}")
    return _merged(_read_with_base(base_path, (*seen, path.resolve())), raw)


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read_yaml(path: Path) -> dict[str, Any]:
    return read_yaml_mapping(
        path,
        what="configuration file",
        hint="pass --conf PATH or create it (the shipped default is conf/lakehouse.yaml)",
    )


def _env_name(dotted: str) -> str:
    return ENV_PREFIX + "__".join(part.upper() for part in dotted.split("."))


def _env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name, value in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX):
            continue
        dotted = ".".join(part.lower() for part in name[len(ENV_PREFIX) :].split("__"))
        if not dotted:
            continue
        if dotted in VERBATIM_ENV_KEYS:
            found[dotted] = value
            continue
        try:
            found[dotted] = yaml.safe_load(value) if value != "" else ""
        except yaml.YAMLError:
            found[dotted] = value
    return found


def _set_dotted(raw: dict[str, Any], dotted: str, value: Any, *, source: str) -> None:
    node = raw
    parts = dotted.split(".")
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{source}: {part!r} is not a section, cannot set {dotted!r}")
        node = child
    node[parts[-1]] = value
