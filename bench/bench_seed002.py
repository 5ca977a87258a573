"""Seed 002's Kafka benchmark on the harness's cluster: the instrumented clients beside
Kafka's own tools, on the same cluster, row by row.

    python bench/bench_seed002.py [--records 200000] [--cluster kafka-zk] [--disk plain|lazy] [--rows ...]
                                  [--sizes] [--reps 1] [--fault] [--html reports/bench-seed002.html]

Rows (seed 002, "Benchmarking Apache Kafka", scaled to ``--records``; 100-byte records,
topics of 6 partitions):

  p1-rf1     one producer, no replication (RF 1), acks=1
  p1-rf3     one producer, RF 3, acks=1 ("3x async")
  p1-rf3-all one producer, RF 3, acks=all ("3x sync")
  p3-rf3     three producers at once, RF 3, acks=1 (their records/s summed)
  c1         one consumer reading the RF 3 topic from the start
  c3         three consumers of one group reading it (summed)
  e2e        end-to-end latency: send one record, wait until it is read, repeat (acks=1)

Harness side: the instrumented clients of harness/clients/kafka.py, writing their history
to a temporary file (KafkaProducerClient.run; KafkaConsumerClient.read_all and .run); three
producers or consumers are three threads of this process (one Python: they share a GIL).
Tool side: Kafka's ProducerPerformance, ConsumerPerformance and EndToEndLatency
(``java -cp '/opt/kafka/libs/*' org.apache.kafka.tools.<Tool>``) in helper containers of the
broker image on the cluster's network, three containers at once for p3/c3. Both producers
use acks as the row says, linger.ms=5 (librdkafka's default; the Java producer's is 5
from 4.0, 0 before) and batches of up to 1,000,000 bytes (librdkafka's default
``batch.size``; the Java producer's is 16,384: ``--java-batch-bytes 16384`` for it); other
settings are each client's defaults.

Figures: records/s from the first send to the last acknowledgement (the tools' own count,
and for the harness the client's run time including its final flush); MB/s as 2^20 bytes
per second of record values (as the tools print them); latencies in ms. ``--sizes`` adds
the message-size sweep (10 B to 100 KB, one producer, RF 3, acks=1; each step at most
``--sweep-mb`` MB), printed and drawn (records/s and MB/s against size, seed 002's
figures 04 and 05) in the HTML page. ``--reps N`` runs each row N times (each side in
turn, a fresh topic each time) and prints the medians, with the spread of records/s.
``--fault`` adds a row with a fault in the middle: acks=all at ``--fault-rate`` records/s
for ``--fault-seconds``, the broker leading partition 0 killed -9 at a third and started at
two thirds, each side in turn; per phase (before, during, after) the acknowledged
records/s and latency: the harness's send-to-ack p50/p99/max from its history, the tool's
5-s lines (the mean of their averages and the largest maximum, all ProducerPerformance
prints per window), placed by Docker's time stamps. Then the end-to-end loop (acks=all,
one record at a time) for as long, with the same fault: per phase of send time, records
read per second and end-to-end p50/p99/max (the harness only: EndToEndLatency prints no
figure per phase). Then the producer and a consumer together, open loop. Then the
one-consumer row under a fault: a topic filled with ``--fault-consume-records`` (10M),
each side in turn reads it from the start; the fault follows what was read (a reader has
no schedule): the broker leading partition 0 killed -9 when a third of the records have
been read, started again at two thirds (and not before 9 s: a ZooKeeper-mode broker
started while its killed self's session lives exits at once). Per phase, records read per
second, the records and the phase's length: the harness's from its history's ``polls``
lines, ConsumerPerformance's from its ``--show-detailed-stats`` lines (one a second at
most), placed by Docker's stamps.

Traffic stays between this process and the cluster's containers (loopback ports) and
inside the cluster's network; every loop is bounded in records and time.
"""

from __future__ import annotations

import argparse
import html
import math
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.backend.cluster import Cluster
from harness.backend.docker import Engine
from harness.clients.kafka import KafkaConsumerClient, KafkaProducerClient, consumer_config, producer_config
from harness.history import HistoryWriter
from harness.systems.kafka import KafkaSystem

MB = float(1 << 20)
PARTITIONS = 6
TOOL_TIMEOUT_S = 600.0
#: the least time a consumer row's broker stays down: the ZooKeeper session timeout (6 s,
#: compose/images/kafka/entrypoint.sh) and a margin
MIN_DOWN_S = 9.0
SIZES = (10, 100, 1000, 10_000, 100_000)
ROWS = ("p1-rf1", "p1-rf3", "p1-rf3-all", "p3-rf3", "c1", "c3", "e2e")
INTERNAL_PORT = 9094  # the brokers' listener on the cluster network (compose/, entrypoint.sh)


# -- the tools' output -------------------------------------------------------------------

_PERIODIC_LINE = re.compile(r"records sent, [\d.]+ records/sec .* ms max latency\.")
_PRODUCER_FINAL = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th")


@dataclass
class Figures:
    """One side of one row."""

    records: int = 0
    rate: float | None = None  # records/s
    mbps: float | None = None  # MB (2^20 bytes) / s
    p50: float | None = None  # ms
    p99: float | None = None
    p999: float | None = None
    note: str = ""
    parts: list[Figures] = field(default_factory=list)
    span: tuple[float, float] | None = None  # (start, end), epoch seconds, where a tool prints them


def parse_producer_performance(text: str) -> Figures:
    """ProducerPerformance's final line (it also prints a line every 5 s: the last match is
    the summary, the one with the percentiles)."""
    found = _PRODUCER_FINAL.findall(text)
    if not found:
        raise ValueError(f"no ProducerPerformance summary in: {text[-300:]!r}")
    n, rate, mbps, _avg, _max, p50, _p95, p99, p999 = found[-1]
    return Figures(int(n), float(rate), float(mbps), float(p50), float(p99), float(p999))


def parse_consumer_performance(text: str, timeout_ms: int = 0) -> Figures:
    """ConsumerPerformance's CSV line: start.time, end.time, data.consumed.in.MB, MB.sec,
    data.consumed.in.nMsg, nMsg.sec, ... (after the header line; a WARNING line may come
    between them when the consumer gave up waiting). ``span`` is (start, end) in epoch
    seconds; a consumer that ended by its timeout waited ``timeout_ms`` for nothing at the
    end, which comes off its end."""
    from datetime import datetime

    lines = [ln for ln in text.splitlines() if ln.strip()]
    gave_up = any(ln.startswith("WARNING: Exiting before consuming") for ln in lines)
    for i, line in enumerate(lines):
        if not line.startswith("start.time"):
            continue
        for row in lines[i + 1:]:
            cols = [c.strip() for c in row.split(",")]
            if len(cols) >= 6 and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}", cols[0]):
                start, end = (datetime.strptime(c, "%Y-%m-%d %H:%M:%S:%f").timestamp() for c in cols[:2])
                if gave_up:
                    end -= timeout_ms / 1000
                return Figures(int(float(cols[4])), float(cols[5]), float(cols[3]), span=(start, end))
    raise ValueError(f"no ConsumerPerformance result in: {text[-300:]!r}")


