"""``harness check`` and ``harness report`` on a corrupted run directory (issue 56), run as a
user runs them, in a process of their own: a FIFO or a device in place of ``result.json`` or a
history, a ``result.json`` over its cap or of an unknown schema. Each ends in seconds with one
clear error (exit 2, no traceback) or a page and a line saying what it left out; never a hang,
a MemoryError or exit 1 (which CI reads as "expectations not met"). ``check`` refuses these
before it would start Spark, and these tests never let it get that far."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.result import MAX_RESULT_BYTES, RunResult
from harness.testing.special_files import KIND, SPECIALS, make_special

REPO = Path(__file__).resolve().parents[2]
CASE = "system: kafka\ncluster: kafka-zk\nsteps: [{produce: {count: 10}}]\n"
#: a check that got past its inputs would fail here, with another message
NO_SPARK = "spark://127.0.0.1:9"


def _harness(*argv: str, timeout: float = 60) -> tuple[int, str, str]:
    """``harness ARGV`` in a new process: exit code, stdout, stderr; a hang fails the test."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "HARNESS_SPARK_MASTER": NO_SPARK}
    try:
        proc = subprocess.run([sys.executable, "-m", "harness", *argv], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"harness {' '.join(argv)} still running after {timeout} s (blocked on a special file?)")
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc.returncode, proc.stdout, proc.stderr


def _run_dir(tmp_path: Path, **result: object) -> Path:
    """A small run directory: a history of two events, the case copy, a result.json."""
    run = tmp_path / "reports" / "20260101-000000-special-abcd"
    (run / "history").mkdir(parents=True)
    t = 1.8e9
    (run / "history" / "p.jsonl").write_text(
        json.dumps({"type": "invoke", "client": "p", "t": t, "mid": "m1", "topic": "t"}) + "\n"
        + json.dumps({"type": "ok", "client": "p", "t": t + 0.01, "mid": "m1", "topic": "t",
                      "partition": 0, "offset": 0}) + "\n")
    (run / "case.yaml").write_text(CASE)
    RunResult(run.name, case="special", cluster="kafka-zk", verdict="pass", as_expected=True,
              counts={"ok": 1}, anomalies={"lost-write": 0}).write(run)
    if result:
        path = run / "result.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **result}))
    return run


@pytest.mark.parametrize("kind", SPECIALS)
def test_check_refuses_a_special_result_json_before_opening_it(tmp_path: Path, kind: str) -> None:
    run = _run_dir(tmp_path)
    make_special(run / "result.json", kind)
    code, out, err = _harness("check", str(run))
    assert (code, out) == (2, "")
    assert err == (f"harness: error: {run}/result.json: unreadable: {KIND[kind]}, not a regular file "
                   "(result.json is read only from a regular file)\n")
    assert not (run / "report.html").exists()


def test_check_refuses_a_result_json_over_the_cap_by_its_size(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    with (run / "result.json").open("wb") as fh:
        fh.truncate(4 << 30)  # sparse: 4 GiB that would be read into memory
    code, out, err = _harness("check", str(run))
    assert (code, out) == (2, "")
    assert err == (f"harness: error: {run}/result.json: unreadable: 4 GiB ({4 << 30} bytes), over the "
                   f"cap of 64 MiB for result.json (is it the right file?)\n")
    assert MAX_RESULT_BYTES == 64 << 20


@pytest.mark.parametrize("schema", [3, 999, -1])
def test_check_never_rewrites_a_result_of_an_unknown_schema(tmp_path: Path, schema: int) -> None:
    run = _run_dir(tmp_path, schema=schema, field_of_a_newer_harness={"kept": True})
    before = (run / "result.json").read_bytes()
    code, out, err = _harness("check", str(run))
    assert (code, out) == (2, "")
    assert err.startswith(f"harness: error: {run}/result.json: schema {schema}: this harness reads "
                          "result.json of schema 1 or 2 only") and err.count("\n") == 1
    assert (run / "result.json").read_bytes() == before
    assert not (run / "report.html").exists()


@pytest.mark.parametrize("schema", [3, -1])
def test_report_of_a_result_of_an_unknown_schema_is_an_error(tmp_path: Path, schema: int) -> None:
    run = _run_dir(tmp_path, schema=schema)
    code, out, err = _harness("report", str(run))
    assert (code, out) == (2, "")
    assert err.startswith(f"harness: error: {run}/result.json: schema {schema}: ") and err.count("\n") == 1
    assert not (run / "report.html").exists()


@pytest.mark.parametrize("kind", SPECIALS)
@pytest.mark.parametrize("name", ["result.json", "history/p.jsonl"])
def test_report_of_a_special_file_writes_the_page_and_says_what_it_left_out(tmp_path: Path, kind: str,
                                                                          name: str) -> None:
    run = _run_dir(tmp_path)
    make_special(run / name, kind)
    code, out, err = _harness("report", str(run))
    assert (code, out) == (0, f"report: {run / 'report.html'}\n")
    html = (run / "report.html").read_text()
    if name == "result.json":
        assert f"{run}/result.json: unreadable: {KIND[kind]}, not a regular file" in err
        assert "the page shows the verdict unknown" in err and "verdict-unknown" in html
    else:
        assert f"left out of the page: history/p.jsonl: not read: {KIND[kind]}, not a regular file" in err
        assert "history/p.jsonl" in html and "not read: " in html
