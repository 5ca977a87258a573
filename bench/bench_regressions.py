"""Bench of the regression library: how reliably each case reproduces its bug on the
buggy version and holds on the fixed one.

Runs every case of the regression library (``cases/kafka/regressions`` and
``cases/pulsar/regressions``; one system's with ``--system``, or the paths given) on every entry of
its ``versions:`` list ``--reps`` times (cells in turn; clusters are kept between the
runs of one version and removed at the end), then prints per case and version how many
runs behaved as the entry states, which anomalies went over their limit in how many
runs, and the hit rate of every armed point, with the machine's load average before and
after. The runs' reports and ``reports/matrix.html`` are written as by ``harness matrix``.

Usage: ``python bench/bench_regressions.py --reps 10 [--system kafka|pulsar] [--version LABEL ...]
[PATHS ...]``
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without ``pip install -e .``
    sys.path.insert(0, str(ROOT))

from harness.clusters import REPORTS_DIR, SYSTEMS, regression_dirs  # noqa: E402
from harness.run import RunOutcome  # noqa: E402
from harness.run.matrix import Cell, cells_of, format_table, run_matrix, write_matrix  # noqa: E402


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f} (1 min), {five:.2f} (5 min), {os.cpu_count()} cores"


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    # SIGTERM, and SIGINT even where the shell started the bench with it ignored (nohup,
    # `&`), stop it as Ctrl-C does: the run in progress heals and collects, the clusters go
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="*")
    p.add_argument("--system", choices=SYSTEMS, help="only this system's regression library")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--version", action="append", help="only entries with this label")
    p.add_argument("--reports", default=str(REPORTS_DIR))
    args = p.parse_args(argv)
    if args.paths and args.system:
        p.error("give case paths or --system, not both")
    logging.basicConfig(level=logging.WARNING)
    cells = cells_of(args.paths or regression_dirs(args.system), args.version or ())
    print(f"{len(cells)} cells x {args.reps} runs; before: {_load()}", flush=True)
    t0 = time.monotonic()

    def progress(cell: Cell, outcome: RunOutcome) -> None:
        r = outcome.result
        print(f"  {cell.case} {cell.label} run {len(cell.runs)}: verdict {r.verdict}, "
              f"{'as expected' if r.as_expected else 'NOT as expected'}, "
              f"{r.duration_s or 0:.0f} s, {outcome.run_dir.name}", flush=True)

    done = run_matrix(cells, reps=args.reps, reports_dir=Path(args.reports), after_run=progress)
    given = argv if argv is not None else sys.argv[1:]
    command = shlex.join(["python3", "bench/bench_regressions.py", *given])
    page = write_matrix(done, Path(args.reports), command=command,
                        full=not args.paths and not args.system and not args.version)
    print(f"\n{format_table(done)}\n")
    print(f"{time.monotonic() - t0:.0f} s in all; after: {_load()}; matrix: {page}")
    return 0 if all(c.as_expected == len(c.runs) for c in done) else 1


if __name__ == "__main__":
    sys.exit(main())
