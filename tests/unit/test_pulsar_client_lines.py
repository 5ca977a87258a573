"""The Pulsar recovery read's ``polls`` lines mean exactly the ``poll`` lines a message at a
time (``_record``) writes: both histories compared through
:func:`harness.history.read_events` (stamps aside: a batch shares one)."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.clients import pulsar as pulsar_client
from harness.clients.pulsar import PulsarConsumerClient
from harness.history import HistoryWriter, make_value, read_events


def _getters(**values: Any) -> SimpleNamespace:
    """An object whose methods named as ``values``' keys return their values (the
    pulsar-client Message and MessageId accessors)."""
    return SimpleNamespace(**{name: (lambda v=v: v) for name, v in values.items()})


def _messages(seed: int, n: int) -> list[SimpleNamespace]:
    rng = random.Random(seed)
    odd = [b"", b"abc", b"x|y", b'a"|', b"\xff|", b"a" * 65 + b"|"]
    out = []
    for i in range(n):
        value = rng.choice(odd) if rng.random() < 0.1 else make_value(f"p{rng.randrange(3)}-{i}", 40)
        msg_id = _getters(partition=rng.choice([-1, 0, 3]), ledger_id=rng.randrange(10, 13), entry_id=i,
                          batch_index=rng.choice([-1, 0, 5]))
        out.append(_getters(data=value, message_id=msg_id, partition_key=rng.choice(["", "", "k", "ключ"]),
                            publish_timestamp=1_700_000_000_000 + i, redelivery_count=rng.choice([0, 0, 2])))
    return out


def _events(path: Path) -> list[dict[str, Any]]:
    """The history's events, stamps and null fields aside."""
    return [{k: v for k, v in e.items() if k not in ("t", "m") and v is not None} for e in read_events(path)]


def _client(path: Path) -> tuple[PulsarConsumerClient, HistoryWriter]:
    history = HistoryWriter(path, "recovery")
    spec = SimpleNamespace(subscription_type="Shared")
    return PulsarConsumerClient("pulsar://127.0.0.1:1", "t", history, spec), history


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_polls_line_means_the_poll_lines_of_its_messages(tmp_path: Path, seed: int) -> None:
    msgs = _messages(seed, 300)
    one, h1 = _client(tmp_path / "one.jsonl")
    for m in msgs:
        one._record(m, "recovery")
    h1.close()
    batched, h2 = _client(tmp_path / "batched.jsonl")
    rng = random.Random(seed)
    at = 0
    while at < len(msgs):
        size = rng.randrange(1, 60)
        batched._write_polls(msgs[at:at + size], "recovery")
        at += size
    h2.close()
    assert _events(tmp_path / "batched.jsonl") == _events(tmp_path / "one.jsonl")
    assert len(_events(tmp_path / "one.jsonl")) == 300 and batched.stats.polled == 300


class _Reader:
    def __init__(self, msgs: list[SimpleNamespace]) -> None:
        self.msgs, self.closed = list(msgs), False

    def has_message_available(self) -> bool:
        return bool(self.msgs)

    def read_next(self, timeout_millis: int) -> SimpleNamespace:
        return self.msgs.pop(0)

    def close(self) -> None:
        self.closed = True


def test_read_all_writes_a_line_per_batch_and_the_rest_of_each_partition(tmp_path: Path, monkeypatch) -> None:
    parts = [_messages(7, 2500), _messages(8, 0), _messages(9, 10)]
    readers: list[_Reader] = []

    def create_reader(topic: str, start: Any) -> _Reader:
        readers.append(_Reader(parts[int(topic.rsplit("-", 1)[1])]))
        return readers[-1]

    monkeypatch.setattr(pulsar_client, "client_for",
                        lambda url: SimpleNamespace(create_reader=create_reader, close=lambda: None))
    client, history = _client(tmp_path / "r.jsonl")
    assert client.read_all(3).polled == 2510
    history.close()
    lines = list(read_events(tmp_path / "r.jsonl", expand=False))
    assert [len(e["mids"]) for e in lines] == [1000, 1000, 500, 10]
    assert all(r.closed for r in readers)
    reference, h = _client(tmp_path / "ref.jsonl")
    for m in parts[0] + parts[2]:
        reference._record(m, "recovery")
    h.close()
    assert _events(tmp_path / "r.jsonl") == _events(tmp_path / "ref.jsonl")
