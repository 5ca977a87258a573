"""The run's one event hook: the timeline, the console and any listener see the same events.

Every part of a run that has something to record (a step, a fault, a leader change,
an injection, a mark) calls :meth:`RunEvents.record`; the event is appended to
``timeline.jsonl`` and handed to each listener. Listeners are observers: one that
raises is logged and dropped, never allowed to end a run (chaostoolkit's rule for
its ``RunEventHandler``). Progress sentences go through :mod:`logging` (a logger
per package, under ``harness``); the CLI and the pytest plugin decide where they
are shown (:func:`console`).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from ..history import HistoryWriter

__all__ = ["Listener", "RunEvents", "console"]

log = logging.getLogger(__name__)

#: Called with each timeline event (a dict: ``type``, ``t``, and the event's fields).
Listener = Callable[[dict[str, Any]], None]


class RunEvents:
    """Records run events in the timeline and hands them to listeners."""

    def __init__(self, writer: HistoryWriter, listeners: Sequence[Listener] = ()) -> None:
        self.writer = writer
        self.listeners = list(listeners)

    def record(self, type_: str, **fields: Any) -> dict[str, Any]:
        event = self.writer.record(type_, **fields)
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception as exc:  # an observer's failure must not end the run
                log.warning("event listener %r failed (%s); it is dropped", listener, exc)
                self.listeners.remove(listener)
        return event

    def mark(self, label: str, detail: Any = None) -> None:
        """A labelled moment of the run (a remedy applied, a loop found)."""
        self.record("mark", label=label, detail=detail)


class _Console(logging.Formatter):
    def __init__(self, prefix: str, stamp: bool) -> None:
        super().__init__()
        self.prefix = prefix
        self.stamp = stamp

    def format(self, record: logging.LogRecord) -> str:
        head = f"[{time.strftime('%H:%M:%S', time.localtime(record.created))}] " if self.stamp else ""
        return f"{self.prefix}{head}{record.getMessage()}"


@contextmanager
def console(stream: TextIO | None = None, *, prefix: str = "", stamp: bool = True,
            level: int = logging.INFO) -> Iterator[None]:
    """Shows the harness's progress (its ``harness.*`` loggers at ``level``) on ``stream``
    (stderr by default) while the block runs: one line per message."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_Console(prefix, stamp))
    root = logging.getLogger("harness")
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(min(level, old_level) if old_level else level)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        handler.flush()
