"""The page's size is bounded whatever result.json holds (issue 56): huge latencies are clamped
to the chart's scale and the page is written, tables show their first rows and say how many
more there are, and one long value is cut."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harness.report import render_run
from harness.report.bounds import MAX_ROWS, MAX_TEXT

if TYPE_CHECKING:
    from conftest import RunFactory

STATS = {"n": 10, "p50": 2.0, "p90": 3.0, "p99": 4.0, "p999": 5.0, "max": 6.0}


def _latency(windows: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    return {"window_s": 1, "start": 1.8e9, "send": STATS, "e2e": STATS, "windows": windows, **more}


def _chart(html: str) -> str:
    chart = html[html.index('id="latency-chart"'):]
    return chart[:chart.index("</figure>")]


def _render(run_dir: Path) -> str:
    started = time.monotonic()
    html = render_run(run_dir).read_text()
    assert time.monotonic() - started < 30
    return html


@pytest.mark.parametrize("huge", [1e308, 1.7e308])
def test_a_latency_beyond_any_scale_is_drawn_at_the_top_and_the_page_is_written(
        make_run: RunFactory, huge: float) -> None:
    windows = [{"t": 0, "send": STATS}, {"t": 1, "send": {**STATS, "p99": huge}}, {"t": 2, "send": STATS}]
    html = _render(make_run(latency=_latency(windows)))
    chart = _chart(html)
    ticks = re.findall(r'<text class="ytick"[^>]*>([^<]*)</text>', chart)
    assert ticks[-1] == "100000 s" and len(ticks) <= 11  # a decade a tick, up to the ceiling
    assert "1 value over 100000 s drawn at the top (out of range)" in chart
    assert f"<td class=\"num\">{huge:.3g}</td>" in html  # the table shows it, in exponent form


def test_a_latency_no_float_holds_is_left_out_and_the_page_is_written(make_run: RunFactory) -> None:
    windows = [{"t": 0, "send": STATS}, {"t": 1, "send": {**STATS, "p99": 10 ** 400}}]
    chart = _chart(_render(make_run(latency=_latency(windows))))
    assert re.findall(r'<text class="ytick"[^>]*>([^<]*)</text>', chart)[-1] == "10 ms"


def test_200000_windows_make_a_page_of_bounded_size(make_run: RunFactory) -> None:
    windows = [{"t": i, "send": STATS, "e2e": STATS} for i in range(200_000)]
    html = _render(make_run(latency=_latency(windows)))
    assert len(html) < 1_000_000  # 43 MB before
    assert f"{200_000 - MAX_ROWS} more windows not listed; result.json has them all." in html
    assert "(200000)" in html  # the summary still gives the count
    points = re.findall(r'points="([^"]*)"', _chart(html))
    assert points and all(len(p.split()) <= 1100 for p in points)  # a point per pixel column at most


def test_windows_far_in_time_are_left_off_the_chart(make_run: RunFactory) -> None:
    windows = [{"t": i, "send": STATS} for i in range(3)] + [{"t": 1e300, "send": STATS}]
    chart = _chart(_render(make_run(latency=_latency(windows))))
    assert "1 window(s) not from the run&#39;s first days left off" in chart
    assert re.findall(r'<text class="xtick"[^>]*>([^<]*)</text>', chart)[:2] == ["0s", "1s"]


def test_every_table_from_result_json_shows_its_first_rows_and_counts_the_rest(make_run: RunFactory) -> None:
    n = MAX_ROWS + 55
    step = {"index": 0, "action": "produce", "label": "steps[0].produce", "line": 3, "t": 1.0}
    run_dir = make_run(
        steps=[{**step, "index": i} for i in range(n)],
        replicas=[{"node": f"kafka-{i}", "topic": "t", "partition": 0} for i in range(n)],
        truncations=[{"node": "kafka-1", "topic": "t", "partition": i, "offset": 3} for i in range(n)],
        story=[f"line {i}" for i in range(n)],
        counts={f"count-{i}": i for i in range(n)},
        transactions={"total": n, "shown": [{"tx": f"t{i}", "state": "committed"} for i in range(n)]},
        latency=_latency([], partitions=[{"topic": "t", "partition": i, "send": STATS} for i in range(n)],
                         availability=[{"t": i, "action": "kill9", "partitions": []} for i in range(n)]))
    html = _render(run_dir)
    for what in ("steps", "replica rows", "truncations", "lines", "partitions", "faults"):
        assert f"55 more {what} not listed; result.json has them all." in html, what
    assert html.count('<li>line ') == MAX_ROWS
    assert "+55 more in result.json" in html  # the counts
    assert f"{MAX_ROWS} of {n} shown" in html  # the transactions


def test_one_long_value_is_cut(make_run: RunFactory) -> None:
    error = "x" * 1_000_000
    html = _render(make_run(error=error, story=[error]))
    assert len(html) < 200_000
    assert html.count(f"\u2026 ({1_000_000 - MAX_TEXT} more characters in the run&#39;s files)") == 2
