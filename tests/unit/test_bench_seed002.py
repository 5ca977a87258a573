"""bench/bench_seed002.py: reading Kafka's tools (lines as ProducerPerformance,
ConsumerPerformance and EndToEndLatency of Kafka 3.9.2 printed them on this machine),
the percentile rule, and the HTML page."""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_seed002 as bench  # noqa: E402

PRODUCER = """log4j:WARN See http://logging.apache.org/log4j/1.2/faq.html#noconfig for more info.
12001 records sent, 2400.2 records/sec (0.23 MB/sec), 900.1 ms avg latency, 1400.0 ms max latency.
30000 records sent, 19518.542615 records/sec (1.86 MB/sec), 318.29 ms avg latency, 689.00 ms max latency, \
307 ms 50th, 649 ms 95th, 681 ms 99th, 689 ms 99.9th.
"""

CONSUMER_DONE = """log4j:WARN Please initialize the log4j system properly.
start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, \
fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
2026-11-25 04:48:47:510, 2026-11-25 04:48:50:618, 0.9762, 0.3141, 10236, 3293.4363, 2649, 459, \
2.1268, 22300.6536
"""

CONSUMER_GAVE_UP = """start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, \
rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
WARNING: Exiting before consuming the expected number of messages: timeout (5000 ms) exceeded. You can use \
the --timeout option to increase the timeout.
2026-11-25 04:48:47:717, 2026-11-25 04:48:57:638, 0.9434, 0.0951, 9892, 997.0769, 2468, 7453, \
0.1266, 1327.2508
"""

END_TO_END = """0\t107.190183
Avg latency: 35.6011 ms
Percentiles: 50th = 27, 99th = 172, 99.9th = 172
"""


def test_producer_performance_summary_is_the_last_line_with_percentiles() -> None:
    f = bench.parse_producer_performance(PRODUCER)
    assert (f.records, f.rate, f.mbps) == (30000, 19518.542615, 1.86)
    assert (f.p50, f.p99, f.p999) == (307.0, 681.0, 689.0)
    with pytest.raises(ValueError, match="no ProducerPerformance summary"):
        bench.parse_producer_performance(PRODUCER.splitlines()[1])


def test_consumer_performance_line_and_the_timeout_taken_off() -> None:
    done = bench.parse_consumer_performance(CONSUMER_DONE, 5000)
    assert (done.records, done.rate, done.mbps) == (10236, 3293.4363, 0.3141)
    assert done.span is not None and done.span[1] - done.span[0] == pytest.approx(3.108)
    gave_up = bench.parse_consumer_performance(CONSUMER_GAVE_UP, 5000)
    assert gave_up.records == 9892
    assert gave_up.span is not None and gave_up.span[1] - gave_up.span[0] == pytest.approx(9.921 - 5.0)
    with pytest.raises(ValueError, match="no ConsumerPerformance result"):
        bench.parse_consumer_performance("start.time, end.time\nWARNING: nothing\n")


def test_end_to_end_percentiles() -> None:
    f = bench.parse_end_to_end(END_TO_END, 100)
    assert (f.records, f.p50, f.p99, f.p999) == (100, 27.0, 172.0, 172.0)
    with pytest.raises(ValueError):
        bench.parse_end_to_end("Avg latency: 3 ms", 100)


def test_percentile_is_the_value_at_rank_ceil_p_n() -> None:
    values = [float(v) for v in range(100, 0, -1)]  # 1..100, unsorted
    assert [bench.percentile(values, p) for p in (0.5, 0.99, 0.999)] == [50.0, 99.0, 100.0]
    assert bench.percentile([7.0], 0.5) == 7.0


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_page_has_the_table_and_the_size_charts_escaped() -> None:
    f = bench.Figures
    rows = [bench.Row("p1-rf3", "1 producer(s), RF 3, acks=1 <b>", f(1000, 150_000.0, 14.3),
                      f(1000, 160_000.0, 15.3)),
            bench.Row("e2e", "end-to-end", f(10, p50=2.5, p99=4.0, p999=9.0),
                      f(10, p50=2.0, p99=3.0, p999=14.0))]
    sweep = [bench.Row(f"size {s}", f"{s} B", f(100, 1e6 / s, 10.0 + s / 1e4),
                       f(100, 2e6 / s, 20.0 + s / 1e4), s) for s in bench.SIZES]
    html = bench.page(rows, sweep, "kafka-zk <3.9.2> & co")
    parsed = _Tags()
    parsed.feed(html)
    assert parsed.tags.count("svg") == 2 and parsed.tags.count("polyline") == 4
    assert "&lt;b&gt;" in html and "<b>" not in html and "&lt;3.9.2&gt; &amp; co" in html
    text = "".join(parsed.text)
    assert "records/s by message size" in text and "MB/s by message size" in text
    assert "0.94" in text  # p1-rf3's ratio, 150000 / 160000
    # no sweep: no chart
    assert "<svg" not in bench.page(rows, [], "x")


