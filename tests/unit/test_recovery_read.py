"""The recovery read reads all that survived, or says why not: a partition's log end from
its newest segment, a read that stops below the high watermark named (never a record
reported lost), and a high watermark that stays below its in-sync replicas' log ends
named as acknowledged but unreadable."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.clients.kafka import KafkaConsumerClient, RecoveryShort
from harness.errors import WorkloadError
from harness.systems import kafka as kafka_system
from harness.systems.kafka_segments import tail_log_end

sys.path.insert(0, str(Path(__file__).parent))
from test_collect import _batch  # type: ignore[import-not-found]  # noqa: E402


def test_the_log_end_is_read_from_the_newest_segment_alone() -> None:
    segment = _batch(100, 0, [b'{"mid":"a"}', b'{"mid":"b"}']) + _batch(102, 1, [b'{"mid":"c"}'])
    assert tail_log_end([("t-0/00000000000000000100.log", segment)]) == 103
    assert tail_log_end([("t-0/00000000000000000250.log", b"")]) == 250  # rolled, nothing in it yet
    assert tail_log_end([("t-0/00000000000000000100.log", segment[:-3])]) == 102  # a torn tail


class _Consumer:
    def __init__(self, positions: dict[int, int]) -> None:
        self.positions = positions

    def position(self, tps: list[Any]) -> list[Any]:
        return [SimpleNamespace(partition=tp.partition, offset=self.positions.get(tp.partition, -1001))
                for tp in tps]


def _client(read: dict[int, int]) -> KafkaConsumerClient:
    client = KafkaConsumerClient.__new__(KafkaConsumerClient)
    client.topic = "t"
    client._position = dict(read)
    return client


def test_a_read_that_stops_below_the_end_is_short_and_one_that_reaches_it_is_not() -> None:
    ends = {0: 101, 1: 50, 2: 0}
    # partition 0 read to offset 99 (next fetch 100): one record short; 1 fetched past a
    # marker at 49 though its last record read is 48; 2 is empty
    short = _client({0: 99, 1: 48, 2: -1})._short_of(_Consumer({0: 100, 1: 50}), ends)
    assert short == {0: (100, 101)}
    assert RecoveryShort(short).describe("t") == "t-0 read to offset 100 of high watermark 101"
    assert _client({0: 100, 1: 49})._short_of(_Consumer({}), ends) == {}


def _system(monkeypatch: pytest.MonkeyPatch, highs: list[int], log_ends: dict[str, int | None],
            isr: tuple[int, ...] = (1, 2, 3)) -> Any:
    nodes = [SimpleNamespace(name=f"kafka-{i}") for i in (1, 2, 3)]
    system = kafka_system.KafkaSystem.__new__(kafka_system.KafkaSystem)
    system.spec = SimpleNamespace(bootstrap="127.0.0.1:1")  # type: ignore[assignment]
    monkeypatch.setattr(system, "brokers", lambda: nodes)
    monkeypatch.setattr(system, "broker_id", lambda n: int(n.name.rsplit("-", 1)[1]))
    monkeypatch.setattr(system, "partition_state", lambda topic, p: kafka_system.PartitionState(
        topic, p, 1, (1, 2, 3), isr, 0))
    monkeypatch.setattr(system, "replica_log_end", lambda node, topic, p: log_ends[node.name])
    answers = iter(highs)
    monkeypatch.setattr(KafkaConsumerClient, "high_watermark",
                        staticmethod(lambda bootstrap, topic, p: next(answers)))
    monkeypatch.setattr(kafka_system.time, "sleep", lambda s: None)
    return system


def test_the_read_waits_until_the_high_watermark_reaches_the_in_sync_replicas(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the new leader's high watermark moves up once its followers fetch again
    system = _system(monkeypatch, [100, 100, 101], {"kafka-1": 101, "kafka-2": 101, "kafka-3": 101})
    assert system.readable_ends("t", 1) == {0: {"kafka-1": 101, "kafka-2": 101, "kafka-3": 101}}


def test_a_follower_outside_the_isr_does_not_hold_the_read_back(monkeypatch: pytest.MonkeyPatch) -> None:
    system = _system(monkeypatch, [100], {"kafka-1": 100, "kafka-2": 100, "kafka-3": 140}, isr=(1, 2))
    assert system.readable_ends("t", 1)[0]["kafka-3"] == 140


def test_a_high_watermark_that_never_gets_there_is_acknowledged_but_unreadable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    system = _system(monkeypatch, [100] * 1000, {"kafka-1": 101, "kafka-2": 101, "kafka-3": 101})
    with pytest.raises(WorkloadError, match=r"acknowledged but unreadable: t-0's high watermark stayed at "
                                            r"100 .* hold up to 101"):
        system.readable_ends("t", 1, timeout=0.0)


class _Stopped:
    """A stopped container: no exec (Docker answers 409), its files still readable."""

    status = "exited"

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def exec(self, cmd: list[str], **_: Any) -> tuple[int, str]:
        from harness.errors import BackendError

        raise BackendError(f"exec {cmd[0]} failed: 409 Conflict (container is not running)")

    def get_files(self, path: str) -> Any:
        base = path.rstrip("/").rsplit("/", 1)[-1]  # a folder's members under its name, a file alone
        for name, data in self.files.items():
            if name.startswith(base + "/"):
                yield name, data
            elif name.rsplit("/", 1)[-1] == base:
                yield base, data


def test_a_broker_left_down_is_read_from_its_stopped_container() -> None:
    """A 0.10 broker the recovery killed after its halt (it is left down): its log end comes
    from its files, and a read that fails is no log end, never an error of the run."""
    segment = _batch(100, 0, [b'{"mid":"a"}'])
    system = kafka_system.KafkaSystem.__new__(kafka_system.KafkaSystem)
    node = SimpleNamespace(name="kafka-3", container=_Stopped({
        "t-0/00000000000000000000.log": b"", "t-0/00000000000000000100.log": segment,
        "t-0/00000000000000000100.index": b""}))
    assert system.replica_log_end(node, "t", 0) == 101  # type: ignore[arg-type]
    assert system.replica_log_end(node, "u", 0) is None  # type: ignore[arg-type]  # no replica there
    node.container.status = "running"  # exec refused: no log end
    assert system.replica_log_end(node, "t", 0) is None  # type: ignore[arg-type]
