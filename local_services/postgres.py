"""A throwaway PostgreSQL server on loopback, for an Iceberg JDBC catalog a team would share.

The tests (``tests/conftest.py``) and the cluster demo start a real server with this module,
so that the catalog path a cluster uses (Spark's ``JdbcCatalog`` through the PostgreSQL JDBC
driver, pyiceberg's ``SqlCatalog`` through psycopg2) runs against PostgreSQL, not SQLite:

.. code-block:: python

    from local_services.postgres import local_postgres

    with local_postgres() as pg:           # initdb, a free port on 127.0.0.1, pg_ctl start
        pg.jdbc_uri                        # jdbc:postgresql://127.0.0.1:PORT/iceberg
        pg.user, pg.password               # the catalog's own role (not a superuser)
        pg.sqlalchemy_uri                  # postgresql+psycopg2://iceberg:...@127.0.0.1:PORT/iceberg
        pg.lakehouse_overrides()           # {"iceberg.type": "jdbc", "iceberg.uri": ..., ...}
        pg.lakehouse_env()                 # the same as LAKEHOUSE__ICEBERG__* variables
    # stopped (pg_ctl stop) and its folder removed, also when the block raised

From a shell script, ``python -m local_services.postgres``:

* ``run -- CMD ARGS...`` starts a server, runs the command with the ``LAKEHOUSE__ICEBERG__*``
  variables set (so every ``lakehouse`` command inside uses the PostgreSQL catalog), stops it
  whatever the command did, and exits with the command's code;
* ``start --dir DIR`` starts one and leaves it running: ``DIR/lakehouse.env`` (mode 0600) has
  ``export LAKEHOUSE__ICEBERG__...=...`` lines to ``source``, ``DIR/connection.json`` the same
  as JSON; ``stop --dir DIR`` stops it and removes ``DIR``;
* ``install`` installs Debian's ``postgresql`` package if no server binaries are found
  (``make setup`` runs it).

PostgreSQL refuses to run as root. As root (CI and these machines), the server runs as the
``postgres`` OS user (``runuser -u postgres --``, the user Debian's package creates) in a
folder that user owns. The server is tuned for throwaway use: ``fsync``, synchronous commit and
full-page writes are off, so it is fast and must never hold data anyone needs.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import logging
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from local_services.ports import free_port

log = logging.getLogger(__name__)

HOST: Final = "127.0.0.1"
SUPERUSER: Final = "postgres"
"""The server's bootstrap superuser (trusted on the server's own Unix socket only)."""
DATABASE: Final = "iceberg"
CATALOG_USER: Final = "iceberg"
"""The role the Iceberg catalog connects as: owns its database, nothing more."""
OS_USER: Final = "postgres"
"""The OS user the server runs as when this process is root."""
BINARIES: Final = ("initdb", "pg_ctl", "psql")
START_TIMEOUT_SECONDS: Final = 60
CONNECTION_FILE: Final = "connection.json"
ENV_FILE: Final = "lakehouse.env"

THROWAWAY_SETTINGS: Final = {
    "listen_addresses": HOST,
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "40",
    "shared_buffers": "32MB",
    "log_min_messages": "warning",
}


class LocalServiceError(RuntimeError):
    """A local service could not be installed, started or stopped; the message says why."""


@dataclass(frozen=True)
class LocalPostgres:
    """A running server: where it listens and the catalog's credentials."""

    port: int
    data_dir: Path
    socket_dir: Path
    bin_dir: Path
    password: str
    host: str = HOST
    database: str = DATABASE
    user: str = CATALOG_USER

    @property
    def jdbc_uri(self) -> str:
        """The URI Spark's JdbcCatalog connects to (``iceberg.uri``); credentials stay apart."""
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.database}"

    @property
    def sqlalchemy_uri(self) -> str:
        """The same database for SQLAlchemy (pyiceberg's SqlCatalog), credentials included."""
        return f"postgresql+psycopg2://{self.user}:{self.password}@{self.host}:{self.port}/{self.database}"

    def lakehouse_overrides(self) -> dict[str, str]:
        """Dotted-key overrides for ``lakehouse.config.load_config(overrides=...)``."""
        return {
            "iceberg.type": "jdbc",
            "iceberg.uri": self.jdbc_uri,
            "iceberg.user": self.user,
            "iceberg.password": self.password,
        }

    def lakehouse_env(self) -> dict[str, str]:
        """The same overrides as ``LAKEHOUSE__ICEBERG__*`` environment variables."""
        return {
            "LAKEHOUSE__" + "__".join(part.upper() for part in key.split(".")): value
            for key, value in self.lakehouse_overrides().items()
        }

    def stop(self) -> None:
        """Stop the server (fast shutdown); stopping a stopped server is a no-op."""
        if not (self.data_dir / "postmaster.pid").exists():
            return
        pg_ctl = str(self.bin_dir / "pg_ctl")
        _run([pg_ctl, "stop", "-D", str(self.data_dir), "-m", "fast", "-w"], as_owner=True)


