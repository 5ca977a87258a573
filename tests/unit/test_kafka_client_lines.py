"""The Kafka consumer's ``polls`` lines mean exactly the ``poll`` lines it wrote before.

``_record`` is fed fake confluent-kafka messages; the reference is the former
per-record implementation, kept here verbatim. Both histories are compared through
:func:`harness.history.read_events` (stamps aside: a batch shares one).
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from harness.clients.kafka import KafkaConsumerClient, _js
from harness.history import HistoryWriter, make_value, parse_mid, read_events


class Err:
    def __init__(self, code: str) -> None:
        self.code = code

    def name(self) -> str:
        return self.code

    def str(self) -> str:
        return f"{self.code} happened"


class Msg:
    def __init__(self, offset: int, value: bytes | None = None, *, partition: int = 0,
                 key: bytes | None = None, epoch: int | None = 4, ts: int | None = None,
                 error: Err | None = None) -> None:
        self._offset, self._value, self._partition = offset, value, partition
        self._key, self._epoch, self._error = key, epoch, error
        self._ts = 1_700_000_000_000 + offset if ts is None else ts

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def leader_epoch(self) -> int | None:
        return self._epoch

    def value(self) -> bytes | None:
        return self._value

    def key(self) -> bytes | None:
        return self._key

    def timestamp(self) -> tuple[int, int]:
        return (1, self._ts)

    def error(self) -> Err | None:
        return self._error


def ours(offset: int, **kw: Any) -> Msg:
    return Msg(offset, make_value(f"p0-{offset}", 100), **kw)


class PerRecordConsumer(KafkaConsumerClient):
    """The consumer as it was: a ``poll`` line per record."""

    def _record(self, msgs: list[Any], phase: str) -> None:
        hist = self.history
        head = f'{hist.head("poll")},"phase":"{phase}","mid":'
        topic = f',"topic":{self._topic_js},"partition":'
        tail = f',"isolation":"{self.isolation_level}"}}\n'
        recovery = phase == "recovery"
        lines = []
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if lines:
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


def _run(cls: type, tmp_path, batches: list[list[Msg]], phase: str):
    path = tmp_path / f"{cls.__name__}.jsonl"
    with HistoryWriter(path, "c0") as hist:
        client = cls("127.0.0.1:1", "topic-\"x\"", hist, isolation_level="read_committed")
        for batch in batches:
            client._record(batch, phase)
    return client, path


def _same_as_before(tmp_path, batches: list[list[Msg]], phase: str = "run") -> list[dict]:
    new, new_path = _run(KafkaConsumerClient, tmp_path, batches, phase)
    old, old_path = _run(PerRecordConsumer, tmp_path, batches, phase)
    def unstamped(path):
        return [{k: v for k, v in e.items() if k not in ("t", "m")} for e in read_events(path)]
    assert unstamped(new_path) == unstamped(old_path)
    assert new.stats.polled == old.stats.polled
    assert new.stats.errors == old.stats.errors
    assert new._position == old._position
    assert all(isinstance(e["t"], float) and isinstance(e["m"], float)
               for e in read_events(new_path))
    return [json.loads(line) for line in new_path.read_text().splitlines()]


def test_a_batch_of_our_records_is_one_polls_line(tmp_path) -> None:
    lines = _same_as_before(tmp_path, [[ours(i) for i in range(500)]])
    assert len(lines) == 1 and lines[0]["type"] == "polls"
    line = lines[0]
    assert line["mids"] == [f"p0-{i}" for i in range(500)]
    assert line["offsets"] == list(range(500)) and line["partitions"] == [0] * 500
    assert line["epochs"] == [4] * 500 and line["keys"] is None
    assert (line["phase"], line["topic"], line["isolation"]) == ("run", 'topic-"x"',
                                                                "read_committed")


@pytest.mark.parametrize("value", [
    None, b"", b"no separator here", b"abc", b"a" * 64, b'a"b|x', b"a\\b|x", b"\xff\xfe|x",
    b"|x", b"a" * 65 + b"|x", b"a" * 64 + b"|x", b"x|y|z", b"a b|x", b"\n|", b"ok-1|",
    b"\xc3\xa9|x", b"a|", b"|",
])
def test_values_that_are_not_ours_or_barely_are_parse_as_before(tmp_path, value) -> None:
    for where in (0, 1, 2):  # first, middle, last record of the batch
        batch = [ours(i) for i in range(3)]
        batch[where] = Msg(where, value)
        _same_as_before(tmp_path / str(where), [batch])
    _same_as_before(tmp_path / "alone", [[Msg(0, value)]])


def test_a_batch_of_nothing_ours_has_null_mids(tmp_path) -> None:
    lines = _same_as_before(tmp_path, [[Msg(0, None), Msg(1, b"foreign"), Msg(2, b"")]])
    assert lines[0]["mids"] is None


def test_keys_epochs_partitions_and_timestamps(tmp_path) -> None:
    keys = [b"k1", None, b"", b"\xff\xfe", b'q"uote\\', "é".encode(), b"k1"]
    batch = [ours(i, key=k, partition=i % 3, epoch=None if i % 2 else i, ts=-1 if i == 3 else None)
             for i, k in enumerate(keys)]
    lines = _same_as_before(tmp_path, [batch])
    assert lines[0]["keys"][:3] == ["k1", None, None]
    assert lines[0]["epochs"] == [0, None, 2, None, 4, None, 6]
    no_epochs = _same_as_before(tmp_path / "e", [[ours(i, epoch=None) for i in range(4)]])
    assert no_epochs[0]["epochs"] is None
    mixed = _same_as_before(tmp_path / "p", [[ours(i, partition=[2, 2, 5][i]) for i in range(3)]])
    assert mixed[0]["partitions"] == [2, 2, 5]


def test_an_error_splits_the_batch_and_the_reset_keeps_its_place(tmp_path) -> None:
    batch = [ours(0), ours(1), Msg(-1, None, error=Err("_AUTO_OFFSET_RESET")), ours(2), ours(3)]
    lines = _same_as_before(tmp_path, [batch])
    assert [(e["type"], len(e.get("offsets", []))) for e in lines] == [
        ("polls", 2), ("reset", 0), ("polls", 2)]
    events = list(read_events(tmp_path / "KafkaConsumerClient.jsonl"))
    assert [(e["type"], e.get("offset")) for e in events] == [
        ("poll", 0), ("poll", 1), ("reset", None), ("poll", 2), ("poll", 3)]
    assert events[2]["reason"] == "offset-out-of-range"


@pytest.mark.parametrize("codes", [
    ["_LOG_TRUNCATION", None, None], [None, None, "OFFSET_OUT_OF_RANGE"],
    ["_TRANSPORT", "_LOG_TRUNCATION", None, "_AUTO_OFFSET_RESET", "_AUTO_OFFSET_RESET"],
    ["_TRANSPORT"], [None, "_ALL_BROKERS_DOWN", None],
])
def test_errors_anywhere_in_a_batch(tmp_path, codes) -> None:
    batch = [ours(i) if c is None else Msg(-1, None, error=Err(c)) for i, c in enumerate(codes)]
    _same_as_before(tmp_path, [batch], phase="recovery")


def test_recovery_tracks_the_last_offset_of_each_partition(tmp_path) -> None:
    batches = [[ours(i, partition=i % 2) for i in range(7)], [], [ours(9, partition=1)]]
    client, _ = _run(KafkaConsumerClient, tmp_path, batches, "recovery")
    assert client._position == {0: 6, 1: 9} and client.stats.polled == 8
    run, _ = _run(KafkaConsumerClient, tmp_path / "run", batches, "run")
    assert run._position == {} and run.stats.polled == 8
    _same_as_before(tmp_path / "same", batches, phase="recovery")


def test_random_batches_mean_the_same_poll_events(tmp_path) -> None:
    rng = random.Random(3)
    odd = [None, b"", b"abc", b"x|y", b'a"|', b"\xff|", b"a" * 65 + b"|", b"-._|z"]
    batches = []
    offset = 0
    for _ in range(40):
        batch = []
        for _ in range(rng.randrange(0, 30)):
            offset += 1
            r = rng.random()
            if r < 0.05:
                batch.append(Msg(-1, None, error=Err(rng.choice(
                    ["_AUTO_OFFSET_RESET", "_LOG_TRUNCATION", "_TRANSPORT"]))))
                continue
            value = rng.choice(odd) if r < 0.2 else make_value(f"w{rng.randrange(3)}-{offset}", 50)
            batch.append(Msg(offset, value, partition=rng.randrange(3),
                             key=rng.choice([None, None, b"k", b""]),
                             epoch=rng.choice([None, 7, 7, 8])))
        batches.append(batch)
    _same_as_before(tmp_path, batches, phase=rng.choice(["run", "recovery"]))


def test_producer_outcomes_keep_their_order_and_ids(tmp_path) -> None:
    from harness.clients.kafka import KafkaProducerClient, producer_config

    path = tmp_path / "p.jsonl"
    with HistoryWriter(path, "p0") as hist:
        client = KafkaProducerClient(producer_config("127.0.0.1:1"), "t", hist)
        assert client._plain_mids
        outcomes = [None, None, Err("MSG_SIZE_TOO_LARGE"), None, Err("_MSG_TIMED_OUT"), None]
        for i, err in enumerate(outcomes):
            client._on_delivery(err, Msg(10 + i, make_value(f"p0-{i + 1}", 100),
                                         epoch=None if i == 3 else 2))
        client.poll(0)
        # nothing of ours left queued; librdkafka's own log and error events (the refused
        # connection) count in the queue too and can arrive as a drain ends: asked again
        assert any(client.drain(1) == 0 for _ in range(10))
    events = list(read_events(path))
    assert [(e["type"], e["mid"]) for e in events] == [
        ("ok", "p0-1"), ("ok", "p0-2"), ("fail", "p0-3"), ("ok", "p0-4"), ("info", "p0-5"),
        ("ok", "p0-6")]
    assert [e.get("offset") for e in events if e["type"] == "ok"] == [10, 11, 13, 15]
    assert [e.get("epoch") for e in events if e["type"] == "ok"] == [2, 2, None, 2]
    assert (client.stats.ok, client.stats.fail, client.stats.info) == (4, 1, 1)
    # the acks between two other outcomes are one oks line
    assert [e["type"] for e in read_events(path, expand=False)] == ["oks", "fail", "oks", "info", "oks"]


def test_producer_ids_are_read_with_parse_mid_when_the_name_is_not_an_id(tmp_path) -> None:
    from harness.clients.kafka import KafkaProducerClient, producer_config

    with HistoryWriter(tmp_path / "p.jsonl", "p" * 60) as hist:
        client = KafkaProducerClient(producer_config("127.0.0.1:1"), "t", hist)
        assert not client._plain_mids
        client.close()


def test_consumers_do_not_wait_a_second_for_each_refill() -> None:
    from harness.clients.kafka import consumer_config

    conf = consumer_config("b:1", "g", "read_committed", {"enable.auto.commit": False})
    assert conf["fetch.queue.backoff.ms"] == 10 and conf["enable.auto.commit"] is False
    assert conf["isolation.level"] == "read_committed" and conf["group.id"] == "g"
    assert consumer_config("b:1", "g", extra={"fetch.queue.backoff.ms": 1000})[
        "fetch.queue.backoff.ms"] == 1000


def test_a_batch_of_sends_is_one_invokes_line_written_before_the_sends(tmp_path) -> None:
    from harness.clients.kafka import KafkaProducerClient, producer_config

    path = tmp_path / "p.jsonl"
    with HistoryWriter(path, "p0") as hist:
        client = KafkaProducerClient(producer_config("127.0.0.1:1"), "t", hist)
        mids = client.send_batch(["k0", None, "k1"], value_size=20, partition=2)
        # all three were handed to librdkafka; its queue may also hold an event of its own
        # (the refused connection's error, a log line): at least three, not exactly three
        assert mids == ["p0-1", "p0-2", "p0-3"] and client.stats.sent == 3
        assert len(client.producer) >= 3
        assert client.send_batch([None, None]) == ["p0-4", "p0-5"]
        hist.flush()
        lines = list(read_events(path, expand=False))
        assert [e["type"] for e in lines] == ["invokes", "invokes"]
        assert lines[0]["keys"] == ["k0", None, "k1"] and lines[0]["partitions"] == [2, 2, 2]
        assert lines[1]["keys"] is None and lines[1]["partitions"] is None
        assert [(e["type"], e["mid"], e["key"], e["topic"]) for e in read_events(path)] == [
            ("invoke", "p0-1", "k0", "t"), ("invoke", "p0-2", None, "t"), ("invoke", "p0-3", "k1", "t"),
            ("invoke", "p0-4", None, "t"), ("invoke", "p0-5", None, "t")]
        assert client.stats.sent == 5
        # a paced batch carries its schedule; each send's due time is read off it
        client.send_batch([None, None, None], due=100.5, every=0.25)
        hist.flush()
        assert [(e.get("due"), e.get("every")) for e in read_events(path, expand=False)][-1] == (100.5, 0.25)
        sched = [(e["mid"], e.get("due"), "every" in e) for e in read_events(path)]
        assert sched[:5] == [(f"p0-{i}", None, False) for i in range(1, 6)]
        assert sched[5:] == [("p0-6", 100.5, False), ("p0-7", 100.75, False), ("p0-8", 101.0, False)]
        client.producer.purge()


def test_paced_batches_send_each_key_once_in_order() -> None:
    from harness.clients import paced_batches

    got: list[list[str | None]] = []
    dues: list[float | None] = []

    def send(b: list[str | None], due: float | None) -> None:
        got.append(b)
        dues.append(due)

    paced_batches(send, count=600, duration_s=None, rate=None,
                  keys=4, stop=None, wait=lambda s: None, batch=256)
    assert [len(b) for b in got] == [256, 256, 88]
    assert dues == [None, None, None]  # unpaced: no schedule
    assert [k for b in got for k in b] == [f"k{i % 4}" for i in range(600)]


class _Clock:
    """A fake clock for the pacing loop: ``wait`` moves it (no real time passes, so a
    loaded machine cannot stall the loop between two readings)."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return 1_000.0 + self.now

    def sleep(self, s: float) -> None:
        self.now += s


