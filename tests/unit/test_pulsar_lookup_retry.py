"""A lookup retries the answers Pulsar gives while a bundle changes hands, and nothing else.

The CI of session 32's stop failed on one: right after an unload, the destination broker
answered a lookup with HTTP 500 "Failed to acquire ownership for namespace bundle ..."
(the old owner still held the bundle's lock). Pulsar's clients retry such a lookup.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from harness.errors import AdminError
from harness.systems.pulsar import PulsarSystem, _HttpStatus

_OWNERSHIP = ("GET http://127.0.0.1:1/lookup/v2/topic/x: HTTP 500 Failed to acquire ownership "
              "for namespace bundle public/default/0xd0000000_0xe0000000")
_ANSWER = {"brokerUrl": "pulsar://broker-2:6650"}


def _system(answers: list[Any]) -> tuple[PulsarSystem, list[str]]:
    """A PulsarSystem whose REST calls give ``answers`` in turn (an exception is raised)."""
    system = PulsarSystem(SimpleNamespace(spec=None))  # type: ignore[arg-type]
    calls: list[str] = []

    def request(method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(path)
        answer = answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    system._request = request  # type: ignore[method-assign]
    return system, calls


def test_ownership_race_and_unavailable_are_retried() -> None:
    system, calls = _system([_HttpStatus(_OWNERSHIP, 500),
                             _HttpStatus("HTTP 503 bundle is being unloaded", 503), _ANSWER])
    assert system.lookup("t", settle=10) == _ANSWER
    assert calls == ["/lookup/v2/topic/persistent/public/default/t"] * 3


@pytest.mark.parametrize("error", [
    _HttpStatus("HTTP 500 some other failure", 500),
    _HttpStatus("HTTP 404 Topic not found", 404),
    AdminError("no broker answered"),
])
def test_other_errors_are_raised_at_once(error: Exception) -> None:
    system, calls = _system([error, _ANSWER])
    with pytest.raises(type(error)) as raised:
        system.lookup("t", settle=10)
    assert raised.value is error and len(calls) == 1


def test_settle_zero_raises_the_first_race_answer() -> None:
    """``unload`` polls with settle=0: its own wait retries, so a lookup must not block it."""
    system, calls = _system([_HttpStatus(_OWNERSHIP, 500), _ANSWER])
    with pytest.raises(_HttpStatus, match="acquire ownership"):
        system.lookup("t", settle=0)
    assert len(calls) == 1


def test_a_race_that_outlasts_settle_is_raised() -> None:
    system, calls = _system([_HttpStatus(_OWNERSHIP, 500)] * 50)
    with pytest.raises(_HttpStatus, match="acquire ownership"):
        system.lookup("t", settle=0.6)
    assert 2 <= len(calls) < 50


def _answers(answers: list[Any]) -> Any:
    """A stand-in for one system call that gives ``answers`` in turn (an exception is raised)."""

    def call(topic: str, partition: int | None = None) -> Any:
        answer = answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    return call


def test_an_owner_or_bookie_step_waits_for_brokers_that_are_starting(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault step on ``owner`` or a bookie right after the brokers were started again: none
    answers at first. Any other error is raised at once."""
    from harness.systems.pulsar import _NoBroker

    monkeypatch.setattr("tenacity.nap.time.sleep", lambda s: None)
    system, _ = _system([])
    answers: list[Any] = [_NoBroker("GET /lookup: no broker answered"), _NoBroker("again"), "broker-2"]
    system.agreed_owner = _answers(answers)  # type: ignore[method-assign]
    assert system.resolve_role("owner", "t", 0, lambda: None) == "broker-2" and not answers
    answers[:] = [AdminError("HTTP 404 Topic not found"), "broker-2"]
    with pytest.raises(AdminError, match="404"):
        system.resolve_role("owner", "t", 0, lambda: None)
    # a bookie of the ledger: the brokers' stats name it
    bookie = SimpleNamespace(name="bookie-3")
    stats: list[Any] = [_NoBroker("GET /internalStats: no broker answered"), [bookie]]
    system.ledger_ensemble = _answers(stats)  # type: ignore[method-assign]
    assert system.resolve_role("bookie", "t", 0, lambda: None) is bookie and not stats


def _brokers(running: tuple[str, ...], paused: tuple[str, ...]) -> tuple[PulsarSystem, dict[str, Any]]:
    """A PulsarSystem with stand-in brokers (their container states) and topic names; its
    lookups are left to the test."""
    system, _ = _system([])
    brokers: dict[str, Any] = {name: SimpleNamespace(name=name, container=SimpleNamespace(status=status))
                               for names, status in ((running, "running"), (paused, "paused"))
                               for name in names}
    system.brokers = lambda: list(brokers.values())  # type: ignore[method-assign]
    system._part = lambda topic, partition: partition  # type: ignore[method-assign]
    system.topic_name = lambda topic, partition=None: f"persistent://public/default/{topic}"  # type: ignore[method-assign]
    system.cluster = SimpleNamespace(node=lambda name: brokers[name])  # type: ignore[assignment]
    system._node_for_url = lambda url: brokers[url.split("//")[1].split(":")[0]]  # type: ignore[method-assign]
    return system, brokers


def test_an_owner_step_waits_until_the_running_brokers_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker resumed from a long pause still names itself the owner for a moment, while the
    other broker took the topic over: a ``kill9 owner`` then must not hit the resumed one."""
    monkeypatch.setattr("tenacity.nap.time.sleep", lambda s: None)
    system, brokers = _brokers(running=("broker-1", "broker-2"), paused=("broker-3",))
    # per asked broker, its answers in turn: broker-1 (resumed) claims the topic twice
    views = {"broker-1": ["broker-1", "broker-1", "broker-2"], "broker-2": ["broker-2"] * 3}
    asked: list[str | None] = []

    def lookup(topic: str, partition: int | None = None, *, settle: float = 30,
               via: str | None = None) -> Any:
        asked.append(via)
        return {"brokerUrl": f"pulsar://{views[str(via)].pop(0)}:6650"}

    system.lookup = lookup  # type: ignore[method-assign]
    assert system.resolve_role("owner", "t", 0, lambda: None) is brokers["broker-2"]
    assert asked == ["broker-1", "broker-2"] * 3  # the paused broker-3 is not asked
    views.update({"broker-1": ["broker-2"], "broker-2": ["broker-2"]})
    assert system.resolve_role("non-owner", "t", 0, lambda: None) is brokers["broker-1"]


def test_owners_that_never_agree_are_raised_with_both_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.systems.pulsar import _OwnersDisagree

    system, _ = _brokers(running=("broker-1", "broker-2"), paused=())
    system.lookup = (lambda topic, partition=None, *, settle=30, via=None:  # type: ignore[method-assign]
                     {"brokerUrl": f"pulsar://{via}:6650"})
    with pytest.raises(_OwnersDisagree, match="broker-1 says broker-1, broker-2 says broker-2"):
        system.agreed_owner("t", 0)
