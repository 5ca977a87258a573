"""The process's Spark session, and what a check needs around it: one check at a time per
process, the shared server marked in use, Spark's failures in one line.

Masters (:func:`harness.check.engine.master.master_of`): ``local-connect`` (the default)
is a Spark Connect session on the shared local server (:mod:`harness.check.engine.server`),
started if none runs; ``sc://host:port`` a Spark Connect session on that server; anything
else (``local[*]``, ``spark://host:port``) a classic session with its driver in this
process. This module names no anomaly and no step of a check: the plan hands it the
modules its kernels live in (pickled by value to the Python workers) and the module that
trains the server's AOT cache.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import shutil
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from harness.check.engine import server
from harness.check.engine.conf import driver_conf, driver_memory, sql_conf
from harness.check.engine.master import DEFAULT_MASTER, master_of
from harness.errors import CheckError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["api_mode", "checking", "close", "failure", "is_connect", "session", "stage_files",
           "workers_see_local_files"]

_session_lock = threading.Lock()
_run_lock = threading.Lock()
_session: SparkSession | None = None
_session_key: str | None = None  # the master, and for the shared server which one


def workers_see_local_files(master: str | None) -> bool:
    """Whether the executors of ``master`` run on this machine (they read the run
    directory where it is); else the inputs are staged in the scratch directory."""
    master = master_of(master)
    return master == DEFAULT_MASTER or master.startswith("local")


def session(master: str | None = None, kernels: Sequence[ModuleType] = (),
            trainer: str | None = None) -> SparkSession:
    """The process's SparkSession on ``master``: made once, then reused. Asking for another
    master stops the current session and starts one on it (a classic JVM, and so
    ``spark.driver.memory``, stays). ``kernels``: the modules whose code runs in the
    Python workers, pickled by value; ``trainer``: the module the shared server's
    supervisor runs (``python -m``) to train its AOT cache after an idle stop."""
    global _session, _session_key
    master = master_of(master)
    driver_memory()  # a bad setting is one line here, not a JVM that does not start
    with _session_lock:
        key = master
        if master == DEFAULT_MASTER:
            shared = server.ensure(trainer)
            key = f"{master}:{shared.key}"
        if _session is None or _session_key != key or not _usable(_session):
            if _session is not None:
                with contextlib.suppress(Exception):  # a session of a server gone is gone
                    _session.stop()
                _session = None
            with api_mode(is_connect(master)):
                _session = _remote(shared.url, shared=True) if master == DEFAULT_MASTER else (
                    _remote(master) if master.startswith("sc://") else _start(master))
                if master == DEFAULT_MASTER:
                    _no_retries_once_gone(_session, shared.jvm_pid)
            _session_key = key
        _register(kernels)
        return _session


def is_connect(master: str) -> bool:
    return master == DEFAULT_MASTER or master.startswith("sc://")


@contextlib.contextmanager
def api_mode(connect: bool) -> Iterator[None]:
    """PySpark's functions build Spark Connect columns or classic ones by one environment
    variable, which its Connect sessions set for the whole process; a check sets it for
    its own session's kind while it runs (checks in a process take turns), so that one
    process can check on the shared server and on a classic master (a test, a bench)."""
    key = "SPARK_CONNECT_MODE_ENABLED"
    before = os.environ.get(key)
    if connect:
        os.environ[key] = "1"
    else:
        os.environ.pop(key, None)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


@contextlib.contextmanager
def checking(master: str | None) -> Iterator[None]:
    """While one check runs: the process's other checks wait, the shared server is not idle,
    and PySpark builds columns of the session's kind."""
    in_use = server.using() if master_of(master) == DEFAULT_MASTER else contextlib.nullcontext()
    with _run_lock, in_use, api_mode(is_connect(master_of(master))):
        yield


def close() -> None:
    """Stops this process's session (a classic one's SparkContext; a Connect client),
    never the shared server."""
    global _session, _session_key
    with _session_lock:
        if _session is not None:
            with contextlib.suppress(Exception):
                _session.stop()
        _session, _session_key = None, None


def _usable(spark: SparkSession) -> bool:
    if getattr(spark, "is_stopped", False):  # a Connect session that was stopped
        return False
    try:
        return spark.sparkContext._jsc is not None  # classic
    except Exception:  # Connect: no SparkContext
        return True


def _remote(url: str, shared: bool = False) -> SparkSession:
    """A Spark Connect session on ``url``; ``shared``: the shared server's one session,
    which stopping this process's client must not end for the others."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise CheckError("the checker needs pyspark 4 with Spark Connect: "
                         "pip install 'pyspark[connect]>=4'") from exc
    try:
        import_connect_client()
        spark = SparkSession.builder.remote(url).create()
        if shared:  # its settings are the server's defaults
            spark.release_session_on_close = False  # type: ignore[attr-defined]
        else:
            for key, value in sql_conf().items():
                spark.conf.set(key, value)
    except ImportError as exc:
        raise CheckError(f"Spark Connect needs its client libraries: pip install 'pyspark[connect]>=4' "
                         f"({exc})") from exc
    except Exception as exc:  # the server is not reachable: pyspark raises several types here
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckError(f"cannot reach the Spark Connect server {url}: {first}") from exc
    return spark


def _no_retries_once_gone(spark: SparkSession, jvm_pid: int) -> None:
    """Spark Connect's retries (up to about ten minutes of backoff when the server does not
    answer) on the shared server, but none once its JVM has exited (killed, out of memory):
    the check then fails at once (:func:`failure` says why) instead of waiting for a server
    that will not come back."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    class WhileTheServerLives(DefaultPolicy):
        def can_retry(self, e: BaseException) -> bool:
            return super().can_retry(e) and server.alive(jvm_pid)

    spark.client.set_retry_policies([WhileTheServerLives()])