_E2E = re.compile(r"Percentiles: 50th = ([\d.]+), 99th = ([\d.]+), 99\.9th = ([\d.]+)")


def parse_end_to_end(text: str, records: int) -> Figures:
    """EndToEndLatency's percentile line (ms)."""
    m = _E2E.search(text)
    if not m:
        raise ValueError(f"no EndToEndLatency percentiles in: {text[-300:]!r}")
    return Figures(records, p50=float(m.group(1)), p99=float(m.group(2)), p999=float(m.group(3)))


def percentile(values: Sequence[float], p: float) -> float:
    """The value at rank ceil(p * n) of the sorted values (EndToEndLatency's way)."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(p * len(ordered)) - 1))]


# -- the tools in helper containers ----------------------------------------------------

class Tools:
    """Kafka's tools, run in helper containers of the broker image on the cluster's network."""

    def __init__(self, cluster: Cluster, batch_bytes: int = 1_000_000) -> None:
        self.cluster = cluster
        self.batch_bytes = batch_bytes
        names = [n for n in cluster.spec.node_names if n.startswith("kafka")]
        self.brokers = ",".join(f"{n}:{INTERNAL_PORT}" for n in names)

    def run(self, tool: str, args: list[str], copies: int = 1) -> list[str]:
        """Runs ``copies`` of the tool at once; their outputs (a failure: RuntimeError)."""
        cmd = ["java", "-Xmx1g", "-cp", "/opt/kafka/libs/*", f"org.apache.kafka.tools.{tool}", *args]
        boxes = []
        try:
            for i in range(copies):
                boxes.append(self.cluster.run_helper(f"bench-{tool.lower()}-{uuid.uuid4().hex[:6]}-{i}", cmd,
                                                     role="bench", mounts={}, working_dir="/tmp"))
            deadline = time.monotonic() + TOOL_TIMEOUT_S
            while time.monotonic() < deadline and any(b.status not in ("exited", "dead") for b in boxes):
                time.sleep(0.5)
            outputs = [b.logs() for b in boxes]
            if any(b.status not in ("exited", "dead") for b in boxes):
                raise RuntimeError(f"{tool} did not end in {TOOL_TIMEOUT_S:.0f}s: {outputs[0][-500:]}")
            return outputs
        finally:
            for b in boxes:
                _removed(b)

    def produce(self, topic: str, records: int, size: int, acks: str, copies: int = 1) -> Figures:
        args = ["--topic", topic, "--num-records", str(records), "--record-size", str(size),
                "--throughput", "-1", "--producer-props", f"bootstrap.servers={self.brokers}", f"acks={acks}",
                "linger.ms=5", f"batch.size={self.batch_bytes}"]
        return _summed([parse_producer_performance(o) for o in self.run("ProducerPerformance", args, copies)])

    def consume(self, topic: str, records: int, copies: int = 1) -> Figures:
        """``copies`` consumers of one group, each asked for its share: the partitions may
        split unevenly, so each ends when it has its share or has read nothing for 5 s
        (that wait is taken off its end); the group's rate is all they read over the time
        from the first start to the last end."""
        group = f"bench-{uuid.uuid4().hex[:6]}"
        timeout_ms = 5000 if copies > 1 else 60000
        args = ["--bootstrap-server", self.brokers, "--topic", topic, "--messages", str(records // copies),
                "--group", group, "--timeout", str(timeout_ms)]
        outputs = self.run("ConsumerPerformance", args, copies)
        parts = [parse_consumer_performance(o, timeout_ms) for o in outputs]
        if copies == 1:
            return parts[0]
        spans = [p.span for p in parts if p.span]
        total = sum(p.records for p in parts)
        seconds = max(e for _, e in spans) - min(s for s, _ in spans) if len(spans) == len(parts) else 0
        if seconds <= 0:
            return Figures(total, note="no time span")
        return Figures(total, total / seconds, total * 100 / MB / seconds, note=f"{copies} at once",
                       parts=parts)

    def end_to_end(self, topic: str, records: int, size: int, acks: str) -> Figures:
        (out,) = self.run("EndToEndLatency", [self.brokers, topic, str(records), acks, str(size)])
        return parse_end_to_end(out, records)

    def produce_with_fault(self, topic: str, rate: int, seconds: float, fault: Callable[[], None]) -> str:
        """ProducerPerformance at ``rate`` records/s for ``seconds`` (acks=all), ``fault``
        called once its first 5-s line is out (it is sending); its log, time-stamped."""
        cmd = ["java", "-Xmx1g", "-cp", "/opt/kafka/libs/*", "org.apache.kafka.tools.ProducerPerformance",
               "--topic", topic, "--num-records", str(int(rate * seconds)), "--record-size", "100",
               "--throughput", str(rate), "--producer-props", f"bootstrap.servers={self.brokers}", "acks=all",
               "linger.ms=5", f"batch.size={self.batch_bytes}"]
        box = self.cluster.run_helper(f"bench-fault-{uuid.uuid4().hex[:6]}", cmd, role="bench", mounts={},
                                      working_dir="/tmp")
        try:
            deadline = time.monotonic() + TOOL_TIMEOUT_S
            while time.monotonic() < deadline and not _PERIODIC_LINE.search(box.logs()):
                if box.status in ("exited", "dead"):
                    raise RuntimeError(f"ProducerPerformance ended early: {box.logs()[-500:]}")
                time.sleep(0.2)
            fault()
        except BaseException:
            _removed(box)
            raise
        return _ended(box)

    def consume_with_fault(self, topic: str, records: int,
                           fault: Callable[[Callable[[], int | None], Callable[[], bool]], None]) -> str:
        """ConsumerPerformance reading ``records`` of ``topic`` with detailed stats each
        second; ``fault(count, alive)`` runs beside it (``count()``: the records its last line
        says it read). Its log, time-stamped."""
        group = f"bench-{uuid.uuid4().hex[:6]}"
        cmd = ["java", "-Xmx1g", "-cp", "/opt/kafka/libs/*", "org.apache.kafka.tools.ConsumerPerformance",
               "--bootstrap-server", self.brokers, "--topic", topic, "--messages", str(records),
               "--group", group, "--timeout", "60000", "--show-detailed-stats",
               "--reporting-interval", "1000"]
        box = self.cluster.run_helper(f"bench-cfault-{uuid.uuid4().hex[:6]}", cmd, role="bench", mounts={},
                                      working_dir="/tmp")
        seen: list[int | None] = [None]
        read_at = [0.0]

        def count() -> int | None:
            # its lines come once a second: the log is read at most every 0.1 s, not at
            # every 10-ms tick of the trigger
            if time.monotonic() - read_at[0] < 0.1:
                return seen[0]
            read_at[0] = time.monotonic()
            for line in reversed(box.logs(tail=5).splitlines()):
                m = _CONSUMER_TOTAL.match(line.strip())
                if m:
                    seen[0] = int(m.group(1))
                    break
            return seen[0]

        try:
            fault(count, lambda: box.status not in ("exited", "dead"))
        except BaseException:
            _removed(box)
            raise
        return _ended(box)


def _ended(box: Any) -> str:
    """A helper container's stamped log once it has ended (bounded); it is removed."""
    try:
        deadline = time.monotonic() + TOOL_TIMEOUT_S
        while time.monotonic() < deadline and box.status not in ("exited", "dead"):
            time.sleep(0.5)
        return str(box.logs(timestamps=True))
    finally:
        _removed(box)


