"""Nodes that stop on their own: the last FATAL or ERROR line that says why, brokers
whose exit hung half way, and followers whose fetcher gave up a partition for good."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from .context import RunContext

__all__ = ["fatal_line", "last_fatal", "finish_halts", "halted_since_start", "failed_partitions", "HALT_LINE"]

log = logging.getLogger(__name__)


def fatal_line(ctx: RunContext, nodes: list[str]) -> str:
    """``kafka-1: ... FATAL ...``: the last FATAL or ERROR line of the first node's log
    that has one, else empty."""
    for name, text in ctx.the_cluster.node_logs(nodes, tail=40):
        lines = [line for line in text.splitlines() if " FATAL " in line or " ERROR " in line]
        if lines:
            return f"{name}: {lines[-1].strip()[:300]}"
    return ""


def last_fatal(ctx: RunContext, nodes: list[str]) -> str:
    """`` (kafka-1: FATAL ...)`` (:func:`fatal_line`), or empty."""
    line = fatal_line(ctx, nodes)
    return f" ({line})" if line else ""


#: what a Kafka 0.10 follower logs before it exits because its leader's log is shorter than
#: its own; its exit can then hang in its shutdown hooks, the broker half down
HALT_LINE = "Exiting because log truncation is not allowed"


def halted_since_start(log_text: str) -> bool:
    """Whether the broker logged :data:`HALT_LINE` since it last started (a container's log
    spans its restarts: a halt before a restart that went well is over)."""
    halt = log_text.rfind(HALT_LINE)
    started = max(log_text.rfind("], starting"), log_text.rfind("] starting"))
    return halt > started


def finish_halts(ctx: RunContext, done: set[str], logs: Mapping[str, str]) -> list[str]:
    """Brokers that logged :data:`HALT_LINE` and still run: their exit hung (seen on
    0.10.2.2: the fetcher thread's exit waits on the shutdown that waits on it; the socket
    server was already closed, so the controller could not reach it). ``logs``: the running
    brokers' last log lines, by name. Each is killed once, which completes the exit it began,
    and the story says so; returns their names."""
    finished = []
    for name, text in logs.items():
        if name in done or not halted_since_start(text):
            continue
        ctx.the_cluster.node(name).container.kill("KILL")
        note = (f"{name} logged \"{HALT_LINE}\" and its exit hung; the harness killed it to "
                "complete the exit (it is left down)")
        ctx.recovery.observations.append(note)
        ctx.events.mark("halted broker killed", {"node": name})
        log.warning("recovery: %s", note)
        finished.append(name)
    return finished


def failed_partitions(log_text: str, topic: str, partitions: int) -> dict[int, str]:
    """The partitions of ``topic`` a follower's fetcher marked as failed ("Partition <tp>
    marked as failed", Kafka 1.1 and later: an append it could not make, such as a leader
    whose log diverged from its own) since the follower last took a leader epoch for them,
    with the exception the fetcher logged before (its first line). The fetcher never fetches
    such a partition again until a new leader epoch or a restart: the replica stays out of
    the ISR."""
    failed = {}
    for p in range(partitions):
        tp = f"{topic}-{p}"
        at = log_text.rfind(f"Partition {tp} marked as failed")
        if at < 0 or at < log_text.rfind(f"{tp} starts at leader epoch"):
            continue
        error = log_text.rfind(f"Unexpected error occurred while processing data for partition {tp}", 0, at)
        lines = log_text[error:at].splitlines()[1:2] if error >= 0 else []
        failed[p] = lines[0].strip()[:300] if lines else "marked as failed"
    return failed
