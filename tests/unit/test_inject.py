"""The rule library: points per version, placeholder rendering; disarming."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from harness.errors import HarnessError
from harness.inject import Injector, _Armed, render_rule
from harness.points import POINTS, available_points, rule_blocks, rule_file

#: points with rules for 0.10 to 2.0 only (the follower's truncation on becoming follower)
TRUNCATE = frozenset({"TRUNCATE-BEFORE", "TRUNCATE-AFTER"})


@pytest.mark.parametrize("version", ["0.10.2.2", "0.11.0.3", "1.1.1", "2.0.1", "3.9.2", "4.1.2"])
def test_every_point_has_a_rule_for_supported_versions(version: str) -> None:
    kafka = frozenset(p for p, spec in POINTS.items() if spec.system == "kafka")
    expected = kafka if version.split(".")[0] in ("0", "1", "2") else kafka - TRUNCATE
    assert available_points("kafka", version) == expected
    blocks = rule_blocks(rule_file("kafka", version).read_text())
    assert "RELEASE" in blocks  # loaded only at disarm
    for point, text in blocks.items():
        rendered = render_rule(text, {"TOPIC": "t", "PARTITION": 0, "N": 5, "N1": 6, "KEY": "k",
                                      "EVENTS": "/chaos/e", "HOLD_MS": 1000})
        assert "@" not in rendered.replace("@@", "")
        if point in POINTS:
            assert f'"HIT {point} ' in rendered and 'waitFor("k", 1000)' in rendered


@pytest.mark.parametrize("version", ["4.0.7", "4.2.4"])
def test_pulsar_points_have_rules_on_both_versions(version: str) -> None:
    pulsar = frozenset(p for p, spec in POINTS.items() if spec.system == "pulsar")
    assert pulsar >= {"BK-JOURNALED", "BK-ACK-QUORUM", "CURSOR-UNPERSISTED"}
    assert available_points("pulsar", version) == pulsar
    assert available_points("kafka", version) == frozenset()
    blocks = rule_blocks(rule_file("pulsar", version).read_text())
    # a release for each kind of node that can hold a thread: bookies and brokers
    assert {"RELEASE", "RELEASE.broker"} <= blocks.keys()
    for point, text in blocks.items():
        rendered = render_rule(text, {"LEDGER": 7, "N": 5, "KEY": "k", "EVENTS": "/chaos/e",
                                      "HOLD_MS": 1000, "ML": "public/default/persistent/t"})
        assert "@" not in rendered
        if point in POINTS:
            assert f'"HIT {point} ' in rendered and 'waitFor("k", 1000)' in rendered
            assert "ledger=" in rendered and "entry=" in rendered  # what the judge reads


def test_write_set_is_bookkeepers_round_robin() -> None:
    from harness.history import ensemble_at, write_set

    ensemble = {0: ["b1", "b2", "b3"]}
    assert write_set(ensemble, 2, 0) == ["b1", "b2"]
    assert write_set(ensemble, 2, 2) == ["b3", "b1"]
    assert write_set(ensemble, 3, 4) == ["b2", "b3", "b1"]
    assert write_set({0: ["b1", "b2"]}, 3, 1) == ["b2", "b1"]  # never more than the ensemble
    changed = {0: ["b1", "b2"], 10: ["b1", "b3"]}  # b2 replaced from entry 10 on
    assert write_set(changed, 2, 9) == ["b2", "b1"] and write_set(changed, 2, 11) == ["b3", "b1"]
    assert ensemble_at(changed, 10) == ("b1", "b3") and write_set({5: ["b1"]}, 1, 2) == []


def test_1_1_takes_the_2_0_rules() -> None:
    assert rule_file("kafka", "1.1.1") == rule_file("kafka", "2.0.1")
    assert rule_file("kafka", "1.1.1").name == "kafka-2.0.btm"


def test_versions_without_rules_have_no_points() -> None:
    assert available_points("kafka", "3.8.0") == frozenset()
    assert available_points("pulsar", "3.0.0") == frozenset()


def test_unknown_placeholder_is_a_clear_error() -> None:
    with pytest.raises(HarnessError, match="@WHAT@ is unknown"):
        render_rule("IF $1 == @WHAT@", {"N": 1})


class _FakeKafka:
    """Enough of a system for the injector's judgement (no cluster)."""

    cluster = None

    def high_watermark(self, topic: str, partition: int) -> int:
        return 0

    def replica_log(self, node: object, topic: str, partition: int = 0) -> list[object]:
        return []

    def followers(self, topic: str, partition: int = 0) -> list[object]:
        return []

    def node_name(self, broker_id: int) -> str:
        return f"kafka-{broker_id}"


