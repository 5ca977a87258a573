"""The ``chaos`` step and the ``controller_change`` await (issue 18): their schema, the
schedule a seed gives, and what a run with a seed records."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.case import MAX_SEED, ChaosArgs, Selector, load_case_text
from harness.case.model import NodeGroup
from harness.errors import CaseError
from harness.report.text import format_result
from harness.result import RunResult
from harness.run.chaos import plan, step_seed

HEAD = "system: {system}\ncluster: {cluster}\nsteps:\n  - produce: {{count: 10}}\n"


def _case(step: str, system: str = "kafka", cluster: str = "kafka-zk") -> ChaosArgs:
    case = load_case_text(HEAD.format(system=system, cluster=cluster) + step)
    args = case.steps[-1].args
    assert isinstance(args, ChaosArgs)
    return args


def test_defaults_need_only_a_duration() -> None:
    args = _case("  - chaos: {duration: 2m}\n")
    assert args.duration_s == 120 and args.seed is None
    assert args.faults == ("kill9", "pause", "partition")
    assert args.targets == (Selector(role="leader"), Selector(role="follower"))
    assert args.gap_s == (5.0, 15.0) and args.hold_s == (3.0, 10.0)
    pulsar = _case("  - chaos: {duration: 1m}\n", "pulsar", "pulsar")
    assert [str(t) for t in pulsar.targets] == ["owner", "bookie", "non-owner"]


def test_every_key() -> None:
    args = _case("  - chaos: {duration: 30s, faults: [stop, powerloss, stop], targets: [kafka-2, "
                 "leader], gap: [1s, 2s], hold: [500ms, 1s], seed: 7}\n")
    assert args.faults == ("stop", "powerloss")  # each once
    assert args.targets == (Selector(node="kafka-2"), Selector(role="leader"))
    assert args.gap_s == (1.0, 2.0) and args.hold_s == (0.5, 1.0) and args.seed == 7


@pytest.mark.parametrize(("step", "message"), [
    ("  - chaos: {faults: [kill9]}\n", "steps[1].chaos.duration: missing required key"),
    ("  - chaos: {duration: 1m, faults: [explode]}\n", "explode"),
    ("  - chaos: {duration: 1m, faults: []}\n", "expected a non-empty list of faults"),
    ("  - chaos: {duration: 1m, targets: [leadr]}\n", "did you mean 'leader'"),
    ("  - chaos: {duration: 1m, gap: [10s, 5s]}\n", "the shortest (10s) is longer than the longest"),
    ("  - chaos: {duration: 1m, hold: 5s}\n", "expected [shortest, longest]"),
    ("  - chaos: {duration: 5s}\n", "no fault fits"),
    ("  - chaos: {duration: 1m, seed: -1}\n", "seed"),
    (f"  - chaos: {{duration: 1m, seed: {MAX_SEED + 1}}}\n", "a seed is at most"),
    ("  - chaos: {duration: 1m, speed: 3}\n", "speed"),
])
def test_bad_chaos_steps_name_the_field(step: str, message: str) -> None:
    with pytest.raises(CaseError) as raised:
        _case(step)
    assert message in str(raised.value) and ":5:" in f":{raised.value.line}:"


def test_powerloss_is_for_kafka_only() -> None:
    with pytest.raises(CaseError, match="powerloss cuts Kafka log segments"):
        _case("  - chaos: {duration: 1m, faults: [kill9, powerloss]}\n", "pulsar", "pulsar")


def test_a_seed_gives_one_schedule_within_the_bounds() -> None:
    args = ("kill9", "pause", "partition"), ("leader", "follower"), (5.0, 15.0), (3.0, 10.0)
    first = plan(7, 120, *args)
    assert first == plan(7, 120, *args)  # replayed exactly
    assert first != plan(8, 120, *args)
    assert len(first) >= 4
    end = 0.0
    for p in first:
        assert 5.0 <= round(p.at_s - end, 3) <= 15.0 + 1e-3 and 3.0 <= p.hold_s <= 10.0
        assert p.fault in args[0] and p.target in args[1]
        end = p.at_s + p.hold_s
    assert end <= 120
    assert {p.fault for p in plan(1, 3600, *args)} == set(args[0])  # every fault is drawn


def test_step_seeds_differ_per_step_and_are_fixed_by_the_run_seed() -> None:
    assert step_seed(7, 3) == step_seed(7, 3)
    assert len({step_seed(7, i) for i in range(20)}) == 20
    assert step_seed(7, 3) != step_seed(8, 3)
    assert 0 <= step_seed(2**31, 0) < 2**53


def test_the_result_keeps_the_seed_and_the_summary_gives_the_replay(tmp_path: Path) -> None:
    result = RunResult("r1", case="random-faults", case_file="cases/kafka/random faults.yaml",
                       seed=7, variant="3.9.2", verdict="pass", as_expected=True)
    again = RunResult.from_json(result.to_json())
    assert again.seed == 7
    assert again.replay == "harness run 'cases/kafka/random faults.yaml' --seed 7 --version 3.9.2"
    assert "seed: 7 (replay: harness run" in format_result(again, tmp_path)
    assert RunResult("r2").replay is None


def test_controller_change_is_a_kafka_await_without_argument() -> None:
    head = HEAD.format(system="kafka", cluster="kafka-zk")
    case = load_case_text(head + "  - kill9: controller\n  - await: {controller_change: {}}\n")
    assert case.steps[-1].args.condition == "controller_change"  # type: ignore[union-attr]
    with pytest.raises(CaseError, match="controller_change takes no argument"):
        load_case_text(head + "  - await: {controller_change: {partition: 1}}\n")
    with pytest.raises(CaseError, match="controller_change applies to kafka cases only"):
        load_case_text(HEAD.format(system="pulsar", cluster="pulsar")
                       + "  - await: {controller_change: {}}\n")


def test_a_drawn_degrade_or_clock_carries_its_drawn_parameters_and_the_rest_draw_none() -> None:
    args = ("kill9", "degrade", "clock"), ("leader", "follower"), (1.0, 3.0), (1.0, 2.0)
    first = plan(11, 600, *args)
    assert first == plan(11, 600, *args)
    kinds = {p.fault for p in first}
    assert kinds == set(args[0])
    for p in first:
        if p.fault == "kill9":
            assert p.params == {}
        elif p.fault == "degrade":
            assert set(p.params) in ({"delay_ms", "jitter_ms"}, {"loss_pct"}, {"rate_bps"},
                                     {"delay_ms", "duplicate_pct", "reorder_pct"})
        else:
            assert set(p.params) in ({"jump_s"}, {"strobe_s", "period_s"})
            assert 5 <= abs(p.params.get("jump_s", p.params.get("strobe_s", 0))) <= 600
    # a schedule of faults without parameters is drawn as before parameters existed
    old = plan(7, 120, ("kill9", "pause", "partition"), ("leader",), (5.0, 15.0), (3.0, 10.0))
    assert all(p.params == {} for p in old)


def test_a_chaos_step_that_draws_clock_faults_gives_the_cluster_clocks_of_its_own() -> None:
    def clock(step: str) -> str:
        return load_case_text(HEAD.format(system="kafka", cluster="kafka-zk") + step).clock

    assert clock("  - chaos: {duration: 1m, faults: [kill9, clock, degrade]}\n") == "fake"
    assert clock("  - chaos: {duration: 1m, faults: [kill9, degrade]}\n") == "real"
    with pytest.raises(CaseError, match="readonly makes a node's lazy disk read-only"):
        _case("  - chaos: {duration: 1m, faults: [readonly]}\n")


def test_a_group_target_names_a_share_of_a_kind_of_node_drawn_in_the_schedule() -> None:
    args = _case("  - chaos:\n      duration: 5m\n      targets: [leader, {group: majority, of: broker}]\n")
    group = args.targets[1]
    assert isinstance(group, NodeGroup) and str(group) == "majority of brokers"
    assert group.nodes == ("kafka-1", "kafka-2", "kafka-3") and group.count() == 2
    assert [NodeGroup(size, "broker", ("a", "b", "c", "d", "e")).count()
            for size in ("one", "minority", "majority", "all")] == [1, 2, 3, 5]
    assert NodeGroup("minority", "bookie", ("a", "b")).count() == 1  # never none
    targets = tuple(str(t) for t in args.targets)
    groups = {str(group): group}
    schedule = plan(3, 600, ("kill9", "pause"), targets, (1.0, 3.0), (1.0, 2.0), groups)
    assert schedule == plan(3, 600, ("kill9", "pause"), targets, (1.0, 3.0), (1.0, 2.0), groups)
    drawn = [p.nodes for p in schedule if p.target == "majority of brokers"]
    assert drawn and all(len(n) == 2 and set(n) <= set(group.nodes) and list(n) == sorted(n) for n in drawn)
    assert len(set(drawn)) > 1  # different majorities
    assert all(p.nodes == () for p in schedule if p.target == "leader")


@pytest.mark.parametrize(("step", "message"), [
    ("  - chaos: {duration: 1m, targets: [{group: most, of: broker}]}\n", "unknown group 'most'"),
    ("  - chaos: {duration: 1m, targets: [{group: all, of: bookie}]}\n", "unknown node kind 'bookie'"),
    ("  - chaos: {duration: 1m, targets: [{group: all}]}\n",
     "steps[1].chaos.targets[0].of: missing required key"),
])
def test_a_bad_group_names_the_field(step: str, message: str) -> None:
    with pytest.raises(CaseError) as raised:
        _case(step)
    assert message in str(raised.value), str(raised.value)


def test_rotate_takes_the_faults_in_turn_and_still_draws_times_and_targets() -> None:
    faults, targets = ("kill9", "pause", "partition"), ("leader", "follower")
    rotated = plan(5, 600, faults, targets, (1.0, 3.0), (1.0, 2.0), order="rotate")
    assert [p.fault for p in rotated] == [faults[i % 3] for i in range(len(rotated))]
    drawn = plan(5, 600, faults, targets, (1.0, 3.0), (1.0, 2.0))  # faults without parameters:
    assert [(p.at_s, p.target, p.hold_s) for p in rotated] == [(p.at_s, p.target, p.hold_s) for p in drawn]
    assert _case("  - chaos: {duration: 1m, order: rotate}\n").order == "rotate"
    with pytest.raises(CaseError, match="unknown order 'cycle'"):
        _case("  - chaos: {duration: 1m, order: cycle}\n")
