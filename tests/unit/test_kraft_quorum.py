"""A dynamic KRaft quorum's voters, changed by Kafka's own tool: the voters read from
``describe --status``, an add tried again until the leader finds the observer caught up and
run in the added controller with its own configuration, a remove run elsewhere with the
voter's directory id, and one error naming the tool's last answer when the voters never
change."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from harness.clusters import CLUSTERS
from harness.errors import AdminError
from harness.systems import kafka as kafka_system

DIRS = {1: "SsMmd6h1QwmBGoZcock4ew", 2: "w6TReEK2SFSe84l2wxLIbg", 3: "b6A9Vey8RIqu-shYuqq-Ug",
        4: "AbCdEfGhIjKlMnOpQrStUw"}


class _Quorum:
    """The quorum as the tool sees it: the voters, and adds refused ``refuse`` times."""

    def __init__(self, voters: set[int], refuse: int = 0, stuck: bool = False) -> None:
        self.voters, self.refuse, self.stuck = voters, refuse, stuck
        self.calls: list[tuple[str, str]] = []

    def exec(self, node: str, cmd: list[str]) -> tuple[int, str]:
        line = cmd[-1]
        self.calls.append((node, line.split("--bootstrap-controller ", 1)[1]))
        if line.endswith("describe --status"):
            voters = [{"id": i, "directoryId": DIRS[i], "endpoints": [f"CONTROLLER://n{i}:9093"]}
                      for i in sorted(self.voters)]
            return 0, f"ClusterId: x\nLeaderId: 1\nCurrentVoters:          {json.dumps(voters)}\n"
        if line.endswith("add-controller"):
            assert "--command-config /opt/kafka/run/server.properties" in line
            if self.refuse:
                self.refuse -= 1
                return 1, "org.apache.kafka.common.errors.TimeoutException: not caught up"
            if not self.stuck:
                self.voters.add(int(node.rsplit("-", 1)[1]))
            return 0, ""
        if "remove-controller" in line:
            parts = line.split()
            voter = int(parts[parts.index("--controller-id") + 1])
            assert parts[parts.index("--controller-directory-id") + 1] == DIRS[voter]
            self.voters.discard(voter)
            return 0, ""
        raise AssertionError(line)


def _system(monkeypatch: pytest.MonkeyPatch, quorum: _Quorum) -> tuple[Any, dict[str, Any]]:
    spec = CLUSTERS["kafka-kraft-dynamic"]
    nodes = [SimpleNamespace(name=n.name, spec=n, container=SimpleNamespace(
        status="running", exec=lambda cmd, name=n.name, **_: quorum.exec(name, cmd))) for n in spec.nodes]
    system: Any = kafka_system.KafkaSystem.__new__(kafka_system.KafkaSystem)
    system.spec = spec
    system.cluster = SimpleNamespace(nodes=lambda: nodes,
                                     node=lambda name: next(n for n in nodes if n.name == name))
    monkeypatch.setattr("time.sleep", lambda s: None)  # tenacity's naps between tries
    return system, {n.name: n for n in nodes}


def test_an_observer_is_added_once_the_leader_finds_it_caught_up(monkeypatch: pytest.MonkeyPatch) -> None:
    quorum = _Quorum({1, 2, 3}, refuse=2)
    system, nodes = _system(monkeypatch, quorum)
    assert system.voters() == {i: DIRS[i] for i in (1, 2, 3)}
    detail = system.change_voters(add=nodes["controller-4"], timeout=60)
    assert detail["voters_before"] == [1, 2, 3] and detail["voters"] == [1, 2, 3, 4]
    assert detail["tries"] == 3 and detail["last_answer"] == "ok"
    adds = [node for node, line in quorum.calls if line.endswith("add-controller")]
    assert adds == ["controller-4"] * 3  # run in the added controller, with its own configuration
    # every running controller is asked, the observer too
    assert all(line.startswith("controller-4:9093,kafka-1:9093,kafka-2:9093,kafka-3:9093 ")
               for _, line in quorum.calls)


def test_a_voter_is_removed_by_another_controller_with_its_directory_id(
        monkeypatch: pytest.MonkeyPatch) -> None:
    quorum = _Quorum({1, 2, 3, 4})
    system, nodes = _system(monkeypatch, quorum)
    detail = system.change_voters(remove=nodes["kafka-1"], timeout=60)
    assert detail["voters"] == [2, 3, 4] and quorum.voters == {2, 3, 4}
    assert all(node != "kafka-1" for node, line in quorum.calls if "remove-controller" in line)


def test_a_change_that_cannot_be_or_never_happens_is_one_error(monkeypatch: pytest.MonkeyPatch) -> None:
    system, nodes = _system(monkeypatch, _Quorum({1, 2, 3}))
    with pytest.raises(AdminError, match=r"quorum add: kafka-2 \(id 2\) is a voter already"):
        system.change_voters(add=nodes["kafka-2"], timeout=5)
    with pytest.raises(AdminError, match=r"quorum remove: controller-4 \(id 4\) is not a voter"):
        system.change_voters(remove=nodes["controller-4"], timeout=5)
    stuck, nodes = _system(monkeypatch, _Quorum({1, 2, 3}, refuse=1000))
    with pytest.raises(AdminError, match=r"the KRaft voters \[1, 2, 3, 4\] .*not caught up"):
        stuck.change_voters(add=nodes["controller-4"], timeout=0.0)


def test_a_cluster_whose_voters_changed_is_not_reused_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    system, _ = _system(monkeypatch, _Quorum({1, 2, 3}))
    assert system.changed_quorum() is None
    changed, _ = _system(monkeypatch, _Quorum({2, 3, 4}))
    problem = changed.changed_quorum()
    assert problem == "the quorum's voters are [2, 3, 4], not its first [1, 2, 3]"
    assert changed.reuse_remedy(problem).startswith("nothing")  # the cluster is made anew