def test_table_prints_the_ratio_and_the_p50_difference() -> None:
    f = bench.Figures
    out = bench.table([bench.Row("e2e", "", f(10, p50=2.5, p99=4.0), f(10, p50=2.0, p99=3.0)),
                       bench.Row("p1-rf1", "", f(10, 90.0, 1.0), f(10, 100.0, 1.0))])
    lines = out.splitlines()
    assert lines[1].split()[-1] == "0.5" and "2.5/4.0/-" in lines[1]
    assert "0.90" in lines[2].split()


def test_repeated_rows_report_medians_and_the_spread() -> None:
    runs = [bench.Figures(1000, 300.0, 3.0, 2.0, 9.0, None), bench.Figures(1000, 100.0, 1.0, 4.0, 7.0, None),
            bench.Figures(1000, 200.0, 2.0, None, 8.0, None, note="3 at once")]
    got = bench.median_of(runs)
    assert (got.records, got.rate, got.mbps, got.p50, got.p99, got.p999) == (1000, 200.0, 2.0, 3.0, 8.0, None)
    assert got.note == "median of 3 runs, rec/s 100 to 300; 3 at once"
    assert bench.median_of(runs[:1]) is runs[0]
    unmeasured = bench.median_of([bench.Figures(note="did not end"), bench.Figures(note="did not end")])
    assert unmeasured.rate is None and unmeasured.note == "no run of 2 measured; did not end"
    # an end-to-end row measures latency, not a rate: the median of the runs that measured it
    e2e = bench.median_of([bench.Figures(10, p50=1.0, p99=8.0), bench.Figures(10, p50=3.0, p99=9.0),
                           bench.Figures(note="only 3 of 10 read in time")])
    assert (e2e.p50, e2e.p99) == (2.0, 8.5) and e2e.note == "median of 2 runs; only 3 of 10 read in time"


def test_a_fault_row_splits_each_side_into_phases(tmp_path: Path) -> None:
    import json

    # the harness: one send a second for 9 s, each acknowledged 10 ms later, but the sends
    # of seconds 3..5 (the fault) acknowledged at 6.5
    t0 = 1_700_000_000.0
    lines = []
    for i in range(9):
        lines.append({"type": "invoke", "client": "p", "t": t0 + i, "mid": f"p-{i}"})
        acked = t0 + (6.5 if 3 <= i < 6 else i + 0.01)
        lines.append({"type": "ok", "client": "p", "t": acked, "mid": f"p-{i}"})
    path = tmp_path / "h.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    got = bench.harness_phases(path, t0 + 3, t0 + 6)
    assert got["before"].rate == 1.0 and round(got["before"].p99 or 0) == 10
    assert got["during"].rate == 0.0 and round(got["during"].max or 0) == 3500
    assert round(got["after"].rate or 0, 2) == round(6 / (t0 + 8.01 - (t0 + 6)), 2)
    # the tool: 5-s lines with Docker's stamps, each in the phase of its middle
    logs = "\n".join([
        "2023-11-14T22:13:25.5Z 25000 records sent, 5000.0 records/sec (0.48 MB/sec), 3.0 ms avg latency, "
        "40.0 ms max latency.",
        "2023-11-14T22:13:30.500000001Z 1000 records sent, 200.0 records/sec (0.02 MB/sec), "
        "900.0 ms avg latency, 4100.0 ms max latency.",
        "2023-11-14T22:13:35+00:00 25000 records sent, 5000.0 records/sec (0.48 MB/sec), 2.0 ms avg latency, "
        "30.0 ms max latency.",
        "not a 5-s line",
        "25000 records sent, 5000.0 records/sec (0.48 MB/sec), 2.0 ms avg latency, 3.0 ms max latency."])
    kill = bench.docker_time("2023-11-14T22:13:25Z")
    assert kill is not None and bench.docker_time("2023-11-14T22:13:25.25Z") == kill + 0.25
    phases = bench.tool_phases(logs, kill, kill + 5)
    assert (phases["before"].rate, phases["during"].rate, phases["after"].rate) == (5000.0, 200.0, 5000.0)
    assert phases["during"].max == 4100.0 and phases["during"].avg == 900.0
    assert "during" in bench.fault_table([("tool", phases)])


def test_end_to_end_round_trips_split_into_phases_by_send_time() -> None:
    t0 = 1_700_000_000.0
    # one round trip every 0.5 s for 6 s: 2 ms, except sent during the fault (2 s to 4 s):
    # 1500 ms, and one not read at all (None: counted as the loop's 30 s)
    trips: list[tuple[float, float | None]] = [(t0 + i / 2, 1500.0 if 4 <= i < 8 else 2.0) for i in range(12)]
    trips[5] = (t0 + 2.5, None)
    got = bench.trip_phases(trips, t0 + 2, t0 + 4)
    assert got["before"].rate == 2.0 and got["before"].p99 == 2.0
    assert got["during"].rate == 1.5 and got["during"].p50 == 1500.0 and got["during"].max == 30_000.0
    assert got["after"].p50 == 2.0 and round(got["after"].rate or 0, 2) == round(4 / 1.5, 2)
    assert all(p.rate is None for p in bench.trip_phases([], t0, t0 + 1).values())


