"""KafkaSystem.create_topic's reading of the admin client's errors: a replication factor the
cluster's brokers could meet is waited for (a restarted broker not registered yet: seen in
CI, "Replication factor: 3 larger than available brokers: 2"), one they never could is an
error at once."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from harness.errors import AdminError
from harness.systems.kafka import KafkaSystem

_TOO_FEW = KafkaException(KafkaError(KafkaError.INVALID_REPLICATION_FACTOR,
                                     "Replication factor: 3 larger than available brokers: 2."))


class _Future:
    def __init__(self, error: Exception | None) -> None:
        self.error = error

    def result(self, timeout: float) -> None:
        if self.error is not None:
            raise self.error


class _Admin:
    """Answers each create_topics call with the next of ``errors`` (None: created)."""

    def __init__(self, *errors: Exception | None) -> None:
        self.errors = list(errors)
        self.calls = 0

    def create_topics(self, topics: list[Any], request_timeout: float) -> dict[str, _Future]:
        self.calls += 1
        return {topics[0].topic: _Future(self.errors.pop(0) if self.errors else None)}


def _system(admin: _Admin, brokers: int) -> Any:
    system: Any = object.__new__(KafkaSystem)
    system.admin = admin
    system.spec = SimpleNamespace(nodes_of=lambda kind: list(range(brokers)) if kind == "broker" else [])
    system.cluster = SimpleNamespace(node_logs=lambda: [])
    system.partition_state = lambda name, p: SimpleNamespace(leader=1, isr=[1, 2, 3])
    return system


def test_a_broker_not_registered_yet_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "sleep", lambda s: None)  # the half-second check after creation
    admin = _Admin(_TOO_FEW, _TOO_FEW, None)
    _system(admin, brokers=3).create_topic("t", 1, 3, timeout=30)
    assert admin.calls == 3


def test_more_replicas_than_the_cluster_has_brokers_fail_at_once() -> None:
    admin = _Admin(_TOO_FEW)
    with pytest.raises(AdminError, match="creating topic t failed: .*INVALID_REPLICATION_FACTOR"):
        _system(admin, brokers=2).create_topic("t", 1, 3, timeout=30)
    assert admin.calls == 1