def _removed(box: Any) -> None:
    try:
        box.remove()
    except Exception:  # noqa: BLE001 (gone already)
        pass


def median_of(runs: Sequence[Figures]) -> Figures:
    """One row's figures over repeated runs: the median of each figure (over the runs that
    measured it), the records of the first run, and the spread of records/s as a note."""
    if len(runs) == 1:
        return runs[0]

    def med(values: list[float | None]) -> float | None:
        got = [v for v in values if v is not None]
        return statistics.median(got) if got else None

    rates = [r.rate for r in runs if r.rate is not None]
    # a row that measures no rate (end-to-end) is the median of the runs that measured latency
    timed = [r for r in runs if r.p50 is not None]
    spread = f"median of {len(rates)} runs, rec/s {min(rates):,.0f} to {max(rates):,.0f}" if rates else \
        f"median of {len(timed)} runs" if timed else f"no run of {len(runs)} measured"
    return Figures(runs[0].records, med([r.rate for r in runs]), med([r.mbps for r in runs]),
                   med([r.p50 for r in runs]), med([r.p99 for r in runs]), med([r.p999 for r in runs]),
                   note="; ".join([spread, *sorted({r.note for r in runs if r.note})]))


def _summed(parts: list[Figures]) -> Figures:
    if len(parts) == 1:
        return parts[0]
    return Figures(sum(p.records for p in parts), sum(p.rate or 0 for p in parts),
                   sum(p.mbps or 0 for p in parts), note=f"{len(parts)} at once", parts=parts)


# -- the harness's clients ---------------------------------------------------------------

class Harness:
    def __init__(self, bootstrap: str, tmp: Path) -> None:
        self.bootstrap = bootstrap
        self.tmp = tmp

    def _history(self, name: str) -> HistoryWriter:
        return HistoryWriter(self.tmp / f"{name}-{uuid.uuid4().hex[:6]}.jsonl", name)

    def produce(self, topic: str, records: int, size: int, acks: str, copies: int = 1) -> Figures:
        def one(i: int) -> Figures:
            with self._history(f"p{i}") as hist:
                conf = {**producer_config(self.bootstrap), "acks": acks}
                st = KafkaProducerClient(conf, topic, hist).run(count=records, value_size=size)
            if st.ok != records:
                return Figures(st.ok, note=f"only {st.ok} of {records} acknowledged")
            return Figures(records, records / st.seconds, records * size / MB / st.seconds)
        return _summed(_threads(one, copies))

    def consume(self, topic: str, records: int, size: int, copies: int = 1) -> Figures:
        if copies == 1:
            with self._history("c") as hist:
                st = KafkaConsumerClient(self.bootstrap, topic, hist).read_all(PARTITIONS, phase="run")
            return Figures(st.polled, st.polled / st.seconds, st.polled * size / MB / st.seconds)
        # one group: the partitions split between the consumers (not evenly, 6 over 3 may
        # be 3/2/1), so they read until the group has read the topic, however it is split
        group = f"bench-{uuid.uuid4().hex[:6]}"
        stop = threading.Event()
        clients = []
        for i in range(copies):
            hist = self._history(f"c{i}")
            clients.append((hist, KafkaConsumerClient(self.bootstrap, topic, hist, group=group)))
        threads = [threading.Thread(target=c.run, kwargs={"stop": stop, "max_s": TOOL_TIMEOUT_S})
                   for _, c in clients]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        try:
            while (sum(c.stats.polled for _, c in clients) < records
                   and time.monotonic() - t0 < TOOL_TIMEOUT_S and any(t.is_alive() for t in threads)):
                time.sleep(0.01)
            seconds = time.monotonic() - t0
        finally:
            stop.set()
            for t in threads:
                t.join(60)
            for hist, _ in clients:
                hist.close()
        polled = sum(c.stats.polled for _, c in clients)
        return Figures(polled, polled / seconds, polled * size / MB / seconds, note=f"{copies} at once")

    def end_to_end(self, topic: str, records: int, size: int, acks: str) -> Figures:
        """EndToEndLatency's loop with the harness's producer: send one record (recorded),
        flush, poll until it is read; per record, the time from the send call to the poll
        that returned it (one clock)."""
        trips = self.round_trips(topic, size, acks, count=records)
        latencies = [ms for _, ms in trips if ms is not None]
        if len(latencies) < records:
            return Figures(len(latencies), note=f"only {len(latencies)} of {records} read in time")
        return Figures(records, p50=percentile(latencies, 0.5), p99=percentile(latencies, 0.99),
                       p999=percentile(latencies, 0.999))

    def round_trips(self, topic: str, size: int, acks: str, count: int | None = None,
                    seconds: float | None = None,
                    started: Callable[[], None] | None = None) -> list[tuple[float, float | None]]:
        """The end-to-end loop, ``count`` records or for ``seconds`` (bounded either way):
        per record its send time (wall clock) and its latency in ms, None when it was not
        read within 30 s (then, with ``count``, the loop ends; with ``seconds`` it goes
        on: a fault may hold a record that long). ``started`` is called after the warm-up,
        as the measured loop begins."""
        from confluent_kafka import Consumer, TopicPartition

        extra = {"enable.auto.commit": False, "auto.offset.reset": "latest"}
        consumer = Consumer(consumer_config(self.bootstrap, f"bench-{uuid.uuid4().hex[:6]}", extra=extra))
        consumer.assign([TopicPartition(topic, 0, -1)])  # the end: only what this loop sends
        trips: list[tuple[float, float | None]] = []

        def read(mid: str, timeout_s: float) -> float | None:
            """Polls until the record of ``mid`` is read; when (perf_counter), or None."""
            head = mid.encode() + b"|"
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                for msg in consumer.consume(1, 0.5):
                    if msg.error() is None and (msg.value() or b"").startswith(head):
                        return time.perf_counter()
            return None

        with self._history("e2e") as hist:
            producer = KafkaProducerClient({**producer_config(self.bootstrap), "acks": acks}, topic, hist)
            for _ in range(5):  # warm-up: connections, metadata, the consumer's first fetch
                mid = producer.send_one(size, partition=0)
                producer.producer.flush(10)
            read(mid, 30)
            if started is not None:
                started()
            end = None if seconds is None else time.monotonic() + seconds
            while (count is None or len(trips) < count) and (end is None or time.monotonic() < end):
                sent, t0 = time.time(), time.perf_counter()
                mid = producer.send_one(size, partition=0)
                producer.producer.flush(10)
                got = read(mid, 30)
                trips.append((sent, None if got is None else (got - t0) * 1000))
                if got is None and count is not None:
                    break
            producer.close()
        consumer.close()
        return trips

    def open_loop(self, topic: str, rate: int, seconds: float,
                  started: Callable[[], None] | None = None) -> list[tuple[float, float | None]]:
        """Seed 002's producer and consumer together, open loop: one producer paced at
        ``rate`` records/s of 100 B (acks=all) for ``seconds`` to every partition, and one
        consumer of every partition (from their ends) in this thread. Per send: its invoke
        time (wall clock, from the history) and its end-to-end latency in ms (the poll that
        returned it minus the invoke, one clock), or None when it was not read before the
        consumer gave up (30 s after the producer ended with nothing new); acknowledged
        sends only (run_open_loop). Unlike the closed loop, a stall does not stop the
        sends: a fault's cost shows on every record sent during it (no coordinated
        omission). ``started`` is called as the producer starts."""
        from confluent_kafka import Consumer, TopicPartition

        from harness.clients.kafka import take

        extra = {"enable.auto.commit": False}
        consumer = Consumer(consumer_config(self.bootstrap, f"bench-{uuid.uuid4().hex[:6]}", extra=extra))
        consumer.assign([TopicPartition(topic, p, -1) for p in range(PARTITIONS)])  # their ends
        consumer.consume(1, 2.0)  # the first fetch: the ends are resolved before the producer starts

        def receive() -> list[bytes]:
            return [bytes(v) for m in take(consumer, 500, 0.2) if m.error() is None and (v := m.value())]

        try:
            conf = {**producer_config(self.bootstrap), "acks": "all"}
            return run_open_loop(self.tmp, lambda hist: KafkaProducerClient(conf, topic, hist), receive,
                                 rate, seconds, started)
        finally:
            consumer.close()


