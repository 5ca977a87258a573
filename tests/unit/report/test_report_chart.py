"""Per-second rates, leader changes and chart geometry."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING

import pytest

from harness.report.chart import MAX_POINTS, Axis, clock, line_chart
from harness.report.load import TimelineEntry, safe_href, scan_history, scan_timeline

if TYPE_CHECKING:
    from conftest import RunFactory


def test_rates_bucket_per_second(make_run: RunFactory) -> None:
    rates = scan_history(make_run())
    t0 = int(make_run.start.timestamp())
    assert sum(rates.acks.values()) == 2280
    assert rates.acks[t0 + 5] == 3 * 40 and rates.acks[t0 + 9] == 2 * 40  # t/0 down for 8..10 s
    assert sorted(rates.by_partition) == [("t", 0), ("t", 1), ("t", 2)]
    assert rates.by_partition[("t", 0)][t0 + 9] == 0
    assert sum(rates.errors.values()) == 120
    assert sum(rates.polls.values()) == 2280  # run phase only
    assert rates.recovery is not None and rates.recovery[0] >= t0 + 21
    assert rates.resets == {t0 + 11: Counter(truncation=1)}


def test_leader_snapshots_become_changes(make_run: RunFactory) -> None:
    leaders = [e for e in scan_timeline(make_run()) if e.kind == "leader"]
    assert [(e.label, e.marker) for e in leaders] == [
        ("t/0 leader kafka-1", False), ("t/1 leader kafka-1", False), ("t/2 leader kafka-1", False),
        ("t/0 leader kafka-1\u2192kafka-2", True), ("t/0 ISR [2,3]\u2192[2,3,1]", True),
    ]
    assert leaders[3].partition == ("t", 0) and leaders[3].detail == "isr=[2,3] epoch=1"


def test_timeline_skips_events_without_time(make_run: RunFactory) -> None:
    run_dir = make_run()
    with (run_dir / "timeline.jsonl").open("a") as fh:
        fh.write(json.dumps({"type": "fault", "action": "pause"}) + "\n")
    assert not [e for e in scan_timeline(run_dir) if e.label.startswith("pause")]


def test_long_runs_are_averaged_into_wider_buckets() -> None:
    axis = Axis.covering(1000.0, 1000.0 + 3 * 3600)
    assert axis.step == 10 and axis.buckets <= MAX_POINTS
    counts = Counter({1000 + s: 7 for s in range(0, 3 * 3600)})
    chart = line_chart("c", "c", axis, [("acks/s", "acks", counts)])
    points = chart.series[0].points.split()
    assert len(points) == axis.buckets
    assert chart.note == "per second, 10 s averages"
    assert axis.rates(counts)[5] == pytest.approx(7.0)
    assert [label for _, label in chart.x_ticks][:3] == ["0:00:00", "0:30:00", "1:00:00"]


def test_crowded_marker_labels_take_separate_lanes() -> None:
    axis = Axis.covering(0.0, 100.0)
    entries = [TimelineEntry(10.0 + i, "fault", "fault", f"kill9 kafka-{i}", "") for i in range(3)]
    entries.append(TimelineEntry(99.5, "mark", "mark", "a long label at the right edge", ""))
    chart = line_chart("c", "c", axis, [], entries=entries)
    assert [m.lane for m in chart.markers] == [0, 1, 2, 0]
    assert chart.markers[-1].anchor == "end"
    assert chart.top > 3 * 14


def test_same_second_markers_are_merged() -> None:
    axis = Axis.covering(0.0, 10.0)
    entries = [TimelineEntry(5.1, "leader", "leader", f"t/{p} leader b\u2192c", "") for p in range(4)]
    (marker,) = line_chart("c", "c", axis, [], entries=entries).markers
    assert marker.label == "t/0 leader b\u2192c +3" and marker.title.count("\n") == 3


@pytest.mark.parametrize(("seconds", "span", "text"), [(42, 60, "42s"), (125, 600, "2:05"),
                                                       (0, 7200, "0:00:00"), (3725, 7200, "1:02:05")])
def test_clock(seconds: int, span: int, text: str) -> None:
    assert clock(seconds, span) == text


@pytest.mark.parametrize(("path", "href"), [
    ("logs/kafka-1.log", "logs/kafka-1.log"), ("logs/a b#1.log", "logs/a%20b%231.log"),
    ("javascript:alert(1)", None), ("/etc/passwd", None), ("../x", None), ("C:\\x", None), ("", None),
    (3, None),
])
def test_safe_href(path: object, href: str | None) -> None:
    assert safe_href(path) == href
