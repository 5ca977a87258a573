"""The report pages: one self-contained HTML file per run, and an index of runs.

Pages open offline: inline CSS, inline SVG charts, no scripts, and a
Content-Security-Policy that forbids loading anything. Templates autoescape,
so broker and client strings can never become markup.

Whatever a run directory holds, :func:`render_run` writes a page or raises one
:class:`HarnessError`: values it cannot use are left out and counted on the
page, the charts cover only the run's window (far-off times are counted, not
drawn), every chart has a bounded number of points and ticks, and every table a
bounded number of rows (:mod:`.bounds`). A ``result.json`` of a schema this
harness does not read is the one error that writes no page. Each row of
the index is built on its own, so one bad run is a row saying what is wrong,
and an ``index.html`` the harness did not write is never replaced.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemBytecodeCache, PackageLoader, StrictUndefined
from jinja2.bccache import Bucket
from markupsafe import Markup

from harness.anomalies import ANOMALIES
from harness.errors import HarnessError, InputError
from harness.report.bounds import clip, first_rows, millis
from harness.report.chart import Axis, Chart, line_chart, peak
from harness.report.inputs import OUTSIDE_TIMELINE, Skipped, Window, bulk_window
from harness.report.latency import latency_section
from harness.report.load import (
    LoadedRun,
    Rates,
    TimelineEntry,
    is_run_dir,
    load_run,
    not_a_run_dir,
    result_window,
    run_dirs,
    safe_href,
    scan_history,
    scan_owners,
    scan_timeline,
)
from harness.result import Expectation, open_input

__all__ = ["render_run", "render_index", "render_matrix", "index_is_ours", "INDEX_MARK"]

log = logging.getLogger(__name__)

MAX_EXAMPLES = 5
MAX_PARTITION_CHARTS = 32
#: Most rows of the run page's timeline table (timeline.jsonl, linked, has them all).
MAX_TIMELINE_ROWS = 5000
#: Most messages about result.json values left out that the page lists.
MAX_DROPPED = 20
REPORT_NAME = "report.html"
INDEX_NAME = "index.html"
MATRIX_NAME = "matrix.html"
#: Kinds of left-out input the console names (the page lists every one).
_TOLD = 3
#: No cap on a file of which only the head is read.
_ANY_SIZE = 1 << 62
#: In the head of every index the harness writes; an index.html without it is not replaced.
INDEX_MARK = '<meta name="generator" content="chaos-harness index">'


def show(value: Any) -> str:
    """A table cell for any JSON value: ``—`` for null, compact JSON for containers."""
    if value is None:
        return "\u2014"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def duration(seconds: float | None) -> str:
    """``42.1 s``, ``3 min 05 s`` or ``1 h 02 min``."""
    if seconds is None or not isinstance(seconds, (int, float)) or not -1e15 < seconds < 1e15:
        return "\u2014" if seconds is None else show(seconds)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def utc(stamp: datetime | float | None, fmt: str = "%Y-%m-%d %H:%M:%S UTC") -> str:
    """A datetime or Unix time as UTC text."""
    if stamp is None:
        return "\u2014"
    try:
        if not isinstance(stamp, datetime):
            stamp = datetime.fromtimestamp(stamp, timezone.utc)
        return stamp.astimezone(timezone.utc).strftime(fmt)
    except (OverflowError, ValueError, OSError):  # beyond the years 1..9999
        return "out of range"


class _TemplateCache(FileSystemBytecodeCache):
    """The templates' compiled code, kept between processes: compiling the run page's
    template is about 0.15 s of a small run's ``harness check`` or ``harness report``.
    Jinja checks each entry against the template's source and its own version, and
    writes it atomically; a damaged entry is compiled again, and a cache that cannot be
    written is only a slower report."""

    def load_bytecode(self, bucket: Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except (OSError, EOFError, ValueError, pickle.UnpicklingError):
            bucket.reset()

    def dump_bytecode(self, bucket: Bucket) -> None:
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


def _template_cache() -> _TemplateCache | None:
    """``$XDG_CACHE_HOME/harness/templates`` (``~/.cache/harness/templates``); none where
    it cannot be made."""
    where = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"),
                         "harness", "templates")
    try:
        os.makedirs(where, mode=0o700, exist_ok=True)  # its entries are code this process runs
    except OSError:
        return None
    return _TemplateCache(where)


@lru_cache(maxsize=1)
def _env() -> Environment:
    env = Environment(loader=PackageLoader("harness.report", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                      bytecode_cache=_template_cache(), finalize=clip)
    env.filters.update(show=show, duration=duration, utc=utc, millis=millis, rows=first_rows)
    return env


def _write(path: Path, text: str) -> Path:
    """Write via a temporary file so a reader never sees half a page."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise HarnessError(f"{path}: cannot write: {exc.strerror or exc}") from None
    return path


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):  # a name too long, a NUL byte: no such file
        return False


