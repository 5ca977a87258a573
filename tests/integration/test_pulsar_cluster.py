"""A real Pulsar cluster (ZooKeeper, 3 bookies, 2 brokers) under the fault primitives.

The cluster is the session's (the plugin's ``pulsar_cluster``: reused if one of this
session is running, removed when the session ends, also on failure), so the Java
producer's tests and the Pulsar cases that follow need no cluster of their own; each
fault test heals what it did and waits for a ready cluster. The harness reaches the
brokers on their ``external`` listener (127.0.0.1); ledgers use ensemble/write/ack 2/2/2,
so one bookie is spare. Every produce and consume loop is bounded in count and in time.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from harness.backend.cluster import Node
from harness.faults import Nemesis
from harness.systems.pulsar import PulsarSystem
from harness.wait import wait_until

if TYPE_CHECKING:
    import pulsar as pulsar_client
else:
    pulsar_client = pytest.importorskip("pulsar")

pytestmark = [pytest.mark.docker, pytest.mark.pulsar]

_CLIENT_LOG = logging.getLogger("pulsar-client")
_CLIENT_LOG.setLevel(logging.WARNING)


@pytest.fixture(scope="module")
def pulsar(pulsar_cluster: PulsarSystem) -> PulsarSystem:
    return pulsar_cluster


@pytest.fixture
def client(pulsar: PulsarSystem) -> Iterator[pulsar_client.Client]:
    c = pulsar_client.Client(pulsar.spec.bootstrap, listener_name="external",
                             operation_timeout_seconds=20, connection_timeout_ms=5000,
                             logger=_CLIENT_LOG)
    yield c
    c.close()


@pytest.fixture
def nemesis(pulsar: PulsarSystem) -> Iterator[Nemesis]:
    nem = Nemesis(pulsar.cluster)
    yield nem
    assert not nem.heal_all(), "heal_all reported problems"
    pulsar.wait_ready(timeout=120)


def _topic(pulsar: PulsarSystem, **kwargs: object) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    pulsar.create_topic(name, **kwargs)  # type: ignore[arg-type]
    return name


def _subscribe(client: pulsar_client.Client, topic: str) -> pulsar_client.Consumer:
    return client.subscribe(PulsarSystem.topic_name(topic), "check",
                            initial_position=pulsar_client.InitialPosition.Earliest)


def _send(producer: pulsar_client.Producer, prefix: str, count: int, *, timeout: float,
          tolerate_errors: bool = False) -> list[bytes]:
    """Sends up to ``count`` messages one by one within ``timeout`` s; returns the acked ones."""
    acked: list[bytes] = []
    deadline = time.monotonic() + timeout
    for i in range(count):
        if time.monotonic() > deadline:
            break
        value = f"{prefix}-{i}".encode()
        try:
            producer.send(value)
        except Exception:  # a send timeout while the topic moves: not acked, maybe written
            if not tolerate_errors:
                raise
            continue
        acked.append(value)
    return acked


def _read_all(consumer: pulsar_client.Consumer, want: set[bytes], *, timeout: float,
              limit: int = 100_000) -> set[bytes]:
    """Receives until every value of ``want`` was seen, ``limit`` messages, or ``timeout`` s."""
    seen: set[bytes] = set()
    deadline = time.monotonic() + timeout
    for _ in range(limit):
        if want <= seen or time.monotonic() > deadline:
            break
        try:
            msg = consumer.receive(timeout_millis=2000)
        except Exception:  # receive timeout: keep polling until the deadline
            continue
        seen.add(msg.data())
        consumer.acknowledge(msg)
    return seen


def test_produce_and_consume(pulsar: PulsarSystem, client: pulsar_client.Client) -> None:
    topic = _topic(pulsar)
    consumer = _subscribe(client, topic)
    producer = client.create_producer(PulsarSystem.topic_name(topic), send_timeout_millis=30_000,
                                      batching_enabled=True, batching_max_publish_delay_ms=5,
                                      block_if_queue_full=True)  # 2,000 > the 1,000 pending default
    values = [f"m-{i}".encode() for i in range(2_000)]
    acked: list[bytes] = []
    for v in values:
        producer.send_async(v, lambda res, _id, v=v: acked.append(v)
                            if res == pulsar_client.Result.Ok else None)
    producer.flush()
    wait_until(lambda: len(acked) == len(values), timeout=60, what="2,000 acks")
    producer.close()
    seen = _read_all(consumer, set(values), timeout=60)
    assert seen == set(values)
    consumer.close()
    # partition 0 of a non-partitioned topic is the topic itself (as for the role resolver)
    assert pulsar.owner(topic, 0).name == pulsar.owner(topic).name


def test_topic_policies_and_unload(pulsar: PulsarSystem) -> None:
    topic = _topic(pulsar, partitions=2, ensemble=3, write_quorum=2, ack_quorum=2,
                   deduplication=True)
    for p in range(2):
        ledger = pulsar.current_ledger(topic, p)
        assert (ledger.ensemble_size, ledger.write_quorum, ledger.ack_quorum) == (3, 2, 2)
        assert len(ledger.current_ensemble) == 3
    old = pulsar.owner(topic, 0)
    new = pulsar.unload(topic, 0)
    assert new.name != old.name and pulsar.owner(topic, 0).name == new.name
    pulsar.delete_topics([topic])
    assert PulsarSystem.topic_name(topic) not in pulsar.topics()


# CI runs cases/pulsar/ensemble-change-kill-owner.yaml and ack-quorum-kill-owner.yaml, which kill
# the owner under load and await the topic on the other broker: left to the full matrix.
@pytest.mark.full_matrix
def test_kill_owner_broker_moves_topic(pulsar: PulsarSystem, client: pulsar_client.Client,
                                       nemesis: Nemesis) -> None:
    topic = _topic(pulsar)
    consumer = _subscribe(client, topic)
    producer = client.create_producer(PulsarSystem.topic_name(topic), send_timeout_millis=30_000,
                                      batching_enabled=False)
    before = _send(producer, "before", 200, timeout=60)
    assert len(before) == 200
    old = pulsar.owner(topic)
    survivor = pulsar.non_owner(topic)

    nemesis.kill9(old)
    t0 = time.monotonic()
    # the dead broker's ownership lasts until its ZooKeeper session expires (15 s)
    new = wait_until(lambda: (o := pulsar.owner(topic)).name != old.name and o, timeout=90,
                     what=f"{topic} owned by a broker other than the killed {old.name}")
    assert isinstance(new, Node) and new.name == survivor.name
    after = _send(producer, "after", 200, timeout=120, tolerate_errors=True)
    print(f"owner {old.name} -> {new.name} in {time.monotonic() - t0:.1f}s; "
          f"{len(after)}/200 sends acked after the kill")
    assert len(after) >= 150, f"production did not resume: {len(after)} acked"
    producer.close()

    # every acknowledged message survived the failover (duplicates allowed)
    want = set(before) | set(after)
    seen = _read_all(consumer, want, timeout=60)
    assert want <= seen, f"{len(want - seen)} acknowledged messages lost"
    consumer.close()

    nemesis.start(old)
    wait_until(lambda: pulsar.broker_healthy(old), timeout=120, what=f"{old.name} healthy again")


def test_kill_ensemble_bookie_replaces_it(pulsar: PulsarSystem, client: pulsar_client.Client,
                                          nemesis: Nemesis) -> None:
    topic = _topic(pulsar, ensemble=2, write_quorum=2, ack_quorum=2)  # the brokers' default
    consumer = _subscribe(client, topic)
    producer = client.create_producer(PulsarSystem.topic_name(topic), send_timeout_millis=30_000,
                                      batching_enabled=False)
    before = _send(producer, "before", 100, timeout=60)
    assert len(before) == 100
    ledger = pulsar.current_ledger(topic)
    assert (ledger.ensemble_size, ledger.write_quorum, ledger.ack_quorum) == (2, 2, 2)
    ensemble = [n.name for n in pulsar.ledger_ensemble(topic)]
    spare = [b.name for b in pulsar.bookies() if b.name not in ensemble]
    assert len(ensemble) == 2 and len(spare) == 1
    victim = pulsar.cluster.node(ensemble[0])

    nemesis.kill9(victim)
    # writes continue: the ensemble change puts the spare bookie in the victim's place
    after = _send(producer, "after", 200, timeout=90)
    assert len(after) == 200
    replaced = wait_until(lambda: (e := [n.name for n in pulsar.ledger_ensemble(topic)])
                          and victim.name not in e and e, timeout=60,
                          what=f"a ledger ensemble without the killed {victim.name}")
    assert replaced and set(replaced) == {ensemble[1], spare[0]}, replaced
    print(f"ensemble {ensemble} -> {replaced}: {pulsar.current_ledger(topic).as_event()}")
    producer.close()

    want = set(before) | set(after)
    seen = _read_all(consumer, want, timeout=60)
    assert want <= seen, f"{len(want - seen)} acknowledged messages lost"
    consumer.close()

    nemesis.start(victim)
    wait_until(lambda: f"{victim.name}:3181" in pulsar.live_bookies(), timeout=90,
               what=f"{victim.name} registered again")
