"""Instrumented Kafka producer and consumer (confluent-kafka) writing the history.

The producer records ``invoke`` before each send and exactly one of ``ok``,
``fail`` or ``info`` when librdkafka reports the delivery: ``fail`` only for
errors that prove the record was not written, ``info`` (unknown) otherwise —
a timed-out send may well be in the log. The consumer records every record it
reads (a ``polls`` line per consumed batch) and every position change it is told
about (rebalance, offset reset, log truncation), never inferring one from the
offsets themselves: that is the checker's job.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..history import HistoryWriter, make_value, parse_mid
from . import paced_batches
from .columns import ENCODE, all_ints_json, ints_json, keys_json, mids_json

#: librdkafka's own log lines (connection refused while a broker is down, ...) go here,
#: not to the terminal; the history records what matters.
LIBRDKAFKA_LOG = logging.getLogger("harness.librdkafka")
LIBRDKAFKA_LOG.addHandler(logging.NullHandler())
LIBRDKAFKA_LOG.propagate = False

__all__ = ["KafkaProducerClient", "KafkaConsumerClient", "KafkaCopierClient", "WorkloadStats",
           "producer_config", "consumer_config"]

# Errors after which the broker provably did not append the record (on their own: see
# _RETRIED_REJECTIONS).
_DEFINITE_FAILURES = frozenset({
    "MSG_SIZE_TOO_LARGE", "NOT_ENOUGH_REPLICAS", "TOPIC_AUTHORIZATION_FAILED",
    "UNKNOWN_TOPIC_OR_PART", "INVALID_TOPIC_EXCEPTION", "RECORD_LIST_TOO_LARGE",
    "INVALID_REQUIRED_ACKS", "CLUSTER_AUTHORIZATION_FAILED", "_PURGE_QUEUE", "_QUEUE_FULL",
    "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC", "_INVALID_ARG", "_MSG_SIZE_TOO_LARGE",
    "INVALID_RECORD", "UNSUPPORTED_FOR_MESSAGE_FORMAT",
})


#: Rejections librdkafka retries: after retries, the last one does not prove that an earlier
#: attempt (timed out, possibly appended) was not written. Seen by harness explore on 0.10.2.2:
#: a send that ended in NOT_ENOUGH_REPLICAS was in the log (an earlier attempt had reached the
#: leader killed at HW-LEADER-ONLY). Definite only for a producer that does not retry.
_RETRIED_REJECTIONS = frozenset({"NOT_ENOUGH_REPLICAS", "UNKNOWN_TOPIC_OR_PART"})


def _js(text: str | None) -> str:
    return "null" if text is None else json.dumps(text)


#: errors of a watermark request that a later one may not meet (a leader moving, metadata
#: not yet caught up after a fault)
_TRANSIENT = frozenset({"NOT_LEADER_FOR_PARTITION", "NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE",
                        "UNKNOWN_TOPIC_OR_PART", "_TIMED_OUT", "_TRANSPORT", "REQUEST_TIMED_OUT",
                        "_ALL_BROKERS_DOWN", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH"})


def take(consumer: Any, most: int, timeout_s: float) -> list[Any]:
    """Up to ``most`` messages (or error events), returned as soon as there is one.
    librdkafka's batch consume (``consume(n, timeout)``) waits until it has ``n`` or the
    timeout has passed: at 1,000 records/s a ``consume(500, 0.2)`` returns every 0.2 s, and
    the poll time recorded for its records (the end of end-to-end latency) was late by up to
    that (a 57 ms p50 at 5,000/s, measured, for a 1 ms delivery). So: what is there now;
    else wait for one (``poll``), then take what came with it."""
    msgs = consumer.consume(most, 0)
    if msgs:
        return list(msgs)
    first = consumer.poll(timeout_s)
    if first is None:
        return []
    return [first, *consumer.consume(most - 1, 0)] if most > 1 else [first]


def _end_offset(consumer: Any, tp: Any, deadline: float) -> int:
    """The partition's end offset (high watermark), asked again while the answer is a
    transient error (a leader moving after a fault) until ``deadline`` (monotonic)."""
    from confluent_kafka import KafkaException

    while True:
        try:
            wait = min(30.0, max(1.0, deadline - time.monotonic()))
            return int(consumer.get_watermark_offsets(tp, timeout=wait)[1])
        except KafkaException as exc:
            err: Any = exc.args[0] if exc.args else None
            name = err.name() if hasattr(err, "name") else str(exc)
            retriable = name in _TRANSIENT or bool(getattr(err, "retriable", lambda: False)())
            if not retriable or time.monotonic() >= deadline:
                detail = err.str() if hasattr(err, "str") else str(exc)
                raise RuntimeError(f"no end offset for {tp.topic}-{tp.partition}: {name} ({detail})") from exc
            time.sleep(0.5)


#: how long past its own timeout a transactional API call may take before the client gives
#: up on it (librdkafka issues #5456, #5511: send_offsets_to_transaction can block past its
#: timeout, without end, once the group coordinator's broker was down)
STUCK_GRACE_S = 15.0


class StuckCall(Exception):
    """A librdkafka call that did not return within its own timeout plus STUCK_GRACE_S."""


def bounded(call: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """``call()`` (a blocking librdkafka call given ``timeout_s``) on a helper thread: its
    result or its exception; :class:`StuckCall` when it has not returned ``STUCK_GRACE_S``
    after its timeout (the thread is left behind, blocked in the library)."""
    done = threading.Event()
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=body, name=f"librdkafka-{what}", daemon=True).start()
    if not done.wait(timeout_s + STUCK_GRACE_S):
        raise StuckCall(f"{what} did not return within {timeout_s + STUCK_GRACE_S:.0f} s "
                        f"(its timeout {timeout_s:.0f} s)")
    if "error" in box:
        raise box["error"]
    return box.get("value")


class RecoveryShort(Exception):
    """A recovery read stopped below the end offset of some partitions (``short``:
    partition -> (where the read got to, the end offset))."""

    def __init__(self, short: dict[int, tuple[int, int]]) -> None:
        super().__init__(short)
        self.short = short

    def describe(self, topic: str) -> str:
        return "; ".join(f"{topic}-{p} read to offset {got} of high watermark {end}"
                         for p, (got, end) in sorted(self.short.items()))


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
        # librdkafka refuses a delivery timeout longer than the transaction's
        conf["transaction.timeout.ms"] = max(60000, client.delivery_timeout_ms)

    conf.update(dict(client.extra))
    return conf


def consumer_config(bootstrap: str, group: str, isolation_level: str = "read_uncommitted",
                    extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """librdkafka settings of the harness's consumers (``extra`` last).

    ``fetch.queue.backoff.ms``: once a partition's local queue holds ``queued.min.messages``
    (100000), librdkafka postpones its next fetch by this much, 1000 ms by default: a consumer
    that handles records more slowly than they arrive (any consumer that records them)
    then empties the queue and waits for most of a second, every second (librdkafka issue
    #2879). 10 ms keeps the queue fed; the queue bounds stay as they are.
    """
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group,
                            "auto.offset.reset": "earliest", "enable.auto.commit": True,
                            "isolation.level": isolation_level, "logger": LIBRDKAFKA_LOG,
                            "socket.connection.setup.timeout.ms": 5000,
                            "enable.partition.eof": False, "fetch.queue.backoff.ms": 10}
    conf.update(extra or {})
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
        # librdkafka retries by default (retries unset: INT32_MAX)
        self._retries = int(self.conf.get("retries", self.conf.get("message.send.max.retries", 2**31 - 1)))
        self._seq = itertools.count(1)  # next() is atomic: sends from several threads are fine
        self._pad = b"x" * 4096
        self.stats = WorkloadStats(self.name)
        # acks (mid, partition, offset, leader epoch) of the delivery callbacks run by one
        # poll/flush call, written as one ``oks`` line when it returns (a line per ack cost
        # more than the send)
        self._acks: list[tuple[str | None, int, int, int | None]] = []
        self._acks_lock = threading.Lock()
        # the ids this producer makes are plain (parse_mid would give them back as they
        # are) unless the client name is not an id: then parse_mid reads each one
        long_mid = f"{self.name}-{10 ** 15}"
        self._plain_mids = parse_mid(make_value(long_mid)) == long_mid
        # the open transaction's batch field (``,"tx":...``) of the invoke lines, or ""
        self._tx_field = ""
        #: whether the last transaction ended with a commit that returned
        self.committed = False

    def _on_delivery(self, err: Any, msg: Any) -> None:
        value = msg.value()
        mid = (value.split(b"|", 1)[0].decode() if self._plain_mids and value is not None
               else parse_mid(value))
        if err is None:
            acks = self._acks
            acks.append((mid, msg.partition(), msg.offset(), msg.leader_epoch()))
            self.stats.ok += 1
            if len(acks) >= 1000:
                self._write_acks()
            return
        self._write_acks()  # the outcomes keep their order
        code = err.name()
        self.stats.errors[code] = self.stats.errors.get(code, 0) + 1
        if code in _DEFINITE_FAILURES and not (self._retries and code in _RETRIED_REJECTIONS):
            self.history.record("fail", mid=mid, error=f"{code}: {err.str()}")
            self.stats.fail += 1
        else:
            self.history.record("info", mid=mid, error=f"{code}: {err.str()}")
            self.stats.info += 1

    def _write_acks(self) -> None:
        """Writes the acks gathered by the delivery callbacks so far, in their order, as one
        ``oks`` line."""
        acks = self._acks
        if acks:
            with self._acks_lock:  # callbacks in another thread only append behind ``n``
                n = len(acks)
                batch = acks[:n]
                del acks[:n]
                if batch:
                    self.history.write_line(self._oks_line(batch))

    def _oks_line(self, batch: list[tuple[str | None, int, int, int | None]]) -> str:
        n = len(batch)
        mids, partitions, offsets, epochs = (list(col) for col in zip(*batch, strict=False))
        return (f'{self.history.head("oks")},"topic":{self._topic_js},"mids":{self._ids_json(mids)},'
                f'"partitions":{ints_json(partitions, n)},"offsets":{all_ints_json(offsets, n)},'
                f'"epochs":{ints_json(epochs, n)}}}\n')

    def _ids_json(self, mids: Sequence[str | None]) -> str:
        """JSON of message ids: joined as they are when this producer made them all."""
        if self._plain_mids and None not in mids:  # ids we made: nothing to escape
            return '["' + '","'.join(mids) + '"]'  # type: ignore[arg-type]
        return ENCODE(mids)

    def poll(self, timeout: float = 0) -> int:
        """``Producer.poll`` (serves delivery callbacks), then writes their ``oks`` line."""
        served = self.producer.poll(timeout)
        if self._acks:
            self._write_acks()
        return served

    def send_one(self, value_size: int = 100, key: str | None = None,
                 partition: int | None = None) -> str:
        """Queues one record; returns its message id."""
        mid = f"{self.name}-{next(self._seq)}"
        hist = self.history
        hist.write_line(f'{hist.head("invoke")},"mid":"{mid}","topic":{self._topic_js},'
                        f'"key":{_js(key)}{self._tx_field}}}\n')
        self._produce(mid, key, value_size, partition)
        self.stats.sent += 1
        self.poll(0)
        return mid

    def send_batch(self, keys: list[str | None], value_size: int = 100,
                   partition: int | None = None, due: float | None = None, every: float = 0.0,
                   srcs: list[str | None] | None = None) -> list[str]:
        """Queues one record per key, recorded first as one ``invokes`` line; returns the ids.
        ``due``, ``every``: the paced schedule (harness.history: the first send was due at
        ``due``, the next ones every ``every`` s after it), recorded on the line. ``srcs``:
        a copier's, the input id each send copies (the ``srcs`` column).

        If a send raises (other than a full local queue, which is waited out), the sends
        after it were recorded but never made: they stay without an outcome (unacked).
        """
        mids = [f"{self.name}-{next(self._seq)}" for _ in keys]
        n = len(mids)
        keys_js = "null" if keys.count(None) == n else ENCODE(keys)
        parts_js = "null" if partition is None else all_ints_json([partition] * n, n)
        hist = self.history
        sched = "" if due is None else f',"due":{due:.6f},"every":{every:.9g}'
        if srcs is not None:
            sched += f',"srcs":{ENCODE(srcs)}'
        hist.write_line(f'{hist.head("invokes")},"topic":{self._topic_js},"mids":{self._ids_json(mids)},'
                        f'"keys":{keys_js},"partitions":{parts_js}{self._tx_field}{sched}}}\n')
        for mid, key in zip(mids, keys, strict=False):
            self._produce(mid, key, value_size, partition)
            self.stats.sent += 1
        self.poll(0)
        return mids

    def _produce(self, mid: str, key: str | None, value_size: int, partition: int | None) -> None:
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
                return
            except BufferError:
                self.poll(0.05)  # local queue full: let deliveries drain

    def run(self, *, count: int | None = None, duration_s: float | None = None,
            rate: float | None = None, value_size: int = 100, keys: int | None = None,
            partition: int | None = None, stop: threading.Event | None = None,
            drain_timeout_s: float = 180.0) -> WorkloadStats:
        """Sends until ``count`` records or ``duration_s`` (always bounded), then drains.
        Sends go in batches (:func:`paced_batches`): one ``invokes`` line each, with its
        schedule when paced (``rate``)."""
        every = 1.0 / rate if rate else 0.0
        start = paced_batches(lambda batch, due: self.send_batch(batch, value_size, partition, due, every),
                              count=count,
                              duration_s=duration_s, rate=rate, keys=keys, stop=stop,
                              wait=self.poll)
        self.drain(drain_timeout_s)
        self.stats.seconds = time.monotonic() - start
        return self.stats

    def run_transactions(self, *, size: int, aborts: Callable[[int], bool], count: int | None = None,
                         duration_s: float | None = None, rate: float | None = None,
                         value_size: int = 100, keys: int | None = None, partition: int | None = None,
                         stop: threading.Event | None = None, call_timeout_s: float = 30.0,
                         retries: int = 3, hold_at: int | None = None,
                         hold_s: float = 0.0, max_restarts: int = 3) -> WorkloadStats:
        """Sends in transactions of ``size`` records until ``count`` records or ``duration_s``
        (always bounded) or ``stop``: begin, the sends (one ``invokes`` line carrying the
        ``tx``), a flush (so that they are in the log), then commit, or abort when
        ``aborts(i)`` says so for transaction ``i``. Every
        call is recorded as ``txn`` events (harness.history): ``invoke``, then ``ok``,
        ``fail`` (the broker refused: the transaction is aborted next) or ``info`` (unknown:
        a timeout; the call is made again, up to ``retries`` times). A fatal error, or a
        transaction whose outcome stays unknown, makes the client replace its producer (a
        ``meta`` event with ``restart``), at most ``max_restarts`` times; then the workload
        ends. ``hold_at``: before ending transaction ``hold_at`` (1-based)
        the producer waits ``hold_s`` (or until ``stop``), recorded as a ``stall`` event: a
        client-side breakpoint, e.g. to let the broker time the transaction out."""
        if count is None and duration_s is None:
            raise ValueError("a workload needs a count or a duration")
        from confluent_kafka import KafkaException

        wall, start = time.time(), time.monotonic()
        every = 1.0 / rate if rate else 0.0
        deadline = start + duration_s if duration_s is not None else None
        producer = self.producer
        try:
            bounded(lambda: producer.init_transactions(call_timeout_s * 2), call_timeout_s * 2,
                    "init_transactions")
        except (KafkaException, StuckCall) as exc:
            raise RuntimeError(f"init_transactions failed: {exc.args[0]}") from exc
        sent = index = 0
        restarts = 0
        try:
            while (count is None or sent < count) and (deadline is None or time.monotonic() < deadline):
                if stop is not None and stop.is_set():
                    break
                n = size if count is None else min(size, count - sent)
                tx = f"{self.name}.t{index + 1}"
                try:
                    self.producer.begin_transaction()
                except KafkaException as exc:
                    self.stats.errors["begin"] = self.stats.errors.get("begin", 0) + 1
                    LIBRDKAFKA_LOG.warning("%s: begin_transaction failed: %s", self.name, exc.args[0])
                    restarts += 1
                    if restarts > max_restarts or not self._restart(f"begin failed: {exc.args[0]}",
                                                                    call_timeout_s):
                        break
                    continue
                self.history.record("txn", tx=tx, action="begin", status="ok")
                self._tx_field = f',"tx":{json.dumps(tx)}'
                try:
                    self.send_batch([f"k{(sent + i) % keys}" if keys else None for i in range(n)],
                                    value_size, partition, due=wall + sent * every if rate else None,
                                    every=every)
                finally:
                    self._tx_field = ""
                sent += n
                # the sends reach the log before the transaction ends (an abort would purge
                # what is still queued): aborted records are then in the log, where
                # read_committed readers must skip them, as in seed 001's example
                self.producer.flush(call_timeout_s)
                self._write_acks()
                action = "abort" if aborts(index) else "commit"
                index += 1
                if index == hold_at and hold_s > 0:
                    self.history.record("stall", tx=tx, reason=f"held before {action}", seconds=hold_s)
                    if stop is None:
                        time.sleep(hold_s)
                    else:
                        stop.wait(hold_s)
                if not self._end_transaction(tx, action, call_timeout_s, retries):
                    # a fatal error (fenced, ...) or an outcome that stays unknown: as an
                    # application would, a new producer with the same id goes on (its
                    # init_transactions ends whatever the old one left open)
                    restarts += 1
                    if restarts > max_restarts or not self._restart(f"after {tx}", call_timeout_s):
                        break
                if rate:
                    ahead = start + sent / rate - time.monotonic()
                    while ahead > 0:
                        self.poll(min(ahead, 0.5))
                        ahead = start + sent / rate - time.monotonic()
        finally:
            self._write_acks()
            self.history.flush()
        self.stats.seconds = time.monotonic() - start
        return self.stats

    def _restart(self, reason: str, timeout_s: float) -> bool:
        """Replaces the producer with a new one of the same transactional id (the old one's
        queued sends are purged: their delivery reports say so); whether it is ready."""
        from confluent_kafka import KafkaException, Producer

        old = self.producer
        try:
            old.purge()
            old.flush(min(timeout_s, 5.0))
        except KafkaException as exc:  # a producer in a fatal state refuses calls
            LIBRDKAFKA_LOG.warning("%s: closing the old producer: %s", self.name, exc.args[0])
        self._write_acks()
        self.history.record("meta", restart=reason)
        self.producer = Producer({**self.conf, "on_delivery": self._on_delivery})
        producer = self.producer
        try:
            bounded(lambda: producer.init_transactions(timeout_s * 2), timeout_s * 2, "init_transactions")
        except StuckCall as exc:
            self.history.record("meta", stuck=str(exc))
            return False
        except KafkaException as exc:
            LIBRDKAFKA_LOG.warning("%s: init_transactions after a restart: %s", self.name, exc.args[0])
            return False
        return True

    def _end_transaction(self, tx: str, action: str, timeout_s: float, retries: int) -> bool:
        """Commits or aborts ``tx``, recording each call; whether the producer can go on."""
        from confluent_kafka import KafkaException

        call = self.producer.commit_transaction if action == "commit" else self.producer.abort_transaction
        self.committed = False
        for _ in range(retries + 1):
            self.history.record("txn", tx=tx, action=action, status="invoke")
            try:
                bounded(lambda: call(timeout_s), timeout_s, f"{action}_transaction")
            except StuckCall as exc:  # its outcome is unknown; the producer is replaced
                self._write_acks()
                self.stats.errors[f"{action}:stuck"] = self.stats.errors.get(f"{action}:stuck", 0) + 1
                self.history.record("txn", tx=tx, action=action, status="info", error=f"stuck: {exc}")
                return False
            except KafkaException as exc:
                err = exc.args[0]
                self._write_acks()
                code = err.name() if hasattr(err, "name") else str(err)
                self.stats.errors[f"{action}:{code}"] = self.stats.errors.get(f"{action}:{code}", 0) + 1
                detail = f"{code}: {err.str() if hasattr(err, 'str') else err}"
                if action == "commit" and getattr(err, "txn_requires_abort", lambda: False)():
                    self.history.record("txn", tx=tx, action=action, status="fail", error=detail)
                    return self._end_transaction(tx, "abort", timeout_s, retries)
                self.history.record("txn", tx=tx, action=action, status="info", error=detail)
                if getattr(err, "fatal", lambda: False)() or not getattr(err, "retriable", lambda: False)():
                    return False
                continue
            self._write_acks()
            self.history.record("txn", tx=tx, action=action, status="ok")
            self.committed = action == "commit"
            return True
        return False

    def drain(self, timeout_s: float) -> int:
        """Waits for outstanding deliveries; returns how many are still unresolved."""
        from confluent_kafka import KafkaException

        try:
            left = self.producer.flush(timeout_s)
        except KafkaException as exc:  # a transactional producer in a fatal state
            LIBRDKAFKA_LOG.warning("%s: flush: %s", self.name, exc.args[0])
            left = len(self.producer)
        finally:
            self._write_acks()
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
        #: whether the polls keep ``_position`` (read_all, in any phase)
        self._tracking = False
        self.history = history
        self.group = group or f"chaos-{uuid.uuid4().hex[:8]}"
        self.isolation_level = isolation_level
        self.extra = dict(extra or {})
        self.stats = WorkloadStats(history.client)

    def _consumer(self, **over: Any) -> Any:
        from confluent_kafka import Consumer

        return Consumer(consumer_config(self.bootstrap, self.group, self.isolation_level,
                                        {**self.extra, **over}))

    def _record(self, msgs: list[Any], phase: str) -> None:
        """Records a consumed batch: a ``polls`` line per run of records between errors.

        An error inside the batch splits it (the records before it, the error's event,
        the records after it), so the history keeps the order of records and resets.
        """
        if not msgs:
            return
        errors = [m.error() for m in msgs]
        if errors.count(None) == len(errors):
            self._write_polls(msgs, phase)
            return
        start = 0
        for i, err in enumerate(errors):
            if err is not None:
                if i > start:
                    self._write_polls(msgs[start:i], phase)
                self._on_error(err, phase)
                start = i + 1
        if start < len(msgs):
            self._write_polls(msgs[start:], phase)

    def _write_polls(self, msgs: list[Any], phase: str) -> None:
        """One ``polls`` line for records without errors, built column by column.

        A line per record cost the consumer more than the read itself; here each field
        costs one list comprehension and the columns are rendered as whole lists.
        """
        n = len(msgs)
        partitions = [m.partition() for m in msgs]
        offsets = [m.offset() for m in msgs]
        epochs = [m.leader_epoch() for m in msgs]
        tss = [m.timestamp()[1] for m in msgs]
        keys = [m.key() for m in msgs]
        hist = self.history
        hist.write_line(
            f'{hist.head("polls")},"phase":{json.dumps(phase)},"topic":{self._topic_js},'
            f'"isolation":{json.dumps(self.isolation_level)},'
            f'"partitions":{ints_json(partitions, n)},"offsets":{all_ints_json(offsets, n)},'
            f'"epochs":{ints_json(epochs, n)},'
            f'"mids":{mids_json([m.value() for m in msgs], n)},"tss":{all_ints_json(tss, n)},'
            f'"keys":{keys_json(keys) if any(keys) else "null"}}}\n')
        self.stats.polled += n
        if self._tracking or phase == "recovery":  # read_all: the last offset of each partition
            if partitions.count(partitions[0]) == n:
                self._position[partitions[0]] = offsets[-1]
            else:
                self._position.update(zip(partitions, offsets, strict=False))

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
                self._record(take(consumer, 500, 0.2), "run")
        finally:
            consumer.close()
            self.history.flush()
        self.stats.seconds = time.monotonic() - start
        return self.stats

    def _fetched_to(self, consumer: Any, ends: dict[int, int]) -> bool:
        """Whether the consumer's next fetch position is at or past ``ends`` in every
        partition: a transaction's marker takes the last offset of a partition, and aborted
        records are skipped by read_committed, so the last record read can sit below it."""
        from confluent_kafka import KafkaException, TopicPartition

        try:
            positions = consumer.position([TopicPartition(self.topic, p) for p in ends])
        except KafkaException:
            return False
        return all(tp.offset >= ends[tp.partition] for tp in positions if tp.partition in ends)

    def read_all(self, partitions: int, *, phase: str = "recovery", timeout_s: float = 120.0,
                 idle_s: float = 10.0) -> WorkloadStats:
        """Reads every partition from the beginning up to its current end offset."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        consumer = self._consumer(**{"group.id": f"chaos-recovery-{uuid.uuid4().hex[:8]}",
                                     "enable.auto.commit": False})
        start = time.monotonic()
        try:
            ends = {p: _end_offset(consumer, TopicPartition(self.topic, p), start + timeout_s)
                    for p in range(partitions)}
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(partitions)])
            position = self._position
            position.update({p: -1 for p in range(partitions)})
            self._tracking = True
            last_progress = time.monotonic()
            while any(position[p] + 1 < ends[p] for p in ends):
                if time.monotonic() - start > timeout_s or time.monotonic() - last_progress > idle_s:
                    break
                before = self.stats.polled
                batch = take(consumer, 1000, 0.5)
                self._record(batch, phase)
                if self.stats.polled > before:
                    last_progress = time.monotonic()
                if not batch and all(position[p] + 1 >= ends[p] or ends[p] == 0 for p in ends):
                    break
                if not batch and self._fetched_to(consumer, ends):
                    break
            short = self._short_of(consumer, ends)
        finally:
            consumer.close()
            self.history.flush()
        self.stats.seconds = time.monotonic() - start
        if short:
            raise RecoveryShort(short)
        return self.stats

    def _short_of(self, consumer: Any, ends: dict[int, int]) -> dict[int, tuple[int, int]]:
        """The partitions whose read stopped below ``ends``: (where the read got to, the
        end). Where it got to is the consumer's next fetch position, or one past the last
        record read where that is further (a marker or an aborted record may end the log)."""
        from confluent_kafka import KafkaException, TopicPartition

        try:
            fetched = {tp.partition: tp.offset for tp in
                       consumer.position([TopicPartition(self.topic, p) for p in ends])}
        except KafkaException:
            fetched = {}
        reached = {p: max(self._position.get(p, -1) + 1, fetched.get(p, -1)) for p in ends}
        return {p: (reached[p], end) for p, end in ends.items() if end > 0 and reached[p] < end}

    @staticmethod
    def high_watermark(bootstrap: str, topic: str, partition: int, timeout_s: float = 15.0) -> int:
        """The partition's high watermark as its leader answers now."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-hw", "log_level": 0,
                             "enable.auto.commit": False})
        try:
            return _end_offset(consumer, TopicPartition(topic, partition), time.monotonic() + timeout_s)
        finally:
            consumer.close()


class KafkaCopierClient:
    """Copies records from one topic to another exactly once, as Kafka's own
    ``transactions_test.py`` runs its copier: a read_committed consumer (no auto commit)
    and a transactional producer; per transaction, the records of one consume call (up to
    ``size``) are sent to the output topic, each as a new id whose invoke carries ``src``
    (the input id: harness.history), then the consumer's positions go into the transaction
    (``send_offsets_to_transaction``) and it is committed, or aborted when ``aborts(i)``
    says so. After any transaction that did not commit (an abort, a refused or unknown
    commit) the consumer goes back to the group's committed offsets (a ``reset`` event,
    reason ``rewind``), so that the records are copied again in a later transaction.

    The producer's history (sends, ``txn`` events) is the producer client's; the consumer's
    polls are the consumer client's (its own history file)."""

    def __init__(self, producer: KafkaProducerClient, consumer: KafkaConsumerClient) -> None:
        self.producer = producer
        self.consumer = consumer
        self.stats = producer.stats

    def run(self, *, size: int, aborts: Callable[[int], bool], count: int | None = None,
            duration_s: float | None = None, value_size: int = 100, stop: threading.Event | None = None,
            call_timeout_s: float = 30.0, retries: int = 3, hold_at: int | None = None,
            hold_s: float = 0.0, max_restarts: int = 3, rewind: str = "committed") -> WorkloadStats:
        """Copies until ``count`` input records are copied in committed transactions, or
        ``duration_s`` (always bounded), or ``stop``. ``rewind``: where the consumer goes
        after a transaction that did not commit: ``committed`` (the group's committed
        offsets: exactly once), or, to check the checker with a broken copier, ``none``
        (it reads on: the records are never copied) or ``beginning`` (it copies everything
        again)."""
        if count is None and duration_s is None:
            raise ValueError("a copier needs a count or a duration")
        from confluent_kafka import KafkaException

        start = time.monotonic()
        deadline = start + duration_s if duration_s is not None else None
        prod, cons = self.producer, self.consumer
        source = cons.topic

        def on_assign(consumer: Any, parts: list[Any]) -> None:
            for p in parts:
                cons.history.record("reset", phase="run", topic=p.topic, partition=p.partition,
                                    reason="rebalance", to=None)

        consumer = cons._consumer(**{"enable.auto.commit": False})
        consumer.subscribe([source], on_assign=on_assign)
        try:
            bounded(lambda: prod.producer.init_transactions(call_timeout_s * 2), call_timeout_s * 2,
                    "init_transactions")
        except (KafkaException, StuckCall) as exc:
            consumer.close()
            raise RuntimeError(f"init_transactions failed: {exc.args[0]}") from exc
        copied = index = restarts = 0
        try:
            while (count is None or copied < count) and (deadline is None or time.monotonic() < deadline):
                if stop is not None and stop.is_set():
                    break
                msgs = consumer.consume(size, 0.5)
                cons._record(msgs, "run")
                records = [m for m in msgs if m.error() is None]
                if not records:
                    continue
                tx = f"{prod.name}.t{index + 1}"
                action = "abort" if aborts(index) else "commit"
                index += 1
                if not self._copy(consumer, records, tx, action, value_size, call_timeout_s, retries,
                                  hold_s if index == hold_at else 0.0, stop):
                    restarts += 1
                    if restarts > max_restarts or not prod._restart(f"after {tx}", call_timeout_s):
                        break
                if prod.committed:
                    copied += len(records)
                elif rewind != "none":
                    self._rewind(consumer, call_timeout_s, rewind == "beginning")
        finally:
            prod._write_acks()
            consumer.close()
            cons.history.flush()
            prod.history.flush()
        self.stats.polled = cons.stats.polled
        self.stats.seconds = time.monotonic() - start
        return self.stats

    def _copy(self, consumer: Any, records: list[Any], tx: str, action: str, value_size: int,
              timeout_s: float, retries: int, hold_s: float, stop: threading.Event | None) -> bool:
        """One transaction: begin, a copy of each record, the consumer's offsets, then
        ``action``; whether the producer can go on (``producer.committed``: it committed)."""
        from confluent_kafka import KafkaException

        prod = self.producer
        prod.committed = False
        try:
            prod.producer.begin_transaction()
        except KafkaException as exc:
            prod.stats.errors["begin"] = prod.stats.errors.get("begin", 0) + 1
            LIBRDKAFKA_LOG.warning("%s: begin_transaction failed: %s", prod.name, exc.args[0])
            return False
        prod.history.record("txn", tx=tx, action="begin", status="ok")
        prod._tx_field = f',"tx":{json.dumps(tx)}'
        try:
            keys = [m.key().decode("utf-8", "replace") if m.key() else None for m in records]
            prod.send_batch(keys, value_size, srcs=[parse_mid(m.value()) for m in records])
        finally:
            prod._tx_field = ""
        prod.producer.flush(timeout_s)
        prod._write_acks()
        try:
            positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
            if positions:
                metadata = consumer.consumer_group_metadata()
                bounded(lambda: prod.producer.send_offsets_to_transaction(positions, metadata, timeout_s),
                        timeout_s, "send_offsets_to_transaction")
        except StuckCall as exc:
            # the transaction stays open: the new producer's init_transactions aborts it
            prod.stats.errors["offsets:stuck"] = prod.stats.errors.get("offsets:stuck", 0) + 1
            prod.history.record("meta", stuck=str(exc), tx=tx)
            LIBRDKAFKA_LOG.warning("%s: %s", prod.name, exc)
            return False
        except KafkaException as exc:
            err = exc.args[0]
            code = err.name() if hasattr(err, "name") else str(err)
            prod.stats.errors[f"offsets:{code}"] = prod.stats.errors.get(f"offsets:{code}", 0) + 1
            if getattr(err, "fatal", lambda: False)():
                prod.history.record("txn", tx=tx, action=action, status="info",
                                    error=f"offsets: {code}: {err.str() if hasattr(err, 'str') else err}")
                return False
            action = "abort"  # abortable (or retriable): the transaction cannot commit its offsets
        if hold_s > 0:
            prod.history.record("stall", tx=tx, reason=f"held before {action}", seconds=hold_s)
            if stop is None:
                time.sleep(hold_s)
            else:
                stop.wait(hold_s)
        return prod._end_transaction(tx, action, timeout_s, retries)

    def _rewind(self, consumer: Any, timeout_s: float, to_beginning: bool = False) -> None:
        """Back to the group's committed offsets (the beginning where none is committed,
        or everywhere with ``to_beginning``), recorded as a ``reset`` per partition."""
        from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

        cons = self.consumer
        if to_beginning:
            for tp in consumer.assignment():
                cons.history.record("reset", phase="run", topic=tp.topic, partition=tp.partition,
                                    reason="rewind", to=0)
                consumer.seek(TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING))
            return
        for attempt in range(3):  # a coordinator moving: asked again; never guessed (a guess copies twice)
            try:
                committed = consumer.committed(consumer.assignment(), timeout=timeout_s)
                break
            except KafkaException as exc:
                if attempt == 2:
                    raise RuntimeError(f"the copier's committed offsets: {exc.args[0]}") from exc
                time.sleep(1.0)
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            cons.history.record("reset", phase="run", topic=tp.topic, partition=tp.partition,
                                reason="rewind", to=tp.offset if tp.offset >= 0 else None)
            try:
                consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
            except KafkaException as exc:  # not fetching yet: the assignment's start holds
                LIBRDKAFKA_LOG.warning("%s: seek: %s", cons.history.client, exc.args[0])
