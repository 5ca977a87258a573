"""Instrumented clients against plain confluent-kafka loops, on the same cluster.

    python bench/bench_clients.py [--records 200000] [--rounds 3] [--cluster kafka-zk]

Producer: the harness's KafkaProducerClient (invoke + outcome recorded per record)
against the same produce/poll loop with no recording, acks=all, 100-byte values.
Consumer: KafkaConsumerClient.read_all (a poll event per record) against the same
loop without recording (end offsets, assign, consume until the end, close: both timed
from the consumer's creation). Prints records/s of each and the ratio (target: 0.9 or better).
Rounds alternate plain and instrumented; the median is reported.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from harness.backend.cluster import Cluster
from harness.backend.docker import Engine
from harness.clients.kafka import KafkaConsumerClient, KafkaProducerClient, producer_config
from harness.history import HistoryWriter, make_value
from harness.systems.kafka import KafkaSystem


def plain_produce(bootstrap: str, topic: str, n: int) -> float:
    producer = Producer(producer_config(bootstrap))
    t0 = time.monotonic()
    for i in range(n):
        while True:
            try:
                producer.produce(topic, make_value(f"x-{i}", 100), on_delivery=lambda e, m: None)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(120)
    return n / (time.monotonic() - t0)


def plain_consume(bootstrap: str, topic: str, n: int) -> float:
    """The loop of KafkaConsumerClient.read_all, record for record, without the recording:
    the same consumer settings, end offsets first, then consume(1000) until the end, close."""
    t0 = time.monotonic()
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": "read_uncommitted", "enable.partition.eof": False})
    _, end = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got, last = 0, -1
    while last + 1 < end and time.monotonic() - t0 < 300:
        for m in c.consume(1000, 0.5):
            if not m.error():
                got += 1
                last = m.offset()
    c.close()
    return got / (time.monotonic() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cluster", default="kafka-zk", help="a Kafka cluster name (default kafka-zk)")
    args = ap.parse_args()
    cluster = Cluster.named(Engine(), args.cluster)
    reused = cluster.up(lambda m: None)
    kafka = KafkaSystem(cluster)
    kafka.wait_ready()
    results: dict[str, list[float]] = {"plain-produce": [], "harness-produce": [],
                                       "plain-consume": [], "harness-consume": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.rounds):
                topic = f"bench-{uuid.uuid4().hex[:6]}"
                kafka.create_topic(topic, 1, 3)
                results["plain-produce"].append(plain_produce(cluster.spec.bootstrap, topic, args.records))
                with HistoryWriter(Path(tmp) / f"p{r}.jsonl", "p") as hist:
                    client = KafkaProducerClient(producer_config(cluster.spec.bootstrap), topic, hist)
                    stats = client.run(count=args.records)
                results["harness-produce"].append(args.records / stats.seconds)
                results["plain-consume"].append(plain_consume(cluster.spec.bootstrap, topic, 2 * args.records))
                with HistoryWriter(Path(tmp) / f"c{r}.jsonl", "c") as hist:
                    st = KafkaConsumerClient(cluster.spec.bootstrap, topic, hist).read_all(1)
                results["harness-consume"].append(st.polled / st.seconds)
                kafka.delete_topics([topic])
    finally:
        if not reused:
            cluster.down()
    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"records per round: {args.records} (consumer reads {2 * args.records}), rounds: {args.rounds}")
    print(f"{'':10} {'plain rec/s':>12} {'harness rec/s':>14} {'ratio':>6}")
    for kind in ("produce", "consume"):
        p, h = med[f"plain-{kind}"], med[f"harness-{kind}"]
        print(f"{kind:10} {p:12.0f} {h:14.0f} {h / p:6.2f}")


if __name__ == "__main__":
    main()
