"""The run's remedies, against fake systems: a stuck controller, an unfit reused cluster,
a cluster that stays not ready after the heal.

Kafka 3.9.2 sometimes keeps stamping LeaderAndIsr with a broker's old epoch after the
replicas and the controller restart in quick succession; the ISR then never grows. An
``await isr_size`` probes for that after UNSTICK_AFTER_S and forces an election once.
"""

from __future__ import annotations

import re
import time
from contextlib import ExitStack
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.case import load_case_text
from harness.errors import WaitTimeout
from harness.run import recovery, setup
from harness.run.context import RunContext
from harness.run.events import RunEvents
from harness.systems.kafka import KafkaSystem

CASE = """
name: fake
system: kafka
cluster: kafka-zk
steps:
  - await: {time: 1}
"""


class FakeSystem:
    """The stuck-controller part of ZooKeeper-mode Kafka: the real ``stuck_controller``
    runs against fake brokers and a fake controller probe."""

    stuck_controller = KafkaSystem.stuck_controller

    def __init__(self, problem: str | None, statuses: tuple[str, ...] = ("running",) * 3,
                 mode: str = "zk") -> None:
        self.problem = problem
        self.elections = 0
        self.spec = SimpleNamespace(mode=mode)
        self._nodes = [SimpleNamespace(name=f"kafka-{i}", container=SimpleNamespace(status=s))
                       for i, s in enumerate(statuses, 1)]

    def brokers(self) -> list[Any]:
        return self._nodes

    def controller_problem(self, timeout: float = 20) -> str | None:
        return self.problem

    def broken_controller(self) -> str | None:
        return None

    def force_controller_election(self) -> None:
        self.elections += 1


class Marks:
    def __init__(self) -> None:
        self.marks: list[dict[str, Any]] = []

    def record(self, type_: str, **fields: Any) -> dict[str, Any]:
        self.marks.append(fields)
        return fields


def _run(system: Any, tmp_path: Path = Path("/nonexistent")) -> Any:
    timeline = Marks()
    ctx = RunContext(load_case_text(CASE), tmp_path, ExitStack(),
                     RunEvents(timeline))  # type: ignore[arg-type]
    ctx.system = system
    ctx.cluster = SimpleNamespace(node_logs=None)  # type: ignore[assignment]
    ctx.timeline = timeline  # type: ignore[attr-defined]
    return ctx


@pytest.fixture(autouse=True)
def short_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recovery, "UNSTICK_AFTER_S", 0.3)


def test_a_stuck_controller_is_unstuck_once_and_recorded() -> None:
    system = FakeSystem("kafka-1 did not take the controller's LeaderAndIsr")
    run = _run(system)
    assert recovery.wait_unsticking(run, lambda: system.elections > 0, timeout=6.0,
                                    what="an ISR of 2")
    assert system.elections == 1
    assert "forced a controller election" in run.recovery.actions[0]
    assert run.timeline.marks[0]["label"] == "forced controller election"


def test_a_healthy_controller_is_left_alone_and_the_wait_times_out() -> None:
    system = FakeSystem(None)
    run = _run(system)
    with pytest.raises(WaitTimeout) as raised:
        recovery.wait_unsticking(run, lambda: False, timeout=6.0, what="an ISR of 2")
    assert system.elections == 0 and not run.recovery.actions and not run.timeline.marks
    # the message gives the whole wait (at least the timeout), not the part after the probe
    said = re.match(r"timed out after (\d+)s waiting for an ISR of 2", str(raised.value))
    assert said and int(said.group(1)) >= 6


def test_no_probe_while_a_broker_is_down_nor_in_kraft_mode() -> None:
    down = FakeSystem("kafka-3 did not take it", ("running", "running", "exited"))
    with pytest.raises(WaitTimeout):
        recovery.wait_unsticking(_run(down), lambda: False, timeout=6.0, what="x")
    kraft = FakeSystem("whatever", mode="kraft")
    with pytest.raises(WaitTimeout):
        recovery.wait_unsticking(_run(kraft), lambda: False, timeout=1.0, what="x")
    assert down.elections == 0 and kraft.elections == 0


class FakeReuse:
    """A reused cluster whose problem goes away after ``cured_after`` remedies (None: never)."""

    def __init__(self, problem: str | None, cured_after: int | None) -> None:
        self.problem, self.cured_after, self.remedies = problem, cured_after, 0

    def wait_ready(self, timeout: float) -> None:
        pass

    def reuse_problem(self) -> str | None:
        if self.cured_after is not None and self.remedies >= self.cured_after:
            return None
        return self.problem

    def reuse_remedy(self, problem: str) -> str:
        self.remedies += 1
        return "restarted bookie-2"


