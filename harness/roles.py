"""Resolves a case's role selectors to nodes, and watches leadership as the run goes.

:class:`LeaderWatch` polls the partition leaders (Kafka) or topic owners
(Pulsar) about once a second, writes a ``leader`` timeline event on every
change, and remembers the history so that ``old-leader`` means "the node that
led before the last leader change".
"""

from __future__ import annotations

import threading
from typing import Any

from .backend.cluster import Node
from .case import Selector
from .errors import FaultError, HarnessError
from .history import HistoryWriter

__all__ = ["LeaderWatch", "Resolver"]


class LeaderWatch:
    """Background poller of leadership for ``partitions`` of ``topic``."""

    def __init__(self, system: Any, topic: str, partitions: int, timeline: HistoryWriter,
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
                snap = self._snapshot(p)
            except HarnessError:
                continue
            except Exception:
                continue  # a client error while nodes are down: try again next tick
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

    def _snapshot(self, partition: int) -> dict[str, Any]:
        if self.system.spec.system == "kafka":
            state = self.system.partition_state(self.topic, partition)
            event = state.as_event()
            event["leader_node"] = self.system.node_name(state.leader) if state.leader >= 0 else None
            event["isr_nodes"] = [self.system.node_name(b) for b in state.isr]
            return event
        owner = self.system.owner(self.topic, partition)
        return {"topic": self.topic, "partition": partition,
                "leader": owner.name if owner else None,
                "leader_node": owner.name if owner else None}

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
    """Selector -> node, for one run's system and topic."""

    def __init__(self, system: Any, topic: str, watch: LeaderWatch) -> None:
        self.system = system
        self.cluster = system.cluster
        self.topic = topic
        self.watch = watch
        self.last_target: str | None = None  # set by the runner after each fault step

    def resolve(self, selector: Selector) -> Node:
        if selector.node is not None:
            return self.cluster.node(selector.node)
        role, p = selector.role, selector.partition
        if role == "any-broker":
            kind = "broker" if self.system.spec.system == "kafka" else "pulsar-broker"
            for node in self.cluster.nodes():
                if node.kind == kind and node.container.status == "running":
                    return node
            raise FaultError("no broker is running")
        if role == "last-target":
            if self.last_target is None:
                raise FaultError("last-target: no fault step has run yet")
            return self.cluster.node(self.last_target)
        if role == "old-leader":
            name = self.watch.old_leader(p)
            if name is None:
                raise FaultError(f"old-leader: partition {p} has had one leader so far")
            return self.cluster.node(name)
        if role == "controller":
            return self.cluster.node(self.system.node_name(self.system.controller().broker))
        if role == "leader":
            node = self.system.leader(self.topic, p)
            if node is None:
                raise FaultError(f"leader: partition {p} of {self.topic} has no leader (-1)")
            return node
        if role == "follower":
            state = self.system.partition_state(self.topic, p)
            leader = state.leader
            if leader < 0:  # leaderless: the followers are the replicas other than the last leader
                last = self.watch.last_leader(p)
                leader = self.system.broker_id(last) if last else -1
            in_sync = [b for b in state.replicas if b != leader and b in state.isr]
            others = in_sync or [b for b in state.replicas if b != leader]
            if not others:
                raise FaultError(f"follower: partition {p} of {self.topic} has no follower")
            return self.cluster.node(self.system.node_name(others[0]))
        if role == "owner":
            return self.system.owner(self.topic, p)
        if role == "non-owner":
            return self.system.non_owner(self.topic, p)
        if role == "bookie":
            ensemble = self.system.ledger_ensemble(self.topic, p)
            if not ensemble:
                raise FaultError(f"bookie: partition {p} of {self.topic} has no open ledger yet")
            return ensemble[0]
        if role == "zookeeper":
            return self.cluster.node("zk")
        raise FaultError(f"unknown role {role!r}")
