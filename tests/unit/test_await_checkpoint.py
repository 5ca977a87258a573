"""``await: {checkpoint: ...}``: a Kafka node's checkpoint file, read from its files, holds
the partition at an offset or more. The kip-101 cases await it instead of sleeping past
the checkpoints' periods."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.case import load_case_text
from harness.errors import BackendError, WaitTimeout
from harness.run.awaits import AWAITS
from harness.run.context import RunContext
from harness.run.events import RunEvents
from harness.systems.base import Checkpoints
from harness.systems.kafka import KafkaSystem

CASE = """
name: fake
system: kafka
cluster: kafka-zk
topic: {name: t, partitions: 2, replication_factor: 2}
steps:
  - produce: {count: 10}
  - await: {checkpoint: {node: follower, kind: recovery-point, at_least: 1, partition: 1}}
"""


def _file(*entries: tuple[str, int, int]) -> bytes:
    """A checkpoint file as Kafka writes it: version, count, then one line per partition."""
    lines = ["0", str(len(entries))] + [f"{t} {p} {o}" for t, p, o in entries]
    return ("\n".join(lines) + "\n").encode()


class Container:
    """A broker container's log dir: ``files`` maps a path to its content."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def get_files(self, path: str) -> Any:
        if path not in self.files:
            raise BackendError(f"copy files from kafka-2 failed: 404 {path}")
        yield path.rsplit("/", 2)[-2] + "/" + path.rsplit("/", 1)[-1], self.files[path]


def test_a_case_awaits_a_checkpoint_of_a_role() -> None:
    step = load_case_text(CASE).steps[-1].args
    assert step.condition == "checkpoint"  # type: ignore[union-attr]
    params = dict(step.params)  # type: ignore[union-attr]
    assert (params["kind"], params["at_least"], params["partition"]) == ("recovery-point", 1, 1)
    assert params["target"].role == "follower"


def test_kafka_reads_each_kind_of_checkpoint_from_the_log_dir() -> None:
    kafka = KafkaSystem.__new__(KafkaSystem)
    assert isinstance(kafka, Checkpoints)
    container = Container({
        "/data/kafka/recovery-point-offset-checkpoint": _file(("t", 0, 66), ("t", 1, 33)),
        "/data/kafka/replication-offset-checkpoint": _file(("t", 0, 100), ("u", 0, 5)),
    })
    node: Any = SimpleNamespace(name="kafka-2", container=container)
    assert kafka.checkpointed(node, "recovery-point") == {("t", 0): 66, ("t", 1): 33}
    assert kafka.checkpointed(node, "high-watermark") == {("t", 0): 100, ("u", 0): 5}
    # not written yet (a broker's first seconds): nothing checkpointed, not an error
    empty: Any = SimpleNamespace(name="k", container=Container({}))
    assert kafka.checkpointed(empty, "high-watermark") == {}


class Advancing:
    """A system whose node checkpoints partition 1 of ``t`` at each of ``offsets`` in turn
    (None: the partition is not in the file yet)."""

    name = "kafka"

    def __init__(self, *offsets: int | None) -> None:
        self.offsets = list(offsets)
        self.reads: list[str] = []

    def checkpointed(self, node: Any, kind: str) -> dict[tuple[str, int], int]:
        self.reads.append(kind)
        offset = self.offsets.pop(0) if len(self.offsets) > 1 else self.offsets[0]
        return {("t", 0): 999} if offset is None else {("t", 1): offset, ("t", 0): 999}


def _ctx(system: Any) -> Any:
    ctx = RunContext(load_case_text(CASE), Path("/nonexistent"), ExitStack(),
                     RunEvents(SimpleNamespace()))  # type: ignore[arg-type]
    ctx.system = system
    ctx.cluster = SimpleNamespace(node_logs=lambda names: [])  # type: ignore[assignment]
    ctx.resolver = SimpleNamespace(resolve=lambda selector: SimpleNamespace(name="kafka-2"))  # type: ignore[assignment]
    return ctx


def test_the_await_returns_once_the_partition_reaches_the_offset() -> None:
    system = Advancing(None, 0, 40, 100)
    seen = AWAITS["checkpoint"](_ctx(system), {"partition": 1, "kind": "high-watermark",
                                               "at_least": 40, "target": "leader"}, 10.0)
    assert seen == {"node": "kafka-2", "kind": "high-watermark", "offset": 40}
    assert system.reads == ["high-watermark"] * 3  # other partitions' offsets do not count


def test_a_checkpoint_that_stays_behind_times_out_with_what_it_last_held() -> None:
    params = {"partition": 1, "kind": "recovery-point", "at_least": 50, "target": "follower"}
    with pytest.raises(WaitTimeout, match=r"kafka-2's recovery-point checkpoint of partition 1 "
                                          r"at 50 or more; last value: offset 49"):
        AWAITS["checkpoint"](_ctx(Advancing(0, 49)), params, 1.0)
    with pytest.raises(WaitTimeout, match="last value: the partition not in the file"):
        AWAITS["checkpoint"](_ctx(Advancing(None)), params, 1.0)
