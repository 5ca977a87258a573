"""Repairs in plain sight: every repair the harness makes to a cluster is named in the result,
shown by the CLI summary, a failed case test and the index, and bounded by ``expect.repairs``;
the #17759 case states the lock loop it reproduces. Synthetic records, fake systems, no Docker."""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.case import load_case, load_case_text
from harness.errors import CaseError, WaitTimeout
from harness.pytest_plugin import _summary
from harness.report import render_index
from harness.report.text import format_result, repairs_line
from harness.result import Expectation, Recovery, RunResult
from harness.run import RunOutcome, recovery, setup
from harness.run.context import RunContext
from harness.run.events import RunEvents
from harness.run.judge import apply_check
from harness.run.scenario import scenario_missed
from harness.run.story import scenario_sentence

ROOT = Path(__file__).resolve().parents[2]
SESSION_EXPIRY = ROOT / "cases" / "pulsar" / "regressions" / "zk-pause-session-expiry.yaml"
KIP101 = ROOT / "cases" / "kafka" / "regressions" / "kip-101-loss.yaml"

CASE = """
name: fake
system: kafka
cluster: kafka-zk
steps:
  - kill9: leader
"""


class Timeline:
    def __init__(self) -> None:
        self.marks: list[dict[str, Any]] = []

    def record(self, type_: str, **fields: Any) -> dict[str, Any]:
        self.marks.append(fields)
        return fields


def _ctx(system: Any, text: str = CASE) -> Any:
    timeline = Timeline()
    ctx = RunContext(load_case_text(text), Path("/nonexistent"), ExitStack(),
                     RunEvents(timeline))  # type: ignore[arg-type]
    ctx.system = system
    ctx.timeline = timeline  # type: ignore[attr-defined]
    return ctx


# -- recorded ------------------------------------------------------------------------------------
def test_a_remedy_during_a_wait_is_named_among_the_run_s_repairs() -> None:
    ctx = _ctx(None)
    tries: list[float] = []

    def wait(t: float) -> str:
        tries.append(t)
        if len(tries) == 1:
            raise WaitTimeout("timed out")
        return "whole"

    assert recovery.wait_remedied(ctx, wait, 30.0, after=0.1, remedy=lambda: (
        "the controller was stuck; the harness forced a controller election (deleted /controller)",
        "forced controller election", "forced controller election", {"problem": "x"})) == "whole"
    assert ctx.recovery.repairs == ["forced controller election"] and ctx.recovery.upkeep == []
    assert "forced a controller election" in ctx.recovery.actions[0]
    assert ctx.timeline.marks[0]["label"] == "forced controller election"


def test_a_readiness_remedy_is_named_by_what_it_did_without_its_asides() -> None:
    assert recovery.repair_name("restarted the bookies that had not re-registered: bookie-1 "
                                "(last said: Closed (session 0x1)), bookie-3") == \
        "restarted the bookies that had not re-registered: bookie-1, bookie-3"
    assert recovery.repair_name("x" * 300).endswith("...") and len(recovery.repair_name("x" * 300)) == 100


class Reused:
    """A reused cluster whose problem goes (``cured``) or stays after one remedy."""

    def __init__(self, cured: bool) -> None:
        self.cured, self.remedies = cured, 0

    def wait_ready(self, timeout: float) -> None:
        pass

    def reuse_problem(self) -> str | None:
        return None if self.remedies and self.cured else "bookie-2 lock invalidated 900 times in 10 s"

    def reuse_remedy(self, problem: str) -> str:
        self.remedies += 1
        return "restarted bookie-2"


@pytest.mark.parametrize(("cured", "name"), [
    (True, "reused cluster: restarted bookie-2"),
    (False, "reused cluster: restarted bookie-2, then recreated")])