def import_connect_client() -> None:
    """Imports PySpark's Connect client without IPython. Its progress bar imports IPython,
    where installed, only for the terminal's width: 0.3 to 0.4 s of a fresh ``harness
    check``. The bar is off unless ``SPARK_CONNECT_PROGRESS_BAR_ENABLED=1`` (then 80
    columns wide), and the check turns off PySpark's DataFrame debugging, IPython's other
    use there. IPython stays importable afterwards, for anything else."""
    progress = "pyspark.sql.connect.shell.progress"
    if progress in sys.modules or "IPython" in sys.modules:
        return
    sys.modules["IPython"] = None  # type: ignore[assignment]  # its import raises ImportError
    try:
        importlib.import_module(progress)
    finally:
        sys.modules.pop("IPython", None)


def _start(master: str) -> SparkSession:
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise CheckError("the checker needs pyspark 4 and Java 17: pip install 'pyspark>=4'") from exc
    # Loopback only, and no "hostname resolves to a loopback address" warning.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(master).appName("harness-check")
    if master.startswith("local") or _on_loopback(master):
        # the Python workers are this interpreter (with NumPy, PyArrow)
        builder = builder.config("spark.pyspark.python", sys.executable)
    for key, value in {**driver_conf(), **sql_conf()}.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # the JVM failed to start: pyspark raises several types here
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        hint = " (is Java 17 installed?)" if "JAVA_GATEWAY_EXITED" in first else ""
        raise CheckError(f"cannot start Spark on {master}: {first}{hint}") from exc
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _on_loopback(master: str) -> bool:
    host = master.split("://", 1)[-1].rsplit(":", 1)[0]
    return host in ("localhost", "::1", "[::1]") or host.startswith("127.")


def _register(kernels: Sequence[ModuleType]) -> None:
    # The kernels go to the Python workers by value: a Spark cluster's executors need
    # NumPy and PyArrow (PySpark's own SQL extra), not this package. Everything a kernel
    # calls must be in these modules, or in those libraries: a function of another module
    # of this package, or one wrapped by ``functools.cache``, would go by reference
    # (tests/unit/check/test_kernel_pickles.py loads them where this package is absent).
    if not kernels:
        return
    from pyspark import cloudpickle

    for module in kernels:
        cloudpickle.register_pickle_by_value(module)


def spark_errors() -> tuple[type[BaseException], ...]:
    """The exception types of a Spark failure (PySpark's and Py4J's); a CheckError when
    pyspark is missing."""
    try:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException
    except ImportError as exc:
        raise CheckError("the checker needs pyspark 4 and Java 17: pip install 'pyspark>=4'") from exc
    return (PySparkException, Py4JError)


def failure(exc: BaseException, master: str | None, scratch: Path) -> str:
    """A Spark failure of a check in one line, with what to do where that is known."""
    reason = _shared_server_gone(master) or _reason(exc)
    if "No space left on device" in reason and _in_a_worker(exc):  # the kernels write the scratch
        reason += (f" (the check's scratch directory is in {scratch.parent}, which filled up: "
                   "$HARNESS_CHECK_SCRATCH moves it)")
    return reason


def _reason(exc: BaseException) -> str:
    """A Spark failure in one line: for an exception in a Python worker, its own last line
    (``OSError: [Errno 28] ... No space left on device``), not PySpark's "An exception was
    thrown from the Python worker. Please see the stack trace below."; else the first line."""
    text = str(exc).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    if _in_a_worker(exc):
        last = [line for line in lines if not _SQLSTATE.fullmatch(line)][-1]
        return _SQLSTATE.sub("", last).strip() or lines[0]
    return lines[0]


_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+$")


def _in_a_worker(exc: BaseException) -> bool:
    """Whether a Spark failure is a Python worker's exception (its traceback in the text)."""
    return "Traceback (most recent call last)" in str(exc)


def _shared_server_gone(master: str | None) -> str | None:
    """Why a check on the shared server failed, if its JVM exited during it (the next check
    starts a new server); else None."""
    if master_of(master) != DEFAULT_MASTER or _session_key is None:
        return None
    now = server.running()
    if now is not None and _session_key.endswith(f":{now.key}"):
        return None
    return (f"the shared Spark server stopped during the check (its JVM exited; see "
            f"{server.server_dir() / 'server.log'}): check again, a new server starts")


def stage_files(directory: Path, files: Sequence[Path]) -> list[Path]:
    """Copies of ``files`` in ``directory`` (file order kept: it is part of ``seq``), for
    executors that do not see this machine's files."""
    directory.mkdir()
    out = []
    for index, path in enumerate(files):
        target = directory / f"{index:05d}-{path.name}"
        shutil.copyfile(path, target)
        out.append(target)
    return out
