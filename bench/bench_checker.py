"""Bench of the Spark checker on synthetic histories.

For each size: generate a history (with two of each anomaly injected, so the
bench also checks the result; consumers write ``polls`` batches as the real
clients do), run ``check_run`` on a warm session (``--repeat``
times; generation is timed apart and never counted in the check), sample the
peak memory of this process plus the Spark JVM and its children (/proc) and of the
scratch when it is in memory, count the CPU seconds they used during the check, and at
1M records or fewer time the reference checker too. Data goes to a temporary directory that
is deleted afterwards.

Usage: ``python bench/bench_checker.py --records 1000000 10000000``

``--small N`` (10000 by default; 0: skip) first times what a user waits for on a small
run: a fresh ``harness check`` process on a run directory of N records (the shared
Spark Connect server already up: its start is timed apart, as ``server start``), the
same check inside one process (as in a pytest session), the same again after ``--session``
more checks (30 by default: the server's JIT compiles for tens of checks, so a long pytest
session's later checks are faster than its first), and the reference checker.
``--cluster`` also checks that run on a standalone Spark cluster (a master and two
workers on loopback) and compares the result with the local one.

The machine's speed (``bench/machine.py``: two fixed pieces of work) is printed before and
after, so that figures taken at different times can be compared.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without ``pip install -e .``
    sys.path.insert(0, str(ROOT))

import machine  # noqa: E402  (bench/machine.py: this script's directory is on sys.path)
from harness.check import check_run, plan  # noqa: E402
from harness.clusters import SYSTEMS  # noqa: E402
from harness.testing import reference_checker  # noqa: E402
from harness.testing.synthetic import INJECTABLE, Profile, generate  # noqa: E402

REFERENCE_MAX = 1_000_000  # the reference needs about 1 GB per million records
LATE = 5  # the late checks' median is of the last this many


class PeakMemory:
    """Samples the resident memory of this process and its descendants (the JVM), plus
    the memory the check's scratch holds when it is in memory (``/dev/shm``: the growth
    of the system's shared memory since the start)."""

    def __init__(self, every_s: float = 0.25) -> None:
        self.every_s = every_s
        self.peak = 0
        self._shmem0 = _shmem()
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
            self.peak = max(self.peak, _trees_rss(_roots()) + max(0, _shmem() - self._shmem0))
            self._stop.wait(self.every_s)