def test_a_reused_cluster_s_repair_is_recorded_as_upkeep(cured: bool, name: str) -> None:
    ctx = _ctx(Reused(cured))
    ctx.cluster = SimpleNamespace(up=lambda reuse=True: None)
    assert setup._reuse_healthy(ctx) is cured
    assert ctx.recovery.upkeep == [name] and ctx.recovery.repairs == []
    assert "bookie-2 lock invalidated" in ctx.recovery.actions[0]  # the story says why
    assert ctx.timeline.marks[0]["label"] == "reused cluster repaired"
    assert ctx.timeline.marks[0]["detail"]["recreated"] is not cured


class Looping:
    """bookie-2 looped during the run and loops still (``going``), or a later outage ended it."""

    def __init__(self, going: bool = True) -> None:
        self.going = going
        self.asked_since: list[float] = []

    def lock_loops(self) -> dict[str, int]:
        return {"bookie-2": 412} if self.going else {}

    def lock_loops_since(self, since: float) -> dict[str, int]:
        self.asked_since.append(since)
        return {"bookie-2": 650}

    def sessions_lost(self, since: float) -> dict[str, int]:
        self.asked_since.append(since)
        return {"bookie-1": 3, "bookie-2": 3}

    def fenced_writes(self, since: float) -> dict[str, int]:
        return {}

    def stale_after_session_loss(self, lost: dict[str, int]) -> list[str]:
        return sorted(n for n in lost if n.startswith("broker"))  # as Pulsar's: the brokers

    def restart(self, names: list[str]) -> str:
        return f"restarted {', '.join(names)}"


class BrokerSessionLost(Looping):
    """broker-1's metadata session expired during the run (no lock loop)."""

    def lock_loops(self) -> dict[str, int]:
        return {}

    def lock_loops_since(self, since: float) -> dict[str, int]:
        return {}

    def sessions_lost(self, since: float) -> dict[str, int]:
        return {"broker-1": 1}


@pytest.mark.parametrize("kept", [True, False])
def test_a_broker_whose_session_was_lost_is_restarted_after_the_read_on_a_kept_cluster(kept: bool) -> None:
    ctx = _ctx(BrokerSessionLost())
    ctx.kept = kept
    recovery._end_lock_loops(ctx)
    assert ctx.recovery.sessions_lost == {"broker-1": 1}
    assert ctx.recovery.upkeep == (["session lost: restarted broker-1"] if kept else [])
    assert ctx.recovery.repairs == []


@pytest.mark.parametrize("kept", [True, False])
def test_a_lock_loop_ended_after_the_read_is_upkeep_and_only_on_a_kept_cluster(kept: bool) -> None:
    system = Looping()
    ctx = _ctx(system)
    ctx.kept = kept
    recovery._end_lock_loops(ctx)
    assert ctx.recovery.lock_loops == {"bookie-2": 650}  # the densest 10 s of the whole run
    assert ctx.recovery.sessions_lost == {"bookie-1": 3, "bookie-2": 3}
    assert system.asked_since == [ctx.started_wall] * 2  # this run's lines, not earlier runs'
    assert ctx.recovery.upkeep == (["lock loop ended: restarted bookie-2"] if kept else [])
    assert ctx.recovery.repairs == []
    assert "still looping after the recovery read: bookie-2" in ctx.recovery.observations[0]


def test_a_loop_a_later_outage_ended_is_recorded_and_nothing_is_restarted() -> None:
    ctx = _ctx(Looping(going=False))
    ctx.kept = True
    recovery._end_lock_loops(ctx)
    assert ctx.recovery.lock_loops == {"bookie-2": 650}
    assert ctx.recovery.upkeep == [] and ctx.recovery.actions == []
    assert "none still looping" in ctx.recovery.observations[0]


def test_repairs_survive_result_json(tmp_path: Path) -> None:
    result = RunResult("r", recovery=Recovery(repairs=["forced controller election"],
                                              upkeep=["reused cluster: restarted bookie-2"]))
    result.write(tmp_path)
    back = RunResult.read(tmp_path)
    assert back.repairs == ["forced controller election"]
    assert back.upkeep == ["reused cluster: restarted bookie-2"]
    assert RunResult("r").repairs == [] and RunResult("r").upkeep == []


