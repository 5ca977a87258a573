"""Bench of the Spark checker on synthetic histories.

For each size: generate a history (with two of each anomaly injected, so the
bench also checks the result; consumers write ``polls`` batches as the real
clients do), run ``check_run`` on a warm session (``--repeat``
times; generation is timed apart and never counted in the check), sample the
peak memory of this process plus the Spark JVM and its children (/proc), count
the CPU seconds they used during the check, and at 1M records or fewer time the
reference checker too. Data goes to a temporary directory that
is deleted afterwards.

Usage: ``python bench/bench_checker.py --records 1000000 10000000``
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without ``pip install -e .``
    sys.path.insert(0, str(ROOT))

from harness.check import (  # noqa: E402
    ANOMALIES,
    check_run,
    spark_job,  # noqa: E402
)
from harness.clusters import SYSTEMS  # noqa: E402
from harness.testing import reference_checker  # noqa: E402
from harness.testing.synthetic import Profile, generate  # noqa: E402

REFERENCE_MAX = 1_000_000  # the reference needs about 1 GB per million records


class PeakMemory:
    """Samples the resident memory of this process and its descendants (the JVM)."""

    def __init__(self, every_s: float = 0.25) -> None:
        self.every_s = every_s
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _tree_rss(os.getpid()))
            self._stop.wait(self.every_s)


def _tree(root: int) -> dict[int, dict[str, str]]:
    """/proc/<pid>/status fields of ``root`` and all its descendants (the Spark JVM, and
    any Python workers it starts)."""
    parents: dict[int, int] = {}
    status: dict[int, dict[str, str]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
        except OSError:
            continue
        pid = int(entry.name)
        parents[pid] = int(fields.get("PPid", "0"))
        status[pid] = fields
    out = {}
    for pid in status:
        p = pid
        while p and p != root:
            p = parents.get(p, 0)
        if p == root:
            out[pid] = status[pid]
    return out


def _tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and all its descendants."""
    return sum(int(f.get("VmRSS", "0 kB").split()[0]) * 1024 for f in _tree(root).values())


def tree_cpu_s(root: int | None = None) -> float:
    """CPU seconds (user + system) used so far by ``root`` and its live descendants: on a
    shared machine this, unlike wall time, hardly depends on what else runs."""
    root = root or os.getpid()
    total = 0
    for pid in _tree(root):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


@dataclass
class Row:
    records: int
    lines: int
    gigabytes: float
    generate_s: float
    check_s: float
    cpu_s: float
    peak_gib: float
    reference_s: float | None
    load: float
    correct: bool

    def cells(self) -> list[str]:
        ratio = f"{self.reference_s / self.check_s:.1f}x" if self.reference_s else "-"
        ref = f"{self.reference_s:.1f}" if self.reference_s else "-"
        return [f"{self.records:,}", f"{self.lines:,}", f"{self.gigabytes:.1f}", f"{self.generate_s:.1f}",
                f"{self.check_s:.1f}", f"{self.cpu_s:.0f}", f"{self.peak_gib:.1f}", ref, ratio,
                f"{self.load:.1f}",
                "yes" if self.correct else "NO"]


HEADER = ["records", "lines", "input GB", "generate s", "check s", "check CPU s", "peak GiB", "reference s",
          "ref/spark", "load", "correct"]


def bench(records: int, args: argparse.Namespace) -> list[Row]:
    run = Path(tempfile.mkdtemp(prefix="bench-checker-", dir=args.tmp))
    try:
        pulsar = args.system == "pulsar"
        inject = {k: 2 for k in ANOMALIES if (args.replicas >= 2 or k != "replica-divergence")
                  and (pulsar or k != "key-order")}
        profile = Profile(records=records, system=args.system, partitions=args.partitions, producers=4,
                          consumers=3, replicas=args.replicas, txn=True, seed=1, inject=inject, chunk=50_000,
                          key_shared=pulsar)
        t0 = time.monotonic()
        expected = generate(run, profile, workers=args.workers)
        generate_s = time.monotonic() - t0
        size = sum(f.stat().st_size for f in run.rglob("*.jsonl"))
        print(f"  {records:,}: generated {expected.lines:,} lines, {size / 1e9:.1f} GB in {generate_s:.0f}s",
              flush=True)
        rows = []
        for _ in range(args.repeat):
            with PeakMemory() as memory:
                cpu0, t0 = tree_cpu_s(), time.monotonic()
                result = check_run(run, spark_master=args.master)
                check_s, cpu_s = time.monotonic() - t0, tree_cpu_s() - cpu0
            load = os.getloadavg()[0]
            correct = result.anomalies == expected.anomalies and result.counts == expected.counts
            print(f"  {records:,}: checked in {check_s:.0f}s ({cpu_s:.0f} CPU-s, peak "
                  f"{memory.peak / 2**30:.1f} GiB, load {load:.1f}), correct: {correct}", flush=True)
            reference_s = None
            if records <= REFERENCE_MAX and not args.no_reference and not rows:
                t0 = time.monotonic()
                correct &= reference_checker.check(run) == result
                reference_s = time.monotonic() - t0
            rows.append(Row(records, expected.lines, size / 1e9, generate_s, check_s, cpu_s,
                            memory.peak / 2**30, reference_s, load, correct))
        return rows
    finally:
        shutil.rmtree(run, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs="+", default=[1_000_000],
                        help="history sizes in sent messages (default: 1000000)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="checks of each generated history (default 1; the reference runs once)")
    parser.add_argument("--replicas", type=int, default=0, help="replica dumps per history (default 0)")
    parser.add_argument("--partitions", type=int, default=6, help="partitions of the topic (default 6)")
    parser.add_argument("--system", choices=SYSTEMS, default="kafka",
                        help="history to generate (default kafka; pulsar: a Key_Shared subscription)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="processes generating the history")
    parser.add_argument("--master", default=None, help="Spark master (default local[*])")
    parser.add_argument("--tmp", default=None, help="where to write the histories (default: $TMPDIR)")
    parser.add_argument("--no-reference", action="store_true", help="skip the reference checker")
    args = parser.parse_args(argv)

    t0 = time.monotonic()
    spark_job.session(args.master)
    warm = Path(tempfile.mkdtemp(prefix="bench-checker-warm-", dir=args.tmp))
    try:
        generate(warm, Profile(records=100_000))
        check_run(warm, spark_master=args.master)
    finally:
        shutil.rmtree(warm, ignore_errors=True)
    print(f"Spark session and warm-up check: {time.monotonic() - t0:.1f}s "
          f"(driver memory {spark_job.session(args.master).conf.get('spark.driver.memory')}, "
          f"{os.cpu_count()} cores)", flush=True)
    rows = [row for n in args.records for row in bench(n, args)]
    widths = [max(len(h), *(len(r.cells()[i]) for r in rows)) for i, h in enumerate(HEADER)]
    print()
    print("  ".join(h.rjust(w) for h, w in zip(HEADER, widths, strict=False)))
    for row in rows:
        print("  ".join(c.rjust(w) for c, w in zip(row.cells(), widths, strict=False)))
    return 0 if all(r.correct for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
