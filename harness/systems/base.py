"""What the run asks of a system: one protocol both Kafka and Pulsar implement.

:class:`System` is everything a run needs from any system (readiness, the case's
topic, leadership, convergence, roles, the workload clients, the recovery read,
evidence, fitness for reuse). What only some systems can do is a separate
runtime-checkable protocol, tested with ``isinstance`` at the point of use, as
Jepsen separates ``Primary`` or ``LogFiles`` from ``DB``:

- :class:`ControllerRemedy`: a controller that can get stuck and be re-elected
  (ZooKeeper-mode Kafka);
- :class:`ReadyRemedy`: a repair for a cluster that stays not ready after a heal
  (Pulsar's bookies that never re-register);
- :class:`LockLoopWatch`: nodes whose metadata lock flaps in a loop (Pulsar);
- :class:`InSyncReplicas`: an ISR to await (Kafka);
- :class:`Unloadable`: graceful ownership transfer (Pulsar bundles);
- :class:`Removable`: nodes taken out for good (Pulsar bookies: the ``remove`` fault);
- :class:`Subscribable`: durable subscriptions made by the admin API (Pulsar);
- :class:`JavaProducers`: a producer driven by the system's Java client;
- :class:`CrashPoints`: brokers that take the crash-timing rules (Kafka);
- :class:`LedgerPoints`: crash-timing rules on an entry of a topic's ledger (Pulsar).

Leadership is named two ways: ``ref`` is how the system names a leader (Kafka's
broker id, -1 for none; Pulsar's owner node name), ``node`` is the harness's
node name (None for none).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..backend.cluster import Cluster, Node
    from ..case import ClientSpec, TopicSpec
    from ..clusters import ClusterDef
    from ..collect import Evidence
    from ..history import HistoryWriter

__all__ = ["ConsumerClient", "Controlled", "ControllerRemedy", "CrashPoints", "InSyncReplicas",
           "LedgerPoints", "JavaProducers", "Leader", "LeaderServes", "LockLoopWatch", "Mark",
           "ProducerClient", "ReadyRemedy", "QuorumChangeable", "Reassignable", "Joinable",
           "Decommissionable", "Removable", "Replaceable", "Splittable", "Stats",
           "Subscribable", "System", "Unloadable"]

LeaderRef = int | str | None


@dataclass(frozen=True)
class Leader:
    """A partition's leader: ``ref`` as the system names it, ``node`` the harness's node name."""

    ref: LeaderRef
    node: str | None

    @property
    def none(self) -> bool:
        return self.ref in (None, -1)


@dataclass(frozen=True)
class Mark:
    """A timeline mark a system asks the run to record (what it did, and its detail)."""

    label: str
    detail: dict[str, Any] = field(default_factory=dict)


class Stats(Protocol):
    """A client's counters (sent, ok, fail, info, polled, ...)."""

    def as_dict(self) -> dict[str, Any]: ...


class ProducerClient(Protocol):
    def run(self, *, count: int | None, duration_s: float | None, rate: float | None,
            value_size: int, keys: int | None, partition: int | None,
            stop: threading.Event) -> Stats: ...

    def close(self) -> None: ...


class ConsumerClient(Protocol):
    def run(self, *, count: int | None, duration_s: float | None, stop: threading.Event,
            max_s: float) -> Stats: ...


@runtime_checkable
class System(Protocol):
    """A running cluster of one system, as a run sees it."""

    #: the system's name in case files ("kafka", "pulsar")
    name: ClassVar[str]
    cluster: Cluster
    spec: ClusterDef

    def brokers(self) -> list[Node]:
        """The nodes that serve clients (Kafka brokers, Pulsar brokers)."""
        ...

    def wait_ready(self, timeout: float = 90) -> None:
        """Returns once the cluster serves; :class:`~harness.errors.WaitTimeout` otherwise."""
        ...

    def create_case_topic(self, topic: str, spec: TopicSpec) -> list[Mark]:
        """Creates the case's topic as ``spec`` says, led or owned; the marks to record."""
        ...

    def leader_of(self, topic: str, partition: int) -> Leader:
        """The partition's leader (Kafka) or owner (Pulsar) now."""
        ...

    def leader_ref(self, node: Node | str) -> int | str:
        """How :meth:`leader_of` names ``node`` when it leads."""
        ...

    def leadership(self, topic: str, partition: int) -> dict[str, Any]:
        """A ``leader`` timeline event's fields (``leader_node`` among them)."""
        ...

    def converged(self, topic: str, partitions: int, replication_factor: int) -> bool:
        """Whether every partition is whole again (led with a full ISR; owned)."""
        ...

    def resolve_role(self, role: str, topic: str, partition: int,
                     last_leader: Callable[[], str | None]) -> Node:
        """The node a system role (leader, follower, controller, owner, bookie, ...) names;
        ``last_leader`` gives the last node seen leading (for a leaderless partition)."""
        ...

    def producer(self, topic: str, history: HistoryWriter, client: ClientSpec) -> ProducerClient:
        ...

    def consumer(self, topic: str, history: HistoryWriter, client: ClientSpec,
                 group: str | None) -> ConsumerClient:
        ...

    def recovery_read(self, topic: str, history: HistoryWriter, client: ClientSpec,
                      partitions: int) -> dict[str, Any]:
        """Reads every partition from the beginning with a fresh client; its stats."""
        ...

    def collect_evidence(self, run_dir: Path, evidence: Evidence, topic: str,
                         partitions: int) -> None:
        """Adds the system's own evidence (beyond logs) to ``evidence`` and the run dir."""
        ...

    def reuse_problem(self) -> str | None:
        """What makes this running cluster unfit for another case (None: fit)."""
        ...

    def reuse_remedy(self, problem: str) -> str:
        """Tries to fix what :meth:`reuse_problem` found; says what it did."""
        ...


