"""The Python Pulsar producer's history: the sends due as one invokes line, an ok line per
acknowledgement written from the client's callback threads, and drain counting outcomes
(a fake producer stands for pulsar-client: no cluster)."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from harness.clients.pulsar import PulsarProducerClient
from harness.history import HistoryWriter, read_events


class _Id:
    def __init__(self, entry: int) -> None:
        self.entry = entry

    def partition(self) -> int:
        return -1

    def ledger_id(self) -> int:
        return 7

    def entry_id(self) -> int:
        return self.entry

    def batch_index(self) -> int:
        return -1


class _FakeProducer:
    """Acknowledges every other send at once, from another thread; fails the rest later."""

    def __init__(self) -> None:
        self.sent = 0
        self.threads: list[threading.Thread] = []

    def send_async(self, value: bytes, callback: Any, **kwargs: Any) -> None:
        n = self.sent
        self.sent += 1
        ok = SimpleNamespace(name="Ok" if n % 2 == 0 else "Timeout")
        t = threading.Thread(target=callback, args=(ok, _Id(n)))
        self.threads.append(t)
        t.start()

    def flush(self) -> None:
        for t in self.threads:
            t.join()


class _FakeClient:
    """Creates a fake producer per topic name (a partition's producer)."""

    def __init__(self) -> None:
        self.producers: dict[str, _FakeProducer] = {}

    def create_producer(self, topic: str, **kwargs: Any) -> _FakeProducer:
        self.producers[topic] = _FakeProducer()
        return self.producers[topic]


def _client(path: Path, partition_json: str = "") -> PulsarProducerClient:
    client = PulsarProducerClient.__new__(PulsarProducerClient)  # no pulsar.Client
    hist = HistoryWriter(path, "p")
    client.__dict__.update(topic="persistent://public/default/t", history=hist, name="p",
                           producer=_FakeProducer(), _partition_json=partition_json, _seq=0,
                           _kwargs={}, _partition_producers={}, client=_FakeClient())
    client._topic_js = '"persistent://public/default/t"'
    client._issued = client._done = 0
    client._lock = threading.Lock()
    from harness.clients.kafka import WorkloadStats
    client.stats = WorkloadStats("p")
    return client


def test_sends_are_an_invokes_line_and_every_outcome_is_recorded(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    client = _client(path, partition_json=',"partition":0')
    stats = client.run(count=10, rate=None, keys=2)
    assert client.drain(5) == 0
    client.history.close()
    lines = path.read_text().splitlines()
    assert sum('"type":"invokes"' in line for line in lines) == 1  # ten sends due at once
    events = list(read_events(path))
    invokes = [e for e in events if e["type"] == "invoke"]
    assert [e["mid"] for e in invokes] == [f"p-{n}" for n in range(1, 11)]
    assert [e["key"] for e in invokes] == ["k0", "k1"] * 5
    assert {e["partition"] for e in invokes} == {0}  # one partition: known before the call
    oks = {e["mid"]: e for e in events if e["type"] == "ok"}
    assert sorted(oks) == sorted(f"p-{n}" for n in range(1, 11, 2))
    assert oks["p-3"]["entry"] == 2 and oks["p-3"]["ledger"] == 7 and oks["p-3"]["offset"] is None
    infos = [e for e in events if e["type"] == "info"]
    assert len(infos) == 5 and infos[0]["error"] == "Timeout"
    assert (stats.sent, stats.ok, stats.info) == (10, 5, 5)
    # every acknowledgement is stamped at or after the line that recorded its send
    m_invokes = min(e["m"] for e in invokes)
    assert all(e["m"] >= m_invokes for e in oks.values())


def test_a_paced_producer_records_each_sends_due_time(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    client = _client(path)
    client.run(count=4, rate=200.0)
    client.drain(5)
    client.history.close()
    invokes = [e for e in read_events(path) if e["type"] == "invoke"]
    dues = [e["due"] for e in invokes]
    assert len(dues) == 4 and all(abs((b - a) - 0.005) < 1e-5 for a, b in zip(dues, dues[1:], strict=False))
    assert all(e["partition"] is None for e in invokes)  # a partitioned topic: the client's choice


def test_a_named_partition_is_where_the_sends_go_and_what_is_recorded(tmp_path: Path) -> None:
    """A workload's ``partition`` on a partitioned topic: the sends go to a producer of that
    partition alone, the invokes and ok lines name it (the message id of a partition's own
    producer names no partition), and the topic's producer sends nothing."""
    path = tmp_path / "p.jsonl"
    client = _client(path)
    client.prepare(2)  # connected before the first send (a held producer)
    client.run(count=6, rate=None, partition=2)
    client.drain(5)
    client.history.close()
    assert client.producer.sent == 0
    assert client.client.producers["persistent://public/default/t-partition-2"].sent == 6
    events = list(read_events(path))
    assert {e["partition"] for e in events if e["type"] in ("invoke", "ok")} == {2}
    assert sum(e["type"] == "ok" for e in events) == 3
