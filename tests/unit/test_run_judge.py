"""The judge: a case that expects a bug is as expected only when that bug showed."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.case import Expect, load_case, load_case_text
from harness.result import Expectation
from harness.run.judge import as_expected

ROOT = Path(__file__).resolve().parents[2]
HEAD = "system: kafka\ncluster: kafka-zk\nsteps: [{kill9: leader}]\n"


def _rows(lost: int, duplicate: int = 0) -> list[Expectation]:
    return [Expectation("lost-write", "<= 0", lost, lost <= 0),
            Expectation("duplicate", "<= 0", duplicate, duplicate <= 0),
            Expectation("acknowledged writes", ">= 1", 5, True)]


def test_an_expect_of_verdict_fail_without_reproduces_cannot_be_built() -> None:
    with pytest.raises(ValueError, match="names the anomalies it reproduces"):
        Expect(verdict="fail")


def test_a_failing_case_is_as_expected_only_when_its_named_anomaly_was_observed() -> None:
    case = load_case_text(HEAD + "expect: {reproduces: [lost-write]}\n", "case.yaml")
    assert as_expected(case, _rows(lost=200), "fail")
    assert not as_expected(case, _rows(lost=0, duplicate=1), "fail")  # a failure, not the bug
    assert not as_expected(case, _rows(lost=200, duplicate=1), "fail")  # the bug and another
    assert not as_expected(case, _rows(lost=0), "pass")


def test_a_named_anomaly_the_judge_did_not_judge_is_not_reproduced() -> None:
    case = load_case_text(HEAD + "expect: {reproduces: [lost-write]}\n", "case.yaml")
    rows = [Expectation("duplicate", "<= 0", 0, True), Expectation("acknowledged writes", ">= 1", 0, False)]
    assert not as_expected(case, rows, "fail")


def test_the_unclean_election_case_names_the_loss_it_reproduces() -> None:
    case = load_case(ROOT / "cases" / "kafka" / "s2-unclean-on.yaml")
    assert case.expect.verdict == "fail" and case.expect.reproduces == {"lost-write"}
    assert case.expect.min_acked == 400
