"""The report reads result.json only through RunResult, and shows the judge's decisions."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from harness.report import render_index, render_run
from harness.report.load import load_run

if TYPE_CHECKING:
    from conftest import RunFactory


def _section(html: str, section_id: str) -> str:
    match = re.search(rf'<section id="{section_id}">(.*?)</section>', html, re.S)
    assert match, section_id
    return match.group(1)


def _rows(html: str) -> dict[str, str]:
    """The index's rows by run id."""
    return dict(re.findall(r'<tr class="run" data-run="([^"]+)">(.*?)</tr>', html, re.S))


def test_a_malformed_result_renders_its_problem_and_the_index_lists_the_others(make_run: RunFactory) -> None:
    good = make_run("good", history=False, verdict="pass", expectations=[])
    bad = make_run("bad", at=make_run.start + timedelta(hours=1), steps=[{"index": "zero"}])
    html = render_run(bad).read_text()
    problem = _section(html, "summary")
    assert "verdict-unknown" in problem and "Incomplete run" in problem
    assert "result.json: steps[0].index: expected an integer" in problem
    assert str(bad) not in problem  # the message names the file relative to the run
    assert "acks/s" in html  # the histories are still charted
    index = render_index(good.parent).read_text()
    rows = _rows(index)
    assert list(rows) == ["bad", "good"]
    assert "verdict-unknown" in rows["bad"] and "steps[0].index: expected an integer" in rows["bad"]
    assert "verdict-pass" in rows["good"] and "kafka-zk-kill-leader" in rows["good"]


def test_load_run_keeps_the_problem_not_a_traceback(make_run: RunFactory) -> None:
    run = load_run(make_run("bad", history=False, anomalies={"lost-write": "many"}))
    assert (run.verdict, run.result.run_id, run.problem) == (
        "unknown", "bad", "result.json: anomalies: expected an object of integers")
    ok = load_run(make_run("ok", history=False))
    assert ok.problem is None and ok.verdict == "fail" and ok.started == make_run.start


def test_a_schema_1_result_renders(make_run: RunFactory) -> None:
    run_dir = make_run("round-1", schema=..., recovery=..., collect_problems=..., topic=...)
    assert "schema" not in json.loads((run_dir / "result.json").read_text())
    assert load_run(run_dir).result.schema == 1
    html = render_run(run_dir).read_text()
    assert '<span class="verdict verdict-fail">FAIL</span>' in html and 'id="problem"' not in html


def test_anomaly_shading_follows_the_expectations(make_run: RunFactory) -> None:
    """A count the case allows, or only observes, is not shown as a failure."""
    run_dir = make_run(anomalies={"lost-write": 0, "duplicate": 2, "unseen": 4}, verdict="pass",
                       expectations=[{"name": "lost-write", "expected": "<= 0", "observed": 0, "ok": True},
                                     {"name": "duplicate", "expected": "<= 5", "observed": 2, "ok": True}])
    html = render_run(run_dir).read_text()
    anomalies = _section(html, "anomalies")
    assert "bad" not in anomalies and "notok" not in anomalies
    assert "expected &lt;= 5" in anomalies and "observed, not judged" in anomalies
    row = _rows(render_index(run_dir.parent).read_text())[run_dir.name]
    assert "duplicate 2" in row and "unseen 4" in row and "notok" not in row


def test_index_marks_only_unmet_anomalies(make_run: RunFactory) -> None:
    run_dir = make_run(anomalies={"lost-write": 0, "duplicate": 2, "unseen": 4})
    row = _rows(render_index(run_dir.parent).read_text())[run_dir.name]
    assert '<span class="example mono notok">duplicate 2</span>' in row
    assert '<span class="example mono" title="observed, not judged">unseen 4</span>' in row


def test_injection_outcome_is_coloured_by_its_expectation_only(make_run: RunFactory) -> None:
    unjudged = _section(render_run(make_run("a", history=False)).read_text(), "injection")
    assert "<dd><span>hit</span></dd>" in unjudged
    expected_miss = {"name": "injection hit", "expected": False, "observed": False, "ok": True}
    judged = make_run("b", history=False, injection={"point": "C2", "n": 1, "hit": False},
                      expectations=[expected_miss])
    assert '<span class="ok">miss</span>' in _section(render_run(judged).read_text(), "injection")


def test_expected_verdict_is_shown(make_run: RunFactory) -> None:
    html = render_run(make_run("a", history=False, expected_verdict="fail", as_expected=True)).read_text()
    assert re.search(r'id="expected-verdict">fail <span class="ok">\(as expected\)', html)
    html = render_run(make_run("b", history=False, verdict="error")).read_text()
    assert 'id="expected-verdict">pass</dd>' in html


def test_key_shared_rows_are_observations(make_run: RunFactory) -> None:
    run_dir = make_run(history=False)
    t0 = make_run.start.timestamp()

    def poll(t: float, mid: str, entry: int) -> dict[str, object]:
        return {"type": "poll", "client": "c", "t": t0 + t, "phase": "run", "mid": mid, "topic": "x",
                "partition": 0, "ledger": 1, "entry": entry, "batch": -1, "key": "k",
                "subscription": "ks", "subscription_type": "Key_Shared"}

    make_run.write_jsonl(run_dir / "history" / "c.jsonl", [poll(1, "m2", 2), poll(2, "m1", 1)])
    key_order = _section(render_run(run_dir).read_text(), "key-order")
    assert "m1 (key k, c) after m2" in key_order and "bad" not in key_order


