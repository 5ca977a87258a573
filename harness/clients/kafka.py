"""Instrumented Kafka producer and consumer (confluent-kafka) writing the history.

The producer records ``invoke`` before each send and exactly one of ``ok``,
``fail`` or ``info`` when librdkafka reports the delivery: ``fail`` only for
errors that prove the record was not written, ``info`` (unknown) otherwise —
a timed-out send may well be in the log. The consumer records every record it
reads and every position change it is told about (rebalance, offset reset,
log truncation), never inferring one from the offsets themselves: that is the
checker's job.
"""

from __future__ import annotations

import json
import logging
import itertools
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..history import HistoryWriter, make_value, parse_mid
from . import paced_sends

#: librdkafka's own log lines (connection refused while a broker is down, ...) go here,
#: not to the terminal; the history records what matters.
LIBRDKAFKA_LOG = logging.getLogger("harness.librdkafka")
LIBRDKAFKA_LOG.addHandler(logging.NullHandler())
LIBRDKAFKA_LOG.propagate = False

__all__ = ["KafkaProducerClient", "KafkaConsumerClient", "WorkloadStats", "producer_config"]

# Errors after which the broker provably did not append the record.
_DEFINITE_FAILURES = frozenset({
    "MSG_SIZE_TOO_LARGE", "NOT_ENOUGH_REPLICAS", "TOPIC_AUTHORIZATION_FAILED",
    "UNKNOWN_TOPIC_OR_PART", "INVALID_TOPIC_EXCEPTION", "RECORD_LIST_TOO_LARGE",
    "INVALID_REQUIRED_ACKS", "CLUSTER_AUTHORIZATION_FAILED", "_PURGE_QUEUE", "_QUEUE_FULL",
    "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC", "_INVALID_ARG", "_MSG_SIZE_TOO_LARGE",
    "INVALID_RECORD", "UNSUPPORTED_FOR_MESSAGE_FORMAT",
})


def _js(text: str | None) -> str:
    return "null" if text is None else json.dumps(text)


@dataclass
class WorkloadStats:
    """What one workload did (also summarised in the run's step record)."""

    name: str
    sent: int = 0
    ok: int = 0
    fail: int = 0
    info: int = 0
    polled: int = 0
    seconds: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def producer_config(bootstrap: str, client: Any | None = None) -> dict[str, Any]:
    """librdkafka settings from a case's ClientSpec (or defaults)."""
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "compression.type": "none",
                            "logger": LIBRDKAFKA_LOG, "socket.connection.setup.timeout.ms": 5000}
    if client is None:
        conf.update({"acks": "all", "linger.ms": 5})
        return conf
    conf.update({
        "acks": client.acks, "linger.ms": client.linger_ms,
        "request.timeout.ms": client.request_timeout_ms,
        "delivery.timeout.ms": client.delivery_timeout_ms,
        "max.in.flight.requests.per.connection": client.max_in_flight,
        "enable.idempotence": client.idempotence,
    })
    if client.retries is not None:
        conf["retries"] = client.retries
    if client.transactional_id:
        conf["transactional.id"] = client.transactional_id
    conf.update(dict(client.extra))
    return conf


class KafkaProducerClient:
    """Sends unique, self-identifying records and records every outcome."""

    def __init__(self, conf: Mapping[str, Any], topic: str, history: HistoryWriter) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self._topic_js = json.dumps(topic)
        self.history = history
        self.conf = dict(conf)
        # one delivery callback for every record: the message id is read back from the
        # value (cheaper than a closure per send)
        self.producer = Producer({**self.conf, "on_delivery": self._on_delivery})
        self.name = history.client
        self._seq = itertools.count(1)  # next() is atomic: sends from several threads are fine
        self._pad = b"x" * 4096
        self.stats = WorkloadStats(self.name)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        mid = parse_mid(msg.value())
        if err is None:
            epoch = msg.leader_epoch()
            hist = self.history
            hist.write_line(f'{hist.head("ok")},"mid":"{mid}","topic":{self._topic_js},'
                            f'"partition":{msg.partition()},"offset":{msg.offset()},'
                            f'"epoch":{"null" if epoch is None else epoch}}}\n')
            self.stats.ok += 1
            return
        code = err.name()
        self.stats.errors[code] = self.stats.errors.get(code, 0) + 1
        if code in _DEFINITE_FAILURES:
            self.history.record("fail", mid=mid, error=f"{code}: {err.str()}")
            self.stats.fail += 1
        else:
            self.history.record("info", mid=mid, error=f"{code}: {err.str()}")
            self.stats.info += 1

    def send_one(self, value_size: int = 100, key: str | None = None,
                 partition: int | None = None) -> str:
        """Queues one record; returns its message id."""
        mid = f"{self.name}-{next(self._seq)}"
        hist = self.history
        hist.write_line(f'{hist.head("invoke")},"mid":"{mid}","topic":{self._topic_js},'
                        f'"key":{_js(key)}}}\n')
        head = mid.encode() + b"|"
        value = head + self._pad[:value_size - len(head)] if value_size > len(head) else head
        if len(value) < value_size:
            value = make_value(mid, value_size)
        kbytes = key.encode() if key is not None else None
        while True:
            try:
                if partition is None:
                    self.producer.produce(self.topic, value, kbytes)
                else:
                    self.producer.produce(self.topic, value, kbytes, partition)
                break
            except BufferError:
                self.producer.poll(0.05)  # local queue full: let deliveries drain
        self.stats.sent += 1
        self.producer.poll(0)
        return mid

    def run(self, *, count: int | None = None, duration_s: float | None = None,
            rate: float | None = None, value_size: int = 100, keys: int | None = None,
            partition: int | None = None, stop: threading.Event | None = None,
            drain_timeout_s: float = 180.0) -> WorkloadStats:
        """Sends until ``count`` records or ``duration_s`` (always bounded), then drains."""
        start = paced_sends(lambda key: self.send_one(value_size, key, partition), count=count,
                            duration_s=duration_s, rate=rate, keys=keys, stop=stop,
                            wait=self.producer.poll)
        self.drain(drain_timeout_s)
        self.stats.seconds = time.monotonic() - start
        return self.stats

    def drain(self, timeout_s: float) -> int:
        """Waits for outstanding deliveries; returns how many are still unresolved."""
        left = self.producer.flush(timeout_s)
        self.history.flush()
        return int(left)

    def close(self) -> None:
        self.drain(5)


