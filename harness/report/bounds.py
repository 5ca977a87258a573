"""How much of a run the page shows, so that its size is bounded whatever ``result.json`` holds.

A table shows at most :data:`MAX_ROWS` rows (:func:`first_rows`) and says how many more
there are; every value the templates print is cut at :data:`MAX_TEXT` characters
(:func:`clip`, the environment's ``finalize``); a number of milliseconds too large for a
table cell is shown in exponent form (:func:`millis`). ``result.json`` (capped at
:data:`harness.result.MAX_RESULT_BYTES`) keeps everything.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from markupsafe import Markup

__all__ = ["MAX_ROWS", "MAX_TEXT", "Rows", "clip", "first_rows", "millis"]

#: Most rows of a table read from result.json (a run writes far fewer; a corrupt one may hold
#: 200,000 latency windows).
MAX_ROWS = 200
#: Most characters of one printed value (an error's text, a story line, an example's field).
MAX_TEXT = 4000

T = TypeVar("T")


@dataclass(frozen=True)
class Rows(Generic[T]):
    """The rows a table shows and how many more there are (``more``: not shown)."""

    shown: list[T]
    more: int

    def __bool__(self) -> bool:
        return bool(self.shown)

    def __len__(self) -> int:
        return len(self.shown) + self.more


def first_rows(items: Iterable[T], limit: int = MAX_ROWS) -> Rows[T]:
    """The first ``limit`` of ``items`` and the count of the rest."""
    shown: list[T] = []
    more = 0
    for item in items:
        if len(shown) < limit:
            shown.append(item)
        else:
            more += 1
    return Rows(shown, more)


def clip(value: Any) -> Any:
    """A printed value, cut at :data:`MAX_TEXT` characters with the count of the rest (markup
    the templates made, a chart or a macro's output, is theirs and left whole)."""
    if isinstance(value, str) and not isinstance(value, Markup) and len(value) > MAX_TEXT:
        return f"{value[:MAX_TEXT]}\u2026 ({len(value) - MAX_TEXT} more characters in the run's files)"
    return value


def millis(value: Any) -> str:
    """A latency cell: ``12.5``; ``-`` for none; ``1.7e+308`` past what a fixed-point cell
    can hold (a corrupt value: still shown, not a 300-digit number)."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-"
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float
        return "out of range"
    if not math.isfinite(number):
        return "out of range"
    return f"{number:.1f}" if abs(number) < 1e9 else f"{number:.3g}"
