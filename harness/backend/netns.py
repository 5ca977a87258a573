"""Where a node's network tools run: the network faults' one seam between backends.

A partition or a degraded link is iptables and tc run *in the node's network*: on a Docker
node, from this machine inside the container's network namespace (``nsenter``), so the
container needs no capability; on a host reached over SSH, on the host itself
(:class:`harness.backend.ssh.HostNet`). Both answer :class:`NetNs`'s ``run`` as
:func:`subprocess.run` does.

Two differences the faults must know: a container's namespace dies with its process, a
host's network outlives the node (``persists``: a heal flushes a dead node's rules there
too); and the user-space delayer (:mod:`harness.faults.delayer`) runs on this machine, so it
reaches only a local namespace (``pid``).
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Protocol

from ..errors import FaultError

__all__ = ["NetNs", "LocalNetns", "nsenter_path", "CHAIN", "QUEUE_CHAIN"]

#: the iptables chain of a node's partitions and losses (hooked first in INPUT and OUTPUT)
CHAIN = "CHAOS"
#: the chain of the rules that steer packets to a delayer (hooked after CHAIN in OUTPUT)
QUEUE_CHAIN = "CHAOSQ"


class NetNs(Protocol):
    """A node's network, where its iptables, tc and ip run."""

    #: a process whose namespace this is, on this machine (None: a remote host's)
    pid: int | None
    #: whether rules stay after the node's process dies (a host's network does)
    persists: bool

    def run(self, tool: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Runs ``tool`` there; a FaultError naming it when it fails and ``check``."""
        ...


def nsenter_path() -> str:
    path = shutil.which("nsenter")
    if path is None:
        raise FaultError("nsenter is not installed (util-linux): run bin/setup")
    return path


class LocalNetns:
    """The network namespace of a local process (a container's): tools run from this
    machine with ``nsenter``."""

    persists = False

    def __init__(self, pid: int) -> None:
        self.pid: int | None = pid

    def run(self, tool: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [nsenter_path(), "-t", str(self.pid), "-n", *tool]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        except FileNotFoundError as exc:
            raise FaultError(f"{tool[0]} is not installed on the host: run bin/setup") from exc
        if check and out.returncode != 0:
            err = out.stderr.strip()
            raise FaultError(f"{' '.join(tool)} in netns of pid {self.pid} failed: {err[:300]}")
        return out

    def __repr__(self) -> str:
        return f"netns of pid {self.pid}"
