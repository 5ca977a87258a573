"""The version matrix: every case of some files on every version its ``versions:`` list names.

:func:`run_matrix` runs each (case, version entry) ``reps`` times, one after another, on
clusters kept between runs (a cluster is recreated only when the version or the broker
settings change) and removed at the end; :func:`write_matrix` keeps the cells in
``reports/matrix.json`` and renders ``reports/matrix.html`` (linked from the index). A cell
says how many runs behaved as the entry states (a buggy version that lost the write is "as
expected"), which anomalies were over their limits, and how often each armed point's
interleaving happened.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..case import Case, find_case_files, load_case
from ..result import RunResult
from . import DEFAULT_REPORTS, RunOutcome, run_case
from .order import by_cluster, cluster_setting, is_default_setting

__all__ = ["Cell", "MATRIX_JSON", "cells_of", "run_matrix", "write_matrix", "read_matrix"]

log = logging.getLogger(__name__)
MATRIX_JSON = "matrix.json"


@dataclass
class Cell:
    """One case on one version entry, over its runs."""

    case: str
    path: str
    variant: str | None
    version: str
    cluster: str
    broker_config: dict[str, str]
    expected: str  # "pass", or "fail: lost-write"
    source: str = ""
    runs: list[str] = field(default_factory=list)  # run ids, in order
    as_expected: int = 0
    errors: int = 0
    anomalies: dict[str, int] = field(default_factory=dict)  # judged, over limit: in how many runs
    hits: dict[str, list[int]] = field(default_factory=dict)  # point -> [hit, armed]

    @property
    def label(self) -> str:
        return self.variant or self.version

    def add(self, result: RunResult) -> None:
        self.runs.append(result.run_id)
        self.as_expected += int(result.as_expected and result.verdict != "error")
        self.errors += int(result.verdict == "error")
        for name in {e.name for e in result.expectations if not e.ok and e.name in result.anomalies}:
            self.anomalies[name] = self.anomalies.get(name, 0) + 1
        for inj in result.injections or ([result.injection] if result.injection else []):
            hit, armed = self.hits.get(inj.point, [0, 0])
            self.hits[inj.point] = [hit + int(inj.hit), armed + 1]


def _expected(case: Case) -> str:
    if case.expect.reproduces:
        return "fail: " + ", ".join(sorted(case.expect.reproduces))
    return case.expect.verdict


def cells_of(paths: Iterable[str | os.PathLike[str]], only: Iterable[str] = ()) -> list[tuple[Case, Cell]]:
    """Every (case, version entry) of the case files under ``paths``, validated before anything
    runs; ``only``: keep the entries with these labels (a case without ``versions:``: its
    version)."""
    wanted = set(only)
    out = []
    for path in find_case_files(paths):
        first = load_case(path)
        for label in first.variants or (None,):
            case = load_case(path, version=label) if label is not None else first
            if wanted and (case.variant or case.version) not in wanted:
                continue
            out.append((case, Cell(case.name, str(path), case.variant, case.version, case.cluster,
                                   dict(case.broker_config), _expected(case), case.source)))
    return out


def run_matrix(cells: list[tuple[Case, Cell]], *, reps: int = 1, reports_dir: Path = DEFAULT_REPORTS,
               spark_master: str | None = None,
               after_run: Callable[[Cell, RunOutcome], None] | None = None) -> list[Cell]:
    """Runs every cell ``reps`` times (cells in turn, so a version's cluster is reused by its
    runs; cells of one cluster setting one after another, :func:`~.order.by_cluster`); the
    clusters this process started are removed at the end, also on Ctrl-C. Returns the cells
    in the order given."""
    from ..backend.cluster import this_owner
    from ..backend.docker import LABEL_OWNER, Engine
    from ..errors import HarnessError

    try:
        for case, cell in by_cluster(cells, lambda pair: cluster_setting(pair[0]),
                                     lambda pair: is_default_setting(pair[0])):
            for i in range(reps):
                log.info("matrix: %s on %s (run %d of %d)", cell.case, cell.label, i + 1, reps)
                outcome = run_case(case, reports_dir=reports_dir, keep_cluster=True,
                                   spark_master=spark_master)
                cell.add(outcome.result)
                if after_run is not None:
                    after_run(cell, outcome)
    finally:
        try:
            Engine().remove_labelled({LABEL_OWNER: this_owner()})
        except HarnessError:
            pass  # no engine: nothing of ours runs
    return [cell for _, cell in cells]


def write_matrix(cells: list[Cell], reports_dir: Path = DEFAULT_REPORTS) -> Path:
    """``matrix.json`` (atomically) and ``matrix.html`` in ``reports_dir``; the page's path."""
    from ..report.render import render_index, render_matrix

    reports_dir.mkdir(parents=True, exist_ok=True)
    target = reports_dir / MATRIX_JSON
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"cells": [asdict(c) for c in cells]}, indent=2), encoding="utf-8")
    os.replace(tmp, target)
    page = render_matrix(reports_dir, [_row(c, reports_dir) for c in cells])
    render_index(reports_dir)
    return page


def read_matrix(reports_dir: Path) -> list[Cell]:
    """The cells of ``reports_dir/matrix.json`` (an empty list when there is none)."""
    path = reports_dir / MATRIX_JSON
    if not path.is_file():
        return []
    return [Cell(**c) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]]


def _row(cell: Cell, reports_dir: Path) -> dict[str, Any]:
    """What the page shows of a cell: plain values and links relative to ``reports_dir``."""
    n = len(cell.runs)
    return {"case": cell.case, "path": cell.path, "label": cell.label, "version": cell.version,
            "cluster": cell.cluster, "settings": cell.broker_config, "expected": cell.expected,
            "source": cell.source, "runs": n, "as_expected": cell.as_expected,
            "errors": cell.errors, "ok": n > 0 and cell.as_expected == n,
            "anomalies": cell.anomalies,
            "hits": {p: f"{h}/{a}" for p, (h, a) in cell.hits.items()},
            "links": [(run, f"{run}/report.html") for run in cell.runs
                      if (reports_dir / run).is_dir()]}


def format_table(cells: list[Cell]) -> str:
    """The matrix as text: one line per cell."""
    lines = [f"{'case':24} {'version':22} {'expected':18} {'as expected':>11}  anomalies / point hits"]
    for c in cells:
        n = len(c.runs)
        anomalies = ", ".join(f"{k} in {v}" for k, v in sorted(c.anomalies.items())) or "-"
        hits = ", ".join(f"{p} {h}/{a}" for p, (h, a) in c.hits.items()) or "-"
        lines.append(f"{c.case:24} {c.label:22} {c.expected:18} {c.as_expected:>5}/{n:<5}"
                     f"  {anomalies}; {hits}" + (f"; {c.errors} error(s)" if c.errors else ""))
    return "\n".join(lines)