def run_open_loop(tmp: Path, producer_for: Callable[[HistoryWriter], Any], receive: Callable[[], list[bytes]],
                  rate: int, seconds: float,
                  started: Callable[[], None] | None) -> list[tuple[float, float | None]]:
    """The open loop of both benches: a producer (``producer_for(history)``) paced at
    ``rate`` records of 100 B for ``seconds`` in a thread, and ``receive`` (the values read
    now, bounded in time) called in this thread until every acknowledged send was read or
    30 s passed after the producer ended with nothing new; ``started`` is called as the
    producer starts. Per acknowledged send, its invoke time and end-to-end latency
    (acked_trips; a value's read time is when ``receive`` returned it)."""
    read: dict[bytes, float] = {}
    path = tmp / f"ol-{uuid.uuid4().hex[:6]}.jsonl"
    with HistoryWriter(path, "ol") as hist:
        producer = producer_for(hist)
        sender = threading.Thread(target=producer.run, kwargs={"duration_s": seconds, "rate": rate,
                                                              "value_size": 100})
        if started is not None:
            started()
        sender.start()
        idle_until: float | None = None
        try:
            while True:
                now = time.monotonic()
                if not sender.is_alive():
                    idle_until = idle_until or now + 30.0
                    if now >= idle_until or len(read) >= producer.stats.ok:
                        break
                values = receive()
                got = time.time()
                for value in values:
                    mid = value.split(b"|", 1)[0]
                    if mid not in read:
                        read[mid] = got
                        if idle_until is not None:
                            idle_until = time.monotonic() + 30.0
        finally:
            sender.join(seconds + 240)
            producer.close()
    return acked_trips(path, read)


def acked_trips(history: Path, read: dict[bytes, float]) -> list[tuple[float, float | None]]:
    """An open loop's records: per acknowledged send of the producer's ``history``, its
    invoke time and its end-to-end latency in ms (``read``: id -> when it was read, one
    clock), or None when it was never read; by invoke time. A send never acknowledged was
    not promised to anyone: not a record to wait for."""
    from harness.history import read_events

    invoked: dict[str, float] = {}
    acked: set[str] = set()
    for e in read_events(history):
        if e["type"] == "invoke" and e.get("mid") is not None:
            invoked[str(e["mid"])] = float(e["t"])
        elif e["type"] == "ok" and e.get("mid") is not None:
            acked.add(str(e["mid"]))
    return sorted((t, None if (at := read.get(mid.encode())) is None else (at - t) * 1000)
                  for mid, t in invoked.items() if mid in acked)


