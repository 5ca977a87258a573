"""RunResult: the typed result.json (docs/result.md): round trips, defaults, strict field types."""

from __future__ import annotations

import json
import math
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from harness.errors import ResultError
from harness.result import SCHEMA, Expectation, InjectionSummary, Recovery, RunResult, StepRecord


def _full() -> RunResult:
    """A result with every field set, nested records included."""
    return RunResult(
        "20261122-013000-kill-leader-ab12", case="kill-leader", case_file="cases/kafka/c1.yaml",
        description="Kill the leader.", system="kafka", cluster="kafka-zk", version="3.9.2",
        variant="3.9.2-ibp-0.11.0-IV1", seed=7, broker_config={"inter.broker.protocol.version": "0.11.0-IV1"},
        topic="chaos-ab12", started="2026-11-22T01:30:00Z", finished="2026-11-22T01:31:02Z",
        duration_s=62.4, verdict="fail", expected_verdict="pass", as_expected=False,
        error="check failed: boom", observed=["unseen"],
        anomalies={"lost-write": 1, "unseen": 3}, examples={"lost-write": [{"mid": "p0-1", "offset": 4}]},
        counts={"invoked": 10, "ok": 9},
        expectations=[Expectation("lost-write", "<= 0", 1, False),
                      Expectation("injection hit", True, True, True)],
        steps=[StepRecord(0, "produce", "steps[0].produce", 12, 1.8e9, "done", None, 20.0,
                          {"rate": 100}),
               StepRecord(1, "kill9", "steps[1].kill9", None, 1.8e9 + 8, "error", "no leader", 0.4)],
        recovery=Recovery(12.5, {"polled": 9}, {"bookie-1": 40}, ["lock flapped"], ["restarted bookie-1"]),
        injection=InjectionSummary("C1", 518, "kafka-1", "kafka-2", True, "kafka-1", {"leo": 524},
                                   {"action": "kill9", "node": "kafka-1", "t": 1.8e9}, "meaning", "seed",
                                   "leader LEO=520", "leader LEO=520 (at kill)"),
        injections=[InjectionSummary("HW-LEADER-ONLY", 518, hit=True)],
        truncations=[{"node": "kafka-1", "offset": 518}],
        replicas=[{"node": "kafka-2", "log_end_offset": 518}],
        collect_problems=["logs of kafka-3: gone"], story=["Point C1 was hit."],
        files={"case": "case.yaml", "logs": ["logs/kafka-1.log"]},
    )


#: Round 1's loose dict, as harness/runner.py wrote it (no ``schema`` key in some files).
ROUND_1 = {
    "run_id": "20261101-120000-c1-0a1b", "case": "c1", "case_file": "cases/kafka/c1.yaml",
    "description": "C1", "system": "kafka", "cluster": "kafka-zk", "version": "3.9.2",
    "started": "2026-11-01T12:00:00Z", "verdict": "pass", "expected_verdict": "pass", "error": None,
    "files": {"case": "case.yaml", "logs": ["logs/kafka-1.log"]}, "observed": ["duplicate", "unseen"],
    "topic": "chaos-0a1b-abcdef",
    "anomalies": {"lost-write": 0, "duplicate": 0}, "examples": {"lost-write": [], "duplicate": []},
    "counts": {"invoked": 100, "ok": 100},
    "expectations": [{"name": "lost-write", "expected": "<= 0", "observed": 0, "ok": True},
                     {"name": "acknowledged writes", "expected": ">= 50", "observed": 100, "ok": True},
                     {"name": "injection hit", "expected": True, "observed": True, "ok": True}],
    "as_expected": True,
    "steps": [{"index": 0, "action": "produce", "label": "steps[0].produce", "line": 9, "t": 1.7e9,
               "status": "done", "error": None, "duration_s": 0.012, "detail": {"client": "p"}}],
    "recovery": {"converged_s": 4.1, "read": {"polled": 100}},
    "injection": {"point": "C1", "n": 42, "leader": "kafka-1", "follower": "kafka-2", "hit": True,
                  "node": "kafka-1", "detail": {"hw": 42}, "kill": None, "meaning": "m", "seed": None,
                  "expected": "e", "observed": "o"},
    "truncations": [], "replicas": [{"node": "kafka-1", "log_end_offset": 43, "when": "hit"}],
    "story": ["Point C1 was hit (N = 42)."], "finished": "2026-11-01T12:01:00Z", "duration_s": 60.0,
}