def _judged(point: str, hit: dict[str, object] | None, leos: dict[str, int]) -> dict[str, object]:
    from pathlib import Path
    from typing import Any, cast

    from harness.inject import Injector, _Armed

    injector = Injector(cast(Any, _FakeKafka()), "t", Path("."), cast(Any, None))
    armed = _Armed(point, "k", 100, 0, [], "/chaos/e", POINTS[point], "kafka-3", "kafka-1", 0.0,
                   hit=hit, at_kill=[{"node": n, "log_end_offset": leo} for n, leo in leos.items()])
    injector.armed[point] = armed
    return injector.summaries()[-1]


def test_hw_leader_only_needs_every_follower_at_n_plus_1() -> None:
    hit = {"node": "kafka-3", "hw": 101}
    assert _judged("HW-LEADER-ONLY", hit, {"kafka-1": 101, "kafka-2": 101, "kafka-3": 101})["hit"]
    lagging = _judged("HW-LEADER-ONLY", hit, {"kafka-1": 101, "kafka-2": 100, "kafka-3": 101})
    assert not lagging["hit"] and "kafka-2 LEO=100" in str(lagging["observed"])
    assert not _judged("HW-LEADER-ONLY", {"node": "kafka-3", "hw": 100},
                       {"kafka-1": 101, "kafka-2": 101, "kafka-3": 101})["hit"]


def test_a_held_fetch_is_hit_when_it_asks_for_the_followers_log_end() -> None:
    # the HIT line names the fetching follower by broker id; its LEO comes from its files
    truncated = {"node": "kafka-1", "follower": 2, "fetch_offset": 100}
    judged = _judged("NEW-LEADER-FETCH", truncated, {"kafka-1": 101, "kafka-2": 100, "kafka-3": 101})
    assert judged["hit"] and judged["leader"] == "kafka-1" and judged["follower"] == "kafka-2"
    assert judged["observed"] == "leader LEO=101, follower LEO=100, fetch_offset=100 (at kill)"
    stale = _judged("NEW-LEADER-FETCH", truncated, {"kafka-1": 101, "kafka-2": 101})
    assert not stale["hit"]  # the files disagree with the fetch: not the interleaving stated
    assert not _judged("NEW-LEADER-FETCH", None, {"kafka-2": 100})["hit"]


def test_a_held_truncation_is_hit_when_the_files_show_the_rules_leo() -> None:
    # 0.10 truncates a new follower to its HW: it had 101, keeps 100
    after = {"node": "kafka-2", "leo": 100, "leo_before": 101, "target": 100}
    judged = _judged("TRUNCATE-AFTER", after, {"kafka-1": 101, "kafka-2": 100, "kafka-3": 101})
    assert judged["hit"] and judged["follower"] == "kafka-2"
    assert judged["observed"] == "follower LEO=100, rule leo=100, target=100, leo_before=101 (at kill)"
    assert not _judged("TRUNCATE-AFTER", after, {"kafka-2": 101})["hit"]  # the files kept 101
    before = {"node": "kafka-2", "leo": 101, "target": 100}
    assert _judged("TRUNCATE-BEFORE", before, {"kafka-2": 101})["hit"]
    assert not _judged("TRUNCATE-BEFORE", None, {"kafka-2": 101})["hit"]


class _Container:
    """A node's container that records what it was asked; ``exec`` waits at ``barrier`` so that
    a test can require the nodes' calls to overlap."""

    def __init__(self, log: list[tuple[str, str, tuple[str, ...]]], name: str,
                 barrier: threading.Barrier | None, refuse: bool = False) -> None:
        self.status = "running"
        self.log, self.name, self.barrier, self.refuse = log, name, barrier, refuse

    def put_file(self, path: str, data: bytes) -> None:
        self.log.append((self.name, "put", (path,)))

    def exec(self, cmd: list[str]) -> tuple[int, str]:
        if self.barrier is not None:
            self.barrier.wait()  # BrokenBarrierError (timeout) if the nodes go one by one
        mode = next(a for a in cmd if a in ("-l", "-u"))
        scripts = tuple(cmd[cmd.index(mode) + 1:])
        self.log.append((self.name, mode, scripts))
        refused = self.refuse and mode == "-l"
        return (1, "ERROR no agent") if refused else (0, "")


