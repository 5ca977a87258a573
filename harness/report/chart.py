"""Rate-over-time line charts as plain geometry, drawn as inline SVG by the template.

Python does the arithmetic (buckets, scales, ticks, label lanes); the Jinja
macro only emits elements, so every label goes through autoescaping.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from harness.report.load import TimelineEntry

__all__ = ["Axis", "Band", "Chart", "Marker", "Series", "latency_chart", "line_chart", "peak", "clock"]

#: Most points per line; longer runs are averaged over wider buckets.
MAX_POINTS = 1200
#: Most lines in a merged marker's hover title (the timeline table lists them all).
MAX_TITLE_LINES = 20
LANE_HEIGHT = 14
MAX_LANES = 4
CHAR_WIDTH = 6.3  # average advance of the 11px sans-serif label font
LEFT, RIGHT_PAD, BOTTOM = 52.0, 14.0, 26.0
#: Marker tones drawn as a tick on the time axis, never with a label row.
TICK_TONES = frozenset({"reset"})
_TICK_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


def clock(seconds: float, span: float) -> str:
    """An axis label: ``42s`` on short axes, ``2:05`` under an hour, else ``1:02:05``."""
    s = int(round(seconds))
    if span < 120:
        return f"{s}s"
    hours, rest = divmod(s, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if span >= 3600 else f"{s // 60}:{s % 60:02d}"


def _si(value: float) -> str:
    for factor, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.1f}".removesuffix(".0") + suffix
    return f"{value:.1f}".removesuffix(".0")


def _label_width(label: str) -> float:
    return len(label) * CHAR_WIDTH + 8


def _nice_step(raw: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10^k at least ``raw``."""
    magnitude = 10.0 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)


