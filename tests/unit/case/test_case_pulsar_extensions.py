"""Schema extensions for the Pulsar cases: unload, the Java producer, per-workload settings,
per-consumer subscription types, spread topics, block_if_queue_full."""

from __future__ import annotations

import pytest

from harness.case import SubscribeArgs, UnloadArgs, load_case_text
from harness.errors import CaseError

_PULSAR = "system: pulsar\ncluster: pulsar\n"
_KAFKA = "system: kafka\ncluster: kafka-zk\n"


def test_good_extensions() -> None:
    case = load_case_text(_PULSAR + """\
topic: {partitions: 8, spread: true}
client: {block_if_queue_full: false}
steps:
  - produce: {duration: 5s, driver: java, name: a, background: true,
              settings: {max_pending_messages: 2000, memory_limit_bytes: 209715200,
                         block_if_queue_full: true}}
  - consume: {background: true, subscription_type: Key_Shared, group: ks}
  - unload: {partition: 3, to: broker-2}
  - unload:
  - unload: {to: non-owner}
""")
    produce, consume, unload, bare, role = (s.args for s in case.steps)
    assert case.topic.spread and not case.client.block_if_queue_full
    assert produce.driver == "java" and dict(produce.settings) == {
        "max_pending_messages": 2000, "memory_limit_bytes": 209715200, "block_if_queue_full": True}
    assert consume.subscription_type == "Key_Shared" and consume.group == "ks"
    assert isinstance(unload, UnloadArgs) and isinstance(role, UnloadArgs)
    assert unload == UnloadArgs(partition=3, to=unload.to) and unload.to is not None
    assert unload.to.node == "broker-2"
    assert bare == UnloadArgs()
    assert role.to is not None and role.to.role == "non-owner"


def test_defaults() -> None:
    case = load_case_text(_PULSAR + "steps:\n  - produce: {count: 1}\n  - consume: {count: 1}\n")
    produce, consume = (s.args for s in case.steps)
    assert produce.driver == "python" and dict(produce.settings) == {}
    assert consume.subscription_type is None
    assert case.client.block_if_queue_full is True and case.topic.spread is False


@pytest.mark.parametrize(("text", "line", "fragment"), [
    (_PULSAR + "steps:\n  - produce: {count: 1, driver: go}\n", 4,
     "steps[0].produce.driver: unknown value 'go' (expected one of: python, java)"),
    (_PULSAR + "steps:\n  - produce:\n      count: 1\n      settings: {max_pending: 3}\n", 6,
     "steps[0].produce.settings: unknown key 'max_pending'"),
    (_PULSAR + "steps:\n  - produce:\n      count: 1\n      settings: {acks: all}\n", 6,
     "steps[0].produce.settings.acks: applies to kafka cases only"),
    (_PULSAR + "steps:\n  - produce:\n      count: 1\n      settings: {max_pending_messages: -1}\n",
     6, "steps[0].produce.settings.max_pending_messages"),
    (_KAFKA + "steps:\n  - produce: {count: 1, driver: java}\n", 4,
     "steps[0].produce.driver: the Kafka Java driver runs transactional workloads only"),
    (_PULSAR + "steps:\n  - consume: {count: 1, subscription_type: shared}\n", 4,
     "did you mean 'Shared'?"),
    (_KAFKA + "steps:\n  - consume: {count: 1, subscription_type: Shared}\n", 4,
     "steps[0].consume.subscription_type: applies to pulsar cases only"),
    (_KAFKA + "steps:\n  - unload: {partition: 0}\n", 4,
     "steps[0].unload: unload applies to pulsar cases only"),
    (_PULSAR + "steps:\n  - unload: {partition: 2}\n", 4,
     "steps[0].unload.partition: partition 2 does not exist (the topic has 1)"),
    (_PULSAR + "steps:\n  - unload: {to: bookie-1}\n", 4,
     "steps[0].unload.to: bookie-1 is not a broker"),
    (_PULSAR + "steps:\n  - unload: {to: zookeeper}\n", 4,
     "steps[0].unload.to: zookeeper does not name a broker"),
    (_PULSAR + "steps:\n  - unload: {node: broker-1}\n", 4,
     "steps[0].unload: unknown key 'node'"),
    (_PULSAR + "topic: {spread: yes please}\nsteps: [{kill9: owner}]\n", 3, "topic.spread"),
    (_KAFKA + "topic: {spread: true}\nsteps: [{kill9: leader}]\n", 3,
     "topic.spread: applies to pulsar cases only"),
    (_PULSAR + "client: {block_if_queue_full: 1}\nsteps: [{kill9: owner}]\n", 3,
     "client.block_if_queue_full"),
])
def test_bad_extensions(text: str, line: int, fragment: str) -> None:
    with pytest.raises(CaseError) as info:
        load_case_text(text, "x.yaml")
    assert str(info.value).startswith(f"x.yaml:{line}: "), str(info.value)
    assert fragment in str(info.value), str(info.value)


def test_subscribe_makes_an_admin_subscription() -> None:
    case = load_case_text(_PULSAR + "steps:\n  - subscribe: {group: app}\n"
                          "  - subscribe: {group: b, position: earliest}\n")
    assert [s.args for s in case.steps] == [SubscribeArgs("app", "latest"), SubscribeArgs("b", "earliest")]


@pytest.mark.parametrize(("text", "fragment"), [
    (_KAFKA + "steps:\n  - subscribe: {group: app}\n", "subscribe applies to pulsar cases only"),
    (_PULSAR + "steps:\n  - subscribe: app\n", "expected {group: NAME, position: latest|earliest}"),
    (_PULSAR + "steps:\n  - subscribe: {position: latest}\n",
     "steps[0].subscribe.group: missing required key"),
    (_PULSAR + "steps:\n  - subscribe: {group: app, position: last}\n", "steps[0].subscribe.position"),
])
def test_bad_subscribe(text: str, fragment: str) -> None:
    with pytest.raises(CaseError) as info:
        load_case_text(text, "x.yaml")
    assert str(info.value).startswith("x.yaml:4: ") and fragment in str(info.value), str(info.value)


def test_remove_takes_a_bookie() -> None:
    case = load_case_text(_PULSAR + "steps:\n  - remove: bookie\n  - remove: bookie-3\n")
    assert [s.action for s in case.steps] == ["remove", "remove"]
    for text, fragment in ((_PULSAR + "steps:\n  - remove: owner\n", "owner is not a bookie"),
                           (_KAFKA + "steps:\n  - remove: leader\n",
                            "remove takes a Pulsar bookie out for good; kafka has none")):
        with pytest.raises(CaseError, match=fragment):
            load_case_text(text, "x.yaml")
