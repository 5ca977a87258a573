"""The queue in user space that delays, duplicates and reorders a node's packets: its draws,
and a real run on loopback in a network namespace of its own (no Docker)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from harness.backend.netns import LocalNetns
from harness.faults.degrade import Effects, Shaping, shape, unshape
from harness.faults.delayer import Plan


def test_the_draws_hold_packets_for_delay_plus_jitter_and_send_the_reordered_share_at_once() -> None:
    plan = Plan(delay_ms=100, jitter_ms=20, reorder_pct=25, duplicate_pct=10, seed=3)
    holds = [plan.hold_s() for _ in range(4000)]
    at_once = sum(1 for h in holds if h == 0)
    delayed = [h for h in holds if h > 0]
    assert 0.21 < at_once / len(holds) < 0.29
    assert min(delayed) >= 0.08 and max(delayed) <= 0.12
    assert 0.095 < sum(delayed) / len(delayed) < 0.105
    dups = sum(plan.duplicates() for _ in range(4000))
    assert 300 < dups < 500
    assert Plan(delay_ms=5, jitter_ms=50, seed=1).hold_s() >= 0  # never negative
    again = Plan(delay_ms=100, jitter_ms=20, reorder_pct=25, duplicate_pct=10, seed=3)
    assert [again.hold_s() for _ in range(4000)] == holds  # a seed repeats its draws


_RTT = """
import socket, statistics, threading, time
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
def serve():
    c, _ = srv.accept()
    while (d := c.recv(100)):
        c.sendall(d)
threading.Thread(target=serve, daemon=True).start()
cl = socket.create_connection(srv.getsockname()); cl.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rtts = []
for _ in range(20):
    t = time.monotonic(); cl.sendall(b"x" * 10); cl.recv(100); rtts.append(time.monotonic() - t)
print(statistics.median(rtts))
"""


@pytest.fixture
def netns() -> Iterator[int]:
    """A process in a new network namespace with its loopback up."""
    if not (shutil.which("unshare") and shutil.which("iptables") and shutil.which("nsenter")):
        pytest.fail("unshare, nsenter and iptables are needed: run bin/setup")
    proc = subprocess.Popen(["unshare", "-n", "sleep", "120"])
    try:
        deadline = time.monotonic() + 5
        while os.readlink(f"/proc/{proc.pid}/ns/net") == os.readlink("/proc/self/ns/net"):
            assert time.monotonic() < deadline, "unshare did not enter a namespace"
            time.sleep(0.02)
        subprocess.run(["nsenter", "-t", str(proc.pid), "-n", "ip", "link", "set", "lo", "up"], check=True)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def _median_rtt_s(pid: int) -> float:
    out = subprocess.run(["nsenter", "-t", str(pid), "-n", sys.executable, "-c", _RTT],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    return float(out.stdout.strip())


def test_a_delay_with_duplicates_slows_each_round_trip_and_a_heal_ends_it(netns: int) -> None:
    before = _median_rtt_s(netns)
    shaping = Shaping("lo")
    shape(LocalNetns(netns), shaping, ["127.0.0.1"], Effects(delay_ms=20, jitter_ms=5, duplicate_pct=20),
          seed=7)
    assert shaping.delayer is not None and shaping.delayer.poll() is None
    delayed = _median_rtt_s(netns)
    counts = unshape(LocalNetns(netns), shaping)
    after = _median_rtt_s(netns)
    print(f"median round trip: {before * 1000:.2f} ms, delayed {delayed * 1000:.1f} ms, "
          f"healed {after * 1000:.2f} ms; {counts}")
    # both ways delayed 20 +- 5 ms: a round trip of 30 to 50 ms
    assert 0.030 <= delayed < 0.060 and before < 0.01 and after < 0.01
    assert counts["held"] >= 40 and counts["duplicated"] > 0 and counts["at_once"] == 0
    assert shaping.delayer is None


def test_a_delayer_stops_by_itself_when_its_node_is_gone(netns: int) -> None:
    shaping = Shaping("lo")
    shape(LocalNetns(netns), shaping, ["127.0.0.1"], Effects(delay_ms=10), seed=1)
    proc = shaping.delayer
    assert proc is not None
    subprocess.run(["kill", "-9", str(netns)], check=True)
    proc.wait(timeout=10)  # it checks every second
    assert unshape(None, shaping)["packets"] == 0