@runtime_checkable
class ControllerRemedy(Protocol):
    def stuck_controller(self, timeout: float) -> str | None:
        """What keeps the controller from doing its work (None: nothing found, or no such
        controller on this cluster)."""
        ...

    def force_controller_election(self) -> None: ...


@runtime_checkable
class StartGate(Protocol):
    def before_start(self, node: Node) -> dict[str, Any] | None:
        """Called before a stopped ``node`` is started: waits until it can start (the
        system's own bound), and says what it waited for (None: nothing)."""
        ...


@runtime_checkable
class DiskFull(Protocol):
    """Nodes whose storage can be made to look full (the ``diskfull`` fault)."""

    def set_disk_full(self, node: Node, full: bool) -> dict[str, Any]:
        """Makes ``node``'s disks look full (``full``) or no longer full, and waits until the
        node has acted on it (the system's own evidence); returns what was waited for."""
        ...


@runtime_checkable
class Controlled(Protocol):
    """A cluster with one elected controller whose elections are counted by an epoch."""

    def controller_now(self) -> tuple[str, int | None]:
        """The controller's node name and its epoch (None where the system has none)."""
        ...


@runtime_checkable
class ReadyRemedy(Protocol):
    def ready_remedy(self) -> str | None:
        """Repairs what keeps a healed cluster from being ready; what it did, or None."""
        ...


@runtime_checkable
class LockLoopWatch(Protocol):
    def lock_loops(self) -> dict[str, int]:
        """Nodes whose metadata lock flaps in a loop: node -> recent invalidations."""
        ...

    def restart(self, names: list[str]) -> str: ...

    def lock_loops_since(self, since: float) -> dict[str, int]:
        """Nodes whose metadata lock flapped in a loop at any time since ``since``."""
        ...

    def sessions_lost(self, since: float) -> dict[str, int]:
        """Nodes whose metadata session was declared lost since ``since``: node -> times."""
        ...

    def stale_after_session_loss(self, lost: dict[str, int]) -> list[str]:
        """Of the nodes whose metadata session was lost (``lost``), those a cluster kept for
        another run should restart: what the loss left them unfit for (None of them: [])."""
        ...

    def fenced_writes(self, since: float) -> dict[str, int]:
        """Brokers whose writes a bookie refused since ``since`` because another client had
        fenced the ledger: node -> refusals."""
        ...


@runtime_checkable
class InSyncReplicas(Protocol):
    def isr_size(self, topic: str, partition: int) -> int: ...


@runtime_checkable
class Checkpoints(Protocol):
    """A system whose nodes checkpoint per-partition offsets to files (Kafka's log dir)."""

    def checkpointed(self, node: Node, kind: str) -> dict[tuple[str, int], int]:
        """The offsets in ``node``'s checkpoint file of ``kind`` (``recovery-point``,
        ``high-watermark``) by (topic, partition); empty when it has none yet."""
        ...


@runtime_checkable
class LeaderServes(Protocol):
    """A system whose recorded leader (the controller's view) can run ahead of the node
    itself: a broker that has just started is named leader before it took the
    controller's request."""

    def serves_as_leader(self, node: Node, topic: str, partition: int) -> bool:
        """Whether ``node``, asked alone, names itself the partition's leader."""
        ...


@runtime_checkable
class Unloadable(Protocol):
    def unload(self, topic: str, partition: int | None = None, *, to: Node | str | None = None,
               timeout: float = 60) -> Node: ...


