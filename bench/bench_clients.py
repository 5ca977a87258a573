"""Instrumented clients against plain confluent-kafka loops, on the same cluster.

    python bench/bench_clients.py [--records 200000] [--rounds 3] [--cluster kafka-zk]

Producer: the harness's KafkaProducerClient (invoke + outcome recorded per record)
against the same produce/poll loop with no recording, acks=all, 100-byte values.
Consumer: KafkaConsumerClient.read_all (a polls event per consumed batch) against the
same loop without recording (end offsets, assign, consume until the end, close: both timed
from the consumer's creation). Prints records/s of each and the ratio (target: 0.9 or better).
A third consumer, the floor, runs the plain loop but reads every field the history records
into lists (no parsing, rendering or writing): what any recording consumer pays at least.
Rounds alternate plain and instrumented; the median is reported.

Also printed: the process CPU time per record of each (all threads, librdkafka's
included; from the client's creation to its end) and its ratio, plain/harness: less
sensitive to the load of the moment than the wall clock, which follows it when the
clients are CPU-bound.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from harness.backend.cluster import Cluster
from harness.backend.docker import Engine
from harness.clients.kafka import KafkaConsumerClient, KafkaProducerClient, consumer_config, producer_config
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


def plain_consume(bootstrap: str, topic: str, n: int, fields: bool = False) -> float:
    """The loop of KafkaConsumerClient.read_all, record for record, without the recording:
    the same consumer settings (consumer_config), end offsets first, then consume(1000)
    until the end, close.

    ``fields``: the loop also reads, into lists, every field of a record that the history
    holds (partition, offset, leader epoch, timestamp, key, value) and nothing else: no
    parsing, no rendering, no write. No recording consumer can cost less than this floor."""
    t0 = time.monotonic()
    c = Consumer(consumer_config(bootstrap, uuid.uuid4().hex, extra={"enable.auto.commit": False}))
    _, end = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got, last = 0, -1
    while last + 1 < end and time.monotonic() - t0 < 300:
        msgs = c.consume(1000, 0.5)
        if fields and msgs:
            cols: list[list[Any]] = [[m.error() for m in msgs], [m.partition() for m in msgs],
                    [m.offset() for m in msgs], [m.leader_epoch() for m in msgs],
                    [m.timestamp()[1] for m in msgs], [m.key() for m in msgs],
                    [m.value() for m in msgs]]
            got += cols[0].count(None)
            last = cols[2][-1]
            continue
        for m in msgs:
            if not m.error():
                got += 1
                offset = m.offset()  # never None for a record read without error
                last = last if offset is None else offset
    c.close()
    return got / (time.monotonic() - t0)


def timed(run: Callable[[], float]) -> tuple[float, float]:
    """(what ``run`` returns, process CPU seconds it took)."""
    cpu = time.process_time()
    out = run()
    return out, time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cluster", default="kafka-zk", help="a Kafka cluster name (default kafka-zk)")
    args = ap.parse_args()
    cluster = Cluster.named(Engine(), args.cluster)
    reused = cluster.up()
    kafka = KafkaSystem(cluster)
    kafka.wait_ready()
    kinds = ("plain-produce", "harness-produce", "plain-consume", "fields-consume",
             "harness-consume")
    results: dict[str, list[float]] = {k: [] for k in kinds}
    cpu: dict[str, list[float]] = {k: [] for k in kinds}  # CPU seconds per record
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.rounds):
                topic = f"bench-{uuid.uuid4().hex[:6]}"
                kafka.create_topic(topic, 1, 3)
                rate, secs = timed(partial(plain_produce, cluster.spec.bootstrap, topic, args.records))
                results["plain-produce"].append(rate)
                cpu["plain-produce"].append(secs / args.records)
                with HistoryWriter(Path(tmp) / f"p{r}.jsonl", "p") as hist:
                    def produce(topic: str = topic) -> float:
                        client = KafkaProducerClient(producer_config(cluster.spec.bootstrap),
                                                     topic, hist)
                        return args.records / client.run(count=args.records).seconds
                    rate, secs = timed(produce)
                results["harness-produce"].append(rate)
                cpu["harness-produce"].append(secs / args.records)
                rate, secs = timed(partial(plain_consume, cluster.spec.bootstrap, topic, 2 * args.records))
                results["plain-consume"].append(rate)
                cpu["plain-consume"].append(secs / (2 * args.records))
                rate, secs = timed(partial(plain_consume, cluster.spec.bootstrap, topic,
                                           2 * args.records, fields=True))
                results["fields-consume"].append(rate)
                cpu["fields-consume"].append(secs / (2 * args.records))
                with HistoryWriter(Path(tmp) / f"c{r}.jsonl", "c") as hist:
                    def consume(topic: str = topic) -> float:
                        st = KafkaConsumerClient(cluster.spec.bootstrap, topic, hist).read_all(1)
                        return st.polled / st.seconds
                    rate, secs = timed(consume)
                results["harness-consume"].append(rate)
                cpu["harness-consume"].append(secs / (2 * args.records))
                kafka.delete_topics([topic])
    finally:
        if not reused:
            cluster.down()
    med = {k: statistics.median(v) for k, v in results.items()}
    mcpu = {k: statistics.median(v) * 1e6 for k, v in cpu.items()}
    print(f"records per round: {args.records} (consumer reads {2 * args.records}), rounds: {args.rounds}")
    print(f"{'':10} {'plain rec/s':>12} {'harness rec/s':>14} {'ratio':>6}   "
          f"{'plain cpu us/rec':>16} {'harness cpu us/rec':>18} {'ratio':>6}")
    for kind in ("produce", "consume"):
        p, h = med[f"plain-{kind}"], med[f"harness-{kind}"]
        pc, hc = mcpu[f"plain-{kind}"], mcpu[f"harness-{kind}"]
        print(f"{kind:10} {p:12.0f} {h:14.0f} {h / p:6.2f}   {pc:16.2f} {hc:18.2f} {pc / hc:6.2f}")
    f, fc = med["fields-consume"], mcpu["fields-consume"]
    p, pc = med["plain-consume"], mcpu["plain-consume"]
    print(f"{'(floor)':10} {p:12.0f} {f:14.0f} {f / p:6.2f}   {pc:16.2f} {fc:18.2f} {pc / fc:6.2f}"
          "   <- consume reading every recorded field, recording nothing")


if __name__ == "__main__":
    main()
