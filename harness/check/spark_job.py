"""The Spark job behind :func:`harness.check.check_run`; the only module that imports pyspark.

Plan (each step one Spark action, intermediate data as Parquet in a scratch dir):

1. ingest (``harness.check.ingest``, in the Python workers, one task per file
   split): parse ``history/*.jsonl`` and ``replicas/*.jsonl`` once (PyArrow with
   an explicit schema, ``harness.check.lines`` near odd lines; a batch line
   (``polls``, ``oks``, ``invokes``) becomes its events) into compact columns: a
   type code, 64-bit hashes of client and topic, a validated position ``(pl, pe,
   pb)`` (``harness.history.position_key``), row flags, ``seq``, the event's place
   in file order, and for Key_Shared run polls their time, subscription and key.
   Polls and replica records are written in one directory per (topic, partition),
   resets in one of their own, and the events of step 3 again by id bucket. The
   tasks also count the history lines and those they skip (``harness.check.lines``);
   no history line read is a CheckError. (The inputs are validated before Spark
   starts: ``harness.check.inputs``.)
2. names: the client and topic names behind the hashes, the read_committed
   clients and the polled partitions, from the distinct rows the ingest tasks
   return.
3. per message id, in the Python workers (``harness.check.mids``, one task per id
   bucket the ingest wrote, so no shuffle): outcome and read flags, first invoke,
   first ack, and whether the id sits at more than one position; written in a
   directory per (ack topic, ack partition). Each task also writes how many of its ids
   have each (flags, transaction) pair, and in a big check its ids whose flags can make
   an id anomalous (worked out once per process by the id anomalies' own conditions over
   every flag value: ``_Job._loud_flags``).
4. anomalies: id anomalies are filters of step 3's ids whose flags can make one (a big
   check) or of all its ids (a small one), and the outcome counts are sums over its flag
   counts: no Spark SQL scan of the whole per-id table. One task per (topic, partition)
   reads its polls and replica records (its directory from step 1: no shuffle), its
   acks (step 3) and resets, and runs the NumPy kernel of
   ``harness.check.placed`` (``mapInArrow``): in position order, the recovery
   positions at or below each row and the ids bound to each position; in file order
   per sequence (client, phase and partition, or producer and partition), each poll
   or ack against the one before it. Only anomaly rows come back. Key_Shared polls
   (usually none; skipped by the Parquet statistics) go through two windows of their
   own (key-order). All anomaly rows and the outcome counts go through one window
   that keeps the total and the first examples of each kind.
5. details (``harness.check.details``, PyArrow in this process, no Spark job): the few
   example ids, sends and positions are looked up again for their example fields (only
   when there are such anomalies), in the files that hold them: their id buckets, their
   splits' bucket files, their (topic, partition)'s directory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import logging
import math
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.check import details, ingest, tasks
from harness.check import mids as mids_kernel
from harness.check import placed as placed_kernel
from harness.check import scratch as scratch_dir
from harness.check.inputs import require_lines, run_files
from harness.check.master import DEFAULT_MASTER, master_of, require_reachable
from harness.check.mids import (  # per-id flags: those of the per-id step
    F_ABORTED,
    F_DUP,
    F_FAIL,
    F_INFO,
    F_INV,
    F_OK,
    F_RC_READ,
    F_REC,
    F_REC_RC,
    F_RU_READ,
    F_RUN,
)
from harness.check.result import MAX_EXAMPLES, MAX_TRANSACTIONS, CheckResult, example, make_result
from harness.errors import CheckError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Row, SparkSession

__all__ = ["DEFAULT_MASTER", "close", "master_of", "run", "session"]

_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")

# Event type codes and row flags: those of the ingest step.
INVOKE, OK, FAIL, INFO, POLL, RESET, META, REPLICA, TXN = (
    ingest.INVOKE, ingest.OK, ingest.FAIL, ingest.INFO, ingest.POLL, ingest.RESET, ingest.META,
    ingest.REPLICA, ingest.TXN)
ROW_REC = ingest.ROW_REC
# A transaction's state (per id: its transaction's), docs/checker.md "Transactions".
TS_NONE, TS_COMMITTED, TS_SEEN, TS_ABORTED, TS_UNKNOWN = range(5)
TS_NAMES = {TS_COMMITTED: "committed", TS_SEEN: "seen-committed", TS_ABORTED: "aborted",
            TS_UNKNOWN: "unknown"}
#: a poll this much earlier than the commit call is before it (stamps may be reused for 0.5 ms)
PRECOMMIT_SLACK_S = 0.001

_L, _S = "long", "string"
# The uniform anomaly row: a sort key and a generic example, typed.
_SK_FIELDS = (("s", _S), ("a", _L), ("k", _S), ("b", _L), ("c", _L), ("d", _L), ("e", _L))
_EX_FIELDS = (("mid", _S), ("seq", _L), ("seq2", _L), ("client", _L), ("topic", _L), ("part", _L),
              ("rec", "boolean"), ("pl", _L), ("pe", _L), ("pb", _L), ("ql", _L), ("qe", _L),
              ("qb", _L), ("n", _L), ("sub", _S), ("key", _S), ("client2", _L), ("mid2", _S),
              ("tx", _S), ("n2", _L), ("t1", "double"), ("t2", "double"))

_POS_KINDS = ("inconsistent-offsets", "replica-divergence", "truncation-skip")
_SEQ_KINDS = ("nonmonotonic-send", "nonmonotonic-poll", "poll-skip", "int-nonmonotonic-send",
              "int-nonmonotonic-poll", "int-poll-skip", "silent-reread")
_SEND_KINDS = ("nonmonotonic-send", "int-nonmonotonic-send")

#: input (JSON lines) per bucket of the per-id step: a task holds its bucket's events (at
#: 10M records, 128 MiB of input are about 2.9M events)
MIDS_BUCKET_BYTES = 128 << 20
#: a check of more input than this says where it is, step by step (this module's
#: logger, at INFO: ``harness run`` and ``harness check`` show it); a smaller one is quiet
PROGRESS_BYTES = 256 << 20
log = logging.getLogger(__name__)
# The per-id table as read back: the kernel's columns, its directories' last (Spark's order).
_DDL = {"int64": "long", "int32": "int", "double": "double", "string": "string"}


def _ddl(fields: Iterable[Any]) -> str:
    """Spark's DDL schema string of Arrow fields."""
    return ", ".join(f"{f.name} {_DDL[str(f.type)]}" for f in fields)


_MIDS_SCHEMA = _ddl(sorted(mids_kernel.MIDS_SCHEMA, key=lambda f: f.name in ("ack_topic", "ack_part")))

#: :meth:`_Job._loud_flags`, once worked out
_loud: tuple[bytes, bytes] | None = None
_session_lock = threading.Lock()
_run_lock = threading.Lock()
_session: SparkSession | None = None
_session_key: str | None = None  # the master, and for the shared server which one


def workers_see_local_files(master: str | None) -> bool:
    """Whether the executors of ``master`` run on this machine (they read the run
    directory where it is); else the inputs are staged in the scratch directory."""
    master = master_of(master)
    return master == DEFAULT_MASTER or master.startswith("local")


def session(master: str | None = None) -> SparkSession:
    """The process's SparkSession on ``master`` (:func:`master_of`): made once, then reused.

    ``local-connect`` (the default): a Spark Connect session on the shared local server
    (:mod:`harness.check.server`), started if none runs; ``sc://host:port``: a Spark
    Connect session on that server; anything else (``local[*]``, ``spark://host:port``):
    a classic session with its driver in this process. Asking for another master stops
    the current session and starts one on it (a classic JVM, and so
    ``spark.driver.memory``, stays).
    """
    global _session, _session_key
    master = master_of(master)
    driver_memory()  # a bad setting is one line here, not a JVM that does not start
    with _session_lock:
        key = master
        if master == DEFAULT_MASTER:
            from harness.check import server

            shared = server.ensure()
            key = f"{master}:{shared.key}"
        if _session is not None and _session_key == key and _usable(_session):
            return _session
        if _session is not None:
            with contextlib.suppress(Exception):  # a session of a server gone is gone
                _session.stop()
            _session = None
        with api_mode(_is_connect(master)):
            _session = _remote(shared.url, shared=True) if master == DEFAULT_MASTER else (
                _remote(master) if master.startswith("sc://") else _start(master))
            if master == DEFAULT_MASTER:
                _no_retries_once_gone(_session, shared.jvm_pid)
        _session_key = key
        _register_kernels()
        return _session


