"""The version matrix: every case of some files on every version its ``versions:`` list names.

:func:`run_matrix` runs each (case, version entry) ``reps`` times, one after another, on
clusters kept between runs (a cluster is recreated only when the version or the broker
settings change) and removed at the end; :func:`write_matrix` keeps the record in
``reports/matrix.json`` (:class:`MatrixRecord`: each entry's runs; the commit, date and
command) and renders ``reports/matrix.html``, a grid of a row per case and a column per
version. A cell says how many runs behaved as the entry states (a buggy version that lost
the write is "as expected"), the anomalies over their limits, what the harness repaired and
how often each armed point was hit. :func:`record_table` makes docs/regressions.md's table
(``bench/regressions_table.py`` writes it there).
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..case import Case, find_case_files, load_case
from ..errors import HarnessError
from ..result import RunResult
from . import DEFAULT_REPORTS, RunOutcome, remove_own_clusters, run_case
from .order import by_cluster, cluster_setting, is_default_setting

__all__ = ["MATRIX_JSON", "RECORD_SCHEMA", "Cell", "CellRun", "MatrixRecord", "cells_of", "format_table",
           "grid", "read_matrix", "record_of", "record_table", "run_matrix", "write_matrix"]

log = logging.getLogger(__name__)
MATRIX_JSON = "matrix.json"
#: The layout of ``matrix.json`` (bumped when a field changes meaning or type).
RECORD_SCHEMA = 1
#: The project's checkout, whose commit a record names.
_PROJECT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class CellRun:
    """One run of a cell, as the record keeps it."""

    run_id: str
    verdict: str
    as_expected: bool
    over: dict[str, int] = field(default_factory=dict)  # judged anomalies over their limits: counts
    repairs: list[str] = field(default_factory=list)  # made while it waited on its cluster
    upkeep: list[str] = field(default_factory=list)  # of the cluster, between runs


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
    #: repair name -> how many times, over the runs (those between runs included)
    repairs: dict[str, int] = field(default_factory=dict)
    outcomes: list[CellRun] = field(default_factory=list)  # each run, in order

    @property
    def label(self) -> str:
        return self.variant or self.version

    @property
    def as_stated(self) -> bool:
        """Every run behaved as the entry states (and there was one)."""
        return bool(self.runs) and self.as_expected == len(self.runs)

    def add(self, result: RunResult) -> None:
        self.runs.append(result.run_id)
        self.as_expected += int(result.as_expected and result.verdict != "error")
        self.errors += int(result.verdict == "error")
        over = {e.name: result.anomalies[e.name] for e in result.expectations
                if not e.ok and e.name in result.anomalies}
        for name in over:
            self.anomalies[name] = self.anomalies.get(name, 0) + 1
        for inj in result.injections or ([result.injection] if result.injection else []):
            hit, armed = self.hits.get(inj.point, [0, 0])
            self.hits[inj.point] = [hit + int(inj.hit), armed + 1]
        for name in result.repairs + result.upkeep:
            self.repairs[name] = self.repairs.get(name, 0) + 1
        self.outcomes.append(CellRun(result.run_id, result.verdict,
                                     result.as_expected and result.verdict != "error", over,
                                     result.repairs, result.upkeep))


@dataclass(frozen=True)
class MatrixRecord:
    """What ``matrix.json`` holds: the cells, and how they were made."""

    cells: list[Cell]
    date: str  # when the record was written, ISO 8601 UTC
    command: str  # the command line that made it
    #: every entry of every case the command takes by default (no paths, no --version)
    full: bool
    commit: str | None = None  # ``git rev-parse HEAD`` of the harness's checkout (None: unknown)
    commit_date: str | None = None  # that commit's date, ISO 8601
    dirty: bool | None = None  # the checkout had uncommitted changes (None: unknown)
    reports: str = str(DEFAULT_REPORTS)  # where the run directories are

    def to_json(self) -> dict[str, Any]:
        """The JSON form: the record's fields, and each cell with its label, whether it is as
        stated and its run directories."""
        head = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "cells"}
        entries = [{**asdict(c), "label": c.label, "as_stated": c.as_stated,
                    "run_dirs": [str(Path(self.reports) / run) for run in c.runs]} for c in self.cells]
        return {"schema": RECORD_SCHEMA, **head, "entries": entries}


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
        remove_own_clusters()
    return [cell for _, cell in cells]



def _git(*args: str) -> str | None:
    """``git args`` in the project's checkout, its output stripped; None without git or one."""
    try:
        done = subprocess.run(["git", "-C", str(_PROJECT), *args], capture_output=True, text=True,
                              timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def record_of(cells: list[Cell], *, command: str, full: bool,
              reports_dir: Path = DEFAULT_REPORTS) -> MatrixRecord:
    """The record of ``cells``, stamped with now, the checkout's commit and ``command``."""
    status, now = _git("status", "--porcelain", "--untracked-files=no"), datetime.now(timezone.utc)
    return MatrixRecord(cells, now.strftime("%Y-%m-%dT%H:%M:%SZ"), command, full,
                        commit=_git("rev-parse", "HEAD") or None,
                        commit_date=_git("log", "-1", "--format=%cI") or None,
                        dirty=None if status is None else bool(status), reports=str(reports_dir))


def write_matrix(cells: list[Cell], reports_dir: Path = DEFAULT_REPORTS, *, command: str = "harness matrix",
                 full: bool = False) -> Path:
    """``matrix.json`` (atomically: :func:`record_of`) and ``matrix.html`` in ``reports_dir``;
    the page's path. ``full``: the cells are every entry the command takes by default."""
    from ..report.render import render_index, render_matrix

    reports_dir.mkdir(parents=True, exist_ok=True)
    record = record_of(cells, command=command, full=full, reports_dir=reports_dir)
    target = reports_dir / MATRIX_JSON
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record.to_json(), indent=2), encoding="utf-8")
    os.replace(tmp, target)
    versions, rows = grid(cells, reports_dir)
    page = render_matrix(reports_dir, versions, rows, record.to_json())
    render_index(reports_dir)
    return page


