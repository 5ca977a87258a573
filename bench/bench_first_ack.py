"""How long a producer's first acknowledgement takes on a kafka-zk cluster, by setting:
idempotence on or off, a topic created just before or 5 s before (issue 16: why the
default case's first second of sends is acknowledged only after about 1 s).

    python bench/bench_first_ack.py [--reps 3]

Each measurement: a fresh topic (1 partition, RF 3, min ISR 2), a fresh confluent-kafka
producer (acks=all), one record, the time from the produce call to its delivery report.
Traffic stays between this process and the cluster's containers (loopback ports).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.backend.cluster import Cluster  # noqa: E402
from harness.backend.docker import Engine  # noqa: E402
from harness.clients.kafka import producer_config  # noqa: E402
from harness.systems.kafka import KafkaSystem  # noqa: E402


def first_ack(kafka: KafkaSystem, bootstrap: str, idempotence: bool, age_s: float) -> float | None:
    from confluent_kafka import Producer

    name = f"first-ack-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(name, 1, 3, {"min.insync.replicas": "2"})
    time.sleep(age_s)
    producer = Producer({**producer_config(bootstrap), "acks": "all", "enable.idempotence": idempotence})
    acked: list[float] = []
    t0 = time.monotonic()
    producer.produce(name, b"x", on_delivery=lambda err, msg: acked.append(time.monotonic()) if err is None
                     else None)
    producer.flush(30)
    kafka.delete_topics([name])
    return (acked[0] - t0) * 1000 if acked else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    cluster = Cluster.named(Engine(), "kafka-zk")
    load = os.getloadavg()[0]
    reused = cluster.up()
    try:
        kafka = KafkaSystem(cluster)
        kafka.wait_ready()
        print(f"kafka-zk ({cluster.version}), {os.cpu_count()} cores, load {load:.2f}")
        for idempotence in (True, False):
            for age in (0.0, 5.0):
                got = [first_ack(kafka, cluster.spec.bootstrap, idempotence, age) for _ in range(args.reps)]
                shown = ", ".join("-" if g is None else f"{g:.0f} ms" for g in got)
                setting = f"idempotence {'on ' if idempotence else 'off'}, topic {age:.0f} s old"
                print(f"{setting}: first ack {shown}")
    finally:
        if not reused:
            cluster.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