def test_round_trip_through_json() -> None:
    result = _full()
    again = RunResult.from_json(json.loads(json.dumps(result.to_json())))
    assert again == result
    assert again.schema == SCHEMA


def test_every_field_is_written() -> None:
    assert set(_full().to_json()) == {f.name for f in fields(RunResult)}


def test_write_then_read(tmp_path: Path) -> None:
    result = _full()
    result.duration_s = math.nan  # not JSON: written as null
    assert result.write(tmp_path) == tmp_path / "result.json"
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # no temporary file left
    assert json.loads((tmp_path / "result.json").read_text())["duration_s"] is None
    again = RunResult.read(tmp_path)
    assert again.duration_s is None and again.expectations == result.expectations


def test_missing_keys_take_defaults() -> None:
    result = RunResult.from_json({"run_id": "r"})
    assert result == RunResult("r", schema=1)
    assert (result.verdict, result.exit_code, result.checked) == ("error", 2, False)


def test_null_containers_take_defaults() -> None:
    raw = {"run_id": "r", "schema": 2, "counts": None, "steps": None, "verdict": None, "recovery": None}
    assert RunResult.from_json(raw) == RunResult("r")


@pytest.mark.parametrize("with_schema", [False, True])
def test_a_round_1_result_loads(with_schema: bool) -> None:
    raw = {**ROUND_1, "schema": 1} if with_schema else ROUND_1
    result = RunResult.from_json(json.loads(json.dumps(raw)))
    assert result.schema == 1
    assert result.expectations[2] == Expectation("injection hit", True, True, True)
    assert result.steps[0].detail == {"client": "p"} and result.steps[0].duration_s == 0.012
    assert result.recovery == Recovery(4.1, {"polled": 100})
    assert result.injection is not None and result.injection.n == 42 and result.injection.kill is None
    assert (result.exit_code, result.checked) == (0, True)


@pytest.mark.parametrize(("verdict", "as_expected", "code"),
                         [("pass", True, 0), ("fail", True, 0), ("fail", False, 1), ("pass", False, 1),
                          ("error", False, 2), ("error", True, 2)])
def test_exit_code(verdict: str, as_expected: bool, code: int) -> None:
    assert RunResult("r", verdict=verdict, as_expected=as_expected).exit_code == code


_STEP = {"index": 0, "action": "produce", "label": "l", "line": 3, "t": 1.0}
_INJECTION = {"point": "C1", "n": 3}