def _is_connect(master: str) -> bool:
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
        _import_connect_client()
        spark = SparkSession.builder.remote(url).create()
        if shared:  # its settings are the server's defaults
            spark.release_session_on_close = False  # type: ignore[attr-defined]
        else:
            for key, value in _sql_conf().items():
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
    the check then fails at once (:func:`run` says why) instead of waiting for a server
    that will not come back."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    from harness.check import server

    class WhileTheServerLives(DefaultPolicy):
        def can_retry(self, e: BaseException) -> bool:
            return super().can_retry(e) and server.alive(jvm_pid)

    spark.client.set_retry_policies([WhileTheServerLives()])


def _import_connect_client() -> None:
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
    for key, value in {**_driver_conf(), **_sql_conf()}.items():
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


def _register_kernels() -> None:
    # The kernels go to the Python workers by value: a Spark cluster's executors need
    # NumPy and PyArrow (PySpark's own SQL extra), not this package. Everything a kernel
    # calls must be in these modules, or in those libraries: a function of another module
    # of this package, or one wrapped by ``functools.cache``, would go by reference
    # (tests/unit/check/test_kernel_pickles.py loads them where this package is absent).
    from pyspark import cloudpickle

    for module in kernel_modules():
        cloudpickle.register_pickle_by_value(module)


def kernel_modules() -> tuple[Any, ...]:
    """The modules whose code runs in the Python workers."""
    from harness.check import ingest, latency, lines, mids, placed, tasks

    return (ingest, latency, lines, mids, placed, tasks)


def server_conf() -> dict[str, str]:
    """The shared server's settings (:mod:`harness.check.server` launches it with them)."""
    return {**_driver_conf(), **_sql_conf(), "spark.pyspark.python": sys.executable,
            # no query-context capture of the client's call sites: a cost per column built
            "spark.python.sql.dataFrameDebugging.enabled": "false",
            # one Python worker pool for all sessions (each harness process has its own
            # session): no per-session working directory, so a new session's first task
            # does not start a new Python daemon
            "spark.sql.artifact.isolation.enabled": "false",
            "spark.python.daemon.module": "harness.check.daemon"}


def _driver_conf() -> dict[str, str]:
    # The throughput collector: this is batch work, pauses do not matter.
    heap = driver_memory()
    java = ["-XX:+UseParallelGC", f"-XX:MaxNewSize={_young_generation_mib(_mib(heap))}m"]
    if _LOG_CONFIG.is_file():  # absent if not installed as package data: Spark's defaults then
        java.append(f"-Dlog4j2.configurationFile={_LOG_CONFIG.as_uri()}")
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": heap,
        "spark.driver.extraJavaOptions": " ".join(java),
        # Shuffle files of finished checks are removed when the driver collects garbage.
        "spark.cleaner.periodicGC.interval": "1min",
        # Generated classes kept for the next check (Spark's default, 100, is fewer than a
        # check generates: every check compiled about 30 again, in its tasks, and the JIT
        # then compiled the new classes).
        "spark.sql.codegen.cache.maxEntries": "2000",
    }