@runtime_checkable
class Splittable(Protocol):
    """A system whose topics lie in namespace bundles that can be split (``split``)."""

    def split_bundle(self, topic: str, partition: int, *, timeout: float = 90) -> dict[str, Any]: ...


@runtime_checkable
class Reassignable(Protocol):
    """A system whose partitions' replicas can be moved between brokers (``reassign``)."""

    def reassign(self, topic: str, partition: int, replicas: list[Node], *,
                 timeout: float = 120) -> dict[str, Any]: ...


@runtime_checkable
class QuorumChangeable(Protocol):
    """A system whose controller quorum takes voters in and out while it runs (``quorum``: a
    dynamic KRaft quorum)."""

    def change_voters(self, *, add: Node | None = None, remove: Node | None = None,
                      timeout: float = 120) -> dict[str, Any]: ...


@runtime_checkable
class Removable(Protocol):
    """A system some of whose nodes can be taken out for good (the ``remove`` fault): its
    readiness and its evidence leave them out."""

    #: the nodes removed for good during the run
    removed: set[str]

    def removable(self, node: Node) -> bool:
        """Whether ``node`` may be removed for good."""
        ...


@runtime_checkable
class Replaceable(Protocol):
    """A system some of whose nodes can be replaced by a new node with an empty disk at the
    same address (the ``replace`` fault)."""

    def forget_node(self, node: Node) -> dict[str, Any]:
        """Removes what the cluster keeps of ``node``'s old self so that a new one with an
        empty disk may join under its name (a bookie's cookie); returns what it removed.
        Raises FaultError for a node that cannot be replaced."""
        ...


@runtime_checkable
class Joinable(Protocol):
    """A system a spare node joins while it runs (the ``join`` fault)."""

    def joined(self, node: Node, timeout: float = 120) -> dict[str, Any]:
        """Waits until ``node``, whose process just started, serves as a member; returns
        what it waited for. Raises FaultError for a node that cannot join."""
        ...


@runtime_checkable
class Decommissionable(Protocol):
    """A system a node leaves for good while it runs, as an operator retires it (the
    ``decommission`` fault): first drained, then stopped, then unregistered."""

    #: the nodes decommissioned during the run: readiness leaves them out
    removed: set[str]

    def drain(self, node: Node, timeout: float = 120) -> dict[str, Any]:
        """Moves what ``node`` holds to the other nodes; returns what moved."""
        ...

    def retire(self, node: Node, timeout: float = 60) -> dict[str, Any]:
        """Once ``node`` stopped: removes its registration; returns what was removed."""
        ...


@runtime_checkable
class Subscribable(Protocol):
    def create_subscription(self, topic: str, name: str, position: str = "latest") -> dict[str, Any]: ...


@runtime_checkable
class CrashPoints(Protocol):
    """A system whose brokers take the crash-timing rules of :mod:`harness.points`."""

    def high_watermark(self, topic: str, partition: int) -> int:
        """The offset the next record of the partition gets, as a consumer sees it (N)."""
        ...

    def replica_log(self, node: Node, topic: str, partition: int = 0) -> list[Any]:
        """The records in ``node``'s copy of the partition, read from its files."""
        ...

    def followers(self, topic: str, partition: int = 0) -> list[Node]:
        """The partition's replicas other than its leader."""
        ...

    def node_name(self, broker_id: int) -> str:
        """The node with this broker id."""
        ...


@runtime_checkable
class LedgerPoints(Protocol):
    """A system whose crash-timing points target an entry of a topic's current ledger (Pulsar:
    :class:`harness.inject.pulsar.PulsarInjector`)."""

    def write_position(self, topic: str, partition: int | None = None) -> tuple[Any, int]:
        """The partition's current ledger and the id its next entry gets (N)."""
        ...

    def internal_stats(self, topic: str, partition: int | None = None, *,
                       metadata: bool = True) -> dict[str, Any]:
        """The partition's managed-ledger stats (last confirmed entry, cursors)."""
        ...


@runtime_checkable
class PowerLoss(Protocol):
    """A system whose nodes can lose what they had not flushed (the ``powerloss`` fault)."""

    def lose_unflushed(self, node: Node, topics: Collection[str] | None = None) -> dict[str, Any]:
        """Cuts a dead node's data (of ``topics``; None: all) back to what it had flushed;
        returns what was cut."""
        ...


@runtime_checkable
class JavaProducers(Protocol):
    def java_producer(self, run_dir: Path, topic: str, name: str, client: ClientSpec,
                      ready: threading.Event | None) -> Any: ...