def _reuse_run(system: FakeReuse, caplog: pytest.LogCaptureFixture
               ) -> tuple[Any, pytest.LogCaptureFixture, list[bool]]:
    run = _run(system)
    ups: list[bool] = []
    run.cluster = SimpleNamespace(up=lambda reuse=True: ups.append(reuse))
    caplog.set_level("INFO", logger="harness")
    return run, caplog, ups


def test_a_fit_reused_cluster_is_kept_untouched(caplog: pytest.LogCaptureFixture) -> None:
    run, said, ups = _reuse_run(FakeReuse(None, None), caplog)
    assert setup._reuse_healthy(run) is True
    assert said.messages == [] and ups == [] and run.system.remedies == 0


def test_an_unfit_reused_cluster_gets_the_remedy_and_is_kept_when_it_works(
        caplog: pytest.LogCaptureFixture) -> None:
    run, said, ups = _reuse_run(FakeReuse("bookie-2 lock invalidated 900 times in 10 s", 1), caplog)
    assert setup._reuse_healthy(run) is True
    assert run.system.remedies == 1 and ups == []
    assert any("bookie-2 lock invalidated" in s for s in said.messages)
    assert any("restarted bookie-2" in s for s in said.messages)


def test_an_unfit_reused_cluster_is_recreated_when_the_remedy_fails(caplog: pytest.LogCaptureFixture) -> None:
    run, said, ups = _reuse_run(FakeReuse("controller stuck", None), caplog)
    assert setup._reuse_healthy(run) is False
    assert run.system.remedies == 1 and ups == [False]
    assert "recreating the cluster" in said.messages[-1]


class ReadySystem:
    """A system whose readiness arrives only after its remedy ran (or never)."""

    def __init__(self, remedy: str | None) -> None:
        self.remedy, self.remedies, self.waits = remedy, 0, []

    def wait_ready(self, timeout: float) -> None:
        self.waits.append(timeout)
        if not self.remedies or self.remedy is None:
            raise WaitTimeout("cluster: all 3 bookies registered")

    def ready_remedy(self) -> str | None:
        self.remedies += 1
        return self.remedy


def test_recovery_applies_the_readiness_remedy_once_and_records_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recovery, "READY_REMEDY_AFTER_S", 0.5)
    system = ReadySystem("restarted bookie-1")
    run = _run(system)
    recovery.wait_ready_remedied(run, 30.0)
    assert system.remedies == 1 and system.waits[0] == 0.5 and 28 < system.waits[1] <= 30
    assert run.recovery.actions == ["recovery: not ready 0.5 s after the heal, restarted bookie-1"]
    assert run.timeline.marks[0]["label"] == "readiness remedy"


def test_a_remedy_with_nothing_to_do_lets_the_wait_time_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recovery, "READY_REMEDY_AFTER_S", 0.5)
    system = ReadySystem(None)
    run = _run(system)
    with pytest.raises(WaitTimeout):
        recovery.wait_ready_remedied(run, 30.0)
    assert system.remedies == 1 and len(system.waits) == 2 and not run.recovery.actions


def test_a_system_without_a_remedy_waits_once() -> None:
    system = FakeSystem(None)
    calls = []
    system.wait_ready = lambda timeout: calls.append(timeout)  # type: ignore[attr-defined]
    recovery.wait_ready_remedied(_run(system), 30.0)
    assert calls == [30.0]


class HaltingSystem(FakeSystem):
    """Kafka 0.10 after an acknowledged record was lost: the old leader's log is longer than
    the new leader's, and it halts each time it starts ("log truncation is not allowed")."""

    def __init__(self, led: bool = True) -> None:
        super().__init__(None, statuses=("exited", "running", "running"))
        self.led = led

    def converged(self, topic: str, partitions: int, replication_factor: int) -> bool:
        return False

    def leader_of(self, topic: str, partition: int) -> Any:
        return SimpleNamespace(ref=2, node="kafka-2" if self.led else None)


_HALTED = ("[t] INFO [Kafka Server 1], starting\n[t] FATAL [ReplicaFetcherThread-0-2], Exiting because "
           "log truncation is not allowed for partition t-0\n[t] INFO [Kafka Server 1], shutting down")


def _logs(names: list[str] | None = None, tail: int = 20) -> list[tuple[str, str]]:
    return [(n, _HALTED) for n in ("kafka-1",) if names is None or n in names]


def test_a_broker_that_halts_after_the_heal_is_recorded_and_the_leaders_are_read() -> None:
    run = _run(HaltingSystem())
    run.cluster = SimpleNamespace(node_logs=_logs)
    t0 = time.monotonic()
    recovery._wait_converged(run, 30.0)
    assert time.monotonic() - t0 < 5  # not the whole timeout
    note = run.recovery.observations[-1]
    assert note.startswith("kafka-1 exited on its own after the heal started it, and stayed down")
    assert "log truncation is not allowed" in note
    assert run.timeline.marks[-1]["label"] == "broker exited in recovery"


