"""Where a check's scratch data (its Parquet tables) goes: see docs/checker.md, "Spark".

``HARNESS_CHECK_SCRATCH`` names the directory. Else, on a local master, the scratch goes
to memory (:data:`MEMORY_DIR`, Linux's tmpfs) when it fits there: the input's size (the
scratch takes about 0.7 bytes per byte of JSON) at most a fifth of the memory the kernel
tasks may use (:func:`harness.check.engine.memory.memory_budget`) and half of the directory's
free space. Else, and on any other master (executors elsewhere cannot see this machine's
memory), the system's temporary directory.

Why memory: a 10M-record check writes and deletes about 1.1 GB of scratch files. With them
on this machine's disk (ext4 mounted with ``discard``, on a virtual disk) the ingest's
workers waited on I/O for 10 and 26 of the step's 57 and 78 core-seconds in two checks
(steps of 28.7 and 39.2 s; in memory 0.2 core-seconds, steps of 23.2 to 26.8 s). The
waits come and go: when the disk had few, memory still gained about 2 s a check (five
alternated pairs, medians 50.3 against 52.5 s; bench/LOG.md).

A check removes its scratch directory when it ends, on an error or Ctrl-C too; tasks of a
failed step still running then fail to write (:func:`harness.check.ingest.dirs_under`) instead
of making it again. A directory
left by a check that was killed is removed by :func:`remove_stale` (``harness clean``):
the directory's name holds the checking process's id.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from harness.check.engine.memory import memory_budget
from harness.check.engine.state import alive
from harness.errors import CheckError

__all__ = ["MEMORY_DIR", "PREFIX", "make", "remove_stale", "root"]

MEMORY_DIR = "/dev/shm"
PREFIX = "harness-check-"
_NAME = re.compile(re.escape(PREFIX) + r"(\d+)-")


def root(input_bytes: int, local: bool) -> str | None:
    """The directory a check of ``input_bytes`` of history makes its scratch directory in
    (None: the system's temporary directory); ``local``: the executors run on this machine."""
    chosen = os.environ.get("HARNESS_CHECK_SCRATCH")
    if chosen:
        return chosen
    return MEMORY_DIR if local and _fits(MEMORY_DIR, input_bytes) else None


def make(input_bytes: int, local: bool) -> Path:
    """A new scratch directory (:func:`root`), named after this process; a CheckError naming
    the place (and ``$HARNESS_CHECK_SCRATCH`` when it chose it) if it cannot be made."""
    where = root(input_bytes, local)
    try:
        return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=where))
    except OSError as exc:
        named = f"$HARNESS_CHECK_SCRATCH {where}" if os.environ.get("HARNESS_CHECK_SCRATCH") \
            else (where or tempfile.gettempdir())
        raise CheckError(f"{named}: cannot make the check's scratch directory there: "
                         f"{exc.strerror or exc}") from None


def _fits(directory: str, input_bytes: int) -> bool:
    try:
        if not (os.path.isdir(directory) and os.access(directory, os.W_OK | os.X_OK)):
            return False
        stat = os.statvfs(directory)
    except OSError:
        return False
    return input_bytes <= min(memory_budget() // 5, stat.f_bavail * stat.f_frsize // 2)


def remove_stale() -> int:
    """Remove the scratch directories of checks whose process is gone; how many."""
    removed = 0
    roots = {MEMORY_DIR, tempfile.gettempdir(), os.environ.get("HARNESS_CHECK_SCRATCH")}
    for directory in sorted(r for r in roots if r):
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            match = _NAME.match(entry.name)
            if match and entry.is_dir(follow_symlinks=False) and not alive(int(match.group(1))):
                shutil.rmtree(entry.path, ignore_errors=True)
                removed += not os.path.exists(entry.path)
    return removed

