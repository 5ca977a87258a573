"""The report pages: one self-contained HTML file per run, and an index of runs.

Pages open offline: inline CSS, inline SVG charts, no scripts, and a
Content-Security-Policy that forbids loading anything. Templates autoescape,
so broker and client strings can never become markup.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from harness.errors import HarnessError
from harness.report.chart import Axis, Chart, line_chart, peak
from harness.report.load import (
    LoadedRun,
    Rates,
    TimelineEntry,
    load_run,
    safe_href,
    scan_history,
    scan_owners,
    scan_timeline,
)

__all__ = ["render_run", "render_index"]

MAX_EXAMPLES = 5
MAX_PARTITION_CHARTS = 32
REPORT_NAME = "report.html"
INDEX_NAME = "index.html"


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
    if seconds is None:
        return "\u2014"
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
    if not isinstance(stamp, datetime):
        stamp = datetime.fromtimestamp(stamp, timezone.utc)
    return stamp.astimezone(timezone.utc).strftime(fmt)


@lru_cache(maxsize=1)
def _env() -> Environment:
    env = Environment(loader=PackageLoader("harness.report", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(show=show, duration=duration, utc=utc)
    return env


def _write(path: Path, text: str) -> Path:
    """Write via a temporary file so a reader never sees half a page."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


@dataclass(frozen=True)
class Link:
    label: str
    href: str | None  # None: unsafe path, shown as text
    exists: bool


def _link(run_dir: Path, rel: Any) -> Link:
    label = show(rel)
    href = safe_href(rel)
    return Link(label, href, href is not None and (run_dir / label).exists())


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
        line_chart(f"partition-{i}", f"{topic}/{partition}", axis, lines_of((topic, partition)),
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
            "client": client, "partition": partition,
            "owners": " \u2192 ".join(owners.get(partition, [])) or None,
            "sends": f.sends, "acks": f.acks, "stalls": f.stalls,
            "blocked_s": round(f.blocked_s, 2), "longest_block": round(f.longest_block, 2),
            "longest_block_at": rel(f.longest_block_at),
            "send_gap": round(f.send_gap, 2), "send_gap_at": rel(f.send_gap_at),
            "ack_gap": round(f.ack_gap, 2), "ack_gap_at": rel(f.ack_gap_at),
        })
    return rows


def _anomaly_rows(run: LoadedRun) -> list[dict[str, Any]]:
    """Anomaly rows: every kind counted or exemplified, with its first examples and the
    judge's expectation of it (None for a kind the case only observes)."""
    result = run.result
    kinds = dict.fromkeys([*result.anomalies, *result.examples])
    return [
        {"kind": kind, "count": result.anomalies.get(kind), "observed": kind in result.observed,
         "expectation": run.expectation(kind),
         "examples": result.examples.get(kind, [])[:MAX_EXAMPLES],
         "more": max(len(result.examples.get(kind, [])) - MAX_EXAMPLES, 0)}
        for kind in kinds
    ]


def _uncommitted(row: dict[str, Any]) -> Any:
    leo, hw = row.get("log_end_offset"), row.get("high_watermark")
    return leo - hw if isinstance(leo, int) and isinstance(hw, int) else None


def render_run(run_dir: str | os.PathLike[str]) -> Path:
    """Write ``run_dir/report.html`` for one run and return its path."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise HarnessError(f"{run_dir}: no such run directory")
    run = load_run(run_dir)
    rates = scan_history(run_dir)
    entries = sorted([*scan_timeline(run_dir), *_reset_entries(rates)], key=lambda e: e.t)
    charts = _charts(rates, entries)
    files = _files(run)
    logs = {Path(link.label).stem: link for link in files["Broker logs"] if link.href}
    html = _env().get_template("run.html.j2").render(
        run=run,
        r=run.result,
        anomalies=_anomaly_rows(run),
        charts=charts,
        t0=charts.axis.start if charts else None,
        entries=entries,
        key_order=sorted(rates.key_order.values(), key=lambda k: k.subscription),
        flows=_flow_rows(rates, scan_owners(run_dir), charts.axis.start if charts else None),
        replicas=[{**row, "uncommitted": _uncommitted(row)} for row in run.result.replicas],
        files=files,
        logs=logs,
        generated=datetime.now(timezone.utc),
    )
    return _write(run_dir / REPORT_NAME, html)


def render_index(reports_dir: str | os.PathLike[str]) -> Path:
    """Write ``reports_dir/index.html`` listing every run, newest first, and return its path."""
    reports_dir = Path(reports_dir)
    if not reports_dir.is_dir():
        raise HarnessError(f"{reports_dir}: no such reports directory")
    runs = sorted((load_run(d) for d in reports_dir.iterdir()
                   if d.is_dir() and ((d / "result.json").is_file() or (d / "history").is_dir())),
                  key=lambda r: (r.sort_time, r.result.run_id), reverse=True)
    html = _env().get_template("index.html.j2").render(
        runs=[(r, (r.run_dir / REPORT_NAME).is_file()) for r in runs],
        totals=Counter(r.verdict for r in runs),
        generated=datetime.now(timezone.utc),
    )
    return _write(reports_dir / INDEX_NAME, html)
