"""``expect.scenario``: a run is as expected only when what its case is about happened,
counted from small synthetic run records (history, timeline, result fields; no Docker)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.case import load_case, load_case_text
from harness.case.model import SCENARIO_FACTS, Bound
from harness.errors import CaseError
from harness.result import InjectionSummary, Recovery, RunResult, StepRecord
from harness.run.judge import apply_check
from harness.run.scenario import MEASURES, measure, scenario_missed
from harness.run.story import election_sentence, scenario_sentence

CASES = Path(__file__).resolve().parents[2] / "cases" / "kafka"
HOLD = CASES / "transactions" / "kafka-17754-hold.yaml"
HOLD_JAVA = CASES / "transactions" / "kafka-17754-hold-java.yaml"
TRUNCATE = CASES / "regressions" / "truncate-on-follow.yaml"
EPOCH = CASES / "regressions" / "epoch-unknown-to-leader.yaml"
DIVERGENCE = CASES / "regressions" / "kip-101-divergence.yaml"
CHAOS = CASES / "random-faults.yaml"


def _write(path: Path, events: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"t": 1.0, "m": 1.0, "client": "c", **e}) + "\n" for e in events))


def _judged(case_path: Path, run_dir: Path, version: str | None = None, acked: int = 10_000,
            **fields: Any) -> RunResult:
    """A result judged as a run judges it: a clean check (nothing found, ``acked`` writes)
    and ``fields`` for what the run recorded."""
    case = load_case(case_path, version=version)
    result = RunResult("r", recovery=Recovery(read={"polled": 100}), **fields)
    apply_check(case, result, {"anomalies": {}, "counts": {"ok": acked}}, run_dir=run_dir)
    return result


def _txn_history(run_dir: Path, *, hold: bool = True, commit: str = "info",
                 recovered: bool = False) -> None:
    """Three transactions; the second held before its commit (when ``hold``), whose commit
    returns ``commit``; the recovery read has the others' records (and the held one's when
    ``recovered``)."""
    events: list[dict[str, Any]] = []
    for n in (1, 2, 3):
        tx = f"txns.t{n}"
        events.append({"type": "invokes", "tx": tx, "mids": [f"m{n}a", f"m{n}b"], "topic": "t"})
        if hold and n == 2:
            events.append({"type": "stall", "tx": tx, "reason": "held before commit", "seconds": 8})
        events.append({"type": "txn", "tx": tx, "action": "commit", "status": "invoke"})
        events.append({"type": "txn", "tx": tx, "action": "commit", "status": commit if n == 2 else "ok",
                       **({"error": "_FENCED"} if n == 2 and commit != "ok" else {})})
    _write(run_dir / "history" / "txns.jsonl", events)
    read = [f"m{n}{x}" for n in (1, 3) for x in "ab"] + (["m2a", "m2b"] if recovered else [])
    _write(run_dir / "history" / "recovery.jsonl",
           [{"type": "polls", "phase": "recovery", "topic": "t", "mids": read,
             "partitions": [0] * len(read), "offsets": list(range(len(read)))}])


@pytest.mark.parametrize("path", [HOLD, HOLD_JAVA], ids=lambda p: p.stem)
@pytest.mark.parametrize("version", ["4.1.2", "3.9.2"])
def test_the_17754_cases_are_as_expected_when_the_broker_aborted_the_held_transaction(
        tmp_path: Path, path: Path, version: str) -> None:
    _txn_history(tmp_path, commit="fail" if path == HOLD_JAVA and version == "4.1.2" else "info")
    result = _judged(path, tmp_path, version)
    assert (result.verdict, result.as_expected) == ("pass", True)
    row = next(r for r in result.expectations if r.name == "scenario: held-transactions-aborted")
    assert (row.expected, row.observed, row.ok) == (">= 1", "1 (of 1 held: txns.t2)", True)


@pytest.mark.parametrize(("history", "observed"), [
    ({"hold": False}, "0 (no transaction was held)"),
    ({"commit": "ok", "recovered": True}, "0 (of 1 held)"),  # the late commit went through
    ({"recovered": True}, "0 (of 1 held)"),  # its records committed after all
])
@pytest.mark.parametrize("path", [HOLD, HOLD_JAVA], ids=lambda p: p.stem)
def test_the_17754_cases_fail_saying_the_scenario_did_not_happen(
        tmp_path: Path, path: Path, history: dict[str, Any], observed: str) -> None:
    _txn_history(tmp_path, **history)
    result = _judged(path, tmp_path)
    assert (result.verdict, result.as_expected) == ("fail", False)
    assert scenario_missed(result.expectations) == (
        f"scenario did not happen: held-transactions-aborted {observed}, expected >= 1")
    assert scenario_sentence(result) == (
        f"Scenario did not happen: held-transactions-aborted {observed}, expected >= 1.")


def _truncation(leo_before: int, leo: int) -> list[InjectionSummary]:
    hit = {"node": "kafka-3", "role": "follower", "leo": leo, "leo_before": leo_before, "target": leo}
    return [InjectionSummary("HW-LEADER-ONLY", 100, hit=True),
            InjectionSummary("TRUNCATE-AFTER", 100, hit=True, node="kafka-3", detail=hit)]


@pytest.mark.parametrize(("cut", "as_stated"), [
    (1, {"0.10.2.2"}),  # C had N+1 = 101 records and kept N = 100
    (0, {"0.11.0.3", "2.0.1"}),  # C kept its 101
    (2, set()),
])
def test_truncate_on_follow_is_as_expected_only_with_the_truncation_each_version_states(
        tmp_path: Path, cut: int, as_stated: set[str]) -> None:
    for version in ("0.10.2.2", "0.11.0.3", "2.0.1"):
        result = _judged(TRUNCATE, tmp_path, version, injections=_truncation(101, 101 - cut))
        assert result.as_expected == (version in as_stated), (version, result.expectations)
        row = next(r for r in result.expectations if r.name == "scenario: truncated")
        assert row.observed == f"{cut} (on kafka-3)"


def test_a_truncation_no_hit_line_measured_does_not_hold(tmp_path: Path) -> None:
    # an injection without leo_before (or no hit at all): nothing says what was cut
    for version in ("0.10.2.2", "0.11.0.3"):
        result = _judged(TRUNCATE, tmp_path, version,
                         injections=[InjectionSummary("TRUNCATE-AFTER", 100, hit=True, detail={"leo": 100})])
        assert not result.as_expected
        assert "truncated not measured (no injection's HIT line gives leo_before and leo)" in \
            (scenario_missed(result.expectations) or "")


def _powerloss(run_dir: Path, *records_lost: int) -> None:
    _write(run_dir / "timeline.jsonl", [
        {"type": "fault", "action": "kill9", "node": "kafka-1", "role": "leader", "detail": None},
        *({"type": "fault", "action": "powerloss", "node": "kafka-2", "role": "leader",
           "detail": {"checkpoint": True, "cuts": [{"topic": "t", "partition": 0, "recovery_point": 0,
                                                     "segment": "0.log", "bytes_cut": 7 * n,
                                                     "records_lost": n}]}}
          for n in records_lost)])


@pytest.mark.parametrize(("path", "version", "enough"), [
    (EPOCH, "2.0.1", 100), (EPOCH, "3.9.2", 100), (EPOCH, "0.11.0.3", 100),
    (DIVERGENCE, "0.11.0.3", 1), (DIVERGENCE, "3.9.2", 1), (DIVERGENCE, "0.10.2.2", 1),
])
def test_an_entry_whose_power_loss_cut_too_little_is_not_as_expected(
        tmp_path: Path, path: Path, version: str, enough: int) -> None:
    case = load_case(path, version=version)
    divergence = {"replica-divergence": 1} if case.expect.reproduces else {}  # the bug, where stated
    for lost, expected in ((0, False), (enough - 1, False), (enough, True)):
        _powerloss(tmp_path, lost)
        result = RunResult("r", recovery=Recovery(read={"polled": 100}))
        apply_check(case, result, {"anomalies": divergence, "counts": {"ok": 250}}, run_dir=tmp_path)
        assert result.as_expected == expected, (lost, result.expectations)
    _write(tmp_path / "timeline.jsonl", [])  # no power loss at all
    result = RunResult("r", recovery=Recovery(read={"polled": 100}))
    apply_check(case, result, {"anomalies": divergence, "counts": {"ok": 250}}, run_dir=tmp_path)
    assert not result.as_expected
    missed = scenario_missed(result.expectations) or ""
    assert "powerloss-cut not measured (no power loss was applied)" in missed


def test_a_chaos_step_that_applied_no_fault_is_not_as_expected(tmp_path: Path) -> None:
    def chaos(applied: int) -> list[StepRecord]:
        detail = {"seed": 7, "planned": 3, "applied": applied, "skipped": 3 - applied, "schedule": []}
        return [StepRecord(3, "chaos", "steps[3].chaos", 15, 1.0, "done", detail=detail)]

    assert not _judged(CHAOS, tmp_path, steps=chaos(0)).as_expected
    assert not _judged(CHAOS, tmp_path, steps=[]).as_expected  # the step never finished
    assert _judged(CHAOS, tmp_path, steps=chaos(2)).as_expected


def test_delayed_packets_are_counted_from_the_heal_entries_of_the_timeline(tmp_path: Path) -> None:
    assert measure("delayed-packets", RunResult("r"), tmp_path).count is None  # no timeline
    lines = [{"type": "fault", "t": 1.0, "action": "degrade", "node": "kafka-1",
              "detail": {"effects": {"delay_ms": 150}, "shaped": ["kafka-1"]}},
             {"type": "fault", "t": 2.0, "action": "heal", "node": None,
              "detail": {"delayed": {"kafka-1": {"packets": 900, "held": 800, "at_once": 100}}}},
             {"type": "fault", "t": 3.0, "action": "heal-all", "node": None,
              "detail": {"delayed": {"kafka-2": {"held": 40}, "kafka-3": {"error": "no report"}}}}]
    (tmp_path / "timeline.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    got = measure("delayed-packets", RunResult("r"), tmp_path)
    assert got.count == 840 and got.note == "kafka-1: 800, kafka-2: 40"
    (tmp_path / "timeline.jsonl").write_text(json.dumps(lines[0]) + "\n")
    assert measure("delayed-packets", RunResult("r"), tmp_path).count is None  # never healed


def test_wiped_bytes_are_counted_from_the_replace_faults_of_the_timeline(tmp_path: Path) -> None:
    assert measure("wiped-bytes", RunResult("r"), tmp_path).count is None  # no timeline
    lines = [{"type": "fault", "t": 1.0, "action": "kill9", "node": "kafka-2", "detail": {}},
             {"type": "fault", "t": 2.0, "action": "replace", "node": "kafka-2",
              "detail": {"bytes_wiped": 4_000_000, "broker_id": 2}},
             {"type": "fault", "t": 3.0, "action": "replace", "node": "kafka-2",
              "detail": {"bytes_wiped": 5}},
             {"type": "fault", "t": 4.0, "action": "replace", "node": "kafka-3",
              "detail": {"bytes_wiped": "x"}}]
    (tmp_path / "timeline.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    got = measure("wiped-bytes", RunResult("r"), tmp_path)
    assert got.count == 4_000_005 and got.note == "kafka-2: 4,000,000, kafka-2: 5"
    (tmp_path / "timeline.jsonl").write_text(json.dumps(lines[0]) + "\n")
    assert measure("wiped-bytes", RunResult("r"), tmp_path).count is None  # no replace applied


def test_stalls_are_counted_from_the_history(tmp_path: Path) -> None:
    _txn_history(tmp_path)
    assert measure("stalls", RunResult("r"), tmp_path).count == 1
    assert measure("stalls", RunResult("r"), None).count is None


def test_every_scenario_fact_is_measured() -> None:
    assert set(MEASURES) == set(SCENARIO_FACTS)


HEAD = "system: kafka\ncluster: kafka-zk\n"


@pytest.mark.parametrize(("text", "line", "fragment"), [
    (HEAD + "steps: [{kill9: leader}]\nexpect: {scenario: {truncated: 1}}\n", 4,
     "expect.scenario.truncated: cannot happen in this case: no inject step"),
    (HEAD + "steps: [{powerloss: leader}]\nexpect: {scenario: {chaos-faults: 1}}\n", 4,
     "expect.scenario.chaos-faults: cannot happen in this case: no chaos step"),
    (HEAD + "steps: [{kill9: leader}]\nexpect: {scenario: {powerloss-cut: 1}}\n", 4,
     "no powerloss step, and no chaos step draws powerloss"),
    (HEAD + "steps: [{powerloss: leader}]\nexpect: {scenario: {powerloss-cut: 0}}\n", 4,
     "expect.scenario.powerloss-cut: at least 0 always holds"),
    (HEAD + "steps: [{powerloss: leader}]\nexpect: {scenario: {powerloss-cut: {at_least: 0}}}\n", 4,
     "give at_most, or at_least of 1 or more"),
    (HEAD + "steps: [{powerloss: leader}]\nexpect:\n  scenario:\n"
     "    powerloss-cut: {at_least: 3, at_most: 2}\n", 6,
     "expect.scenario.powerloss-cut.at_most: at_most 2 is below at_least 3"),
    (HEAD + "steps: [{powerloss: leader}]\nexpect:\n  scenario:\n    powerloss-cuts: 1\n", 6,
     "expect.scenario: unknown scenario fact 'powerloss-cuts'"),
    (HEAD + "steps: [{powerloss: leader}]\nexpect: {scenario: {}}\n", 4, "expect.scenario: names no fact"),
    (HEAD + "steps:\n  - produce: {count: 12, transactions: {hold: {transaction: 1, for: 5s}}}\n"
     "expect: {scenario: {held-transactions-aborted: 1}}\n", 5,
     "the recovery read is read_uncommitted"),
    (HEAD + "steps: [{produce: {count: 1}}]\nexpect: {scenario: {stalls: 1}}\n", 4, "no step can stall"),
    (HEAD + "steps: [{degrade: {node: leader, loss: 5%}}]\nexpect: {scenario: {delayed-packets: 1}}\n", 4,
     "no degrade step with a delay"),
])
def test_a_scenario_the_steps_cannot_make_or_that_cannot_fail_is_refused(text: str, line: int,
                                                                        fragment: str) -> None:
    with pytest.raises(CaseError) as info:
        load_case_text(text, "case.yaml")
    assert info.value.line == line and fragment in str(info.value), str(info.value)


def test_bounds_read_and_show_as_the_verdict_rows_do() -> None:
    case = load_case_text(HEAD + "steps: [{powerloss: leader}, {inject: {point: C1}}]\n"
                          "expect:\n  scenario: {powerloss-cut: 4, truncated: {at_most: 0}}\n", "case.yaml")
    assert case.expect.scenario == {"powerloss-cut": Bound(at_least=4), "truncated": Bound(at_most=0)}
    assert [str(Bound(at_least=4)), str(Bound(at_most=0)), str(Bound(1, 1)), str(Bound(1, 3))] == \
        [">= 4", "<= 0", "== 1", "1 to 3"]


def test_ensemble_changes_are_counted_from_the_bookie_dump(tmp_path: Path) -> None:
    assert measure("ensemble-changes", RunResult("r"), tmp_path).count is None  # no dump
    (tmp_path / "bookies").mkdir()
    ledgers = [{"ledger": 7, "ensembles": {"0": ["b1", "b2"]}},
               {"ledger": 9, "ensembles": {"0": ["b1", "b2"], "40": ["b1", "b3"], "90": ["b2", "b3"]}}]
    (tmp_path / "bookies" / "ledgers.json").write_text(json.dumps(ledgers))
    got = measure("ensemble-changes", RunResult("r"), tmp_path)
    assert got.count == 2 and got.note == "ledger 9: 2"
    (tmp_path / "bookies" / "ledgers.json").write_text(json.dumps(ledgers[:1]))
    assert measure("ensemble-changes", RunResult("r"), tmp_path).count == 0
    with pytest.raises(CaseError, match="only Pulsar's ledgers have ensembles"):
        load_case_text(HEAD + "steps: [{kill9: leader}]\nexpect: {scenario: {ensemble-changes: 1}}\n",
                       "c.yaml")


def test_ledger_directories_are_the_ledger_ids_modulo_the_bookies_directories(tmp_path: Path) -> None:
    two = RunResult("r", broker_config={"bookie.ledgerDirectories": "/d1,/d2"})
    assert measure("ledger-directories", two, tmp_path).count is None  # no dump
    (tmp_path / "bookies").mkdir()
    dump = tmp_path / "bookies" / "ledgers.json"
    dump.write_text(json.dumps([{"ledger": 4, "last_confirmed": 10}, {"ledger": 6, "last_confirmed": 3},
                                {"ledger": 7, "last_confirmed": -1}]))  # 7 holds no entry
    got = measure("ledger-directories", two, tmp_path)
    assert got.count == 1 and got.note == "of 2: ledger 4 in 0, ledger 6 in 0"
    dump.write_text(json.dumps([{"ledger": 4, "last_confirmed": 10}, {"ledger": 5, "last_confirmed": 0}]))
    assert measure("ledger-directories", two, tmp_path).count == 2
    assert measure("ledger-directories", RunResult("r"), tmp_path).count == 1  # one directory


def test_fenced_writes_are_counted_after_the_recovery_read() -> None:
    assert measure("fenced-writes", RunResult("r"), None).count is None  # no recovery read
    refused = RunResult("r", recovery=Recovery(read={"polled": 1}, fenced_writes={"broker-1": 2}))
    got = measure("fenced-writes", refused, None)
    assert got.count == 2 and got.note == "broker-1: 2"
    assert measure("fenced-writes", RunResult("r", recovery=Recovery(read={})), None).count == 0
    with pytest.raises(CaseError, match="only Pulsar's bookies fence ledgers"):
        load_case_text(HEAD + "steps: [{kill9: leader}]\nexpect: {scenario: {fenced-writes: 1}}\n",
                       "c.yaml")


LATEST = Path(__file__).resolve().parents[2] / "cases" / "pulsar" / "regressions" / \
    "pulsar-18236-latest-subscription.yaml"


def _polls(run_dir: Path, run: range, recovery: range) -> None:
    _write(run_dir / "history" / "c.jsonl",
           [{"type": "poll", "phase": "run", "mid": f"m{i}"} for i in run]
           + [{"type": "poll", "phase": "run", "mid": "m5"}]  # a redelivery counts once
           + [{"type": "poll", "phase": "recovery", "mid": f"m{i}"} for i in recovery])


def test_polled_counts_the_distinct_ids_the_run_consumers_read(tmp_path: Path) -> None:
    _polls(tmp_path, range(1, 100), range(100))
    assert measure("polled", RunResult("r"), tmp_path).count == 99
    assert measure("polled", RunResult("r"), None).count is None
    with pytest.raises(CaseError, match="expect.scenario.polled: cannot happen in this case: no consume"):
        load_case_text(HEAD + "steps: [{kill9: leader}]\nexpect: {scenario: {polled: 1}}\n", "c.yaml")


def test_the_18236_case_reproduces_only_a_skip_with_the_rest_delivered(tmp_path: Path) -> None:
    """2.10.2 expects one id its subscription never delivered (unseen) with the other 99 polled:
    an unseen count from a consumer that read nothing is not the bug."""
    _polls(tmp_path, range(1, 100), range(100))
    case = load_case(LATEST, version="2.10.2")
    skipped = RunResult("r", recovery=Recovery(read={"polled": 100}))
    apply_check(case, skipped, {"anomalies": {"unseen": 1}, "counts": {"ok": 100}}, run_dir=tmp_path)
    assert skipped.as_expected
    _polls(tmp_path, range(0), range(100))  # the consumer read nothing: 100 unseen
    idle = RunResult("r", recovery=Recovery(read={"polled": 100}))
    apply_check(case, idle, {"anomalies": {"unseen": 100}, "counts": {"ok": 100}}, run_dir=tmp_path)
    assert not idle.as_expected
    _polls(tmp_path, range(100), range(100))  # every id delivered
    fixed = load_case(LATEST, version="2.10.3")
    held = RunResult("r", recovery=Recovery(read={"polled": 100}))
    apply_check(fixed, held, {"anomalies": {}, "counts": {"ok": 100}}, run_dir=tmp_path)
    assert held.as_expected


def test_unseen_is_reproduced_only_with_the_polled_ids_bounded() -> None:
    steps = "steps: [{consume: {duration: 5s}}]\n"
    with pytest.raises(CaseError, match="unseen is reproduced only when the consumers read the rest"):
        load_case_text(HEAD + steps + "expect: {reproduces: [unseen]}\n", "c.yaml")
    case = load_case_text(HEAD + steps + "expect: {reproduces: [unseen], scenario: {polled: 9}}\n", "c.yaml")
    assert "unseen" in case.expect.reproduces and "unseen" not in case.expect.observe


def test_fenced_rereplications_count_the_fragments_autorecovery_began_on_after_the_fence(
        tmp_path: Path) -> None:
    assert measure("fenced-rereplications", RunResult("r"), tmp_path).count is None  # no dump
    (tmp_path / "bookies").mkdir()
    (tmp_path / "bookies" / "ledgers.json").write_text(json.dumps([{"ledger": 7}, {"ledger": 8}]))
    assert measure("fenced-rereplications", RunResult("r"), tmp_path).count is None  # no bookie log
    (tmp_path / "logs").mkdir()

    def copy(t: str, ledger: int, first: int) -> str:
        return (f"[2026-12-05 {t},000] INFO Replicating fragment Fragment(LedgerID: {ledger}, "
                f"FirstEntryID: {first}[0])\n")

    def fence(t: str, ledger: int) -> str:
        return f"[2026-12-05 {t},500] WARN Ledger: {ledger}  fenced by: /172.0.0.9:5 (o.a.b.p.X)\n"

    (tmp_path / "logs" / "bookie-1.log").write_text(
        copy("19:00:01", 8, 0) + fence("19:00:02", 7) + fence("19:00:03", 8) + copy("19:00:04", 7, 0)
        + copy("19:00:05", 7, 0) + copy("19:00:06", 3, 0))
    (tmp_path / "logs" / "bookie-3.log").write_text(copy("19:00:07", 7, 402) + fence("19:00:01", 7))
    got = measure("fenced-rereplications", RunResult("r"), tmp_path)
    # ledger 8 was copied before its fence (a copy into a ledger not fenced proves nothing);
    # ledger 3 is another topic's
    assert got.count == 2
    assert got.note == ("ledger 7 from entry 0, ledger 7 from entry 402, "
                        "and before its fence: ledger 8 from entry 0")
    with pytest.raises(CaseError, match="only Pulsar's bookies re-replicate ledgers"):
        load_case_text(HEAD + "steps: [{kill9: leader}]\nexpect: {scenario: {fenced-rereplications: 1}}\n",
                       "c.yaml")


def test_an_unclean_election_is_told_with_its_leader_epoch_and_isr() -> None:
    line = election_sentence({"leader": 1, "epoch": 3, "partition": 0, "isr": "[]"})
    assert line.startswith("The controller elected broker 1 leader of partition 0 by an unclean election")
    assert "leader epoch 3; the ISR was []" in line
