"""Bad input in a run directory (issue 18): every value the report cannot use is left out and
counted on the page, never a traceback; far-off times cannot stretch the charts."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harness.report import render_run
from harness.report.chart import MAX_POINTS, MAX_TITLE_LINES, Axis, line_chart
from harness.report.inputs import (
    BAD_BATCH,
    BAD_POSITION,
    BAD_STALL,
    BAD_TIME,
    NOT_EVENT,
    NOT_JSON,
    OUTSIDE,
    OUTSIDE_TIMELINE,
    TORN,
    Window,
)
from harness.report.load import TimelineEntry, load_run, scan_history

if TYPE_CHECKING:
    from conftest import RunFactory

SECONDS = 20


def _t0(make_run: RunFactory) -> float:
    return make_run.start.timestamp()


def _acks(t0: float) -> list[str]:
    """One ack a second for SECONDS seconds, on partition 0."""
    return [json.dumps({"type": "ok", "client": "p", "t": t0 + i, "m": i, "mid": f"p-{i}", "topic": "t",
                        "partition": 0, "offset": i}) for i in range(SECONDS)]


def _run(make_run: RunFactory, history: list[str], timeline: Sequence[str] = (), name: str = "bad",
         **result: Any) -> Path:
    """A run with ``result.json`` (overrides as for make_run) and these raw lines (plus newline)."""
    run_dir = make_run(name, history=False, **result)
    (run_dir / "history").mkdir()
    (run_dir / "history" / "p.jsonl").write_text("".join(f"{line}\n" for line in history), encoding="utf-8")
    if timeline:
        (run_dir / "timeline.jsonl").write_text("".join(f"{line}\n" for line in timeline), encoding="utf-8")
    return run_dir


def _html(run_dir: Path) -> str:
    return render_run(run_dir).read_text(encoding="utf-8")


def _skipped(html: str) -> dict[tuple[str, str], int]:
    """The page's table of what was left out: (file, reason) -> count."""
    box = re.search(r'<div class="problem warn" id="skipped">(.*?)</table>', html, re.S)
    if not box:
        return {}
    rows = re.findall(r'<tr><td class="mono">([^<]*)</td><td>([^<]*)</td><td class="num">(\d+)</td></tr>',
                      box.group(1))
    return {(where, why.replace("&#39;", "'")): int(n) for where, why, n in rows}


def _acks_total(html: str) -> int:
    return int(re.search(r'acks/s <span class="muted">\((\d+)\)</span>', html).group(1))


def _ok(t0: float, **fields: Any) -> dict[str, Any]:
    return {"type": "ok", "client": "p", "t": t0 + 3.5, "topic": "t", "partition": 0, "offset": 99, **fields}


# -- 1. bad values are skipped or coerced, counted, and the rest is shown ----------------------
BAD_LINES = {
    # the inputs
    "t Infinity": (lambda t0: json.dumps(_ok(t0, t=math.inf)), BAD_TIME),
    "t NaN": (lambda t0: json.dumps(_ok(t0, t=math.nan)), BAD_TIME),
    "type a list": (lambda t0: json.dumps(_ok(t0, type=["ok"])), NOT_EVENT),
    # more found on the way
    "t beyond a float": (lambda t0: json.dumps(_ok(t0, t=10 ** 400)), BAD_TIME),
    "t a string that is no number": (lambda t0: json.dumps(_ok(t0, t="soon")), BAD_TIME),
    "t a hexadecimal string": (lambda t0: json.dumps(_ok(t0, t="0x6B49D200")), BAD_TIME),
    "t a string of NaN": (lambda t0: json.dumps(_ok(t0, t="NaN")), BAD_TIME),
    "integer of 5000 digits": (lambda t0: '{"type":"ok","t":' + "9" * 5000 + "}", NOT_JSON),
    "nesting too deep": (lambda t0: "[" * 100_000, NOT_JSON),
    "binary junk": (lambda t0: "\x00\xff\ufffe{{\x07", NOT_JSON),
    "not an object": (lambda t0: "[1, 2, 3]", NOT_EVENT),
    "batch columns of two lengths": (lambda t0: json.dumps(
        {"type": "oks", "client": "p", "t": t0 + 1, "topic": "t", "mids": ["a", "b"], "partitions": [0]}),
        BAD_BATCH),
    "stall of Infinity seconds": (lambda t0: json.dumps(
        {"type": "stall", "client": "p", "t": t0 + 1, "seconds": math.inf, "partition": 0}), BAD_STALL),
}


