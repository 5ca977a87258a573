"""A node's own wall clock, moved without touching the host's (libfaketime).

A cluster made with ``clock="fake"`` (a case with a ``clock`` step) starts every process of
every node with Debian's libfaketime preloaded, bound read-only from the host:

- ``FAKETIME_TIMESTAMP_FILE`` names a file in a directory of the host bound into the node
  (``/chaos-clock/offset``); it holds the node's offset from the real time, ``+0`` at first.
  libfaketime reads it again at most once a second (``FAKETIME_CACHE_DURATION=1``), so a
  change takes effect within a second;
- ``FAKETIME_DONT_FAKE_MONOTONIC=1``: only the wall clock (``CLOCK_REALTIME``: Java's
  ``System.currentTimeMillis``, ``Instant.now``) moves. The monotonic clock (``nanoTime``,
  the JVM's timed waits, ZooKeeper's session ticks) keeps the real time, as a node's would
  when NTP or an operator steps its wall clock.

- ``FAKETIME_FORCE_MONOTONIC_FIX=0``: libfaketime turns this fix on by itself for this
  glibc, and with it every timed wait of a JVM goes wrong (a 5 ms park returns at once, a
  5 ms sleep takes 15): the brokers burned their CPU and could not form a quorum.

A privileged container that sets its clock sets the host's, so the harness never does.
The offset is written from the host (a new file renamed over the old one: libfaketime
never reads half a write). A node whose clock is real has no such directory, and pays
nothing. Jumps, drift and strobes are :class:`harness.faults.clock` faults on this.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from ..errors import BackendError

__all__ = ["CLOCKS", "Clock", "FakeClock", "LIBFAKETIME", "compose_override", "drop_clocks", "CLOCKS_DIR",
           "faketime_env", "offset_text", "parse_offset", "require_libfaketime"]

#: what a cluster's nodes' wall clocks are
CLOCKS = ("real", "fake")
#: where the nodes' offset files live on the host, per cluster project and node
CLOCKS_DIR = Path(os.environ.get("CHAOS_CLOCKS_DIR", "/var/lib/chaos-harness/clocks"))
#: Debian's libfaketime on the host (bin/setup installs it); the images are Debian too
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
_IN_NODE_LIB = "/opt/chaos-harness/faketime/libfaketime.so.1"
_IN_NODE_DIR = "/chaos-clock"
_FILE = "offset"


def require_libfaketime() -> Path:
    if not LIBFAKETIME.is_file():
        raise BackendError(f"clock faults need libfaketime at {LIBFAKETIME}: run bin/setup "
                           "(installs Debian's libfaketime)")
    return LIBFAKETIME


def faketime_env(offset_file: str) -> dict[str, str]:
    """libfaketime's settings (besides ``LD_PRELOAD``) for a node whose offset is in
    ``offset_file``: see the module's documentation."""
    return {"FAKETIME_TIMESTAMP_FILE": offset_file, "FAKETIME_CACHE_DURATION": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1", "FAKETIME_FORCE_MONOTONIC_FIX": "0",
            "FAKETIME_DONT_RESET": "1"}


def offset_text(offset_s: float) -> str:
    """An offset file's content."""
    return f"{offset_s:+.3f}\n"


def parse_offset(text: str, where: object) -> float:
    try:
        return float(text.strip())
    except ValueError as exc:
        raise BackendError(f"the fake clock's offset file {where} holds {text.strip()!r}") from exc


class Clock(Protocol):
    """A node's own wall clock: its offset from the real time, in seconds."""

    def offset(self) -> float: ...

    def set(self, offset_s: float) -> None: ...


class FakeClock:
    """The offset file of one node's wall clock."""

    def __init__(self, home: Path) -> None:
        self.home = home

    @property
    def path(self) -> Path:
        return self.home / _FILE

    def create(self) -> FakeClock:
        self.home.mkdir(parents=True, exist_ok=True)
        self.set(0.0)
        return self

    def offset(self) -> float:
        """The node's wall clock minus the real one, in seconds."""
        try:
            text = self.path.read_text().strip()
        except OSError as exc:
            raise BackendError(f"no offset file for the fake clock at {self.path}: {exc}") from exc
        return parse_offset(text, self.path)

    def set(self, offset_s: float) -> None:
        """Sets the node's wall clock to the real time plus ``offset_s`` (within a second)."""
        tmp = self.home / f".{_FILE}.new"
        tmp.write_text(offset_text(offset_s))
        os.replace(tmp, self.path)


def compose_override(project_home: Path, nodes: Iterable[str]) -> Path:
    """Makes each node's offset file (``+0``) and the compose file that preloads libfaketime
    in each node and binds its file; returns that compose file."""
    require_libfaketime()
    services = {}
    for name in nodes:
        clock = FakeClock(project_home / name).create()
        services[name] = {
            "volumes": [f"{LIBFAKETIME}:{_IN_NODE_LIB}:ro", f"{clock.home}:{_IN_NODE_DIR}"],
            "environment": {"LD_PRELOAD": _IN_NODE_LIB, **faketime_env(f"{_IN_NODE_DIR}/{_FILE}")}}
    override = project_home / "compose.clock.json"
    override.write_text(json.dumps({"services": services}, indent=1))  # JSON is YAML
    return override


def drop_clocks(project_home: Path) -> None:
    """Removes a cluster's offset files (idempotent)."""
    shutil.rmtree(project_home, ignore_errors=True)
