"""Membership steps: ``reassign`` (kafka), ``replace`` (a pulsar bookie, a ZooKeeper-mode Kafka
broker) and ``split`` (a pulsar bundle): how a case states them."""

from __future__ import annotations

import pytest

from harness.case import ReassignArgs, load_case_text
from harness.errors import CaseError

HEAD = "system: kafka\ncluster: kafka-kraft\ntopic: {partitions: 2, replication_factor: 2}\nsteps:\n"


def test_a_reassign_step_names_the_new_replicas_in_order() -> None:
    case = load_case_text(HEAD + "  - reassign: {partition: 1, to: [kafka-3, follower], timeout: 30s}\n",
                          "c.yaml")
    args = case.steps[0].args
    assert isinstance(args, ReassignArgs)
    assert [str(s.node or s.role) for s in args.to] == ["kafka-3", "follower"]
    assert args.partition == 1 and args.timeout_s == 30.0
    default = load_case_text(HEAD + "  - reassign: {to: [kafka-1, kafka-2, kafka-3]}\n",
                             "c.yaml").steps[0].args
    assert isinstance(default, ReassignArgs) and default.partition == 0 and default.timeout_s == 120.0


def _refused(text: str, fragment: str) -> None:
    """The case is one error that says ``fragment``."""
    with pytest.raises(CaseError) as info:
        load_case_text(text, "c.yaml")
    assert fragment in str(info.value), str(info.value)


@pytest.mark.parametrize(("text", "line", "fragment"), [
    (HEAD + "  - reassign: {to: kafka-2}\n", 5, "steps[0].reassign.to: expected a list of brokers"),
    (HEAD + "  - reassign: {to: []}\n", 5, "expected a list of brokers"),
    (HEAD + "  - reassign: {partition: 0}\n", 5, "steps[0].reassign.to: missing required key"),
    (HEAD + "  - reassign:\n      to: [kafka-2, kafka-2]\n", 6, "a broker is named twice"),
    (HEAD + "  - reassign: {to: [kafka-9]}\n", 5, "steps[0].reassign.to[0]: unknown role 'kafka-9'"),
    (HEAD + "  - reassign: {to: [kafka-2], partition: 5}\n", 5, "partition 5"),
    ("system: pulsar\ncluster: pulsar\nsteps:\n  - reassign: {to: [broker-1]}\n", 4,
     "reassign applies to kafka cases only (this is a pulsar case)"),
])
def test_a_bad_reassign_is_one_error_naming_line_and_field(text: str, line: int, fragment: str) -> None:
    with pytest.raises(CaseError) as info:
        load_case_text(text, "c.yaml")
    assert info.value.line == line and fragment in str(info.value), str(info.value)


@pytest.mark.parametrize(("text", "fragment"), [
    ("system: pulsar\ncluster: pulsar\nsteps:\n  - replace: bookie-2\n",
     "replace empties the node's lazy disk (set disk: lazy)"),
    ("system: pulsar\ncluster: pulsar\ndisk: lazy\nsteps:\n  - replace: broker-1\n",
     "broker-1 is not a bookie (replace puts a new bookie at a bookie's address"),
    ("system: kafka\ncluster: kafka-zk\nsteps:\n  - replace: kafka-1\n",
     "replace empties the node's lazy disk (set disk: lazy)"),
    ("system: kafka\ncluster: kafka-zk\ndisk: lazy\nsteps:\n  - replace: zk\n",
     "zk is not a broker (replace puts a new broker at a broker's address"),
    ("system: kafka\ncluster: kafka-kraft\ndisk: lazy\nsteps:\n  - replace: follower\n",
     "replace puts a new broker at a broker's address in ZooKeeper mode (cluster kafka-zk)"),
    ("system: kafka\ncluster: kafka-kraft-split\ndisk: lazy\nsteps:\n  - replace: kafka-1\n",
     "a new broker's log directory has a new id (KIP-858): not built"),
])
def test_a_replace_is_of_a_bookie_or_a_zookeeper_mode_broker_on_a_lazy_disk(text: str, fragment: str) -> None:
    _refused(text, fragment)
    for ok in ("system: pulsar\ncluster: pulsar\ndisk: lazy\nsteps:\n  - replace: bookie\n",
               "system: kafka\ncluster: kafka-zk\ndisk: lazy\nsteps:\n  - replace: follower\n",
               "system: kafka\ncluster: kafka-zk\ndisk: lazy\nsteps:\n  - replace: kafka-2\n"):
        assert load_case_text(ok, "c.yaml").steps[0].action == "replace"


