"""A real KRaft cluster on lazy disks: a follower's power loss drops what it had not fsynced
(its log segments' unsynced tails among them), replication restores it, and removing the
cluster unmounts every disk."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.backend.cluster import Cluster
from harness.backend.docker import Engine
from harness.backend.lazyfs import DISKS_DIR
from harness.clients.kafka import KafkaConsumerClient, KafkaProducerClient, producer_config
from harness.faults import Nemesis
from harness.history import HistoryWriter, read_events
from harness.systems.kafka import KafkaSystem
from harness.wait import wait_until

pytestmark = [pytest.mark.docker, pytest.mark.kafka]


@pytest.fixture(scope="module")
def lazy_kafka() -> Iterator[KafkaSystem]:
    cluster = Cluster.named(Engine(), "kafka-kraft", disk="lazy")
    try:
        cluster.up()
        system = KafkaSystem(cluster)
        system.wait_ready(timeout=120)
        yield system
    finally:
        cluster.down()
    homes = [DISKS_DIR / cluster.project / n.name for n in cluster.spec.nodes]
    assert not any(h.exists() for h in homes), "a lazy disk outlived its cluster"


def test_a_follower_power_loss_drops_its_unsynced_tail_and_replication_restores_it(
        lazy_kafka: KafkaSystem, tmp_path: Path) -> None:
    kafka = lazy_kafka
    nodes = kafka.cluster.nodes()
    assert all(n.disk is not None and os.path.ismount(n.disk.mount) for n in nodes)
    topic = f"t-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    with HistoryWriter(tmp_path / "p0.jsonl", "p0") as hist:
        stats = KafkaProducerClient(producer_config(kafka.spec.bootstrap), topic, hist).run(count=2_000)
    assert stats.ok == 2_000, stats
    follower = kafka.followers(topic, 0)[0]
    assert follower.disk is not None

    nem = Nemesis(kafka.cluster)
    cut = nem.powerloss(follower, lambda n: n.disk.lose())  # type: ignore[union-attr]

    segment = [f for f in cut["files"] if f"/kafka/{topic}-0/" in f["file"] and f["file"].endswith(".log")]
    assert segment and segment[0]["size"] > segment[0]["synced_size"], cut["files"]
    assert cut["bytes_lost"] >= segment[0]["size"] - segment[0]["synced_size"]
    nem.start(follower)
    wait_until(lambda: kafka.isr_size(topic, 0) == 3, timeout=120, what="the follower back in the ISR")
    with HistoryWriter(tmp_path / "c0.jsonl", "c0") as hist:
        KafkaConsumerClient(kafka.spec.bootstrap, topic, hist).read_all(1)
    mids = {e["mid"] for e in read_events(tmp_path / "c0.jsonl") if e["type"] == "poll"}
    assert mids == {f"p0-{i}" for i in range(1, 2_001)}