def test_paced_batches_keep_the_rate(monkeypatch) -> None:
    import types

    import harness.clients
    from harness.clients import paced_batches

    clock = _Clock()
    monkeypatch.setattr(harness.clients, "time", types.SimpleNamespace(time=clock.time,
                                                                       monotonic=clock.monotonic))
    got: list[int] = []
    dues: list[tuple[float, float]] = []  # (due, clock at the call)

    def send(b: list[str | None], due: float | None) -> None:
        assert due is not None
        got.append(len(b))
        dues.append((due, clock.time()))

    start = paced_batches(send, count=None, duration_s=0.5, rate=200, keys=None, stop=None, wait=clock.sleep)
    assert start == 0.0 and 0.5 <= clock.now < 0.51
    assert 99 <= sum(got) <= 101  # 200/s for 0.5 s (the last step's rounding: one either way)
    assert max(got) <= 2  # sends go out as they fall due, not all at once
    # the schedule: send n due n/200 s after the start, every batch's last send due by its call
    assert dues[0][0] == pytest.approx(1_000.0)
    sent = 0
    for n, (due, called) in zip(got, dues, strict=True):
        assert due == pytest.approx(dues[0][0] + sent / 200, abs=1e-6)
        assert due + (n - 1) / 200 <= called + 1e-6
        sent += n

    # a stall (the process paused 0.2 s in one wait, 0.1 s in): the sends that fell due
    # meanwhile go out at once, as one batch, and the schedule is kept (nothing skipped,
    # nothing early). A stall past the end ends the workload there (it is bounded in time).
    clock.now, got[:], dues[:] = 0.0, [], []

    def stalling(s: float) -> None:
        clock.sleep(s + (0.2 if 0.1 <= clock.now < 0.1 + s else 0.0))

    paced_batches(send, count=None, duration_s=0.5, rate=200, keys=None, stop=None, wait=stalling)
    assert 99 <= sum(got) <= 101 and max(got) >= 35
    sent = 0
    for n, (due, called) in zip(got, dues, strict=True):
        assert due == pytest.approx(1_000.0 + sent / 200, abs=1e-6) and due + (n - 1) / 200 <= called + 1e-6
        sent += n


