"""``harness check RUN``: the history of a stored run checked again and judged against
the run's case copy, as ``harness run`` judges; result.json and the report rewritten,
the exit code that of ``harness run`` (0 as expected, 1 not, 2 error). Errors are one
message naming what is missing, never a traceback, and leave result.json as it was."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import HarnessError
from harness.result import InjectionSummary, Recovery, RunResult, StepRecord
from harness.testing.synthetic import Expected, Profile, generate

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
STORY = ["Point A1 was hit (N = 1): expected x; observed y.", "No acknowledged record was lost."]


def _run(tmp_path: Path, inject: dict[str, int] | None = None, **fields: object) -> tuple[Path, Expected]:
    """A run directory: a synthetic history, the case copy, and a result.json as a run
    leaves it (here: its check had failed), with ``fields`` set."""
    run = tmp_path / "reports" / "20260101-000000-synthetic-abcd"
    expected = generate(run, Profile(records=400, seed=17, inject=inject or {}))
    (run / "case.yaml").write_text(CASE)
    result = RunResult(
        run.name, case="synthetic", cluster="kafka-zk", verdict="error", error="check failed: Spark died",
        steps=[StepRecord(0, "produce", "produce load", 6, 1.0, "done", duration_s=2.0)],
        recovery=Recovery(converged_s=1.5, read={"polled": 400}),
        injection=InjectionSummary("A1", 1, hit=True), story=list(STORY), counts={}, anomalies={})
    for name, value in fields.items():
        setattr(result, name, value)
    result.write(run)
    return run, expected


def _check(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["check", str(run)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_a_clean_run_is_judged_and_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run, expected = _run(tmp_path)
    code, out, err = _check(run, capsys)
    assert code == 0, out + err
    result = RunResult.read(run)
    assert (result.verdict, result.as_expected, result.error) == ("pass", True, None)
    assert result.counts == expected.counts and result.anomalies == expected.anomalies
    assert all(e.ok for e in result.expectations)
    # what the run recorded stays
    assert result.steps[0].label == "produce load" and result.injection == InjectionSummary("A1", 1, hit=True)
    assert result.recovery == Recovery(converged_s=1.5, read={"polled": 400})
    assert result.story == STORY and result.case == "synthetic"
    assert "verdict: pass (expected pass)" in out
    # the generator's torn and malformed lines: a warning, the counts in result.json
    skipped = expected.counts["skipped"]
    assert skipped > 0
    assert f"{skipped} of {expected.counts['lines']} history lines could not be read and were skipped" in err
    assert "; the first: history/" in err  # where they are
    assert (run / "report.html").is_file() and (run.parent / "index.html").is_file()
    assert [p.name for p in run.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_a_violated_expectation_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run, expected = _run(tmp_path, {"lost-write": 2}, verdict="pass", as_expected=True, error=None,
                         counts={"ok": 1}, anomalies={"lost-write": 0})
    code, out, err = _check(run, capsys)
    assert code == 1, out + err
    result = RunResult.read(run)
    assert (result.verdict, result.as_expected) == ("fail", False)
    assert result.anomalies["lost-write"] == 2 and result.counts == expected.counts
    lost = next(e for e in result.expectations if e.name == "lost-write")
    assert (lost.observed, lost.ok) == (2, False)
    assert result.story == [STORY[0], "2 acknowledged record(s) were lost."]
    assert "NOT MET lost-write" in out


def test_a_violated_latency_bound_exits_1_with_a_readable_line(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A bound on the send latency that the run's measured p99 is over: verdict fail, the
    row and the latency line printed (issue 16's must-show 4)."""
    run, _ = _run(tmp_path)
    (run / "case.yaml").write_text(CASE + "  p99_latency_ms: 0.001\n")
    code, out, err = _check(run, capsys)
    assert code == 1, out + err
    result = RunResult.read(run)
    row = next(e for e in result.expectations if e.name == "p99 send latency (ms)")
    assert row.expected == "<= 0.001" and isinstance(row.observed, float) and not row.ok
    assert result.latency is not None and result.latency["send"]["p99"] == row.observed
    assert f"NOT MET p99 send latency (ms): expected <= 0.001, observed {row.observed}" in out
    assert "latency: send p50" in out


