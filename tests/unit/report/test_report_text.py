"""format_result: the plain-text summary the CLI prints and a failed case test shows."""

from __future__ import annotations

from pathlib import Path

from harness.report.text import format_result
from harness.result import Expectation, RunResult

CHECKED = {"invoked": 100, "ok": 100}


def _pass() -> RunResult:
    return RunResult("r-pass", case="kill-leader", verdict="pass", as_expected=True, observed=["unseen"],
                     counts=CHECKED, anomalies={"lost-write": 0, "unseen": 0},
                     expectations=[Expectation("lost-write", "<= 0", 0, True),
                                   Expectation("acknowledged writes", ">= 50", 100, True)])


def _fail() -> RunResult:
    return RunResult(
        "r-fail", case="kill-leader", verdict="fail", observed=["unseen"], counts=CHECKED,
        anomalies={"lost-write": 2, "duplicate": 0, "unseen": 3},
        examples={"lost-write": [{"mid": "p0-7", "offset": 7, "prev": {"mid": "p0-6"}}, {"mid": "p0-8"}],
                  "unseen": [{"mid": "p1-1"}]},
        expectations=[Expectation("lost-write", "<= 0", 2, False), Expectation("duplicate", "<= 0", 0, True),
                      Expectation("injection hit", True, False, False)])


def _error() -> RunResult:
    return RunResult("r-error", case="kill-leader",
                     error="WaitTimeout: kafka-1 not ready in 120 s\nlast log lines:\n  ...")


def test_pass(tmp_path: Path) -> None:
    (tmp_path / "report.html").write_text("")
    assert format_result(_pass(), tmp_path).splitlines() == [
        "verdict: pass (expected pass); case kill-leader",
        "anomalies: none",
        f"report: {tmp_path}/report.html",
    ]


def test_fail_with_anomalies(tmp_path: Path) -> None:
    assert format_result(_fail(), tmp_path).splitlines() == [
        "verdict: fail (expected pass); case kill-leader",
        "  NOT MET lost-write: expected <= 0, observed 2",
        "  NOT MET injection hit: expected true, observed false",
        "anomalies: lost-write 2, unseen 3 (observed)",
        f"report: not rendered (harness report {tmp_path})",
    ]


def test_fail_verbose_gives_every_expectation_and_an_example_of_each_anomaly(tmp_path: Path) -> None:
    (tmp_path / "report.html").write_text("")
    assert format_result(_fail(), tmp_path, verbose=True).splitlines() == [
        "verdict: fail (expected pass); case kill-leader",
        "  NOT MET lost-write: expected <= 0, observed 2",
        "  ok      duplicate: expected <= 0, observed 0",
        "  NOT MET injection hit: expected true, observed false",
        "anomalies: lost-write 2, unseen 3 (observed)",
        '  lost-write e.g. mid=p0-7 offset=7 prev={"mid": "p0-6"}',
        "  unseen e.g. mid=p1-1",
        f"run directory: {tmp_path}",
        f"report: {tmp_path}/report.html",
    ]


def test_error(tmp_path: Path) -> None:
    assert format_result(_error(), tmp_path).splitlines() == [
        "verdict: error (expected pass); case kill-leader",
        "error: WaitTimeout: kafka-1 not ready in 120 s",
        "anomalies: not checked",
        f"report: not rendered (harness report {tmp_path})",
    ]
    verbose = format_result(_error(), tmp_path, verbose=True)
    assert "error: WaitTimeout: kafka-1 not ready in 120 s\nlast log lines:\n  ...\n" in verbose
    assert f"run directory: {tmp_path}" in verbose


def test_expected_fail_and_unnamed_case(tmp_path: Path) -> None:
    result = RunResult("r", verdict="fail", expected_verdict="fail", as_expected=True)
    assert format_result(result, tmp_path).splitlines()[0] == "verdict: fail (expected fail)"


def test_a_reproducing_case_names_its_version_entry_and_says_when_another_expectation_failed(
        tmp_path: Path) -> None:
    missed = _fail()
    missed.expected_verdict, missed.variant = "fail", "0.10.2.2"  # the point was not hit
    assert format_result(missed, tmp_path).splitlines()[:2] == [
        "verdict: fail (expected fail); case kill-leader on 0.10.2.2",
        "not as expected: the case names the anomalies it reproduces, and the expectations that "
        "failed are not exactly those"]
    missed.as_expected = True
    assert "not as expected" not in format_result(missed, tmp_path)


def test_transactions_get_a_line(tmp_path: Path) -> None:
    result = _pass()
    result.counts = {**CHECKED, "txn-committed": 13, "txn-aborted": 6, "txn-unknown": 1,
                     "txn-seen-committed": 0, "aborted-uncommitted-read": 36}
    assert ("transactions: 13 committed, 6 aborted, 1 unknown (0 of them seen committed); "
            "36 aborted records read uncommitted") in format_result(result, tmp_path).splitlines()
    assert not any(line.startswith("transactions:") for line in format_result(_pass(), tmp_path).splitlines())
