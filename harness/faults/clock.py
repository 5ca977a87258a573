"""Clock faults on a node's own wall clock (:mod:`harness.backend.clock`): a jump, a drift
and a strobe, each healed by setting the clock back to the real time.

- **jump**: the offset moves by a signed amount at once (``+10m``: ten minutes ahead);
- **drift**: the clock runs fast or slow by a share (``5%``: five seconds more every 100
  s), stepped every half second, for a while (``for``) or until a heal;
- **strobe**: the clock swings between its offset and the offset plus ``delta`` every
  ``period`` (Jepsen's strobe), for a while or until a heal.

A drift or a strobe runs in a thread of the harness; the node sees each step within a
second (libfaketime's cache), so a strobe's period is at least a second. What a node's
clock did is recorded when its fault is applied (the offset after a jump) and when it is
healed (the offset it had, the steps a drift or a strobe made).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from ..backend.clock import Clock
from ..errors import FaultError

__all__ = ["ClockDriver", "ClockPlan", "STEP_S", "MIN_PERIOD_S"]

#: how often a drift moves the offset
STEP_S = 0.5
#: the shortest strobe period the node can see (libfaketime reads the offset once a second)
MIN_PERIOD_S = 1.0


@dataclass(frozen=True)
class ClockPlan:
    """One clock fault: exactly one of ``jump_s``, ``drift`` (a fraction: 0.05 runs 5% fast)
    and ``strobe_s`` (with ``period_s``); ``for_s`` bounds a drift or a strobe."""

    jump_s: float | None = None
    drift: float | None = None
    strobe_s: float | None = None
    period_s: float = MIN_PERIOD_S
    for_s: float | None = None

    def __post_init__(self) -> None:
        given = [k for k, v in (("jump", self.jump_s), ("drift", self.drift), ("strobe", self.strobe_s))
                 if v is not None]
        if len(given) != 1:
            raise FaultError("a clock fault is one of jump, drift or strobe "
                             f"(got {', '.join(given) or 'none'})")
        if self.strobe_s is not None and self.period_s < MIN_PERIOD_S:
            raise FaultError(f"a strobe's period is at least {MIN_PERIOD_S:g} s (the node reads its "
                             "clock's offset once a second)")


class ClockDriver:
    """Moves one node's offset in a thread, for a drift or a strobe, until stopped."""

    def __init__(self, clock: Clock, plan: ClockPlan) -> None:
        self.clock, self.plan = clock, plan
        self.base = clock.offset()
        self.steps = 0
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="clock-driver", daemon=True)

    def start(self) -> ClockDriver:
        self._thread.start()
        return self

    def _run(self) -> None:
        t0 = time.monotonic()
        high = False
        try:
            while not self._stop.is_set():
                elapsed = time.monotonic() - t0
                if self.plan.for_s is not None and elapsed >= self.plan.for_s:
                    return
                if self.plan.drift is not None:
                    self.clock.set(self.base + self.plan.drift * elapsed)
                    wait = STEP_S
                else:
                    assert self.plan.strobe_s is not None
                    high = not high
                    self.clock.set(self.base + (self.plan.strobe_s if high else 0.0))
                    wait = self.plan.period_s
                self.steps += 1
                self._stop.wait(wait)
        except Exception as exc:  # noqa: BLE001 - kept for the heal's record, never lost in a thread
            self.error = f"{type(exc).__name__}: {exc}"

    def stop(self) -> dict[str, Any]:
        """Stops moving the clock; returns what it did."""
        self._stop.set()
        self._thread.join(timeout=10)
        done: dict[str, Any] = {"steps": self.steps}
        if self.error:
            done["error"] = self.error
        return done
