"""Nothing recorded leaves the judgement in silence: an acknowledged write the checker
cannot judge (an ``ok`` without a message id) makes the run's verdict ``error``, naming how
many and where the first are, unless the case allows them; the warning of ``harness run``
and ``harness check`` names every line the check could not use."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.case import Case, load_case_text
from harness.cli import main
from harness.result import Recovery, RunResult
from harness.run.judge import CHECK_FAILED, apply_check, unjudged_acks
from harness.testing.synthetic import Profile, generate

CASE = """\
description: A synthetic run, judged again.
system: kafka
cluster: kafka-zk
topic: {partitions: 3}
steps:
  - produce: {count: 400, name: load}
expect:
  lost-write: 0
  min_acked: 10
"""


def _case(allowed: int | None = None) -> Case:
    case = load_case_text(CASE, "case.yaml")
    if allowed is None:
        return case
    # the case's allowance (``expect.unjudged_acks``), read by the judge where a case has it
    expect = SimpleNamespace(**vars(case.expect), unjudged_acks=allowed)
    return dataclasses.replace(case, expect=expect)  # type: ignore[arg-type]


def _history(run: Path) -> None:
    (run / "history").mkdir(parents=True)
    (run / "history" / "producer-0.jsonl").write_text("".join(json.dumps(e) + "\n" for e in [
        {"type": "invoke", "client": "p", "mid": "a", "topic": "t"},
        {"type": "ok", "client": "p", "mid": "a", "partition": 0, "offset": 0},
        {"type": "oks", "client": "p", "mids": [None, None], "partitions": [0, 0], "offsets": [1, 2]},
        {"type": "ok", "client": "p", "partition": 0, "offset": 3},
    ]))


def _check(acks: int) -> dict[str, object]:
    return {"anomalies": {}, "counts": {"ok": 100, "unjudged": acks + 1, "unjudged-ok": acks, "lines": 4}}


def test_acknowledged_writes_without_ids_make_the_verdict_error(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    _history(tmp_path)
    result = RunResult("r", recovery=Recovery(read={"polled": 100}))
    with caplog.at_level(logging.INFO):
        apply_check(_case(), result, _check(3), run_dir=tmp_path)
    assert (result.verdict, result.as_expected, result.exit_code) == ("error", False, 2)
    assert result.error == (
        f"{CHECK_FAILED}3 acknowledged writes have no message id and cannot be judged (lost or not: "
        "nothing can tell; the case allows 0); the first: history/producer-0.jsonl:3 (oks: 2 of 2 records "
        "without a message id), history/producer-0.jsonl:4 (ok without a message id)")
    assert all(e.ok for e in result.expectations)  # every expectation held: the error is the ids'
    assert "4 sends (invoke, ok, fail, info) have no message id and were not judged, 3 of them " \
           "acknowledged writes; the first: history/producer-0.jsonl:3" in caplog.text


def test_the_case_can_allow_acknowledged_writes_without_ids(tmp_path: Path) -> None:
    _history(tmp_path)
    for allowed, verdict in ((3, "pass"), (2, "error")):
        result = RunResult("r", recovery=Recovery(read={"polled": 100}))
        apply_check(_case(allowed), result, _check(3), run_dir=tmp_path)
        assert result.verdict == verdict, allowed
    assert result.error is not None and "the case allows 2" in result.error


def test_without_the_history_the_files_that_hold_them_are_named() -> None:
    unread = {"history/a.jsonl": {"not a JSON object": 1},
              "history/b.jsonl": {"ok without a message id": 4, "invoke without a message id": 1}}
    why = unjudged_acks(_case(), {"unjudged-ok": 4}, None, unread)
    assert why is not None and why.endswith("; the first: history/b.jsonl (4)")


def test_a_result_of_before_these_counts_is_judged_as_before() -> None:
    """A check result (or result.json) without the new counts: nothing unjudged."""
    assert unjudged_acks(_case(), {"ok": 5, "lines": 10, "skipped": 0}) is None


def test_harness_check_of_a_run_with_acks_without_ids_is_an_error(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The bad-input campaign's run: acknowledged writes stripped of their ids no longer pass
    in silence; ``harness check`` exits 2 with one message saying how many and where, and
    result.json says verdict error; junk replica lines are named in the warning."""
    run = tmp_path / "reports" / "20260101-000000-synthetic-abcd"
    expected = generate(run, Profile(records=400, seed=17, replicas=2, no_mid=6, torn_replicas=True))
    (run / "case.yaml").write_text(CASE)
    RunResult(run.name, case="synthetic", cluster="kafka-zk", verdict="pass", as_expected=True,
              recovery=Recovery(converged_s=1.5, read={"polled": 400})).write(run)
    code = main(["check", str(run)])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert "Traceback" not in out + err
    result = RunResult.read(run)
    assert (result.verdict, result.as_expected) == ("error", False)
    assert result.counts["unjudged-ok"] == 6 and result.counts == expected.counts
    assert result.error is not None and result.error.startswith(
        f"{CHECK_FAILED}6 acknowledged writes have no message id and cannot be judged")
    assert "; the first: history/producer-" in result.error
    assert "6 of them acknowledged writes" in err
    assert f"6 of {expected.counts['replica-lines']} replica lines could not be read and were skipped; " \
           "the first: replicas/kafka-1.jsonl:1 (not a JSON object)" in err