@contextlib.contextmanager
def local_postgres(base_dir: Path | None = None) -> Iterator[LocalPostgres]:
    """Start a fresh server (see the module docstring), yield it, stop it and remove its folder.

    ``base_dir`` is where the server's folder is made (default: the system temp dir). As root
    the folder is handed to the ``postgres`` OS user, which must be able to reach it: a folder
    under a root-only (0700) parent, such as pytest's ``tmp_path``, will not do.
    """
    server = start(base_dir)
    try:
        yield server
    finally:
        try:
            server.stop()
        finally:
            shutil.rmtree(server.data_dir.parent, ignore_errors=True)


def start(base_dir: Path | None = None) -> LocalPostgres:
    """Start a fresh server and leave it running; the caller stops it (:meth:`LocalPostgres.stop`)."""
    bin_dir = find_binaries(install=True)
    folder = Path(tempfile.mkdtemp(prefix="lakehouse-pg-", dir=base_dir))
    data_dir, socket_dir = folder / "data", folder / "socket"
    socket_dir.mkdir()
    if _is_root():
        shutil.chown(folder, OS_USER)
        shutil.chown(socket_dir, OS_USER)
        _check_reachable_by_owner(folder)
    password = secrets.token_urlsafe(18)
    _run(
        [
            str(bin_dir / "initdb"),
            "-D",
            str(data_dir),
            "-U",
            SUPERUSER,
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ],
        as_owner=True,
    )
    port = _start_on_free_port(bin_dir, data_dir, socket_dir, folder / "server.log")
    server = LocalPostgres(
        port=port, data_dir=data_dir, socket_dir=socket_dir, bin_dir=bin_dir, password=password
    )
    try:
        _create_catalog_database(server)
    except BaseException:
        server.stop()
        raise
    log.info("PostgreSQL %s on %s:%d (%s)", bin_dir.parent.name, HOST, port, folder)
    return server


def _start_on_free_port(bin_dir: Path, data_dir: Path, socket_dir: Path, logfile: Path) -> int:
    """``pg_ctl start`` on a port free a moment ago; another taker in between gets a retry."""
    for attempt in range(3):
        port = free_port()
        options = {**THROWAWAY_SETTINGS, "port": str(port), "unix_socket_directories": str(socket_dir)}
        command = [
            str(bin_dir / "pg_ctl"),
            "start",
            "-D",
            str(data_dir),
            "-l",
            str(logfile),
            "-w",
            "-t",
            str(START_TIMEOUT_SECONDS),
            "-o",
            " ".join(f"-c {key}={shlex.quote(value)}" for key, value in options.items()),
        ]
        try:
            _run(command, as_owner=True)
            return port
        except LocalServiceError:
            if attempt == 2:
                tail = logfile.read_text(errors="replace")[-800:] if logfile.exists() else ""
                message = f"PostgreSQL did not start on {HOST}:{port}: {tail.strip()}"
                raise LocalServiceError(message) from None
            time.sleep(0.5)
    raise AssertionError("unreachable")


def _create_catalog_database(server: LocalPostgres) -> None:
    """The catalog's role (password login over TCP) and the database it owns."""
    script = (
        f"CREATE ROLE {server.user} LOGIN PASSWORD '{server.password}';\n"
        f"CREATE DATABASE {server.database} OWNER {server.user};\n"
    )
    _run(
        [
            str(server.bin_dir / "psql"),
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            str(server.socket_dir),
            "-p",
            str(server.port),
            "-U",
            SUPERUSER,
            "-d",
            "postgres",
            "-f",
            "-",
        ],
        as_owner=False,
        stdin=script,  # not on the command line, where `ps` would show the password
    )


# -- binaries ---------------------------------------------------------------------------------------


def find_binaries(*, install: bool = False) -> Path:
    """The folder holding ``initdb``, ``pg_ctl`` and ``psql``; installs them first if asked and missing.

    Debian keeps them in ``/usr/lib/postgresql/<major>/bin`` (not on ``PATH``); the newest
    major found there wins, then a folder on ``PATH`` that has all three.
    """
    found = _binary_dir()
    if found is None and install:
        install_postgres()
        found = _binary_dir()
    if found is None:
        raise LocalServiceError(
            "PostgreSQL server binaries (initdb, pg_ctl, psql) not found in /usr/lib/postgresql/*/bin "
            "or on PATH; install Debian's package: apt-get update && apt-get install -y postgresql"
        )
    return found