@dataclass(frozen=True)
class Axis:
    """The shared time axis: ``buckets`` buckets of ``step`` whole seconds from ``start``."""

    start: int
    step: int
    buckets: int

    @classmethod
    def covering(cls, first: float, last: float) -> Axis:
        """At most :data:`MAX_POINTS` buckets from ``first`` to ``last``, however far apart."""
        if not (math.isfinite(first) and math.isfinite(last)) or last < first:
            raise ValueError(f"no time axis from {first} to {last}")
        start = math.floor(first)
        seconds = math.floor(last) - start + 1
        step = -(-seconds // MAX_POINTS)
        return cls(start, step, -(-seconds // step))

    @property
    def seconds(self) -> int:
        return self.step * self.buckets

    def bucket(self, t: float) -> int:
        return min(max(int((t - self.start) // self.step), 0), self.buckets - 1)

    def rates(self, counts: Counter[int]) -> list[float]:
        """Events per second in each bucket (zero where nothing happened)."""
        sums = [0] * self.buckets
        for second, n in counts.items():
            sums[self.bucket(second)] += n
        return [n / self.step for n in sums]


def peak(axis: Axis, counters: Iterable[Counter[int]]) -> float:
    """The highest per-second rate of any of ``counters`` on ``axis``."""
    return max((max(axis.rates(c), default=0.0) for c in counters), default=0.0)


@dataclass(frozen=True)
class Series:
    name: str
    tone: str
    points: str  # SVG polyline points
    total: int


@dataclass(frozen=True)
class Marker:
    """A vertical line at ``x`` from ``y0`` down to the axis; a label when ``lane`` >= 0."""

    x: float
    y0: float
    tone: str
    label: str
    title: str
    lane: int
    anchor: str  # start | end

    @property
    def label_y(self) -> float:
        return self.y0 + 10


@dataclass(frozen=True)
class Band:
    """A shaded time span; its label sits inside the band's right edge if it would overflow."""

    x0: float
    x1: float
    label: str
    right: float

    @property
    def anchor(self) -> str:
        return "end" if self.x0 + _label_width(self.label) > self.right else "start"

    @property
    def label_x(self) -> float:
        return self.x1 - 4 if self.anchor == "end" else self.x0 + 4


@dataclass(frozen=True)
class Chart:
    id: str
    title: str
    width: int
    height: int
    left: float
    top: float
    right: float
    bottom: float
    x_ticks: list[tuple[float, str]]
    y_ticks: list[tuple[float, str]]
    series: list[Series]
    markers: list[Marker]
    bands: list[Band]
    note: str


def _group(axis: Axis, entries: Iterable[TimelineEntry]) -> list[tuple[float, str, str, str]]:
    """Markers of the same tone in the same bucket merged: (t, tone, label, title)."""
    groups: dict[tuple[str, int], list[TimelineEntry]] = {}
    for entry in entries:
        groups.setdefault((entry.tone, axis.bucket(entry.t)), []).append(entry)
    merged = []
    for (tone, _), items in groups.items():
        label = items[0].label if len(items) == 1 else f"{items[0].label} +{len(items) - 1}"
        title = "\n".join(f"+{e.t - axis.start:.1f}s {e.label} {e.detail}".rstrip()
                          for e in items[:MAX_TITLE_LINES])
        if len(items) > MAX_TITLE_LINES:
            title += f"\n+{len(items) - MAX_TITLE_LINES} more in the timeline table"
        merged.append((items[0].t, tone, label, title))
    return sorted(merged)


def _lanes(placed: Sequence[tuple[float, str, str]], right: float) -> list[tuple[int, str]]:
    """Greedy label rows: (lane, anchor) per (x, tone, label), avoiding overlaps where possible."""
    occupied: list[list[tuple[float, float]]] = []
    result = []
    for x, tone, label in placed:
        if tone in TICK_TONES:
            result.append((-1, "start"))
            continue
        width = _label_width(label)
        anchor = "end" if x + width > right else "start"
        span = (x - width, x) if anchor == "end" else (x, x + width)
        free = [i for i, row in enumerate(occupied)
                if all(span[1] <= a or span[0] >= b for a, b in row)]
        if free:
            lane = free[0]
        elif len(occupied) < MAX_LANES:
            occupied.append([])
            lane = len(occupied) - 1
        else:
            lane = min(range(MAX_LANES), key=lambda i: len(occupied[i]))
        occupied[lane].append(span)
        result.append((lane, anchor))
    return result


def line_chart(chart_id: str, title: str, axis: Axis, lines: Sequence[tuple[str, str, Counter[int]]],
               *, entries: Iterable[TimelineEntry] = (), bands: Iterable[tuple[float, float, str]] = (),
               width: int = 1100, plot_height: int = 240, labels: bool = True,
               y_max: float | None = None, x_ticks: int = 10) -> Chart:
    """A chart of ``lines`` (name, tone, per-second counts) with timeline ``entries`` as markers.

    ``y_max`` fixes the scale (shared by small multiples); ``labels`` draws
    marker labels in rows above the plot, otherwise only hover titles.
    """
    right = width - RIGHT_PAD
    x_of = _x_scale(axis, right)
    grouped, lanes, top = _placed(axis, entries, labels, right, x_of)
    bottom = top + plot_height

    rates = [axis.rates(counts) for _, _, counts in lines]
    highest = max(y_max if y_max is not None else max((v for r in rates for v in r), default=0.0), 1.0)
    scale_step = _nice_step(highest / 4)
    y_steps = math.ceil(highest / scale_step)
    y_top = scale_step * y_steps

    def y_of(v: float) -> float:
        return bottom - v / y_top * plot_height

    series = [
        Series(name, tone, " ".join(f"{x_of(axis.start + (i + 0.5) * axis.step):.1f},{y_of(v):.1f}"
                                    for i, v in enumerate(values)), sum(counts.values()))
        for (name, tone, counts), values in zip(lines, rates, strict=True)
    ]

    return Chart(
        id=chart_id, title=title, width=width, height=int(bottom + BOTTOM),
        left=LEFT, top=top, right=right, bottom=bottom,
        x_ticks=_x_ticks(axis, x_of, x_ticks),
        y_ticks=[(y_of(i * scale_step), _si(i * scale_step)) for i in range(y_steps + 1)],
        series=series,
        markers=_markers(grouped, lanes, top, bottom, x_of),
        bands=[Band(x_of(lo), max(x_of(hi), x_of(lo) + 2), label, right) for lo, hi, label in bands],
        note="per second" if axis.step == 1 else f"per second, {axis.step} s averages",
    )


def _x_scale(axis: Axis, right: float) -> Callable[[float], float]:
    span = right - LEFT

    def x_of(t: float) -> float:
        return LEFT + min(max((t - axis.start) / axis.seconds, 0.0), 1.0) * span
    return x_of


_Grouped = list[tuple[float, str, str, str]]


def _placed(axis: Axis, entries: Iterable[TimelineEntry], labels: bool, right: float,
            x_of: Callable[[float], float]) -> tuple[_Grouped, list[tuple[int, str]], float]:
    """The markers (merged per bucket), their label lanes, and the plot's top below them."""
    grouped = _group(axis, entries)
    lanes = (_lanes([(x_of(t), tone, label) for t, tone, label, _ in grouped], right) if labels
             else [(-1, "start")] * len(grouped))
    return grouped, lanes, 10.0 + LANE_HEIGHT * (max((lane for lane, _ in lanes), default=-1) + 1)


def _markers(grouped: _Grouped, lanes: list[tuple[int, str]], top: float, bottom: float,
             x_of: Callable[[float], float]) -> list[Marker]:
    def y0_of(tone: str, lane: int) -> float:
        if lane >= 0:
            return 6.0 + LANE_HEIGHT * lane
        return bottom - 10 if tone in TICK_TONES else top

    return [Marker(x_of(t), y0_of(tone, lane), tone, label, title, lane, anchor)
            for (t, tone, label, title), (lane, anchor) in zip(grouped, lanes, strict=True)]


def _x_ticks(axis: Axis, x_of: Callable[[float], float], x_ticks: int) -> list[tuple[float, str]]:
    # at most x_ticks + 1 ticks, however long the axis: past the longest step, whole multiples of it
    tick = next((s for s in _TICK_STEPS if axis.seconds / s <= x_ticks),
                _TICK_STEPS[-1] * -(-axis.seconds // (_TICK_STEPS[-1] * x_ticks)))
    return [(x_of(axis.start + s), clock(s, axis.seconds)) for s in range(0, axis.seconds + 1, tick)]


def _ms(value: float) -> str:
    return f"{value / 1000:g} s" if value >= 1000 else f"{value:g} ms"


#: The latency scale's floor and ceiling in ms: values beyond are drawn on its edge (a run's
#: latencies lie far inside; a corrupt 1e308 would otherwise make 300 decades, or overflow).
LATENCY_FLOOR_MS, LATENCY_CEILING_MS = 0.01, 1e8


def _thinned(points: Iterable[tuple[float, float]],
             x_of: Callable[[float], float]) -> list[tuple[float, float]]:
    """The finite points, at most one per pixel column (the highest: a latency line shows the
    worst), in time order, so that a line has at most as many points as the chart is wide."""
    columns: dict[int, tuple[float, float]] = {}
    for t, v in points:
        if not math.isfinite(v):
            continue
        column = int(x_of(t))
        if column not in columns or v > columns[column][1]:
            columns[column] = (t, v)
    return [columns[c] for c in sorted(columns)]


def latency_chart(chart_id: str, title: str, axis: Axis,
                  lines: Sequence[tuple[str, str, Sequence[tuple[float, float]], int]], *,
                  entries: Iterable[TimelineEntry] = (), bands: Iterable[tuple[float, float, str]] = (),
                  width: int = 1100, plot_height: int = 200, note: str = "") -> Chart:
    """Latencies over time on a log scale: ``lines`` (name, tone, (time, ms) points, e.g.
    a percentile per window at the window's middle, and the count it is of, for the
    legend), with timeline ``entries`` as markers.
    The scale spans whole decades from the lowest to the highest value (at least one),
    within :data:`LATENCY_FLOOR_MS` .. :data:`LATENCY_CEILING_MS`: a value beyond sits on
    the edge, and the note counts those over the ceiling. A line has at most one point per
    pixel column (:func:`_thinned`)."""
    right = width - RIGHT_PAD
    x_of = _x_scale(axis, right)
    grouped, lanes, top = _placed(axis, entries, True, right, x_of)
    bottom = top + plot_height
    values = [v for _, _, pts, _ in lines for _, v in pts if math.isfinite(v)]
    over = sum(v > LATENCY_CEILING_MS for v in values)
    values = [min(max(v, LATENCY_FLOOR_MS), LATENCY_CEILING_MS) for v in values]
    lo_exp = math.floor(math.log10(min(values, default=1.0)))
    hi_exp = max(math.ceil(math.log10(max(values, default=10.0))), lo_exp + 1)

    def y_of(v: float) -> float:
        e = math.log10(min(max(v, 10.0 ** lo_exp), LATENCY_CEILING_MS))
        return bottom - (e - lo_exp) / (hi_exp - lo_exp) * plot_height

    series = [Series(name, tone, " ".join(f"{x_of(t):.1f},{y_of(v):.1f}" for t, v in _thinned(pts, x_of)),
                     total)
              for name, tone, pts, total in lines]
    if over:
        note += (f"{'; ' if note else ''}{over} value{'s' if over > 1 else ''} over "
                 f"{_ms(LATENCY_CEILING_MS)} drawn at the top (out of range)")
    return Chart(
        id=chart_id, title=title, width=width, height=int(bottom + BOTTOM),
        left=LEFT, top=top, right=right, bottom=bottom,
        x_ticks=_x_ticks(axis, x_of, 10),
        y_ticks=[(y_of(10.0 ** e), _ms(10.0 ** e)) for e in range(lo_exp, hi_exp + 1)],
        series=series,
        markers=_markers(grouped, lanes, top, bottom, x_of),
        bands=[Band(x_of(lo), max(x_of(hi), x_of(lo) + 2), label, right) for lo, hi, label in bands],
        note=note,
    )