#: (key, bad value, the field the error names): every top-level field and each nested one
MALFORMED: list[tuple[str, Any, str]] = [
    ("run_id", 3, "run_id"), ("run_id", "", "run_id"),
    ("case", 3, "case"), ("case_file", [], "case_file"), ("description", True, "description"),
    ("system", {}, "system"), ("cluster", 1.5, "cluster"), ("version", 3, "version"),
    ("topic", ["t"], "topic"), ("started", 1.8e9, "started"), ("finished", False, "finished"),
    ("duration_s", "long", "duration_s"), ("duration_s", True, "duration_s"),
    ("duration_s", 10 ** 400, "duration_s"),
    ("verdict", "PASS", "verdict"), ("verdict", 1, "verdict"),
    ("expected_verdict", "error", "expected_verdict"), ("as_expected", "yes", "as_expected"),
    ("error", {"msg": "x"}, "error"),
    ("observed", "unseen", "observed"), ("observed", [1], "observed"),
    ("unread", [], "unread"), ("unread", {"f": {"r": "many"}}, "unread"), ("unread", {"f": 3}, "unread"),
    ("anomalies", [], "anomalies"), ("anomalies", {"lost-write": "1"}, "anomalies"),
    ("anomalies", {"lost-write": 1.5}, "anomalies"), ("anomalies", {"lost-write": True}, "anomalies"),
    ("examples", [], "examples"), ("examples", {"x": 3}, "examples.x"),
    ("examples", {"x": [1]}, "examples.x"),
    ("counts", {"ok": None}, "counts"), ("counts", 3, "counts"),
    ("expectations", {}, "expectations"), ("expectations", [None], "expectations[0]"),
    ("expectations", [{"name": "x"}], "expectations[0].expected"),
    ("expectations", [{"name": "x", "expected": 0, "observed": 0, "ok": True}], "expectations[0].expected"),
    ("expectations", [{"name": "x", "expected": "<= 0", "observed": None, "ok": True}],
     "expectations[0].observed"),
    ("expectations", [{"name": "x", "expected": "<= 0", "observed": 0, "ok": 1}], "expectations[0].ok"),
    ("steps", {}, "steps"), ("steps", [{**_STEP, "index": "0"}], "steps[0].index"),
    ("steps", [{**_STEP, "index": 0.5}], "steps[0].index"), ("steps", [{**_STEP, "t": None}], "steps[0].t"),
    ("steps", [{k: v for k, v in _STEP.items() if k != "line"}], "steps[0].line"),
    ("steps", [{**_STEP, "line": "3"}], "steps[0].line"),
    ("steps", [{**_STEP, "status": 1}], "steps[0].status"),
    ("steps", [{**_STEP, "duration_s": "1s"}], "steps[0].duration_s"),
    ("recovery", [], "recovery"), ("recovery", {"converged_s": "1"}, "recovery.converged_s"),
    ("recovery", {"read": [1]}, "recovery.read"),
    ("recovery", {"lock_loops": {"b": "x"}}, "recovery.lock_loops"),
    ("recovery", {"observations": "x"}, "recovery.observations"),
    ("recovery", {"actions": [1]}, "recovery.actions"),
    ("injection", "C1", "injection"), ("injection", {"point": "C1"}, "injection.n"),
    ("injection", {**_INJECTION, "hit": "yes"}, "injection.hit"),
    ("injection", {**_INJECTION, "detail": [1]}, "injection.detail"),
    ("injection", {**_INJECTION, "kill": "kill9"}, "injection.kill"),
    ("injection", {**_INJECTION, "leader": 1}, "injection.leader"),
    ("injection", {**_INJECTION, "observed": 1}, "injection.observed"),
    ("truncations", {}, "truncations"), ("truncations", ["x"], "truncations"),
    ("elections", {}, "elections"), ("elections", [3], "elections"),
    ("replicas", [[1]], "replicas"), ("collect_problems", [{}], "collect_problems"),
    ("variant", 1, "variant"), ("seed", "7", "seed"), ("seed", 1.5, "seed"),
    ("broker_config", [], "broker_config"),
    ("broker_config", {"a": 1}, "broker_config"), ("injections", {}, "injections"),
    ("injections", [{"point": "C1"}], "injections[0].n"),
    ("story", "once", "story"), ("files", [], "files"), ("schema", "2", "schema"),
    ("latency", [1], "latency"), ("latency", "fast", "latency"),
    ("transactions", [1], "transactions"), ("transactions", "many", "transactions"),
]


@pytest.mark.parametrize(("key", "value", "names"), MALFORMED,
                         ids=[f"{k}={v!r}"[:40] for k, v, _ in MALFORMED])
def test_a_field_of_the_wrong_type_is_a_result_error_naming_it(key: str, value: Any, names: str) -> None:
    raw = {**_full().to_json(), key: value}
    with pytest.raises(ResultError) as err:
        RunResult.from_json(raw, source="runs/x/result.json")
    assert str(err.value).startswith(f"runs/x/result.json: {names}: "), str(err.value)


def test_every_field_has_a_malformed_case() -> None:
    assert {f.name for f in fields(RunResult)} <= {key for key, _, _ in MALFORMED}


def test_not_an_object() -> None:
    with pytest.raises(ResultError, match=r"^r\.json: not a JSON object$"):
        RunResult.from_json([1, 2], source="r.json")


@pytest.mark.parametrize(("content", "message"), [
    (None, "missing"), ("{not json", "not JSON"), ("[1]", "not a JSON object"), ("", "not JSON"),
])
def test_read_names_the_file(tmp_path: Path, content: str | None, message: str) -> None:
    if content is not None:
        (tmp_path / "result.json").write_text(content)
    with pytest.raises(ResultError, match=f"^{tmp_path}/result.json: {message}"):
        RunResult.read(tmp_path)


def test_read_of_a_directory_is_a_result_error(tmp_path: Path) -> None:
    (tmp_path / "result.json").mkdir()
    with pytest.raises(ResultError, match="unreadable"):
        RunResult.read(tmp_path)
