"""Resolves a case's role selectors to nodes, and watches leadership as the run goes.

:class:`LeaderWatch` polls the partition leaders (Kafka) or topic owners
(Pulsar) about once a second, writes a ``leader`` timeline event on every
change, and remembers the history so that ``old-leader`` means "the node that
led before the last leader change".
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..backend.cluster import Node
from ..case import Selector
from ..errors import FaultError
from ..history import Recorder
from ..systems.base import System

__all__ = ["LeaderWatch", "Resolver"]


class LeaderWatch:
    """Background poller of leadership for ``partitions`` of ``topic``."""

    def __init__(self, system: System, topic: str, partitions: int, timeline: Recorder,
                 interval_s: float = 1.0) -> None:
        self.system = system
        self.topic = topic
        self.partitions = partitions
        self.timeline = timeline
        self.interval_s = interval_s
        self.history: dict[int, list[str | None]] = {p: [] for p in range(partitions)}
        self._last: dict[int, Any] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="leader-watch", daemon=True)

    def start(self) -> LeaderWatch:
        self.poll()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(15)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.poll()

    def poll(self) -> None:
        """One snapshot of every partition; records changes. Errors are skipped (cluster in flux)."""
        for p in range(self.partitions):
            try:
                snap = self.system.leadership(self.topic, p)
            except Exception:  # a HarnessError or a client error while nodes are down
                continue  # try again next tick
            with self._lock:
                if self._last.get(p) == snap:
                    continue
                self._last[p] = snap
            self.observe(p, snap.get("leader_node"))
            self.timeline.record("leader", **snap)

    def observe(self, partition: int, leader: str | None) -> None:
        """Adds a leader seen by anyone (this poller, or the runner's own reads) to the history."""
        with self._lock:
            hist = self.history.setdefault(partition, [])
            if not hist or hist[-1] != leader:
                hist.append(leader)

    def last_leader(self, partition: int) -> str | None:
        """The most recent node that led ``partition`` (its current leader, if any)."""
        with self._lock:
            known = [h for h in self.history.get(partition, []) if h is not None]
        return known[-1] if known else None

    def old_leader(self, partition: int) -> str | None:
        """The last node that led ``partition`` before its current leader (or before -1)."""
        with self._lock:
            hist = [h for h in self.history.get(partition, [])]
        if not hist:
            return None
        current = hist[-1]
        for name in reversed(hist[:-1]):
            if name is not None and name != current:
                return name
        return None


class Resolver:
    """Selector -> node, for one run's system and topic.

    The roles every system has are resolved here (a node by name, ``any-broker``,
    ``last-target``, ``old-leader``, ``down``, ``held``); the others by the system
    (:meth:`~harness.systems.base.System.resolve_role`). ``down`` gives the names of the
    nodes fault steps took down and nothing started since, longest down first.
    """

    def __init__(self, system: System, topic: str, watch: LeaderWatch,
                 down: Callable[[], list[str]] = list,
                 held: Callable[[], str | None] = lambda: None) -> None:
        self.system = system
        self.down = down
        self.held = held
        self.cluster = system.cluster
        self.topic = topic
        self.watch = watch
        self.last_target: str | None = None  # set by the fault steps

    def resolve(self, selector: Selector) -> Node:
        if selector.node is not None:
            return self.cluster.node(selector.node)
        role, p = selector.role, selector.partition
        if role == "any-broker":
            for node in self.system.brokers():
                if node.container.status == "running":
                    return node
            raise FaultError("no broker is running")
        if role == "last-target":
            if self.last_target is None:
                raise FaultError("last-target: no fault step has run yet")
            return self.cluster.node(self.last_target)
        if role == "down":
            names = self.down()
            if not names:
                raise FaultError("down: no node is down (no kill9, stop or powerloss step has "
                                 "left one down)")
            return self.cluster.node(names[0])
        if role == "held":
            held = self.held()
            if held is None:
                raise FaultError("held: no injection point has been hit yet (an inject step and "
                                 "an await on its injection come first)")
            return self.cluster.node(held)
        if role == "old-leader":
            name = self.watch.old_leader(p)
            if name is None:
                raise FaultError(f"old-leader: partition {p} has had one leader so far")
            return self.cluster.node(name)
        if role is None:
            raise FaultError("a selector needs a role or a node")
        return self.system.resolve_role(role, self.topic, p, lambda: self.watch.last_leader(p))