class KafkaConsumerClient:
    """Reads records and records them (``run`` phase) or reads a whole topic (``recovery``)."""

    def __init__(self, bootstrap: str, topic: str, history: HistoryWriter, *,
                 group: str | None = None, isolation_level: str = "read_uncommitted",
                 extra: Mapping[str, Any] | None = None) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self._topic_js = json.dumps(topic)
        self._position: dict[int, int] = {}
        self.history = history
        self.group = group or f"chaos-{uuid.uuid4().hex[:8]}"
        self.isolation_level = isolation_level
        self.extra = dict(extra or {})
        self.stats = WorkloadStats(history.client)

    def _consumer(self, **over: Any) -> Any:
        from confluent_kafka import Consumer

        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "group.id": self.group,
                                "auto.offset.reset": "earliest", "enable.auto.commit": True,
                                "isolation.level": self.isolation_level, "logger": LIBRDKAFKA_LOG,
                                "socket.connection.setup.timeout.ms": 5000,
                                "enable.partition.eof": False}
        conf.update(self.extra)
        conf.update(over)
        return Consumer(conf)

    def _record(self, msgs: list[Any], phase: str) -> None:
        """Records a consumed batch (errors handled, records as poll events) in one write."""
        hist = self.history
        head = f'{hist.head("poll")},"phase":"{phase}","mid":'
        topic = f',"topic":{self._topic_js},"partition":'
        tail = f',"isolation":"{self.isolation_level}"}}\n'
        recovery = phase == "recovery"
        lines = []
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if lines:  # keep the order of records and resets
                    self.stats.polled += len(lines)
                    hist.write_lines(lines)
                    lines = []
                self._on_error(err, phase)
                continue
            mid = parse_mid(msg.value())
            key = msg.key()
            epoch = msg.leader_epoch()
            part, offset = msg.partition(), msg.offset()
            lines.append(f'{head}{"null" if mid is None else chr(34) + mid + chr(34)}{topic}'
                         f'{part},"offset":{offset},"epoch":{"null" if epoch is None else epoch},'
                         f'"ts":{msg.timestamp()[1]},'
                         f'"key":{_js(key.decode("utf-8", "replace")) if key else "null"}{tail}')
            if recovery:
                self._position[part] = offset
        self.stats.polled += len(lines)
        if lines:
            hist.write_lines(lines)

    def _on_error(self, err: Any, phase: str) -> None:
        code = err.name()
        self.stats.errors[code] = self.stats.errors.get(code, 0) + 1
        if code in ("_AUTO_OFFSET_RESET", "OFFSET_OUT_OF_RANGE"):
            self.history.record("reset", phase=phase, topic=self.topic, partition=None,
                                reason="offset-out-of-range", detail=err.str())
        elif code in ("_LOG_TRUNCATION",):
            self.history.record("reset", phase=phase, topic=self.topic, partition=None,
                                reason="truncation", detail=err.str())

    def run(self, *, count: int | None = None, duration_s: float | None = None,
            stop: threading.Event | None = None, max_s: float = 3600.0) -> WorkloadStats:
        """Subscribes and reads until ``count``, ``duration_s``, ``stop`` or ``max_s``."""
        def on_assign(consumer: Any, parts: list[Any]) -> None:
            for p in parts:
                self.history.record("reset", phase="run", topic=p.topic, partition=p.partition,
                                    reason="rebalance", to=None)

        consumer = self._consumer()
        consumer.subscribe([self.topic], on_assign=on_assign)
        start = time.monotonic()
        end = start + min(duration_s if duration_s is not None else max_s, max_s)
        try:
            while time.monotonic() < end and (count is None or self.stats.polled < count):
                if stop is not None and stop.is_set():
                    break
                self._record(consumer.consume(500, 0.2), "run")
        finally:
            consumer.close()
            self.history.flush()
        self.stats.seconds = time.monotonic() - start
        return self.stats

    def read_all(self, partitions: int, *, phase: str = "recovery", timeout_s: float = 120.0,
                 idle_s: float = 10.0) -> WorkloadStats:
        """Reads every partition from the beginning up to its current end offset."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        consumer = self._consumer(**{"group.id": f"chaos-recovery-{uuid.uuid4().hex[:8]}",
                                     "enable.auto.commit": False})
        start = time.monotonic()
        try:
            ends: dict[int, int] = {}
            for p in range(partitions):
                _, high = consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=30)
                ends[p] = high
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(partitions)])
            position = self._position
            position.update({p: -1 for p in range(partitions)})
            last_progress = time.monotonic()
            while any(position[p] + 1 < ends[p] for p in ends):
                if time.monotonic() - start > timeout_s or time.monotonic() - last_progress > idle_s:
                    break
                before = self.stats.polled
                batch = consumer.consume(1000, 0.5)
                self._record(batch, phase)
                if self.stats.polled > before:
                    last_progress = time.monotonic()
                if not batch and all(position[p] + 1 >= ends[p] or ends[p] == 0 for p in ends):
                    break
        finally:
            consumer.close()
            self.history.flush()
        self.stats.seconds = time.monotonic() - start
        return self.stats
