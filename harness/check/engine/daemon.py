"""The shared server's Python daemon (``spark.python.daemon.module``): PySpark's own,
with what the checker's kernels import loaded before it forks its workers, so a
worker started after the pool's idle time does not import NumPy and PyArrow again.

Its workers keep the memory they free for their next task (glibc: no ``mmap`` for big
blocks, no trim, up to :func:`keep_bytes`; mimalloc, Arrow's pool: no purge). On a
virtual machine whose free pages go back to the host (``virtio_balloon``
free page reporting), touching memory again costs far more than touching a page still
held: the workers' system time was 10 to 12 s of a 10M check's 75 CPU-s, 3.3 to 4.8 s
with the memory kept. A worker that holds more than :func:`keep_bytes` after a task (a
partition of a 100M history in the placed kernel: several GiB of NumPy columns) gives
glibc's free memory back at once, so what it holds stays bounded; all of it goes back
when the worker exits (after Spark's idle time for workers).

It imports PySpark's worker module too, then freezes what it has imported
(``gc.freeze``, Python's way for a process that forks without ``exec``). A PySpark worker
runs a full ``gc.collect()`` after each task, which walked the 79,000 objects the daemon
had imported (about 20 ms each time) and, in a new worker, wrote to the pages that hold
them (each page then copied from the daemon's). Frozen, they are in no collection: a
check of a 10,000-record run took 2.11 and 2.22 CPU-s instead of 2.40 and 2.66, a 10M
check right after another 73 and 72 instead of 75 and 75 (bench/LOG.md)."""

from __future__ import annotations

import ctypes
import gc
import os
import sys
from typing import Any

_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc's mallopt parameters
_libc: Any = None


def keep_bytes() -> int:
    """What a worker may hold after a task: an eighth of the machine's memory, 1 to 4
    GiB (``$HARNESS_WORKER_KEEP_MB`` to change it; 0: give everything back)."""
    given = os.environ.get("HARNESS_WORKER_KEEP_MB")
    if given is not None and given.strip().isdigit():
        return int(given) << 20
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(1 << 30, min(4 << 30, total // 8))


def _keep_freed_memory() -> None:
    global _libc
    # Never purged (read when PyArrow loads mimalloc): a delay of an hour, purged on
    # request, still cost the workers twice the system time. What Arrow holds is bounded
    # by the tasks' sizes (splits, id buckets, batches), not by the history.
    os.environ.setdefault("MIMALLOC_PURGE_DELAY", "-1")
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None)
            libc.mallopt, libc.malloc_trim  # noqa: B018 (glibc's, or not glibc)
        except (OSError, AttributeError):
            return
        libc.mallopt(_M_MMAP_MAX, 0)
        libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)
        _libc = libc


def _resident() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _release(limit: int) -> None:
    """Give glibc's freed memory back to the system if the worker holds more than
    ``limit`` (Arrow's pool keeps its own: ``release_unused`` is a no-op without purge)."""
    if _libc is None or _resident() <= limit:
        return
    _libc.malloc_trim(0)


def _worker(sock: Any, authenticated: bool) -> int:
    """One task in a forked worker (PySpark's ``worker``), then :func:`_release`."""
    try:
        return _fork_worker(sock, authenticated)
    finally:
        _release(_limit)


_fork_worker: Any = None
_limit = 0

if __name__ == "__main__":
    _keep_freed_memory()  # before PyArrow loads mimalloc
    import numpy  # noqa: F401
    import pyarrow  # noqa: F401
    import pyarrow.compute  # noqa: F401
    import pyarrow.dataset  # noqa: F401
    import pyarrow.json  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import pyspark.worker  # noqa: F401 (imported after the fork otherwise; starts no thread)
    from pyspark import daemon

    _fork_worker, _limit = daemon.worker, keep_bytes()
    daemon.worker = _worker
    gc.freeze()  # last: what the workers inherit stays out of their collections
    daemon.manager()
