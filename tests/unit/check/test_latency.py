"""Latency and availability (harness.check.latency, the Spark job's step 6): known times
in, known figures out."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from harness.check import check_run
from harness.check.latency import (
    BUCKET_BASE,
    ZERO_BUCKET,
    Fault,
    Faults,
    Histograms,
    availability,
    faults_of,
    stats,
    window_for,
)

T0 = 1_700_000_000.0


def _lines(path: Path, events: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in events))


def _timeline(run: Path, *faults: tuple[float, str, str | None]) -> None:
    _lines(run / "timeline.jsonl", [{"type": "fault", "client": "runner", "t": T0 + t, "m": t,
                                     "action": a, "node": n, "role": None, "detail": None}
                                    for t, a, n in faults])


def test_faults_and_the_phase_during(tmp_path: Path) -> None:
    _timeline(tmp_path, (10, "kill9", "kafka-1"), (12, "pause", "kafka-2"), (20, "start", "kafka-1"),
              (21, "resume", "kafka-2"), (30, "heal-all", None))
    f = faults_of(tmp_path)
    assert [(x.t - T0, x.action, x.node) for x in f.faults] == [(10, "kill9", "kafka-1"),
                                                                 (12, "pause", "kafka-2")]
    assert f.start is not None and f.end is not None
    assert (f.start - T0, f.end - T0) == (10, 21)  # both restored at 21 s; the heal-all changes nothing
    # a fault never restored: during lasts to the end
    _timeline(tmp_path, (5, "kill9", "kafka-1"))
    assert faults_of(tmp_path).end is None
    # no timeline: no fault
    assert faults_of(tmp_path / "missing") == Faults((), None, None)


def test_availability_per_partition() -> None:
    fault = Fault(100.0, "kill9", "kafka-1")
    acks = {("t", 0): [9_990, 10_000, 10_850, 10_900], ("t", 1): [9_995, 10_003, 10_005],
            ("t", 2): [9_000]}  # 10 ms bins
    invokes = [9_990, 10_001, 10_002]
    rows = availability(Faults((fault,), 100.0, 110.0), acks, invokes, run_end=110.0)
    (row,) = rows
    parts = {p["partition"]: p for p in row["partitions"]}
    assert parts[0]["unavailable_s"] == 0.0 and parts[0]["longest_gap_s"] == 8.5  # 100.00 -> 108.50
    assert parts[1]["unavailable_s"] == 0.03 and parts[1]["longest_gap_s"] == 0.03
    assert parts[2]["unavailable_s"] is None  # nothing acknowledged there after the fault
    assert row["max_unavailable_s"] == 8.5 and row["sending"]  # the longest gap, not the first ack
    # a gap still open when the faults end counts whole: acks at 100.0 s, then 115.0 s
    (crossing,) = availability(Faults((fault,), 100.0, 110.0), {("t", 0): [9_990, 10_000, 11_500]},
                               invokes, run_end=115.0)
    assert crossing["partitions"][0]["unavailable_s"] == 0.0
    assert crossing["partitions"][0]["longest_gap_s"] == 15.0 and crossing["max_unavailable_s"] == 15.0
    # no ack after the faults end while sends went on: the gap runs to their end
    (open_,) = availability(Faults((fault,), 100.0, 110.0), {("t", 0): [10_000, 10_200]},
                            [10_000, 10_300], run_end=110.0)
    assert open_["partitions"][0]["longest_gap_s"] == 8.0
    # an idle producer at the fault: not unavailability
    idle = availability(Faults((fault,), 100.0, None), acks, [9_990, 10_500], run_end=110.0)
    assert idle[0]["sending"] is False and idle[0]["max_unavailable_s"] is None


def test_percentiles_from_bucket_counts() -> None:
    h = Histograms()
    for v in range(1, 101):  # 1..100 ms, one each
        h.add(0, math.floor(math.log(v) / math.log(BUCKET_BASE)), 1, float(v))
    h.add(1, ZERO_BUCKET, 3, 0.0)
    send, e2e = h.stats()["send"], h.stats()["e2e"]
    assert send["n"] == 100 and send["max"] == 100.0
    for name, true in (("p50", 50), ("p90", 90), ("p99", 99), ("p999", 100)):
        assert send[name] == pytest.approx(true, rel=0.005), name
    assert e2e == {"n": 3, "p50": 0.0, "p90": 0.0, "p99": 0.0, "p999": 0.0, "max": 0.0}
    assert Histograms().stats()["send"] == {"n": 0, "p50": None, "p90": None, "p99": None, "p999": None,
                                            "max": None}


def test_stats_rounds_and_keeps_missing_values() -> None:
    assert stats(3, [1.234, 2.0, 3.0, 4.0], 5.555) == {"n": 3, "p50": 1.23, "p90": 2.0, "p99": 3.0,
                                                      "p999": 4.0, "max": 5.55}
    assert stats(0, None, None)["p99"] is None


def test_the_checker_measures_send_and_end_to_end_latency(tmp_path: Path) -> None:
    """10 sends, 1 s apart; send latency i ms, end-to-end 10 * i ms; a kill -9 at 4.5 s
    restored at 7.5 s; partition 0's acks stop from 4 s to 8 s."""
    producer, consumer = [], []
    for i in range(10):
        t = T0 + i
        mid = f"m-{i}"
        producer.append({"type": "invoke", "client": "p", "t": t, "m": i, "mid": mid, "topic": "t",
                         "key": None})
        part = 0 if i not in (5, 6, 7) else 1
        producer.append({"type": "ok", "client": "p", "t": t + i / 1000, "m": i, "mid": mid, "topic": "t",
                         "partition": part, "offset": i, "epoch": 0})
        consumer.append({"type": "poll", "client": "c", "t": t + i / 100, "m": i, "mid": mid, "topic": "t",
                         "partition": part, "offset": i, "epoch": 0, "phase": "run"})
    _lines(tmp_path / "history" / "p.jsonl", producer)
    _lines(tmp_path / "history" / "c.jsonl", consumer)
    _timeline(tmp_path, (4.5, "kill9", "kafka-1"), (7.5, "start", "kafka-1"))
    lat = check_run(tmp_path).latency
    assert lat is not None
    assert lat["send"]["n"] == 10 and lat["send"]["max"] == 9.0 and lat["e2e"]["max"] == 90.0
    # the 5th of 10 (rank ceil(0.5 * 10)), within the buckets' 0.5%; p99 the 10th
    assert lat["send"]["p50"] == pytest.approx(4.0, rel=0.005)
    assert lat["e2e"]["p50"] == pytest.approx(40.0, rel=0.005)
    assert lat["send"]["p99"] == pytest.approx(9.0, rel=0.005) and lat["send"]["p99"] <= lat["send"]["max"]
    assert {k: v["send"]["n"] for k, v in lat["phases"].items()} == {"before": 5, "during": 3, "after": 2}
    assert lat["phases"]["after"]["send"]["max"] == 9.0
    # 9 s of sends: half-second windows (window_for), one send in every other one
    assert lat["window_s"] == 0.5
    assert [(w["t"], w["send"]["n"]) for w in lat["windows"]] == [(float(i), 1) for i in range(10)]
    assert lat["delay"]["n"] == 0  # unpaced: no publish delay
    assert lat["during"] == [4.5, 7.5]
    assert [(p["client"], p["topic"], p["partition"], p["send"]["n"], p["send"]["max"])
            for p in lat["partitions"]] == [("p", "t", 0, 7, 9.0), ("p", "t", 1, 3, 7.0)]
    (fault,) = lat["availability"]
    assert fault["t"] == 4.5 and fault["action"] == "kill9"
    parts = {p["partition"]: p for p in fault["partitions"]}
    # partition 0: next ack at 8.008 s; partition 1: at 5.005 s
    assert parts[0]["unavailable_s"] == 3.5 and parts[1]["unavailable_s"] == 0.5
    assert lat["max_unavailable_s"] == 3.5