def _injector(nodes: list[SimpleNamespace], version: str = "3.9.2") -> tuple[Injector, _Armed]:
    injector = Injector.__new__(Injector)
    injector.system = SimpleNamespace(cluster=SimpleNamespace(version=version))  # type: ignore[assignment]
    armed = _Armed("C1", "chaos-C1-k", 100, 0, nodes, "/chaos/chaos-C1-k.events", None, "kafka-1",
                   "kafka-2", 0.0)
    injector.armed, injector._disarmed = {"C1": armed}, []
    return injector, armed


def test_disarm_releases_then_unloads_each_node_once_in_parallel() -> None:
    log: list[tuple[str, str, tuple[str, ...]]] = []
    barrier = threading.Barrier(3, timeout=10)
    nodes = [SimpleNamespace(name=f"kafka-{i}", container=_Container(log, f"kafka-{i}", barrier,
                                                                     refuse=i == 3))
             for i in (1, 2, 3)]
    injector, armed = _injector(nodes)
    injector.disarm_all()
    assert injector.armed == {} and injector._disarmed == [armed]
    for i in (1, 2, 3):
        calls = [(mode, scripts) for name, mode, scripts in log if name == f"kafka-{i}"]
        main, release = "/chaos/chaos-C1-k.btm", "/chaos/chaos-C1-k-release.btm"
        # the RELEASE rule first; then one Submit unloads both, or the main rule alone where
        # the release was refused (kafka-3)
        assert calls == [("put", (release,)), ("-l", (release,)),
                         ("-u", (main, release) if i != 3 else (main,))]
    injector.disarm_all()  # idempotent: nothing armed, nothing asked
    assert len(log) == 9


def test_disarm_of_a_dead_node_asks_nothing() -> None:
    log: list[tuple[str, str, tuple[str, ...]]] = []
    node = SimpleNamespace(name="kafka-1", container=_Container(log, "kafka-1", None))
    node.container.status = "exited"
    injector, _ = _injector([node])
    injector.disarm_all()
    assert log == [] and injector.armed == {}


def test_disarm_skips_a_node_killed_since_the_arm() -> None:
    """A node killed (or stopped) after the arm and started again runs a new JVM: no held
    thread, no rule; only the node that kept its JVM is released and unloaded."""
    log: list[tuple[str, str, tuple[str, ...]]] = []
    nodes = [SimpleNamespace(name=f"kafka-{i}", container=_Container(log, f"kafka-{i}", None))
             for i in (1, 2)]
    injector, armed = _injector(nodes)
    injector.note_fault("pause", nodes[1])  # the JVM lives on
    injector.note_fault("kill9", nodes[0])
    injector.disarm_all()
    assert {name for name, _, _ in log} == {"kafka-2"}
    assert armed.restarted == {"kafka-1"}


def test_a_point_armed_again_retires_its_earlier_arm() -> None:
    """A schedule may arm one point at two episodes: the first arm's held thread is released
    and its rule unloaded (left in, it would hold again), and both arms are judged."""
    log: list[tuple[str, str, tuple[str, ...]]] = []
    node = SimpleNamespace(name="kafka-1", container=_Container(log, "kafka-1", None))
    injector, first = _injector([node])
    injector.timeline = SimpleNamespace(record=lambda *a, **k: None)  # type: ignore[assignment]
    second = _Armed("C1", "chaos-C1-k2", 180, 0, [node], "/chaos/chaos-C1-k2.events", None,
                    "kafka-1", "kafka-2", 1.0)
    injector._record_arm(second, {})
    assert injector.armed == {"C1": second} and injector._disarmed == [first]
    assert [mode for _, mode, _ in log] == ["put", "-l", "-u"]  # the first arm's release, then unload
    assert all("chaos-C1-k2" not in " ".join(scripts) for _, _, scripts in log)
    injector.disarm_all()
    assert injector.armed == {} and injector._disarmed == [first, second]


