"""The Spark settings of a check: the driver's (its heap, its collector, its log) and the
session's, and the shuffle's width for an input of a given size.

The shared server (:mod:`harness.check.engine.server`) is launched with
:func:`server_conf`; a classic session (``local[*]``, ``spark://``) is built with
:func:`driver_conf` and :func:`sql_conf`; a remote Spark Connect session sets
:func:`sql_conf` on itself.
"""

from __future__ import annotations

import math
import os
import re
import sys
from pathlib import Path

from harness.errors import CheckError

__all__ = ["DAEMON_MODULE", "driver_conf", "driver_memory", "mib", "server_conf", "shuffle_partitions",
           "sql_conf", "young_generation_mib"]

LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
#: the module the shared server's Python worker pool runs (:mod:`harness.check.engine.daemon`)
DAEMON_MODULE = "harness.check.engine.daemon"


def server_conf() -> dict[str, str]:
    """The shared server's settings (:mod:`harness.check.engine.server` launches it with them)."""
    return {**driver_conf(), **sql_conf(), "spark.pyspark.python": sys.executable,
            # no query-context capture of the client's call sites: a cost per column built
            "spark.python.sql.dataFrameDebugging.enabled": "false",
            # one Python worker pool for all sessions (each harness process has its own
            # session): no per-session working directory, so a new session's first task
            # does not start a new Python daemon
            "spark.sql.artifact.isolation.enabled": "false",
            "spark.python.daemon.module": DAEMON_MODULE}


def driver_conf() -> dict[str, str]:
    """The driver JVM's settings: batch work, so the throughput collector (pauses do not
    matter), a capped young generation (:func:`young_generation_mib`), no UI."""
    heap = driver_memory()
    java = ["-XX:+UseParallelGC", f"-XX:MaxNewSize={young_generation_mib(mib(heap))}m"]
    if LOG_CONFIG.is_file():  # absent if not installed as package data: Spark's defaults then
        java.append(f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}")
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


def sql_conf() -> dict[str, str]:
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


def young_generation_mib(heap_mib: int) -> int:
    """The most the JVM's young generation may grow to: 192 MiB per core of this machine
    (two at least), and no more than the JVM's own limit, a third of the heap. Left to
    itself, the collector grew it to about 2 GB in a 10M check for no gain in time: the JVM
    then held 3.2 GB instead of 1.4, and the peak of a 100M check was 14.1 GiB instead of
    12.1 (bench/LOG.md)."""
    return max(1, min(192 * max(2, os.cpu_count() or 1), heap_mib // 3))


_UNITS_MIB = {"b": 1 / (1 << 20), "k": 1 / 1024, "m": 1, "g": 1024, "t": 1 << 20, "p": 1 << 30}


def mib(size: str) -> int:
    """A memory size as Spark reads ``spark.driver.memory`` (:data:`_MEMORY_SIZE`; a bare
    number is MiB), in MiB."""
    match = _MEMORY_SIZE.fullmatch(size.strip())
    if match is None:
        raise ValueError(f"not a memory size: {size!r}")
    number, unit = match.groups()
    return int(int(number) * _UNITS_MIB[(unit or "m")[0].lower()])


def shuffle_partitions(input_bytes: int) -> int:
    """About one shuffle partition per 64 MiB of JSON input; one for small runs."""
    return max(1, min(2000, math.ceil(input_bytes / (64 << 20))))