def _binary_dir() -> Path | None:
    candidates = sorted(
        (Path(p) for p in glob.glob("/usr/lib/postgresql/*/bin")),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    for folder in candidates:
        if all((folder / name).is_file() for name in BINARIES):
            return folder
    return None


def install_postgres() -> None:
    """Install Debian's ``postgresql`` package with apt-get (root only); a no-op if present.

    Debian's package also creates and starts its own ``main`` cluster on port 5432 where the
    machine has an init system; the servers of this module use their own folder and a free
    port, so the two never meet.
    """
    if _binary_dir() is not None:
        return
    if not _is_root() or shutil.which("apt-get") is None:
        raise LocalServiceError(
            "PostgreSQL is not installed and this process cannot install it (needs root and apt-get): "
            "run apt-get update && apt-get install -y postgresql"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", "postgresql"]
    for command in (["apt-get", "update"], install):
        print(f"local_services.postgres: {' '.join(command)}", file=sys.stderr)
        proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
            raise LocalServiceError(f"{' '.join(command)} failed ({proc.returncode}): {tail}")


# -- running as the right user -----------------------------------------------------------------------


def _is_root() -> bool:
    return os.geteuid() == 0


def _run(command: Sequence[str], *, as_owner: bool, stdin: str | None = None) -> None:
    """Run a server command; as root, ``as_owner`` runs it as the ``postgres`` OS user."""
    full = ["runuser", "-u", OS_USER, "--", *command] if as_owner and _is_root() else list(command)
    proc = subprocess.run(full, input=stdin, capture_output=True, text=True, check=False, cwd="/")
    if proc.returncode != 0:
        detail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-4:])
        raise LocalServiceError(f"{Path(command[0]).name} {command[1]} failed ({proc.returncode}): {detail}")


def _check_reachable_by_owner(folder: Path) -> None:
    probe = subprocess.run(["runuser", "-u", OS_USER, "--", "test", "-w", str(folder)], check=False)
    if probe.returncode != 0:
        raise LocalServiceError(
            f"{folder} is not reachable by the {OS_USER!r} OS user the server runs as (a parent folder is "
            f"private to root): pass a base dir under a world-traversable folder such as /tmp"
        )


# -- command line -----------------------------------------------------------------------------------


def _write_connection(server: LocalPostgres, folder: Path) -> None:
    details = {
        "jdbc_uri": server.jdbc_uri,
        "sqlalchemy_uri": server.sqlalchemy_uri,
        "host": server.host,
        "port": server.port,
        "database": server.database,
        "user": server.user,
        "password": server.password,
        "data_dir": str(server.data_dir),
        "socket_dir": str(server.socket_dir),
        "bin_dir": str(server.bin_dir),
    }
    for name, text in (
        (CONNECTION_FILE, json.dumps(details, indent=2) + "\n"),
        (ENV_FILE, "".join(f"export {k}={shlex.quote(v)}\n" for k, v in server.lakehouse_env().items())),
    ):
        path = folder / name
        path.touch(mode=0o600)
        path.write_text(text)


def _read_connection(folder: Path) -> LocalPostgres:
    details = json.loads((folder / CONNECTION_FILE).read_text())
    return LocalPostgres(
        port=int(details["port"]),
        data_dir=Path(details["data_dir"]),
        socket_dir=Path(details["socket_dir"]),
        bin_dir=Path(details["bin_dir"]),
        password=str(details["password"]),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m local_services.postgres", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="start a server, run CMD with LAKEHOUSE__ICEBERG__* set, stop it")
    run.add_argument("cmd", nargs=argparse.REMAINDER, help="the command (after --)")
    start_cmd = commands.add_parser("start", help="start a server and leave it running; details in DIR")
    start_cmd.add_argument(
        "--dir", type=Path, required=True, help="folder for connection.json and lakehouse.env"
    )
    stop_cmd = commands.add_parser("stop", help="stop the server started with start --dir DIR and remove DIR")
    stop_cmd.add_argument("--dir", type=Path, required=True)
    commands.add_parser("install", help="install Debian's postgresql package if the binaries are missing")
    args = parser.parse_args(argv)
    try:
        if args.command == "install":
            print(find_binaries(install=True))
            return 0
        if args.command == "start":
            args.dir.mkdir(parents=True, exist_ok=True)
            server = start()
            _write_connection(server, args.dir)
            print(f"PostgreSQL on {server.jdbc_uri} (user {server.user}); source {args.dir / ENV_FILE}")
            return 0
        if args.command == "stop":
            server = _read_connection(args.dir)
            server.stop()
            shutil.rmtree(server.data_dir.parent, ignore_errors=True)
            shutil.rmtree(args.dir, ignore_errors=True)
            return 0
        cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        if not cmd:
            parser.error("run needs a command: run -- CMD ARGS...")
        with local_postgres() as server:
            print(f"PostgreSQL on {server.jdbc_uri} (user {server.user})", file=sys.stderr)
            return subprocess.run(cmd, env={**os.environ, **server.lakehouse_env()}, check=False).returncode
    except LocalServiceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
