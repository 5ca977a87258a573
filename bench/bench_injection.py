"""Hit rate of the crash-timing points: each case N times per mode.

    python bench/bench_injection.py [--reps 10] [--modes kafka-zk kafka-kraft] [--cases c1 c2 ...]

Runs cases/kafka/<case>.yaml through the runner (clusters kept between runs and
removed at the end) and prints, per case and mode, how many runs hit their point
(the observed state at the kill matched the table in docs/injection.md), how
many passed, and the median wall time per run.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from harness.backend.cluster import this_owner
from harness.backend.docker import LABEL_OWNER, Engine
from harness.case import load_case
from harness.run import run_case

CASES = Path(__file__).resolve().parent.parent / "cases" / "kafka"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--modes", nargs="*", default=["kafka-zk", "kafka-kraft"])
    ap.add_argument("--cases", nargs="*", default=["c1", "c2", "c3", "c4", "c5"])
    args = ap.parse_args()
    rows = []
    try:
        with tempfile.TemporaryDirectory() as reports:
            for mode in args.modes:
                for name in args.cases:
                    case = load_case(CASES / f"{name}.yaml", cluster=mode)
                    hits = passes = 0
                    times = []
                    for _ in range(args.reps):
                        t0 = time.monotonic()
                        outcome = run_case(case, reports_dir=Path(reports), keep_cluster=True)
                        times.append(time.monotonic() - t0)
                        hits += bool(outcome.result.injection and outcome.result.injection.hit)
                        passes += outcome.exit_code == 0
                    rows.append((name, mode, hits, passes, statistics.median(times)))
                    print(f"{name:4} {mode:12} hit {hits}/{args.reps}  pass {passes}/{args.reps}  "
                          f"median {statistics.median(times):5.1f}s", flush=True)
    finally:
        Engine().remove_labelled({LABEL_OWNER: this_owner()})
    print()
    print(f"{'case':5} {'mode':12} {'hit':>6} {'pass':>6} {'s/run':>6}")
    for name, mode, hits, passes, med in rows:
        print(f"{name:5} {mode:12} {hits:>3}/{args.reps:<2} {passes:>3}/{args.reps:<2} {med:6.1f}")


if __name__ == "__main__":
    main()