@dataclass(frozen=True)
class Link:
    label: str
    href: str | None  # None: unsafe path, shown as text
    exists: bool


def _link(run_dir: Path, rel: Any) -> Link:
    label = show(rel)
    href = safe_href(rel)
    return Link(label, href, href is not None and _exists(run_dir / label))


def _files(run: LoadedRun) -> dict[str, list[Link]]:
    """Links to the case file, broker logs and raw data, listed or found on disk."""
    run_dir, result = run.run_dir, run.result
    listed = result.files.get("logs")
    logs = {str(p) for p in listed} if isinstance(listed, list) else set()
    logs |= {f"logs/{p.name}" for p in run_dir.glob("logs/*.log")}
    case = result.files.get("case")
    raw = [run_dir / "result.json", run_dir / "timeline.jsonl", *sorted(run_dir.glob("history/*.jsonl"))]
    data = [p.relative_to(run_dir).as_posix() for p in raw if p.is_file()]
    return {
        "Case": [_link(run_dir, case)] if case else [],
        "Broker logs": [_link(run_dir, rel) for rel in sorted(logs)],
        "Raw data": [_link(run_dir, rel) for rel in data],
    }


def _reset_entries(rates: Rates) -> list[TimelineEntry]:
    """Consumer position resets, one entry per second with the reasons counted."""
    return [
        TimelineEntry(float(second), "reset", "reset", f"consumer reset \u00d7{sum(reasons.values())}",
                      " ".join(f"{reason}={n}" for reason, n in sorted(reasons.items())))
        for second, reasons in sorted(rates.resets.items())
    ]


@dataclass(frozen=True)
class Charts:
    axis: Axis
    main: Chart
    partitions: list[Chart]
    hidden_partitions: int


def _charts(rates: Rates, entries: list[TimelineEntry]) -> Charts | None:
    """The throughput chart and, with more than one partition, per-partition acks."""
    times = [*(rates.span or ()), *(e.t for e in entries)]
    if not times:
        return None
    axis = Axis.covering(min(times), max(times))
    marked = [e for e in entries if e.marker]
    lines = [("acks/s", "acks", rates.acks), ("polls/s", "polls", rates.polls)]
    if rates.errors:
        lines.append(("fail+info/s", "errors", rates.errors))
    bands = [(*rates.recovery, "recovery read")] if rates.recovery else []
    main = line_chart("timeline-chart", "Produce acks and consume polls", axis, lines,
                      entries=marked, bands=bands)
    keys = sorted(set(rates.by_partition) | set(rates.sends_by_partition))
    if len(keys) < 2:
        return Charts(axis, main, [], 0)
    shown = keys[:MAX_PARTITION_CHARTS]
    y_max = peak(axis, [*(rates.by_partition.get(k, Counter()) for k in shown),
                        *(rates.sends_by_partition.get(k, Counter()) for k in shown)])
    shared = [e for e in marked if e.kind in ("fault", "inject", "mark")]

    def lines_of(key: tuple[str, int]) -> list[tuple[str, str, Counter[int]]]:
        out = [("acks/s", "acks", rates.by_partition.get(key, Counter()))]
        if key in rates.sends_by_partition:
            out.append(("sends/s", "polls", rates.sends_by_partition[key]))
        return out

    def stall_bands(key: tuple[str, int]) -> list[tuple[float, float, str]]:
        return [(lo, hi, f"blocked {hi - lo:.1f}s") for lo, hi, _ in rates.stall_bands.get(key, [])
                if hi - lo >= 0.5]

    partitions = [
        line_chart(f"partition-{i}", f"{topic}/{partition}" if partition >= 0
                   else f"{topic} (partition not known)", axis, lines_of((topic, partition)),
                   entries=shared + [e for e in marked if e.partition == (topic, partition)],
                   bands=stall_bands((topic, partition)),
                   width=360, plot_height=80, labels=False, y_max=y_max, x_ticks=4)
        for i, (topic, partition) in enumerate(shown)
    ]
    return Charts(axis, main, partitions, len(keys) - len(shown))