def _shmem() -> int:
    """The system's shared memory (tmpfs files among it), in bytes; 0 if not known."""
    try:
        with open("/proc/meminfo") as fh:
            fields = dict(line.split(":", 1) for line in fh)
        return int(fields["Shmem"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return 0


def _trees(roots: list[int]) -> dict[int, dict[str, str]]:
    """/proc/<pid>/status fields of the ``roots`` and all their descendants (the Spark JVM,
    and any Python workers it starts), each process once (the shared server's supervisor
    is this process's child when this process started it), from one pass over /proc."""
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
        while p and p not in roots:
            p = parents.get(p, 0)
        if p in roots:
            out[pid] = status[pid]
    return out


def _trees_rss(roots: list[int]) -> int:
    """Resident bytes of the ``roots`` and all their descendants."""
    return sum(int(f.get("VmRSS", "0 kB").split()[0]) * 1024 for f in _trees(roots).values())


def _roots() -> list[int]:
    """This process, and the shared Spark server's supervisor when it runs (its JVM and
    Python workers are not this process's children)."""
    from harness.check.engine import server

    shared = server.running()
    return [os.getpid()] + ([shared.pid] if shared is not None else [])


def checker_cpu_s() -> float:
    """CPU seconds so far of this process tree and the shared server's."""
    return tree_cpu_s(*_roots())


def tree_cpu_s(*roots: int) -> float:
    """CPU seconds (user + system) used so far by the ``roots`` (default: this process) and
    their live descendants, each process once: on a shared machine this, unlike wall time,
    hardly depends on what else runs."""
    total = 0
    for pid in _trees(list(roots or (os.getpid(),))):
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
        inject = {k: 2 for k in INJECTABLE if (args.replicas >= 2 or k != "replica-divergence")
                  and (pulsar or k != "key-order") and not (pulsar and k == "silent-reread")}
        profile = Profile(records=records, system=args.system, partitions=args.partitions, producers=4,
                          consumers=3, replicas=args.replicas, txn=True, seed=1, inject=inject, chunk=50_000,
                          key_shared=pulsar)
        t0 = time.monotonic()
        expected = generate(run, profile, workers=args.workers)
        generate_s = time.monotonic() - t0
        size = sum(f.stat().st_size for f in run.rglob("*.jsonl"))
        print(f"  {records:,}: generated {expected.lines:,} lines, {size / 1e9:.1f} GB in {generate_s:.0f}s",
              flush=True)
        rows: list[Row] = []
        for _ in range(args.repeat):
            with PeakMemory() as memory:
                cpu0, t0 = checker_cpu_s(), time.monotonic()
                result = check_run(run, spark_master=args.master)
                check_s, cpu_s = time.monotonic() - t0, checker_cpu_s() - cpu0
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


SMALL_CASE = """\
description: A synthetic run for the bench (its history is generated, not recorded).
system: kafka
cluster: kafka-zk
topic: {partitions: 6}
steps:
  - produce: {count: 10, name: load}
"""


def small_run(run: Path, records: int) -> None:
    """A run directory as ``harness run`` leaves one: a (synthetic) history, the case copy
    and a result.json, so that ``harness check`` judges it."""
    from harness.result import RunResult

    inject = {"lost-write": 2, "duplicate": 2, "poll-skip": 2, "aborted-read": 1}
    generate(run, Profile(records=records, partitions=6, producers=2, consumers=2, replicas=2, txn=True,
                          seed=5, inject=inject))
    (run / "case.yaml").write_text(SMALL_CASE)
    RunResult(run.name, case="bench", cluster="kafka-zk", verdict="error", error="check failed: not yet",
              counts={}, anomalies={}).write(run)


def small(args: argparse.Namespace) -> bool:
    """Fresh-process, in-process and reference times on a small run; the cluster check."""
    from harness.check.engine import server

    records, repeat = args.small, max(3, args.repeat)
    tmp = Path(tempfile.mkdtemp(prefix="bench-checker-small-", dir=args.tmp))
    ok = True
    try:
        run = tmp / "20260101-000000-bench-0000"
        small_run(run, records)
        t0 = time.monotonic()
        started = server.running() is None
        server.ensure()
        from harness.check.engine import aot

        cache = aot.cache_file()
        with_cache = "with" if cache is not None and cache.is_file() else "without"
        print(f"server start: {time.monotonic() - t0:.1f}s ({'started' if started else 'already running'}, "
              f"{with_cache} an AOT cache)", flush=True)
        fresh = []
        for _ in range(repeat + 1):  # the first one warms the server's JIT; not counted
            t0 = time.monotonic()
            proc = subprocess.run([sys.executable, "-m", "harness", "check", str(run)], capture_output=True,
                                  text=True, cwd=ROOT)
            fresh.append((time.monotonic() - t0, os.getloadavg()[0]))
            if proc.returncode != 1:  # lost writes injected: not as expected
                print(f"  harness check exited {proc.returncode}:\n{proc.stderr[-2000:]}")
                ok = False
        fresh = fresh[1:]
        inside = []
        result = None
        for _ in range(repeat + 1):
            t0 = time.monotonic()
            result = check_run(run, spark_master=args.master)
            inside.append((time.monotonic() - t0, os.getloadavg()[0]))
        inside = inside[1:]
        late = []  # the same check after the server's JIT has seen as many as a long pytest session's
        for _ in range(args.session):
            t0 = time.monotonic()
            check_run(run, spark_master=args.master)
            late.append((time.monotonic() - t0, os.getloadavg()[0]))
        late = late[-LATE:]
        t0 = time.monotonic()
        ref = reference_checker.check(run)
        ref_s = time.monotonic() - t0
        ok &= ref == result
        print(f"\n{records:,} records ({sum(1 for _ in (run / 'history').glob('*.jsonl'))} history files), "
              f"median of {repeat}:")
        print(f"  fresh `harness check` process: {statistics.median(s for s, _ in fresh):.2f}s wall "
              f"(runs {', '.join(f'{s:.2f}' for s, _ in fresh)}; load {fresh[-1][1]:.1f})")
        print(f"  check inside one process:      {statistics.median(s for s, _ in inside):.2f}s "
              f"(runs {', '.join(f'{s:.2f}' for s, _ in inside)}; load {inside[-1][1]:.1f})")
        if late:
            label = f"the same, {args.session} checks later:"
            print(f"  {label:<31s}{statistics.median(s for s, _ in late):.2f}s "
                  f"(the last {len(late)}: {', '.join(f'{s:.2f}' for s, _ in late)}; load {late[-1][1]:.1f}; "
                  f"the server's JIT still compiles for tens of checks)")
        print(f"  reference checker:             {ref_s:.2f}s; same result: {ref == result}", flush=True)
        if args.cluster:
            from harness.testing.spark_cluster import StandaloneCluster

            t0 = time.monotonic()
            with StandaloneCluster(tmp / "cluster", workers=2, cores=1, memory="1g") as cluster:
                try:
                    up = time.monotonic() - t0
                    t0 = time.monotonic()
                    on_cluster = check_run(run, spark_master=cluster.master)
                    first = time.monotonic() - t0
                    t0 = time.monotonic()
                    check_run(run, spark_master=cluster.master)
                    second = time.monotonic() - t0
                finally:
                    plan.close()
            same = on_cluster == result
            ok &= same
            print(f"  standalone cluster ({cluster.master}, 2 workers x 1 core): up in {up:.1f}s, "
                  f"first check {first:.1f}s, second {second:.1f}s (load {os.getloadavg()[0]:.1f}); "
                  f"same result as local: {same}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs="*", default=[],
                        help="history sizes in sent messages (e.g. 1000000 10000000)")
    parser.add_argument("--small", type=int, default=10_000,
                        help="records of the small run timed in a fresh `harness check` "
                             "(default 10000; 0: skip)")
    parser.add_argument("--session", type=int, default=30,
                        help="further in-process checks of the small run, timed as a long pytest "
                             f"session's later checks (the median of the last {LATE}; default 30; 0: skip)")
    parser.add_argument("--cluster", action="store_true",
                        help="also check the small run on a standalone Spark cluster on loopback")
    parser.add_argument("--repeat", type=int, default=1,
                        help="checks of each generated history (default 1; the reference runs once)")
    parser.add_argument("--replicas", type=int, default=0, help="replica dumps per history (default 0)")
    parser.add_argument("--partitions", type=int, default=6, help="partitions of the topic (default 6)")
    parser.add_argument("--system", choices=SYSTEMS, default="kafka",
                        help="history to generate (default kafka; pulsar: a Key_Shared subscription)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="processes generating the history")
    parser.add_argument("--master", default=None,
                        help="Spark master (default: the shared local Spark Connect server)")
    parser.add_argument("--tmp", default=None, help="where to write the histories (default: $TMPDIR)")
    parser.add_argument("--no-reference", action="store_true", help="skip the reference checker")
    args = parser.parse_args(argv)
    print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"before: {machine.describe()}", flush=True)
    small_ok = small(args) if args.small else True
    if not args.records:
        print(f"after: {machine.describe()}", flush=True)
        return 0 if small_ok else 1

    t0 = time.monotonic()
    plan.session_for(args.master)
    warm = Path(tempfile.mkdtemp(prefix="bench-checker-warm-", dir=args.tmp))
    try:
        generate(warm, Profile(records=100_000))
        check_run(warm, spark_master=args.master)
    finally:
        shutil.rmtree(warm, ignore_errors=True)
    print(f"Spark session and warm-up check: {time.monotonic() - t0:.1f}s "
          f"(driver memory {plan.session_for(args.master).conf.get('spark.driver.memory', '?')}, "
          f"{os.cpu_count()} cores)", flush=True)
    rows = [row for n in args.records for row in bench(n, args)]
    widths = [max(len(h), *(len(r.cells()[i]) for r in rows)) for i, h in enumerate(HEADER)]
    print()
    print("  ".join(h.rjust(w) for h, w in zip(HEADER, widths, strict=False)))
    for row in rows:
        print("  ".join(c.rjust(w) for c, w in zip(row.cells(), widths, strict=False)))
    print(f"after: {machine.describe()}", flush=True)
    return 0 if small_ok and all(r.correct for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
