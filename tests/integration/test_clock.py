"""A node's own wall clock on a real cluster: a jump moves what its processes read (a shell's
``date`` and the broker's JVM: the LogAppendTime it stamps), never the host's or another
node's, and a heal sets it back."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from harness.backend.cluster import Cluster, Node
from harness.backend.docker import Engine
from harness.faults import ClockPlan, Nemesis
from harness.systems.kafka import KafkaSystem
from harness.wait import wait_until

pytestmark = [pytest.mark.docker, pytest.mark.kafka]

HOUR = 3600.0


@pytest.fixture(scope="module")
def kafka() -> Iterator[KafkaSystem]:
    cluster = Cluster.named(Engine(), "kafka-kraft", clock="fake")
    try:
        cluster.up(reuse=False)
        system = KafkaSystem(cluster)
        system.wait_ready(timeout=120)
        yield system
    finally:
        cluster.down()


def _date(node: Node) -> float:
    rc, out = node.container.exec(["date", "+%s.%N"])
    assert rc == 0, out
    return float(out.strip())


def _append_time_s(kafka: KafkaSystem, topic: str) -> float:
    """The LogAppendTime the leader stamps on a new record, in seconds."""
    producer = Producer({"bootstrap.servers": kafka.spec.bootstrap, "acks": "all"})
    producer.produce(topic, value=b"tick")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": kafka.spec.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "latest", "enable.auto.commit": False})
    try:
        high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
        consumer.assign([TopicPartition(topic, 0, high - 1)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                return msg.timestamp()[1] / 1000
        raise AssertionError(f"no record read back from {topic}")
    finally:
        consumer.close()


def test_a_jump_moves_one_nodes_clock_for_its_shell_and_its_jvm_and_a_heal_sets_it_back(
        kafka: KafkaSystem) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, 1, 3, {"message.timestamp.type": "LogAppendTime",
                                     "min.insync.replicas": "1"})
    found = wait_until(lambda: kafka.leader(topic), timeout=30, what="a leader")
    assert found is not None
    leader: Node = found
    other = next(n for n in kafka.brokers() if n.name != leader.name)
    nemesis = Nemesis(kafka.cluster)
    assert abs(_append_time_s(kafka, topic) - time.time()) < 5

    nemesis.apply("clock", leader, plan=ClockPlan(jump_s=HOUR))
    assert leader.clock is not None and leader.clock.offset() == HOUR
    wait_until(lambda: abs(_date(leader) - time.time() - HOUR) < 3, timeout=5,
               what=f"{leader.name}'s date an hour ahead")
    assert abs(_date(other) - time.time()) < 3  # another node's clock did not move
    # the broker's JVM reads the moved clock within a second (libfaketime's cache of the offset)
    def ahead() -> float | None:
        stamp = _append_time_s(kafka, topic)
        return stamp if abs(stamp - time.time() - HOUR) < 10 else None

    stamped = wait_until(ahead, timeout=10, what=f"a LogAppendTime an hour ahead from {leader.name}")
    assert stamped is not None
    print(f"{leader.name} an hour ahead: its LogAppendTime is {stamped - time.time():+.1f} s from the host's")

    nemesis.heal()
    assert leader.clock.offset() == 0 and not nemesis.clocked
    wait_until(lambda: abs(_date(leader) - time.time()) < 3, timeout=5, what=f"{leader.name}'s date back")
    wait_until(lambda: abs(_append_time_s(kafka, topic) - time.time()) < 10, timeout=10,
               what=f"a LogAppendTime from {leader.name} at the real time again")
