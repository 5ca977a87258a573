"""Java workloads: a single-file Java program (``harness/clients/java/``) compiled and run
with the Java client of a cluster's image, in a helper container on the cluster's network.

The container is labelled like the cluster's containers with this process as owner (so
leftovers of a dead run are removed) and mounts the run directory: the program writes
``history/<name>.jsonl`` there and polls a stop file and a go file (the start barrier of
a case's Java producers). It writes ``{"status": "ready"}`` on a first ``meta`` line once
connected. Subclasses give the source, the libraries and the program's properties.
"""

from __future__ import annotations

import os
import shlex
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BackendError
from ..history import read_events
from .kafka import WorkloadStats

if TYPE_CHECKING:
    from ..backend.cluster import Cluster

__all__ = ["JavaProgram", "RUN_MOUNT", "SOURCES"]

#: the Java sources (package data) and where the run directory is mounted in the container
SOURCES = Path(__file__).with_name("java")
RUN_MOUNT = "/run-dir"
#: the history writer every program is compiled with
HISTORY_SOURCE = "History.java"
#: the programs' JVM options, unless $HARNESS_JAVA_OPTS gives others (see execute)
JAVA_OPTS = "-Xmx1g -XX:+UseSerialGC"


def java_opts() -> str:
    """The workload JVMs' options: $HARNESS_JAVA_OPTS (shell words) or :data:`JAVA_OPTS`."""
    given = os.environ.get("HARNESS_JAVA_OPTS", "").strip()
    return shlex.join(shlex.split(given)) if given else JAVA_OPTS


class JavaProgram:
    """One run of a Java workload program; ``run`` returns its :class:`WorkloadStats`."""

    #: the program's source file in :data:`SOURCES` (its class has the file's name)
    source = ""
    #: the image's client libraries (a glob of jars; javac run as a module does not expand
    #: it, the shell does)
    libs = ""

    def __init__(self, cluster: Cluster, run_dir: Path, name: str, ready: threading.Event | None = None,
                 version: str | None = None) -> None:
        self.cluster = cluster
        self.run_dir = Path(run_dir).resolve()
        self.name = name
        self.ready = ready or threading.Event()
        self.stats = WorkloadStats(name)
        self.history = self.run_dir / "history" / f"{name}.jsonl"
        self.java_dir = self.run_dir / "java"
        #: the image version whose client runs the program (None: the cluster's)
        self.version = version
        #: False: the program waits after connecting until go() (Workloads.release) is called
        self.go_now = True

    def go(self) -> None:
        """Lets the connected program start sending (the start barrier of a case's producers)."""
        self.java_dir.mkdir(parents=True, exist_ok=True)
        (self.java_dir / f"{self.name}.go").write_text("go\n")

    @staticmethod
    def properties(**values: Any) -> str:
        return "".join(f"{k}={'' if v is None else v}\n" for k, v in values.items())

    def files(self) -> dict[str, str]:
        """Paths (in the container) the program reads: history, stop file, go file."""
        return {"history": f"{RUN_MOUNT}/history/{self.name}.jsonl",
                "stop_file": f"{RUN_MOUNT}/java/{self.name}.stop",
                "go_file": f"{RUN_MOUNT}/java/{self.name}.go"}

    def execute(self, props: str, *, stop: threading.Event | None, max_s: float,
                drain_timeout_s: float) -> WorkloadStats:
        """Compiles (once per run directory and program) and runs the program with ``props``
        until it exits; ``stop`` makes it stop sending (the stop file), a hard deadline
        kills it. A non-zero exit is a BackendError with the program's last lines."""
        self.java_dir.mkdir(parents=True, exist_ok=True)
        self.history.parent.mkdir(parents=True, exist_ok=True)
        for source in (self.source, HISTORY_SOURCE):
            shutil.copyfile(SOURCES / source, self.java_dir / source)
        stop_file = self.java_dir / f"{self.name}.stop"
        stop_file.unlink(missing_ok=True)
        (self.java_dir / f"{self.name}.go").unlink(missing_ok=True)
        if self.go_now:
            self.go()
        (self.java_dir / f"{self.name}.properties").write_text(props)
        main = self.source.removesuffix(".java")
        classes = f"classes-{main}"
        # compiled once per run directory (javac), then run from the class; a second workload of
        # the same run only starts a JVM. The lock keeps two workloads from compiling at once.
        # A 1 GB heap at most: a producer holds up to its client's 64 MB of records in flight,
        # and in 256 MB the serial collector promoted them and collected the whole heap every
        # tenth of a second (1-KB records: 0.69 of pulsar-perf's records/s, 0.80 with 1 GB).
        script = (f"cd {RUN_MOUNT}/java && "
                  f"(flock 9; test -f {classes}/{main}.class || "
                  f"java -m jdk.compiler/com.sun.tools.javac.Main -nowarn -d {classes} "
                  f"-cp \"$(printf '%s:' {self.libs}.jar)\" {self.source} {HISTORY_SOURCE}"
                  f") 9>compile.lock && "
                  f"exec java {java_opts()} -cp '{RUN_MOUNT}/java/{classes}:{self.libs}' {main} "
                  f"{RUN_MOUNT}/java/{self.name}.properties")
        container_name = f"chaos-{self.cluster.spec.system}-{self.name}-{uuid.uuid4().hex[:6]}"
        start = time.monotonic()
        try:  # a helper container of the cluster's image, on its network, owned by this process
            box = self.cluster.run_helper(container_name, ["sh", "-c", script], role="workload",
                                          mounts={str(self.run_dir): RUN_MOUNT}, working_dir=RUN_MOUNT,
                                          version=self.version)
        except BackendError as exc:
            raise BackendError(f"the Java workload {self.name}: {exc}") from exc
        hard_end = start + max_s + drain_timeout_s + 60
        try:
            stopping = False
            kill_at = hard_end
            while True:
                if box.status in ("exited", "dead"):  # Container.status inspects it afresh
                    break
                if not self.ready.is_set() and self._has_ready():
                    self.ready.set()
                if stop is not None and stop.is_set() and not stopping:
                    stop_file.write_text("stop\n")
                    stopping = True  # the program stops sending, drains, exits
                    kill_at = min(hard_end, time.monotonic() + drain_timeout_s + 20)
                if time.monotonic() > kill_at:
                    box.kill()
                    break
                time.sleep(0.2)
            code = box.attrs().get("State", {}).get("ExitCode")
            logs = box.logs(tail=30)
        finally:
            try:
                box.remove()
            except BackendError:
                pass  # already gone; the label sweep of leftovers is the guarantee
            self.ready.set()
        (self.java_dir / f"{self.name}.log").write_text(logs)
        if code != 0:
            raise BackendError(f"the Java workload {self.name} exited with code {code}: "
                               f"{logs.strip()[-800:]}")
        self._count()
        self.stats.seconds = time.monotonic() - start
        return self.stats

    def _has_ready(self) -> bool:
        try:
            with open(self.history, encoding="utf-8") as fh:
                return '"status":"ready"' in fh.readline()
        except OSError:
            return False

    def _count(self) -> None:
        for e in read_events(self.history):
            kind = e["type"]
            if kind == "invoke":
                self.stats.sent += 1
            elif kind == "ok":
                self.stats.ok += 1
            elif kind in ("fail", "info"):
                setattr(self.stats, kind, getattr(self.stats, kind) + 1)
                err = str(e.get("error", "?")).split(":", 1)[0]
                self.stats.errors[err] = self.stats.errors.get(err, 0) + 1

    def close(self) -> None:
        pass
