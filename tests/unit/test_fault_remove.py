"""``remove``: a node taken out for good. It is killed -9; a ``start`` of it is refused; the
recovery's heal leaves it down; only the cleanup's heal (a kept cluster) starts it again. The
readiness of a Pulsar cluster waits for the other bookies only."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from harness.backend.cluster import Cluster, Node
from harness.errors import FaultError
from harness.faults import Nemesis
from harness.systems.pulsar import PulsarSystem


class Container:
    net_persists = False  # a container's network dies with its process

    def __init__(self, status: str, events: list[str]) -> None:
        self.status, self.events = status, events

    def kill(self, signal: str) -> None:
        self.events.append(f"kill {signal}")
        self.status = "exited"

    def start(self) -> None:
        self.events.append("start")
        self.status = "running"


def test_a_removed_node_stays_down_until_the_cleanup() -> None:
    events: list[str] = []
    bookie = cast(Node, SimpleNamespace(name="bookie-2", container=Container("running", events), disk=None))
    nemesis = Nemesis(cast(Cluster, SimpleNamespace(nodes=lambda: [bookie])), None)
    nemesis.apply("remove", bookie, role="bookie")
    assert events == ["kill KILL"] and nemesis.removed == {"bookie-2"} and not nemesis.down
    with pytest.raises(FaultError, match="bookie-2 was removed for good"):
        nemesis.apply("start", bookie)
    assert nemesis.heal_all(start_down=True) == [] and events == ["kill KILL"]  # the recovery's heal
    assert nemesis.heal_all(start_down=True, start_removed=True) == []  # the cleanup's
    assert events == ["kill KILL", "start"] and not nemesis.removed


def test_pulsar_readiness_leaves_removed_bookies_out(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = SimpleNamespace(name="pulsar", nodes_of=lambda kind: [SimpleNamespace(name=f"bookie-{i}")
                                                                 for i in (1, 2, 3)])
    system = PulsarSystem.__new__(PulsarSystem)
    system.spec, system.removed = cast(Any, spec), set()
    monkeypatch.setattr(system, "live_bookies", lambda: {"bookie-1:3181", "bookie-3:3181"})
    assert system.unregistered_bookies() == ["bookie-2"]
    system.removed.add("bookie-2")
    assert system.unregistered_bookies() == []
    assert system.removable(cast(Node, SimpleNamespace(kind="bookie")))
    assert not system.removable(cast(Node, SimpleNamespace(kind="pulsar-broker")))


class FakeZk:
    def __init__(self, nodes: dict[str, bytes], children: dict[str, list[str]]) -> None:
        self.nodes, self.children = nodes, children

    def exists(self, path: str) -> bool:
        return path in self.nodes or path in self.children

    def get(self, path: str) -> tuple[bytes, None]:
        return self.nodes[path], None

    def get_children(self, path: str) -> list[str]:
        return self.children[path]


@pytest.mark.parametrize(("nodes", "children", "auditor"), [
    ({"/ledgers/underreplication/leader": b'"bookie-2:3181"'}, {}, "bookie-2"),  # Pulsar's driver
    ({"/ledgers/underreplication/auditorelection/V_0000000003": b"bookieId: \"bookie-3:3181\""},
     {"/ledgers/underreplication/auditorelection": ["V_0000000005", "V_0000000003", "ATTEMPT"]},
     "bookie-3"),  # BookKeeper's own: the lowest vote leads
    ({}, {}, None),  # no AutoRecovery
])
def test_the_auditor_is_read_from_its_election(nodes: dict[str, bytes], children: dict[str, list[str]],
                                               auditor: str | None) -> None:
    system = PulsarSystem.__new__(PulsarSystem)
    cast(Any, system)._zk = lambda fn, what: fn(FakeZk(nodes, children))
    assert system.auditor() == auditor
