"""A Spark standalone cluster on 127.0.0.1: one master and one worker, from the pip pyspark.

The pip wheel has ``bin/spark-class`` but not ``sbin/start-master.sh``, so both daemons are
started with ``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker`` in
their own process group, on free ports, with ``SPARK_LOCAL_IP=127.0.0.1`` and the worker's
``--work-dir`` under the cluster's folder (its default, ``$SPARK_HOME/work``, is inside
site-packages). :class:`StandaloneCluster` is a context manager: leaving it stops both
daemons (and the executors the worker launched), also on an error or Ctrl-C.

``python -m local_services.spark_standalone --root DIR`` starts one and keeps it up until
Ctrl-C, printing the master URL (for trying ``spark-submit --master`` by hand).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from local_services.ports import free_port

log = logging.getLogger(__name__)

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 20.0


class ClusterError(RuntimeError):
    """The cluster did not come up (or answer) as expected; the message says which daemon and
    where its log is."""


def spark_home() -> Path:
    """The pip pyspark's folder: it holds ``bin/spark-class``, ``bin/spark-submit`` and ``jars/``."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def read_json(url: str, timeout: float = 5.0) -> dict[str, Any]:
    """GET a daemon's ``/json/`` status page."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        loaded: dict[str, Any] = json.load(response)
        return loaded


@dataclass(frozen=True)
class ClusterSettings:
    """What the one worker offers (this machine has 2 cores, shared)."""

    cores: int = 2
    memory: str = "2g"
    """The worker's memory for executors (``--memory``); an executor asks 1g by default."""
    daemon_memory: str = "512m"
    """Heap of the master and worker daemons themselves (``SPARK_DAEMON_MEMORY``)."""


@dataclass
class _Daemon:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    log_file: IO[bytes]

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def signal(self, signum: int) -> None:
        """Signal the daemon's process group: the daemon and the executors it launched."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signum)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        if self.alive:
            self.signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop in %.0f s: killing it", self.name, timeout)
                self.signal(signal.SIGKILL)
                self.process.wait(timeout)
        self.signal(signal.SIGKILL)  # executors left behind in the group, if any
        self.log_file.close()


class StandaloneCluster:
    """One master and one worker on 127.0.0.1 under ``root`` (logs, the worker's work dir)."""

    def __init__(self, root: Path, settings: ClusterSettings = ClusterSettings()) -> None:
        self.root = root.resolve()
        self.settings = settings
        self.master_port = free_port()
        self.master_webui_port = free_port()
        self.worker_webui_port = free_port()
        self._master: _Daemon | None = None
        self._worker: _Daemon | None = None
        self._worker_starts = 0

    # -- addresses ---------------------------------------------------------------------------

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def master_webui(self) -> str:
        return f"http://127.0.0.1:{self.master_webui_port}"

    @property
    def worker_work_dir(self) -> Path:
        return self.root / "worker-work"

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start the master, wait until it is ALIVE, then the worker, and wait until it registered."""
        self.root.mkdir(parents=True, exist_ok=True)
        args = ["--host", "127.0.0.1", "--port", str(self.master_port)]
        args += ["--webui-port", str(self.master_webui_port)]
        self._master = self._spawn("master", MASTER_CLASS, args)
        self._wait(
            "the master",
            self._master,
            lambda: self.master_state().get("status") == "ALIVE",
        )
        log.info("master %s up (web UI %s)", self.master_url, self.master_webui)
        self.start_worker()

    def start_worker(self) -> None:
        """Start (or restart, after :meth:`kill_worker`) the worker and wait until the master has it."""
        self.worker_work_dir.mkdir(parents=True, exist_ok=True)
        self._worker_starts += 1
        args = [self.master_url, "--host", "127.0.0.1", "--cores", str(self.settings.cores)]
        args += ["--memory", self.settings.memory, "--work-dir", str(self.worker_work_dir)]
        args += ["--webui-port", str(self.worker_webui_port)]
        name = "worker" if self._worker_starts == 1 else f"worker-{self._worker_starts}"
        self._worker = self._spawn(name, WORKER_CLASS, args)
        self._wait("the worker", self._worker, lambda: self.master_state().get("aliveworkers", 0) >= 1)
        log.info(
            "worker up: %d cores, %s (web UI %s)",
            self.settings.cores,
            self.settings.memory,
            self.worker_webui,
        )

    def kill_worker(self) -> None:
        """Lose the worker as a machine is lost: SIGKILL to it and its executors, no goodbye."""
        if self._worker is None or not self._worker.alive:
            raise ClusterError("no worker is running")
        self._worker.signal(signal.SIGKILL)
        self._worker.process.wait(STOP_TIMEOUT_S)
        self._worker.log_file.close()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline and self.master_state().get("aliveworkers", 0) > 0:
            time.sleep(0.5)
        log.info("worker killed (SIGKILL)")

    def stop(self) -> None:
        """Stop the worker (and its executors), then the master. Safe to call twice."""
        for daemon in (self._worker, self._master):
            if daemon is not None and not daemon.log_file.closed:
                daemon.stop()
            elif daemon is not None:
                daemon.signal(signal.SIGKILL)
        self._worker = self._master = None

    # -- status --------------------------------------------------------------------------------

    def master_state(self) -> dict[str, Any]:
        """The master's ``/json/``: workers, active and completed applications."""
        return read_json(f"{self.master_webui}/json/")

    @property
    def worker_webui(self) -> str:
        """The alive worker's web UI, as the master knows it (Spark moves on if a port is taken)."""
        alive = [w for w in self.master_state().get("workers", []) if w.get("state") == "ALIVE"]
        return str(alive[0]["webuiaddress"]) if alive else f"http://127.0.0.1:{self.worker_webui_port}"

    def worker_state(self) -> dict[str, Any]:
        """The alive worker's ``/json/``: its running and finished executors, per application."""
        return read_json(f"{self.worker_webui}/json/")

    def logs(self) -> Iterator[Path]:
        """The daemons' log files."""
        yield from sorted(self.root.glob("*.log"))

    # -- internals -----------------------------------------------------------------------------

    def _spawn(self, name: str, main_class: str, args: list[str]) -> _Daemon:
        home = spark_home()
        env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": self.settings.daemon_memory,
            "SPARK_LOG_DIR": str(self.root),
        }
        log_path = self.root / f"{name}.log"
        log_file = log_path.open("ab")
        command = [str(home / "bin" / "spark-class"), main_class, *args]
        log.debug("starting %s: %s", name, " ".join(command))
        process = subprocess.Popen(
            command,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=self.root,
            start_new_session=True,  # its own process group: stopped as one, not by a terminal's ^C
        )
        return _Daemon(name, process, log_path, log_file)

    def _wait(self, what: str, daemon: _Daemon, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if not daemon.alive:
                raise ClusterError(f"{what} exited with {daemon.process.returncode}: see {daemon.log_path}")
            try:
                if ready():
                    return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            time.sleep(0.5)
        raise ClusterError(f"{what} was not up after {START_TIMEOUT_S:.0f} s: see {daemon.log_path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A Spark standalone master and worker on 127.0.0.1")
    parser.add_argument("--root", type=Path, required=True, help="folder for logs and the worker's work dir")
    parser.add_argument("--cores", type=int, default=ClusterSettings.cores)
    parser.add_argument("--memory", default=ClusterSettings.memory)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    with StandaloneCluster(args.root, ClusterSettings(cores=args.cores, memory=args.memory)) as cluster:
        print(cluster.master_url, flush=True)
        print(f"master UI {cluster.master_webui}; Ctrl-C stops the cluster", file=sys.stderr)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