LATENCY = {
    "window_s": 10, "start": 1.0,
    "send": {"n": 100, "p50": 2.5, "p90": 4.0, "p99": 31.0, "p999": 40.0, "max": 41.0},
    "e2e": {"n": 100, "p50": 7.0, "p90": 9.0, "p99": 50.0, "p999": 60.0, "max": 61.0},
    "phases": {"before": {"send": {"n": 50, "p50": 2.0}, "e2e": None},
               "during": {"send": {"n": 30, "p50": 9.5, "p99": 3001.0}, "e2e": {"n": 30}}},
    "during": [12.0, None],
    "partitions": [{"topic": "chaos-t", "partition": 3, "send": {"n": 9, "p99": 77.5}}, "junk"],
    "windows": [{"t": 0, "send": {"n": 60, "p99": 5.0}}, {"t": 10, "send": {"n": 40, "p99": 3001.0}}],
    "availability": [{"t": 12.0, "action": "kill9", "node": "kafka-2", "sending": True,
                      "max_unavailable_s": 8.42,
                      "partitions": [{"topic": "chaos-t", "partition": 0, "unavailable_s": 8.42,
                                      "longest_gap_s": 8.42},
                                     {"topic": "chaos-t", "partition": 1, "unavailable_s": None,
                                      "longest_gap_s": None}]}],
    "max_unavailable_s": 8.42,
}


def test_latency_and_availability_render(make_run: RunFactory) -> None:
    run = make_run(latency=LATENCY)
    html = render_run(run).read_text()
    assert 'id="latency"' in html and 'id="availability"' in html
    assert "kill9 kafka-2" in html and "chaos-t-0" in html and "8.42" in html and "3001.0" in html
    assert "longest: 8.42 s" in html and "12.0 s to the end" in html
    assert "chaos-t-3" in html and "77.5" in html
    # the chart: one line per percentile measured in the windows (here send p99 only),
    # a log scale over whole decades (5 ms .. 3001 ms), the phase during shaded
    chart = html[html.index('id="latency-chart"'):]
    chart = chart[:chart.index("</figure>")]
    assert chart.count("<polyline") == 1 and "send p99" in chart and "send p50" not in chart
    assert [t for t in ("1 ms", "10 ms", "100 ms", "1 s", "10 s") if f">{t}<" in chart] == [
        "1 ms", "10 ms", "100 ms", "1 s", "10 s"]
    assert "faults in force" in chart
    assert "Publish delay" not in html  # no paced producer


def test_publish_delay_renders_when_measured(make_run: RunFactory) -> None:
    delay = {"n": 40, "p50": 0.2, "p90": 0.5, "p99": 2150.0, "p999": 2400.0, "max": 2466.0}
    windows = [{**w, "delay": delay} for w in LATENCY["windows"]]  # type: ignore[attr-defined]
    html = render_run(make_run(latency={**LATENCY, "delay": delay, "windows": windows})).read_text()
    assert "Publish delay (ms)" in html and "2150.0" in html and "publish delay p99" in html


def test_one_window_draws_no_latency_chart(make_run: RunFactory) -> None:
    html = render_run(make_run(latency={**LATENCY, "windows": LATENCY["windows"][:1]})).read_text()  # type: ignore[index]
    assert 'id="latency"' in html and 'id="latency-chart"' not in html


@pytest.mark.parametrize("bad", ["text", 7, {"send": [1, 2]},
                                 {"phases": "x", "windows": [None, {"t": "a"}],
                                  "availability": [None, {"partitions": "x"}]}])
def test_malformed_latency_still_renders(make_run: RunFactory, bad: object) -> None:
    html = render_run(make_run(latency=bad)).read_text()
    assert "Traceback" not in html


TRANSACTIONS = {"total": 3, "shown": [
    {"tx": "txns.t2", "client": "txns", "state": "seen-committed", "ids": 6, "recovered": 5,
     "read_committed": 1, "read_uncommitted": 0, "flagged": True},
    {"tx": "txns.t1", "client": "txns", "state": "committed", "ids": 6, "recovered": 6,
     "read_committed": 6, "read_uncommitted": 6, "flagged": False}]}


def test_transactions_render(make_run: RunFactory) -> None:
    run = make_run(transactions=TRANSACTIONS,
                   counts={"ok": 12, "txn-committed": 1, "txn-unknown": 1, "txn-seen-committed": 1})
    html = render_run(run).read_text()
    assert 'id="transaction-list"' in html and "txns.t2" in html and "seen-committed" in html
    assert '<tr class="bad"><td class="mono">txns.t2' in html  # the torn one is marked
    assert "2 of 3 shown" in html and "txn-seen-committed</span> 1" in html


@pytest.mark.parametrize("bad", ["text", 7, {"shown": "x"}, {"shown": [None, {"tx": [1], "ids": "many"}],
                                                            "total": "all"}])
def test_malformed_transactions_still_render(make_run: RunFactory, bad: object) -> None:
    html = render_run(make_run(transactions=bad)).read_text()
    assert "Traceback" not in html
