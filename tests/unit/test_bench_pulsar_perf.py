"""bench/bench_pulsar_perf.py: reading pulsar-perf's closing lines (SHORT as pulsar-testclient
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


def test_the_closing_lines_give_records_rate_mb_and_latency() -> None:
    got = bench.parse_pulsar_perf(LONG)
    assert (got.records, got.rate, got.p50, got.p99, got.p999) == (100452, 11574.12, 141.9, 193.8, 220.5)
    assert got.mbps == pytest.approx(88.303 / 8)


def test_no_latency_recorded_is_none_not_zero() -> None:
    got = bench.parse_pulsar_perf(SHORT)
    assert (got.records, got.rate) == (6643, 663.978) and got.p50 is None and got.p99 is None


def test_no_summary_is_an_error() -> None:
    with pytest.raises(ValueError, match="no pulsar-perf throughput summary"):
        bench.parse_pulsar_perf("Exception in thread main")
