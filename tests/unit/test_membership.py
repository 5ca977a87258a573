"""A broker added and one decommissioned: spare nodes held back by a gate until a ``join``
opens it, and a decommission that drains a Kafka broker (every replica it holds moves to a
broker holding none of that partition), stops it cleanly and unregisters it (KRaft)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from harness.backend.cluster import Cluster, Node
from harness.backend.spare import SpareGate, compose_override
from harness.clusters import CLUSTERS
from harness.errors import AdminError, FaultError
from harness.faults import Nemesis
from harness.systems import kafka as kafka_system
from harness.systems.kafka import KafkaSystem, PartitionState
from harness.systems.pulsar import PulsarSystem


def test_spares_are_no_members_of_the_cluster_they_start_with() -> None:
    dynamic, pulsar = CLUSTERS["kafka-kraft-dynamic"], CLUSTERS["pulsar"]
    assert [n.name for n in dynamic.spares] == ["kafka-5"] and [n.name for n in pulsar.spares] == ["broker-3"]
    assert [n.name for n in dynamic.nodes_of("broker")] == ["kafka-1", "kafka-2", "kafka-3"]
    assert "kafka-5" in [n.name for n in dynamic.nodes_of("broker", spares=True)]
    assert "17095" not in dynamic.bootstrap and "26653" not in pulsar.bootstrap
    assert all(not n.spare for n in dynamic.controllers)
    assert not any(n.spare for c in CLUSTERS.values() if c.name not in ("kafka-kraft-dynamic", "pulsar")
                   for n in c.nodes)


def test_a_gate_is_closed_when_made_and_stays_open_once_joined(tmp_path: Path) -> None:
    override = compose_override(tmp_path, ["kafka-5"])
    services = json.loads(override.read_text())["services"]
    assert services == {"kafka-5": {"volumes": [f"{tmp_path / 'kafka-5'}:/chaos-join"],
                                    "environment": {"JOIN_GATE": "/chaos-join/join"}}}
    gate = SpareGate(tmp_path / "kafka-5")
    assert not gate.joined
    gate.open()
    assert gate.joined and SpareGate(tmp_path / "kafka-5").joined  # a restart starts at once
    compose_override(tmp_path, ["kafka-5"])  # a new cluster: closed again
    assert not gate.joined
    with pytest.raises(FileNotFoundError, match="no spare gate"):
        SpareGate(tmp_path / "nowhere").open()


class Container:
    net_persists = False  # a container's network dies with its process

    def __init__(self, events: list[str]) -> None:
        self.status, self.events = "running", events

    def stop(self, timeout: int) -> None:
        self.events.append("stop")
        self.status = "exited"

    def start(self) -> None:
        self.events.append("start")
        self.status = "running"


def _nemesis(*nodes: Any) -> Nemesis:
    spec = SimpleNamespace(name="c", spares=[n.spec for n in nodes if n.gate is not None])
    return Nemesis(cast(Cluster, SimpleNamespace(nodes=lambda: list(nodes), spec=spec)), None)


def test_join_opens_the_gate_then_waits_for_the_system(tmp_path: Path) -> None:
    events: list[str] = []
    gate = SpareGate(tmp_path / "kafka-5").create()
    spare = SimpleNamespace(name="kafka-5", spec=SimpleNamespace(name="kafka-5"), gate=gate,
                            container=Container(events), disk=None)
    member = SimpleNamespace(name="kafka-1", spec=SimpleNamespace(name="kafka-1"), gate=None,
                             container=Container(events), disk=None)
    nemesis = _nemesis(spare, member)

    def wait(node: Node) -> dict[str, Any]:
        assert cast(Any, node).gate.joined  # the process may start only once the gate is open
        return {"broker_id": 5}

    nemesis.apply("join", cast(Node, spare), role="kafka-5", wait=wait)
    assert gate.joined
    with pytest.raises(FaultError, match="kafka-5 has joined already"):
        nemesis.apply("join", cast(Node, spare), wait=wait)
    with pytest.raises(FaultError, match=r"kafka-1 is no spare of cluster c \(spares: kafka-5\)"):
        nemesis.apply("join", cast(Node, member), wait=wait)


def test_a_decommission_drains_stops_retires_and_the_node_stays_out_until_the_cleanup() -> None:
    events: list[str] = []
    node = SimpleNamespace(name="kafka-5", container=Container(events), disk=None, gate=None)
    nemesis = _nemesis(node)

    def part(name: str) -> Any:
        def run(_node: Node) -> dict[str, Any]:
            events.append(name)
            return {name: True}
        return run

    nemesis.apply("decommission", cast(Node, node), role="kafka-5", drain=part("drain"),
                  retire=part("retire"))
    assert events == ["drain", "stop", "retire"] and nemesis.removed == {"kafka-5"} and not nemesis.down
    with pytest.raises(FaultError, match="removed for good"):
        nemesis.apply("start", cast(Node, node))
    assert nemesis.heal_all(start_down=True) == [] and events[-1] == "retire"  # the recovery's heal
    nemesis.heal_all(start_down=True, start_removed=True)  # the cleanup's
    assert events[-1] == "start"


class _Md:
    """confluent-kafka's metadata, enough of it: brokers, topics, partitions' replicas."""

    def __init__(self, brokers: set[int], topics: dict[str, list[list[int]]]) -> None:
        self.brokers = dict.fromkeys(brokers)
        self.topics = {t: SimpleNamespace(topic=t, partitions={i: SimpleNamespace(id=i, replicas=r)
                                                               for i, r in enumerate(parts)})
                       for t, parts in topics.items()}


def _kafka(monkeypatch: pytest.MonkeyPatch, mode: str, md: _Md) -> tuple[KafkaSystem, list[Any]]:
    spec = CLUSTERS["kafka-kraft-dynamic" if mode == "kraft" else "kafka-zk"]
    system = KafkaSystem.__new__(KafkaSystem)
    system.spec, system.removed = spec, set()
    system.admin = cast(Any, SimpleNamespace(list_topics=lambda timeout: md))
    moved: list[Any] = []

    def move(plan: Any, timeout: float) -> dict[Any, Any]:
        moved.append(dict(plan))
        return {}

    monkeypatch.setattr(system, "_move_replicas", move)
    return system, moved


def _node(spec_name: str, cluster: str = "kafka-kraft-dynamic") -> Node:
    spec = CLUSTERS[cluster].node(spec_name)
    return cast(Node, SimpleNamespace(name=spec.name, kind=spec.kind, spec=spec))


def test_a_drain_moves_each_replica_to_the_lowest_broker_without_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    md = _Md({1, 2, 3, 5}, {"case": [[1, 2, 5]], "__consumer_offsets": [[5, 1, 2], [1, 2, 3]]})
    system, moved = _kafka(monkeypatch, "kraft", md)
    detail = system.drain(_node("kafka-5"))
    assert moved == [{("case", 0): [1, 2, 3], ("__consumer_offsets", 0): [3, 1, 2]}]
    assert detail["partitions_moved"] == 2 and detail["broker_id"] == 5


def test_a_drain_refuses_a_combined_node_and_a_partition_no_broker_can_take(
        monkeypatch: pytest.MonkeyPatch) -> None:
    system, moved = _kafka(monkeypatch, "kraft", _Md({1, 2, 3, 5}, {"case": [[1, 2, 3]]}))
    with pytest.raises(FaultError, match="kafka-2 is a combined node"):
        system.drain(_node("kafka-2"))
    system, moved = _kafka(monkeypatch, "zk", _Md({1, 2, 3}, {"case": [[1, 2, 3]]}))
    with pytest.raises(FaultError, match=r"no running broker can take kafka-3's replica of case-0 "
                                         r"\(replicas \[1, 2, 3\]; running \[1, 2\]\)"):
        system.drain(_node("kafka-3", "kafka-zk"))
    assert moved == []


def _until(fn: Any, **_kw: Any) -> Any:
    """wait_until, without the waiting: three tries, then the timeout."""
    for _ in range(3):
        if got := fn():
            return got
    raise AssertionError("never true")


class _Runner:
    def __init__(self, answer: str = "") -> None:
        self.name, self.scripts = "kafka-1", cast(list[str], [])
        self.container = SimpleNamespace(status="running", exec=self.exec)
        self.answer = answer

    def exec(self, cmd: list[str]) -> tuple[int, str]:
        self.scripts.append(cmd[-1])
        return 0, self.answer


@pytest.mark.parametrize(("mode", "name", "gone"), [("kraft", "kafka-5", 5), ("zk", "kafka-3", 3)])
def test_retire_unregisters_in_kraft_only_and_waits_for_the_broker_to_go(
        monkeypatch: pytest.MonkeyPatch, mode: str, name: str, gone: int) -> None:
    system, _ = _kafka(monkeypatch, mode, _Md(set(), {}))
    runner = _Runner()
    monkeypatch.setattr(system, "brokers", lambda: [runner])
    live = iter([{1, 2, 3, 5}, {1, 2, 3, 5} - {gone}])
    monkeypatch.setattr(system, "live_brokers", lambda: next(live))
    monkeypatch.setattr(kafka_system, "wait_until", _until)
    detail = system.retire(_node(name, "kafka-kraft-dynamic" if mode == "kraft" else "kafka-zk"))
    assert system.removed == {name} and next(live, None) is None  # asked until it was gone
    if mode == "kraft":
        assert detail == {"unregistered": 5}
        assert runner.scripts[0].endswith("ClusterTool unregister --bootstrap-server kafka-1:9094 --id 5")
    else:
        assert detail == {} and runner.scripts == []


def test_a_reassignment_waits_for_every_partition_of_its_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    system = KafkaSystem.__new__(KafkaSystem)
    system.spec = CLUSTERS["kafka-kraft-dynamic"]
    system.cluster = cast(Any, SimpleNamespace(version="4.1.2"))
    runner = _Runner("Successfully started")
    monkeypatch.setattr(system, "brokers", lambda: [runner])
    # partition a-0 catches up on the second look, b-1 at once
    seen = {("a", 0): [(1, 2, 4), (1, 2, 3)], ("b", 1): [(3, 1, 2)]}

    def state(topic: str, partition: int) -> PartitionState:
        left = seen[(topic, partition)]
        replicas = left.pop(0) if len(left) > 1 else left[0]
        return PartitionState(topic, partition, 1, replicas, replicas, None)

    monkeypatch.setattr(system, "partition_state", state)
    monkeypatch.setattr(kafka_system, "wait_until", _until)
    done = system._move_replicas({("a", 0): [1, 2, 3], ("b", 1): [3, 1, 2]}, 30)
    assert set(done) == {("a", 0), ("b", 1)} and len(runner.scripts) == 1
    plan = json.loads(runner.scripts[0].split("'")[3])
    assert plan["partitions"] == [{"topic": "a", "partition": 0, "replicas": [1, 2, 3]},
                                  {"topic": "b", "partition": 1, "replicas": [3, 1, 2]}]


def _pulsar(answer: tuple[int, str]) -> tuple[PulsarSystem, list[list[str]]]:
    system = PulsarSystem.__new__(PulsarSystem)
    system.removed = set()
    ran: list[list[str]] = []

    def bookie(name: str) -> Any:
        def run(cmd: list[str]) -> tuple[int, str]:
            ran.append([name, *cmd])
            return answer
        return SimpleNamespace(name=name, kind="bookie", container=SimpleNamespace(
            status="exited" if name == "bookie-2" else "running", exec=run))

    system.bookies = lambda: [bookie(f"bookie-{i}") for i in (1, 2, 3)]  # type: ignore[method-assign]
    return system, ran


def test_a_bookie_is_decommissioned_by_bookkeepers_shell_once_down_and_then_left_out() -> None:
    system, ran = _pulsar((0, "Cookie of the decommissioned bookie: bookie-2:3181 is deleted successfully"))
    node = cast(Node, SimpleNamespace(name="bookie-2", kind="bookie"))
    assert system.drain(node) == {}
    detail = system.retire(node)
    assert detail["decommissioned"] == "bookie-2:3181" and system.removed == {"bookie-2"}
    assert ran[0][:3] == ["bookie-1", "timeout", "300"]
    assert ran[0][-3:] == ["decommissionbookie", "-bookieid", "bookie-2:3181"]
    with pytest.raises(FaultError, match="broker-1 is a pulsar-broker; on Pulsar only a bookie"):
        system.drain(cast(Node, SimpleNamespace(name="broker-1", kind="pulsar-broker")))
    system._zk = lambda fn, what: False  # type: ignore[method-assign]
    system.forget_node(node)  # a new bookie at its address: a member again
    assert system.removed == set()


def test_a_decommission_that_never_finishes_names_autorecovery() -> None:
    system, _ = _pulsar((124, ""))
    with pytest.raises(AdminError, match=r"not done in 300 s \(is AutoRecovery running\? "
                                         r"bookie.autoRecoveryDaemonEnabled\)"):
        system.retire(cast(Node, SimpleNamespace(name="bookie-2", kind="bookie")))
    assert system.removed == set()


def test_a_replace_brings_back_a_removed_node_as_a_new_machine(tmp_path: Path) -> None:
    events: list[str] = []
    disk = SimpleNamespace(wipe=lambda: 7)
    node = SimpleNamespace(name="bookie-2", container=Container(events), disk=disk, gate=None)
    node.container.status = "exited"
    nemesis = _nemesis(node)
    nemesis.removed.add("bookie-2")
    nemesis.apply("replace", cast(Node, node), forget=lambda n: {"cookie_removed": None})
    assert events == ["start"] and nemesis.removed == set()
