"""Instrumented clients (Kafka, Pulsar) that write the history; see :mod:`harness.history`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["SEND_BATCH", "paced_batches", "paced_sends"]

#: at most this many sends per batch of :func:`paced_batches`
SEND_BATCH = 256


def paced_sends(send: Callable[[str | None, float | None], object], *, count: int | None,
                duration_s: float | None, rate: float | None, keys: int | None,
                stop: threading.Event | None, wait: Callable[[float], object]) -> float:
    """Calls ``send(key, due)`` until ``count`` sends or ``duration_s`` (one is required) or
    ``stop``.

    ``rate`` (per second) paces the sends: send n is due ``n / rate`` seconds after the
    start, and ``due`` is that time on the wall clock (the history's ``t``; None when
    unpaced), which a client records so that the checker can tell how late each send was
    made (publish delay: a stalled client cannot hide its latency, coordinated omission).
    ``wait(seconds)`` is how the client spends the time ahead of schedule (Kafka serves
    delivery callbacks meanwhile). Returns the start (monotonic) time. (:func:`paced_batches`
    one send at a time.)
    """
    return paced_batches(lambda batch, due: send(batch[0], due), count=count, duration_s=duration_s,
                         rate=rate, keys=keys, stop=stop, wait=wait, batch=1)


def paced_batches(send_batch: Callable[[list[str | None], float | None], object], *, count: int | None,
                  duration_s: float | None, rate: float | None, keys: int | None,
                  stop: threading.Event | None, wait: Callable[[float], object],
                  batch: int = SEND_BATCH) -> float:
    """:func:`paced_sends` in batches: ``send_batch(keys, due)`` gets the keys of every send
    that is due (at most ``batch``; at ``rate``, those whose time has come) and when the first
    of them was due (wall clock; the others follow it every ``1 / rate`` s), so that a client
    can record them with one history line. Returns the start (monotonic) time."""
    if count is None and duration_s is None:
        raise ValueError("a workload needs a count or a duration")
    wall, start = time.time(), time.monotonic()
    deadline = start + duration_s if duration_s is not None else None
    n = 0
    while (count is None or n < count) and (deadline is None or time.monotonic() < deadline):
        if stop is not None and stop.is_set():
            break
        due = batch
        if rate:
            due = min(batch, max(1, int((time.monotonic() - start) * rate) + 1 - n))
        if count is not None:
            due = min(due, count - n)
        send_batch([f"k{(n + i) % keys}" if keys else None for i in range(due)],
                   wall + n / rate if rate else None)
        n += due
        if rate:
            ahead = start + n / rate - time.monotonic()
            if ahead > 0:
                wait(min(ahead, 0.5))
    return start
