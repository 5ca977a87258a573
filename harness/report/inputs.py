"""Reading a run's JSONL files for the report without stopping at bad input.

:func:`read_lenient` yields the events of ``history/*.jsonl`` and ``timeline.jsonl``
like :func:`harness.history.read_events`, but counts every line it cannot use in a
:class:`Skipped` (per file and reason), which the run page shows. A :class:`Window`
bounds the times that belong to a run, so that one far-off time cannot stretch a
chart; :func:`bulk_window` finds one from the events themselves.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import InputError
from harness.history import BATCH_EVENTS, batch_size, expand_batch
from harness.result import open_input

__all__ = ["MAX_LINE", "MARGIN_S", "MAX_RUN_S", "MAX_HISTORY_BYTES", "MAX_TIMELINE_BYTES", "Skipped",
           "Window", "bulk_window", "read_lenient",
           "TORN", "TOO_LONG", "NOT_JSON", "NOT_EVENT", "BAD_BATCH", "BAD_TIME", "BAD_STALL",
           "BAD_POSITION", "OUTSIDE", "OUTSIDE_TIMELINE"]

#: A history or timeline line longer than this is skipped (a batch of thousands of records
#: is far shorter), so junk without newlines costs bounded memory.
MAX_LINE = 16 << 20
#: The largest history file read: a 100M-record run writes 17 GB, read by the report in minutes
#: at bounded memory; a larger file is left out (counted), not read for hours.
MAX_HISTORY_BYTES = 32 << 30
#: The largest timeline read: its entries are held in memory (a run writes a few MB).
MAX_TIMELINE_BYTES = 256 << 20
#: Events this far before a run's start or after its finish are not the run's (a clock jump,
#: a corrupt number): they are counted, not charted.
MARGIN_S = 300.0
#: A result whose started..finished is longer than this does not bound the run's events.
MAX_RUN_S = 7 * 86400.0

# Why a line or an event was left out (the page shows each with its file and count).
TORN = "torn last line (cut off mid-write)"
TOO_LONG = f"lines longer than {MAX_LINE >> 20} MiB"
NOT_JSON = "lines that are not JSON"
NOT_EVENT = "lines that are not an event (no type string)"
BAD_BATCH = "batches whose columns are not lists of one length"
BAD_TIME = ("events without a time t the charts can place (a finite number, or one in a string; "
            "the check still judges a client's)")
BAD_STALL = "stall events without a finite, non-negative duration"
BAD_POSITION = "Key_Shared polls without an integer position (not judged for key order)"
OUTSIDE = "events far outside the run's window (not counted or charted)"
OUTSIDE_TIMELINE = "entries far outside the run's window (listed, not charted)"


@dataclass
class Skipped:
    """What the report left out of a run's files: a count per (file, reason). Shown on the page;
    the files are never changed."""

    counts: Counter[tuple[str, str]] = field(default_factory=Counter)

    def add(self, where: str, why: str, n: int = 1) -> None:
        self.counts[(where, why)] += n

    def rows(self) -> list[tuple[str, str, int]]:
        """(file, reason, count), by file then reason."""
        return [(where, why, n) for (where, why), n in sorted(self.counts.items())]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def __bool__(self) -> bool:
        return bool(self.counts)


def _lines(path: Path, where: str, skipped: Skipped, limit: int, what: str) -> Iterator[str]:
    """The complete lines of ``path``, each at most :data:`MAX_LINE` characters (longer ones and
    a torn tail are counted in ``skipped``); undecodable bytes become U+FFFD. A file that is not
    a regular file of at most ``limit`` bytes (``what``: its kind, in the reason) is not opened
    (a FIFO would block, a device never end): it is counted, with the reason, as one left out."""
    try:
        binary = open_input(path, limit, what)
    except InputError as exc:
        skipped.add(where, f"not read: {exc.reason}")
        return
    with io.TextIOWrapper(binary, encoding="utf-8", errors="replace") as fh:
        while line := fh.readline(MAX_LINE):
            if line.endswith("\n"):
                yield line
            elif len(line) < MAX_LINE:
                skipped.add(where, TORN)  # the end of the file, without a newline: a crash mid-write
                return
            else:
                skipped.add(where, TOO_LONG)
                while (rest := fh.readline(MAX_LINE)) and not rest.endswith("\n"):
                    pass


def _batch_ok(event: dict[str, Any]) -> bool:
    """Whether a batch event's columns, count and runs give it a size (:func:`batch_size`;
    :func:`expand_batch` drops it otherwise; an empty batch is fine)."""
    return batch_size(event) is not None


def read_lenient(path: Path, where: str, skipped: Skipped, *, expand: bool = True,
                 limit: int = MAX_HISTORY_BYTES, what: str = "a history file") -> Iterator[dict[str, Any]]:
    """The events of one JSONL file (batches expanded), like :func:`harness.history.read_events`,
    but counting in ``skipped`` every line it cannot use instead of stopping at it, and the
    file itself when it is not a regular file of at most ``limit`` bytes.

    With ``expand`` false a well-formed batch comes out as it is (one event standing for
    several; a malformed one is still counted and left out)."""
    for line in _lines(path, where, skipped, limit, what):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, an integer of 5000 digits, nesting too deep
            skipped.add(where, NOT_JSON)
            continue
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            skipped.add(where, NOT_EVENT)
        elif event["type"] not in BATCH_EVENTS:
            yield event
        elif _batch_ok(event):
            if expand:
                yield from expand_batch(event)
            else:
                yield event
        else:
            skipped.add(where, BAD_BATCH)


@dataclass(frozen=True)
class Window:
    """The times that belong to the run: events outside ``lo`` .. ``hi`` are left out of the
    charts. ``source`` says where the bounds came from (shown on the page)."""

    lo: float
    hi: float
    source: str

    def __contains__(self, t: float) -> bool:
        return self.lo <= t <= self.hi


def bulk_window(times: Counter[int]) -> Window | None:
    """A window around the bulk of the events (``times``: events per whole second): the middle
    half widened by three times its length and :data:`MARGIN_S` on each side, so that a few
    far-off events cannot stretch it. None without events."""
    total = sum(times.values())
    if not total:
        return None
    seconds = sorted(times)

    def quantile(q: float) -> int:
        seen = 0
        for second in seconds:
            seen += times[second]
            if seen >= q * total:
                return second
        return seconds[-1]

    lo, hi = quantile(0.25), quantile(0.75) + 1
    pad = 3.0 * (hi - lo) + MARGIN_S
    return Window(lo - pad, hi + pad, "the bulk of the recorded events")
