"""The pause fault retries runc's "unable to freeze" and gives up on anything else; the
Nemesis keeps the diskfull fault until a heal (or a kill) undoes it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from harness.backend.cluster import Node
from harness.errors import BackendError, FaultError
from harness.faults import FREEZE_ATTEMPTS, Nemesis

FREEZE_FAILED = ('pause broker-2 failed: 500 Server Error: Internal Server Error ("Cannot pause container '
                 'abc: OCI runtime pause failed: unable to freeze: unknown")')


class FakeContainer:
    net_persists = False  # a container's network dies with its process

    def __init__(self, failures: list[str]) -> None:
        self.failures = failures
        self.status = "running"
        self.calls = 0

    def pause(self) -> None:
        self.calls += 1
        if self.failures:
            raise BackendError(self.failures.pop(0))
        self.status = "paused"


class Timeline:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def record(self, type_: str, **fields: Any) -> dict[str, Any]:  # as harness.history.Recorder
        self.rows.append({"kind": type_, **fields})
        return self.rows[-1]


def _node(container: FakeContainer) -> Node:
    return cast(Node, SimpleNamespace(name="broker-2", container=container, disk=None))


def test_a_freeze_that_times_out_is_retried_and_the_attempts_are_recorded() -> None:
    container = FakeContainer([FREEZE_FAILED, FREEZE_FAILED])
    timeline = Timeline()
    nemesis = Nemesis(cast(Any, None), timeline)
    nemesis.apply("pause", _node(container), role="owner")
    assert container.status == "paused" and container.calls == 3
    assert nemesis.paused == {"broker-2"}
    assert timeline.rows[-1]["action"] == "pause"
    assert timeline.rows[-1]["detail"] == {"freeze_attempts": 3}


def test_a_first_time_freeze_records_no_attempts() -> None:
    timeline = Timeline()
    Nemesis(cast(Any, None), timeline).apply("pause", _node(FakeContainer([])))
    assert timeline.rows[-1]["detail"] is None


def test_a_freeze_that_never_succeeds_fails_after_the_bounded_attempts() -> None:
    container = FakeContainer([FREEZE_FAILED] * (FREEZE_ATTEMPTS + 3))
    nemesis = Nemesis(cast(Any, None), Timeline())
    with pytest.raises(FaultError, match="unable to freeze"):
        nemesis.apply("pause", _node(container))
    assert container.calls == FREEZE_ATTEMPTS
    assert nemesis.paused == set()


def test_other_pause_errors_are_not_retried() -> None:
    container = FakeContainer(["pause broker-2 failed: 409 Conflict: container is not running"])
    with pytest.raises(FaultError, match="not running"):
        Nemesis(cast(Any, None), Timeline()).apply("pause", _node(container))
    assert container.calls == 1


class _Killable(FakeContainer):
    pid = 1

    def netns(self) -> Any:
        return object()  # _flush_chain is stubbed: nothing runs in it

    def kill(self, signal: str) -> None:
        self.status = "exited"


def test_diskfull_is_healed_by_heal_and_forgotten_by_a_kill(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness import faults

    monkeypatch.setattr(faults, "_flush_chain", lambda ns: None)  # no iptables here
    calls: list[tuple[str, bool]] = []

    def set_full(node: Node, full: bool) -> dict[str, Any]:
        calls.append((node.name, full))
        return {"registered_s": 0.5}

    timeline = Timeline()
    nemesis = Nemesis(cast(Any, None), timeline)
    bookie = cast(Node, SimpleNamespace(name="bookie-2", container=_Killable([]), disk=None))
    with pytest.raises(FaultError, match="no disk-full fault"):
        Nemesis(cast(Any, SimpleNamespace(spec=SimpleNamespace(name="kafka-zk"))), timeline).apply(
            "diskfull", bookie)
    nemesis.set_disk_full = set_full
    nemesis.apply("diskfull", bookie, role="bookie")
    assert nemesis.full == {"bookie-2"} and timeline.rows[-1]["detail"] == {"registered_s": 0.5}
    nemesis.heal(bookie)
    assert calls == [("bookie-2", True), ("bookie-2", False)] and nemesis.full == set()
    nemesis.apply("diskfull", bookie)
    nemesis.kill9(bookie)  # the rule died with the JVM: nothing to undo
    nemesis.heal(bookie)
    assert calls == [("bookie-2", True), ("bookie-2", False), ("bookie-2", True)]