def _threads(fn: Callable[[int], Figures], n: int) -> list[Figures]:
    if n == 1:
        return [fn(0)]
    out: list[Figures | None] = [None] * n

    def call(i: int) -> None:
        out[i] = fn(i)
    threads = [threading.Thread(target=call, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TOOL_TIMEOUT_S)
    return [f if f is not None else Figures(note="did not end") for f in out]


# -- a fault in the middle of a row ------------------------------------------------------

def leader_fault(kafka: KafkaSystem, topic: str, seconds: float, times: dict[str, float],
                 lead: float = 0.0) -> Callable[[], None]:
    """The fault of a row of ``seconds``, called when the row starts (``lead`` seconds
    after it, for a tool that is called late): a third of the way in, the broker leading
    partition 0 of ``topic`` is killed -9; at two thirds it is started again. ``times``
    gets when (``kill``, ``restart``)."""

    def fault() -> None:
        node = kafka.leader(topic, 0)
        if node is None:
            raise RuntimeError(f"{topic}-0 has no leader")
        time.sleep(max(0.0, seconds / 3 - lead))
        times["kill"] = time.time()
        node.container.kill()
        time.sleep(seconds / 3)
        times["restart"] = time.time()
        node.container.start()

    return fault


def paced_with_fault(tmp: Path, client_for: Callable[[HistoryWriter], Any], fault: Callable[[], None],
                     rate: int, seconds: float) -> Path:
    """A harness producer (``client_for(history)``) paced at ``rate`` records of 100 B for
    ``seconds``, with ``fault`` started in a thread as it starts; its history's path."""
    path = tmp / f"fault-{uuid.uuid4().hex[:6]}.jsonl"
    killer = threading.Thread(target=fault)
    with HistoryWriter(path, "fault") as hist:
        client = client_for(hist)
        try:
            killer.start()
            client.run(duration_s=seconds, rate=rate, value_size=100)
        finally:
            client.close()
            if killer.ident is not None:
                killer.join()
    return path


def fault_row(kafka: KafkaSystem, tools: Tools, harness: Harness, topic_h: str, topic_k: str, rate: int,
              seconds: float) -> list[tuple[str, dict[str, Phase]]]:
    """Each side in turn: acks=all at ``rate`` for ``seconds``; a third of the way in, the
    broker leading partition 0 is killed -9; at two thirds it is started again."""
    out = []
    for side, topic in (("harness", topic_h), ("ProducerPerformance", topic_k)):
        times: dict[str, float] = {}

        # the tool's fault is called at its first 5-s line, about 5 s after it began sending
        fault = leader_fault(kafka, topic, seconds, times, lead=0.0 if side == "harness" else 5.0)
        if side == "harness":
            conf = {**producer_config(harness.bootstrap), "acks": "all"}
            def client(hist: HistoryWriter, conf: dict[str, Any] = conf,
                       topic: str = topic) -> KafkaProducerClient:
                return KafkaProducerClient(conf, topic, hist)
            path = paced_with_fault(harness.tmp, client, fault, rate, seconds)
            out.append((side, harness_phases(path, times["kill"], times["restart"])))
        else:
            logs = tools.produce_with_fault(topic, rate, seconds, fault)
            out.append((side, tool_phases(logs, times["kill"], times["restart"])))
        kafka.wait_ready()
    return out


def e2e_fault_row(kafka: KafkaSystem, harness: Harness, topic: str,
                  seconds: float) -> tuple[str, dict[str, Phase]]:
    """The end-to-end loop (acks=all) for ``seconds``; a third of the way in, the broker
    leading partition 0 is killed -9; at two thirds it is started again. Harness side
    only: EndToEndLatency prints a latency for one record in 1,000 and its percentiles
    for the whole run, nothing per phase."""
    times: dict[str, float] = {}
    killer = threading.Thread(target=leader_fault(kafka, topic, seconds, times))
    try:  # the fault's clock starts with the measured loop, after its warm-up
        trips = harness.round_trips(topic, 100, "all", seconds=seconds, started=killer.start)
    finally:
        if killer.is_alive():
            killer.join()
    kafka.wait_ready()
    return "harness end-to-end", trip_phases(trips, times["kill"], times["restart"])


def open_loop_fault_row(kafka: KafkaSystem, harness: Harness, topic: str, rate: int,
                        seconds: float) -> tuple[str, dict[str, Phase]]:
    """The producer and a consumer together, open loop (``Harness.open_loop``) at ``rate``
    for ``seconds``; a third of the way in, the broker leading partition 0 is killed -9; at
    two thirds it is started again. Harness side only, as the closed loop."""
    times: dict[str, float] = {}
    killer = threading.Thread(target=leader_fault(kafka, topic, seconds, times))
    try:
        trips = harness.open_loop(topic, rate, seconds, started=killer.start)
    finally:
        if killer.is_alive():
            killer.join()
    kafka.wait_ready()
    return "harness prod+cons", trip_phases(trips, times["kill"], times["restart"])


def at_count(count: Callable[[], int | None], target: float, alive: Callable[[], bool],
             deadline: float) -> bool:
    """Waits until ``count()`` reaches ``target`` (True), or the reader ends or the deadline
    passes (False)."""
    while time.monotonic() < deadline:
        n = count()
        if n is not None and n >= target:
            return True
        if not alive():
            return False
        time.sleep(0.01)
    return False


def read_fault(kafka: KafkaSystem, topic: str, records: int, count: Callable[[], int | None],
               alive: Callable[[], bool], times: dict[str, float]) -> None:
    """The fault of a consumer row, driven by what was read (a reader has no schedule):
    when a third of ``records`` have been read, the broker leading partition 0 of ``topic``
    is killed -9; at two thirds it is started again (at the reader's end, if it ends first),
    but not before :data:`MIN_DOWN_S` (a ZooKeeper-mode broker started again while its
    killed self's session lives exits at once: NodeExists on ``/brokers/ids/<id>``).
    ``times`` gets when (``kill``, ``restart``)."""
    node = kafka.leader(topic, 0)
    if node is None:
        raise RuntimeError(f"{topic}-0 has no leader")
    deadline = time.monotonic() + TOOL_TIMEOUT_S
    at_count(count, records / 3, alive, deadline)
    times["kill"] = time.time()
    node.container.kill()
    try:
        at_count(count, 2 * records / 3, alive, deadline)
        time.sleep(max(0.0, times["kill"] + MIN_DOWN_S - time.time()))
    finally:
        times["restart"] = time.time()
        node.container.start()


def polled_phases(history: Path, kill_t: float, restart_t: float, start: float) -> dict[str, Phase]:
    """Per phase (before the kill, until the restart, after), from a consumer's history: the
    records of the ``polls`` lines recorded in the phase over its length (``start``: when the
    reader began)."""
    import json

    polls: list[tuple[float, int]] = []
    with open(history, encoding="utf-8") as f:
        for line in f:
            if '"polls"' not in line:
                continue
            e = json.loads(line)
            if e.get("type") == "polls":
                polls.append((float(e["t"]), len(e.get("offsets") or ())))
    end = max((t for t, _ in polls), default=start) + 1e-6
    return _count_phases(polls, start, kill_t, restart_t, end)


def _count_phases(counts: Sequence[tuple[float, int]], start: float, kill_t: float, restart_t: float,
                  end: float) -> dict[str, Phase]:
    """Records per second of each phase, from (time, records) points."""
    bounds = {"before": (start, kill_t), "during": (kill_t, restart_t), "after": (restart_t, end)}
    out = {}
    for name, (lo, hi) in bounds.items():
        n = sum(c for t, c in counts if lo <= t < hi)
        out[name] = Phase(rate=n / (hi - lo) if hi > lo else None, records=n, seconds=max(hi - lo, 0.0))
    return out


_DETAIL = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d+, \d+, [\d.]+, [\d.]+, (\d+), "
#: a ``--show-detailed-stats`` line: its time, its id, MB read, MB/s, records read (so far), ...
_CONSUMER_DETAIL = re.compile(r"^(\S+) " + _DETAIL)
_CONSUMER_TOTAL = re.compile("^" + _DETAIL)


def consumer_detail_counts(logs: str) -> list[tuple[float, int]]:
    """ConsumerPerformance's ``--show-detailed-stats`` lines (Docker-stamped): (the line's
    time, the records read since the line before). A line is printed only when records come
    in, at most once per reporting interval: a stall is a longer gap, not a zero line."""
    out: list[tuple[float, int]] = []
    last = 0
    for line in logs.splitlines():
        m = _CONSUMER_DETAIL.match(line.strip())
        if not m:
            continue
        at = docker_time(m.group(1))
        total = int(m.group(2))
        if at is None:
            continue
        out.append((at, total - last))
        last = total
    return out


def consumer_fault_row(kafka: KafkaSystem, tools: Tools, harness: Harness, topic: str,
                       records: int) -> list[tuple[str, dict[str, Phase]]]:
    """One consumer reads ``records`` of a filled topic from the beginning, each side in turn
    (seed 002's one-consumer row), with a fault in the middle (:func:`read_fault`). Per
    phase: records read per second. Harness: from its history's ``polls`` lines; the tool:
    from its detailed-stats lines (one a second at most), placed by Docker's stamps."""
    out = []
    # the harness
    times: dict[str, float] = {}
    path = harness.tmp / f"cfault-{uuid.uuid4().hex[:6]}.jsonl"
    with HistoryWriter(path, "cfault") as hist:
        client = KafkaConsumerClient(harness.bootstrap, topic, hist)
        reader = threading.Thread(target=client.read_all, args=(PARTITIONS,),
                                  kwargs={"phase": "run", "timeout_s": TOOL_TIMEOUT_S, "idle_s": 30.0})
        start = time.time()
        reader.start()
        try:
            read_fault(kafka, topic, records, lambda: client.stats.polled, reader.is_alive, times)
        finally:
            reader.join(TOOL_TIMEOUT_S)
    out.append(("harness consumer", polled_phases(path, times["kill"], times["restart"], start)))
    kafka.wait_ready()
    # ConsumerPerformance
    times = {}
    logs = tools.consume_with_fault(topic, records, lambda count, alive: read_fault(
        kafka, topic, records, count, alive, times))
    counts = consumer_detail_counts(logs)
    if counts:
        first = counts[0][0] - 1.0  # its first line covers about its first reporting interval
        out.append(("ConsumerPerformance", _count_phases(counts, first, times["kill"], times["restart"],
                                                         counts[-1][0] + 1e-6)))
    else:
        out.append(("ConsumerPerformance", {p: Phase() for p in PHASES}))
    kafka.wait_ready()
    return out


def trip_phases(trips: Sequence[tuple[float, float | None]], kill_t: float,
                restart_t: float) -> dict[str, Phase]:
    """Per phase (by send time): records read per second of the phase, and the
    end-to-end latency p50/p99/max in ms of those read (a record never read counts as
    30 s, the loops' bound: the latency is at least that)."""
    if not trips:
        return {p: Phase() for p in PHASES}
    start, end = trips[0][0], trips[-1][0] + 1e-6
    bounds = {"before": (start, kill_t), "during": (kill_t, restart_t), "after": (restart_t, end)}
    out = {}
    for name, (lo, hi) in bounds.items():
        lat = sorted(30_000.0 if ms is None else ms for t, ms in trips if lo <= t < hi)
        read = sum(1 for t, ms in trips if lo <= t < hi and ms is not None)
        out[name] = Phase(rate=read / (hi - lo) if hi > lo else None,
                          p50=percentile(lat, 0.5) if lat else None,
                          p99=percentile(lat, 0.99) if lat else None, max=lat[-1] if lat else None)
    return out


PHASES = ("before", "during", "after")
_PERIODIC = re.compile(r"^(\S+) (\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), "
                       r"([\d.]+) ms avg latency, ([\d.]+) ms max latency\.?$")


@dataclass
class Phase:
    """One phase of a fault row, one side: acknowledged records/s; latency in ms (the
    harness: send-to-ack p50/p99/max of the sends invoked in the phase; the tool: the mean of
    its 5-s averages and the largest of its 5-s maxima, all it prints per window)."""

    rate: float | None = None
    p50: float | None = None
    p99: float | None = None
    max: float | None = None
    avg: float | None = None
    #: a consumer row's: the records read in the phase, and its length
    records: int | None = None
    seconds: float | None = None


def harness_phases(history: Path, kill_t: float, restart_t: float) -> dict[str, Phase]:
    """Per phase (before the kill, from the kill to the restart, after), from a producer's
    history file: the acknowledgements in the phase over its length, and the send-to-ack
    latency of the sends invoked in it (wall clock ``t``, one clock: this process)."""
    from harness.history import read_events

    invoked: dict[str, float] = {}
    acked: dict[str, float] = {}
    for e in read_events(history):
        if e["type"] == "invoke" and e.get("mid") is not None:
            invoked.setdefault(e["mid"], float(e["t"]))
        elif e["type"] == "ok" and e.get("mid") is not None:
            acked.setdefault(e["mid"], float(e["t"]))
    if not invoked:
        return {p: Phase() for p in PHASES}
    start = min(invoked.values())
    end = max([*acked.values(), *invoked.values()]) + 1e-6  # the last ack is in the last phase
    bounds = {"before": (start, kill_t), "during": (kill_t, restart_t), "after": (restart_t, end)}
    out = {}
    for name, (lo, hi) in bounds.items():
        acks = sum(1 for t in acked.values() if lo <= t < hi)
        lat = sorted((acked[m] - t) * 1000 for m, t in invoked.items() if lo <= t < hi and m in acked)
        out[name] = Phase(rate=acks / (hi - lo) if hi > lo else None,
                          p50=percentile(lat, 0.5) if lat else None,
                          p99=percentile(lat, 0.99) if lat else None, max=lat[-1] if lat else None)
    return out


_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


def docker_time(stamp: str) -> float | None:
    """Epoch seconds of one of Docker's RFC 3339 log stamps (nanoseconds, trailing zeros
    trimmed), or None."""
    from datetime import datetime

    m = _STAMP.match(stamp)
    if not m:
        return None
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    whole = datetime.fromisoformat(m.group(1) + zone).timestamp()
    return whole + (float("0." + m.group(2)) if m.group(2) else 0.0)


def tool_phases(logs: str, kill_t: float, restart_t: float) -> dict[str, Phase]:
    """Per phase, from ProducerPerformance's 5-s lines with Docker's time stamps (each line
    covers the 5 s before it; a window is in the phase its middle falls in)."""
    windows: dict[str, list[tuple[float, float, float]]] = {p: [] for p in PHASES}
    for line in logs.splitlines():
        m = _PERIODIC.match(line.strip())
        if not m:
            continue
        at = docker_time(m.group(1))
        if at is None:
            continue
        middle = at - 2.5
        phase = "before" if middle < kill_t else "during" if middle < restart_t else "after"
        windows[phase].append((float(m.group(3)), float(m.group(5)), float(m.group(6))))
    return {p: Phase(rate=statistics.mean(r for r, _, _ in w), avg=statistics.mean(a for _, a, _ in w),
                     max=max(x for _, _, x in w)) if w else Phase() for p, w in windows.items()}


def fault_table(rows: Sequence[tuple[str, dict[str, Phase]]]) -> str:
    out = [f"{'side':<22} {'phase':<7} {'rec/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'avg ms':>8} {'max ms':>9}"
           f" {'records':>10} {'s':>6}"]
    for side, phases in rows:
        for name in PHASES:
            ph = phases.get(name, Phase())
            out.append(f"{side:<22} {name:<7} {_fmt(ph.rate):>9} {_fmt(ph.p50, 1):>8} {_fmt(ph.p99, 1):>8} "
                       f"{_fmt(ph.avg, 1):>8} {_fmt(ph.max, 1):>9} {_fmt(ph.records):>10} "
                       f"{_fmt(ph.seconds, 1):>6}")
    return "\n".join(out)


# -- the table and the page --------------------------------------------------------------

@dataclass
class Row:
    name: str
    what: str
    harness: Figures
    tool: Figures
    size: int = 100


def _fmt(v: float | None, digits: int = 0) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def table(rows: Sequence[Row]) -> str:
    out = [f"{'row':<12} {'harness rec/s':>14} {'MB/s':>7} {'kafka rec/s':>12} {'MB/s':>7} {'ratio':>6}   "
           f"{'harness p50/p99/p99.9 ms':>26} {'kafka p50/p99/p99.9 ms':>24} {'p50 diff':>8}"]
    for r in rows:
        h, k = r.harness, r.tool
        lat_h = "/".join(_fmt(v, 1) for v in (h.p50, h.p99, h.p999))
        lat_k = "/".join(_fmt(v, 1) for v in (k.p50, k.p99, k.p999))
        rt = ratio(h.rate, k.rate)
        diff = None if h.p50 is None or k.p50 is None else h.p50 - k.p50
        out.append(f"{r.name:<12} {_fmt(h.rate):>14} {_fmt(h.mbps, 1):>7} {_fmt(k.rate):>12} "
                   f"{_fmt(k.mbps, 1):>7} {_fmt(rt, 2):>6}   {lat_h:>26} {lat_k:>24} {_fmt(diff, 1):>8}"
                   + (f"  ({'; '.join(n for n in (h.note, k.note) if n)})" if h.note or k.note else ""))
    return "\n".join(out)


def _svg_chart(title: str, sweep: Sequence[Row], value: Callable[[Figures], float | None],
               tool: str = "Kafka tool") -> str:
    """A small log-log line chart of the sweep: harness and Kafka tool against size."""
    w, h, left, top, bottom, right = 520, 260, 64, 28, 40, 16
    pts = [(r.size, value(r.harness), value(r.tool)) for r in sweep]
    vals = [v for _, a, b in pts for v in (a, b) if v]
    if not vals:
        return f"<p>{html.escape(title)}: nothing measured</p>"
    lo, hi = math.floor(math.log10(min(vals))), math.ceil(math.log10(max(vals)))
    hi = max(hi, lo + 1)
    xs = [math.log10(s) for s, _, _ in pts]
    x0, x1 = min(xs), max(max(xs), min(xs) + 1)

    def x(size: float) -> float:
        return left + (math.log10(size) - x0) / (x1 - x0) * (w - left - right)

    def y(v: float) -> float:
        return top + (hi - math.log10(v)) / (hi - lo) * (h - top - bottom)

    parts = [f'<svg viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" '
             f'aria-label="{html.escape(title)}">',
             f'<text x="{left}" y="16" font-weight="600">{html.escape(title)}</text>']
    for e in range(lo, hi + 1):
        parts.append(f'<line x1="{left}" x2="{w - right}" y1="{y(10 ** e):.1f}" y2="{y(10 ** e):.1f}" '
                     f'stroke="#e2e8f0"/><text x="{left - 6}" y="{y(10 ** e) + 4:.1f}" text-anchor="end" '
                     f'font-size="11">{10 ** e:g}</text>')
    for s, _, _ in pts:
        parts.append(f'<text x="{x(s):.1f}" y="{h - bottom + 16}" text-anchor="middle" font-size="11">'
                     f'{s:,} B</text>')
    for idx, (name, color) in enumerate((("harness", "#2563eb"), (tool, "#d97706"))):
        line = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, *vs in pts if (v := vs[idx]))
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{line}"/>')
        parts.append(f'<text x="{w - right - 90}" y="{top + 14 + 14 * idx}" fill="{color}" font-size="12">'
                     f'{html.escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def page(rows: Sequence[Row], sweep: Sequence[Row], header: str,
         title: str = "Seed 002's benchmark on this machine", tool: str = "Kafka tool",
         faults: Sequence[tuple[str, dict[str, Phase]]] = (),
         fault_what: str = "acks=all, RF 3; the leader of partition 0 killed -9 at a third of the row, "
                           "started again at two thirds") -> str:
    """The self-contained HTML page: the table, and the size sweep's two charts."""
    def cells(f: Figures) -> str:
        return "".join(f"<td>{_fmt(v, d)}</td>" for v, d in ((f.rate, 0), (f.mbps, 1), (f.p50, 1), (f.p99, 1),
                                                               (f.p999, 1)))
    body = [f"<h1>{html.escape(title)}</h1><p>{html.escape(header)}</p>",
            "<table><tr><th>row</th><th>what</th><th colspan=5>harness: rec/s, MB/s, p50, p99, p99.9 ms</th>"
            f"<th colspan=5>{html.escape(tool)}: rec/s, MB/s, p50, p99, p99.9 ms</th><th>ratio</th></tr>"]
    for r in [*rows, *sweep]:
        body.append(f"<tr><td>{html.escape(r.name)}</td><td>{html.escape(r.what)}</td>{cells(r.harness)}"
                    f"{cells(r.tool)}<td>{_fmt(ratio(r.harness.rate, r.tool.rate), 2)}</td></tr>")
    body.append("</table>")
    if faults:
        body.append(f"<h2>A fault in the middle of a row</h2><p>{html.escape(fault_what)}</p><table><tr>"
                    "<th>side</th><th>phase</th><th>rec/s</th><th>p50 ms</th><th>p99 ms</th><th>avg ms</th>"
                    "<th>max ms</th></tr>")
        for side, phases in faults:
            for name in PHASES:
                ph = phases.get(name, Phase())
                body.append(f"<tr><td>{html.escape(side)}</td><td>{name}</td>" + "".join(
                    f"<td>{_fmt(v, d)}</td>" for v, d in ((ph.rate, 0), (ph.p50, 1), (ph.p99, 1), (ph.avg, 1),
                                                          (ph.max, 1))) + "</tr>")
        body.append("</table>")
    if sweep:
        body.append(_svg_chart("records/s by message size", sweep, lambda f: f.rate, tool))
        body.append(_svg_chart("MB/s by message size", sweep, lambda f: f.mbps, tool))
    style = ("body{font-family:sans-serif;margin:24px;color:#0f172a}table{border-collapse:collapse;"
             "margin:12px 0}td,th{border:1px solid #e2e8f0;padding:3px 8px;text-align:right}"
             "td:nth-child(2){text-align:left}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>")


