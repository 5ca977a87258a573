"""Shrinking a failing schedule: delta debugging over its episodes, then one-step
simplifications (:func:`.schedule.smaller`) while the failure stays.

``test(candidate)`` runs the candidate (a few times, as the campaign chooses) and says
whether it still shows the failure. Each try is recorded (:class:`Try`), so the campaign
page can show the way down. A budget bounds the number of tries: past it, the smallest
schedule found so far is the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from .schedule import Schedule, smaller

__all__ = ["Try", "shrink"]


@dataclass(frozen=True)
class Try:
    """One candidate tried: what it was, and whether it kept the failure."""

    label: str
    size: int
    kept: bool


class _Budget(Exception):
    pass


def shrink(s: Schedule, test: Callable[[Schedule], bool], *, max_tries: int = 40,
           on_try: Callable[[Try], None] | None = None) -> tuple[Schedule, list[Try]]:
    """The smallest schedule below ``s`` that ``test`` still fails with (``s`` itself when
    nothing smaller does), and the tries made."""
    tries: list[Try] = []

    def check(c: Schedule) -> bool:
        if len(tries) >= max_tries:
            raise _Budget
        kept = test(c)
        tries.append(Try(c.label(), c.size(), kept))
        if on_try is not None:
            on_try(tries[-1])
        return kept

    best = s
    try:
        best = _ddmin(best, check)
        progress = True
        while progress:
            progress = False
            for c in smaller(best):
                if check(c):
                    best, progress = c, True
                    break
    except _Budget:
        pass
    return best, tries


def _ddmin(s: Schedule, check: Callable[[Schedule], bool]) -> Schedule:
    """Zeller's ddmin over the episodes: try each chunk alone, then each complement, at
    finer granularity until single episodes; the episodes' order is kept."""
    episodes = list(s.episodes)
    n = 2
    while len(episodes) >= 2:
        size = -(-len(episodes) // n)
        chunks = [episodes[i:i + size] for i in range(0, len(episodes), size)]
        for chunk in chunks:
            if check(replace(s, episodes=tuple(chunk))):
                episodes, n = chunk, 2
                break
        else:
            for i in range(len(chunks)):
                rest = [e for j, c in enumerate(chunks) if j != i for e in c]
                if check(replace(s, episodes=tuple(rest))):
                    episodes, n = rest, max(n - 1, 2)
                    break
            else:
                if n >= len(episodes):
                    break
                n = min(len(episodes), 2 * n)
    if len(episodes) == 1 and check(replace(s, episodes=())):
        episodes = []
    return replace(s, episodes=tuple(episodes))