def test_a_power_loss_reads_the_state_at_the_kill_before_its_cut() -> None:
    """The held node's files as the kill left them: after the cut its log ends where its last
    flush left it (a C5 hit judged on those read a leader log end of 0)."""
    nodes = [SimpleNamespace(name="kafka-1")]
    injector, armed = _injector(nodes)  # type: ignore[arg-type]
    armed.hit = {"node": "kafka-1"}
    files = {"kafka-1": 101}
    injector.state = lambda when, a: [{"node": n, "log_end_offset": leo, "when": when}  # type: ignore[method-assign,assignment]
                                      for n, leo in files.items()]

    def cut(node: SimpleNamespace) -> dict[str, object]:
        files[node.name] = 0
        return {"records_lost": 101}

    assert injector.before_cut(cut, nodes[0]) == {"records_lost": 101} and files == {"kafka-1": 0}
    assert armed.at_kill == [{"node": "kafka-1", "log_end_offset": 101, "when": "kill"}]
    assert armed.kill is not None and armed.kill["action"] == "powerloss"
    injector.note_fault("powerloss", nodes[0])  # after the fault: the state stays the one read first
    assert armed.at_kill[0]["log_end_offset"] == 101


class _Starting:
    """A container whose Byteman listener answers after ``down`` refused connections."""

    status = "running"

    def __init__(self, down: int, reject: bool = False) -> None:
        self.down, self.reject, self.submits = down, reject, 0

    def put_file(self, path: str, data: bytes) -> None:
        pass

    def exec(self, argv: list[str]) -> tuple[int, str]:
        self.submits += 1
        if self.submits <= self.down:
            return 1, ("java.net.ConnectException: Connection refused\n\tat "
                       "org.jboss.byteman.agent.submit.Submit$Comm.<init>(Submit.java:881)")
        return (1, "ERROR in rule C1: no such method") if self.reject else (0, "install rule C1")


def test_an_arm_waits_for_a_starting_listener_not_past_a_rejection(monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.inject as inject

    monkeypatch.setattr("tenacity.nap.time.sleep", lambda s: None)
    injector = Injector.__new__(Injector)
    starting = SimpleNamespace(name="kafka-1", container=_Starting(down=3))
    injector._submit(starting, "RULE C1", "k")
    assert starting.container.submits == 4  # refused three times while its JVM started
    rejected = SimpleNamespace(name="kafka-1", container=_Starting(down=1, reject=True))
    with pytest.raises(HarnessError, match="Byteman rejected the rules on kafka-1: ERROR in rule C1"):
        injector._submit(rejected, "RULE C1", "k")
    assert rejected.container.submits == 2  # a rejection is not retried
    monkeypatch.setattr(inject, "ARM_WAIT_S", 0.0)
    down = SimpleNamespace(name="kafka-1", container=_Starting(down=99))
    with pytest.raises(HarnessError, match="submitting rules to kafka-1 failed: no Byteman listener"):
        injector._submit(down, "RULE C1", "k")


def test_a_new_leader_s_high_watermark_is_awaited_before_the_arm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Right after a leader change the new leader answers OFFSET_NOT_AVAILABLE ("high watermark
    is not caught up", KIP-207) until its followers fetched: the arm asks again."""
    from harness.case import InjectArgs
    from harness.errors import AdminError, InjectError

    monkeypatch.setattr("tenacity.nap.time.sleep", lambda s: None)
    answers: list[Any] = [AdminError("Leader high watermark is not caught up")] * 2 + [0]

    def high_watermark(topic: str, partition: int) -> int:
        answer = answers.pop(0) if answers else AdminError("Unknown topic or partition")
        if isinstance(answer, BaseException):
            raise answer
        return int(answer)

    injector, _ = _injector([])
    injector.topic = "t"
    injector.system = SimpleNamespace(high_watermark=high_watermark)  # type: ignore[assignment]
    assert injector._target_offset(InjectArgs(point="C1")) == 0 and not answers  # 0 is an offset too
    assert injector._target_offset(InjectArgs(point="C1", offset=7)) == 7
    monkeypatch.setattr("harness.inject.ARM_WAIT_S", 0.01)
    with pytest.raises(InjectError, match="inject C1: Unknown topic or partition"):
        injector._target_offset(InjectArgs(point="C1"))
