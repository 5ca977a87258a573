"""bench/bench_pulsar_perf.py: reading pulsar-perf's output (SHORT's lines as pulsar-testclient
4.0.6 printed them on this machine, its trailing space included)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_pulsar_perf as bench  # noqa: E402

SHORT = """Created 1 producers
------------- DONE (reached the maximum number: 5000 of production) --------------
Aggregated throughput stats --- 6643 records sent --- 663.978 msg/s --- 0.507 Mbit/s\x20
Aggregated latency stats --- Latency: mean:   0.000 ms - med:   0.000 - 95pct:   0.000 - 99pct:   0.000 \
- 99.9pct:   0.000 - 99.99pct:   0.000 - 99.999pct:   0.000 - Max:   0.000
"""

# the same two lines with a latency recorded (the p1-1k row's percentiles; its exact line
# was not kept)
LONG = """Aggregated throughput stats --- 100452 records sent --- 11574.120 msg/s --- 88.303 Mbit/s\x20
Aggregated latency stats --- Latency: mean: 150.210 ms - med: 141.900 - 95pct: 180.100 - 99pct: 193.800 \
- 99.9pct: 220.500 - 99.99pct: 230.000 - 99.999pct: 231.000 - Max: 231.500
"""


# pulsar-perf's 10-s lines, time-stamped by Docker, as 4.0.6 printed them on this machine
# (the first two are real; the others the same line with other stamps and figures)
PERIODIC = """2026-11-25T19:44:05.154017342Z Created 1 producers
2026-11-25T19:44:14.821779758Z Throughput produced:    9605 msg ---    960.6 msg/s ---      0.7 Mbit/s  \
--- failure      0.0 msg/s --- Latency: mean:   5.381 ms - med:   2.273 - 95pct:  22.739 - 99pct:  61.464 \
- 99.9pct:  93.159 - 99.99pct: 117.796 - Max: 117.809
2026-11-25T19:44:24.831499003Z Throughput produced:   19670 msg ---    999.8 msg/s ---      0.8 Mbit/s  \
--- failure      0.0 msg/s --- Latency: mean:   2.061 ms - med:   1.960 - 95pct:   2.995 - 99pct:   6.575 \
- 99.9pct:  24.330 - 99.99pct:  30.188 - Max:  30.191
2026-11-25T19:44:34.831499003Z Throughput produced:   20670 msg ---    100.0 msg/s ---      0.1 Mbit/s  \
--- failure      0.0 msg/s --- Latency: mean: 900.000 ms - med: 10.000 - 95pct: 4000.000 - 99pct: 9000.000 \
- 99.9pct: 9500.000 - 99.99pct: 9600.000 - Max: 9700.500
2026-11-25T19:44:44.831499003Z Throughput produced:   30670 msg ---   1000.0 msg/s ---      0.8 Mbit/s  \
--- failure      0.0 msg/s --- Latency: mean:   3.000 ms - med:   2.000 - 95pct:   3.000 - 99pct:   8.000 \
- 99.9pct:  20.000 - 99.99pct:  30.000 - Max:  40.000
2026-11-25T19:44:54.835198635Z Aggregated throughput stats --- 25001 records sent --- 831.130 msg/s \
--- 0.634 Mbit/s\x20
"""


def test_the_ten_second_lines_fall_in_the_phase_of_their_middle() -> None:
    from bench_seed002 import docker_time

    t = docker_time("2026-11-25T19:44:00Z")
    assert t is not None
    # killed at 19:44:20, started at 19:44:35: the window ending 19:44:24.8 (middle 19.8) is
    # before; the one ending 34.8 (middle 29.8) during; the one ending 44.8 (middle 39.8) after
    got = bench.perf_phases(PERIODIC, t + 20, t + 35)
    assert got["before"].rate == pytest.approx((960.6 + 999.8) / 2)
    assert got["before"].p99 == pytest.approx(61.464) and got["before"].max == pytest.approx(117.809)
    assert got["before"].avg == pytest.approx((5.381 + 2.061) / 2)
    assert got["during"].rate == pytest.approx(100.0) and got["during"].max == pytest.approx(9700.5)
    assert got["during"].p99 == pytest.approx(9000.0)
    assert got["after"].rate == pytest.approx(1000.0) and got["after"].p99 == pytest.approx(8.0)
    assert got["before"].p50 is None  # a window's median cannot be merged: none is made up
    # a window with nothing acknowledged prints zeros: it counts as 0 msg/s, and no latency
    stalled = PERIODIC.replace("100.0 msg/s", "0.0 msg/s").replace(
        "mean: 900.000 ms - med: 10.000 - 95pct: 4000.000 - 99pct: 9000.000",
        "mean: 0.000 ms - med: 0.000 - 95pct: 0.000 - 99pct: 0.000").replace("Max: 9700.500", "Max: 0.000")
    during = bench.perf_phases(stalled, t + 20, t + 35)["during"]
    assert during.rate == 0.0 and during.p99 is None and during.max is None and during.avg is None
    # no 10-s line at all (a row shorter than one window): empty phases, not an error
    assert bench.perf_phases("Created 1 producers\n", t, t + 1)["during"].rate is None


# a counted run as 4.0.6 printed it here (-m 100000 -s 100), time-stamped by Docker; its
# summary says 146,435 records in 10.0 s, but the 100,000th acknowledgement came 4.5 s after
# its producer was created
COUNTED = """2026-11-25T20:15:00.100000000Z Started performance test thread 0
2026-11-25T20:15:00.500000000Z Created 1 producers
2026-11-25T20:15:05.000000000Z ------------- DONE (reached the maximum number: [100000] of production) \
--------------
2026-11-25T20:15:10.600000000Z Aggregated throughput stats --- 146435 records sent --- 14632.468 msg/s --- \
11.164 Mbit/s\x20
2026-11-25T20:15:10.610000000Z Aggregated latency stats --- Latency: mean:  94.800 ms - med:  95.656 - \
95pct: 112.190 - 99pct: 112.562 - 99.9pct: 112.749 - 99.99pct: 112.754 - 99.999pct: 113.360 - Max: 113.360
"""


def test_a_counted_run_is_timed_from_its_producers_to_its_last_acknowledgement() -> None:
    got = bench.parse_pulsar_perf_run(COUNTED, 100_000, 100)
    assert got.records == 100_000 and got.rate == pytest.approx(100_000 / 4.5)
    assert got.mbps == pytest.approx(100_000 * 100 / 2**20 / 4.5)
    assert (got.p50, got.p99, got.p999) == (95.656, 112.562, 112.749)


def test_no_latency_recorded_is_none_not_zero() -> None:
    head = "\n".join(COUNTED.splitlines()[:4])  # all but its latency line
    got = bench.parse_pulsar_perf_run(f"{head}\n2026-11-25T20:15:10Z {SHORT.splitlines()[3]}\n", 100_000, 100)
    assert got.p50 is None and got.p99 is None and got.rate == pytest.approx(100_000 / 4.5)


def test_a_run_without_its_start_and_done_lines_is_an_error() -> None:
    with pytest.raises(ValueError, match="no 'Created N producers' and DONE lines"):
        bench.parse_pulsar_perf_run("2026-11-25T19:44:05Z Exception in thread main\n", 100, 100)
    unstamped = "Created 1 producers\n------------- DONE (reached the maximum number: [5000] of production)\n"
    with pytest.raises(ValueError, match="to time its run"):
        bench.parse_pulsar_perf_run(unstamped, 5000, 100)
