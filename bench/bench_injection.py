"""Hit rate of the crash-timing points: each case N times per mode.

    python bench/bench_injection.py [--reps 10] [--modes kafka-zk kafka-kraft] [--cases c1 c2 ...]
    python bench/bench_injection.py --system pulsar [--reps 10] [--versions 4.0.7 4.2.4]

Runs cases/<system>/<case>.yaml through the runner (clusters kept between runs and
removed at the end) and prints, per case and mode (Kafka) or version (Pulsar), how many
runs hit their point (the state read apart from the rule matched the table in
docs/injection.md), how many passed, the median wall time per run, and the machine's load
average before and after.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from harness.backend.cluster import this_owner
from harness.backend.docker import LABEL_OWNER, Engine
from harness.case import load_case
from harness.run import run_case

ROOT = Path(__file__).resolve().parent.parent
#: where the run directories of misses and failures are kept (the others are removed)
MISSES = ROOT / "reports" / "bench-injection-misses"
#: per system: the cases of its points, and the modes (Kafka clusters) or versions (Pulsar)
DEFAULTS = {"kafka": (["c1", "c2", "c3", "c4", "c5"], ["kafka-zk", "kafka-kraft"]),
            "pulsar": (["ack-quorum-kill-owner", "bookie-journaled-kill", "cursor-unpersisted-kill-owner",
                        "ensemble-change-kill-owner", "ledger-recovery-kill-new-owner",
                        "bundle-acquired-kill-new-owner"],
                       ["4.0.7", "4.2.4"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--system", choices=sorted(DEFAULTS), default="kafka")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--modes", "--versions", nargs="*", default=None,
                    help="Kafka: cluster modes (kafka-zk kafka-kraft); Pulsar: versions")
    ap.add_argument("--cases", nargs="*", default=None)
    args = ap.parse_args()
    cases, modes = DEFAULTS[args.system]
    cases, modes = args.cases or cases, args.modes or modes
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as reports:
            for mode in modes:
                for name in cases:
                    path = ROOT / "cases" / args.system / f"{name}.yaml"
                    case = (load_case(path, cluster=mode) if args.system == "kafka"
                            else load_case(path, version=mode))
                    hits = passes = 0
                    times = []
                    for _ in range(args.reps):
                        t0 = time.monotonic()
                        outcome = run_case(case, reports_dir=Path(reports), keep_cluster=True)
                        times.append(time.monotonic() - t0)
                        hit = bool(outcome.result.injection and outcome.result.injection.hit)
                        hits += hit
                        passes += outcome.exit_code == 0
                        if not hit or outcome.exit_code != 0:  # kept for a look: the rest go
                            MISSES.mkdir(parents=True, exist_ok=True)
                            shutil.copytree(outcome.run_dir, MISSES / outcome.run_dir.name)
                            print(f"  kept {MISSES / outcome.run_dir.name}", flush=True)
                    rows.append((name, mode, hits, passes, statistics.median(times)))
                    print(f"{name:22} {mode:12} hit {hits}/{args.reps}  pass {passes}/{args.reps}  "
                          f"median {statistics.median(times):5.1f}s", flush=True)
    finally:
        Engine().remove_labelled({LABEL_OWNER: this_owner()})
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    print(f"{'case':22} {'mode':12} {'hit':>6} {'pass':>6} {'s/run':>6}")
    for name, mode, hits, passes, med in rows:
        print(f"{name:22} {mode:12} {hits:>3}/{args.reps:<2} {passes:>3}/{args.reps:<2} {med:6.1f}")


if __name__ == "__main__":
    main()