def _sql_conf() -> dict[str, str]:
    """Session settings (a Connect session sets them on itself)."""
    return {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.debug.maxToStringFields": "1000",
        "spark.sql.parquet.compression.codec": "lz4_raw",
        # The kernel's Arrow batches: 100k rows, not 10k (fewer round trips to the worker).
        "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    }


def driver_memory() -> str:
    """``$HARNESS_SPARK_DRIVER_MEMORY`` if it is a size Spark takes (``6g``, ``4096m``; a bare
    number is MiB), else a CheckError naming it; unset: :func:`_driver_memory`."""
    given = (os.environ.get("HARNESS_SPARK_DRIVER_MEMORY") or "").strip()
    if not given:
        return _driver_memory()
    if not _MEMORY_SIZE.fullmatch(given):
        raise CheckError(f"$HARNESS_SPARK_DRIVER_MEMORY {given!r}: not a memory size; give one such as "
                         "6g or 4096m, or unset it (a third of this machine's memory, 1 to 16 GiB)")
    return given


_MEMORY_SIZE = re.compile(r"([1-9][0-9]*)([kmgtp]b?|b)?", re.IGNORECASE)


def _driver_memory() -> str:
    """A third of the machine's memory, 1 to 16 GiB: room for the JVM's off-heap use and
    for the kernel tasks, which hold a partition's rows each (the JVM keeps the heap it
    grew to; at 10M records a 8 GiB heap checks as fast as a 12 GiB one)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return f"{max(1, min(16, total // (3 << 30)))}g"


def _young_generation_mib(heap_mib: int) -> int:
    """The most the JVM's young generation may grow to: 192 MiB per core of this machine
    (two at least), and no more than the JVM's own limit, a third of the heap. Left to
    itself, the collector grew it to about 2 GB in a 10M check for no gain in time: the JVM
    then held 3.2 GB instead of 1.4, and the peak of a 100M check was 14.1 GiB instead of
    12.1 (docs/checker-log.md, session 48)."""
    return max(1, min(192 * max(2, os.cpu_count() or 1), heap_mib // 3))


_UNITS_MIB = {"b": 1 / (1 << 20), "k": 1 / 1024, "m": 1, "g": 1024, "t": 1 << 20, "p": 1 << 30}


def _mib(size: str) -> int:
    """A memory size as Spark reads ``spark.driver.memory`` (:data:`_MEMORY_SIZE`; a bare
    number is MiB), in MiB."""
    match = _MEMORY_SIZE.fullmatch(size.strip())
    if match is None:
        raise ValueError(f"not a memory size: {size!r}")
    number, unit = match.groups()
    return int(int(number) * _UNITS_MIB[(unit or "m")[0].lower()])


def _shuffle_partitions(input_bytes: int) -> int:
    """About one shuffle partition per 64 MiB of JSON input; one for small runs."""
    return max(1, min(2000, math.ceil(input_bytes / (64 << 20))))


def run(run_dir: Path, master: str | None = None) -> CheckResult:
    """Check one run directory on ``master``; see :func:`harness.check.check_run`."""
    files, replicas = run_files(run_dir)  # before Spark starts: one clear error for a bad input
    require_reachable(master)  # a bad master, or a cluster gone: one line, not Spark's retries
    if max(len(files), len(replicas)) > ingest.MAX_FILES:
        raise CheckError(f"{run_dir}: {max(len(files), len(replicas))} history or replica files; "
                         f"at most {ingest.MAX_FILES} supported")
    try:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException
    except ImportError as exc:
        raise CheckError("the checker needs pyspark 4 and Java 17: pip install 'pyspark>=4'") from exc
    with _run_lock, _in_use(master), api_mode(_is_connect(master_of(master))):
        spark = session(master)
        input_bytes = sum(f.stat().st_size for f in [*files, *replicas])
        partitions = _shuffle_partitions(input_bytes)
        spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
        # Adaptive execution re-plans after each shuffle: it pays on big inputs (coalescing,
        # skew), and on a small one (one partition) it is only a fixed cost per stage.
        spark.conf.set("spark.sql.adaptive.enabled", str(partitions > 1).lower())
        local = workers_see_local_files(master)
        scratch = scratch_dir.make(input_bytes, local)
        try:
            if not local:  # executors elsewhere read the scratch directory
                files = _stage(scratch / "input", files)
                replicas = _stage(scratch / "replicas-input", replicas)
            return _Job(spark, scratch, _Inputs(run_dir, [str(f.resolve()) for f in files],
                                                [str(f.resolve()) for f in replicas], local=local)).result()
        except (PySparkException, Py4JError) as exc:
            reason = _shared_server_gone(master) or _reason(exc)
            if "No space left on device" in reason and _in_a_worker(exc):  # the kernels write the scratch
                reason += (f" (the check's scratch directory is in {scratch.parent}, which filled up: "
                           "$HARNESS_CHECK_SCRATCH moves it)")
            raise CheckError(f"{run_dir}: Spark check failed: {reason}") from exc
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


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
    from harness.check import server

    now = server.running()
    if now is not None and _session_key.endswith(f":{now.key}"):
        return None
    return (f"the shared Spark server stopped during the check (its JVM exited; see "
            f"{server.server_dir() / 'server.log'}): check again, a new server starts")


def _in_use(master: str | None) -> contextlib.AbstractContextManager[None]:
    """While a check runs on the shared server, that server is not idle."""
    if master_of(master) != DEFAULT_MASTER:
        return contextlib.nullcontext()
    from harness.check import server

    return server.using()


def _stage(directory: Path, files: Sequence[Path]) -> list[Path]:
    """Copies of ``files`` in ``directory`` (file order kept: it is part of ``seq``)."""
    directory.mkdir()
    out = []
    for index, path in enumerate(files):
        target = directory / f"{index:05d}-{path.name}"
        shutil.copyfile(path, target)
        out.append(target)
    return out


@dataclass(frozen=True)
class _Inputs:
    run_dir: Path
    history: list[str]
    replicas: list[str]
    #: the executors run on this machine (a local master): their memory is this machine's
    local: bool = True


@dataclass(frozen=True)
class _Names:
    """Client and topic names behind their hashes, the read_committed clients, and the
    (topic hash, partition) pairs that polls read."""

    clients: dict[int, str]
    topics: dict[int, str]
    rc_clients: frozenset[int]
    partitions: tuple[tuple[int, int], ...]

    def rank(self, names: Mapping[int, str]) -> dict[int, int]:
        return {h: i for i, (h, _) in enumerate(sorted(names.items(), key=lambda kv: kv[1]))}


class _Job:
    """One check: the steps of the module docstring, over Parquet in ``scratch``."""

    def __init__(self, spark: SparkSession, scratch: Path, inputs: _Inputs) -> None:
        from pyspark.sql import functions as F

        self.spark = spark
        self.F = F
        self.scratch = scratch
        self.inputs = inputs
        #: the per-id step's buckets: about one per MIDS_BUCKET_BYTES of input, in rounds of
        #: as many as this machine has cores when the executors are on it (no round half idle)
        size = sum(os.path.getsize(p) for p in (*inputs.history, *inputs.replicas))
        buckets = math.ceil(size / MIDS_BUCKET_BYTES)
        cores = (os.cpu_count() or 1) if inputs.local else 1
        #: the cores the check counts on (1 when the executors are not this machine's)
        self.cores = cores
        #: a task per row of each step's task list (:meth:`_each`) when the input is more
        #: than a split per core, or when the executors are not this machine's
        self.spread = not inputs.local or size > cores * ingest.SPLIT_BYTES
        if buckets > 1:
            buckets = math.ceil(buckets / cores) * cores
        self.buckets = max(1, min(ingest.MAX_BUCKETS, buckets))
        #: from step 3: how many ids were sent in a transaction, and the least and greatest
        #: finite first-invoke time (None: none)
        self.tx_ids = 0
        self.inv_span: tuple[float, float] | None = None
        #: from step 3: its flag counts, its ids sent in a transaction, and in a big check
        #: the ids that can be anomalous (each a small table in most runs)
        self.flag_counts: DataFrame | None = None
        self.tx_mids: DataFrame | None = None
        self.loud: DataFrame | None = None
        self.size = size
        self._started = time.monotonic()

    def _progress(self, message: str) -> None:
        """One line of a big check's progress (:data:`PROGRESS_BYTES`), with the time so far."""
        if self.size > PROGRESS_BYTES:
            log.info("check: %s (%.0f s)", message, time.monotonic() - self._started)

    # -- helpers ---------------------------------------------------------------

    def _stage(self, name: str, df: DataFrame, dictionary: Sequence[str] = ()) -> DataFrame:
        """Write ``df`` as Parquet in the scratch directory and read it back.

        Dictionaries do not pay for mostly distinct values (ids, positions, seq): only the
        ``dictionary`` columns (a few distinct values: names, codes, flags) get one.
        """
        path = str(self.scratch / name)
        writer = df.write.option("parquet.enable.dictionary", "false")
        for col in dictionary:
            writer = writer.option(f"parquet.enable.dictionary#{col}", "true")
        writer.parquet(path)
        return self.spark.read.schema(df.schema).parquet(path)

    def _has(self, col: str, bits: int) -> Column:
        return self.F.col(col).bitwiseAND(bits) != 0

    def _lacks(self, col: str, bits: int) -> Column:
        return self.F.col(col).bitwiseAND(bits) == 0

    def _pos(self, prefix: str = "") -> Column:
        F = self.F
        return F.struct(F.col(prefix + "pl").alias("l"), F.col(prefix + "pe").alias("e"),
                        F.col(prefix + "pb").alias("b"))

    def _uniform(self, kind: Column, sk: Mapping[str, Column], ex: Mapping[str, Column],
                 n: Column | None = None) -> list[Column]:
        """Columns of the uniform anomaly row (kind, n, sk, ex); missing fields null."""
        F = self.F

        def typed(fields: Iterable[tuple[str, str]], given: Mapping[str, Column]) -> Column:
            return F.struct(*[given.get(name, F.lit(None)).cast(t).alias(name) for name, t in fields])

        return [kind.alias("kind"), (F.lit(1) if n is None else n).cast(_L).alias("n"),
                typed(_SK_FIELDS, sk).alias("sk"), typed(_EX_FIELDS, ex).alias("ex")]

    def _each(self, rows: Sequence[tuple[Any, ...]], ddl: str, kernel: Any, out_schema: str,
              costs: Sequence[float] | None = None, slots: int | None = None) -> DataFrame:
        """``kernel`` (``mapInArrow`` over task rows of schema ``ddl``) over ``rows``. In a
        big check, one Spark task per row, the costliest first when ``costs`` are given
        (:mod:`harness.check.tasks`); else the rows as a local relation, which Spark cuts
        in one task per core (a task costs more than a small check's rows). ``slots``: at
        most that many tasks at once, when fewer than the cores."""
        limit = slots if slots is not None and slots < min(len(rows), self.cores) else None
        if not self.spread:
            frame = self.spark.createDataFrame(rows, ddl)
            if limit is not None:
                frame = frame.coalesce(1) if limit == 1 else frame.repartition(limit)
            return frame.mapInArrow(kernel, out_schema)
        if costs is not None:
            order = sorted(range(len(rows)), key=lambda i: -costs[i])
            rows = [rows[i] for i in order]
        frame = self.spark.range(0, len(rows), 1, max(1, len(rows)))
        if limit is not None:
            frame = frame.coalesce(limit)
        return frame.mapInArrow(tasks.by_index(rows, ddl, kernel), out_schema)

    # -- 1. ingest -------------------------------------------------------------

    def _ingest(self) -> tuple[DataFrame, list[Row]]:
        """Step 1 in the Python workers (:mod:`harness.check.ingest`): one task per file
        split writes its events as Parquet, read back from there, and returns its names
        and its count of lines and skipped lines (step 2's input)."""
        out = self.scratch / "events"
        out.mkdir()
        (self.scratch / "ids").mkdir()  # the tasks make what is below, never these
        splits = ingest.plan(self.inputs.history, self.inputs.replicas)
        run = ingest.kernel(str(out), str(self.scratch / "ids"), self.buckets)
        names = self._each(splits, ingest.TASK_SCHEMA, run, ingest.RESULT_SCHEMA,
                           costs=[stop - start for *_, start, stop in splits]).collect()
        return self.spark.read.option("recursiveFileLookup", "true").parquet(str(out)), names

    # -- 2. names --------------------------------------------------------------

    def _names(self, rows: Sequence[Row]) -> _Names:
        """From the ingest tasks' distinct (client, topic, polled partition,
        read_committed) rows: a few per (client, topic, partition) and task (a task's row
        of line counts has no names)."""
        names: tuple[dict[int, str], dict[int, str]] = ({}, {})
        for row in rows:
            for known, h, name in ((names[0], row.client_h, row.client), (names[1], row.topic_h, row.topic)):
                if h is not None and known.setdefault(h, name) != name:
                    raise CheckError(f"names {known[h]!r} and {name!r} have the same 64-bit hash; rename one")
        return _Names(names[0], names[1],
                      frozenset(r.client_h for r in rows if r.rc and r.client_h is not None),
                      tuple(sorted({(r.topic_h, r.polled) for r in rows
                                    if r.polled is not None and r.topic_h is not None})))

    # -- 3. per message id -----------------------------------------------------

    def _mids(self, names: _Names) -> DataFrame:
        """Step 3 in the Python workers (:mod:`harness.check.mids`): one task per id
        bucket the ingest wrote aggregates its ids and writes them in a directory per
        (ack topic, ack partition), read back from there."""
        out, counts, tx = self.scratch / "mids", self.scratch / "mids-counts", self.scratch / "mids-tx"
        for directory in (out, counts, tx):
            directory.mkdir()
        loud = None
        if self.spread:  # a big check: its id anomalies read only the ids that can have one
            loud_dir = self.scratch / "mids-loud"
            loud_dir.mkdir()
            loud = mids_kernel.Loud(*self._loud_flags(), str(loud_dir))
        run = mids_kernel.kernel(str(self.scratch / "ids"), str(out), names.rc_clients, str(counts), str(tx),
                                 loud)
        stats = self._each([(b,) for b in range(self.buckets)], mids_kernel.TASK_SCHEMA, run,
                           mids_kernel.RESULT_SCHEMA).collect()
        self.tx_ids = sum(r.tx_ids for r in stats)
        finite = [r for r in stats if r.inv_lo is not None]
        self.inv_span = (min(r.inv_lo for r in finite), max(r.inv_hi for r in finite)) if finite else None
        self.flag_counts = self.spark.read.schema(_ddl(mids_kernel.COUNTS_SCHEMA)).parquet(str(counts))
        ids = _ddl(mids_kernel.MIDS_SCHEMA)
        self.tx_mids = self.spark.read.schema(ids).parquet(str(tx))
        self.loud = None if loud is None else self.spark.read.schema(ids).parquet(loud.out_dir)
        return self.spark.read.schema(_MIDS_SCHEMA).parquet(str(out))

    def _loud_flags(self) -> tuple[bytes, bytes]:
        """The flag values that can make an id anomalous (:class:`harness.check.mids.Loud`),
        worked out by the id anomalies' own conditions (:meth:`_mid_conditions`) over every
        flag value, every transaction state (only ``TS_NONE`` for an id sent without a
        transaction) and every order of the read and commit times, both known or not. A
        condition over another column fails here, not in silence. Once per process: the
        conditions are this module's code."""
        global _loud
        if _loud is None:
            F = self.F
            # (read, commit) times: neither, one, both in each order, far apart (any slack)
            times = [(None, None), (0.0, 1e9), (1e9, 0.0), (None, 0.0), (0.0, None)]
            cases = [(False, TS_NONE, rc_t, commit_t) for rc_t, commit_t in times]
            cases += [(True, ts, rc_t, commit_t) for ts in (TS_NONE, *TS_NAMES) for rc_t, commit_t in times]
            grid = (self.spark.range(mids_kernel.FLAG_VALUES).select(F.col("id").cast("int").alias("f"))
                    .crossJoin(self.spark.createDataFrame(
                        cases, "tx boolean, ts int, rc_t double, commit_t double")))
            conditions, _ = self._mid_conditions()
            anyone = self._any_of(conditions)
            # at most 53k rows, as Arrow: no shuffle (a distinct's), no Row objects
            found = grid.where(anyone).select("tx", "f").toArrow()
            tx = found["tx"].to_numpy(zero_copy_only=False)
            f = found["f"].to_numpy(zero_copy_only=False)
            flags = [np.zeros(mids_kernel.FLAG_VALUES, np.bool_) for _ in range(2)]
            for loud, at in zip(flags, (f[~tx], f[tx]), strict=True):
                loud[at] = True
            _loud = (flags[0].tobytes(), flags[1].tobytes())
        return _loud

    # -- 4. anomalies -----------------------------------------------------------

    def _anomalies(self, events: DataFrame, mids: DataFrame, names: _Names,
                   txns: DataFrame | None, copies: bool, keyed: bool) -> list[Row]:
        from pyspark.sql import Window

        F = self.F
        ranks = _Ranks(F, names)
        assert self.flag_counts is not None  # step 3's
        # the id anomalies over the ids that can have one (a big check) or all; the outcome
        # counts over the flag counts (step 3's): neither scans the whole per-id table
        rows = (self._mid_rows(self._with_tx(mids if self.loud is None else self.loud, txns))
                .unionByName(self._placed_rows(self._by_pair(names), ranks))
                .unionByName(self._count_rows(self._with_tx(self.flag_counts, txns))))
        if keyed:  # Key_Shared run polls (the ingest counts them)
            rows = rows.unionByName(self._key_order_rows(events, ranks))
        if txns is not None:
            rows = rows.unionByName(self._txn_rows(txns))
        if copies:
            rows = rows.unionByName(self._eos_rows(mids))
        kind = Window.partitionBy("kind")
        ranked = rows.select("kind", "ex", F.sum("n").over(kind).alias("total"),
                             F.row_number().over(kind.orderBy("sk")).alias("rn"))
        return ranked.where(F.col("rn") <= MAX_EXAMPLES).collect()

    def _any_of(self, conditions: Mapping[str, Column]) -> Column:
        """True where one of ``conditions`` holds (a null one counts as false)."""
        F = self.F
        anyone = F.lit(False)
        for cond in conditions.values():
            anyone = anyone | F.coalesce(cond, F.lit(False))
        return anyone

    def _explode_kinds(self, df: DataFrame, conditions: Mapping[str, Column]) -> DataFrame:
        """One row per (row of ``df``, kind whose condition holds), kind in column ``kind``."""
        F = self.F
        anyone = self._any_of(conditions)
        kinds = F.array_compact(F.array(*[F.when(cond, F.lit(kind)) for kind, cond in conditions.items()]))
        return df.where(anyone).select(F.explode(kinds).alias("kind"), "*")

    def _aborted(self) -> Column:
        """The id was written by an aborted transaction (its own, or ``"txn": "aborted"``)."""
        return self._has("f", F_ABORTED) | (self.F.col("ts") == TS_ABORTED)

    def _mid_conditions(self) -> tuple[dict[str, Column], Column]:
        """The id anomalies: each kind's condition on a per-id row with its transaction's
        state (:meth:`_with_tx`), and the aborted-read condition that only read_committed
        polls meet (its example's ``n``)."""
        F = self.F
        has, lacks = self._has, self._lacks
        ts = F.col("ts")
        outside = ts == TS_NONE
        committed = ((outside & ((has("f", F_OK) & lacks("f", F_ABORTED))
                                 | (lacks("f", F_OK | F_FAIL) & has("f", F_INFO | F_INV) & has("f", F_RUN))))
                     | ts.isin(TS_COMMITTED, TS_SEEN))
        rc_aborted = self._aborted() & has("f", F_RC_READ)
        failed_read = (outside & lacks("f", F_ABORTED | F_OK) & has("f", F_FAIL) & has("f", F_RUN | F_REC))
        commit_t = F.col("commit_t")
        precommitted = (ts.isin(TS_COMMITTED, TS_SEEN, TS_UNKNOWN) & has("f", F_RC_READ)
                        & (commit_t.isNull() | (F.col("rc_t") < commit_t - PRECOMMIT_SLACK_S)))
        return {
            "lost-write": committed & lacks("f", F_REC),
            "unseen": committed & lacks("f", F_RUN) & has("f", F_REC),
            "duplicate": has("f", F_DUP),
            "unexpected": has("f", F_RUN | F_REC) & lacks("f", F_INV),
            "aborted-read": rc_aborted | failed_read,
            "precommitted-read": precommitted,
        }, rc_aborted

    def _mid_rows(self, mids: DataFrame) -> DataFrame:
        """Anomalies of one id; ``mids`` with its transaction's state (:meth:`_with_tx`)."""
        F = self.F
        conditions, rc_aborted = self._mid_conditions()
        found = self._explode_kinds(mids, conditions)
        ack = {c: F.col(f"ack_{c}") for c in ("client", "topic", "part", "pl", "pe", "pb")}
        kind = F.col("kind")
        return found.select(*self._uniform(kind, {"s": F.col("mid")}, {
            "mid": F.col("mid"), **ack,
            # aborted-read: 1 when only read_committed polls count (an aborted transaction's id)
            "n": F.when(kind == "aborted-read", F.when(rc_aborted, 1).otherwise(0)),
            "tx": F.when(kind == "precommitted-read", F.col("tx")),
            "t2": F.when(kind == "precommitted-read", F.col("commit_t"))}))

    # -- a copier's exactly-once (docs/checker.md "Exactly once") ----------------

    def _eos_rows(self, mids: DataFrame) -> DataFrame:
        """eos-duplicate, eos-loss and the eos-copied count (of a run where some send copies
        an input record: has a ``src``). A copy counts when the read_committed recovery read
        has it."""
        F = self.F
        copies = (mids.where(F.col("src").isNotNull() & self._has("f", F_REC_RC)).groupBy("src")
                  .agg(F.count(F.lit(1)).alias("copies"), F.min("mid").alias("copy")))
        duplicate = copies.where(F.col("copies") > 1).select(*self._uniform(
            F.lit("eos-duplicate"), {"s": F.col("src")},
            {"mid": F.col("src"), "n": F.col("copies"), "mid2": F.col("copy")}))
        # per input (topic, partition): the highest acknowledged position of a copied input id
        pos = F.struct("ack_pl", "ack_pe", "ack_pb")
        placed = mids.where(F.col("ack_pl").isNotNull() & F.col("ack_topic").isNotNull()).select(
            "mid", "f", "ack_topic", "ack_part", "ack_pl", "ack_pe", "ack_pb", pos.alias("at"))
        copied = copies.select(F.col("src").alias("mid"))
        bound = (placed.join(copied, "mid", "left_semi").groupBy("ack_topic", "ack_part")
                 .agg(F.max("at").alias("bound")))
        lost = (placed.where(self._has("f", F_REC_RC)).join(copied, "mid", "left_anti")
                .join(F.broadcast(bound), ["ack_topic", "ack_part"]).where(F.col("at") < F.col("bound")))
        loss = lost.select(*self._uniform(F.lit("eos-loss"), {"s": F.col("mid")}, {
            "mid": F.col("mid"), "topic": F.col("ack_topic"), "part": F.col("ack_part"),
            "pl": F.col("ack_pl"), "pe": F.col("ack_pe"), "pb": F.col("ack_pb")}))
        return duplicate.unionByName(loss).unionByName(self._sums(copies, {"eos-copied": F.lit(True)}))

    # -- transactions (docs/checker.md "Transactions") ---------------------------

    def _transactions(self, events: DataFrame) -> DataFrame | None:
        """One row per transaction: its state ``ts`` (``TS_*``), commit time, name, producer
        and order, and of its ids: how many (``n``), in the recovery read (``rec``; by a
        read_committed reader ``rec_rc``), read by read_committed (``rc``) and
        read_uncommitted (``ru``) clients, and one missing from the recovery read. None when
        the run has no transaction (no ``txn`` event, no send with a ``tx``). A transaction's
        name is that of its first ``txn`` event, else (none) of its first send."""
        F = self.F
        x = self.scratch / "events" / ingest.TXNS
        if not x.is_dir() and not self.tx_ids:
            return None
        assert self.tx_mids is not None  # step 3's
        sent = self.tx_mids

        def ids(bits: int) -> Column:
            return F.sum(F.when(self._has("f", bits), 1).otherwise(0))

        table = sent.groupBy("tx_h").agg(
            F.count(F.lit(1)).alias("n"), ids(F_REC).alias("rec"), ids(F_REC_RC).alias("rec_rc"),
            ids(F_RC_READ).alias("rc"), ids(F_RU_READ).alias("ru"),
            F.min(F.when(self._lacks("f", F_REC), F.col("mid"))).alias("missing"),
            F.min_by("inv_client", "inv_seq").alias("inv_client"), F.min("inv_seq").alias("inv_seq"))
        if x.is_dir():
            txa = F.col("txa")
            calls = self.spark.read.parquet(str(x)).where(F.col("tx_h").isNotNull()).groupBy("tx_h").agg(
                F.max(F.when(txa == ingest.txa("commit", "ok"), 1).otherwise(0)).alias("c_ok"),
                F.max(F.when(txa == ingest.txa("abort", "ok"), 1).otherwise(0)).alias("a_ok"),
                F.min(F.when(txa == ingest.txa("commit", "invoke"), F.col("t"))).alias("commit_t"),
                F.min_by("tx", "seq").alias("tx"), F.min_by("client_h", "seq").alias("tx_client"),
                F.min("seq").alias("tx_seq"))
        else:
            calls = self.spark.createDataFrame(
                [], "tx_h long, c_ok int, a_ok int, commit_t double, tx string, tx_client long, tx_seq long")
        both = table.join(calls, "tx_h", "full")
        state = (F.when(F.col("c_ok") == 1, TS_COMMITTED).when(F.col("a_ok") == 1, TS_ABORTED)
                 .when(F.coalesce(F.col("rc"), F.lit(0)) > 0, TS_SEEN).otherwise(TS_UNKNOWN))
        staged = "txns"
        txns = self._stage(staged, both.select(
            "tx_h", state.alias("ts"), "commit_t", "tx",
            F.coalesce("inv_client", "tx_client").alias("client"),
            F.coalesce("inv_seq", "tx_seq").alias("order"),
            *[F.coalesce(F.col(c), F.lit(0)).cast(_L).alias(c) for c in ("n", "rec", "rec_rc", "rc", "ru")],
            "missing"))
        nulls = _has_nulls(self.scratch / staged, "tx")
        if nulls is False or (nulls is None and not txns.where(F.col("tx").isNull()).limit(1).count()):
            return txns
        # Transactions without a txn event: named by their first send (one more scan of the
        # events, only then).
        sends = (events.where((F.col("code") == INVOKE) & F.col("tx_h").isNotNull())
                 .groupBy("tx_h").agg(F.min_by("tx", "seq").alias("sent_tx")))
        return self._stage("txns-named", txns.join(sends, "tx_h", "left").select(
            *[F.coalesce("tx", "sent_tx").alias("tx") if c == "tx" else F.col(c) for c in txns.columns]))

    def _with_tx(self, mids: DataFrame, txns: DataFrame | None) -> DataFrame:
        """``mids`` with its transaction's state ``ts``, name ``tx`` and ``commit_t``."""
        F = self.F
        if txns is None:
            return mids.select("*", F.lit(TS_NONE).alias("ts"), F.lit(None).cast(_S).alias("tx"),
                               F.lit(None).cast("double").alias("commit_t"))
        joined = mids.join(F.broadcast(txns.select("tx_h", "ts", "tx", "commit_t")), "tx_h", "left")
        return joined.withColumn("ts", F.coalesce(F.col("ts"), F.lit(TS_NONE)))

    def _torn(self) -> Column:
        F = self.F
        return (F.col("ts").isin(TS_COMMITTED, TS_SEEN) & (F.col("rec_rc") > 0)
                & (F.col("rec") < F.col("n")))

    def _txn_rows(self, txns: DataFrame) -> DataFrame:
        """torn-transaction, one row per transaction, and the transaction counts."""
        F = self.F
        torn = txns.where(self._torn()).select(*self._uniform(
            F.lit("torn-transaction"), {"s": F.col("tx")},
            {"tx": F.col("tx"), "client": F.col("client"), "n": F.col("n"), "n2": F.col("rec"),
             "mid": F.col("missing")}))
        ts = F.col("ts")
        counts = {"txn-committed": ts == TS_COMMITTED, "txn-aborted": ts == TS_ABORTED,
                  "txn-unknown": ts.isin(TS_SEEN, TS_UNKNOWN), "txn-seen-committed": ts == TS_SEEN}
        return torn.unionByName(self._sums(txns, counts))

    def _transaction_list(self, txns: DataFrame | None, names: _Names, total: int) -> dict[str, Any] | None:
        """The result's listing: up to MAX_TRANSACTIONS transactions, torn ones and aborted
        ones a read_committed client read first, then in the order they began; ``total``
        transactions in all (step 4's counts)."""
        if txns is None:
            return None
        F = self.F
        flagged = self._torn() | ((F.col("ts") == TS_ABORTED) & (F.col("rc") > 0))
        rows = (txns.select("*", flagged.alias("flagged"))
                .orderBy(F.col("flagged").desc(), F.col("order").asc_nulls_last(), "tx")
                .limit(MAX_TRANSACTIONS).collect())
        return {"total": total, "shown": [{
            "tx": r.tx, "client": names.clients.get(r.client) if r.client is not None else None,
            "state": TS_NAMES[r.ts], "ids": r.n, "recovered": r.rec, "read_committed": r.rc,
            "read_uncommitted": r.ru, "flagged": bool(r.flagged)} for r in rows]}

    def _by_pair(self, names: _Names) -> DataFrame:
        """The kernel of ``harness.check.placed``, one task per (topic, partition) that
        has a poll, a replica record or an ack: its polls and replica records are the
        ingest's directory of that pair, its acks the per-id table's, its resets are read
        from the ingest's directory of resets. Only anomaly rows come back."""
        events = self.scratch / "events"
        placed = events / ingest.PLACED
        places: dict[tuple[int | None, int], str] = (
            {ingest.place_pair(d.name): str(d) for d in placed.iterdir()} if placed.is_dir() else {})
        acks = {(topic, part): path for topic, part, path in self._mids_dirs()
                if part is not None}  # else rows without an ack position
        polled = set(names.partitions)
        pairs = sorted(places.keys() | acks.keys(), key=lambda tp: (tp[0] is not None, tp[0] or 0, tp[1]))
        pair_tasks = [(t, p, (t, p) in polled, places.get((t, p)), acks.get((t, p))) for t, p in pairs]
        if not pair_tasks:
            return self.spark.createDataFrame([], placed_kernel.OUT_SCHEMA)
        resets = events / ingest.RESETS
        run = placed_kernel.pair_kernel(str(resets) if resets.is_dir() else None)
        sizes: list[int] | None = None
        slots = None
        if self.inputs.local:  # as many tasks at once as the machine's memory holds
            sizes = [placed_kernel.task_rows(t[3], t[4]) for t in pair_tasks]
            slots = placed_kernel.task_slots(sizes, placed_kernel.memory_budget(), self.cores)
        return self._each(pair_tasks, placed_kernel.PAIR_SCHEMA, run, placed_kernel.OUT_SCHEMA, sizes, slots)

    def _mids_dirs(self) -> list[tuple[int | None, int | None, str]]:
        """The per-id table's directories (its ack topic, its ack partition, its path)."""
        return [(_hive_value(topic_dir.name), _hive_value(part_dir.name), str(part_dir))
                for topic_dir in sorted((self.scratch / "mids").glob("ack_topic=*"))
                for part_dir in sorted(topic_dir.glob("ack_part=*"))]

    def _placed_rows(self, rows: DataFrame, ranks: _Ranks) -> DataFrame:
        """The kernel's anomaly rows (position and sequence anomalies) as uniform rows."""
        F = self.F
        pos = ("pl", "pe", "pb")
        at_position = self._uniform(F.col("kind"), {
            "a": ranks.topic("topic_h"), "b": F.col("part"), "c": F.col("pl"), "d": F.col("pe"),
            "e": F.col("pb")}, {"topic": F.col("topic_h"), **{c: F.col(c) for c in ("part", *pos)}})
        poll = ~F.col("kind").isin(*_SEND_KINDS)
        in_sequence = self._uniform(F.col("kind"), self._sequence_key(ranks), {
            **self._sequence_example(),
            "rec": F.when(poll, F.col("grp") == 1),
            "n": F.when(F.col("kind").isin("poll-skip", "int-poll-skip"), F.col("n")),
        })
        of_position = F.col("kind").isin(*_POS_KINDS)
        return rows.select(*[F.when(of_position, a).otherwise(b).alias(name)
                             for a, b, name in zip(at_position, in_sequence, ("kind", "n", "sk", "ex"),
                                                   strict=False)])

    def _key_order_rows(self, events: DataFrame, ranks: _Ranks) -> DataFrame:
        """key-order: Key_Shared run polls (``ks_t`` set at ingest) with a position; per
        (topic, subscription, id) the first in poll order (time, then file order); per
        (topic, subscription, key, partition), each first poll against the highest position
        of the earlier ones (the latest such poll is the example's ``prev``)."""
        from pyspark.sql import Window

        F = self.F
        order = ("ks_t", "seq")
        t = F.col("ks_t")
        polls = events.where(t.isNotNull() & ~F.isnan(t) & (F.abs(t) < float("inf")) & F.col("pl").isNotNull()
                             & F.col("topic_h").isNotNull()).select(
            "client_h", "topic_h", "part", "pl", "pe", "pb", "mid", "seq", "ks_t", "ks_sub", "ks_key")
        by_mid = Window.partitionBy("topic_h", "ks_sub", "mid").orderBy(*order)
        firsts = (polls.select("*", F.row_number().over(by_mid).alias("nth"))
                  .where(F.col("nth") == 1).drop("nth"))
        earlier = (Window.partitionBy("topic_h", "ks_sub", "ks_key", "part").orderBy(*order)
                   .rowsBetween(Window.unboundedPreceding, -1))
        top = F.max(F.struct("pl", "pe", "pb", *order, "client_h", "mid")).over(earlier)
        found = (firsts.select("*", top.alias("prev"))
                 .where(self._pos() < self._pos("prev.")))
        return found.select(*self._uniform(
            F.lit("key-order"),
            {"s": F.col("ks_sub"), "a": ranks.topic("topic_h"), "k": F.col("ks_key"), "b": F.col("part"),
             "c": F.col("seq")},
            {"sub": F.col("ks_sub"), "key": F.col("ks_key"), "client": F.col("client_h"), "mid": F.col("mid"),
             "topic": F.col("topic_h"), "part": F.col("part"), "pl": F.col("pl"), "pe": F.col("pe"),
             "pb": F.col("pb"), "client2": F.col("prev.client_h"), "mid2": F.col("prev.mid"),
             "ql": F.col("prev.pl"), "qe": F.col("prev.pe"), "qb": F.col("prev.pb")}))

    def _sequence_key(self, ranks: _Ranks) -> dict[str, Column]:
        F = self.F
        return {"a": ranks.client("client_h"), "b": ranks.topic("topic_h"), "c": F.col("part"),
                "d": F.col("seq")}

    def _sequence_example(self) -> dict[str, Column]:
        """Example fields of a poll or ack and the one before it; their ids are looked up
        later by ``seq`` (ids stay out of the big shuffle)."""
        F = self.F
        cols = ("client_h", "topic_h", "part", "pl", "pe", "pb", "seq")
        return {
            **{name.removesuffix("_h"): F.col(name) for name in cols},
            **{name: F.col(name) for name in ("seq2", "ql", "qe", "qb")},
        }

    def _count_rows(self, counts: DataFrame) -> DataFrame:
        """The outcome counts, over the flag counts (step 3's, with their transactions'
        states: :meth:`_with_tx`): each ``n`` ids."""
        has, lacks = self._has, self._lacks
        outcomes = {
            "fail": has("f", F_FAIL) & lacks("f", F_OK),
            "info": has("f", F_INFO) & lacks("f", F_OK | F_FAIL),
            "unacked": has("f", F_INV) & lacks("f", F_OK | F_FAIL | F_INFO),
        }
        conditions = {"invoked": has("f", F_INV), "ok": has("f", F_OK), "fail": has("f", F_FAIL),
                      "info": has("f", F_INFO), "polled": has("f", F_RUN),
                      "recovered": has("f", F_REC)}
        for outcome, cond in outcomes.items():
            conditions[f"{outcome}-present"] = cond & has("f", F_REC)
            conditions[f"{outcome}-absent"] = cond & lacks("f", F_REC)
        conditions["aborted-uncommitted-read"] = self._aborted() & has("f", F_RU_READ)
        return self._sums(counts, conditions, weight="n")

    def _sums(self, df: DataFrame, conditions: Mapping[str, Column], weight: str | None = None) -> DataFrame:
        """Uniform ``count:<name>`` rows: the rows of ``df`` where each condition holds (each
        counting as its ``weight`` column, else as one)."""
        F = self.F
        names = list(conditions)
        one = F.lit(1) if weight is None else F.col(weight)
        sums = df.agg(*[F.sum(F.when(cond, one).otherwise(0)).alias(f"c{i}")
                        for i, cond in enumerate(conditions.values())])
        counts = sums.select(F.explode(F.array(*[
            F.struct(F.lit(f"count:{name}").alias("kind"), F.coalesce(F.col(f"c{i}"), F.lit(0)).alias("n"))
            for i, name in enumerate(names)])).alias("c"))
        return counts.select(*self._uniform(F.col("c.kind"), {}, {}, n=F.col("c.n")))

    # -- 5. details and the result ---------------------------------------------

    def result(self) -> CheckResult:
        self._progress(f"reading {self.size / 1e9:.1f} GB of history "
                       f"({len(self.inputs.history) + len(self.inputs.replicas)} files)")
        events, name_rows = self._ingest()
        tallies = [r for r in name_rows if r.lines is not None]
        lines, skipped = sum(r.lines for r in tallies), sum(r.skipped for r in tallies)
        copies = any(r.copies for r in tallies)
        keyed = any(r.keyed for r in tallies)
        require_lines(self.inputs.run_dir, lines, skipped)
        plural = "s" if self.buckets > 1 else ""
        self._progress(f"{lines:,} lines read; per message id ({self.buckets} bucket{plural})")
        names = self._names(name_rows)
        mids = self._mids(names)
        self._progress("anomalies")
        txns = self._transactions(events)
        totals: dict[str, int] = {}
        firsts: dict[str, list[Row]] = {}
        for row in sorted(self._anomalies(events, mids, names, txns, copies, keyed), key=lambda r: r.rn):
            totals[row.kind] = row.total
            firsts.setdefault(row.kind, []).append(row.ex)
        self._progress("examples, latency and transactions")
        details = self._details(names, firsts)
        examples = {kind: [_example(kind, ex, names, details) for ex in exs]
                    for kind, exs in firsts.items() if not kind.startswith("count:")}
        counts = {kind.removeprefix("count:"): n for kind, n in totals.items() if kind.startswith("count:")}
        anomalies = {kind: n for kind, n in totals.items() if not kind.startswith("count:")}
        result = make_result(anomalies, examples, {**counts, "lines": lines, "skipped": skipped})
        # every transaction has one state: committed, aborted or unknown (seen committed or not)
        listed = sum(counts.get(f"txn-{state}", 0) for state in ("committed", "aborted", "unknown"))
        result = dataclasses.replace(result, latency=self._latency(names),
                                     transactions=self._transaction_list(txns, names, listed))
        self._progress("done")
        return result

    # -- 6. latency and availability (harness.check.latency) ----------------------

    def _latency(self, names: _Names) -> dict[str, Any] | None:
        """Send and end-to-end latency percentiles (run, windows, phases) and availability
        per fault: the invoke time span of the per-id table (step 3's), then one ``mapInArrow`` task
        per directory of it (``harness.check.latency.kernel``: NumPy bucket counts and time
        bins), handed to the driver as Arrow and summed there (``latency.gather``)."""
        from harness.check import latency as lat

        if self.inv_span is None:  # no finite first-invoke time (step 3's tasks tell)
            return None
        lo, hi = (math.floor(t / lat.BIN_S) for t in self.inv_span)
        t0 = lo * lat.BIN_S
        window_s = lat.window_for(hi * lat.BIN_S - t0)
        faults = lat.faults_of(self.inputs.run_dir)
        dirs = self._mids_dirs()
        sizes = [sum(f.stat().st_size for f in Path(path).iterdir()) for *_, path in dirs]
        out = self._each(dirs, lat.TASK_SCHEMA, lat.kernel(t0, window_s, faults.start, faults.end),
                         lat.OUT_SCHEMA, sizes).toArrow()
        invokes, acks, groups = lat.gather(out, names.topics)
        run = groups["run"].get(None, lat.Histograms())
        per_partition = []  # per producer and partition acknowledged: its ids' send and e2e latency
        for (client_h, topic_h, part), hist in groups["pair"].items():
            per_partition.append({"client": names.clients.get(client_h, str(client_h)),
                                  "topic": names.topics.get(topic_h, str(topic_h)), "partition": part,
                                  **hist.stats()})
        per_partition.sort(key=lambda p: (p["client"], p["topic"], p["partition"]))
        all_acks = [values[-1] for values in acks.values() if values]
        # no fault, no time bins (the kernel's): nothing to measure
        run_end = max([*invokes[-1:], *all_acks]) * lat.BIN_S if invokes else None
        availability = lat.availability(faults, acks, invokes, run_end)
        for fault in availability:
            fault["t"] = round(fault["t"] - t0, 3)
        measured = [f["max_unavailable_s"] for f in availability if f["max_unavailable_s"] is not None]
        return {
            "window_s": window_s, "start": t0, **run.stats(),
            "phases": {k: h.stats() for k, h in sorted(groups["phase"].items())},
            "during": None if faults.start is None else
            [round(faults.start - t0, 3), None if faults.end is None else round(faults.end - t0, 3)],
            "windows": [{"t": k * window_s, **h.stats()} for k, h in sorted(groups["window"].items())],
            "partitions": per_partition,
            "availability": availability,
            "max_unavailable_s": max(measured) if measured else None,
        }

    def _details(self, names: _Names, firsts: Mapping[str, list[Row]]) -> _Details:
        """The events and acks of the example ids, sends and positions that need more than
        the anomaly row, read by this process with PyArrow where the ingest and the per-id
        step put them (:mod:`harness.check.details`; no Spark job for a handful of rows)."""
        ids = sorted({ex.mid for kind in ("duplicate", "unexpected", "aborted-read", "precommitted-read")
                      for ex in firsts.get(kind, [])})
        places = sorted({_place(ex) for kind in _POS_KINDS for ex in firsts.get(kind, [])
                         if ex.topic is not None and ex.part is not None})
        seqs = sorted({s for kind in _SEQ_KINDS for ex in firsts.get(kind, []) for s in (ex.seq, ex.seq2)
                       if s is not None})
        if not ids and not places and not seqs:
            return _Details([], [])
        found, acks = details.read(self.scratch, self.buckets, self.inputs.history, ids, places, seqs)
        return _Details([_Event.of(r, names) for r in found], acks)


@dataclass(frozen=True)
class _Event:
    """An event the details read: a row of the events or of an id bucket (which hold no
    names: those come from their hashes). ``mid`` and ``seq`` are typed ``Any``: the
    examples sort them where they are set (polls have both)."""

    code: int
    client: str | None
    client_h: int | None
    mid: Any
    topic: str | None
    topic_h: int | None
    part: int | None
    pl: int | None
    pe: int | None
    pb: int | None
    flags: int
    seq: Any
    node: str | None
    t: float | None

    @classmethod
    def of(cls, d: Mapping[str, Any], names: _Names) -> _Event:
        client = d["client"] if d["client"] is not None else names.clients.get(d["client_h"])
        topic = d["topic"] if d["topic"] is not None else names.topics.get(d["topic_h"])
        return cls(code=d["code"], client=client, client_h=d["client_h"], mid=d["mid"], topic=topic,
                   topic_h=d["topic_h"], part=d["part"], pl=d["pl"], pe=d["pe"], pb=d["pb"],
                   flags=d["flags"], seq=d["seq"], node=d["node"], t=d["t"])


class _Ranks:
    """Sort ranks of client and topic hashes (their names' order), as Spark columns."""

    def __init__(self, F: Any, names: _Names) -> None:
        self.F = F
        self._clients = names.rank(names.clients)
        self._topics = names.rank(names.topics)

    def client(self, col: str) -> Column:
        return self._lookup(self._clients, col)

    def topic(self, col: str) -> Column:
        return self._lookup(self._topics, col)

    def _lookup(self, ranks: Mapping[int, int], col: str) -> Column:
        F = self.F
        if not ranks:
            return F.lit(None).cast(_L)
        pairs = [F.lit(x) for h, r in ranks.items() for x in (h, r)]
        return F.element_at(F.create_map(*pairs), F.col(col))


@dataclass(frozen=True)
class _Details:
    events: list[_Event]
    acks: list[details.Ack]


def _place(ex: Row) -> details.Place:
    return (ex.topic, ex.part, ex.pl, ex.pe, ex.pb)


def _pos_of(row: Any, prefix: str = "p") -> tuple[int, int, int] | None:
    first = getattr(row, prefix + "l")
    return None if first is None else (first, getattr(row, prefix + "e"), getattr(row, prefix + "b"))


def _example(kind: str, ex: Row, names: _Names, details: _Details) -> dict[str, Any]:
    """The example dict of one anomaly row (see docs/checker.md for each kind's fields)."""
    topic = names.topics.get(ex.topic) if ex.topic is not None else None
    client = names.clients.get(ex.client) if ex.client is not None else None
    if kind == "key-order":
        return example(subscription=ex.sub, key=ex.key, client=client, mid=ex.mid, topic=topic,
                       partition=ex.part, pos=_pos_of(ex),
                       prev={"client": names.clients.get(ex.client2) if ex.client2 is not None else None,
                             "mid": ex.mid2, "pos": _pos_of(ex, "q")})
    if kind in ("lost-write", "unseen"):
        return example(mid=ex.mid, client=client, topic=topic, partition=ex.part, pos=_pos_of(ex))
    if kind in _SEQ_KINDS:
        phase = None if kind in _SEND_KINDS else ("recovery" if ex.rec else "run")
        mid_at = {r.seq: r.mid for r in details.events if r.seq in (ex.seq, ex.seq2)}
        return example(client=client, phase=phase, mid=mid_at.get(ex.seq), topic=topic, partition=ex.part,
                       pos=_pos_of(ex), prev={"mid": mid_at.get(ex.seq2), "pos": _pos_of(ex, "q")},
                       skipped=ex.n)
    if kind == "duplicate":
        bindings = {(r.topic, r.part, _pos_of(r)) for r in details.events
                    if r.mid == ex.mid and r.code == POLL and r.pl is not None and r.topic is not None}
        bindings |= {(names.topics[a.ack_topic], a.ack_part, _pos_of(a, "ack_p")) for a in details.acks
                     if a.mid == ex.mid and a.ack_pl is not None and a.ack_topic is not None}
        return example(mid=ex.mid, positions=[example(topic=t, partition=p, pos=pos)
                                              for t, p, pos in sorted(bindings)[:MAX_EXAMPLES]])
    if kind == "torn-transaction":
        return example(tx=ex.tx, client=client, ids=ex.n, recovered=ex.n2, missing=ex.mid)
    if kind == "eos-duplicate":
        return example(mid=ex.mid, copies=ex.n, copy=ex.mid2)
    if kind == "eos-loss":
        return example(mid=ex.mid, topic=topic, partition=ex.part, pos=_pos_of(ex))
    if kind in ("unexpected", "aborted-read", "precommitted-read"):
        rc_only = kind == "precommitted-read" or (kind == "aborted-read" and ex.n == 1)
        reads = [r for r in details.events if r.mid == ex.mid and r.code == POLL
                 and (not rc_only or r.client_h in names.rc_clients)
                 and (kind != "precommitted-read" or ex.t2 is None
                      or (r.t is not None and r.t < ex.t2 - PRECOMMIT_SLACK_S))]
        first = min(reads, key=lambda r: r.seq)
        if kind == "precommitted-read":
            return example(mid=ex.mid, tx=ex.tx, client=first.client,
                           phase="recovery" if first.flags & ROW_REC else "run", topic=first.topic,
                           partition=first.part, pos=_pos_of(first), t=first.t, commit_t=ex.t2)
        return example(mid=ex.mid, client=first.client,
                       phase="recovery" if first.flags & ROW_REC else "run", topic=first.topic,
                       partition=first.part, pos=_pos_of(first))
    place = _place(ex)
    here = [r for r in details.events if r.code in (POLL, REPLICA) and r.mid is not None
            and (r.topic_h, r.part, r.pl, r.pe, r.pb) == place]
    pos = (ex.pl, ex.pe, ex.pb)
    if kind == "replica-divergence":
        replicas = sorted({(r.node, r.mid) for r in here if r.code == REPLICA}, key=_none_first)
        return example(topic=topic, partition=ex.part, pos=pos,
                       replicas=[{"node": node, "mid": mid} for node, mid in replicas])
    if kind == "truncation-skip":
        recovered = sorted({r.mid for r in here if r.code == POLL and r.flags & ROW_REC})
        run = sorted((r for r in here if r.code == POLL and not r.flags & ROW_REC and r.mid not in recovered),
                     key=lambda r: r.seq)
        read = run[0] if run else None
        return example(topic=topic, partition=ex.part, pos=pos, mid=read.mid if read else None,
                       client=read.client if read else None,
                       recovered_mid=recovered[0] if recovered else None)
    acked = {a.mid for a in details.acks
             if (a.ack_topic, a.ack_part, a.ack_pl, a.ack_pe, a.ack_pb) == place}
    mids = sorted({r.mid for r in here} | acked)
    return example(topic=topic, partition=ex.part, pos=pos, mids=mids[:MAX_EXAMPLES])


def _has_nulls(directory: Path, column: str) -> bool | None:
    """Whether the Parquet files Spark wrote in ``directory`` hold a null in ``column``, read
    from their footers' statistics (a Spark job less); None when there is no file or a
    footer has no null count for it."""
    import pyarrow.parquet as pq

    files = sorted(directory.glob("*.parquet"))
    if not files:
        return None
    for path in files:
        meta = pq.read_metadata(path)
        names = meta.schema.names
        if column not in names:
            return None
        index = names.index(column)
        for group in range(meta.num_row_groups):
            stats = meta.row_group(group).column(index).statistics
            if stats is None or not stats.has_null_count:
                return None
            if stats.null_count:
                return True
    return False


def _hive_value(name: str) -> int | None:
    """The value of a Hive-style directory name ``column=value`` of a long column."""
    value = name.split("=", 1)[1]
    return None if value == mids_kernel.HIVE_NULL else int(value)


def _none_first(item: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((x is not None, x if x is not None else "") for x in item)
