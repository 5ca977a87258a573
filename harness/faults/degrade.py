"""A degraded network between chosen nodes: loss, a rate limit, delay with jitter,
duplication and reordering.

Everything runs from the host inside a node's network namespace (``nsenter``), as the
partitions do, so the containers need no capability:

- loss: iptables rules in the node's ``CHAOS`` chain (the partitions' chain), each dropping
  packets to one peer at random (``-m statistic --mode random``), so a heal that flushes the
  chain ends it;
- a rate limit: an HTB root on the sender's interface whose default class is unlimited and
  whose class ``1:2`` carries the limit, with one u32 filter per peer address steering its
  packets there. A heal deletes the root qdisc;
- delay, jitter, duplication and reordering: a queue in user space
  (:mod:`harness.faults.delayer`). A rule in the sender's ``CHAOSQ`` chain (after ``CHAOS``,
  so a partition or a loss drops first) steers what it sends the peers to a process on the
  host that holds each packet as netem would. The kernels here lack netem
  (``CONFIG_NET_SCH_NETEM``), and one way for every kernel keeps one way tested. A heal
  flushes the chain and stops the process, which reports what it did.

An effect "in" to a node is applied on each peer's side (the peer's packets to the node):
a queueing discipline and the output hook act on what leaves a node.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from ..backend.netns import QUEUE_CHAIN, NetNs, nsenter_path
from ..errors import FaultError

__all__ = ["Effects", "Shaping", "shape", "unshape", "interface_of", "loss_rules",
           "nsenter_path", "queue_rules", "QUEUE_CHAIN", "MARK", "QUEUE"]

#: the mark of the duplicates a delayer sends itself, which the steering rule lets pass
MARK = 0x0C4A05
#: a delayer's queue number (queues are per network namespace: one per sender node)
QUEUE = 7
#: how long a delayer may take to hold its queue, or to stop and report
_DELAYER_WAIT_S = 15
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
    def queues(self) -> bool:
        """Whether it needs the queue in user space (delay, jitter, duplication, reordering)."""
        return any(v is not None for v in (self.delay_ms, self.jitter_ms, self.duplicate_pct,
                                           self.reorder_pct))

    @property
    def shapes(self) -> bool:
        """Whether it acts on what the sender sends (anything but loss)."""
        return self.queues or self.rate_bps is not None

    def as_dict(self) -> dict[str, float]:
        return {k: v for k, v in (("loss_pct", self.loss_pct), ("delay_ms", self.delay_ms),
                                  ("jitter_ms", self.jitter_ms), ("duplicate_pct", self.duplicate_pct),
                                  ("reorder_pct", self.reorder_pct), ("rate_bps", self.rate_bps))
                if v is not None}

    def delayer_args(self) -> list[str]:
        """The arguments of :mod:`harness.faults.delayer` for these effects."""
        args: list[str] = []
        for flag, value in (("--delay-ms", self.delay_ms), ("--jitter-ms", self.jitter_ms),
                            ("--duplicate-pct", self.duplicate_pct), ("--reorder-pct", self.reorder_pct)):
            if value is not None:
                args += [flag, f"{value:g}"]
        return args


@dataclass
class Shaping:
    """What shapes one sender's packets: its interface (a rate limit's qdisc is on it) and the
    delayer process, if the effects queue."""

    iface: str
    delayer: subprocess.Popen[str] | None = None
    #: what the delayers of this sender did, once stopped (for the heal's timeline entry)
    counts: dict[str, Any] = field(default_factory=dict)


def interface_of(ns: NetNs, ip: str) -> str:
    """The network interface that holds address ``ip`` in the network ``ns``."""
    out = ns.run(["ip", "-o", "-4", "addr", "show"])
    for line in out.stdout.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[3].split("/")[0] == ip:
            return fields[1].split("@")[0]
    raise FaultError(f"no interface holds {ip} in the {ns!r}")


def shape(ns: NetNs, shaping: Shaping, peer_ips: list[str], effects: Effects, seed: int = 0) -> None:
    """Shapes what the network ``ns`` sends to ``peer_ips``: a rate limit on its interface, a
    delayer for the rest (a local namespace only: the delayer runs on this machine)."""
    iface = shaping.iface
    if effects.queues and ns.pid is None:
        raise FaultError(f"degrade: delay, jitter, duplication and reordering need the delayer, which "
                         f"runs on this machine and cannot reach the {ns!r}: on hosts use loss or rate")

    def tc(*args: str) -> None:
        ns.run(["tc", *args])

    if effects.rate_bps is not None:
        rate = f"{int(effects.rate_bps)}bit"
        tc("qdisc", "replace", "dev", iface, "root", "handle", "1:", "htb", "default", "1")
        tc("class", "replace", "dev", iface, "parent", "1:", "classid", "1:1", "htb", "rate", _UNLIMITED)
        tc("class", "replace", "dev", iface, "parent", "1:", "classid", "1:2", "htb", "rate", rate,
           "ceil", rate)
        for ip in peer_ips:
            tc("filter", "add", "dev", iface, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
               "match", "ip", "dst", f"{ip}/32", "flowid", "1:2")
    if effects.queues:
        assert ns.pid is not None  # checked above
        shaping.delayer = _start_delayer(ns.pid, effects, seed)
        _ensure_queue_chain(ns)
        for rule in queue_rules(peer_ips):
            ns.run(["iptables", "-w", "5", *rule])


def unshape(ns: NetNs | None, shaping: Shaping) -> dict[str, Any]:
    """Removes the shaping (nothing to remove is no error; ``ns`` None: the node's namespace
    is gone, only its delayer is left to stop); returns what the delayer did."""
    if ns is not None:
        ns.run(["tc", "qdisc", "del", "dev", shaping.iface, "root"], check=False)
        ns.run(["iptables", "-w", "5", "-F", QUEUE_CHAIN], check=False)
    if shaping.delayer is not None:
        shaping.counts = _stop_delayer(shaping.delayer)
        shaping.delayer = None
    return shaping.counts


def queue_rules(peer_ips: list[str]) -> list[list[str]]:
    """The iptables rules (for the ``CHAOSQ`` chain) that steer what a node sends the peers to
    its delayer; its own duplicates carry :data:`~harness.faults.delayer.MARK` and pass. With
    ``--queue-bypass`` packets pass unharmed when no delayer holds the queue."""
    return [["-A", QUEUE_CHAIN, "-d", ip, "-m", "mark", "!", "--mark", hex(MARK), "-j", "NFQUEUE",
             "--queue-num", str(QUEUE), "--queue-bypass"] for ip in peer_ips]


def _ensure_queue_chain(ns: NetNs) -> None:
    def ipt(*args: str) -> int:
        return ns.run(["iptables", "-w", "5", *args], check=False).returncode

    if ipt("-L", QUEUE_CHAIN, "-n") != 0:
        ns.run(["iptables", "-w", "5", "-N", QUEUE_CHAIN])
    if ipt("-C", "OUTPUT", "-j", QUEUE_CHAIN) != 0:
        ns.run(["iptables", "-w", "5", "-A", "OUTPUT", "-j", QUEUE_CHAIN])


def _start_delayer(pid: int, effects: Effects, seed: int) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "harness.faults.delayer", "--pid", str(pid), "--seed", str(seed),
           *effects.delayer_args()]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    assert proc.stdout is not None
    line = _read_line(proc, _DELAYER_WAIT_S)
    if line.strip() != "ready":
        proc.kill()
        proc.wait(timeout=10)
        try:
            why = json.loads(line).get("error", line)
        except ValueError:
            why = line.strip() or f"exited with {proc.returncode}"
        raise FaultError(f"the delayer for pid {pid} did not start: {why} (NetfilterQueue and "
                         "libnetfilter-queue come with bin/setup)")
    return proc


def _stop_delayer(proc: subprocess.Popen[str]) -> dict[str, Any]:
    if proc.poll() is None:
        proc.terminate()
    try:
        out, _ = proc.communicate(timeout=_DELAYER_WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(timeout=10)
        return {"error": "the delayer did not stop within 15 s and was killed"}
    for line in reversed((out or "").splitlines()):
        try:
            counts = json.loads(line)
        except ValueError:
            continue
        if isinstance(counts, dict):
            return counts
    return {"error": f"the delayer exited with {proc.returncode} and no report"}


def _read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """The first line the process prints, or "" when it prints none within ``timeout``."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline() if ready else ""


def loss_rules(matches: list[tuple[str, str]], probability: float) -> list[list[str]]:
    """The iptables rules (for the ``CHAOS`` chain) that drop ``probability`` of the packets
    each (``-s`` or ``-d``, peer address) match selects: ``-s`` what the peer sends the node,
    ``-d`` what the node sends the peer."""
    return [["-A", "CHAOS", flag, ip, "-m", "statistic", "--mode", "random", "--probability",
             f"{probability:.6f}", "-j", "DROP"] for flag, ip in matches]