def test_window_lengths() -> None:
    assert [window_for(s) for s in (0, 9, 60, 61, 600, 1200, 5000)] == [0.5, 0.5, 0.5, 1, 5, 10, 10]


def test_the_checker_measures_publish_delay(tmp_path: Path) -> None:
    """A paced batch of 4 sends made at 1 s, due from 0 s every 0.25 s: publish delays
    1000, 750, 500 and 250 ms; an unpaced send and one with a due time that is no number
    have none."""
    line = {"type": "invokes", "client": "p", "t": T0 + 1, "m": 1, "topic": "t", "mids": ["a", "b", "c", "d"],
            "keys": None, "partitions": None, "due": T0, "every": 0.25}
    oks = {"type": "oks", "client": "p", "t": T0 + 1.5, "m": 1.5, "topic": "t", "mids": ["a", "b", "c", "d"],
           "partitions": [0] * 4, "offsets": [0, 1, 2, 3], "epochs": [0] * 4}
    _lines(tmp_path / "history" / "p.jsonl", [
        line, oks,
        {"type": "invoke", "client": "p", "t": T0 + 2, "m": 2, "mid": "e", "topic": "t", "key": None},
        {"type": "invoke", "client": "p", "t": T0 + 2, "m": 2, "mid": "f", "topic": "t", "key": None,
         "due": "late"}])
    lat = check_run(tmp_path).latency
    assert lat is not None
    delay = lat["delay"]
    assert delay["n"] == 4 and delay["max"] == 1000.0
    assert delay["p50"] == pytest.approx(500.0, rel=0.005)
    assert delay["p99"] == pytest.approx(1000.0, rel=0.005)
    assert lat["send"]["n"] == 4 and lat["send"]["max"] == 500.0
    # all four were invoked before the producer's first acknowledgement: its warm-up
    assert lat["phases"]["warm-up"]["delay"]["n"] == 4 and "before" not in lat["phases"]