@pytest.mark.parametrize("case", list(BAD_LINES))
def test_a_bad_history_line_is_left_out_and_counted(make_run: RunFactory, case: str) -> None:
    t0 = _t0(make_run)
    make_line, reason = BAD_LINES[case]
    acks = _acks(t0)
    html = _html(_run(make_run, acks[:10] + [make_line(t0)] + acks[10:]))
    assert _skipped(html) == {("history/p.jsonl", reason): 1}
    assert _acks_total(html) == SECONDS  # every good event is still counted


@pytest.mark.parametrize("t", ["{t}", " {t} ", "{t}d", "{t:e}"])
def test_a_time_in_a_string_is_read_as_the_checker_reads_it(make_run: RunFactory, t: str) -> None:
    # harness.check.lines: ``t`` is a number, or a string cast to a double; the report agrees
    t0 = _t0(make_run)
    html = _html(_run(make_run, [*_acks(t0), json.dumps(_ok(t0, t=t.format(t=t0 + 3.5)))]))
    assert _skipped(html) == {} and _acks_total(html) == SECONDS + 1


@pytest.mark.parametrize("value", [math.inf, "3", [0], {"p": 0}, 1e300])
def test_a_partition_that_is_not_an_integer_is_coerced_not_fatal(make_run: RunFactory, value: Any) -> None:
    t0 = _t0(make_run)
    html = _html(_run(make_run, [*_acks(t0), json.dumps(_ok(t0, partition=value))]))
    assert _acks_total(html) == SECONDS + 1  # counted, under partition -1 (or its integer)


def test_a_key_shared_poll_without_an_integer_offset_is_not_judged(make_run: RunFactory) -> None:
    t0 = _t0(make_run)

    def poll(i: int, offset: Any) -> str:
        return json.dumps({"type": "poll", "client": "c", "t": t0 + i, "phase": "run", "topic": "t",
                           "partition": 0, "offset": offset, "mid": f"m{i}", "key": "k",
                           "subscription": "s", "subscription_type": "Key_Shared"})

    bad = ["12x", [1], {"o": 1}, 1.5, math.inf, 10 ** 400]
    lines = [poll(0, 0), *(poll(i + 1, v) for i, v in enumerate(bad)), poll(9, 9)]
    html = _html(_run(make_run, lines))
    assert _skipped(html) == {("history/p.jsonl", BAD_POSITION): len(bad)}
    key_order = re.search(r'<section id="key-order">(.*?)</section>', html, re.S).group(1)
    assert '<td class="num">1</td><td class="num">2</td>' in key_order  # 1 key, 2 polls judged
    assert 'polls/s <span class="muted">(8)</span>' in html  # all polls still counted