def _flow_rows(rates: Rates, owners: dict[int, list[str]], t0: float | None) -> list[dict[str, Any]]:
    """Per producer and partition: owners, blocked send calls, longest send and ack gaps."""
    def rel(t: float | None) -> str | None:
        return None if t is None or t0 is None else f"+{t - t0:.1f}s"

    rows = []
    for (client, partition), f in sorted(rates.flows.items()):
        rows.append({
            "client": client, "partition": partition if partition >= 0 else "not known",
            "owners": " \u2192 ".join(owners.get(partition, [])) or None,
            "sends": f.sends, "acks": f.acks, "stalls": f.stalls,
            "blocked_s": round(f.blocked_s, 2), "longest_block": round(f.longest_block, 2),
            "longest_block_at": rel(f.longest_block_at),
            "send_gap": round(f.send_gap, 2), "send_gap_at": rel(f.send_gap_at),
            "ack_gap": round(f.ack_gap, 2), "ack_gap_at": rel(f.ack_gap_at),
        })
    return rows


def _zero(value: Any) -> bool:
    """Whether a count is 0 (not ``False``, which JSON keeps apart)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and value == 0


#: Most names a folded line lists.
MAX_FOLDED_NAMES = 30


@dataclass(frozen=True)
class Folded:
    """Rows of a table that all say the same (an anomaly held at 0), as one line: ``names``
    (at most :data:`MAX_FOLDED_NAMES`) and ``count`` (all of them)."""

    names: list[str]
    count: int

    def __bool__(self) -> bool:
        return bool(self.count)

    @property
    def more_names(self) -> int:
        return self.count - len(self.names)


def _folded(names: list[str]) -> Folded:
    return Folded(names[:MAX_FOLDED_NAMES], len(names))


def _expectation_rows(run: LoadedRun) -> tuple[list[Expectation], Folded]:
    """The judged expectations the page lists, those not met first, and the anomaly bounds that
    held at 0, folded into one line (a case bounds twenty anomalies; the page is read for what
    failed and what the case stated)."""
    result = run.result
    at_zero: list[Expectation] = []
    rest: list[Expectation] = []
    for e in result.expectations:
        zero = e.ok and (e.name in ANOMALIES or e.name in result.anomalies) and _zero(e.observed)
        (at_zero if zero else rest).append(e)
    return [e for e in rest if not e.ok] + [e for e in rest if e.ok], _folded([e.name for e in at_zero])


@dataclass(frozen=True)
class AnomalyRow:
    """One kind of anomaly on the page: its count, whether the case only observes it, the
    judge's expectation of it (None: not judged), its first examples and how many more."""

    kind: str
    count: int | None
    observed: bool
    expectation: Expectation | None
    examples: list[dict[str, Any]]
    more: int

    @property
    def unmet(self) -> bool:
        return self.expectation is not None and not self.expectation.ok


def _anomaly_rows(run: LoadedRun) -> tuple[list[AnomalyRow], Folded]:
    """Anomaly rows: every kind counted or exemplified, those whose expectation is not met
    first; kinds counted 0 without an example fold into one line (observed ones marked)."""
    result = run.result
    rows = [AnomalyRow(kind, result.anomalies.get(kind), kind in result.observed, run.expectation(kind),
                       result.examples.get(kind, [])[:MAX_EXAMPLES],
                       max(len(result.examples.get(kind, [])) - MAX_EXAMPLES, 0))
            for kind in dict.fromkeys([*result.anomalies, *result.examples])]
    unmet: list[AnomalyRow] = []
    listed: list[AnomalyRow] = []
    zero: list[AnomalyRow] = []
    for r in rows:
        (unmet if r.unmet else zero if _zero(r.count) and not r.examples else listed).append(r)
    return unmet + listed, _folded([r.kind + (" (observed)" if r.observed else "") for r in zero])


def _uncommitted(row: dict[str, Any]) -> Any:
    leo, hw = row.get("log_end_offset"), row.get("high_watermark")
    return leo - hw if isinstance(leo, int) and isinstance(hw, int) else None


@dataclass(frozen=True)
class Reading:
    """What the page shows of the run's histories and timeline, and what was left out."""

    rates: Rates
    entries: list[TimelineEntry]  # timeline and consumer resets, in time order
    window: Window | None
    skipped: Skipped


def _inside(times: Counter[int], window: Window) -> int:
    return sum(n for second, n in times.items() if window.lo - 1 < second <= window.hi)


