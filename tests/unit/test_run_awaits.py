"""``await: {leader_is: ...}`` waits until the named node leads in the controller's
record and, where the system can tell, serves as leader when asked alone."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from harness.errors import HarnessError
from harness.run.awaits import AWAITS
from harness.systems.base import Leader


class FakeSystem:
    """Records name kafka-2 leader from the second question on; kafka-2 serves as one
    from the ``serving_from``-th question it is asked."""

    def __init__(self, serving_from: int | None) -> None:
        self.asked = self.served = 0
        self.serving_from = serving_from

    def leader_of(self, topic: str, partition: int) -> Leader:
        self.asked += 1
        return Leader(2, "kafka-2") if self.asked >= 2 else Leader(-1, None)

    def leader_ref(self, node: Any) -> int:
        return 2

    def serves_as_leader(self, node: Any, topic: str, partition: int) -> bool:
        self.served += 1
        return self.serving_from is not None and self.served >= self.serving_from


class RecordOnly(FakeSystem):
    serves_as_leader = None  # type: ignore[assignment]  # a system that cannot tell


def _ctx(system: Any) -> Any:
    node = SimpleNamespace(name="kafka-2")
    return cast(Any, SimpleNamespace(
        the_system=system, topic="t", the_resolver=SimpleNamespace(resolve=lambda target: node),
        the_watch=SimpleNamespace(observe=lambda p, n: None),
        the_cluster=SimpleNamespace(node_logs=lambda names=None: [])))


def test_leader_is_waits_until_the_named_leader_serves() -> None:
    system = FakeSystem(serving_from=3)
    out = AWAITS["leader_is"](_ctx(system), {"target": "x", "partition": 0}, 20)
    assert out["leader"] == "kafka-2"
    assert system.served == 3  # named on the 2nd look, serving on the 3rd time asked
    assert out["serving_after_s"] > 0


def test_leader_is_times_out_when_the_leader_never_serves() -> None:
    with pytest.raises(HarnessError, match="kafka-2 leading"):
        AWAITS["leader_is"](_ctx(FakeSystem(serving_from=None)), {"target": "x"}, 1.0)


def test_leader_is_on_the_record_alone_where_the_system_cannot_tell() -> None:
    out = AWAITS["leader_is"](_ctx(RecordOnly(serving_from=None)), {"target": "x"}, 20)
    assert out == {"leader": "kafka-2"}