def test_bad_timeline_events_are_left_out_and_counted(make_run: RunFactory) -> None:
    t0 = _t0(make_run)
    timeline = [
        json.dumps({"type": "fault", "client": "runner", "t": t0 + 2, "action": "kill9",
                    "node": ["kafka-1"]}),
        json.dumps({"type": "mark", "client": "runner", "t": math.inf, "label": "never"}),
        json.dumps({"type": ["mark"], "client": "runner", "t": t0 + 3, "label": "list"}),
        json.dumps({"type": "leader", "client": "runner", "t": t0 + 4, "topic": ["t"], "partition": math.nan,
                    "leader": ["kafka-2"], "isr": [[1], {"a": 2}], "epoch": {"e": 1}}),
        json.dumps({"type": "inject", "client": "runner", "t": t0 + 5, "point": ["C1"], "node": {"n": 1},
                    "status": "hit", "detail": [1, 2]}),
        '{"type": "mark", "t": 1',  # torn: no newline at the end of the file
    ]
    run_dir = _run(make_run, _acks(t0), timeline)
    (run_dir / "timeline.jsonl").write_text("\n".join(timeline), encoding="utf-8")
    html = _html(run_dir)
    assert _skipped(html) == {("timeline.jsonl", BAD_TIME): 1, ("timeline.jsonl", NOT_EVENT): 1,
                              ("timeline.jsonl", TORN): 1}
    table = re.search(r'<section id="timeline">(.*?)</section>', html, re.S).group(1)
    assert "kill9 [&#34;kafka-1&#34;]" in table  # a node given as a list is shown as JSON
    assert "leader [&#34;kafka-2&#34;]" in table and "[C1]" not in table


def test_a_node_given_as_a_list_in_result_json_renders(make_run: RunFactory) -> None:
    run_dir = make_run("nodes", history=False,
                       replicas=[{"node": ["kafka-1"], "topic": "t", "partition": 0, "log_end_offset": 5,
                                  "high_watermark": 3}],
                       truncations=[{"node": {"kafka": 1}, "topic": "t", "partition": 0, "offset": 3}])
    replicas = re.search(r'<section id="replicas">(.*?)</section>', _html(run_dir), re.S).group(1)
    assert "[&#34;kafka-1&#34;]" in replicas and "{&#34;kafka&#34;: 1}" in replicas


def test_a_string_duration_keeps_the_rest_of_result_json(make_run: RunFactory) -> None:
    run_dir = make_run("dur", history=False, duration_s="42", steps=[
        {"index": 0, "action": "produce", "label": "steps[0].produce", "line": 3, "t": 1.0, "status": "done"},
        {"index": "one", "action": "kill9", "label": "steps[1].kill9", "line": 4, "t": 2.0}])
    run = load_run(run_dir)
    assert run.verdict == "unknown" and run.problem == "result.json: duration_s: expected a number"
    assert run.dropped == ("result.json: duration_s: expected a number",
                           "result.json: steps[1].index: expected an integer")
    assert run.result.case == "kafka-zk-kill-leader" and len(run.result.steps) == 1
    assert run.result.anomalies == {"lost-write": 0, "duplicate": 2, "unseen": 0}
    html = _html(run_dir)
    problem = re.search(r'<div class="problem warn" id="problem">(.*?)</div>', html, re.S).group(1)
    assert "2 value(s) of it were left out" in problem and "steps[1].index: expected an integer" in problem
    assert "<h1>kafka-zk-kill-leader</h1>" in html and "steps[0].produce" in html
    assert 'data-kind="duplicate"' in html  # the anomaly table is kept


def test_a_start_time_utc_cannot_hold_renders(make_run: RunFactory) -> None:
    run_dir = make_run("overflow", history=False, started="0001-01-01T00:00:00+23:59",
                       finished="9999-12-31T23:59:59-23:59")
    run = load_run(run_dir)
    assert run.started is None and run.finished is None and run.problem is None
    assert "started: not a time" in (run.bad_times or "") and "finished: not a time" in (run.bad_times or "")
    assert 'id="bad-times"' in _html(run_dir)


# -- 2. far-off times: a bounded axis, counted, not charted ---------------------------------------
def _ticks(html: str, chart_id: str = "timeline-chart") -> list[str]:
    chart = re.search(rf'<figure class="chart" id="{chart_id}">(.*?)</figure>', html, re.S).group(1)
    return re.findall(r'<text class="xtick"[^>]*>([^<]*)</text>', chart)


