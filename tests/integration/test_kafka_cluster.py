"""Real Kafka clusters (ZooKeeper mode and KRaft) under the fault primitives.

Each module-scoped cluster is started by this process and removed at the end,
also on failure. ``replica.lag.time.max.ms`` is lowered to 5 s so a paused
follower leaves the ISR quickly.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

from harness.backend.cluster import Cluster, Node
from harness.backend.docker import Engine
from harness.clients.kafka import KafkaConsumerClient, KafkaProducerClient, producer_config
from harness.faults import Effects, Nemesis
from harness.history import HistoryWriter, read_events
from harness.systems.kafka import PROBE_PREFIX, KafkaSystem
from harness.wait import wait_until

pytestmark = [pytest.mark.docker, pytest.mark.kafka]

LAG_MS = 5000
ZK_SESSION_S = 6.0  # zookeeper.session.timeout.ms of the images (compose/images/kafka)


@pytest.fixture(scope="module", params=["kafka-zk", "kafka-kraft"])
def kafka(request: pytest.FixtureRequest) -> Iterator[KafkaSystem]:
    cluster = Cluster.named(Engine(), request.param,
                            broker_config={"replica.lag.time.max.ms": str(LAG_MS)})
    t0 = time.monotonic()
    try:
        cluster.up()
        system = KafkaSystem(cluster)
        system.wait_ready(timeout=120)
        print(f"{request.param} ready in {time.monotonic() - t0:.1f}s")
        yield system
    finally:
        cluster.down()


@pytest.fixture
def nemesis(kafka: KafkaSystem) -> Iterator[Nemesis]:
    nem = Nemesis(kafka.cluster)
    nem.before_start = kafka.before_start  # as a run's nemesis
    yield nem
    assert not nem.heal_all(), "heal_all reported problems"
    kafka.wait_ready(timeout=120)


def _topic(kafka: KafkaSystem, partitions: int = 1) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(name, partitions, 3, {"min.insync.replicas": "2"})
    return name


# ZooKeeper mode's run of this test is the default case's path (cases/kafka/zk-kill-leader.yaml:
# kill -9 of the leader under load, its restart, every acknowledged record read back), which CI
# runs: left to the full matrix (`bin/test -m full_matrix`) to keep CI within its budget.
@pytest.mark.parametrize("kafka", [pytest.param("kafka-zk", marks=pytest.mark.full_matrix), "kafka-kraft"],
                         indirect=True)
def test_produce_consume_kill_leader_and_restart(kafka: KafkaSystem, nemesis: Nemesis,
                                                 tmp_path) -> None:
    topic = _topic(kafka)
    with HistoryWriter(tmp_path / "p0.jsonl", "p0") as hist:
        producer = KafkaProducerClient(producer_config(kafka.spec.bootstrap), topic, hist)
        stats = producer.run(count=10_000)
    assert stats.ok == 10_000, stats
    with HistoryWriter(tmp_path / "c0.jsonl", "c0") as hist:
        read = KafkaConsumerClient(kafka.spec.bootstrap, topic, hist).read_all(1)
    assert read.polled == 10_000
    mids = {e["mid"] for e in read_events(tmp_path / "c0.jsonl") if e["type"] == "poll"}
    assert mids == {f"p0-{i}" for i in range(1, 10_001)}

    before = kafka.partition_state(topic)
    old = kafka.leader(topic)
    assert old is not None
    nemesis.kill9(old)
    after = wait_until(lambda: (s := kafka.partition_state(topic)).leader not in (-1, before.leader)
                       and len(s.isr) == 2 and s, timeout=60, what="a new leader and ISR of 2")
    if kafka.spec.mode == "zk":
        assert after.epoch is not None and before.epoch is not None and after.epoch > before.epoch
    assert kafka.broker_id(old) not in after.isr

    # The killed broker's log, read from its files while it is down, kept every record.
    survived = kafka.replica_log(old, topic)
    assert max(r.offset for r in survived) + 1 == 10_000
    assert {r.mid for r in survived} == mids

    nemesis.start(old)
    wait_until(lambda: len(kafka.partition_state(topic).isr) == 3, timeout=90,
               what=f"{old.name} back in the ISR")


def test_paused_follower_leaves_and_rejoins_isr(kafka: KafkaSystem, nemesis: Nemesis,
                                                tmp_path) -> None:
    topic = _topic(kafka)
    follower = kafka.followers(topic)[0]
    fid = kafka.broker_id(follower)
    t0 = time.monotonic()  # before the pause: Kafka's lag clock starts at the last fetch before it
    nemesis.pause(follower)
    with HistoryWriter(tmp_path / "p0.jsonl", "p0") as hist:
        producer = KafkaProducerClient(producer_config(kafka.spec.bootstrap), topic, hist)
        # keep appending so the follower falls behind; bounded in count and time
        wait_until(lambda: producer.send_one() and fid not in kafka.partition_state(topic).isr,
                   timeout=60, what=f"{follower.name} out of the ISR")
        left_after = time.monotonic() - t0
        assert left_after >= LAG_MS / 1000 * 0.8
        nemesis.resume(follower)
        wait_until(lambda: producer.send_one() and fid in kafka.partition_state(topic).isr,
                   timeout=60, what=f"{follower.name} back in the ISR")
        producer.drain(30)


def test_partitioned_leader_loses_leadership_then_converges(kafka: KafkaSystem, nemesis: Nemesis) -> None:
    topic = _topic(kafka)
    old = kafka.leader(topic)
    assert old is not None
    old_id = kafka.broker_id(old)
    nemesis.partition(old)
    wait_until(lambda: kafka.partition_state(topic).leader not in (-1, old_id), timeout=90,
               what=f"leadership to move away from partitioned {old.name}")
    nemesis.heal(old)
    wait_until(lambda: len(kafka.partition_state(topic).isr) == 3, timeout=120,
               what="the ISR to return to 3 after heal")


# ZooKeeper mode: cases/kafka/controller-kill.yaml[zk] kills the controller under load and awaits
# a new one at a higher epoch, which CI runs; left to the full matrix (CI's budget).
@pytest.mark.parametrize("kafka", [pytest.param("kafka-zk", marks=pytest.mark.full_matrix), "kafka-kraft"],
                         indirect=True)
def test_kill_controller_moves_controller(kafka: KafkaSystem, nemesis: Nemesis) -> None:
    before = kafka.controller()
    node = kafka.cluster.node(kafka.node_name(before.broker))
    nemesis.kill9(node)
    after = wait_until(lambda: (c := kafka.controller()).broker not in (-1, before.broker) and c,
                       timeout=90, what="another controller")
    assert after.broker != before.broker
    if kafka.spec.mode == "zk":
        # shared/seeds/001: a new controller increments /controller_epoch by one
        assert after.epoch == before.epoch + 1  # type: ignore[operator]
    else:
        assert after.epoch is not None and before.epoch is not None and after.epoch > before.epoch


def test_controller_probe_names_a_broker_that_does_not_take_leader_and_isr(
        kafka: KafkaSystem, nemesis: Nemesis) -> None:
    if kafka.spec.mode != "zk":
        assert kafka.controller_problem() is None  # KRaft: no ZooKeeper controller to get stuck
        return
    assert kafka.controller_problem() is None
    # a frozen broker cannot create the probe's log: the same symptom as a broker that
    # rejects a stale controller's LeaderAndIsr. The freeze must stay shorter than its ZK
    # session (6 s): longer, and the broker registers again with a new epoch on its resume,
    # which can leave 3.9's controller on the old one (the next probe then fails). A probe
    # of 4 s froze the broker for 6.2 s (the topic's creation and the log checks around
    # the wait), and a CI run failed that way; a probe of 1 s freezes it for about 2 s.
    ctl = kafka.controller().broker
    frozen = next(n for n in kafka.brokers() if n.spec.node_id != ctl)
    nemesis.pause(frozen)
    t0 = time.monotonic()
    problem = kafka.controller_problem(timeout=1)
    nemesis.resume(frozen)
    frozen_s = time.monotonic() - t0
    print(f"{frozen.name} frozen for {frozen_s:.2f}s")
    assert problem is not None and frozen.name in problem
    assert frozen_s < ZK_SESSION_S, f"{frozen.name} was frozen {frozen_s:.1f}s, past its ZooKeeper session"
    # the failed probe's topic stays (a forced election must not find its deletion in
    # flight); the next probe that passes deletes it with its own
    assert kafka.controller_problem() is None
    wait_until(lambda: not [t for t in kafka.admin.list_topics(timeout=10).topics
                            if t.startswith(PROBE_PREFIX)],
               timeout=60, what="no probe topic left")


# KRaft mode's run of this test (no wait) is left to the full matrix to keep CI within its
# budget: its ZooKeeper run is the one with a wait to check, and other KRaft tests restart
# killed brokers at once.
@pytest.mark.parametrize("kafka", ["kafka-zk", pytest.param("kafka-kraft", marks=pytest.mark.full_matrix)],
                         indirect=True)
def test_a_broker_started_right_after_its_kill_waits_out_its_old_session(
        kafka: KafkaSystem, nemesis: Nemesis) -> None:
    """ZooKeeper mode: started at once after kill -9, a 3.9.2 broker finds its killed self's
    registration and stops ("NodeExists"); the start gate waits until ZooKeeper has expired
    that session (6 s here). KRaft mode: no such wait."""
    node = next(n for n in kafka.brokers() if n.spec.node_id != kafka.controller().broker)
    nemesis.kill9(node)
    waited = nemesis.start(node)
    if kafka.spec.mode == "zk":
        assert waited is not None and 1.0 <= waited["waited_for_old_session_s"] <= 30.0
    else:
        assert waited is None
    time.sleep(10)  # a broker that found its old registration has exited by now
    assert node.container.status == "running"
    kafka.wait_ready(timeout=90)
    # a restart this soon can leave 3.9.2's controller on the broker's old epoch (the
    # brokers then reject its LeaderAndIsr: harness.run.recovery.wait_unsticking); the
    # tests after this one get the cluster as a reused cluster must be
    problem = kafka.reuse_problem()
    if problem is not None:
        print(f"after the restart: {problem}; {kafka.reuse_remedy(problem)}")
        kafka.wait_ready(timeout=90)


def _transfer_s(src: Node, dst: Node, size: int = 2_000_000) -> float:
    """Seconds to send ``size`` bytes from ``src`` to ``dst`` over a new TCP connection (nc)."""
    rc, out = dst.container.exec(["sh", "-c", "(timeout 90 nc -l 9999 >/dev/null 2>&1 &)"])
    assert rc == 0, out
    time.sleep(0.5)
    t0 = time.monotonic()
    rc, out = src.container.exec(["sh", "-c", f"head -c {size} /dev/zero | timeout 90 nc -q 1 "
                                              f"{dst.container.ip()} 9999"])
    assert rc == 0, f"nc from {src.name} to {dst.name}: {out}"
    return time.monotonic() - t0


# ZooKeeper mode: the same kernel calls in the same kind of container; left to the full matrix.
@pytest.mark.parametrize("kafka", [pytest.param("kafka-zk", marks=pytest.mark.full_matrix), "kafka-kraft"],
                         indirect=True)
def test_degrade_limits_the_rate_drops_packets_and_heals(kafka: KafkaSystem, nemesis: Nemesis) -> None:
    """A ``degrade`` from one broker to another: 2 MB at 4 Mbit/s take at least 3.5 s (a few
    ms before and after), the loss rule drops packets (its counter), and a heal removes both;
    a delay of 300 ms (the queue in user space) slows a 1 KB transfer by as much, and its
    heal stops the delayer, which reports the packets it held."""
    a, b = kafka.brokers()[:2]
    base = _transfer_s(a, b)
    nemesis.apply("degrade", a, peers=[b], direction="out", effects=Effects(rate_bps=4e6, loss_pct=5))
    pid = a.container.pid
    assert "htb" in subprocess.run(["nsenter", "-t", str(pid), "-n", "tc", "qdisc", "show"],
                                   capture_output=True, text=True, check=True).stdout
    slow = _transfer_s(a, b)
    chain = subprocess.run(["nsenter", "-t", str(pid), "-n", "iptables", "-L", "CHAOS", "-v", "-x", "-n"],
                           capture_output=True, text=True, check=True).stdout
    dropped = sum(int(line.split()[0]) for line in chain.splitlines()[2:] if "statistic" in line)
    nemesis.heal(a)
    healed = _transfer_s(a, b)
    print(f"2 MB {a.name} -> {b.name}: {base:.2f} s, degraded {slow:.2f} s ({dropped} packets "
          f"dropped), healed {healed:.2f} s")
    assert slow >= 3.5 and base < 2.0 and healed < 2.0
    assert dropped > 0
    assert "htb" not in subprocess.run(["nsenter", "-t", str(pid), "-n", "tc", "qdisc", "show"],
                                       capture_output=True, text=True, check=True).stdout
    nemesis.apply("degrade", a, peers=[b], direction="out",
                  effects=Effects(delay_ms=300, jitter_ms=50, duplicate_pct=10))
    shaping = nemesis.shaped[a.name]
    delayed = _transfer_s(a, b, size=1000)
    nemesis.heal(a)
    after = _transfer_s(a, b, size=1000)
    print(f"1 KB {a.name} -> {b.name}: delayed 300 +- 50 ms {delayed:.2f} s, healed {after:.2f} s; "
          f"delayer {shaping.counts}")
    assert delayed - after >= 0.25 and after < 2.0  # nc itself takes a second (-q 1)
    assert shaping.counts["held"] > 0 and shaping.delayer is None and not shaping.counts.get("error")
