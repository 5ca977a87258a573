"""The recovery reader tries again when creating a reader times out (a broker that lost its
metadata session may leave a lookup unanswered for the client's operation timeout), within
the read's time budget, and counts each try (a fake client: no cluster)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pulsar
import pytest

from harness.clients.pulsar import PulsarConsumerClient
from harness.history import HistoryWriter


class _Client:
    def __init__(self, timeouts: int) -> None:
        self.timeouts = timeouts
        self.calls = 0

    def create_reader(self, topic: str, start: Any) -> str:
        self.calls += 1
        if self.calls <= self.timeouts:
            raise pulsar.Timeout("Pulsar error: TimeOut")
        return f"reader of {topic}"


def _consumer(tmp_path: Path) -> PulsarConsumerClient:
    history = HistoryWriter(tmp_path / "r.jsonl", "recovery")
    return PulsarConsumerClient("pulsar://127.0.0.1:1", "t", history, None)


def test_a_timed_out_reader_is_tried_again_and_counted(tmp_path: Path) -> None:
    consumer, client = _consumer(tmp_path), _Client(timeouts=2)
    assert consumer._reader(client, 0, time.monotonic() + 60) == \
        "reader of persistent://public/default/t-partition-0"
    assert client.calls == 3 and consumer.stats.errors == {"lookup_timeouts": 2}


def test_past_the_budget_the_timeout_is_raised(tmp_path: Path) -> None:
    consumer = _consumer(tmp_path)
    with pytest.raises(pulsar.Timeout):
        consumer._reader(_Client(timeouts=5), 0, time.monotonic() - 1)
    assert consumer.stats.errors == {"lookup_timeouts": 1}
