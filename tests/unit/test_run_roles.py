"""Selectors resolved by the run: ``down`` is the node that has been down longest of those
the fault steps took down and nothing started since."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from harness.case import Selector
from harness.errors import FaultError
from harness.faults import Nemesis
from harness.run.roles import LeaderWatch, Resolver


class FakeContainer:
    net_persists = False  # a container's network dies with its process

    def __init__(self) -> None:
        self.status = "running"

    def kill(self, signal: str) -> None:
        self.status = "exited"

    def stop(self, timeout: int) -> None:
        self.status = "exited"

    def start(self) -> None:
        self.status = "running"


class FakeCluster:
    def __init__(self, *names: str) -> None:
        self.nodes = {n: SimpleNamespace(name=n, container=FakeContainer(), disk=None) for n in names}

    def node(self, name: str) -> Any:
        return self.nodes[name]


def _resolver(cluster: FakeCluster, nemesis: Nemesis) -> Resolver:
    system = cast(Any, SimpleNamespace(cluster=cluster))
    watch = cast(LeaderWatch, SimpleNamespace())
    return Resolver(system, "t", watch, down=lambda: list(nemesis.down))


def test_down_is_the_node_down_longest_and_a_start_takes_it_off() -> None:
    cluster = FakeCluster("kafka-1", "kafka-2", "kafka-3")
    nemesis = Nemesis(cast(Any, cluster))
    resolver = _resolver(cluster, nemesis)
    down = Selector(role="down")
    nemesis.kill9(cluster.node("kafka-2"))
    nemesis.stop(cluster.node("kafka-1"))
    assert resolver.resolve(down).name == "kafka-2"
    nemesis.start(cluster.node("kafka-2"))
    assert resolver.resolve(down).name == "kafka-1"
    # a node taken down again goes to the end of the line
    nemesis.kill9(cluster.node("kafka-2"))
    nemesis.kill9(cluster.node("kafka-1"))
    assert resolver.resolve(down).name == "kafka-2"


def test_down_with_nothing_down_is_a_clear_error() -> None:
    cluster = FakeCluster("kafka-1")
    nemesis = Nemesis(cast(Any, cluster))
    resolver = _resolver(cluster, nemesis)
    nemesis.kill9(cluster.node("kafka-1"))
    nemesis.start(cluster.node("kafka-1"))
    with pytest.raises(FaultError, match="down: no node is down"):
        resolver.resolve(Selector(role="down"))
