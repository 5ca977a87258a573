"""The shared server's Python daemon (``spark.python.daemon.module``): PySpark's own,
with what the checker's kernels import loaded before it forks its workers, so a
worker started after the pool's idle time does not import NumPy and PyArrow again.

Its workers keep the memory they free (glibc: no ``mmap`` for big blocks, no trim;
mimalloc, Arrow's pool: no purge) for their next task. On a virtual machine whose free
pages go back to the host (``virtio_balloon`` free page reporting), touching memory
again costs far more than the first touch of a page still held: the workers' system
time was 10 to 12 s of a 10M check's 75 CPU-s. A worker's memory goes back to the
system when it exits (after Spark's idle time for workers)."""

from __future__ import annotations

import ctypes
import os
import sys

_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc's mallopt parameters


def _keep_freed_memory() -> None:
    os.environ.setdefault("MIMALLOC_PURGE_DELAY", "-1")  # read when PyArrow loads mimalloc
    if sys.platform.startswith("linux"):
        try:
            mallopt = ctypes.CDLL(None).mallopt
        except (OSError, AttributeError):  # not glibc
            return
        mallopt(_M_MMAP_MAX, 0)
        mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)


_keep_freed_memory()

import numpy  # noqa: E402, F401
import pyarrow  # noqa: E402, F401
import pyarrow.compute  # noqa: E402, F401
import pyarrow.dataset  # noqa: E402, F401
import pyarrow.json  # noqa: E402, F401
import pyarrow.parquet  # noqa: E402, F401
from pyspark import daemon  # noqa: E402

if __name__ == "__main__":
    daemon.manager()