def test_the_recovery_read_asks_for_an_end_offset_again_while_the_leader_moves() -> None:
    """A watermark request after a fault may meet a broker that no longer leads
    (NOT_LEADER_FOR_PARTITION, seen on 0.10.2.2 just after a failover): asked again; a
    permanent error, or one past the deadline, is one clear error."""
    import time

    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    from harness.clients.kafka import _end_offset

    class Consumer:
        def __init__(self, errors: list[int]) -> None:
            self.errors, self.calls = errors, 0

        def get_watermark_offsets(self, tp: Any, timeout: float) -> tuple[int, int]:
            self.calls += 1
            if self.errors:
                raise KafkaException(KafkaError(self.errors.pop(0)))
            return 0, 101

    moving = Consumer([KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE])
    assert _end_offset(moving, TopicPartition("t", 0), time.monotonic() + 10) == 101 and moving.calls == 3
    with pytest.raises(RuntimeError, match="no end offset for t-0: TOPIC_AUTHORIZATION_FAILED"):
        _end_offset(Consumer([KafkaError.TOPIC_AUTHORIZATION_FAILED]), TopicPartition("t", 0),
                    time.monotonic() + 10)
    with pytest.raises(RuntimeError, match="NOT_LEADER_FOR_PARTITION"):
        _end_offset(Consumer([KafkaError.NOT_LEADER_FOR_PARTITION] * 3), TopicPartition("t", 0),
                    time.monotonic() - 1)


