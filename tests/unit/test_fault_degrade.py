"""The ``degrade`` step: how a case states a degraded network, and the rules and queueing
commands it becomes (no Docker: the commands are checked as text; tests/integration runs
them on a real cluster)."""

from __future__ import annotations

import pytest

from harness.case import FaultArgs, load_case_text
from harness.errors import CaseError
from harness.faults.degrade import MARK, QUEUE, Effects, loss_rules, queue_rules

HEAD = "system: kafka\ncluster: kafka-zk\nsteps:\n  - produce: {count: 10}\n"


def _args(step: str) -> FaultArgs:
    case = load_case_text(HEAD + f"  - {step}\n", "c.yaml")
    args = case.steps[1].args
    assert isinstance(args, FaultArgs)
    return args


def test_a_degrade_step_reads_every_effect_in_plain_units() -> None:
    args = _args("degrade: {node: follower, from: leader, loss: 30%, delay: 100ms, jitter: 20ms, "
                 "duplicate: 1, reorder: 5%, rate: 1.5mbit, direction: out}")
    assert args.direction == "out" and args.peer is not None and args.peer.role == "leader"
    assert dict(args.effects) == {"loss_pct": 30.0, "delay_ms": 100.0, "jitter_ms": 20.0,
                                  "duplicate_pct": 1.0, "reorder_pct": 5.0, "rate_bps": 1_500_000.0}
    assert dict(_args("degrade: {node: leader, rate: 500kbit}").effects) == {"rate_bps": 500_000.0}
    assert _args("degrade: {node: leader, loss: 10%}").peer is None  # from every other node


@pytest.mark.parametrize(("step", "fragment"), [
    ("degrade: {node: leader}", "give at least one effect"),
    ("degrade: {node: leader, loss: 0%}", "a percentage above 0 and at most 100"),
    ("degrade: {node: leader, loss: 150%}", "a percentage above 0 and at most 100"),
    ("degrade: {node: leader, loss: lots}", "expected a percentage like 10%"),
    ("degrade: {node: leader, rate: fast}", "expected a rate like 10mbit"),
    ("degrade: {node: leader, rate: 10mbps}", "expected a rate like 10mbit"),
    ("degrade: {node: leader, jitter: 10ms}", "steps[1].degrade.jitter: jitter needs a delay"),
    ("degrade: {node: leader, reorder: 5%}", "steps[1].degrade.reorder: reorder needs a delay"),
    ("degrade: {node: leader, from: leader, loss: 5%}", "cannot degrade the network of leader to itself"),
    ("degrade: {node: leader, loss: 5%, direction: sideways}", "unknown value 'sideways'"),
    ("degrade: {node: leader, los: 5%}", "unknown key 'los'"),
])
def test_a_bad_degrade_is_one_error_naming_line_and_field(step: str, fragment: str) -> None:
    with pytest.raises(CaseError) as info:
        load_case_text(HEAD + f"  - {step}\n", "c.yaml")
    assert info.value.line == 5 and fragment in str(info.value), str(info.value)


def test_effects_become_delayer_arguments_steering_rules_and_loss_rules() -> None:
    effects = Effects(delay_ms=100, jitter_ms=20, duplicate_pct=1, reorder_pct=5, rate_bps=1e6)
    assert effects.queues and effects.shapes
    assert effects.delayer_args() == ["--delay-ms", "100", "--jitter-ms", "20", "--duplicate-pct", "1",
                                      "--reorder-pct", "5"]
    only_loss = Effects(loss_pct=30)
    assert not only_loss.queues and not only_loss.shapes  # iptables alone, no qdisc
    assert Effects(rate_bps=1e6).shapes and not Effects(rate_bps=1e6).queues
    assert queue_rules(["10.0.0.2"]) == [["-A", "CHAOSQ", "-d", "10.0.0.2", "-m", "mark", "!", "--mark",
                                          hex(MARK), "-j", "NFQUEUE", "--queue-num", str(QUEUE),
                                          "--queue-bypass"]]
    rules = loss_rules([("-s", "10.0.0.2"), ("-d", "10.0.0.2")], 0.3)
    assert rules[0] == ["-A", "CHAOS", "-s", "10.0.0.2", "-m", "statistic", "--mode", "random",
                        "--probability", "0.300000", "-j", "DROP"]
    assert rules[1][2] == "-d"
    assert Effects(loss_pct=30, rate_bps=2e6).as_dict() == {"loss_pct": 30, "rate_bps": 2e6}
