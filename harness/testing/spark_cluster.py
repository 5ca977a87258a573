"""A Spark standalone cluster on loopback: a master and workers, each its own JVM,
launched with the classes PySpark ships (``bin/spark-class``). For the test and the
bench that check a run on a real cluster (``spark://``) rather than ``local[*]``.

::

    with StandaloneCluster(workers=2, scratch=tmp) as cluster:
        check_run(run_dir, spark_master=cluster.master)
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from types import TracebackType

from harness.check.engine.state import spark_home
from harness.errors import CheckError

__all__ = ["StandaloneCluster"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class StandaloneCluster:
    """``workers`` workers of ``cores`` cores and ``memory`` each; logs and work
    directories under ``scratch``. Every process is stopped on exit, errors included.

    ``java_options`` go to every JVM of the cluster, the executors the workers launch
    included (as ``JAVA_TOOL_OPTIONS``): ``-XX:TieredStopAtLevel=1`` (the quick JIT
    only) makes a short-lived cluster start and run a small check about a third faster
    (for small checks: the optimizing compiler never runs)."""

    def __init__(self, scratch: Path, workers: int = 2, cores: int = 1, memory: str = "1g",
                 start_timeout_s: float = 120.0, java_options: str = "") -> None:
        self.home = spark_home()
        self.scratch = Path(scratch)
        self.workers, self.cores, self.memory = workers, cores, memory
        self.java_options = java_options
        self.timeout = start_timeout_s
        self.port, self.ui_port = _free_port(), _free_port()
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def master(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def __enter__(self) -> StandaloneCluster:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _launch(self, name: str, *args: str) -> None:
        env = {**os.environ, "SPARK_HOME": str(self.home), "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_NO_DAEMONIZE": "1", "SPARK_LOG_DIR": str(self.scratch)}
        if self.java_options:
            env["JAVA_TOOL_OPTIONS"] = self.java_options
        with open(self.scratch / f"{name}.log", "wb") as log:
            self.procs.append(subprocess.Popen([str(self.home / "bin" / "spark-class"), *args], env=env,
                                               stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                               start_new_session=True))

    def _start(self) -> None:
        self.scratch.mkdir(parents=True, exist_ok=True)
        self._launch("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(self.port), "--webui-port", str(self.ui_port))
        for i in range(self.workers):
            work = self.scratch / f"worker-{i}"
            work.mkdir(exist_ok=True)
            self._launch(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                         "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work),
                         "--webui-port", str(_free_port()), self.master)
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            dead = [p.pid for p in self.procs if p.poll() is not None]
            if dead:
                raise CheckError(f"a Spark standalone process exited (pid {dead}); logs in {self.scratch}")
            if self.alive_workers() >= self.workers:
                return
            time.sleep(0.5)
        raise CheckError(f"the standalone cluster did not get {self.workers} workers in {self.timeout:.0f}s; "
                         f"logs in {self.scratch}")

    def alive_workers(self) -> int:
        """Workers the master counts as alive (its status page's JSON, on loopback)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as resp:
                return int(json.load(resp).get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def stop(self) -> None:
        for proc in reversed(self.procs):  # workers first
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in self.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs.clear()
