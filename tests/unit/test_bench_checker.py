"""bench/bench_checker.py at a small size: its synthetic profile (every anomaly the
generator can inject, two of each) is accepted, checked, and the result matches what
was injected, the reference checker agreeing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_checker  # noqa: E402


@pytest.mark.parametrize("system", ["kafka", "pulsar"])
def test_the_bench_profile_checks_correctly(tmp_path: Path, system: str) -> None:
    args = argparse.Namespace(tmp=str(tmp_path), system=system, replicas=2, partitions=3, workers=1,
                              repeat=1, master=None, no_reference=False)
    rows = bench_checker.bench(3000, args)
    assert len(rows) == 1
    row = rows[0]
    assert row.lines > 0 and row.reference_s is not None
    assert row.correct, "the checker's result differs from the injected anomalies or the reference's"


def test_the_machine_probe_times_its_fixed_work() -> None:
    import machine

    figures = machine.probe(runs=1)
    assert set(figures) == {"python", "arrow_json"} and all(v > 0 for v in figures.values())
    line = machine.describe(runs=1)
    assert line.startswith("machine speed") and "python" in line and "load" in line
