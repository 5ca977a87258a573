"""What a check's kernel tasks may hold in memory, and how they give it back.

A kernel task holds its partition's rows whole; :func:`task_slots` says how many such
tasks may run at once within :func:`memory_budget`, and a task short of memory
(:func:`short_of_memory`) gives back what it freed (:func:`give_back`) as it goes. These
functions run in the Python workers too: the plan registers this module for pickling by
value (no package needed on an executor).
"""

from __future__ import annotations

import contextlib
from typing import Any

__all__ = ["GIVE_BACK_ROWS", "give_back", "memory_budget", "short_of_memory", "task_slots"]

#: a task of fewer rows never gives its freed memory back while it runs (about 190 MB at
#: its peak): it leaves that to the worker's limit after the task
#: (:mod:`harness.check.engine.daemon`)
GIVE_BACK_ROWS = 1 << 20


def memory_budget() -> int:
    """Bytes the kernel tasks may hold together: 80% of what the system has available now
    (free and reclaimable, after what the Spark JVM already holds)."""
    try:
        with open("/proc/meminfo") as fh:
            fields = dict(line.split(":", 1) for line in fh)
        return int(fields["MemAvailable"].split()[0]) * 1024 * 4 // 5
    except (OSError, KeyError, ValueError):
        return 1 << 62  # not Linux: no limit known


def task_slots(rows: list[int], budget: int, cores: int, bytes_per_row: int) -> int:
    """How many tasks may run at once when a task holds ``bytes_per_row`` per row of its
    partition (``rows``, one per task): one per core, fewer when the largest of them,
    running together, would hold more than ``budget`` bytes (the tasks then take turns, and
    the check is slower but fits)."""
    largest = sorted(rows, reverse=True)
    for slots in range(min(cores, len(rows)), 1, -1):
        if sum(largest[:slots]) * bytes_per_row <= budget:
            return slots
    return 1


def short_of_memory(rows: int, bytes_per_row: int) -> bool:
    """Whether a task of ``rows`` rows gives its freed memory back as it goes: when it has
    :data:`GIVE_BACK_ROWS` or more and its peak, twice over for a task beside it, is more
    than the :func:`memory_budget` now (a 100M history's partitions). Otherwise the worker
    keeps that memory for the rest of the task and the next: on a VM that hands free pages
    back to its host, what it gave back cost system time again when touched (at 10M, 12
    gives per partition took a check's workers from 2.6 to about 4.5 system-s)."""
    return rows >= GIVE_BACK_ROWS and 2 * rows * bytes_per_row > memory_budget()


def _trim() -> Any:
    """glibc's ``malloc_trim``, None elsewhere. Looked up at each call (about 20 us; only
    tasks short of memory call it): this module goes to the workers by value, so a memo
    would go with it, and a ctypes function cannot be pickled (a ``functools.cache``
    wrapper would go by reference to this package, which a cluster's executors need not
    have)."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):  # glibc only
        return ctypes.CDLL("libc.so.6").malloc_trim
    return None


def give_back() -> None:
    """Return the memory freed so far to the system: Arrow's pool keeps what the batches
    read used, and the C allocator's heap keeps the pieces of arrays already joined."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    trim = _trim()
    if trim is not None:
        trim(0)