@pytest.mark.parametrize("with_result", [True, False], ids=["window-from-result", "window-from-bulk"])
def test_one_far_off_time_does_not_stretch_the_chart(make_run: RunFactory, with_result: bool) -> None:
    t0 = _t0(make_run)
    far_mark = json.dumps({"type": "mark", "client": "runner", "t": 1e12, "label": "far mark"})
    near_mark = json.dumps({"type": "mark", "client": "runner", "t": t0 + 5, "label": "near mark"})
    run_dir = _run(make_run, [*_acks(t0), json.dumps(_ok(t0, t=1e15))], [near_mark, far_mark])
    if not with_result:
        (run_dir / "result.json").unlink()
    started = time.monotonic()
    html = _html(run_dir)
    assert time.monotonic() - started < 20
    assert _skipped(html) == {("history/p.jsonl", OUTSIDE): 1, ("timeline.jsonl", OUTSIDE_TIMELINE): 1}
    assert "The run's window, from " + ("result.json" if with_result else "the bulk") in html
    assert _ticks(html) == [f"{s}s" for s in range(0, SECONDS + 1, 2)]
    assert _acks_total(html) == SECONDS
    chart = re.search(r'<figure class="chart" id="timeline-chart">(.*?)</figure>', html, re.S).group(1)
    assert "near mark" in chart and "far mark" not in chart
    table = re.search(r'<section id="timeline">(.*?)</section>', html, re.S).group(1)
    assert re.search(r'<tr class="outside"[^>]*>.*?far mark', table, re.S)  # listed, not lost


def test_a_result_window_that_misses_the_events_gives_way_to_the_bulk(make_run: RunFactory) -> None:
    t0 = _t0(make_run)
    stamp = (make_run.start - timedelta(days=365)).isoformat()
    html = _html(_run(make_run, _acks(t0), started=stamp, finished=stamp))
    assert _skipped(html) == {} and _acks_total(html) == SECONDS


def test_history_outside_the_window_is_only_counted(make_run: RunFactory) -> None:
    t0 = _t0(make_run)
    run_dir = _run(make_run, [*_acks(t0), json.dumps(_ok(t0, t=t0 - 86400)), json.dumps(_ok(t0, t=1e15))])
    rates = scan_history(run_dir)  # no window: everything counts
    assert sum(rates.acks.values()) == SECONDS + 2
    windowed = scan_history(run_dir, window=Window(t0 - 10, t0 + 100, "test"))
    assert sum(windowed.acks.values()) == SECONDS and windowed.outside == 2
    assert windowed.skipped.rows() == [("history/p.jsonl", OUTSIDE, 2)]


@pytest.mark.parametrize("last", [1e6, 1e12, 1e15, 1e17])
def test_the_time_axis_has_bounded_buckets_and_ticks(last: float) -> None:
    started = time.monotonic()
    axis = Axis.covering(0.0, last)
    assert axis.buckets <= MAX_POINTS and axis.seconds >= last
    for ticks in (10, 4):
        chart = line_chart("c", "c", axis, [("acks/s", "acks", {0: 1, int(last): 1})],  # type: ignore[list-item]
                           entries=[TimelineEntry(last, "mark", "mark", "end", "")], x_ticks=ticks)
        assert 2 <= len(chart.x_ticks) <= ticks + 1
        assert len(chart.series[0].points.split()) == axis.buckets
    assert time.monotonic() - started < 5


def test_markers_merged_into_one_bucket_have_a_bounded_title() -> None:
    axis = Axis.covering(0.0, 10.0)
    entries = [TimelineEntry(1.0, "mark", "mark", f"m{i}", "") for i in range(500)]
    chart = line_chart("c", "c", axis, [], entries=entries)
    (marker,) = chart.markers
    assert marker.label == "m0 +499"
    assert marker.title.count("\n") == MAX_TITLE_LINES
    assert marker.title.endswith("+480 more in the timeline table")