def test_a_broker_whose_halt_hung_is_killed_once_then_read_around() -> None:
    """0.10.2.2 in the matrix: kafka-1 logged its halt, began its shutdown, and never exited."""
    system = HaltingSystem()
    system._nodes[0].container.status = "running"
    killed: list[str] = []

    def kill(signal: str) -> None:
        killed.append(signal)
        system._nodes[0].container.status = "exited"

    system._nodes[0].container.kill = kill
    run = _run(system)
    run.cluster = SimpleNamespace(node_logs=_logs, node=lambda name: system._nodes[int(name[-1]) - 1])
    recovery._wait_converged(run, 30.0)
    assert killed == ["KILL"]
    assert run.recovery.observations[0].startswith('kafka-1 logged "Exiting because log truncation is not '
                                                   'allowed" and its exit hung')
    assert run.recovery.observations[-1].startswith("kafka-1 exited on its own after the heal started it")
    assert [m["label"] for m in run.timeline.marks] == ["halted broker killed", "broker exited in recovery"]


def test_a_halted_broker_with_a_leaderless_partition_still_times_out() -> None:
    run = _run(HaltingSystem(led=False))
    run.cluster = SimpleNamespace(node_logs=_logs)
    with pytest.raises(WaitTimeout):
        recovery._wait_converged(run, 1.0)
    assert not run.recovery.observations


_FAILED = ("[t] INFO [Broker id=3] Follower {tp} starts at leader epoch 2 from offset 312\n"
           "[t] ERROR Unexpected error occurred while processing data for partition {tp} at offset 11\n"
           "kafka.common.UnexpectedAppendOffsetException: First offset 10 is less than the next offset 11.\n"
           "[t] WARN [ReplicaFetcher replicaId=3, leaderId=2, fetcherId=0] Partition {tp} marked as failed\n")


def test_a_follower_whose_fetcher_gave_up_is_recorded_and_the_leaders_are_read() -> None:
    system = HaltingSystem()
    system._nodes[0].container.status = "running"
    run = _run(system)
    topic = run.topic
    run.cluster = SimpleNamespace(node_logs=lambda names=None, tail=20: [
        (n, _FAILED.format(tp=f"{topic}-0") if n == "kafka-3" else "") for n in names or ()])
    t0 = time.monotonic()
    recovery._wait_converged(run, 30.0)
    assert time.monotonic() - t0 < 5
    note = run.recovery.observations[-1]
    assert note.startswith("kafka-3's fetcher gave up partition 0 (kafka.common.UnexpectedAppendOffset")
    assert note.endswith("and it stayed out of the ISR; every partition had a leader, and was read from it")
    assert run.timeline.marks[-1]["label"] == "fetcher gave up in recovery"


class NamedNotServing(FakeSystem):
    """ZooKeeper names kafka-2 the leader; kafka-2 serves only once a controller election
    has sent it a LeaderAndIsr with its current epoch (CI, 3.9.2: it had rejected the
    stuck controller's for a minute)."""

    def leader_of(self, topic: str, partition: int) -> Any:
        from harness.systems.base import Leader
        return Leader(2, "kafka-2")

    def leader_ref(self, node: Any) -> int:
        return 2

    def serves_as_leader(self, node: Any, topic: str, partition: int) -> bool:
        return self.elections > 0


def _leader_is_run(system: FakeSystem) -> Any:
    from harness.run.roles import LeaderWatch
    run = _run(system)
    run.watch = LeaderWatch.__new__(LeaderWatch)
    run.watch.observe = lambda partition, leader: None  # type: ignore[method-assign]
    run.resolver = SimpleNamespace(resolve=lambda selector: SimpleNamespace(name="kafka-2"))
    return run


def test_await_leader_is_unsticks_a_controller_whose_leader_does_not_serve() -> None:
    from harness.run.awaits import AWAITS
    system = NamedNotServing("kafka-2 did not take the controller's LeaderAndIsr")
    run = _leader_is_run(system)
    seen = AWAITS["leader_is"](run, {"partition": 0, "target": "old-leader"}, 6.0)
    assert seen["leader"] == "kafka-2" and system.elections == 1
    assert "kafka-2 leading" in run.recovery.actions[0]
    # no problem found: no election, and the timeout names what was awaited
    healthy = NamedNotServing(None)
    with pytest.raises(WaitTimeout, match="partition 0: kafka-2 leading"):
        AWAITS["leader_is"](_leader_is_run(healthy), {"partition": 0, "target": "x"}, 1.5)
    assert healthy.elections == 0