def _read(run: LoadedRun) -> Reading:
    """Histories and timeline within the run's window.

    The window is result.json's started .. finished (:func:`result_window`), unless that
    holds less than half of the recorded events; then (or without one) the bulk of the
    events (:func:`bulk_window`). Histories are read once, twice only when the first
    window was wrong or the bulk leaves events out.
    """
    skipped = Skipped()
    timeline = scan_timeline(run.run_dir, skipped)
    first = window = result_window(run)
    rates = scan_history(run.run_dir, first)
    times = rates.times + Counter(int(e.t) for e in timeline)
    total = sum(times.values())
    if first is None or 2 * _inside(times, first) < total:
        window = bulk_window(times)
        if first is not None or (window is not None and _inside(times, window) < total):
            rates = scan_history(run.run_dir, window)
    skipped.counts.update(rates.skipped.counts)
    if window is not None:
        far = sum(e.t not in window for e in timeline)
        if far:
            skipped.add("timeline.jsonl", OUTSIDE_TIMELINE, far)
            timeline = [e if e.t in window else replace(e, marker=False, outside=True) for e in timeline]
    entries = sorted([*timeline, *_reset_entries(rates)], key=lambda e: e.t)
    return Reading(rates, entries, window, skipped)


def _tell_left_out(run: LoadedRun, skipped: Skipped) -> None:
    """Says on the console what the page leaves out (the page lists it all), so that
    ``harness report`` is not silent about a FIFO history or a result.json it could not use."""
    if run.problem:
        log.warning("report: %s: %s (the page shows the verdict unknown)", run.run_dir / "result.json",
                    run.problem.removeprefix("result.json: "))
    if skipped:
        rows = skipped.rows()
        shown = "; ".join(f"{where}: {why} ({n})" for where, why, n in rows[:_TOLD])
        more = f"; and {len(rows) - _TOLD} more" if len(rows) > _TOLD else ""
        log.warning("report: %d recorded line(s), event(s) or file(s) could not be used and are "
                    "left out of the page: %s%s", skipped.total, shown, more)


def _run_page(run_dir: Path) -> str:
    run = load_run(run_dir)
    reading = _read(run)
    _tell_left_out(run, reading.skipped)
    expectations, held_at_zero = _expectation_rows(run)
    anomalies, anomalies_at_zero = _anomaly_rows(run)
    rates, entries = reading.rates, reading.entries
    charts = _charts(rates, [e for e in entries if not e.outside])
    files = _files(run)
    logs = {Path(link.label).stem: link for link in files["Broker logs"] if link.href}
    return _env().get_template("run.html.j2").render(
        run=run,
        r=run.result,
        dropped=run.dropped[:MAX_DROPPED],
        more_dropped=max(len(run.dropped) - MAX_DROPPED, 0),
        skipped=reading.skipped,
        window=reading.window,
        outside=rates.outside,
        expectations=expectations,
        held_at_zero=held_at_zero,
        anomalies=anomalies,
        anomalies_at_zero=anomalies_at_zero,
        charts=charts,
        t0=charts.axis.start if charts else None,
        entries=entries[:MAX_TIMELINE_ROWS],
        more_entries=max(len(entries) - MAX_TIMELINE_ROWS, 0),
        key_order=sorted(rates.key_order.values(), key=lambda k: k.subscription),
        flows=_flow_rows(rates, scan_owners(run_dir), charts.axis.start if charts else None),
        replicas=[{**row, "uncommitted": _uncommitted(row)} for row in run.result.replicas],
        latency=latency_section(run.result.latency, [e for e in entries if not e.outside]),
        transactions=_transactions(run.result.transactions, run.result.counts),
        files=files,
        logs=logs,
        generated=datetime.now(timezone.utc),
    )


_TXN_COUNTS = ("txn-committed", "txn-aborted", "txn-unknown", "txn-seen-committed",
               "aborted-uncommitted-read", "eos-copied")
_TXN_FIELDS = ("tx", "client", "state", "ids", "recovered", "read_committed", "read_uncommitted")


def _transactions(raw: Any, counts: Any) -> dict[str, Any] | None:
    """``result.transactions`` for the page (docs/result.md): the transaction counts and
    the listed transactions; what is not well-formed is left out."""
    if not isinstance(raw, dict):
        return None
    counts = counts if isinstance(counts, dict) else {}
    shown = []
    for t in raw.get("shown") or []:
        if isinstance(t, dict):
            row = {k: t.get(k) if isinstance(t.get(k), (str, int)) and not isinstance(t.get(k), bool)
                   else None for k in _TXN_FIELDS}
            row["flagged"] = t.get("flagged") is True
            shown.append(row)
    total = raw.get("total") if isinstance(raw.get("total"), int) else None
    return {"counts": {k: counts.get(k) for k in _TXN_COUNTS if isinstance(counts.get(k), int)
                       and (k != "eos-copied" or counts[k])},  # a copier's only
            "shown": shown, "total": total}


