"""Latency and availability bounds in ``expect``: read from the case, judged like anomalies,
violations named in the summary."""

from __future__ import annotations

import pytest

from harness.case import load_case_text
from harness.errors import CaseError
from harness.report.text import _latency_line
from harness.run.judge import judge

CASE = """\
system: kafka
cluster: kafka-zk
steps: [{{produce: {{count: 10}}}}]
expect:
{expect}
"""
LATENCY = {"send": {"n": 10, "p50": 3.0, "p99": 120.0}, "e2e": {"n": 10, "p50": 9.0, "p99": 900.0},
           "max_unavailable_s": 12.5}


def _case(expect: str):
    return load_case_text(CASE.format(expect=expect), "inline.yaml")


def test_bounds_are_read() -> None:
    e = _case("  max_unavailable: 20s\n  p99_latency_ms: 500\n  p99_e2e_latency_ms: 2000").expect
    assert (e.max_unavailable_s, e.p99_latency_ms, e.p99_e2e_latency_ms) == (20.0, 500.0, 2000.0)
    assert _case("  lost-write: 0").expect.max_unavailable_s is None


@pytest.mark.parametrize("expect, message", [
    ("  max_unavailable: soon", "inline.yaml:5: expect.max_unavailable: invalid duration string 'soon'"),
    ("  p99_latency_ms: -1", "inline.yaml:5: expect.p99_latency_ms: must be positive"),
    ("  p99_latncy_ms: 5", "p99_latncy_ms"),
])
def test_bad_bounds_name_the_field(expect: str, message: str) -> None:
    with pytest.raises(CaseError, match=message.replace("(", r"\(").replace(".", r"\.")):
        _case(expect)


def test_bounds_are_judged() -> None:
    case = _case("  max_unavailable: 20s\n  p99_latency_ms: 100")
    rows, verdict = judge(case, {"anomalies": {}, "counts": {"ok": 10}, "latency": LATENCY}, None)
    by_name = {r.name: r for r in rows}
    assert by_name["max unavailable (s)"].ok and by_name["max unavailable (s)"].observed == 12.5
    assert not by_name["p99 send latency (ms)"].ok and by_name["p99 send latency (ms)"].expected == "<= 100"
    assert verdict == "fail"
    # nothing measured: a bound cannot hold
    rows, verdict = judge(case, {"anomalies": {}, "counts": {"ok": 10}, "latency": None}, None)
    assert verdict == "fail" and {r.observed for r in rows if "latency" in r.name or "unavail" in r.name} == {
        "not measured"}


def test_the_summary_line() -> None:
    assert _latency_line(LATENCY) == ("latency: send p50 3.0 / p99 120.0 ms; end-to-end p50 9.0 / "
                                      "p99 900.0 ms; longest unavailability after a fault 12.5 s")
    assert _latency_line(None) is None and _latency_line({"send": "x"}) is None
