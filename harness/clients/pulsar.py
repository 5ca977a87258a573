"""Instrumented Pulsar producer and consumer (pulsar-client) writing the history.

Positions are MessageIds: ``ledger``, ``entry``, ``partition``, ``batch``
(see :mod:`harness.history`). The producer records ``invoke`` before each
``send_async`` and one of ``ok`` / ``fail`` / ``info`` from its callback, and a
``stall`` event whenever the send call itself blocked the caller (queue or
memory limit full: the Pulsar-at-scale finding of shared/seeds/000). A subscribed
consumer records a ``poll`` per message (it acknowledges each); the recovery read (a
reader per partition) a ``polls`` line per :data:`READ_BATCH` messages.

The Python client (a C++ binding) has no ``memoryLimitBytes`` setting: a case
that sets ``memory_limit_bytes`` is recorded in the history's ``meta`` event
as not applied.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..history import HistoryWriter, make_value, parse_mid
from . import paced_batches
from .columns import ENCODE, all_ints_json, ints_json, mids_json
from .jvm import JavaProgram
from .kafka import WorkloadStats

if TYPE_CHECKING:
    from ..backend.cluster import Cluster

__all__ = ["PulsarProducerClient", "PulsarConsumerClient", "PulsarJavaProducer", "client_for"]

# Results after which the message provably never reached a broker.
_DEFINITE_FAILURES = frozenset({"ProducerQueueIsFull", "MessageTooBig", "InvalidMessage",
                                "InvalidTopicName", "MemoryBufferIsFull"})
#: The recovery read writes a ``polls`` line per this many messages.
READ_BATCH = 1000
#: A send call blocked longer than this is recorded as a stall.
STALL_S = 0.05
log = logging.getLogger(__name__)
_LOG = logging.getLogger("harness.pulsar-client")
_LOG.addHandler(logging.NullHandler())
_LOG.propagate = False


def _topic(topic: str) -> str:
    return topic if "://" in topic else f"persistent://public/default/{topic}"


def client_for(service_url: str) -> Any:
    """A pulsar.Client on the brokers' ``external`` (loopback) listener, its own statistics
    off (as pulsar-perf runs its client): the history is the harness's record, and with them
    on the client updates its latency accumulators under a lock for every message, for a log
    line nothing reads."""
    import pulsar

    return pulsar.Client(service_url, listener_name="external", operation_timeout_seconds=30,
                         connection_timeout_ms=5000, logger=_LOG, stats_interval_in_seconds=0)


#: errors of a producer's creation that a moment later may not recur: the topic was being
#: loaded or moved (its broker answered the lookup before it could serve it)
_CONNECT_RETRIABLE = ("ConnectError", "ServiceUnitNotReady", "LookupError")
#: how long a producer's creation is tried again on them
CONNECT_RETRY_S = 20.0


def create_producer(client: Any, topic: str, history: HistoryWriter | None = None, **kwargs: Any) -> Any:
    """``client.create_producer`` tried again for :data:`CONNECT_RETRY_S` on the errors of a
    topic being loaded or moved (a producer created right after an unload met ConnectError
    on Pulsar 3.3.2), every half second; the attempts are recorded when there were more than
    one. Other errors, and the last of these, are raised."""
    from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_fixed

    attempts = 0
    for attempt in Retrying(retry=retry_if_exception(lambda e: type(e).__name__ in _CONNECT_RETRIABLE),
                            stop=stop_after_delay(CONNECT_RETRY_S), wait=wait_fixed(0.5), reraise=True):
        with attempt:
            attempts += 1
            producer = client.create_producer(topic, **kwargs)
    if attempts > 1 and history is not None:
        history.record("meta", connect_attempts=attempts, topic=topic)
    return producer


def _position(msg_id: Any) -> dict[str, Any]:
    return {"partition": max(msg_id.partition(), 0), "ledger": msg_id.ledger_id(),
            "entry": msg_id.entry_id(), "batch": msg_id.batch_index(), "offset": None}


class PulsarProducerClient:
    """Sends unique, self-identifying messages and records every outcome."""

    def __init__(self, service_url: str, topic: str, history: HistoryWriter, spec: Any) -> None:
        self.topic = _topic(topic)
        self.history = history
        self.name = history.client
        self.client = client_for(service_url)
        kwargs: dict[str, Any] = {"send_timeout_millis": spec.send_timeout_ms,
                                  "batching_enabled": spec.batching, "block_if_queue_full": True,
                                  "producer_name": f"{self.name}-{uuid.uuid4().hex[:6]}"}
        if spec.max_pending_messages is not None:
            kwargs["max_pending_messages"] = spec.max_pending_messages
        if spec.max_pending_messages_across_partitions is not None:
            kwargs["max_pending_messages_across_partitions"] = spec.max_pending_messages_across_partitions
        if spec.batching_max_messages is not None:
            kwargs["batching_max_messages"] = spec.batching_max_messages
        if spec.batching_max_bytes is not None:
            kwargs["batching_max_allowed_size_in_bytes"] = spec.batching_max_bytes
        if spec.batching_max_publish_delay_us is not None:
            kwargs["batching_max_publish_delay_ms"] = max(1, spec.batching_max_publish_delay_us // 1000)
        history.record("meta", system="pulsar", producer=kwargs,
                       not_applied={"memory_limit_bytes": spec.memory_limit_bytes}
                       if spec.memory_limit_bytes is not None else None)
        self.producer = create_producer(self.client, self.topic, history, **kwargs)
        self._kwargs = kwargs
        #: partition -> a producer of that partition alone (a workload's ``partition``)
        self._partition_producers: dict[int, Any] = {}
        try:  # a single-partition topic: every send's partition is known (report: send stalls)
            parts = self.client.get_topic_partitions(self.topic)
            self._partition_json = ',"partition":0' if len(parts) == 1 else ""
        except Exception:
            self._partition_json = ""
        self._seq = 0
        self._topic_js = json.dumps(self.topic)
        #: sends made, and sends with an outcome (a callback, or a send that raised)
        self._issued = 0
        self._done = 0
        self._lock = threading.Lock()
        self.stats = WorkloadStats(self.name)

    def prepare(self, partition: int | None) -> None:
        """Connects the producer that sends to ``partition`` (None: the topic's) now rather
        than at its first send."""
        if partition is not None:
            self._producer_for(partition)

    def _producer_for(self, partition: int | None) -> Any:
        """The producer of ``partition`` alone (the client's router picks no partition a
        workload names), or the topic's (None, or a topic of one partition)."""
        if partition is None or self._partition_json:
            return self.producer
        producer = self._partition_producers.get(partition)
        if producer is None:
            # a name of its own: the topic's producer holds its name on every partition
            kwargs = {**self._kwargs, "producer_name": f"{self._kwargs.get('producer_name')}-p{partition}"}
            producer = create_producer(self.client, f"{self.topic}-partition-{partition}", self.history,
                                       **kwargs)
            self._partition_producers[partition] = producer
        return producer

    def _callback(self, mid: str, res: Any, msg_id: Any, partition: int | None = None) -> None:
        name = getattr(res, "name", str(res))
        if name == "Ok":
            hist = self.history
            part = max(msg_id.partition(), 0) if partition is None else partition
            hist.write_line(f'{hist.head("ok")},"mid":"{mid}","topic":{self._topic_js},'
                            f'"partition":{part},"ledger":{msg_id.ledger_id()},'
                            f'"entry":{msg_id.entry_id()},"batch":{msg_id.batch_index()},"offset":null}}\n')
            self.stats.ok += 1
        else:
            self.stats.errors[name] = self.stats.errors.get(name, 0) + 1
            kind = "fail" if name in _DEFINITE_FAILURES else "info"
            self.history.record(kind, mid=mid, error=name)
            setattr(self.stats, kind, getattr(self.stats, kind) + 1)
        with self._lock:  # callbacks may come from more than one of the client's threads
            self._done += 1

    def send_one(self, value_size: int = 100, key: str | None = None,
                 partition: int | None = None, due: float | None = None) -> str:
        """Sends one message (``due``: when the paced schedule had it due, recorded)."""
        return self.send_batch([key], value_size, partition, due)[0]

    def send_batch(self, keys: list[str | None], value_size: int = 100, partition: int | None = None,
                   due: float | None = None, every: float = 0.0) -> list[str]:
        """Sends one message per key, recorded first as one ``invokes`` line (``due``,
        ``every``: the paced schedule, harness.history); returns their ids."""
        first = self._seq + 1
        self._seq += len(keys)
        mids = [f"{self.name}-{n}" for n in range(first, self._seq + 1)]
        n = len(mids)
        known = partition if partition is not None else (0 if self._partition_json else None)
        parts_js = "null" if known is None else all_ints_json([known] * n, n)
        keys_js = "null" if keys.count(None) == n else ENCODE(keys)
        sched = "" if due is None else f',"due":{due:.6f},"every":{every:.9g}'
        mids_js = '["' + '","'.join(mids) + '"]'  # ids of name and number: nothing to escape
        hist = self.history
        hist.write_line(f'{hist.head("invokes")},"topic":{self._topic_js},"mids":{mids_js},'
                        f'"keys":{keys_js},"partitions":{parts_js}{sched}}}\n')
        producer = self._producer_for(partition)
        for mid, key in zip(mids, keys, strict=True):
            self._issued += 1
            t0 = time.monotonic()
            kwargs: dict[str, Any] = {"partition_key": key} if key is not None else {}
            try:
                producer.send_async(make_value(mid, value_size),
                                    lambda res, msg_id, mid=mid: self._callback(mid, res, msg_id, partition),
                                    **kwargs)
            except Exception as exc:  # raised before the message was queued: it was never sent
                self.history.record("fail", mid=mid, error=f"{type(exc).__name__}: {exc}")
                self.stats.fail += 1
                with self._lock:
                    self._done += 1
            blocked = time.monotonic() - t0
            if blocked > STALL_S:
                if known is not None:
                    self.history.record("stall", mid=mid, seconds=round(blocked, 4), partition=known)
                else:
                    self.history.record("stall", mid=mid, seconds=round(blocked, 4))
            self.stats.sent += 1
        return mids

    def run(self, *, count: int | None = None, duration_s: float | None = None,
            rate: float | None = None, value_size: int = 100, keys: int | None = None,
            partition: int | None = None, stop: threading.Event | None = None,
            drain_timeout_s: float = 180.0) -> WorkloadStats:
        """Sends until ``count`` messages or ``duration_s`` (always bounded), then drains."""
        every = 1.0 / rate if rate else 0.0
        start = paced_batches(lambda ks, due: self.send_batch(ks, value_size, partition, due, every),
                              count=count, duration_s=duration_s, rate=rate, keys=keys, stop=stop,
                              wait=time.sleep)
        self.drain(drain_timeout_s)
        self.stats.seconds = time.monotonic() - start
        return self.stats

    def drain(self, timeout_s: float) -> int:
        """Waits (at most ``timeout_s``) until every send has its outcome; returns how many
        have none."""
        for producer in (self.producer, *self._partition_producers.values()):
            try:
                producer.flush()
            except Exception:
                pass  # the callbacks report each message's fate
        deadline = time.monotonic() + timeout_s
        while self._issued > self._done and time.monotonic() < deadline:
            time.sleep(0.01)
        self.history.flush()
        return max(self._issued - self._done, 0)

    def close(self) -> None:
        self.drain(5)
        try:
            for producer in (*self._partition_producers.values(), self.producer):
                producer.close()
        finally:
            self.client.close()


class PulsarConsumerClient:
    """Subscribes (run phase) or reads every partition from the start (recovery)."""

    def __init__(self, service_url: str, topic: str, history: HistoryWriter, spec: Any,
                 subscription: str | None = None) -> None:
        self.service_url = service_url
        self.topic = _topic(topic)
        self.history = history
        self.spec = spec
        self.subscription = subscription or f"chaos-{uuid.uuid4().hex[:8]}"
        self.stats = WorkloadStats(history.client)

    def _record(self, msg: Any, phase: str) -> None:
        key = msg.partition_key() if msg.partition_key() else None
        sub = {"subscription": self.subscription,
               "subscription_type": self.spec.subscription_type} if phase == "run" else {}
        self.history.record("poll", phase=phase, mid=parse_mid(msg.data()), topic=self.topic,
                            ts=msg.publish_timestamp(), key=key, redelivery=msg.redelivery_count(),
                            **sub, **_position(msg.message_id()))
        self.stats.polled += 1

    def _write_polls(self, msgs: list[Any], phase: str) -> None:
        """One ``polls`` line for ``msgs`` (a reader's, no subscription), a column at a time
        (the position columns are :func:`_position`'s fields): the same events as a
        ``_record`` per message, for about an eighth of its cost (3 µs a message instead of
        25 on a slow machine)."""
        n = len(msgs)
        ids = [m.message_id() for m in msgs]
        keys = [m.partition_key() or None for m in msgs]
        hist = self.history
        hist.write_line(
            f'{hist.head("polls")},"phase":{json.dumps(phase)},"topic":{json.dumps(self.topic)},'
            f'"partitions":{ints_json([max(i.partition(), 0) for i in ids], n)},'
            f'"ledgers":{all_ints_json([i.ledger_id() for i in ids], n)},'
            f'"entries":{all_ints_json([i.entry_id() for i in ids], n)},'
            f'"batches":{ints_json([i.batch_index() for i in ids], n)},'
            f'"mids":{mids_json([m.data() for m in msgs], n)},'
            f'"tss":{all_ints_json([m.publish_timestamp() for m in msgs], n)},'
            f'"keys":{ENCODE(keys) if any(keys) else "null"},'
            f'"redeliveries":{ints_json([m.redelivery_count() for m in msgs], n)}}}\n')
        self.stats.polled += n

    def run(self, *, count: int | None = None, duration_s: float | None = None,
            stop: threading.Event | None = None, max_s: float = 3600.0) -> WorkloadStats:
        import pulsar

        client = client_for(self.service_url)
        start = time.monotonic()
        end = start + min(duration_s if duration_s is not None else max_s, max_s)
        try:
            consumer = client.subscribe(self.topic, self.subscription,
                                        consumer_type=getattr(pulsar.ConsumerType,
                                                              self.spec.subscription_type.replace("_", "")),
                                        initial_position=pulsar.InitialPosition.Earliest)
            while time.monotonic() < end and (count is None or self.stats.polled < count):
                if stop is not None and stop.is_set():
                    break
                try:
                    msg = consumer.receive(timeout_millis=200)
                except pulsar.Timeout:
                    continue
                self._record(msg, "run")
                consumer.acknowledge(msg)
            consumer.close()
        finally:
            client.close()
            self.history.flush()
        self.stats.seconds = time.monotonic() - start
        return self.stats

    def _reader(self, client: Any, partition: int, deadline: float) -> Any:
        """A reader of ``partition`` from its first message. A creation that times out (the
        client's lookup or subscribe unanswered for its operation timeout: a broker that
        lost its metadata session and still answers for the topic) is tried again until
        ``deadline``; each try is recorded (``lookup_timeouts`` in the stats)."""
        import pulsar

        while True:
            try:
                return client.create_reader(f"{self.topic}-partition-{partition}", pulsar.MessageId.earliest)
            except pulsar.Timeout:
                self.stats.errors["lookup_timeouts"] = self.stats.errors.get("lookup_timeouts", 0) + 1
                if time.monotonic() >= deadline:
                    raise
                log.warning("recovery reader of partition %d: no answer in the client's operation "
                            "timeout; trying again", partition)

    def read_all(self, partitions: int, *, phase: str = "recovery", timeout_s: float = 120.0
                 ) -> WorkloadStats:
        """Reads each partition from the earliest message to the last one available; a
        ``polls`` line per :data:`READ_BATCH` messages."""
        import pulsar

        client = client_for(self.service_url)
        start = time.monotonic()
        try:
            for p in range(partitions):
                reader = self._reader(client, p, start + timeout_s)
                msgs: list[Any] = []
                blind = False  # the broker cannot say where the partition ends
                try:
                    while time.monotonic() - start < timeout_s:
                        if not blind:
                            try:
                                if not reader.has_message_available():
                                    break
                            except pulsar.BrokerMetadataError:
                                # the broker could not read the last entry to tell the end (no
                                # bookie has it: seen after a power loss of every bookie, with
                                # autoSkipNonRecoverableData); read until nothing comes for 10 s
                                blind = True
                                self.stats.errors["end_unknown"] = self.stats.errors.get("end_unknown", 0) + 1
                                log.warning("recovery reader of partition %d: the broker cannot tell "
                                            "the last message; reading until 10 s pass without one", p)
                        try:
                            msgs.append(reader.read_next(timeout_millis=10_000))
                        except pulsar.Timeout:
                            if blind:
                                break
                            continue  # available but not delivered yet (a bookie recovering)
                        if len(msgs) >= READ_BATCH:
                            self._write_polls(msgs, phase)
                            msgs = []
                finally:
                    if msgs:  # what was read is recorded, also when a read fails
                        self._write_polls(msgs, phase)
                    reader.close()
        finally:
            client.close()
            self.history.flush()
        self.stats.seconds = time.monotonic() - start
        return self.stats


# -- the Java producer ----------------------------------------------------------------------
_JAVA_LIBS = "/opt/pulsar/libs/*"
#: Java client settings of a ClientSpec, as the properties the Java program reads.
_JAVA_KEYS = ("max_pending_messages", "max_pending_messages_across_partitions", "memory_limit_bytes",
              "batching_max_publish_delay_us", "batching_max_messages", "batching_max_bytes")


class PulsarJavaProducer(JavaProgram):
    """Runs harness/clients/java/PulsarProducer.java with the Java client of the cluster's image
    (harness.clients.jvm)."""

    source = "PulsarProducer.java"
    libs = _JAVA_LIBS

    def __init__(self, cluster: Cluster, run_dir: Path, topic: str, name: str, spec: Any,
                 ready: threading.Event | None = None) -> None:
        super().__init__(cluster, run_dir, name, ready)
        self.topic = _topic(topic)
        self.spec = spec

    def run(self, *, count: int | None = None, duration_s: float | None = None,
            rate: float | None = None, value_size: int = 100, keys: int | None = None,
            partition: int | None = None, stop: threading.Event | None = None,
            drain_timeout_s: float = 60.0, max_s: float = 600.0) -> WorkloadStats:
        brokers = ",".join(f"{n.name}:6650" for n in self.cluster.spec.nodes_of("pulsar-broker"))
        spec = self.spec
        props = self.properties(
            name=self.name, topic=self.topic, service_url=f"pulsar://{brokers}", **self.files(),
            count=count if count is not None else -1,
            duration_ms=int(duration_s * 1000) if duration_s is not None else -1,
            rate=rate or 0, value_size=value_size, keys=keys or 0,
            partition=partition if partition is not None else -1,
            deadline_ms=int(max_s * 1000), drain_ms=int(drain_timeout_s * 1000),
            batching=str(spec.batching).lower(), send_timeout_ms=spec.send_timeout_ms,
            block_if_queue_full=str(spec.block_if_queue_full).lower(),
            **{k: getattr(spec, k) for k in _JAVA_KEYS})
        return self.execute(props, stop=stop, max_s=max_s, drain_timeout_s=drain_timeout_s)