def read_matrix(path: Path) -> MatrixRecord:
    """The record in ``path`` (a ``matrix.json``, or the reports directory holding one); a
    :class:`HarnessError` naming the file when it is missing, not JSON or of another layout."""
    path = path / MATRIX_JSON if path.is_dir() else path
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise HarnessError(f"{path}: no matrix record (`harness matrix` writes it)") from None
    except (OSError, ValueError) as exc:
        raise HarnessError(f"{path}: unreadable matrix record: {exc}") from None
    if not isinstance(raw, dict) or raw.get("schema") != RECORD_SCHEMA:
        raise HarnessError(f"{path}: not a matrix record of schema {RECORD_SCHEMA} (an older "
                           "harness wrote it, or something else did: run `harness matrix` again)")
    try:
        names = {f.name for f in fields(Cell)}
        cells = [Cell(**{k: v for k, v in e.items() if k in names and k != "outcomes"},
                      outcomes=[CellRun(**o) for o in e.get("outcomes", [])]) for e in raw["entries"]]
        head = {f.name: raw[f.name] for f in fields(MatrixRecord) if f.name != "cells" and f.name in raw}
        return MatrixRecord(cells, **head)
    except (KeyError, TypeError, AttributeError) as exc:
        raise HarnessError(f"{path}: malformed matrix record: {type(exc).__name__}: {exc}") from None


def _version_key(version: str) -> tuple[tuple[int, str], ...]:
    """``0.10.2.2`` before ``0.11.0.3`` before ``3.9.2``: numbers compared as numbers."""
    return tuple((int(p), "") if p.isdigit() else (-1, p) for p in re.split(r"[.-]", version))


def grid(cells: list[Cell], reports_dir: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """The matrix page's grid: its versions (the columns, oldest first) and a row per case
    (in the order given), each with its entries on each version (most have one; a case may
    state two on one version, e.g. with another protocol version)."""
    versions = sorted({c.version for c in cells}, key=_version_key)
    rows: dict[str, dict[str, Any]] = {}
    for c in cells:
        row = rows.setdefault(c.case, {"case": c.case, "path": c.path,
                                       "cells": {v: [] for v in versions}})
        n = len(c.runs)
        row["cells"][c.version].append({
            "label": c.label, "version": c.version, "cluster": c.cluster, "settings": c.broker_config,
            "expected": c.expected, "source": c.source, "runs": n, "as_expected": c.as_expected,
            "errors": c.errors, "ok": c.as_stated, "anomalies": c.anomalies, "repairs": c.repairs,
            "hits": {p: f"{h}/{a}" for p, (h, a) in c.hits.items()},
            "links": [(run, f"{run}/report.html") for run in c.runs if (reports_dir / run).is_dir()]})
    return versions, list(rows.values())


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} in {v}" for k, v in sorted(counts.items())) or "none"  # k in v runs


def format_table(cells: list[Cell]) -> str:
    """The matrix as text: one line per cell."""
    lines = [f"{'case':24} {'version':22} {'expected':18} {'as expected':>11}  "
             "anomalies / point hits / repairs"]
    for c in cells:
        n = len(c.runs)
        hits = ", ".join(f"{p} {h}/{a}" for p, (h, a) in c.hits.items()) or "-"
        repairs = f"; repairs: {_counts(c.repairs)}" if c.repairs else ""
        lines.append(f"{c.case:24} {c.label:22} {c.expected:18} {c.as_expected:>5}/{n:<5}"
                     f"  {_counts(c.anomalies) if c.anomalies else '-'}; {hits}{repairs}"
                     + (f"; {c.errors} error(s)" if c.errors else ""))
    return "\n".join(lines)


def record_table(record: MatrixRecord) -> str:
    """docs/regressions.md's results table (Markdown) of a full record, headed by its date and
    its commit's date (the commit itself is in the record: docs name no commit hash)."""
    if not record.full:
        raise HarnessError(f"a record of `{record.command}` is not a full matrix: the table is made "
                           "from `harness matrix` alone (every entry of every regression case)")
    stated = sum(c.as_stated for c in record.cells)
    commit = (f"at the commit of {record.commit_date}" if record.commit_date else "at an unknown commit")
    lines = [f"`{record.command}`, {record.date}, {commit}"
             + (" with uncommitted changes" if record.dirty else "")
             + f" (`commit` in the record): {stated} of {len(record.cells)} entries as stated.", "",
             "| case | entry | expected | as stated | verdicts | anomalies over their limits (runs) "
             "| repairs |",
             "|---|---|---|---|---|---|---|"]
    for c in record.cells:
        verdicts = ", ".join(o.verdict for o in c.outcomes) or "-"
        mark = f"**{c.as_expected}/{len(c.runs)}**" + ("" if c.as_stated else " (not as stated)")
        lines.append(f"| {c.case} | {c.label} | {c.expected} | {mark} | {verdicts} | "
                     f"{_counts(c.anomalies)} | {_counts(c.repairs)} |")
    return "\n".join(lines)