# -- shown -----------------------------------------------------------------------------------------
def _repaired(**fields: Any) -> RunResult:
    return RunResult("20261201-000000-fake-ab12", case="fake", verdict="pass", as_expected=True,
                     counts={"ok": 10}, anomalies={"lost-write": 0},
                     recovery=Recovery(repairs=["forced controller election"],
                                       upkeep=["reused cluster: restarted bookie-2"]), **fields)


def test_the_cli_summary_names_every_repair(tmp_path: Path) -> None:
    text = format_result(_repaired(), tmp_path)
    assert ("repairs: 1 (forced controller election); between runs: 1 (reused cluster: restarted "
            "bookie-2)") in text.splitlines()
    assert repairs_line(RunResult("r")) is None
    assert "repairs" not in format_result(RunResult("r", verdict="pass", as_expected=True), tmp_path)
    only_upkeep = RunResult("r", recovery=Recovery(upkeep=["lock loop ended: restarted bookie-1"]))
    assert repairs_line(only_upkeep) == "repairs: 0; between runs: 1 (lock loop ended: restarted bookie-1)"


def test_a_failed_case_test_names_every_repair(tmp_path: Path) -> None:
    result = _repaired()
    result.verdict, result.as_expected = "fail", False
    assert "repairs: 1 (forced controller election)" in _summary(RunOutcome(tmp_path, result))


def test_the_index_has_a_repairs_column(tmp_path: Path) -> None:
    for run_id, result in (("20261201-000000-fake-ab12", _repaired()),
                           ("20261201-000100-fake-cd34", RunResult("20261201-000100-fake-cd34", case="fake",
                                                                    verdict="pass", as_expected=True))):
        (tmp_path / run_id).mkdir()
        result.run_id = run_id
        result.write(tmp_path / run_id)
    html = render_index(tmp_path).read_text()  # type: ignore[union-attr]
    assert "<th>Repairs</th>" in html
    assert "1 (forced controller election)" in html
    assert "between runs: 1 (reused cluster: restarted bookie-2)" in html
    assert html.count('<td class="repairs"><span class="zero">none</span></td>') == 1


# -- judged: expect.repairs ------------------------------------------------------------------------
def test_expect_repairs_is_a_count_of_zero_or_more() -> None:
    assert load_case_text(CASE + "expect: {repairs: 0}\n").expect.repairs == 0
    assert load_case_text(CASE).expect.repairs is None
    for bad in ("-1", "true", "one"):
        with pytest.raises(CaseError, match="expect.repairs"):
            load_case_text(CASE + f"expect: {{repairs: {bad}}}\n")


def _judge(text: str, repairs: list[str], anomalies: dict[str, int] | None = None) -> RunResult:
    case = load_case_text(text)
    result = RunResult("r", recovery=Recovery(read={"polled": 10}, repairs=repairs,
                                              upkeep=["reused cluster: restarted bookie-2"]))
    apply_check(case, result, {"anomalies": anomalies or {}, "counts": {"ok": 10}})
    return result


def test_a_run_repaired_against_expect_repairs_0_is_not_as_expected_and_says_why() -> None:
    forbidding = CASE + "expect: {repairs: 0}\n"
    clean = _judge(forbidding, [])  # a repair between runs is about other runs: not judged
    assert (clean.verdict, clean.as_expected) == ("pass", True)
    repaired = _judge(forbidding, ["forced controller election"])
    assert (repaired.verdict, repaired.as_expected) == ("fail", False)
    row = next(r for r in repaired.expectations if r.name == "repairs")
    assert (row.expected, row.observed, row.ok) == ("<= 0", "1 (forced controller election)", False)
    why = "repaired more than the case allows: 1 (forced controller election), expected <= 0"
    assert scenario_missed(repaired.expectations) == why
    assert scenario_sentence(repaired) == why[0].upper() + why[1:] + "."
    assert _judge(CASE, ["forced controller election"]).as_expected  # no bound: shown, not judged
    assert _judge(CASE + "expect: {repairs: 1}\n", ["forced controller election"]).as_expected


