"""The warm checker: one local Spark Connect server that every ``harness`` process and
pytest session shares, so a check pays the JVM's start and warm-up once, not per command.

The first check that needs it starts it (:func:`ensure`): a small supervisor process
(``python -m harness.check.engine.server serve``, in a session of its own so that Ctrl-C or a
``kill -9`` of the harness leaves it alone) launches the Spark Connect server with
``local[*]`` on a free loopback port, writes ``server.json`` in the state directory,
and stops the server when it has been idle for :data:`IDLE_S` seconds (no check in
progress and none started since), when the JVM dies, or on SIGTERM
(:func:`stop`; ``harness clean`` calls it). A check holds a shared lock on ``in-use``
while it runs (:func:`using`), so an idle stop never cuts one short.

A server runs one Python and one pyspark (its Python workers are the interpreter's, its
jars the pyspark's), so each interpreter has its own (:func:`server_dir`): a process of
another Python never replaces a server that a check of this one may be using.

State directory: ``$HARNESS_SPARK_STATE``, else ``$XDG_CACHE_HOME/harness/spark-connect``
(``~/.cache/...``), and in it one directory per interpreter and pyspark version;
``server.log`` there has the server's output, and ``tmp/`` Spark's own temporary files
(its block manager's, Spark Connect's artifacts). A server removes them when it stops; one
killed with ``kill -9`` leaves them, and the next server in that directory, or ``harness
clean`` (:func:`remove_leftovers`), removes them.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import hashlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from harness.check.engine import aot
from harness.check.engine.conf import server_conf
from harness.check.engine.state import alive, pyspark_version, spark_home, state_dir
from harness.errors import CheckError

__all__ = ["IDLE_S", "Server", "alive", "check_settings", "ensure", "remove_leftovers", "running",
           "server_dir", "servers", "spark_home", "state_dir", "stop", "using"]

_IDLE_DEFAULT_S = 900.0


def idle_s(strict: bool = False) -> float:
    """``$HARNESS_SPARK_IDLE_S``, seconds, if it is a positive number; else 900 (``strict``:
    a CheckError naming the variable, which :func:`ensure` raises for a bad value)."""
    given = (os.environ.get("HARNESS_SPARK_IDLE_S") or "").strip()
    if not given:
        return _IDLE_DEFAULT_S
    try:
        value = float(given)
    except ValueError:
        value = math.nan
    if math.isfinite(value) and value > 0:
        return value
    if strict:
        raise CheckError(f"$HARNESS_SPARK_IDLE_S {given!r}: not a positive number of seconds; give one "
                         "such as 900 (the default), or unset it")
    return _IDLE_DEFAULT_S


IDLE_S = idle_s()
START_TIMEOUT_S = 180.0
_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
_POLL_S = 2.0
#: Spark's temporary files, in the server's directory (not the system's /tmp)
_TMP = "tmp"


def server_dir() -> Path:
    """This interpreter's server directory under :func:`state_dir`: one per Python
    environment, pyspark version and version of the checker's code (its Python workers
    import that code once and keep it: a harness upgraded while a server runs gets a
    server of its own; the old one stops when idle). ``python`` and ``python3`` of one bin
    directory are one interpreter (one file through links); a virtual environment's link
    to its base interpreter is not the base (another directory, other packages)."""
    python = sys.executable
    ident = f"{os.path.dirname(python)}|{os.path.realpath(python)}|{pyspark_version()}|{_code_version()}"
    return state_dir() / f"py-{hashlib.sha256(ident.encode()).hexdigest()[:12]}"


@functools.cache
def _code_version() -> str:
    """A digest of the code the server's Python workers run: ``harness/check/**/*.py`` and the
    history contract's modules."""
    check = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted([*check.rglob("*.py"), check.parent / "history.py"]):
        digest.update(str(path.relative_to(check.parent)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


@dataclass(frozen=True)
class Server:
    """A running server, as ``server.json`` records it."""

    pid: int  # the supervisor's
    jvm_pid: int
    port: int
    python: str
    pyspark: str
    started: float
    session: str  # the one Spark Connect session every client joins

    @property
    def url(self) -> str:
        """The session's address: one session for all clients, so that they share its
        Python workers (Spark keeps a pool of them per session) and its warm state."""
        return f"sc://127.0.0.1:{self.port}/;session_id={self.session}"

    @property
    def key(self) -> str:
        """Changes when the server is replaced: a client's session is tied to one."""
        return f"{self.pid}:{self.port}:{self.started}"


def _read(directory: Path) -> Server | None:
    try:
        data = {"session": "", **json.loads((directory / "server.json").read_text())}
        return Server(**{k: data[k] for k in Server.__dataclass_fields__})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _listening(port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def running() -> Server | None:
    """This interpreter's running server (:func:`server_dir`), or None."""
    return _running(server_dir())


def _running(directory: Path) -> Server | None:
    server = _read(directory)
    if server is None or not alive(server.pid) or not alive(server.jvm_pid):
        return None
    return server


@contextlib.contextmanager
def _locked(path: Path, mode: int) -> Iterator[IO[str]]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(path, "a")  # noqa: SIM115 (closed below)
    except OSError as exc:
        raise CheckError(f"cannot use {path.parent} for the shared Spark server: {exc.strerror or exc} "
                         "(set HARNESS_SPARK_STATE to a writable directory, or check in-process with "
                         "--spark-master 'local[*]')") from None
    with fh:
        fcntl.flock(fh, mode)
        try:
            yield fh
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def check_settings() -> None:
    """A :class:`CheckError` naming the variable when a setting of the server is bad
    (``$HARNESS_SPARK_IDLE_S``, ``$HARNESS_WORKER_KEEP_MB``, ``$HARNESS_SPARK_JAVA_HOME``):
    the user's to fix, not a server that does not start or stops at once. Called before a
    run whose check will use the server, and by :func:`ensure`."""
    idle_s(strict=True)
    keep = os.environ.get("HARNESS_WORKER_KEEP_MB")  # read by its workers (harness.check.engine.daemon)
    if keep is not None and keep.strip() and not keep.strip().isdigit():
        raise CheckError(f"$HARNESS_WORKER_KEEP_MB {keep!r}: not a number of MiB; give one such as 2048, "
                         "0 (give everything back), or unset it")
    aot.check_java_home()


def ensure(trainer: str | None = None) -> Server:
    """This interpreter's server, started (and waited for) if none runs. A
    :class:`CheckError` with the log's tail if it does not start within
    :data:`START_TIMEOUT_S`. ``trainer``: the module a new server's supervisor runs
    (``python -m``) to train the AOT cache after an idle stop (None: it does not train)."""
    import logging

    check_settings()
    directory = server_dir()
    with _locked(directory / "start.lock", fcntl.LOCK_EX):
        server = _running(directory)
        if server is not None:
            return server
        logging.getLogger(__name__).info(
            "starting the Spark Connect server for the checker (once; later checks reuse it, "
            "`harness clean` stops it)")
        aot.stop_training()
        return _start(directory, trainer)


def _start(directory: Path, trainer: str | None) -> Server:
    (directory / "server.json").unlink(missing_ok=True)
    log_path = directory / "server.log"
    # this harness, wherever it is imported from (an editable install, a checkout on sys.path)
    package_root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    with open(log_path, "w") as log_fh:
        proc = subprocess.Popen([sys.executable, "-m", "harness.check.engine.server", "serve", str(directory),
                                 *(["--trainer", trainer] if trainer else [])],
                                stdin=subprocess.DEVNULL, stdout=log_fh, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=directory, env={**os.environ, "PYTHONPATH": path})
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        server = _read(directory)
        if server is not None and server.pid == proc.pid:
            return server
        if proc.poll() is not None:
            raise CheckError(f"the Spark Connect server did not start (exit {proc.returncode}); "
                             f"{log_path}:\n{_tail(log_path)}")
        time.sleep(0.2)
    proc.terminate()
    raise CheckError(f"the Spark Connect server did not start in {START_TIMEOUT_S:.0f}s; {log_path}:\n"
                     f"{_tail(log_path)}")


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop() -> bool:
    """Stops the shared servers, of every interpreter, and an AOT training started after an
    idle stop (:func:`harness.check.engine.aot.stop_training`); whether a server was running."""
    aot.stop_training()
    stopped = False
    for directory in _server_dirs():
        if not (directory / "server.json").exists():
            continue
        with _locked(directory / "start.lock", fcntl.LOCK_EX):
            server = _running(directory)
            if server is None:
                (directory / "server.json").unlink(missing_ok=True)
                continue
            _stop(directory, server)
            stopped = True
    return stopped


def remove_leftovers() -> int:
    """Removes the ``tmp/`` directories (Spark's temporary files) of server directories whose
    server is not running; how many held files (what a server killed with ``kill -9`` left:
    one that stopped leaves only empty directories)."""
    removed = 0
    for directory in _server_dirs():
        tmp = directory / _TMP
        if not tmp.is_dir():
            continue
        with _locked(directory / "start.lock", fcntl.LOCK_EX):  # none starting meanwhile
            if _running(directory) is None:
                removed += any(path.is_file() for path in tmp.rglob("*"))
                shutil.rmtree(tmp, ignore_errors=True)
    return removed + aot.remove_leftovers()


def servers() -> list[Server]:
    """The running servers, of every interpreter."""
    found = [_running(d) for d in _server_dirs()]
    return [s for s in found if s is not None]


def _server_dirs() -> list[Path]:
    """Every interpreter's server directory, and the state directory itself (which held
    the one server before there was a directory per interpreter)."""
    root = state_dir()
    return [root, *sorted(root.glob("py-*"))]


def _stop(directory: Path, server: Server) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(server.pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (alive(server.pid) or alive(server.jvm_pid)):
        time.sleep(0.2)
    for pid in (server.jvm_pid, server.pid):
        if alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    (directory / "server.json").unlink(missing_ok=True)


@contextlib.contextmanager
def using() -> Iterator[None]:
    """Marks a check in progress (the server is not idle while one runs)."""
    directory = server_dir()
    used = directory / "used"
    with _locked(directory / "in-use", fcntl.LOCK_SH):
        used.touch()
        try:
            yield
        finally:
            used.touch()


# -- the supervisor --------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _command(port: int, tmp: Path) -> list[str]:
    """The server's ``spark-submit`` arguments; Spark's temporary files go to ``tmp``."""
    args = ["--class", _CLASS, "--name", "harness-check", "--master", "local[*]"]
    conf = server_conf()
    if not any(c.isspace() or c in "\"'\\" for c in str(tmp)):  # Spark splits these options at spaces
        # Spark Connect's artifacts and other temporary directories
        conf["spark.driver.extraJavaOptions"] += f" -Djava.io.tmpdir={tmp}"
    conf = {**conf, "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(port),
            # the shared session lives as long as the server (which stops when idle)
            "spark.connect.session.manager.defaultSessionTimeout": "7d"}
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    return args


def _launch(port: int, tmp: Path, env: dict[str, str]) -> list[str]:
    """The server's JVM command (:func:`harness.check.engine.aot.command`: Spark's launcher's, on
    the server's Java, with the AOT cache when there is one)."""
    return aot.command(spark_home(), [*_command(port, tmp), "spark-internal"], env)


def _environment(tmp: Path) -> dict[str, str]:
    """The server's environment; its block manager's files go to ``tmp`` (unless
    ``SPARK_LOCAL_DIRS`` says where; Spark splits it at commas)."""
    env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": sys.executable, "SPARK_CONNECT_MODE": "0"}
    if "," not in str(tmp):
        env.setdefault("SPARK_LOCAL_DIRS", str(tmp))
    return env


def _idle(directory: Path) -> bool:
    try:
        since = time.time() - (directory / "used").stat().st_mtime
    except OSError:
        since = time.time() - (directory / "server.json").stat().st_mtime
    if since < IDLE_S:
        return False
    with open(directory / "in-use", "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a check holds it
        fcntl.flock(fh, fcntl.LOCK_UN)
        return True


def serve(directory: Path, trainer: str | None = None) -> int:
    """The supervisor: start the server, record it, stop it when idle or told to; after an
    idle stop, run ``trainer`` (:func:`ensure`) when the AOT cache is missing."""
    stopping = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    tmp = directory.resolve() / _TMP
    shutil.rmtree(tmp, ignore_errors=True)  # an earlier server's, killed with kill -9
    tmp.mkdir(parents=True, exist_ok=True)
    env = _environment(tmp)
    for attempt in range(3):  # another process may take the free port first
        port = _free_port()
        try:
            cmd = _launch(port, tmp, env)
        except CheckError as exc:
            print(f"the Spark Connect server did not start: {exc}", flush=True)
            return 1
        cache = aot.in_command(cmd)
        cache_id = aot.identity_of(cache)
        jvm = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and jvm.poll() is None and not stopping and not _listening(port):
            time.sleep(0.5)
        if _listening(port) and jvm.poll() is None:
            break
        jvm.terminate()
        jvm.wait(30)
        if stopping or attempt == 2:
            print("the Spark Connect server did not start", flush=True)
            return 1
    if cache is not None and aot.drop_if_unused(cache, jvm.pid, cache_id):
        print(f"the JVM did not use the AOT cache {cache} (its reason is above): removed; the next "
              "idle stop makes a new one", flush=True)
    server = Server(pid=os.getpid(), jvm_pid=jvm.pid, port=port, python=sys.executable,
                    pyspark=pyspark_version(), started=time.time(), session=str(uuid.uuid4()))
    (directory / "used").touch()  # idle from now, not from an earlier server's last check
    tmp = directory / "server.json.tmp"
    tmp.write_text(json.dumps(server.__dict__))
    tmp.replace(directory / "server.json")
    print(f"serving on {server.url}, idle stop after {IDLE_S:.0f}s", flush=True)
    died = False
    try:
        while not stopping and not (died := jvm.poll() is not None) and not _idle(directory):
            time.sleep(_POLL_S)
    finally:
        if _read(directory) == server:
            (directory / "server.json").unlink(missing_ok=True)
        if jvm.poll() is None:
            jvm.terminate()
            try:
                jvm.wait(20)
            except subprocess.TimeoutExpired:
                jvm.kill()
                jvm.wait()
    idle = not stopping and not died
    print(f"stopped ({'told to' if stopping else 'idle' if idle else 'JVM exited'})", flush=True)
    if idle and trainer and aot.record_config() is None:  # nothing is checking: make the AOT cache
        _train_when_idle(trainer)
    return 0


def _train_when_idle(trainer: str) -> None:
    """After an idle stop: run ``python -m trainer --background`` at the lowest priority if a
    cache is wanted and missing and no other server runs (another interpreter's, a newer code
    version's: its checks may be under way), in a process of its own, so the supervisor
    exits now."""
    cache = aot.cache_file()
    if cache is None or cache.is_file() or servers():
        return
    with contextlib.suppress(OSError):
        subprocess.Popen([sys.executable, "-m", trainer, aot.BACKGROUND],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, preexec_fn=lambda: os.nice(19))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.check.engine.server")
    sub = parser.add_subparsers(dest="cmd", required=True)
    serve_cmd = sub.add_parser("serve")
    serve_cmd.add_argument("directory")
    serve_cmd.add_argument("--trainer", help="the module that trains the AOT cache after an idle stop")
    sub.add_parser("status")
    sub.add_parser("stop")
    args = parser.parse_args(argv)
    if args.cmd == "serve":
        return serve(Path(args.directory), args.trainer)
    if args.cmd == "status":
        found = servers()
        for server in found:
            print(f"running: {server.url} (pid {server.pid}, JVM {server.jvm_pid}; {server.python}, "
                  f"pyspark {server.pyspark})")
        if not found:
            print("not running")
        print(aot.status())
        return 0
    print("stopped" if stop() else "not running")
    return 0


if __name__ == "__main__":
    sys.exit(main())
