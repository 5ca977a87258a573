"""Good case files load into exactly the expected objects."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import pytest

from harness.case import (
    ANOMALIES,
    AwaitArgs,
    Case,
    ClientSpec,
    ConsumeArgs,
    Expect,
    FaultArgs,
    HealArgs,
    InjectArgs,
    ProduceArgs,
    Selector,
    Step,
    TopicSpec,
    load_case,
    load_case_text,
)
from harness.case.model import DEFAULT_AWAIT_TIMEOUT_S, DEFAULT_CASE_TIMEOUT_S
from harness.clusters import PULSAR_VERSIONS

GOOD = Path(__file__).resolve().parents[2] / "data" / "cases" / "good"


def _limits(**overrides: int) -> dict[str, int]:
    limits = dict.fromkeys(ANOMALIES, 0)
    limits.update({k.replace("_", "-"): v for k, v in overrides.items()})
    return limits


def test_minimal_takes_every_default() -> None:
    path = GOOD / "minimal.yaml"
    assert load_case(path) == Case(
        name="minimal", path=path, description="", system="kafka", cluster="kafka-kraft",
        version="3.9.2", broker_config=MappingProxyType({}), topic=TopicSpec(), client=ClientSpec(),
        steps=(Step(0, 4, "kill9", FaultArgs(Selector(node="kafka-1"))),), expect=Expect(),
        timeout_s=DEFAULT_CASE_TIMEOUT_S)


def test_kafka_zk_kill_leader() -> None:
    case = load_case(GOOD / "kafka-zk-kill-leader.yaml")
    assert (case.name, case.system, case.cluster, case.version) == (
        "kafka-zk-kill-leader", "kafka", "kafka-zk", "3.9.2")
    assert case.description.startswith("Background producer and consumer;")
    assert case.timeout_s == 600.0
    assert case.cluster_def.mode == "zk"
    assert dict(case.broker_config) == {"replica.lag.time.max.ms": "5000",
                                        "auto.create.topics.enable": "false"}
    assert case.topic == TopicSpec(name="chaos-topic", partitions=2, replication_factor=3,
                                   min_insync_replicas=2, unclean_leader_election=False,
                                   config=MappingProxyType({"retention.ms": "3600000"}))
    assert case.client == ClientSpec(acks="all", retries=1, linger_ms=10,
                                     isolation_level="read_committed",
                                     extra=MappingProxyType({"compression.type": "lz4"}))
    leader0 = Selector(role="leader")
    assert [(s.index, s.line, s.label) for s in case.steps[:3]] == [
        (0, 27, "steps[0].produce"), (1, 28, "steps[1].consume"), (2, 29, "steps[2].sleep")]
    assert [s.args for s in case.steps] == [
        ProduceArgs(name="bg", count=10000, rate=2000.0, background=True, keys=16),
        ConsumeArgs(name="consume-1", background=True, group="g1"),
        AwaitArgs("time", 2.0, MappingProxyType({"seconds": 2.0})),
        AwaitArgs("isr_size", 30.0, MappingProxyType({"partition": 1, "size": 3})),
        FaultArgs(leader0),
        AwaitArgs("leader_change", 30.0, MappingProxyType({"partition": 0})),
        FaultArgs(Selector(role="old-leader")),
        FaultArgs(Selector(role="leader", partition=1), Selector(node="kafka-1"), "in"),
        FaultArgs(Selector(node="kafka-2")),
        FaultArgs(Selector(role="any-broker")),
        FaultArgs(Selector(role="any-broker")),
        HealArgs(None),
        AwaitArgs("log", 0.5, MappingProxyType({"partition": 0, "target": leader0,
                                                "pattern": "Truncating.*offset"})),
        AwaitArgs("workload", 600.0, MappingProxyType({"name": "bg"})),
    ]
    observed = frozenset({"unseen", "poll-skip", "under-write-quorum"})  # informational: always observed
    judged = {a: n for a, n in _limits(duplicate=3).items() if a not in observed}
    assert case.expect == Expect(anomalies=judged, observe=observed, min_acked=100)


def test_kafka_kraft_transactional_inject() -> None:
    case = load_case(GOOD / "kafka-kraft-inject.yaml")
    assert (case.cluster, case.version) == ("kafka-kraft", "4.1.2")
    # a transactional_id turns idempotence on by default
    assert case.client == ClientSpec(transactional_id="tx-1", idempotence=True, max_in_flight=3,
                                     delivery_timeout_ms=60000)
    assert [s.args for s in case.steps] == [
        InjectArgs("C4", partition=0, offset=42, timeout_s=120.0),
        ProduceArgs(name="main", duration_s=30.0),
        AwaitArgs("injection", DEFAULT_AWAIT_TIMEOUT_S, MappingProxyType({"point": "C4"})),
        AwaitArgs("no_leader", 10.0, MappingProxyType({"partition": 0})),
        AwaitArgs("leader_is", DEFAULT_AWAIT_TIMEOUT_S,
                  MappingProxyType({"partition": 0, "target": Selector(node="kafka-3")})),
        FaultArgs(Selector(role="controller")),
        HealArgs(Selector(role="controller")),
    ]
    assert case.expect == Expect(injection_hit=True, verdict="fail", reproduces=frozenset({"lost-write"}))


def test_pulsar() -> None:
    case = load_case(GOOD / "pulsar-bookie.yaml")
    assert (case.system, case.cluster, case.version) == ("pulsar", "pulsar", PULSAR_VERSIONS[0])
    assert case.topic == TopicSpec(partitions=3, ensemble=3, write_quorum=2, ack_quorum=2,
                                   deduplication=True)
    assert case.client == ClientSpec(batching=False, max_pending_messages=0, send_timeout_ms=0,
                                     subscription_type="Key_Shared", memory_limit_bytes=67108864)
    assert [s.args for s in case.steps] == [
        ProduceArgs(name="produce-0", count=500, partition=2, value_size=1024),
        ConsumeArgs(name="reader", count=500, duration_s=60.0),
        FaultArgs(Selector(role="bookie", partition=2)),
        FaultArgs(Selector(role="owner"), Selector(role="zookeeper"), "out"),
        HealArgs(Selector(node="broker-1")),
        InjectArgs("P2"),
        AwaitArgs("leader_change", DEFAULT_AWAIT_TIMEOUT_S, MappingProxyType({"partition": 0})),
    ]
    limits = _limits(unseen=2)
    del limits["under-write-quorum"]  # informational and not limited: observed
    assert case.expect.anomalies == limits


def test_custom_rule_is_relative_to_the_case_file() -> None:
    case = load_case(GOOD / "custom-rule.yaml")
    inject, await_ = (s.args for s in case.steps)
    assert inject == InjectArgs("my-truncate", rule=GOOD / "rules" / "truncate.btm")
    assert await_ == AwaitArgs("injection", 1.5, MappingProxyType({"point": "my-truncate"}))


def test_text_without_a_file() -> None:
    case = load_case_text("system: pulsar\ncluster: pulsar\nsteps: [{kill9: owner}]\n")
    assert (case.name, case.path) == ("case", None)
    assert case.steps == (Step(0, 3, "kill9", FaultArgs(Selector(role="owner"))),)


@pytest.mark.parametrize(("text", "expected"), [
    ("500ms", 0.5), ("30s", 30.0), ("2m", 120.0), ("1h", 3600.0), ("1.5s", 1.5), (7, 7.0),
    (0.25, 0.25), ('"90"', 90.0),
])
def test_durations(text: object, expected: float) -> None:
    case = load_case_text(f"system: kafka\ncluster: kafka-zk\nsteps: [{{sleep: {text}}}]\n")
    seconds = MappingProxyType({"seconds": expected})
    assert case.steps[0].args == AwaitArgs("time", expected, seconds)


def test_model_is_frozen() -> None:
    case = load_case(GOOD / "minimal.yaml")
    with pytest.raises(AttributeError):
        case.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        case.expect.anomalies["lost-write"] = 3  # type: ignore[index]


SCHEMA = Path(__file__).resolve().parents[3] / "cases" / "SCHEMA.md"


def test_schema_examples_load() -> None:
    blocks = SCHEMA.read_text(encoding="utf-8").split("```yaml\n")[1:]
    cases = [b.split("```")[0] for b in blocks if b.startswith(("name:", "system:"))]
    assert len(cases) >= 2
    for text in cases:
        assert load_case_text(text).steps


def test_pulsar_deduplication_by_namespace(tmp_path: Path) -> None:
    """``deduplication: namespace`` puts the run's topic in the namespace whose policy turns
    deduplication on (a topic-level policy meets apache/pulsar#25954 on 4.0.7)."""
    from contextlib import ExitStack

    from harness.case import load_case_text
    from harness.case.model import DEDUP_NAMESPACE
    from harness.run.context import RunContext

    text = ("system: pulsar\ncluster: pulsar\ntopic: {deduplication: namespace}\n"
            "steps:\n  - produce: {count: 1}\n")
    case = load_case_text(text)
    assert case.topic.deduplication == "namespace"
    run = RunContext(case, tmp_path / "20260101-000000-x-ab12", ExitStack(), None)  # type: ignore[arg-type]
    assert run.topic.startswith(f"persistent://{DEDUP_NAMESPACE}/chaos-ab12-")
    named = load_case_text(text.replace("{deduplication", "{name: t, deduplication"))
    assert named.topic.qualified("t") == f"persistent://{DEDUP_NAMESPACE}/t"
    assert load_case_text(text.replace("namespace}", "true}")).topic.qualified("t") == "t"


def test_informational_anomalies_are_observed_with_or_without_an_observe_list() -> None:
    """An observe list written before an informational anomaly existed does not judge it;
    a limit does."""
    base = "system: pulsar\ncluster: pulsar\nsteps: [{kill9: bookie}]\n"
    listed = load_case_text(base + "expect: {observe: [duplicate]}\n").expect
    assert {"duplicate", "unseen", "under-write-quorum"} <= listed.observe
    assert "under-write-quorum" not in listed.anomalies and listed.anomalies["under-replicated"] == 0
    limited = load_case_text(base + "expect: {observe: [duplicate], under-write-quorum: 5}\n").expect
    assert limited.anomalies["under-write-quorum"] == 5 and "under-write-quorum" not in limited.observe


def test_a_lazy_disk_gives_every_system_power_loss_torn_writes_and_corruption() -> None:
    from harness.case.model import FaultArgs

    case = load_case_text(
        "system: pulsar\ncluster: pulsar\ndisk: lazy\nsteps:\n"
        "  - powerloss: bookie\n"
        "  - powerloss: {node: bookie-2, torn: true}\n"
        "  - corrupt: {node: bookie-3, file: journal, how: truncate, offset: 0}\n"
        "  - chaos: {duration: 1m, faults: [powerloss]}\n"
        "expect: {scenario: {powerloss-bytes: {at_least: 1}}}\n", "lazy.yaml")
    assert case.disk == "lazy"
    args = [s.args for s in case.steps]
    assert isinstance(args[1], FaultArgs) and args[1].disk == {"torn": True}
    assert isinstance(args[2], FaultArgs) and dict(args[2].disk) == {"file": "journal", "how": "truncate",
                                                                     "offset": 0}
    plain = load_case_text("system: kafka\ncluster: kafka-zk\nsteps: [{kill9: leader}]\n", "x.yaml")
    assert plain.disk == "plain"


def test_powerloss_bytes_needs_a_lazy_disk() -> None:
    from harness.errors import CaseError

    with pytest.raises(CaseError, match="the nodes. disks are plain"):
        load_case_text("system: kafka\ncluster: kafka-zk\nsteps: [{powerloss: leader}]\n"
                       "expect: {scenario: {powerloss-bytes: {at_least: 1}}}\n", "x.yaml")
