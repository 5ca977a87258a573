"""Nodes that stop on their own: the last FATAL or ERROR line that says why, and brokers
whose exit hung half way."""

from __future__ import annotations

import logging

from .context import RunContext

__all__ = ["fatal_line", "last_fatal", "finish_halts", "halted_since_start", "HALT_LINE"]

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


def finish_halts(ctx: RunContext, done: set[str]) -> list[str]:
    """Brokers that logged :data:`HALT_LINE` and still run: their exit hung (seen on
    0.10.2.2: the fetcher thread's exit waits on the shutdown that waits on it; the socket
    server was already closed, so the controller could not reach it). Each is killed once,
    which completes the exit it began, and the story says so; returns their names."""
    running = [n.name for n in ctx.the_system.brokers()
               if n.name not in done and n.container.status == "running"]
    finished = []
    for name, text in ctx.the_cluster.node_logs(running, tail=300) if running else []:
        if not halted_since_start(text):
            continue
        ctx.the_cluster.node(name).container.kill("KILL")
        note = (f"{name} logged \"{HALT_LINE}\" and its exit hung; the harness killed it to "
                "complete the exit (it is left down)")
        ctx.recovery.observations.append(note)
        ctx.events.mark("halted broker killed", {"node": name})
        log.warning("recovery: %s", note)
        finished.append(name)
    return finished