def _bug(what: Path, exc: Exception) -> HarnessError:
    """A failure the report did not foresee, as one message instead of a traceback."""
    return HarnessError(f"{what}: the report could not be rendered ({type(exc).__name__}: "
                        f"{str(exc)[:300]}); this is a bug in harness.report, please report it")


def render_run(run_dir: str | os.PathLike[str]) -> Path:
    """Write ``run_dir/report.html`` for one run and return its path.

    ``run_dir`` must be a run directory (:func:`~harness.report.load.is_run_dir`: it holds
    ``result.json``, ``timeline.jsonl`` or ``history/``); anything it holds renders.
    """
    run_dir = Path(run_dir)
    try:
        exists = run_dir.is_dir()
    except OSError as exc:
        raise HarnessError(f"{run_dir}: unreadable: {exc.strerror or exc}") from None
    if not exists:
        raise HarnessError(f"{run_dir}: no such run directory")
    if not is_run_dir(run_dir):
        raise HarnessError(not_a_run_dir(run_dir))
    try:
        html = _run_page(run_dir)
    except HarnessError:
        raise
    except Exception as exc:  # never a traceback (the fuzz test looks for these)
        raise _bug(run_dir, exc) from exc
    return _write(run_dir / REPORT_NAME, html)


def index_is_ours(path: Path) -> bool:
    """Whether ``path`` (an ``index.html``) may be written: it is absent, or an index the
    harness wrote (:data:`INDEX_MARK` in its head, or the title and Content-Security-Policy
    of an index written before the mark existed). A symlink or anything else is left alone."""
    if path.is_symlink():
        return False
    if not path.exists():
        return True
    try:  # only its head is read, so any size will do; a FIFO or a device is not opened
        with open_input(path, _ANY_SIZE, "an index") as fh:
            head = fh.read(4096).decode("utf-8", errors="replace")
    except (InputError, OSError):  # a FIFO, a directory, no permission
        return False
    return INDEX_MARK in head or ("<title>Chaos runs (" in head and "default-src 'none'" in head)


@dataclass(frozen=True)
class IndexRow:
    """One run of the index, rendered on its own so that a bad run cannot break the others."""

    run_id: str
    verdict: str
    sort_time: float
    html: Markup


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _index_row(run_dir: Path) -> IndexRow:
    macros = _env().get_template("macros.html.j2").module
    try:
        run = load_run(run_dir)
        html = macros.index_row(run, _exists(run_dir / REPORT_NAME))  # type: ignore[attr-defined]
        return IndexRow(run.result.run_id, run.verdict, run.sort_time, html)
    except Exception as exc:  # this run's row says what is wrong; the others are unaffected
        problem = f"cannot be shown: {type(exc).__name__}: {str(exc)[:300]}"
        return IndexRow(run_dir.name, "unknown", _mtime(run_dir),
                        macros.index_broken_row(run_dir.name, problem))  # type: ignore[attr-defined]


def render_index(reports_dir: str | os.PathLike[str]) -> Path | None:
    """Write ``reports_dir/index.html`` listing every run directory in it, newest first, and
    return its path; None (nothing written) when an ``index.html`` is there that the harness
    did not write (:func:`index_is_ours`)."""
    reports_dir = Path(reports_dir)
    if not reports_dir.is_dir():
        raise HarnessError(f"{reports_dir}: no such reports directory")
    target = reports_dir / INDEX_NAME
    if not index_is_ours(target):
        return None
    rows = sorted((_index_row(d) for d in run_dirs(reports_dir)),
                  key=lambda r: (r.sort_time, r.run_id), reverse=True)
    try:
        html = _env().get_template("index.html.j2").render(
            rows=rows,
            matrix=_exists(reports_dir / MATRIX_NAME),
            totals=Counter(r.verdict for r in rows),
            generated=datetime.now(timezone.utc),
        )
    except Exception as exc:
        raise _bug(reports_dir, exc) from exc
    return _write(target, html)


def render_matrix(reports_dir: str | os.PathLike[str], versions: list[str], rows: list[dict[str, Any]],
                  record: dict[str, Any]) -> Path:
    """Write ``reports_dir/matrix.html``: a grid of a row per case and a column per version,
    each cell its entries on that version (:func:`harness.run.matrix.grid`), colored by
    whether they behaved as stated and linked to their runs; ``record``: the JSON record's
    head (date, commit, command)."""
    target = Path(reports_dir) / MATRIX_NAME
    try:
        html = _env().get_template("matrix.html.j2").render(versions=versions, rows=rows, record=record,
                                                            generated=datetime.now(timezone.utc))
    except Exception as exc:
        raise _bug(Path(reports_dir), exc) from exc
    return _write(target, html)
