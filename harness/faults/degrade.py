"""A degraded network between chosen nodes: loss, a rate limit, and where the kernel has its
``netem`` queueing discipline, delay with jitter, duplication and reordering.

Everything runs from the host inside a node's network namespace (``nsenter``), as the
partitions do, so the containers need no capability:

- loss: iptables rules in the node's ``CHAOS`` chain (the partitions' chain), each dropping
  packets to one peer at random (``-m statistic --mode random``), so a heal that flushes the
  chain ends it;
- the rest shapes what the node sends to the chosen peers: an HTB root on the node's
  interface whose default class is unlimited and whose class ``1:2`` carries the rate limit,
  with a ``netem`` qdisc under it for delay, jitter, duplication and reordering, and one u32
  filter per peer address steering its packets there. A heal deletes the root qdisc.

An effect "in" to a node is shaped on each peer's side (the peer's packets to the node): a
queueing discipline acts on what leaves an interface.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from ..errors import FaultError

__all__ = ["Effects", "shape", "unshape", "interface_of", "loss_rules", "in_netns", "nsenter_path",
           "NETEM_MISSING"]

#: what the error says when the kernel lacks netem
NETEM_MISSING = ("delay, jitter, duplication and reordering need the kernel's netem queueing "
                 "discipline (sch_netem), which this machine's kernel lacks "
                 "(CONFIG_NET_SCH_NETEM); loss and rate work without it")
#: the unlimited classes' rate: more than any container link carries here
_UNLIMITED = "100gbit"


@dataclass(frozen=True)
class Effects:
    """What a ``degrade`` does to the packets between the nodes: percentages 0 to 100, times
    in milliseconds, a rate in bits per second (None: not applied)."""

    loss_pct: float | None = None
    delay_ms: float | None = None
    jitter_ms: float | None = None
    duplicate_pct: float | None = None
    reorder_pct: float | None = None
    rate_bps: float | None = None

    @property
    def needs_netem(self) -> bool:
        return any(v is not None for v in (self.delay_ms, self.jitter_ms, self.duplicate_pct,
                                           self.reorder_pct))

    @property
    def shapes(self) -> bool:
        """Whether it needs a queueing discipline (anything but loss)."""
        return self.needs_netem or self.rate_bps is not None

    def as_dict(self) -> dict[str, float]:
        return {k: v for k, v in (("loss_pct", self.loss_pct), ("delay_ms", self.delay_ms),
                                  ("jitter_ms", self.jitter_ms), ("duplicate_pct", self.duplicate_pct),
                                  ("reorder_pct", self.reorder_pct), ("rate_bps", self.rate_bps))
                if v is not None}

    def netem_args(self) -> list[str]:
        args: list[str] = []
        if self.delay_ms is not None:
            args += ["delay", f"{self.delay_ms:g}ms"]
            if self.jitter_ms:
                args += [f"{self.jitter_ms:g}ms"]
        if self.duplicate_pct is not None:
            args += ["duplicate", f"{self.duplicate_pct:g}%"]
        if self.reorder_pct is not None:
            args += ["reorder", f"{self.reorder_pct:g}%"]
        return args


def nsenter_path() -> str:
    path = shutil.which("nsenter")
    if path is None:
        raise FaultError("nsenter is not installed (util-linux): run bin/setup")
    return path


def in_netns(pid: int, tool: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Runs ``tool`` (iptables, tc, ip) from the host in the network namespace of ``pid``."""
    cmd = [nsenter_path(), "-t", str(pid), "-n", *tool]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except FileNotFoundError as exc:
        raise FaultError(f"{tool[0]} is not installed on the host: run bin/setup") from exc
    if check and out.returncode != 0:
        err = out.stderr.strip()
        if "netem" in tool and "unknown" in err.lower():
            raise FaultError(NETEM_MISSING)
        raise FaultError(f"{' '.join(tool)} in netns of pid {pid} failed: {err[:300]}")
    return out


def interface_of(pid: int, ip: str) -> str:
    """The network interface that holds address ``ip`` in the namespace of ``pid``."""
    out = in_netns(pid, ["ip", "-o", "-4", "addr", "show"])
    for line in out.stdout.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[3].split("/")[0] == ip:
            return fields[1].split("@")[0]
    raise FaultError(f"no interface holds {ip} in the netns of pid {pid}")


def shape(pid: int, iface: str, peer_ips: list[str], effects: Effects) -> None:
    """Shapes what the namespace of ``pid`` sends to ``peer_ips`` on ``iface`` (rate, netem)."""
    def tc(*args: str) -> None:
        in_netns(pid, ["tc", *args])

    tc("qdisc", "replace", "dev", iface, "root", "handle", "1:", "htb", "default", "1")
    tc("class", "replace", "dev", iface, "parent", "1:", "classid", "1:1", "htb", "rate", _UNLIMITED)
    rate = f"{int(effects.rate_bps)}bit" if effects.rate_bps is not None else _UNLIMITED
    tc("class", "replace", "dev", iface, "parent", "1:", "classid", "1:2", "htb", "rate", rate,
       "ceil", rate)
    if effects.needs_netem:
        tc("qdisc", "replace", "dev", iface, "parent", "1:2", "handle", "20:", "netem",
           *effects.netem_args())
    for ip in peer_ips:
        tc("filter", "add", "dev", iface, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
           "match", "ip", "dst", f"{ip}/32", "flowid", "1:2")


def unshape(pid: int, iface: str) -> None:
    """Removes the shaping of ``iface`` (nothing to remove is no error)."""
    in_netns(pid, ["tc", "qdisc", "del", "dev", iface, "root"], check=False)


def loss_rules(matches: list[tuple[str, str]], probability: float) -> list[list[str]]:
    """The iptables rules (for the ``CHAOS`` chain) that drop ``probability`` of the packets
    each (``-s`` or ``-d``, peer address) match selects: ``-s`` what the peer sends the node,
    ``-d`` what the node sends the peer."""
    return [["-A", "CHAOS", flag, ip, "-m", "statistic", "--mode", "random", "--probability",
             f"{probability:.6f}", "-j", "DROP"] for flag, ip in matches]