def test_a_run_that_failed_after_recovery_keeps_its_error(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    run, expected = _run(tmp_path, error="heal failed: kafka-2 did not start")
    code, out, err = _check(run, capsys)
    assert code == 2, out + err
    result = RunResult.read(run)
    assert (result.verdict, result.error) == ("error", "heal failed: kafka-2 did not start")
    assert result.counts == expected.counts and result.expectations


def test_a_run_that_failed_before_recovery_is_left_as_it_is(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    run, _ = _run(tmp_path, error="cluster did not start", recovery=None)
    before = (run / "result.json").read_bytes()
    code, out, err = _check(run, capsys)
    assert code == 2
    assert "failed before its recovery read" in err and "verdict: error" in out
    assert (run / "result.json").read_bytes() == before


@pytest.mark.parametrize("missing", ["case.yaml", "result.json"])
def test_a_missing_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str], missing: str) -> None:
    run, _ = _run(tmp_path)
    (run / missing).unlink()
    code, _, err = _check(run, capsys)
    assert code == 2
    assert f"{run / missing}: missing" in err


def test_a_reports_directory_names_the_runs_it_holds(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    run, _ = _run(tmp_path)
    reports = run.parent
    (reports / "notes").mkdir()  # not a run: not named
    for command in ("check", "report"):
        code = main([command, str(reports)])
        out, err = capsys.readouterr()
        assert code == 2 and out == "", command
        assert err == (f"harness: error: {reports}: not a run directory: it holds no result.json, "
                       f"timeline.jsonl or history/; it holds runs ({run.name}): give one of them\n"), command
    assert not (reports / "result.json").exists() and not (reports / "report.html").exists()


def test_a_run_that_cannot_be_rewritten_is_refused_before_the_check(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A run on a read-only file system (os.access says no: root's permission bits would not)."""
    import harness.check
    import harness.run.recheck as recheck

    run, _ = _run(tmp_path)
    before = (run / "result.json").read_bytes()
    monkeypatch.setattr(recheck.os, "access", lambda path, mode: Path(path) != run)
    monkeypatch.setattr(harness.check, "check_run", lambda *a, **k: pytest.fail("checked"))
    code, out, err = _check(run, capsys)
    assert code == 2 and out == ""
    assert err.strip().splitlines()[-1] == (
        f"harness: error: {run}: cannot write there (a read-only file system, or no permission), and "
        "checking a run rewrites its result.json and report: copy the run directory somewhere writable "
        "and check the copy")
    assert (run / "result.json").read_bytes() == before


def test_an_invalid_case_copy_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run, _ = _run(tmp_path)
    before = (run / "result.json").read_bytes()
    (run / "case.yaml").write_text(CASE.replace("lost-write: 0", "lost-writes: 0"))
    code, _, err = _check(run, capsys)
    assert code == 2 and f"{run / 'case.yaml'}:" in err and "cannot judge the run" in err
    assert (run / "result.json").read_bytes() == before


def test_a_directory_as_history_file_is_one_clear_error(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    run, _ = _run(tmp_path)
    before = (run / "result.json").read_bytes()
    bad = run / "history" / "consumer-7.jsonl"
    bad.mkdir()
    code, out, err = _check(run, capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert lines[-1] == f"harness: error: cannot check the run: {bad}: a directory, not a file of lines"
    assert len(lines) <= 2, err  # and the progress line before the check: no Spark log
    assert (run / "result.json").read_bytes() == before


def test_a_history_of_random_bytes_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run, _ = _run(tmp_path)
    before = (run / "result.json").read_bytes()
    rng = random.Random(18)
    for f in (run / "history").iterdir():
        f.write_bytes(rng.randbytes(5_000))
    code, _, err = _check(run, capsys)
    assert code == 2
    assert "no history line could be read: all" in err
    assert (run / "result.json").read_bytes() == before


def test_a_case_copy_with_a_rule_file_finds_it_where_the_run_did(tmp_path: Path) -> None:
    """The copy's rule file (relative to the case) is not in the run directory: it is
    looked up next to the case file the run read."""
    from harness.run.recheck import _case

    original = Path(__file__).resolve().parents[2] / "cases" / "kafka" / "user-rule.yaml"
    (tmp_path / "case.yaml").write_text(original.read_text())
    result = RunResult("r", cluster="kafka-zk", version="3.9.2", case_file=str(original))
    case = _case(tmp_path, result)
    assert case.expect.injection_hit is True and case.expect.min_acked == 100
    result.case_file = None
    with pytest.raises(HarnessError, match="cannot judge the run: its case copy is invalid: .*rule file"):
        _case(tmp_path, result)