def test_sends_before_a_producers_first_acknowledgement_are_its_warm_up_not_before(tmp_path: Path) -> None:
    """A producer's first sends wait for its start (producer id, metadata): 5 sends at 0,
    0.1 ... 0.4 s all acknowledged at 0.6 s; then 5 sends at 1 ... 5 s acknowledged in 2 ms;
    a kill at 5.5 s. ``before`` holds the 5 healthy sends (2 ms), ``warm-up`` the first 5
    and a second producer's one send (invoked before its first acknowledgement, as every
    producer's first send is)."""
    events = []
    for i in range(5):
        events.append({"type": "invoke", "client": "p", "t": T0 + i / 10, "mid": f"w-{i}", "topic": "t"})
    events += [{"type": "ok", "client": "p", "t": T0 + 0.6, "mid": f"w-{i}", "topic": "t", "partition": 0,
                "offset": i} for i in range(5)]
    for i in range(5):
        events.append({"type": "invoke", "client": "p", "t": T0 + 1 + i, "mid": f"h-{i}", "topic": "t"})
        events.append({"type": "ok", "client": "p", "t": T0 + 1.002 + i, "mid": f"h-{i}", "topic": "t",
                       "partition": 0, "offset": 5 + i})
    events += [{"type": "invoke", "client": "q", "t": T0 + 2, "mid": "q-0", "topic": "t"},
               {"type": "ok", "client": "q", "t": T0 + 2.001, "mid": "q-0", "topic": "t", "partition": 0,
                "offset": 10}]
    _lines(tmp_path / "history" / "p.jsonl", events)
    _timeline(tmp_path, (5.5, "kill9", "kafka-1"), (7.5, "start", "kafka-1"))
    lat = check_run(tmp_path).latency
    assert lat is not None
    assert {k: v["send"]["n"] for k, v in lat["phases"].items()} == {"warm-up": 6, "before": 5}
    assert lat["phases"]["before"]["send"]["max"] == pytest.approx(2.0, abs=0.01)
    assert lat["phases"]["warm-up"]["send"]["max"] == pytest.approx(600.0, abs=0.01)
    assert lat["send"]["n"] == 11  # the whole run keeps them all


def test_the_kernel_groups_counts_and_maxima_per_key_and_bucket() -> None:
    """The job's NumPy grouping against a plain dictionary, the zero bucket and 64-bit
    client hashes among the keys."""
    import numpy as np

    from harness.check.latency import ZERO_BUCKET, _group

    rng = np.random.default_rng(7)
    keys = rng.choice(np.array([-(2**62), -3, 0, 5, 2**62 + 11], np.int64), 5000)
    buckets = rng.choice(np.array([ZERO_BUCKET, -700, -1, 0, 1, 1500], np.int64), 5000)
    values = rng.normal(10, 5, 5000)
    want: dict[tuple[int, int], tuple[int, float]] = {}
    for k, b, v in zip(keys.tolist(), buckets.tolist(), values.tolist(), strict=True):
        n, mx = want.get((k, b), (0, -math.inf))
        want[(k, b)] = (n + 1, max(mx, v))
    ks, bs, ns, mxs = _group(keys, buckets, values)
    got = {(k, b): (n, mx) for k, b, n, mx in zip(ks.tolist(), bs.tolist(), ns.tolist(), mxs.tolist(),
                                                  strict=True)}
    assert got == want
    zero = np.array([ZERO_BUCKET] * 2, np.int64)
    only_zero = _group(np.array([1, 1], np.int64), zero, np.array([0.0, -1.0]))
    assert [a.tolist() for a in only_zero] == [[1], [ZERO_BUCKET], [2], [0.0]]


def test_time_bins_travel_as_runs_and_come_back_whole() -> None:
    """The kernel hands the driver its distinct time bins as runs of consecutive bins;
    the driver's bins are the distinct bins of every task, sorted, whatever the overlap."""
    import numpy as np

    from harness.check.latency import _bins, _runs

    first, length = _runs(np.array([5.0, 3.0, 4.0, 4.0, 9.0, 11.0, 10.0, 20.0]))
    assert (first.tolist(), length.tolist()) == ([3, 9, 20], [3, 3, 1])
    rng = np.random.default_rng(7)
    tasks = [np.floor(rng.uniform(0, 3000, size=2000)) for _ in range(3)]
    runs = [_runs(bins) for bins in tasks]
    assert sum(len(f) for f, _ in runs) < sum(len(set(t.tolist())) for t in tasks)  # runs are fewer
    merged = _bins(np.concatenate([f for f, _ in runs]), np.concatenate([n for _, n in runs]))
    assert merged == sorted({int(b) for t in tasks for b in t})
    assert _bins(np.array([], np.int64), np.array([], np.int64)) == []
    assert _runs(np.array([], np.float64))[0].tolist() == []