# -- main --------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--e2e-records", type=int, default=10_000,
                    help="records of the end-to-end row (fewer: the tool's JVM warm-up weighs on its p50)")
    ap.add_argument("--cluster", default="kafka-zk", help="kafka-zk (default) or kafka-kraft")
    ap.add_argument("--disk", default="plain", choices=("plain", "lazy"),
                    help="the brokers' data on the container's layer (plain) or on lazy disks (what "
                         "the lazy disk costs: the same rows with each)")
    ap.add_argument("--rows", nargs="*", default=list(ROWS), choices=ROWS)
    ap.add_argument("--sizes", action="store_true", help="also the message-size sweep")
    ap.add_argument("--sweep-mb", type=int, default=100, help="at most this many MB per sweep step")
    ap.add_argument("--html", type=Path, default=Path("reports/bench-seed002.html"))
    ap.add_argument("--reps", type=int, default=1, help="run each row this many times; medians")
    ap.add_argument("--fault", action="store_true",
                    help="also the fault row: acks=all at --fault-rate for --fault-seconds, the leader of "
                         "partition 0 killed -9 at a third and started again at two thirds")
    ap.add_argument("--fault-rate", type=int, default=5000)
    ap.add_argument("--fault-seconds", type=float, default=60.0)
    ap.add_argument("--fault-consume-records", type=int, default=10_000_000,
                    help="with --fault: the one-consumer row reads this many records of 100 B (0: "
                         "no such row), the leader of partition 0 killed -9 at a third of them and "
                         "started again at two thirds")
    ap.add_argument("--java-batch-bytes", type=int, default=1_000_000,
                    help="ProducerPerformance's batch.size (default librdkafka's 1000000; Java's own: 16384)")
    args = ap.parse_args(argv)
    if args.records < 1000:
        ap.error("--records must be at least 1000")
    if args.reps < 1:
        ap.error("--reps must be at least 1")
    cluster = Cluster.named(Engine(), args.cluster, disk=args.disk)
    load_before = os.getloadavg()
    reused = cluster.up()
    kafka = KafkaSystem(cluster)
    kafka.wait_ready()
    tools = Tools(cluster, args.java_batch_bytes)
    rows: list[Row] = []
    sweep: list[Row] = []
    faults: list[tuple[str, dict[str, Phase]]] = []
    topics: list[str] = []
    n = args.records

    def topic(rf: int) -> str:
        name = f"bench-{uuid.uuid4().hex[:6]}"
        kafka.create_topic(name, PARTITIONS, rf)
        topics.append(name)
        return name

    def repeated(fn: Callable[..., Figures], rf: int | None, *rest: object) -> Figures:
        """``fn`` run ``--reps`` times, on a fresh topic of RF ``rf`` each time (or on the
        arguments as given: ``rf`` None); the medians."""
        return median_of([fn(topic(rf), *rest) if rf else fn(*rest) for _ in range(args.reps)])

    def add(row: Row) -> None:
        rows.append(row)
        print(table([row]).splitlines()[1], flush=True)

    try:
        with tempfile.TemporaryDirectory() as tmp:
            harness = Harness(cluster.spec.bootstrap, Path(tmp))
            print(table([]), flush=True)
            for name, rf, acks, copies in (("p1-rf1", 1, "1", 1), ("p1-rf3", 3, "1", 1),
                                           ("p1-rf3-all", 3, "all", 1), ("p3-rf3", 3, "1", 3)):
                if name in args.rows:
                    h = repeated(harness.produce, rf, n, 100, acks, copies)
                    k = repeated(tools.produce, rf, n, 100, acks, copies)
                    add(Row(name, f"{copies} producer(s), RF {rf}, acks={acks}", h, k))
            if {"c1", "c3"} & set(args.rows):
                filled = topic(3)
                tools.produce(filled, n, 100, "1")
                for name, copies in (("c1", 1), ("c3", 3)):
                    if name in args.rows:
                        h = repeated(harness.consume, None, filled, n, 100, copies)
                        k = repeated(tools.consume, None, filled, n, copies)
                        add(Row(name, f"{copies} consumer(s), RF 3", h, k))
            if "e2e" in args.rows:
                e = args.e2e_records
                h = repeated(harness.end_to_end, 3, e, 100, "1")
                k = repeated(tools.end_to_end, 3, e, 100, "1")
                add(Row("e2e", "end-to-end latency, acks=1, RF 3", h, k))
            if args.fault:
                faults.extend(fault_row(kafka, tools, harness, topic(3), topic(3), args.fault_rate,
                                        args.fault_seconds))
                faults.append(e2e_fault_row(kafka, harness, topic(3), args.fault_seconds))
                faults.append(open_loop_fault_row(kafka, harness, topic(3), args.fault_rate,
                                                  args.fault_seconds))
                if args.fault_consume_records:
                    filled, many = topic(3), args.fault_consume_records
                    tools.produce(filled, many, 100, "1")
                    faults.extend(consumer_fault_row(kafka, tools, harness, filled, many))
                print(fault_table(faults), flush=True)
            if args.sizes:
                for size in SIZES:
                    count = max(1000, min(n, args.sweep_mb * 1_000_000 // size))
                    h = repeated(harness.produce, 3, count, size, "1")
                    k = repeated(tools.produce, 3, count, size, "1")
                    what = f"{count} records of {size} B, RF 3, acks=1"
                    sweep.append(Row(f"size {size}", what, h, k, size))
                    print(table([sweep[-1]]).splitlines()[1], flush=True)
    finally:
        try:
            kafka.delete_topics(topics)
        except Exception as exc:  # noqa: BLE001 (the cluster may be going away)
            print(f"(topics not deleted: {exc})", file=sys.stderr)
        if not reused:
            cluster.down()
    load_after = os.getloadavg()
    header = (f"{args.cluster} ({cluster.version}, {args.disk} disks), {n} records a row, "
              f"{args.reps} run(s) a row (medians), Java batch.size "
              f"{args.java_batch_bytes}, {os.cpu_count()} cores, load average "
              f"{load_before[0]:.2f} before, {load_after[0]:.2f} after; {time.strftime('%Y-%m-%d %H:%M')}")
    print(header)
    print(table([*rows, *sweep]))
    produce = [ratio(r.harness.rate, r.tool.rate) for r in rows if r.name.startswith("p")]
    measured = [x for x in produce if x is not None]
    if measured:
        print(f"producer rows, harness/tool records/s: median {statistics.median(measured):.2f} (target 0.9)")
    e2e = next((r for r in rows if r.name == "e2e"), None)
    if e2e and e2e.harness.p50 is not None and e2e.tool.p50 is not None:
        print(f"end-to-end p50: harness {e2e.harness.p50:.1f} ms, EndToEndLatency {e2e.tool.p50:.1f} ms "
              f"(target: within 2 ms)")
    if faults:
        print(f"fault row: {args.fault_rate} records/s, acks=all, RF 3, {args.fault_seconds:.0f} s; the "
              f"leader of partition 0 killed -9 at a third, started at two thirds")
        print(fault_table(faults))
    args.html.parent.mkdir(parents=True, exist_ok=True)
    args.html.write_text(page(rows, sweep, header, faults=faults))
    print(f"page: {args.html}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
