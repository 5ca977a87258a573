"""Delay with jitter, duplication and reordering in user space, for kernels without ``netem``.

A ``degrade`` that delays, duplicates or reorders what a node sends to chosen peers steers
those packets (an iptables ``NFQUEUE`` rule in the sender's network namespace) to one
process of this module on the host. The process joins that namespace, takes each packet
from the queue and gives it back to the kernel later:

- **delay and jitter**: each packet is held ``delay`` plus a uniform draw in
  ``[-jitter, +jitter]`` milliseconds (never less than 0), as netem draws without a
  distribution table. Packets held for different times overtake each other, as with netem;
- **reordering** (netem's ``reorder``): that share of the packets is sent at once, ahead of
  the delayed ones;
- **duplication**: that share is sent twice when its time comes, the copy through a raw
  socket with a mark that the steering rule lets through.

Drawn from a seeded generator, so a run's draws repeat. It stops on SIGTERM (giving back
every held packet at once), when the harness that started it is gone (it is no longer
its parent) and when the node's process is gone; it then prints what it did as one JSON line.
The rule uses ``--queue-bypass``: if this process is not there, packets pass unharmed.

Run as ``python -m harness.faults.delayer --pid PID --queue N --delay-ms D ...``; it
prints ``ready`` once it holds the queue.
"""

from __future__ import annotations

import argparse
import ctypes
import heapq
import json
import os
import random
import select
import signal
import socket
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

from .degrade import MARK, QUEUE

__all__ = ["Plan", "main"]

_CLONE_NEWNET = 0x40000000
#: packets the kernel may hold for this queue before it drops new ones
_MAX_QUEUED = 200_000


@dataclass
class Plan:
    """What to do to each packet, and the generator that draws it."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    duplicate_pct: float = 0.0
    reorder_pct: float = 0.0
    seed: int = 0
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def hold_s(self) -> float:
        """How long the next packet is held, in seconds (0: sent at once, ahead of the rest)."""
        if self.reorder_pct and self.rng.random() * 100 < self.reorder_pct:
            return 0.0
        ms = self.delay_ms
        if self.jitter_ms:
            ms += self.rng.uniform(-self.jitter_ms, self.jitter_ms)
        return max(ms, 0.0) / 1000

    def duplicates(self) -> bool:
        return bool(self.duplicate_pct) and self.rng.random() * 100 < self.duplicate_pct


def _join_netns(pid: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    with open(f"/proc/{pid}/ns/net", "rb") as ns:
        if libc.setns(ns.fileno(), _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into the network namespace of pid {pid}: {os.strerror(err)}")


def _alive(pid: int) -> bool:
    """Whether the node's process still runs (a zombie, or a pid gone, is not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def run(pid: int, queue: int, plan: Plan, *, out: Any = sys.stdout) -> dict[str, Any]:
    """Serves the queue until SIGTERM or the node's process is gone; returns the counts."""
    from netfilterqueue import COPY_META, COPY_PACKET, NetfilterQueue  # the host's, after setns

    _join_netns(pid)
    parent = os.getppid()
    counts: dict[str, Any] = {"packets": 0, "held": 0, "at_once": 0, "duplicated": 0, "max_held": 0}
    held: list[tuple[float, int, Any, bytes | None]] = []
    raw = None
    if plan.duplicate_pct:
        raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, MARK)
    stop = False

    def on_term(_sig: int, _frame: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    def send_copy(payload: bytes | None) -> None:
        if raw is None or payload is None:
            return
        try:
            raw.sendto(payload, (socket.inet_ntoa(payload[16:20]), 0))
            counts["duplicated"] += 1
        except OSError:
            pass  # the copy is lost, as a duplicate may be

    def on_packet(pkt: Any) -> None:
        counts["packets"] += 1
        copy = pkt.get_payload() if raw is not None and plan.duplicates() else None
        hold = plan.hold_s()
        if hold <= 0:
            counts["at_once"] += 1
            send_copy(copy)
            pkt.accept()
            return
        counts["held"] += 1
        heapq.heappush(held, (time.monotonic() + hold, counts["packets"], pkt, copy))
        counts["max_held"] = max(counts["max_held"], len(held))

    def release() -> None:
        _, _, pkt, copy = heapq.heappop(held)
        send_copy(copy)
        pkt.accept()

    nfq = NetfilterQueue()
    with warnings.catch_warnings(record=True) as caught:  # a smaller socket buffer than asked
        warnings.simplefilter("always")
        nfq.bind(queue, on_packet, max_len=_MAX_QUEUED, mode=COPY_PACKET if raw is not None else COPY_META,
                 range=65535 if raw is not None else 0, sock_len=8 * 1024 * 1024)
    if caught:
        counts["warning"] = "; ".join(str(w.message) for w in caught)
    fd = nfq.get_fd()
    print("ready", file=out, flush=True)
    next_alive_check = time.monotonic() + 1.0
    try:
        while not stop:
            now = time.monotonic()
            while held and held[0][0] <= now:
                release()
            if now >= next_alive_check:
                if not _alive(pid) or os.getppid() != parent:
                    break
                next_alive_check = now + 1.0
            wait = min(held[0][0] - now if held else 1.0, next_alive_check - now, 1.0)
            try:
                ready, _, _ = select.select([fd], [], [], max(wait, 0.0))
            except InterruptedError:
                continue
            if ready:
                nfq.run(block=False)
    finally:
        while held:
            release()
        nfq.unbind()
        if raw is not None:
            raw.close()
    return counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.faults.delayer", description=__doc__.split("\n")[0])
    p.add_argument("--pid", type=int, required=True, help="a process in the sender's network namespace")
    p.add_argument("--queue", type=int, default=QUEUE)
    p.add_argument("--delay-ms", type=float, default=0.0)
    p.add_argument("--jitter-ms", type=float, default=0.0)
    p.add_argument("--duplicate-pct", type=float, default=0.0)
    p.add_argument("--reorder-pct", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    plan = Plan(a.delay_ms, a.jitter_ms, a.duplicate_pct, a.reorder_pct, a.seed)
    try:
        counts = run(a.pid, a.queue, plan)
    except (OSError, ImportError) as exc:
        print(json.dumps({"error": str(exc)}), flush=True)
        return 2
    print(json.dumps(counts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
