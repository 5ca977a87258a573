"""Kafka on a dockerized cluster: readiness, topics, partition roles, controller.

Admin calls use confluent-kafka's AdminClient against the brokers' loopback
listeners; the ZooKeeper-mode controller and partition state (with the leader
epoch) are read with kazoo; the KRaft quorum leader with Kafka's own
MetadataQuorumCommand inside a broker container.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..backend.cluster import Cluster, Node
from ..errors import AdminError, FaultError, HarnessError, WaitTimeout, WorkloadError
from ..wait import wait_until
from ._zk import wait_out_old_session, zk_address, zk_call
from .base import ConsumerClient, Leader, Mark, ProducerClient
from .kafka_segments import (
    CHECKPOINTS,
    CLEAN_SHUTDOWN_MARKER,
    LOG_DIR,
    RECOVERY_CHECKPOINT,
    SegmentRecord,
    node_checkpoint,
    read_checkpoint,
    read_partition_dir,
    tail_log_end,
    unflushed_cuts,
)

if TYPE_CHECKING:
    from ..case import ClientSpec, TopicSpec
    from ..collect import Evidence
    from ..history import HistoryWriter

__all__ = ["KafkaSystem", "PartitionState", "ControllerState"]

#: how long the recovery read waits for a high watermark to reach its in-sync replicas' log
#: ends (a new leader's high watermark moves up once its followers fetch again)
RECOVERY_HW_TIMEOUT_S = 30.0

_T = TypeVar("_T")


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int  # broker id, -1 when the partition has no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    epoch: int | None  # leader epoch: from ZooKeeper's partition state; None in KRaft mode
    # (clients see KRaft epochs on each record: history ``ok``/``poll`` events carry them)

    def as_event(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "leader": self.leader,
                "replicas": list(self.replicas), "isr": list(self.isr), "epoch": self.epoch}


# A ZooKeeper-mode controller broken until it fails over logs this (kafka.controller, 3.9).
_BROKEN_BATCH = "batch is not empty while creating a new one"
#: the longest a start waits for ZooKeeper to expire a killed broker's session (6 s here:
#: compose/images/kafka/entrypoint.sh)
OLD_SESSION_WAIT_S = 30.0
#: the name of every probe topic (:meth:`KafkaSystem.controller_problem`) starts so
PROBE_PREFIX = "__chaos_probe_"
_ELECTED = "successfully elected as the controller"


@dataclass(frozen=True)
class ControllerState:
    broker: int
    epoch: int | None


def majority_view(views: list[tuple[int, tuple[int, ...], tuple[int, ...]]]
                  ) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """The partition as most brokers see it: the leader most of them name, then the replicas
    and in-sync set most of those name (in the order asked, on a tie). Voting on the whole
    view would split the votes of brokers that agree on the leader while an ISR change
    propagates, and could let a broker started again just before, still naming an old
    leader, win."""
    from collections import Counter

    leader = Counter(v[0] for v in views).most_common(1)[0][0]
    rest = Counter(v[1:] for v in views if v[0] == leader).most_common(1)[0][0]
    return leader, rest[0], rest[1]


class KafkaSystem:
    """Admin view of a Kafka cluster. Node names are ``kafka-<broker id>``."""

    name: ClassVar[str] = "kafka"

    def __init__(self, cluster: Cluster) -> None:
        from confluent_kafka.admin import AdminClient

        self.cluster = cluster
        self.spec = cluster.spec
        self.admin = AdminClient({"bootstrap.servers": self.spec.bootstrap,
                                  "socket.timeout.ms": 5000, "socket.connection.setup.timeout.ms": 3000,
                                  "log_level": 0})
        #: the transactional ids and consumer groups of the run's clients, latest last (the
        #: ``txn-coordinator`` and ``group-coordinator`` roles resolve the latest one)
        self.transactional_ids: list[str] = []
        self.groups: list[str] = []
        #: brokers decommissioned during the run: readiness leaves them out
        self.removed: set[str] = set()

    # -- naming ---------------------------------------------------------------
    def node_name(self, broker_id: int) -> str:
        """The node with this Kafka node id (a broker, or a KRaft controller-only node)."""
        for n in self.spec.nodes:
            if n.node_id == broker_id and n.kind in ("broker", "controller"):
                return n.name
        return f"kafka-{broker_id}"

    def broker_id(self, node: Node | str) -> int:
        name = node if isinstance(node, str) else node.name
        return self.spec.node(name).node_id

    def brokers(self) -> list[Node]:
        """The brokers that are members (a spare joins at a ``join`` step)."""
        return [n for n in self.cluster.nodes() if n.kind == "broker" and n.member]

    # -- readiness ------------------------------------------------------------
    def live_brokers(self) -> set[int]:
        md = self.admin.list_topics(timeout=5)
        return set(md.brokers)

    def wait_ready(self, timeout: float = 90) -> None:
        """All brokers registered (members not decommissioned), a controller elected, an
        internal round trip possible."""
        want = {n.spec.node_id for n in self.brokers() if n.name not in self.removed}

        def ready() -> bool:
            md = self.admin.list_topics(timeout=5)
            return set(md.brokers) >= want and md.controller_id in want

        wait_until(ready, timeout=timeout, what=f"{self.spec.name}: all {len(want)} brokers registered",
                   logs=self.cluster.node_logs)
        if self.spec.mode == "zk":
            wait_until(lambda: self.controller().broker in want, timeout=timeout,
                       what="a ZooKeeper controller", logs=self.cluster.node_logs)

    # -- topics -----------------------------------------------------------------
    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     config: Mapping[str, str] | None = None, timeout: float = 60) -> None:
        from confluent_kafka.admin import NewTopic

        topic = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                         config=dict(config or {}))
        brokers = len(self.spec.nodes_of("broker"))

        def created() -> bool | str:
            """True once created; a message (truthy: stop waiting) for a permanent error."""
            try:
                self.admin.create_topics([topic], request_timeout=30)[name].result(timeout=40)
            except Exception as exc:
                err = exc.args[0] if exc.args else None
                if "TOPIC_ALREADY_EXISTS" in str(exc):
                    return True
                if getattr(err, "retriable", lambda: False)() or "_DESTROY_BROKER" in str(exc) \
                        or "_TRANSPORT" in str(exc) or "_TIMED_OUT" in str(exc):
                    raise  # transient (a broker connection being replaced): wait_until retries
                if "INVALID_REPLICATION_FACTOR" in str(exc) and replication_factor <= brokers:
                    raise  # a broker of the cluster not registered yet (just restarted): retried
                return str(exc)
            return True

        def all_led() -> bool:
            states = [self.partition_state(name, p) for p in range(partitions)]
            return all(s.leader >= 0 and len(s.isr) == replication_factor for s in states)

        for attempt in (1, 2, 3):
            try:
                outcome = wait_until(created, timeout=timeout, what=f"topic {name} created",
                                     logs=self.cluster.node_logs)
            except WaitTimeout as exc:
                raise AdminError(f"creating topic {name} failed: {exc}") from exc
            if outcome is not True:
                raise AdminError(f"creating topic {name} failed: {outcome}")
            wait_until(all_led, timeout=timeout,
                       what=f"topic {name}: every partition led with a full ISR",
                       logs=self.cluster.node_logs)
            # Seen once in KRaft mode after a paused node resumed: every broker answered
            # "unknown topic" right after the topic was led with a full ISR (a creation the
            # retry found "already existing" in a controller that then lost leadership, its
            # uncommitted record truncated). A topic still there a moment later is kept.
            time.sleep(0.5)
            try:
                all_led()
                return
            except AdminError as exc:
                if attempt == 3 or "UNKNOWN_TOPIC" not in str(exc):
                    raise

    def delete_topics(self, names: list[str], settle_s: float = 30.0) -> None:
        """Deletes topics. ZooKeeper mode: also waits (up to ``settle_s``) until the controller
        has finished deleting them, so that no deletion is in flight when a case starts.

        A controller that fails over while its StopReplica requests of a deletion are still
        queued breaks on 3.9 ("Controller to broker state change requests batch is not empty
        while creating a new one", on every later state change), and the partitions of the
        case stop changing ISR and leadership (seen in CI: a case killed the controller just
        after the harness deleted a probe topic). A deletion that does not finish in time
        (a broker is down) is left to the controller.
        """
        if not names:
            return
        for name, fut in self.admin.delete_topics(names, operation_timeout=30).items():
            try:
                fut.result(timeout=40)
            except Exception as exc:
                if "UNKNOWN_TOPIC" not in str(exc):
                    raise AdminError(f"deleting topic {name} failed: {exc}") from exc
        if self.spec.mode == "zk" and settle_s > 0:
            def pending(zk: Any) -> list[str]:
                return [n for n in names if zk.exists(f"/admin/delete_topics/{n}")
                        or zk.exists(f"/brokers/topics/{n}")]

            try:
                wait_until(lambda: not zk_call(zk_address(self.spec), "topic deletions", pending),
                           timeout=settle_s, interval=0.2, max_interval=1.0,
                           what=f"the controller to finish deleting {', '.join(names)}")
            except WaitTimeout:
                pass

    def topics(self) -> list[str]:
        return [t for t in self.admin.list_topics(timeout=10).topics if not t.startswith("__")]

    # -- partition roles --------------------------------------------------------
    def partition_state(self, topic: str, partition: int = 0) -> PartitionState:
        if self.spec.mode == "zk":
            return self._zk_partition_state(topic, partition)
        return self._kraft_partition_state(topic, partition)

    def _kraft_partition_state(self, topic: str, partition: int) -> PartitionState:
        """The majority view of the running brokers, each asked on its own connection.

        A broker cut off from the controllers keeps serving its last metadata
        (claiming leadership it lost); asking one broker would trust it.
        """
        from concurrent.futures import ThreadPoolExecutor

        def ask(node: Node) -> tuple[int, tuple[int, ...], tuple[int, ...]] | str:
            pmd = _partition_alone(node, topic, partition)
            return pmd if isinstance(pmd, str) else (pmd.leader, tuple(pmd.replicas), tuple(pmd.isrs))

        running = [n for n in self.brokers() if n.container.status == "running"]
        # asked in parallel: one question costs a client start and a connection, which on
        # a loaded machine took seconds, and kills that must land while a point is held
        # wait for it
        with ThreadPoolExecutor(max_workers=max(len(running), 1)) as pool:
            answers = list(pool.map(ask, running))
        views = [a for a in answers if not isinstance(a, str)]
        errors = [a for a in answers if isinstance(a, str)]
        if not views:
            raise AdminError(f"no broker answered for {topic}-{partition}: {'; '.join(errors)}")
        leader, replicas, isr = majority_view(views)
        return PartitionState(topic, partition, leader, replicas, isr, None)

    def serves_as_leader(self, node: Node, topic: str, partition: int) -> bool:
        """Asked alone (a fresh client bootstrapped on it), ``node``'s metadata names it the
        partition's leader: in ZooKeeper mode the controller sends a broker its
        LeaderAndIsr before the UpdateMetadata that says so, so the broker leads. (The
        partition state in ZooKeeper is written first: a broker that has just started
        was named leader 13 s before its first request from the controller, and a
        producer's records sent in between timed out.)"""
        pmd = _partition_alone(node, topic, partition)  # not answering is not serving
        return not isinstance(pmd, str) and pmd.leader == self.broker_id(node)

    def _zk_partition_state(self, topic: str, partition: int) -> PartitionState:
        data = self._zk_get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        assignment = self._zk_get(f"/brokers/topics/{topic}")
        replicas = tuple(assignment.get("partitions", {}).get(str(partition), ()))
        return PartitionState(topic, partition, int(data["leader"]), replicas,
                              tuple(data["isr"]), int(data["leader_epoch"]))

    def leader(self, topic: str, partition: int = 0) -> Node | None:
        state = self.partition_state(topic, partition)
        return self.cluster.node(self.node_name(state.leader)) if state.leader >= 0 else None

    def followers(self, topic: str, partition: int = 0) -> list[Node]:
        state = self.partition_state(topic, partition)
        return [self.cluster.node(self.node_name(b)) for b in state.replicas if b != state.leader]

    def checkpointed(self, node: Node, kind: str) -> dict[tuple[str, int], int]:
        """The offsets of ``node``'s checkpoint file of ``kind`` (the capability
        :class:`~.base.Checkpoints`): ``recovery-point`` (below it, the log manager has
        flushed; written every ``log.flush.offset.checkpoint.interval.ms``, the first time
        ``log.initial.task.delay.ms`` after the start, 30 s by default) or
        ``high-watermark`` (every ``replica.high.watermark.checkpoint.interval.ms``, 5 s).
        Works while the node is down; empty when the file is not there yet."""
        return node_checkpoint(node, CHECKPOINTS[kind])

    def replica_log(self, node: Node, topic: str, partition: int = 0) -> list[SegmentRecord]:
        """The records in ``node``'s copy of the partition, read from its files (works while it is down)."""
        files = node.container.get_files(f"{LOG_DIR}/{topic}-{partition}")
        return read_partition_dir(files).get((topic, partition), [])

    def lose_unflushed(self, node: Node, topics: Collection[str] | None = None) -> dict[str, Any]:
        """After a kill -9: what a power loss takes from ``node``: each log segment is cut back
        to its partition's recovery point, read from the log dir's recovery checkpoint
        (as Kafka's EpochDrivenReplicationProtocolAcceptanceTest does), so that the next
        start recovers from the flushed data only. A broker that was running has no
        clean-shutdown marker (it is written at a clean shutdown, removed at start); one that
        was stopped cleanly has, and is refused. ``topics``: cut only these topics' segments
        (a run cuts its own topic: a reused cluster keeps earlier runs' topics, and a run
        must not depend on them). Returns what was cut."""
        if node.container.status == "running":
            raise FaultError(f"{node.name} is running: a power loss cuts the files of a dead node")
        files = list(node.container.get_files(LOG_DIR))
        if any(p.endswith("/" + CLEAN_SHUTDOWN_MARKER) for p, _ in files):
            raise FaultError(f"{node.name} was shut down cleanly (its logs are flushed and marked "
                             f"clean): powerloss takes a running broker")
        checkpoint_text = next((c.decode("utf-8", "replace") for p, c in files
                                if p.endswith("/" + RECOVERY_CHECKPOINT)), "")
        cuts = unflushed_cuts(files, read_checkpoint(checkpoint_text), topics)
        parent = LOG_DIR.rsplit("/", 1)[0]
        for cut, kept in cuts:
            node.container.put_file(f"{parent}/{cut.path}", kept)
        return {"checkpoint": bool(checkpoint_text),
                "cuts": [{"topic": c.topic, "partition": c.partition,
                          "recovery_point": c.recovery_point, "segment": c.path.rsplit("/", 1)[-1],
                          "bytes_cut": c.size_before - c.size_after,
                          "records_lost": c.records_lost} for c, _ in cuts]}

    # -- controller ---------------------------------------------------------------
    def controller(self) -> ControllerState:
        if self.spec.mode == "zk":
            ctl = self._zk_get("/controller")
            epoch = self._zk_get("/controller_epoch")
            return ControllerState(int(ctl["brokerid"]), int(epoch))
        return self._kraft_quorum_leader()

    def controller_now(self) -> tuple[str, int | None]:
        """The controller's node and epoch: ZooKeeper mode /controller and /controller_epoch,
        KRaft the quorum leader and its epoch (the capability :class:`~.base.Controlled`)."""
        state = self.controller()
        return self.node_name(state.broker), state.epoch

    def force_controller_election(self) -> None:
        """ZooKeeper mode: delete ``/controller`` so the brokers elect a controller afresh
        (the documented remedy for a controller stuck on stale broker epochs).

        First the stuck controller's JVM gets a SIGQUIT: its thread dump goes to its log
        (collected with the run), so what held the controller can be read afterwards."""
        if self.spec.mode != "zk":
            raise AdminError("a forced controller election is for ZooKeeper mode only")
        try:
            self.cluster.node(self.node_name(self.controller().broker)).container.kill("QUIT")
        except HarnessError:
            pass  # no controller known or it is not running: nothing to dump
        zk_call(zk_address(self.spec), "/controller",
                lambda zk: zk.delete("/controller"))

    def before_start(self, node: Node) -> dict[str, Any] | None:
        """ZooKeeper mode, a broker: waits (up to :data:`OLD_SESSION_WAIT_S`) until ZooKeeper
        has expired the session of the broker's killed self, whose ephemeral
        ``/brokers/ids/<id>`` it still holds. A broker started before that stops at once
        ("Fatal error during KafkaServer startup", NodeExists: seen on 3.9.2 when a bench
        restarted a broker 2 s after its kill -9; the session is 6 s here). Returns how long
        it waited, or None when the registration was already gone (a clean stop removes it)."""
        if self.spec.mode != "zk" or node.spec.kind != "broker":
            return None
        path = f"/brokers/ids/{node.spec.node_id}"
        zk = zk_address(self.spec)

        def gone() -> bool:
            return not zk_call(zk, path, lambda c: c.exists(path))

        return wait_out_old_session(gone, node.name, path, OLD_SESSION_WAIT_S)

    def forget_node(self, node: Node) -> dict[str, Any]:
        """A broker replaced by a new machine with an empty disk and the same broker id, the
        way Kafka's operations guide replaces a failed broker: the new broker takes over the
        old one's replicas and copies them from their leaders. ZooKeeper mode only, and
        nothing to remove: the old registration is ephemeral (the start waits out its
        session). ZooKeeper and, in KRaft, a combined node (a controller voter, whose
        metadata log is the quorum's state) are refused."""
        if node.kind != "broker" or self.spec.mode != "zk":
            raise FaultError(f"replace: {node.name} is a {node.kind} of a {self.spec.mode} cluster; only a "
                             "broker of a ZooKeeper-mode cluster is replaced with an empty disk")
        self.removed.discard(node.name)  # a new broker at a decommissioned one's address
        return {"broker_id": node.spec.node_id}

    def reuse_problem(self) -> str | None:
        """What makes this running cluster unfit for another case (None: fit).

        ZooKeeper mode: a controller that fails its state changes (:meth:`broken_controller`)
        or is stuck on stale broker epochs (:meth:`controller_problem`).
        """
        return self.broken_controller() or self.controller_problem() or self.changed_quorum()

    def changed_quorum(self) -> str | None:
        """A dynamic KRaft quorum whose voters are no longer its first ones (an earlier case
        added or removed one): another case would start from a quorum it did not state."""
        if self.spec.quorum != "dynamic":
            return None
        first = {n.node_id for n in self.spec.nodes_of("broker")}
        now = set(self.voters())
        if now == first:
            return None
        return f"the quorum's voters are {sorted(now)}, not its first {sorted(first)}"

    def broken_controller(self) -> str | None:
        """ZooKeeper mode: what is wrong when the active controller has logged, since it was
        elected, the IllegalStateException that leaves it failing every later state change
        (ISR shrinks and expansions, elections) until it fails over; else None.

        Seen on 3.9.2 when a controller failed over while the StopReplica requests of a
        topic deletion were still queued (:meth:`delete_topics` now waits for deletions).
        Only the tail of the controller's log is read (its last election is usually in it;
        if not, the whole tail counts).
        """
        if self.spec.mode != "zk":
            return None
        try:
            node = self.cluster.node(self.node_name(self.controller().broker))
            text = node.container.logs(tail=3000)
        except HarnessError:
            return None
        if _BROKEN_BATCH in text.rsplit(_ELECTED, 1)[-1]:
            return (f"the controller {node.name} fails its state changes (IllegalStateException: "
                    f"\"{_BROKEN_BATCH}\")")
        return None

    def reuse_remedy(self, problem: str) -> str:
        """Tries to fix what :meth:`reuse_problem` found; returns what it did."""
        if problem.startswith("the quorum's voters"):
            return "nothing (a quorum's voters are not put back: the cluster is made anew)"
        self.force_controller_election()
        return "forced a controller election (deleted /controller)"

    def controller_problem(self, timeout: float = 20) -> str | None:
        """ZooKeeper mode: None when the controller reaches every broker, else what is wrong.

        A probe topic with one replica on every broker is created; every broker must
        create its log for it. A controller left stamping its requests with a stale
        broker epoch (seen on 3.9 after brokers restart quickly, possibly several cases
        earlier on a reused cluster) makes those brokers reject LeaderAndIsr, and they
        never do. KRaft mode has no such controller: always None there.
        """
        if self.spec.mode != "zk":
            return None
        import secrets

        from confluent_kafka import KafkaException
        from confluent_kafka.admin import NewTopic

        name = f"{PROBE_PREFIX}{secrets.token_hex(4)}"
        ids = sorted(n.node_id for n in self.spec.nodes_of("broker"))
        fut = self.admin.create_topics([NewTopic(name, num_partitions=1, replica_assignment=[ids])],
                                       request_timeout=15)[name]
        try:
            fut.result(timeout=20)
        except Exception as exc:
            return f"the probe topic could not be created: {exc}"
        missing: list[str] = []

        def has_it(node: Node) -> bool:
            try:
                return node.container.exec(["test", "-d", f"{LOG_DIR}/{name}-0"])[0] == 0
            except Exception:  # a paused or stopped container cannot run the check
                return False

        def every_broker_has_it() -> bool:
            missing[:] = [n.name for n in self.brokers() if not has_it(n)]
            return not missing

        try:
            wait_until(every_broker_has_it, timeout=timeout, interval=0.5,
                       what=f"every broker to create the probe topic {name}")
        except WaitTimeout:
            # Left in place: a stuck controller does not finish deleting it (the broker that
            # rejects its LeaderAndIsr rejects its StopReplica too; waiting for that would eat
            # the await's time), and the remedy, a forced election, must not find a deletion
            # in flight (see delete_topics). The next probe that passes deletes it.
            return (f"{', '.join(missing)} did not take the controller's LeaderAndIsr for a "
                    f"probe topic in {timeout:.0f}s (a controller on stale broker epochs?)")
        try:
            leftovers = [t for t in self.admin.list_topics(timeout=10).topics
                         if t.startswith(PROBE_PREFIX) and t != name]
            self.delete_topics([name, *sorted(leftovers)])
        except (AdminError, KafkaException):
            pass  # a leftover probe topic is harmless: topics() hides "__" names
        return None

    def _kraft_quorum_leader(self) -> ControllerState:
        def leader_of(out: str) -> ControllerState | None:
            leader = re.search(r"LeaderId:\s*(-?\d+)", out)
            epoch = re.search(r"LeaderEpoch:\s*(\d+)", out)
            if leader is None:
                return None
            return ControllerState(int(leader.group(1)), int(epoch.group(1)) if epoch else None)

        return self._quorum_status(leader_of, "leader")

    def _quorum_tool(self, runner: Node, args: str, config: str = "/tmp/quorum.properties",
                     running: set[str] | None = None) -> tuple[int, str]:
        """Kafka's ``kafka-metadata-quorum`` (MetadataQuorumCommand) in ``runner``, against
        every ``running`` controller (default: asked of Docker; the admin client may pick a
        paused one and wait on it); ``config`` its command config, by default short admin
        timeouts (the default, 60 s, waits on a paused leader it still knows)."""
        if running is None:
            running = {n.name for n in self.cluster.nodes() if n.container.status == "running"}
        bootstrap = ",".join(f"{n.name}:9093" for n in self.spec.controllers if n.name in running)
        return runner.container.exec(["sh", "-c", (
            "printf 'request.timeout.ms=5000\\ndefault.api.timeout.ms=10000\\n' > /tmp/quorum.properties"
            " && exec java -Xmx128m -cp '/opt/kafka/libs/*' org.apache.kafka.tools.MetadataQuorumCommand"
            f" --command-config {config} --bootstrap-controller {bootstrap} {args}")])

    def _quorum_status(self, parse: Callable[[str], _T | None], what: str) -> _T:
        """``describe --status`` in each running node in turn, until ``parse`` reads its answer."""
        nodes = self.cluster.nodes()
        running = {n.name for n in nodes if n.container.status == "running"}
        for node in (n for n in nodes if n.name in running):
            code, out = self._quorum_tool(node, "describe --status", running=running)
            got = parse(out) if code == 0 else None
            if got is not None:
                return got
        raise AdminError(f"could not read the KRaft quorum's {what} from any running node")

    # -- membership ----------------------------------------------------------------------
    def reassign(self, topic: str, partition: int, replicas: list[Node], *,
                 timeout: float = 120) -> dict[str, Any]:
        """Moves the replicas of ``topic``-``partition`` to ``replicas`` with Kafka's own
        reassignment tool, run in a running broker, and waits until the partition's replica
        list is exactly the new one (the tool's plan complete: the new replicas caught up and
        the old ones removed). Returns the replicas before and after and the seconds taken."""
        ids = [self.broker_id(n) for n in replicas]
        before = self.partition_state(topic, partition)
        t0 = time.monotonic()
        done = self._move_replicas({(topic, partition): ids}, timeout)[(topic, partition)]
        return {"partition": partition, "replicas_before": list(before.replicas), "replicas": ids,
                "isr": list(done.isr), "leader": done.leader, "seconds": round(time.monotonic() - t0, 3)}

    def _move_replicas(self, plan: Mapping[tuple[str, int], list[int]],
                       timeout: float) -> dict[tuple[str, int], PartitionState]:
        """Runs one reassignment of every partition of ``plan`` (topic and partition -> new
        replica ids) with Kafka's tool in a running broker; waits until each partition's
        replica list is its new one and every new replica is in its ISR."""
        runner = next((n for n in self.brokers() if n.container.status == "running"), None)
        if runner is None:
            raise AdminError("reassign: no broker is running to run the reassignment tool")
        text = json.dumps({"version": 1, "partitions": [
            {"topic": t, "partition": p, "replicas": ids} for (t, p), ids in plan.items()]})
        shown = ", ".join(f"{t}-{p} to {ids}" for (t, p), ids in list(plan.items())[:4]) \
            + (f" and {len(plan) - 4} more" if len(plan) > 4 else "")
        tool, target = self._reassign_tool()
        code, out = runner.container.exec(["sh", "-c", (
            f"printf '%s' '{text}' > /tmp/reassign.json && exec java -Xmx128m -cp '/opt/kafka/libs/*' "
            f"{tool} {target} --reassignment-json-file /tmp/reassign.json --execute")])
        if code != 0 or "Successfully started" not in out:
            raise AdminError(f"reassign {shown}: the tool on {runner.name} said: "
                             + " | ".join(out.strip().splitlines()[-3:])[:600])
        done: dict[tuple[str, int], PartitionState] = {}

        def complete() -> bool:
            for (t, p), ids in plan.items():
                if (t, p) not in done:
                    state = self.partition_state(t, p)
                    if state.replicas == tuple(ids) and set(state.isr) == set(ids):
                        done[(t, p)] = state
            return len(done) == len(plan)

        wait_until(complete, timeout=timeout, what=f"the reassignment of {shown}")
        return done

    def joined(self, node: Node, timeout: float = 120) -> dict[str, Any]:
        """Waits until a spare whose gate just opened serves: its broker id registered (a new
        id: KRaft registers it with the controller, ZooKeeper mode under /brokers/ids)."""
        broker = self.broker_id(node)
        wait_until(lambda: broker in self.live_brokers(), timeout=timeout,
                   what=f"{node.name} (broker {broker}) registered",
                   logs=lambda: self.cluster.node_logs([node.name]))
        return {"broker_id": broker}

    def drain(self, node: Node, timeout: float = 120) -> dict[str, Any]:
        """Decommission, first half: every replica ``node`` holds (every topic, internal ones
        too) moves to a running broker that holds none of that partition (the lowest id),
        in one reassignment, and the step waits until it is done. A combined KRaft node (a
        controller voter too) is refused, and so is a partition with no broker to take it."""
        broker = self.broker_id(node)
        if node.kind != "broker" or node.spec in self.spec.controllers:
            kind = node.kind if node.kind != "broker" else "combined"
            raise FaultError(f"decommission: {node.name} is a {kind} node; only a broker that is no "
                             "controller is decommissioned (kafka-zk, kafka-kraft-split, kafka-5 of "
                             "kafka-kraft-dynamic)")
        md = self.admin.list_topics(timeout=10)
        others = sorted(set(md.brokers) - {broker})
        plan: dict[tuple[str, int], list[int]] = {}
        for t in md.topics.values():
            for p in t.partitions.values():
                if broker not in p.replicas or t.topic is None:
                    continue
                spare = next((b for b in others if b not in p.replicas), None)
                if spare is None:
                    raise FaultError(f"decommission: no running broker can take {node.name}'s replica of "
                                     f"{t.topic}-{p.id} (replicas {list(p.replicas)}; running {others})")
                plan[(t.topic, p.id)] = [spare if r == broker else r for r in p.replicas]
        t0 = time.monotonic()
        if plan:
            self._move_replicas(plan, timeout)
        return {"broker_id": broker, "partitions_moved": len(plan),
                "moved": {f"{t}-{p}": ids for (t, p), ids in sorted(plan.items())[:20]},
                "moved_s": round(time.monotonic() - t0, 3)}

    def retire(self, node: Node, timeout: float = 60) -> dict[str, Any]:
        """Decommission, second half, once ``node`` stopped: in KRaft its registration is
        removed (``kafka-cluster unregister``, Kafka's ClusterTool); in ZooKeeper mode it
        went with its session. Waits until the cluster no longer lists the broker."""
        broker = self.broker_id(node)
        detail: dict[str, Any] = {}
        if self.spec.mode == "kraft":
            runner = next((n for n in self.brokers() if n.name != node.name
                           and n.container.status == "running"), None)
            if runner is None:
                raise AdminError("decommission: no other broker is running to unregister it")
            bootstrap = ",".join(f"{n.name}:9094" for n in self.brokers() if n.name != node.name)
            code, out = runner.container.exec(["sh", "-c", (
                "exec java -Xmx128m -cp '/opt/kafka/libs/*' org.apache.kafka.tools.ClusterTool "
                f"unregister --bootstrap-server {bootstrap} --id {broker}")])
            if code != 0:
                raise AdminError(f"decommission: unregistering broker {broker} failed: "
                                 + " | ".join(out.strip().splitlines()[-3:])[:600])
            detail["unregistered"] = broker
        wait_until(lambda: broker not in self.live_brokers(), timeout=timeout,
                   what=f"broker {broker} gone from the cluster's metadata")
        self.removed.add(node.name)
        return detail

    def voters(self) -> dict[int, str]:
        """The quorum's voters as its leader has them: node id -> metadata directory id."""
        def voters_of(out: str) -> dict[int, str] | None:
            line = next((ln for ln in out.splitlines() if ln.startswith("CurrentVoters:")), None)
            if line is None:
                return None
            return {int(i): d for i, d in re.findall(r'"id":\s*(\d+),\s*"directoryId":\s*"([^"]*)"', line)}

        return self._quorum_status(voters_of, "voters")

    def change_voters(self, *, add: Node | None = None, remove: Node | None = None,
                      timeout: float = 120) -> dict[str, Any]:
        """One controller in (``add``: it runs and follows the metadata log as an observer;
        ``kafka-metadata-quorum add-controller`` in it, with its own configuration, tried
        again until the leader finds it caught up) or out (``remove``: ``remove-controller``
        with its id and metadata directory id, run in another running controller) of a
        dynamic KRaft quorum; waits until the voters are the new set. Returns the voters
        before and after, the tool's tries and the seconds taken."""
        node = add or remove
        assert node is not None and (add is None) != (remove is None)
        node_id = node.spec.node_id
        before = self.voters()
        if add is not None and node_id in before:
            raise AdminError(f"quorum add: {node.name} (id {node_id}) is a voter already: {sorted(before)}")
        if remove is not None and node_id not in before:
            raise AdminError(f"quorum remove: {node.name} (id {node_id}) is not a voter: {sorted(before)}")
        if remove is not None and len(before) == 1:
            raise AdminError(f"quorum remove: {node.name} is the quorum's last voter")
        controllers = {c.name for c in self.spec.controllers}
        if add is not None:
            runner, args, config = add, "add-controller", "/opt/kafka/run/server.properties"
        else:
            other = next((n for n in self.cluster.nodes() if n.name != node.name and n.name in controllers
                          and n.container.status == "running"), None)
            if other is None:
                raise AdminError("quorum remove: no other controller is running to run the tool")
            runner = other
            args = f"remove-controller --controller-id {node_id} --controller-directory-id {before[node_id]}"
            config = "/tmp/quorum.properties"
        want = ({*before, node_id} if add is not None else set(before) - {node_id})
        t0 = time.monotonic()
        tries: list[str] = []

        def changed() -> dict[int, str] | None:
            if not tries or tries[-1] != "ok":  # the tool again until it succeeds once
                code, out = self._quorum_tool(runner, args, config)
                tries.append(" | ".join(out.strip().splitlines()[-2:])[:300] if code else "ok")
            now = self.voters()
            return now if set(now) == want else None

        try:
            what = f"the KRaft voters {sorted(want)} ({'add' if add else 'remove'} {node.name})"
            after = wait_until(changed, timeout=timeout, interval=2.0, what=what)
        except WaitTimeout as exc:
            raise AdminError(f"{exc}; the tool said: {tries[-1] if tries else 'nothing'}") from None
        assert after is not None
        return {"action": "add" if add else "remove", "node": node.name, "voters_before": sorted(before),
                "voters": sorted(after), "tries": len(tries), "last_answer": tries[-1] if tries else None,
                "seconds": round(time.monotonic() - t0, 3)}

    def _reassign_tool(self) -> tuple[str, str]:
        """The reassignment tool's class for this version, and how it reaches the cluster."""
        version = tuple(int(x) for x in re.findall(r"\d+", self.cluster.version)[:2])
        bootstrap = ",".join(f"{n.name}:9094" for n in self.spec.nodes_of("broker"))
        if version >= (3, 7):
            return ("org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                    f"--bootstrap-server {bootstrap}")
        if version >= (2, 5):
            return "kafka.admin.ReassignPartitionsCommand", f"--bootstrap-server {bootstrap}"
        if self.spec.mode != "zk":
            raise AdminError(f"reassign on Kafka {self.cluster.version} needs ZooKeeper mode")
        return "kafka.admin.ReassignPartitionsCommand", "--zookeeper zk:2181"

    # -- the System protocol (harness.systems.base) --------------------------------------
    def create_case_topic(self, topic: str, spec: TopicSpec) -> list[Mark]:
        config = {"unclean.leader.election.enable": str(spec.unclean_leader_election).lower(),
                  **dict(spec.config)}
        if spec.min_insync_replicas is not None:
            config["min.insync.replicas"] = str(spec.min_insync_replicas)
        self.create_topic(topic, spec.partitions, spec.replication_factor, config)
        return []

    def leader_of(self, topic: str, partition: int) -> Leader:
        leader = int(self.partition_state(topic, partition).leader)
        return Leader(leader, self.node_name(leader) if leader >= 0 else None)

    def leader_ref(self, node: Node | str) -> int:
        return self.broker_id(node)

    def leadership(self, topic: str, partition: int) -> dict[str, Any]:
        state = self.partition_state(topic, partition)
        event = state.as_event()
        event["leader_node"] = self.node_name(state.leader) if state.leader >= 0 else None
        event["isr_nodes"] = [self.node_name(b) for b in state.isr]
        return event

    def converged(self, topic: str, partitions: int, replication_factor: int) -> bool:
        states = [self.partition_state(topic, p) for p in range(partitions)]
        return all(s.leader >= 0 and len(s.isr) == replication_factor for s in states)

    def isr_size(self, topic: str, partition: int) -> int:
        return len(self.partition_state(topic, partition).isr)

    def resolve_role(self, role: str, topic: str, partition: int,
                     last_leader: Callable[[], str | None]) -> Node:
        if role == "controller":
            return self.cluster.node(self.node_name(self.controller().broker))
        if role == "leader":
            node = self.leader(topic, partition)
            if node is None:
                raise FaultError(f"leader: partition {partition} of {topic} has no leader (-1)")
            return node
        if role == "follower":
            state = self.partition_state(topic, partition)
            leader = state.leader
            if leader < 0:  # leaderless: the followers are the replicas other than the last leader
                last = last_leader()
                leader = self.broker_id(last) if last else -1
            in_sync = [b for b in state.replicas if b != leader and b in state.isr]
            others = in_sync or [b for b in state.replicas if b != leader]
            if not others:
                raise FaultError(f"follower: partition {partition} of {topic} has no follower")
            return self.cluster.node(self.node_name(others[0]))
        if role == "txn-coordinator":
            if not self.transactional_ids:
                raise FaultError("txn-coordinator: no transactional producer has started yet")
            return self.coordinator("__transaction_state", self.transactional_ids[-1], role)
        if role == "group-coordinator":
            if not self.groups:
                raise FaultError("group-coordinator: no consumer has started yet")
            return self.coordinator("__consumer_offsets", self.groups[-1], role)
        raise FaultError(f"unknown kafka role {role!r}")

    def coordinator(self, internal: str, key: str, role: str) -> Node:
        """The leader of the partition of ``internal`` (``__transaction_state``,
        ``__consumer_offsets``) that coordinates ``key`` (a transactional id, a group):
        Kafka's ``Utils.abs(key.hashCode) % partitions``."""
        try:
            md = self.admin.list_topics(topic=internal, timeout=10).topics.get(internal)
        except Exception as exc:
            raise FaultError(f"{role}: could not read {internal}'s metadata: {exc}") from None
        if md is None or md.error is not None or not md.partitions:
            raise FaultError(f"{role}: {internal} does not exist yet "
                             f"({md.error if md is not None else 'no metadata'})")
        partition = coordinator_partition(key, len(md.partitions))
        leader = self.partition_state(internal, partition).leader
        if leader < 0:
            raise FaultError(f"{role}: partition {partition} of {internal} (coordinating {key!r}) "
                             f"has no leader")
        return self.cluster.node(self.node_name(leader))

    def producer(self, topic: str, history: HistoryWriter, client: ClientSpec) -> ProducerClient:
        from ..clients.kafka import KafkaProducerClient, producer_config

        if client.transactional_id:
            self.transactional_ids.append(client.transactional_id)
        return KafkaProducerClient(producer_config(self.spec.bootstrap, client), topic, history)

    def consumer(self, topic: str, history: HistoryWriter, client: ClientSpec,
                 group: str | None) -> ConsumerClient:
        from ..clients.kafka import KafkaConsumerClient

        consumer = KafkaConsumerClient(self.spec.bootstrap, topic, history, group=group,
                                       isolation_level=client.isolation_level)
        self.groups.append(consumer.group)
        return consumer

    def java_producer(self, run_dir: Path, topic: str, name: str, client: ClientSpec,
                      ready: threading.Event | None) -> Any:
        """The Java client's transactional producer (harness.clients.kafka_java), with the
        image of its client version built if it is not yet."""
        from ..backend.images import ensure_images
        from ..clients.kafka_java import JAVA_CLIENT_VERSION, KafkaJavaProducer

        ensure_images(self.cluster.engine, "kafka", JAVA_CLIENT_VERSION)
        if client.transactional_id:
            self.transactional_ids.append(client.transactional_id)
        return KafkaJavaProducer(self.cluster, run_dir, topic, name, client, ready)

    def copier(self, source: str, target: str, out: HistoryWriter, inp: HistoryWriter, client: ClientSpec,
               group: str) -> Any:
        """A copier (harness.clients.kafka.KafkaCopierClient) from ``source`` to ``target``:
        its producer writes ``out``, its read_committed consumer (group ``group``) ``inp``."""
        from ..clients.kafka import (
            KafkaConsumerClient,
            KafkaCopierClient,
            KafkaProducerClient,
            producer_config,
        )

        if client.transactional_id:
            self.transactional_ids.append(client.transactional_id)
        self.groups.append(group)
        producer = KafkaProducerClient(producer_config(self.spec.bootstrap, client), target, out)
        consumer = KafkaConsumerClient(self.spec.bootstrap, source, inp, group=group,
                                       isolation_level="read_committed")
        return KafkaCopierClient(producer, consumer)

    def recovery_read(self, topic: str, history: HistoryWriter, client: ClientSpec,
                      partitions: int) -> dict[str, Any]:
        """Every partition read from the beginning to its high watermark, once the high
        watermark has reached the log end of every in-sync replica (:meth:`readable_ends`):
        the read then holds every record all those replicas hold. A read that ends short of
        the high watermark is a WorkloadError naming the partition, the high watermark and
        the replicas' log ends, never a record reported lost."""
        from ..clients.kafka import KafkaConsumerClient, RecoveryShort

        t0 = time.monotonic()
        ends = self.readable_ends(topic, partitions)
        waited = round(time.monotonic() - t0, 2)
        try:
            stats = KafkaConsumerClient(self.spec.bootstrap, topic, history,
                                        isolation_level=client.isolation_level).read_all(partitions)
        except RecoveryShort as exc:
            raise WorkloadError(f"the recovery read ended short of the high watermark: "
                                f"{exc.describe(topic)}; replicas' log ends: "
                                + "; ".join(f"{topic}-{p}: {ends.get(p, {})}" for p in sorted(exc.short))
                                ) from None
        return {**stats.as_dict(), "log_ends": {str(p): e for p, e in sorted(ends.items())},
                "high_watermark_wait_s": waited}

    def replica_log_end(self, node: Node, topic: str, partition: int) -> int | None:
        """The log end offset of ``node``'s replica of the partition, from its newest segment
        file; None when it has no replica there, or its files cannot be read. A node that is
        down (a broker the recovery left down after its halt) is read from its stopped
        container: a stopped container takes no exec."""
        folder = f"{LOG_DIR}/{topic}-{partition}"
        try:
            if node.container.status == "running":
                code, out = node.container.exec(["ls", folder])
                names = out.split() if code == 0 else []
            else:
                names = [name.rsplit("/", 1)[-1] for name, _ in node.container.get_files(folder)]
            logs = sorted(name for name in names if name.endswith(".log"))
            if not logs:
                return None
            return tail_log_end(node.container.get_files(f"{folder}/{logs[-1]}"))
        except HarnessError:
            return None

    def readable_ends(self, topic: str, partitions: int,
                      timeout: float = RECOVERY_HW_TIMEOUT_S) -> dict[int, dict[str, int | None]]:
        """Waits until each partition's high watermark (the leader's answer) has reached the
        log end offset of every in-sync replica (read from each broker's files, not from a
        client's cache); returns each partition's replicas' log ends. A WorkloadError
        ("acknowledged but unreadable") when a high watermark stays below them for
        ``timeout`` seconds: a record every in-sync replica holds that no reader can read."""
        from ..clients.kafka import KafkaConsumerClient

        nodes = {self.broker_id(n): n for n in self.brokers()}
        ends: dict[int, dict[str, int | None]] = {}
        deadline = time.monotonic() + timeout
        for p in range(partitions):
            state = self.partition_state(topic, p)
            ends[p] = {nodes[b].name: self.replica_log_end(nodes[b], topic, p)
                       for b in state.replicas if b in nodes}
            isr_ends = [ends[p][nodes[b].name] for b in state.isr if b in nodes]
            want = max((e for e in isr_ends if e is not None), default=0)
            while True:
                high = KafkaConsumerClient.high_watermark(self.spec.bootstrap, topic, p)
                if high >= want:
                    break
                if time.monotonic() >= deadline:
                    raise WorkloadError(
                        f"acknowledged but unreadable: {topic}-{p}'s high watermark stayed at {high} "
                        f"for {timeout:.0f}s while its in-sync replicas {sorted(state.isr)} hold up to "
                        f"{want} (log ends {ends[p]})")
                time.sleep(0.5)
        return ends

    def collect_evidence(self, run_dir: Path, evidence: Evidence, topic: str,
                         partitions: int) -> None:
        """Each replica's records, read from its files (``replicas/<node>.jsonl``)."""
        from .kafka_evidence import collect_kafka_replicas

        try:
            collect_kafka_replicas(self.cluster, run_dir, evidence, topic, partitions)
        except HarnessError as exc:
            evidence.problems.append(f"replicas: {exc}")

    def high_watermark(self, topic: str, partition: int) -> int:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.spec.bootstrap,
                             "group.id": "chaos-inject", "log_level": 0})
        try:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=15)
        except KafkaException as exc:
            raise AdminError(f"the high watermark of {topic}-{partition}: {exc}") from exc
        finally:
            consumer.close()
        return int(high)

    def stuck_controller(self, timeout: float) -> str | None:
        """ZooKeeper mode, every broker running: a controller that fails its state changes
        (:meth:`broken_controller`) or does not reach every broker
        (:meth:`controller_problem`); None otherwise (and always in KRaft mode)."""
        if self.spec.mode != "zk":
            return None
        if not all(n.container.status == "running" for n in self.brokers()):
            return None
        return self.broken_controller() or self.controller_problem(timeout=timeout)

    # -- ZooKeeper ------------------------------------------------------------------
    def _zk_get(self, path: str) -> Any:
        raw = zk_call(zk_address(self.spec), path, lambda zk: zk.get(path)[0])
        return json.loads(raw.decode())


def _partition_alone(node: Node, topic: str, partition: int) -> Any:
    """The partition's metadata as ``node`` alone answers it (confluent-kafka's
    PartitionMetadata), or why it did not: a fresh client bootstrapped on this broker
    asks this broker (a long-lived one would ask whichever broker it likes)."""
    from confluent_kafka.admin import AdminClient

    one = AdminClient({"bootstrap.servers": node.spec.endpoint,
                       "socket.timeout.ms": 3000, "log_level": 0,
                       "socket.connection.setup.timeout.ms": 2000})
    try:
        tmd = one.list_topics(topic=topic, timeout=3).topics.get(topic)
    except Exception as exc:
        return f"{node.name}: {exc}"
    if tmd is None or tmd.error is not None or partition not in tmd.partitions:
        return f"{node.name}: {tmd.error if tmd is not None else 'unknown topic'}"
    return tmd.partitions[partition]


def coordinator_partition(key: str, partitions: int) -> int:
    """Kafka's coordinator partition of a transactional id or group: ``Utils.abs(
    key.hashCode()) % partitions`` with Java's ``String.hashCode`` (UTF-16 code units)."""
    h = 0
    data = key.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    signed = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions
