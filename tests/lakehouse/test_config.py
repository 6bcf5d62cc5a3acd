"""Configuration: strict keys, types, missing files, environment overrides, flag precedence."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse.config import TableFormat, Zone, load_config
from lakehouse.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "lakehouse.yaml"
    path.write_text(text)
    return path


def test_shipped_default_mixes_formats_and_names_every_zone() -> None:
    config = load_config(REPO / "conf" / "lakehouse.yaml", environ={})
    formats = {config.format_of(t) for t in config.tables.values()}
    assert formats == {TableFormat.DELTA, TableFormat.ICEBERG}
    assert {t.zone for t in config.tables.values()} == set(Zone)
    assert config.iceberg_uri.startswith("jdbc:sqlite:")
    assert config.iceberg_uri.endswith("/work/iceberg_catalog.db")


def test_unknown_key_names_file_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, "spark:\n  masterr: local[2]\n")
    with pytest.raises(ConfigError, match=r"lakehouse.yaml: unknown key 'spark.masterr'"):
        load_config(path, environ={})


def test_unknown_key_inside_a_table_is_named(tmp_path: Path) -> None:
    path = write(
        tmp_path, "tables:\n  silver.x:\n    zone: silver\n    schema: a INT\n    partiton_by: [a]\n"
    )
    with pytest.raises(ConfigError, match=r"unknown key 'tables.silver.x.partiton_by'"):
        load_config(path, environ={})


def test_wrong_type_names_key_and_value(tmp_path: Path) -> None:
    path = write(tmp_path, "spark:\n  shuffle_partitions: many\n")
    with pytest.raises(ConfigError, match=r"key 'spark.shuffle_partitions' has invalid value 'many'"):
        load_config(path, environ={})


def test_wrong_enum_value_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "zone_formats:\n  bronze: hudi\n")
    with pytest.raises(ConfigError, match=r"zone_formats.bronze"):
        load_config(path, environ={})


def test_table_name_must_match_its_zone(tmp_path: Path) -> None:
    path = write(tmp_path, "tables:\n  gold.x:\n    zone: silver\n    schema: a INT\n")
    with pytest.raises(ConfigError, match="prefix differs"):
        load_config(path, environ={})


def test_missing_file_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope.yaml: configuration file not found"):
        load_config(tmp_path / "nope.yaml", environ={})


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "spark:\n  master: [unclosed\n")
    with pytest.raises(ConfigError, match=r"lakehouse.yaml: line \d+ is not valid YAML"):
        load_config(path, environ={})


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "spark:\n  master: local[4]\n  shuffle_partitions: 8\n")
    env = {"LAKEHOUSE__SPARK__MASTER": "local[1]", "LAKEHOUSE__SPARK__SHUFFLE_PARTITIONS": "3"}
    config = load_config(path, environ=env)
    assert config.spark.master == "local[1]"
    assert config.spark.shuffle_partitions == 3


def test_java_options_are_appended_to_the_drivers_own_not_replacing_them(tmp_path: Path) -> None:
    from lakehouse.session import session_conf

    path = write(tmp_path, "{}\n")
    env = {"LAKEHOUSE__SPARK__JAVA_OPTIONS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
    options = session_conf(load_config(path, environ=env))["spark.driver.extraJavaOptions"].split()
    assert options[-2:] == ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
    assert any(o.startswith("-Dlog4j2.configurationFile=") for o in options), "the toolkit's own stay"
    plain = session_conf(load_config(path, environ={}))["spark.driver.extraJavaOptions"].split()
    assert plain == options[:-2]


def test_unknown_environment_key_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "{}\n")
    with pytest.raises(ConfigError, match=r"unknown key 'spark.mastr'"):
        load_config(path, environ={"LAKEHOUSE__SPARK__MASTR": "local[1]"})


def test_flags_win_over_environment_and_file(tmp_path: Path) -> None:
    path = write(tmp_path, "workdir: from-file\n")
    config = load_config(
        path,
        environ={"LAKEHOUSE__WORKDIR": str(tmp_path / "from-env")},
        overrides={"workdir": str(tmp_path / "from-flag")},
    )
    assert config.workdir_path == (tmp_path / "from-flag").resolve()
    env_only = load_config(path, environ={"LAKEHOUSE__WORKDIR": str(tmp_path / "from-env")})
    assert env_only.workdir_path == (tmp_path / "from-env").resolve()


def test_force_format_overrides_every_table(tmp_path: Path) -> None:
    config = load_config(REPO / "conf" / "lakehouse.yaml", environ={}, overrides={"force_format": "delta"})
    assert {config.format_of(t) for t in config.tables.values()} == {TableFormat.DELTA}


def test_a_postgresql_catalog_loads_its_driver_and_keeps_its_password_out_of_submit_args(
    tmp_path: Path,
) -> None:
    from lakehouse.session import runtime_conf, session_conf, submit_args

    path = write(tmp_path, "iceberg:\n  uri: jdbc:postgresql://catalog-db:5432/iceberg\n  user: lake\n")
    # digits only: read verbatim, not as the YAML number 7 (which would lose the zero)
    config = load_config(path, environ={"LAKEHOUSE__ICEBERG__PASSWORD": "007"})
    assert config.iceberg_on_postgres
    assert config.iceberg.password is not None
    assert config.iceberg.password.get_secret_value() == "007"
    assert "007" not in repr(config)
    assert config.jar_packages[-1] == config.jars.postgres_driver
    assert config.jars.postgres_driver.startswith("org.postgresql:postgresql:")
    args = submit_args(config)
    assert config.jars.postgres_driver in args[args.index("--packages") + 1].split(",")
    assert "spark.sql.catalog.lake.jdbc.user=lake" in args
    assert not any("password" in a or "007" in a for a in args)
    # the driver sets it itself: in the local session, and when joining spark-submit's
    assert session_conf(config)["spark.sql.catalog.lake.jdbc.password"] == "007"
    assert runtime_conf(config)["spark.sql.catalog.lake.jdbc.password"] == "007"

    embedded = load_config(REPO / "conf" / "lakehouse.yaml", environ={})
    assert not embedded.iceberg_on_postgres
    assert embedded.jar_packages == embedded.jars.packages


def test_a_bad_password_is_named_not_shown_and_credentials_have_one_place(tmp_path: Path) -> None:
    path = write(tmp_path, "iceberg:\n  password: [hunter2]\n")
    with pytest.raises(ConfigError, match=r"key 'iceberg.password' has an invalid value \(not shown") as bad:
        load_config(path, environ={})
    assert "hunter2" not in str(bad.value)
    path = write(tmp_path, "iceberg:\n  properties: {jdbc.password: hunter2}\n")
    with pytest.raises(ConfigError, match=r"set iceberg.user and iceberg.password") as doubled:
        load_config(path, environ={})
    assert "hunter2" not in str(doubled.value)


def test_the_cluster_example_extends_the_shipped_file_with_a_postgresql_catalog(tmp_path: Path) -> None:
    shipped = load_config(REPO / "conf" / "lakehouse.yaml", environ={})
    cluster = load_config(REPO / "conf" / "cluster.example.yaml", environ={})
    assert cluster.iceberg_on_postgres
    assert cluster.iceberg.uri == "jdbc:postgresql://catalog-db:5432/iceberg"
    assert cluster.iceberg.user == "iceberg"
    assert cluster.iceberg.password is None, "the example never holds a password"
    assert cluster.warehouse_uri == "s3a://my-bucket/lakehouse"
    assert cluster.spark.master == "yarn"
    assert cluster.spark.driver_memory == shipped.spark.driver_memory, "sections merge key by key"
    assert cluster.tables == shipped.tables
    assert cluster.zone_formats == shipped.zone_formats

    loop = write(tmp_path, "extends: lakehouse.yaml\n")
    with pytest.raises(ConfigError, match="makes a cycle"):
        load_config(loop, environ={})
    missing = tmp_path / "other.yaml"
    missing.write_text("extends: nowhere.yaml\n")
    with pytest.raises(ConfigError, match=r"nowhere\.yaml: configuration file not found"):
        load_config(missing, environ={})


def test_pyspark_records_no_python_call_sites_unless_the_user_asks() -> None:
    """Off in the local session and when joining spark-submit's (``spark.conf`` wins)."""
    from lakehouse.session import PYTHON_CALL_SITES, runtime_conf, session_conf

    shipped = load_config(REPO / "conf" / "lakehouse.yaml", environ={})
    assert session_conf(shipped)[PYTHON_CALL_SITES] == runtime_conf(shipped)[PYTHON_CALL_SITES] == "false"
    asked = shipped.model_copy(
        update={"spark": shipped.spark.model_copy(update={"conf": {PYTHON_CALL_SITES: "true"}})}
    )
    assert session_conf(asked)[PYTHON_CALL_SITES] == "true"