def test_an_open_loop_keeps_acknowledged_sends_with_their_latency(tmp_path: Path) -> None:
    import json

    t0 = 1_700_000_000.0
    lines = [{"type": "invoke", "client": "p", "t": t0 + i, "mid": f"p-{i}"} for i in range(4)]
    lines += [{"type": "ok", "client": "p", "t": t0 + i + 0.01, "mid": f"p-{i}"} for i in (0, 1, 3)]
    path = tmp_path / "h.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    # p-2 never acknowledged: not waited for; p-3 acknowledged and never read: None
    got = bench.acked_trips(path, {b"p-0": t0 + 0.005, b"p-1": t0 + 3.5})
    assert [t - t0 for t, _ in got] == [0.0, 1.0, 3.0]
    assert [None if ms is None else round(ms, 3) for _, ms in got] == [5.0, 2500.0, None]
    # by phase: the unread one counts as the loops' 30 s bound
    phases = bench.trip_phases(got, t0 + 0.5, t0 + 2.0)
    assert phases["during"].p50 == 2500.0 and phases["after"].max == 30_000.0


# ConsumerPerformance --show-detailed-stats --reporting-interval 1000 (Kafka 3.9.2, this
# machine), with Docker's stamps as the bench reads them
CONSUMER_DETAIL = """2026-11-25T23:27:39.000000000Z time, threadId, data.consumed.in.MB, MB.sec, \
data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
2026-11-25T23:27:39.720000000Z 2026-11-25 23:27:39:719, 0, 11.3621, 11.3281, 119140, 118783.6491, 707, \
296, 38.3854, 402500.0000
2026-11-25T23:27:40.725000000Z 2026-11-25 23:27:40:724, 0, 210.2853, 197.9335, 2205001, 2075483.5821, \
0, 1005, 197.9335, 2075483.5821
2026-11-25T23:27:44.999000000Z 2026-11-25 23:27:44:998, 0, 284.3701, 1.6924, 2981837, 17745.8292, 0, \
1019, 1.6924, 17745.8292
"""


def test_consumer_detail_lines_give_the_records_read_since_the_line_before() -> None:
    counts = bench.consumer_detail_counts(CONSUMER_DETAIL)
    assert [c for _, c in counts] == [119140, 2205001 - 119140, 2981837 - 2205001]
    assert counts[0][0] == pytest.approx(bench.docker_time("2026-11-25T23:27:39.72Z"))
    # the live count reads the same lines without stamps
    assert bench._CONSUMER_TOTAL.match(CONSUMER_DETAIL.splitlines()[2].split(" ", 1)[1])


def test_a_consumer_row_splits_the_records_read_into_phases() -> None:
    counts = [(10.5, 100), (11.5, 300), (12.5, 50), (14.0, 10), (15.5, 200)]
    phases = bench._count_phases(counts, 10.0, 12.0, 14.0, 16.0)
    assert (phases["before"].records, phases["during"].records, phases["after"].records) == (400, 50, 210)
    assert phases["before"].rate == pytest.approx(200.0) and phases["during"].seconds == pytest.approx(2.0)
    assert "records" in bench.fault_table([("ConsumerPerformance", phases)])


def test_the_read_fault_waits_for_a_count_and_stops_when_the_reader_ends() -> None:
    seen = iter([None, 5, 20, 40])
    assert bench.at_count(lambda: next(seen), 30, lambda: True, deadline=bench.time.monotonic() + 5)
    assert not bench.at_count(lambda: 1, 30, lambda: False, deadline=bench.time.monotonic() + 5)


def test_the_harness_consumer_phases_count_its_polls_lines(tmp_path: Path) -> None:
    history = tmp_path / "c.jsonl"
    history.write_text(
        '{"type":"meta","client":"c","t":1.0}\n'
        '{"type":"polls","client":"c","t":1.5,"phase":"run","topic":"t","partitions":[0,0],"offsets":[0,1]}\n'
        '{"type":"polls","client":"c","t":2.5,"phase":"run","topic":"t","partitions":[1],"offsets":[0]}\n'
        '{"type":"polls","client":"c","t":3.5,"phase":"run","topic":"t","partitions":[0,1,1],"offsets":[2,1,2]}\n')
    phases = bench.polled_phases(history, kill_t=2.0, restart_t=3.0, start=1.0)
    assert [phases[p].records for p in bench.PHASES] == [2, 1, 3]
    assert phases["before"].rate == pytest.approx(2.0)