def test_a_bug_reproduced_with_a_forbidden_repair_is_not_as_expected() -> None:
    text = CASE + "expect: {reproduces: [lost-write], repairs: 0}\n"
    assert _judge(text, [], {"lost-write": 1}).as_expected
    assert not _judge(text, ["forced controller election"], {"lost-write": 1}).as_expected


def test_the_missed_scenario_and_the_repairs_are_both_said() -> None:
    rows = [Expectation("scenario: truncated", ">= 1", "0 (on kafka-3)", False),
            Expectation("repairs", "<= 0", "1 (x)", False)]
    assert scenario_missed(rows) == ("scenario did not happen: truncated 0 (on kafka-3), expected >= 1; "
                                     "repaired more than the case allows: 1 (x), expected <= 0")


# -- the #17759 case ----------------------------------------------------------------------------------
def _session_expiry(tmp_path: Path, loops: dict[str, int] | None, read: bool = True,
                    version: str = "4.0.7", lost: int = 3) -> RunResult:
    case = load_case(SESSION_EXPIRY, version=version)
    sessions = {f"bookie-{i}": 3 for i in range(1, lost + 1)}
    result = RunResult("r", recovery=Recovery(read={"polled": 5000} if read else None,
                                              lock_loops=loops or {}, sessions_lost=sessions))
    apply_check(case, result, {"anomalies": {}, "counts": {"ok": 6000}}, run_dir=tmp_path)
    return result


def test_the_17759_case_is_as_expected_only_when_a_lock_looped(tmp_path: Path) -> None:
    case = load_case(SESSION_EXPIRY, version="4.0.7")
    assert str(case.expect.scenario["lock-loops"]) == ">= 1"
    assert "17759" in case.source and "4.0.7" in case.source
    looped = _session_expiry(tmp_path, {"bookie-2": 300})
    assert (looped.verdict, looped.as_expected) == ("pass", True)
    row = next(r for r in looped.expectations if r.name == "scenario: lock-loops")
    assert row.observed == "1 (bookie-2: up to 300 invalidations in 10 s)"
    row = next(r for r in looped.expectations if r.name == "scenario: sessions-lost")
    assert row.ok and str(row.observed).startswith("3 (bookie-1: 3 times")
    missed = _session_expiry(tmp_path, None)  # the race lost on all three outages
    assert (missed.verdict, missed.as_expected) == ("fail", False)
    assert scenario_missed(missed.expectations) == (
        "scenario did not happen: lock-loops 0 (no lock flapped), expected >= 1")
    unread = _session_expiry(tmp_path, None, read=False)
    row = next(r for r in unread.expectations if r.name == "scenario: lock-loops")
    assert "not measured" in str(row.observed)


def test_the_17759_fixed_entry_needs_the_lost_sessions_and_no_loop(tmp_path: Path) -> None:
    case = load_case(SESSION_EXPIRY, version="4.2.4")
    assert str(case.expect.scenario["lock-loops"]) == "<= 0"
    assert _session_expiry(tmp_path, None, version="4.2.4").as_expected
    looped = _session_expiry(tmp_path, {"bookie-1": 90}, version="4.2.4")
    assert not looped.as_expected
    # no outage long enough: the fixed version's clean run proves nothing
    short = _session_expiry(tmp_path, None, version="4.2.4", lost=1)
    assert not short.as_expected
    assert "sessions-lost 1" in str(scenario_missed(short.expectations))


def test_lock_loops_are_a_pulsar_fact() -> None:
    with pytest.raises(CaseError, match="lock-loops: cannot happen in this case: only Pulsar"):
        load_case_text(CASE + "expect: {scenario: {lock-loops: 1}}\n")


def test_the_shipped_cases_still_load() -> None:
    assert load_case(KIP101, version="0.10.2.2").expect.repairs is None
    assert json.loads(json.dumps(load_case(SESSION_EXPIRY, version="4.0.7")
                                 .expect.scenario["lock-loops"].at_least)) == 1
