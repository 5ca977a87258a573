"""The runner's remedy for a ZooKeeper-mode controller stuck on stale broker epochs.

Kafka 3.9.2 sometimes keeps stamping LeaderAndIsr with a broker's old epoch after the
replicas and the controller restart in quick succession; the ISR then never grows. An
``await isr_size`` probes for that after UNSTICK_AFTER_S and forces an election once.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from harness import runner
from harness.errors import WaitTimeout


class FakeSystem:
    def __init__(self, problem: str | None, statuses: tuple[str, ...] = ("running",) * 3) -> None:
        self.problem = problem
        self.elections = 0
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


def _run(system: FakeSystem, mode: str = "zk") -> Any:
    run = object.__new__(runner._Run)
    run.cluster = SimpleNamespace(spec=SimpleNamespace(mode=mode))
    run.system = system
    run.recovery = {}
    run.timeline = SimpleNamespace(marks=[], record=lambda kind, **kw: run.timeline.marks.append(kw))
    run.progress = lambda msg: None
    return run


@pytest.fixture(autouse=True)
def short_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "UNSTICK_AFTER_S", 0.3)


def test_a_stuck_controller_is_unstuck_once_and_recorded() -> None:
    system = FakeSystem("kafka-1 did not take the controller's LeaderAndIsr")
    run = _run(system)
    assert run._wait_unsticking(lambda: system.elections > 0, timeout=6.0, what="an ISR of 2",
                                logs=None)
    assert system.elections == 1
    assert "forced a controller election" in run.recovery["actions"][0]
    assert run.timeline.marks[0]["label"] == "forced controller election"


def test_a_healthy_controller_is_left_alone_and_the_wait_times_out() -> None:
    system = FakeSystem(None)
    run = _run(system)
    with pytest.raises(WaitTimeout):
        run._wait_unsticking(lambda: False, timeout=6.0, what="an ISR of 2", logs=None)
    assert system.elections == 0 and not run.recovery


def test_no_probe_while_a_broker_is_down_nor_in_kraft_mode() -> None:
    down = FakeSystem("kafka-3 did not take it", ("running", "running", "exited"))
    with pytest.raises(WaitTimeout):
        _run(down)._wait_unsticking(lambda: False, timeout=6.0, what="x", logs=None)
    kraft = FakeSystem("whatever")
    with pytest.raises(WaitTimeout):
        _run(kraft, mode="kraft")._wait_unsticking(lambda: False, timeout=1.0, what="x", logs=None)
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


def _reuse_run(system: FakeReuse) -> tuple[Any, list[str], list[bool]]:
    run = object.__new__(runner._Run)
    ups: list[bool] = []
    said: list[str] = []
    run.cluster = SimpleNamespace(up=lambda progress, reuse=True: ups.append(reuse))
    run.system = system
    run.remaining = lambda s: s
    run.progress = said.append
    return run, said, ups


def test_a_fit_reused_cluster_is_kept_untouched() -> None:
    run, said, ups = _reuse_run(FakeReuse(None, None))
    assert run._reuse_healthy() is True
    assert said == [] and ups == [] and run.system.remedies == 0


def test_an_unfit_reused_cluster_gets_the_remedy_and_is_kept_when_it_works() -> None:
    run, said, ups = _reuse_run(FakeReuse("bookie-2 lock invalidated 900 times in 10 s", 1))
    assert run._reuse_healthy() is True
    assert run.system.remedies == 1 and ups == []
    assert any("bookie-2 lock invalidated" in s for s in said)
    assert any("restarted bookie-2" in s for s in said)


def test_an_unfit_reused_cluster_is_recreated_when_the_remedy_fails() -> None:
    run, said, ups = _reuse_run(FakeReuse("controller stuck", None))
    assert run._reuse_healthy() is False
    assert run.system.remedies == 1 and ups == [False]
    assert "recreating the cluster" in said[-1]


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
    monkeypatch.setattr(runner, "READY_REMEDY_AFTER_S", 0.5)
    system = ReadySystem("restarted bookie-1")
    run = _run(system)
    run._wait_ready(30.0)
    assert system.remedies == 1 and system.waits[0] == 0.5 and 28 < system.waits[1] <= 30
    assert run.recovery["actions"] == ["recovery: not ready 0.5 s after the heal, restarted bookie-1"]
    assert run.timeline.marks[0]["label"] == "readiness remedy"


def test_a_remedy_with_nothing_to_do_lets_the_wait_time_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "READY_REMEDY_AFTER_S", 0.5)
    system = ReadySystem(None)
    run = _run(system)
    with pytest.raises(WaitTimeout):
        run._wait_ready(30.0)
    assert system.remedies == 1 and len(system.waits) == 2 and not run.recovery


def test_a_system_without_a_remedy_waits_once() -> None:
    system = FakeSystem(None)
    calls = []
    system.wait_ready = lambda timeout: calls.append(timeout)  # type: ignore[attr-defined]
    _run(system)._wait_ready(30.0)
    assert calls == [30.0]