def test_read_all_tracks_positions_in_any_phase(tmp_path) -> None:
    """read_all ends when every partition's position reaches its end offset; it keeps those
    positions whatever the phase it records (the benches read with phase "run": before, the
    positions were kept for "recovery" only and such a read ran on until a poll came back
    empty)."""
    with HistoryWriter(tmp_path / "c.jsonl", "c0") as hist:
        client = KafkaConsumerClient("127.0.0.1:1", "t", hist)
        client._record([Msg(0, make_value("p-1", 10)), Msg(1, make_value("p-2", 10))], "run")
        assert client._position == {}
        client._tracking = True
        client._record([Msg(2, make_value("p-3", 10))], "run")
        assert client._position == {0: 2}


class _BatchingConsumer:
    """librdkafka's consume semantics: ``consume(n, timeout)`` returns once it has ``n``
    messages or the timeout has passed; ``poll(timeout)`` as soon as it has one. Records
    every blocking call's timeout."""

    def __init__(self, ready: list[str]) -> None:
        self.ready = list(ready)
        self.waited: list[float] = []

    def consume(self, n: int, timeout: float) -> list[str]:
        if len(self.ready) < n and timeout > 0:
            self.waited.append(timeout)  # the whole timeout, waiting for a full batch
        out, self.ready = self.ready[:n], self.ready[n:]
        return out

    def poll(self, timeout: float) -> str | None:
        if not self.ready:
            self.waited.append(timeout)
            return None
        return self.ready.pop(0)


