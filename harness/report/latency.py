"""The page's latency and availability section, from ``result.latency`` (docs/result.md).

Each part is checked on its own: a hand-edited, older or corrupt ``result.json`` renders
what is well-formed and leaves the rest out. The tables are bounded (:mod:`.bounds`); the
chart draws the windows of the run's first :data:`~harness.report.inputs.MAX_RUN_S` and
clamps latencies to its scale (:func:`~harness.report.chart.latency_chart`), so that no
value, however large, keeps the page from being written.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from harness.report.bounds import first_rows
from harness.report.chart import Axis, Chart, latency_chart
from harness.report.inputs import MAX_RUN_S
from harness.report.load import TimelineEntry

__all__ = ["latency_section"]

_STATS = ("n", "p50", "p90", "p99", "p999", "max")
#: the chart's lines: (name, metric, statistic, tone)
_LINES = (("send p50", "send", "p50", "lat-p50"), ("send p99", "send", "p99", "lat-p99"),
          ("send max", "send", "max", "lat-max"), ("end-to-end p99", "e2e", "p99", "lat-e2e"),
          ("publish delay p99", "delay", "p99", "lat-delay"))


def _number(v: Any) -> bool:
    """A finite JSON number (not a boolean; an integer a float can hold)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an integer beyond any float
        return False


def _stats(raw: Any) -> dict[str, Any] | None:
    """One latency summary of result.json, numbers only (anything else shows as '-')."""
    if not isinstance(raw, dict):
        return None
    return {k: raw.get(k) if _number(raw.get(k)) else None for k in _STATS}


def _objects(raw: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The objects of the list ``raw[key]`` (nothing when it is not a list)."""
    items = raw.get(key)
    return [x for x in items if isinstance(x, dict)] if isinstance(items, list) else []


def _pair(x: Any) -> dict[str, Any]:
    x = x if isinstance(x, dict) else {}
    return {"send": _stats(x.get("send")), "e2e": _stats(x.get("e2e")), "delay": _stats(x.get("delay"))}


def latency_section(raw: Any, entries: Sequence[TimelineEntry] = ()) -> dict[str, Any] | None:
    """``result.latency`` as the page shows it (None: not measured). ``entries``: the
    timeline's, for the fault markers of the chart. The per-partition, per-fault and
    per-window tables are :class:`~harness.report.bounds.Rows`."""
    if not isinstance(raw, dict):
        return None
    phases: dict[str, Any] = raw["phases"] if isinstance(raw.get("phases"), dict) else {}
    rows = [{"name": "whole run", **_pair(raw)}]
    rows += [{"name": name, **_pair(phases[name])} for name in ("warm-up", "before", "during", "after")
             if name in phases]
    windows = [{"t": w.get("t"), **_pair(w)} for w in _objects(raw, "windows") if _number(w.get("t"))]
    faults = [{"t": f.get("t"), "action": f.get("action"), "node": f.get("node"), "sending": f.get("sending"),
               "max": f.get("max_unavailable_s"), "partitions": first_rows(_objects(f, "partitions"))}
              for f in _objects(raw, "availability")]
    during = raw.get("during") if isinstance(raw.get("during"), list) else None
    partitions = first_rows({"name": f"{p.get('client') or ''} {p.get('topic')}-{p.get('partition')}".strip(),
                             **_pair(p)} for p in _objects(raw, "partitions"))
    delay = any((r["delay"] or {}).get("n") for r in rows)
    return {"rows": rows, "partitions": partitions, "windows": first_rows(windows),
            "faults": first_rows(faults), "during": during, "window_s": raw.get("window_s"),
            "max_unavailable": raw.get("max_unavailable_s"), "delay": delay,
            "chart": _chart(raw.get("start"), raw.get("window_s"), windows, during, entries, delay)}


def _chart(start: Any, window_s: Any, windows: list[dict[str, Any]], during: list[Any] | None,
           entries: Sequence[TimelineEntry], delay: bool) -> Chart | None:
    """Percentiles per window over time (log scale), the faults as markers, the phase
    *during* shaded; None with fewer than two windows measured in the run's first
    :data:`MAX_RUN_S` (later ones, a corrupt time, are left off the chart and counted in
    its note)."""
    if not (_number(start) and _number(window_s) and 0 < window_s <= MAX_RUN_S):
        return None
    drawn = [w for w in windows if 0 <= w["t"] <= MAX_RUN_S]
    if len(drawn) < 2:
        return None
    first, last = start, start + max(w["t"] for w in drawn) + window_s
    lines = []
    for name, metric, stat, tone in _LINES:
        if metric == "delay" and not delay:
            continue
        pts = [(start + w["t"] + window_s / 2, float(w[metric][stat])) for w in drawn
               if w[metric] and w[metric][stat] is not None]
        if pts:
            total = sum(w[metric]["n"] or 0 for w in drawn if w[metric])
            lines.append((name, tone, pts, int(total) if math.isfinite(total) else 0))
    if not lines:
        return None
    axis = Axis.covering(first, last)
    marks = [e for e in entries
             if e.marker and e.kind in ("fault", "inject", "mark") and first <= e.t <= last]
    bands = []
    if during and _number(during[0]):
        until = start + during[1] if len(during) > 1 and _number(during[1]) else last
        bands.append((start + during[0], until, "faults in force"))
    note = "log scale; ms by invoke time"
    if len(drawn) < len(windows):
        note += f"; {len(windows) - len(drawn)} window(s) not from the run's first days left off"
    return latency_chart("latency-chart", f"Latency per {window_s:g} s window of invoke time", axis, lines,
                         entries=marks, bands=bands, note=note)