def test_a_split_names_the_partition_whose_bundle_splits() -> None:
    from harness.case import SplitArgs

    head = "system: pulsar\ncluster: pulsar\ntopic: {partitions: 2}\nsteps:\n"
    assert load_case_text(head + "  - split:\n", "c.yaml").steps[0].args == SplitArgs()
    args = load_case_text(head + "  - split: {partition: 1, timeout: 30s}\n", "c.yaml").steps[0].args
    assert args == SplitArgs(partition=1, timeout_s=30.0)
    with pytest.raises(CaseError, match="split applies to pulsar cases only"):
        load_case_text(HEAD + "  - split:\n", "c.yaml")
    with pytest.raises(CaseError, match="unknown key 'to'"):
        load_case_text(head + "  - split: {to: broker-1}\n", "c.yaml")


DYNAMIC = "system: kafka\ncluster: kafka-kraft-dynamic\nsteps:\n"


def test_a_quorum_step_takes_one_controller_in_or_out() -> None:
    from harness.case import QuorumArgs

    add = load_case_text(DYNAMIC + "  - quorum: {add: controller-4, timeout: 30s}\n", "c.yaml").steps[0].args
    assert isinstance(add, QuorumArgs) and add.add is not None and add.add.node == "controller-4"
    assert add.remove is None and add.timeout_s == 30.0
    out = load_case_text(DYNAMIC + "  - quorum: {remove: controller}\n", "c.yaml").steps[0].args
    assert isinstance(out, QuorumArgs) and out.remove is not None and out.remove.role == "controller"


@pytest.mark.parametrize(("text", "fragment"), [
    (DYNAMIC + "  - quorum: {}\n", "give one of add (a controller that follows as an observer) or remove"),
    (DYNAMIC + "  - quorum: {add: controller-4, remove: kafka-1}\n", "not both"),
    (DYNAMIC + "  - quorum: {add: kafka-9}\n", "unknown role 'kafka-9'"),
    (DYNAMIC + "  - quorum: {add: controller-4, to: kafka-1}\n", "unknown key 'to'"),
    (HEAD + "  - quorum: {add: kafka-1}\n", "cluster kafka-kraft has a static controller quorum"),
    ("system: kafka\ncluster: kafka-kraft-split\nsteps:\n  - quorum: {remove: controller}\n",
     "use cluster kafka-kraft-dynamic"),
    ("system: pulsar\ncluster: pulsar\nsteps:\n  - quorum: {add: broker-1}\n",
     "quorum applies to kafka cases only"),
])
def test_a_bad_quorum_step_is_one_error(text: str, fragment: str) -> None:
    _refused(text, fragment)


def test_a_join_names_a_spare_and_a_decommission_a_broker_that_is_no_controller() -> None:
    dynamic = "system: kafka\ncluster: kafka-kraft-dynamic\nversion: '4.1.2'\nsteps:\n"
    case = load_case_text(dynamic + "  - join: kafka-5\n  - decommission: kafka-5\n", "c.yaml")
    assert [(s.action, s.args.target.node) for s in case.steps] == [("join", "kafka-5"),
                                                                     ("decommission", "kafka-5")]
    pulsar = load_case_text("system: pulsar\ncluster: pulsar\nsteps:\n  - join: broker-3\n"
                            "  - unload: {to: broker-3}\n", "c.yaml")
    assert pulsar.steps[0].args.target.node == "broker-3"
    retired = load_case_text("system: pulsar\ncluster: pulsar\ndisk: lazy\nsteps:\n  - decommission: bookie\n"
                             "  - replace: last-target\n", "c.yaml")
    assert [(s.action, s.args.target.role) for s in retired.steps] == [("decommission", "bookie"),
                                                                       ("replace", "last-target")]


@pytest.mark.parametrize(("text", "fragment"), [
    ("system: kafka\ncluster: kafka-kraft-dynamic\nversion: '4.1.2'\nsteps:\n  - join: kafka-1\n",
     "join adds a spare node of the cluster, named: kafka-1 is none (spares: kafka-5)"),
    ("system: kafka\ncluster: kafka-zk\nsteps:\n  - join: follower\n",
     "follower is none (cluster kafka-zk has none; kafka-kraft-dynamic has kafka-5, pulsar has broker-3)"),
    ("system: kafka\ncluster: kafka-kraft-dynamic\nversion: '4.1.2'\nsteps:\n  - decommission: kafka-2\n",
     "kafka-2 is a combined node: decommission takes a broker that is no controller out"),
    ("system: kafka\ncluster: kafka-zk\nsteps:\n  - decommission: zk\n", "zk is a zookeeper node"),
    ("system: pulsar\ncluster: pulsar\nsteps:\n  - decommission: broker-1\n",
     "broker-1 is not a bookie (on Pulsar decommission retires a bookie"),
    ("system: pulsar\ncluster: pulsar\ndisk: lazy\nsteps:\n  - replace: owner\n", "owner is not a bookie"),
])
def test_a_bad_join_or_decommission_is_one_error(text: str, fragment: str) -> None:
    _refused(text, fragment)
