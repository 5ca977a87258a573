"""Special files in place of a run's inputs, for the bad-input tests: a FIFO, or a link to a
character device (``/dev/zero``, ``/dev/urandom``), which a reader must refuse by type
before it opens them (a FIFO blocks an ``open``; a device never ends)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

__all__ = ["FIFO", "KIND", "SPECIALS", "make_special"]

FIFO = "fifo"
#: the kinds a test puts in place of a file
SPECIALS = [FIFO, "/dev/zero", "/dev/urandom"]
#: how the harness's error names each kind
KIND = {FIFO: "a FIFO (named pipe)", "/dev/zero": "a character device", "/dev/urandom": "a character device"}


def make_special(path: Path, kind: str) -> None:
    """Replaces ``path`` by a FIFO (``kind`` :data:`FIFO`) or a symbolic link to the device
    ``kind``; skips the test where this machine has neither."""
    if kind == FIFO and not hasattr(os, "mkfifo") or kind != FIFO and not os.path.exists(kind):
        pytest.skip(f"no {kind} here")
    path.unlink(missing_ok=True)
    if kind == FIFO:
        os.mkfifo(path)
    else:
        path.symlink_to(kind)
