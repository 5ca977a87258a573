"""A stopped node starts only once its system lets it (Nemesis.before_start): the wait goes
into the fault's detail; a wait that fails is logged and the node started anyway; a heal
that starts nodes waits too; a running node is not waited for."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from harness.backend.cluster import Cluster, Node
from harness.errors import WaitTimeout
from harness.faults import Nemesis


class Container:
    net_persists = False  # a container's network dies with its process

    def __init__(self, status: str, events: list[str]) -> None:
        self.status, self.events = status, events

    def start(self) -> None:
        self.events.append("start")
        self.status = "running"


class Timeline:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def record(self, type_: str, **fields: Any) -> dict[str, Any]:  # as harness.history.Recorder
        self.rows.append({"kind": type_, **fields})
        return self.rows[-1]


def _node(status: str, events: list[str]) -> Node:
    return cast(Node, SimpleNamespace(name="kafka-2", container=Container(status, events), disk=None))


def test_a_start_waits_for_the_gate_first_and_records_the_wait() -> None:
    events: list[str] = []
    timeline = Timeline()
    nemesis = Nemesis(cast(Cluster, None), timeline)

    def gate(node: Node) -> dict[str, Any]:
        events.append(f"gate {node.name}")
        return {"waited_for_old_session_s": 4.2}

    nemesis.before_start = gate
    nemesis.apply("start", _node("exited", events), role="down")
    assert events == ["gate kafka-2", "start"]
    assert timeline.rows[-1]["detail"] == {"waited_for_old_session_s": 4.2}


def test_a_gate_that_fails_is_recorded_and_the_node_started_anyway() -> None:
    events: list[str] = []
    timeline = Timeline()
    nemesis = Nemesis(cast(Cluster, None), timeline)

    def gate(node: Node) -> dict[str, Any]:
        raise WaitTimeout("timed out after 30s waiting for ZooKeeper to expire kafka-2's old session")

    nemesis.before_start = gate
    nemesis.apply("start", _node("exited", events))
    assert events == ["start"]
    assert "old session" in timeline.rows[-1]["detail"]["start_gate"]


def test_a_running_node_is_not_gated_and_a_heal_is() -> None:
    events: list[str] = []
    gated: list[str] = []
    running, stopped = _node("running", events), _node("exited", events)
    nemesis = Nemesis(cast(Cluster, SimpleNamespace(nodes=lambda: [stopped])), None)

    def gate(node: Node) -> None:
        gated.append(node.name)

    nemesis.before_start = gate
    assert nemesis.start(running) is None
    assert gated == [] and events == []
    assert nemesis.heal_all(start_down=True) == []
    assert gated == ["kafka-2"] and events == ["start"]