def test_a_consume_returns_what_is_there_without_waiting_for_a_full_batch() -> None:
    from harness.clients.kafka import take

    c = _BatchingConsumer(["a", "b", "c"])
    assert take(c, 500, 0.2) == ["a", "b", "c"] and c.waited == []
    assert take(c, 500, 0.2) == [] and c.waited == [0.2]  # nothing there: one wait, for one
    c.ready = ["d", "e"]
    assert take(c, 1, 0.2) == ["d"] and take(c, 2, 0.2) == ["e"]
    # the batch call this replaces waits its whole timeout whenever fewer than n are there
    c.ready, c.waited = ["f"], []
    assert c.consume(500, 0.2) == ["f"] and c.waited == [0.2]


@pytest.mark.parametrize(("retries", "outcome"), [(0, "fail"), (5, "info")])
def test_a_retried_rejection_is_no_definite_failure(tmp_path, retries, outcome) -> None:
    """NOT_ENOUGH_REPLICAS after retries: an earlier attempt (timed out) may have been
    appended, as harness explore saw on 0.10.2.2; definite only without retries. A rejection
    librdkafka does not retry stays definite."""
    from harness.clients.kafka import KafkaProducerClient, producer_config

    path = tmp_path / "p.jsonl"
    with HistoryWriter(path, "p0") as hist:
        client = KafkaProducerClient({**producer_config("127.0.0.1:1"), "retries": retries}, "t", hist)
        client._on_delivery(Err("NOT_ENOUGH_REPLICAS"), Msg(-1, make_value("p0-1", 100)))
        client._on_delivery(Err("MSG_SIZE_TOO_LARGE"), Msg(-1, make_value("p0-2", 100)))
        client.poll(0)
    assert [(e["type"], e["mid"]) for e in read_events(path)] == [(outcome, "p0-1"), ("fail", "p0-2")]
