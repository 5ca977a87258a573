"""Detecting a ZooKeeper-mode controller that fails every state change after a failover
(3.9.2: "Controller to broker state change requests batch is not empty while creating a new
one"), from the tail of its log."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from harness.errors import AdminError
from harness.systems.kafka import ControllerState, KafkaSystem

ELECTED = "[2026-11-22 12:07:27,416] INFO [Controller id=1] 1 successfully elected as the controller."
BROKEN = ("[2026-11-22 12:07:27,463] ERROR [ReplicaStateMachine controllerId=1] Error while moving some "
          "replicas to OnlineReplica state\njava.lang.IllegalStateException: Controller to broker state "
          "change requests batch is not empty while creating a new one. Some StopReplica state changes")


def _system(log: str, mode: str = "zk", controller: int = 1) -> KafkaSystem:
    system: Any = object.__new__(KafkaSystem)
    nodes = [SimpleNamespace(name=f"kafka-{i}", node_id=i, kind="broker") for i in (1, 2, 3)]
    system.spec = SimpleNamespace(mode=mode, nodes=nodes, quorum="static")
    logs = {"kafka-1": log, "kafka-2": BROKEN, "kafka-3": ""}
    system.cluster = SimpleNamespace(node=lambda name: SimpleNamespace(
        name=name, container=SimpleNamespace(logs=lambda tail: logs[name])))
    system.controller = lambda: ControllerState(controller, 6)
    return system


def test_an_error_after_the_last_election_is_a_broken_controller() -> None:
    problem = _system(f"old lines\n{ELECTED}\n{BROKEN}\n").broken_controller()
    assert problem is not None and "kafka-1" in problem and "batch is not empty" in problem


def test_an_error_before_the_last_election_is_history() -> None:
    assert _system(f"{ELECTED}\n{BROKEN}\n{ELECTED}\nall fine\n").broken_controller() is None


def test_only_the_active_controller_counts() -> None:
    assert _system(f"{ELECTED}\n", controller=1).broken_controller() is None
    assert _system("", controller=2).broken_controller() is not None  # no election in its tail


def test_kraft_and_an_unreadable_controller_are_not_judged() -> None:
    assert _system(BROKEN, mode="kraft").broken_controller() is None
    system = _system(BROKEN)

    def fails() -> ControllerState:
        raise AdminError("ZooKeeper has no /controller")

    system.controller = fails  # type: ignore[method-assign]
    assert system.broken_controller() is None


@pytest.mark.parametrize("broken", [True, False])
def test_reuse_checks_the_broken_controller_first(broken: bool) -> None:
    system = _system(f"{ELECTED}\n{BROKEN if broken else ''}\n")
    probes = []
    system.controller_problem = lambda timeout=20: probes.append(1)  # type: ignore[method-assign]
    assert (system.reuse_problem() is not None) == broken
    assert probes == ([] if broken else [1])
