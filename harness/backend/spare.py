"""Spare nodes: a node a cluster holds in reserve until a ``join`` step adds it.

A spare's container runs from the start (the faults, logs and disks of the cluster see
it), but its entrypoint waits before it starts the node's process: it waits for a file,
``join``, in a directory of the host bound into the container. Opening the gate (the
``join`` step) writes that file; the node then starts as a new member, with an id the
cluster has never seen. The file stays, so a later kill and start of the node starts it
at once; and a cluster whose spare joined is not reused (another case would start from
a cluster it did not state). Running a compose file by hand, without this module's
override, starts every spare as a member.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

__all__ = ["SPARES_DIR", "Gate", "SpareGate", "compose_override", "drop_gates"]

#: host directory of the gates: <SPARES_DIR>/<compose project>/<node>/join
SPARES_DIR = Path(os.environ.get("CHAOS_SPARES_DIR", "/var/lib/chaos-harness/spares"))
#: where a spare's gate directory is bound in its container (the entrypoints' JOIN_GATE)
_IN_NODE_DIR = "/chaos-join"
_FILE = "join"


class Gate(Protocol):
    """What holds a spare back: a file its entrypoint waits for."""

    def open(self) -> None: ...

    @property
    def joined(self) -> bool: ...


@dataclass(frozen=True)
class SpareGate:
    """The gate of one spare node: ``home`` on the host, bound at ``/chaos-join``."""

    home: Path

    def create(self) -> SpareGate:
        """Makes the directory, closed (an earlier cluster's open gate is closed)."""
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / _FILE).unlink(missing_ok=True)
        return self

    def open(self) -> None:
        """Lets the node's process start (its entrypoint polls for the file)."""
        if not self.home.is_dir():
            raise FileNotFoundError(f"no spare gate at {self.home} (the cluster was not made with it)")
        (self.home / _FILE).write_text("join\n")

    @property
    def joined(self) -> bool:
        return (self.home / _FILE).exists()


def compose_override(project_home: Path, nodes: Iterable[str]) -> Path:
    """Makes each spare's gate (closed) and the compose file that binds it into the spare
    and tells its entrypoint to wait at it; returns that compose file."""
    services = {}
    for name in nodes:
        gate = SpareGate(project_home / name).create()
        services[name] = {"volumes": [f"{gate.home}:{_IN_NODE_DIR}"],
                          "environment": {"JOIN_GATE": f"{_IN_NODE_DIR}/{_FILE}"}}
    override = project_home / "compose.spares.json"
    override.write_text(json.dumps({"services": services}, indent=1))  # JSON is YAML
    return override


def drop_gates(project_home: Path) -> None:
    """Removes a cluster's gates (idempotent)."""
    shutil.rmtree(project_home, ignore_errors=True)
