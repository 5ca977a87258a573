"""Reading a run directory for the report: its result, histories and timeline.

``result.json`` is read only through :meth:`RunResult.read` (the one parser of it);
:class:`LoadedRun` adds what the report needs around it: the directory, why the
result is unusable when it is (the page and the index still render, verdict
``unknown``), and parsed times for sorting. Histories and the timeline are
tolerant: an errored or crashed run may lack any file or key. Histories are
streamed and reduced to per-second counts, so a run of millions of events costs
only its buckets in memory.

Bad input never stops a page: a history or timeline that is not a regular file
(a FIFO, a device: never opened) or is over its cap, a line that is not JSON or
not an event, a batch whose columns do not line up (all three:
:mod:`harness.report.inputs`), an event without a time the checker would read
(``t``: a finite number, or one in a string), a Key_Shared poll without an
integer position, a history event far outside the run's window
(:func:`result_window`, :func:`~harness.report.inputs.bulk_window`) is left out
and counted in a :class:`~harness.report.inputs.Skipped`, which the page shows;
a ``result.json`` value of the wrong type is left out the same way
(:func:`load_run` keeps every other value). Only a ``result.json`` of a schema
this harness does not read stops it. The files themselves are only read.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote, urlsplit

from harness.check.lines import double
from harness.errors import HarnessError, ResultError, ResultSchemaError
from harness.history import BATCH_EVENTS, batch_size, expand_batch, history_files
from harness.report.inputs import (
    BAD_POSITION,
    BAD_STALL,
    BAD_TIME,
    MARGIN_S,
    MAX_RUN_S,
    MAX_TIMELINE_BYTES,
    OUTSIDE,
    Skipped,
    Window,
    read_lenient,
)
from harness.result import Expectation, RunResult, read_json

log = logging.getLogger(__name__)

__all__ = [
    "LoadedRun",
    "Rates",
    "is_run_dir",
    "not_a_run_dir",
    "run_dirs",
    "result_window",
    "TimelineEntry",
    "load_run",
    "scan_history",
    "scan_timeline",
    "scan_owners",
    "Flow",
    "short_topic",
    "safe_href",
]

RESTORE_ACTIONS = frozenset({"start", "resume", "heal"})
PartitionKey = tuple[str, int]
#: The files that make a directory a run directory (any one of them; see :func:`is_run_dir`).
RUN_MARKERS = ("result.json", "timeline.jsonl", "history/")


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` holds a run: a ``result.json``, a ``timeline.jsonl`` or a ``history/``.

    An errored or crashed run may lack ``result.json``; every run writes its timeline
    first, so a directory with none of the three is not a run directory.
    """
    try:
        return (path / "result.json").is_file() or (path / "timeline.jsonl").is_file() \
            or (path / "history").is_dir()
    except OSError:  # unreadable: not ours to show
        return False


def run_dirs(reports_dir: Path) -> list[Path]:
    """The run directories in ``reports_dir`` (:func:`is_run_dir`); a HarnessError if it
    cannot be listed."""
    try:
        children = list(reports_dir.iterdir())
    except OSError as exc:
        raise HarnessError(f"{reports_dir}: cannot list: {exc.strerror or exc}") from None
    out = []
    for child in children:
        try:
            if child.is_dir() and is_run_dir(child):
                out.append(child)
        except OSError:  # gone or unreadable: not listed
            continue
    return out


def not_a_run_dir(path: Path) -> str:
    """The error for a directory that :func:`is_run_dir` refuses, naming the runs it holds
    (a reports directory given for one of its runs)."""
    message = f"{path}: not a run directory: it holds no result.json, timeline.jsonl or history/"
    try:
        runs = sorted(d.name for d in run_dirs(path))
    except HarnessError:  # unreadable: the message as it is
        runs = []
    if runs:
        shown = ", ".join(runs[:3]) + (f" and {len(runs) - 3} more" if len(runs) > 3 else "")
        message += f"; it holds runs ({shown}): give one of them"
    return message


def _text(value: Any) -> str | None:
    """A display string for a free-form value (None stays None)."""
    if value is None or isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (ValueError, TypeError, RecursionError):  # mixed key types, nesting too deep
        return repr(value)[:200]


def _float(value: Any) -> float | None:
    """A finite JSON number as a float; None for anything else (NaN, Infinity, too large)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float
        return None
    return number if math.isfinite(number) else None


def _int(value: Any) -> int:
    """An integral JSON number as an int (``3`` or ``3.0``); -1 for anything else."""
    number = _float(value)
    return int(number) if number is not None and number.is_integer() else -1


def _timestamp(value: str | None) -> datetime | None:
    """An ISO 8601 time of ``result.json`` in UTC (UTC when it names no zone); None if it is not
    one, or is one that UTC cannot hold (``0001-01-01T00:00+01:00``)."""
    if value is None:
        return None
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return stamp.astimezone(timezone.utc) if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)
    except (ValueError, OverflowError):
        return None


def safe_href(path: Any) -> str | None:
    """A URL-quoted relative href for ``path`` inside the run dir, or None if unsafe.

    Refuses schemes (``javascript:``), absolute paths and ``..`` so a crafted
    ``result.json`` cannot turn a file link into anything else.
    """
    if not isinstance(path, str) or not path or "\\" in path or urlsplit(path).scheme:
        return None
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts:
        return None
    return quote(path)


@dataclass(frozen=True)
class LoadedRun:
    """A run directory as the report shows it: its :class:`RunResult`, or why there is none.

    With a ``problem`` (``result.json`` missing, unreadable or malformed: the
    :class:`ResultError` message) the verdict shown is ``unknown``. ``result``
    then holds what could be kept: for a malformed file every value of the
    right type (``dropped`` lists the others, one message each), else an empty
    result named after the directory. The rest of the directory (histories,
    timeline, logs) is still shown.
    """

    run_dir: Path
    result: RunResult
    problem: str | None = None
    dropped: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        """pass | fail | error, as the run wrote it; unknown without a usable result."""
        return "unknown" if self.problem else self.result.verdict

    @property
    def started(self) -> datetime | None:
        return _timestamp(self.result.started)

    @property
    def finished(self) -> datetime | None:
        return _timestamp(self.result.finished)

    @property
    def sort_time(self) -> float:
        """Newest-first ordering key: start time, else finish, else the directory's mtime."""
        stamp = self.started or self.finished
        if stamp:
            return stamp.timestamp()
        try:
            return self.run_dir.stat().st_mtime
        except OSError:  # removed while the index is written: sorts last
            return 0.0

    @property
    def bad_times(self) -> str | None:
        """What is wrong with ``started`` / ``finished`` when one is there but is not a time
        UTC can hold (the page and the index then show none)."""
        bad = [f"{name}: not a time: {value[:40]!r}"
               for name, value in (("started", self.result.started), ("finished", self.result.finished))
               if value is not None and _timestamp(value) is None]
        return "; ".join(bad) or None

    def expectation(self, name: str) -> Expectation | None:
        """The judged expectation ``name`` (an anomaly kind, ``injection hit``, ...), if any."""
        return next((e for e in self.result.expectations if e.name == name), None)


#: Fields of result.json kept item by item (a bad step drops that step, not all of them).
_ITEM_LISTS = frozenset({"observed", "expectations", "steps", "truncations", "elections", "replicas",
                         "collect_problems", "story"})
_ITEM_MAPS = frozenset({"anomalies", "examples", "counts"})
_FIELDS = frozenset(f.name for f in fields(RunResult)) - {"run_id"}


def _salvage(run_dir: Path) -> tuple[RunResult, tuple[str, ...]]:
    """What :meth:`RunResult.from_json` accepts of a malformed ``result.json``, value by value
    (list items and object members one by one), and a message for each value left out."""
    empty = RunResult(run_dir.name)
    try:
        raw = read_json(run_dir / "result.json")
    except ResultError:
        return empty, ()
    if not isinstance(raw, dict):
        return empty, ()
    run_id = raw.get("run_id")
    if not isinstance(run_id, str) or not run_id:
        run_id = run_dir.name

    def problem(name: str, value: Any) -> str | None:
        try:
            RunResult.from_json({"run_id": run_id, name: value})
        except ResultError as exc:
            return str(exc)
        return None

    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for name, value in raw.items():
        if name not in _FIELDS:
            continue
        if name in _ITEM_LISTS and isinstance(value, list):
            kept[name] = []
            for i, item in enumerate(value):
                why = problem(name, [item])
                if why is None:
                    kept[name].append(item)
                else:
                    dropped.append(why.replace(f"{name}[0]", f"{name}[{i}]", 1) if f"{name}[0]" in why
                                   else f"{why} (item {i})")
        elif name in _ITEM_MAPS and isinstance(value, dict):
            kept[name] = {}
            for key, item in value.items():
                why = problem(name, {key: item})
                if why is None:
                    kept[name][key] = item
                else:
                    dropped.append(why if f"{name}.{key}" in why else f"{why} (key {key!r})")
        elif (why := problem(name, value)) is None:
            kept[name] = value
        else:
            dropped.append(why)
    try:
        return RunResult.from_json({**kept, "run_id": run_id}), tuple(dropped)
    except ResultError:  # not expected: every value passed alone
        return empty, tuple(dropped)


def load_run(run_dir: str | os.PathLike[str]) -> LoadedRun:
    """The run in ``run_dir``; never raises for a bad ``result.json`` (see :class:`LoadedRun`)
    but for one of a schema this harness does not read (:class:`ResultSchemaError`): its values
    may mean something else, so none is shown as if it were of a known schema."""
    run_dir = Path(run_dir)
    try:
        return LoadedRun(run_dir, RunResult.read(run_dir))
    except ResultSchemaError:
        raise
    except ResultError as exc:
        # the message starts with the file's path; inside the run's page it is just result.json
        problem = str(exc).removeprefix(f"{run_dir}{os.sep}")
        result, dropped = _salvage(run_dir)
        return LoadedRun(run_dir, result, problem, dropped)


def short_topic(topic: str) -> str:
    """``persistent://public/default/t`` -> ``t`` (the runner's timeline uses short names)."""
    prefix = "persistent://public/default/"
    return topic[len(prefix):] if topic.startswith(prefix) else topic


@dataclass
class Flow:
    """One producer's sends to one partition: blocked send calls and the longest gaps.

    A ``stall`` event is a send call that blocked its caller (Pulsar queue or memory limit
    full) for ``seconds``; gaps are the longest times without a send (``invoke`` naming the
    partition, which the Java producer records) and without an acknowledgement.
    """

    client: str
    partition: int
    stalls: int = 0
    blocked_s: float = 0.0
    longest_block: float = 0.0
    longest_block_at: float | None = None  # when that blocked call started
    sends: int = 0
    acks: int = 0
    send_gap: float = 0.0
    send_gap_at: float | None = None
    ack_gap: float = 0.0
    ack_gap_at: float | None = None
    _last_send: float | None = None
    _last_ack: float | None = None

    def send(self, t: float) -> None:
        self.sends += 1
        if self._last_send is not None and t - self._last_send > self.send_gap:
            self.send_gap, self.send_gap_at = t - self._last_send, self._last_send
        self._last_send = t

    def ack(self, t: float) -> None:
        self.acks += 1
        if self._last_ack is not None and t - self._last_ack > self.ack_gap:
            self.ack_gap, self.ack_gap_at = t - self._last_ack, self._last_ack
        self._last_ack = t

    def stall(self, t: float, seconds: float) -> None:
        self.stalls += 1
        self.blocked_s += seconds
        if seconds > self.longest_block:
            self.longest_block, self.longest_block_at = seconds, t - seconds


@dataclass
class KeyOrder:
    """Per-key order of one Key_Shared subscription, over all its consumers (observed only).

    Polls of all consumers are ordered by their wall-clock time ``t`` (one harness process
    writes them, so the clocks agree); this is an indication, judging is the checker's job
    (see docs/pulsar.md for the check it needs). A *first delivery* is the
    first poll of a message id in the subscription; one whose position is below an earlier
    first delivery of the same key (same partition) is out of order. Redeliveries (the same
    id again) are counted, not judged.
    """

    subscription: str
    polls: int = 0
    first: int = 0
    redeliveries: int = 0
    keys: set[str] = field(default_factory=set)
    out_of_order: int = 0
    examples: list[str] = field(default_factory=list)


#: History event types the report counts (others, such as ``meta``, are not its business).
CHARTED_TYPES = frozenset({"ok", "poll", "fail", "info", "reset", "invoke", "stall"})
#: What a batch's partitions column may hold for :meth:`Rates.add_batch` to count it whole.
_NUMBERS = frozenset({int, float, type(None)})
#: Times beyond this many seconds from 1970 are not times (and would overflow arithmetic).
TIME_LIMIT = 1e17


def _time(value: Any) -> float | None:
    """An event's time ``t`` as the checker reads it (:func:`harness.check.lines.double`: a
    number, or a number in a string), when finite and within :data:`TIME_LIMIT`; None
    otherwise (the checker still judges such an event; the report counts it as not charted)."""
    t = double(value)
    return t if t is not None and abs(t) <= TIME_LIMIT else None


def _label(value: Any) -> str:
    """A name field (client, topic, key, ...) as text: "" for null, JSON for containers."""
    return _text(value) or ""


def _partition(value: Any) -> int | None:
    """A partition number: an integral JSON number (not a boolean), else None."""
    number = _float(value)
    return int(number) if number is not None and number.is_integer() else None


def _position(event: dict[str, Any]) -> tuple[int, int, int] | None:
    """:func:`harness.history.position_key` of a poll, or None when a position field that is
    there is not an integer (a string, a fraction, a list)."""
    parts = []
    names = ("offset",) if event.get("offset") is not None else ("ledger", "entry", "batch")
    for name in names:
        value = event.get(name)
        number = _float(value)
        if value is not None and (number is None or not number.is_integer()):
            return None
        parts.append(-1 if number is None else int(number))
    return (-1, parts[0], -1) if len(parts) == 1 else (parts[0], parts[1], parts[2])


def result_window(run: LoadedRun) -> Window | None:
    """The run's window from ``result.json``: started .. finished, widened by :data:`MARGIN_S`;
    None without both times or when they do not make a run (reversed, or days long)."""
    started, finished = run.started, run.finished
    if started is None or finished is None:
        return None
    lo, hi = started.timestamp(), finished.timestamp()
    if not 0 <= hi - lo <= MAX_RUN_S:
        return None
    return Window(lo - MARGIN_S, hi + MARGIN_S,
                  f"result.json started .. finished, \u00b1 {MARGIN_S:.0f} s")


#: At most this many blocked-send bands are kept per partition (the longest ones).
MAX_STALL_BANDS = 8


def _keep_band(bands: list[tuple[float, float, str]], band: tuple[float, float, str]) -> None:
    """Appends ``band``, then drops the shortest (of equal ones, the earliest appended) while
    more than :data:`MAX_STALL_BANDS` are kept. What is left is the longest bands (of equal
    ones, the latest), in the order they came, whether or not they came in groups."""
    bands.append(band)
    if len(bands) > MAX_STALL_BANDS:
        bands.remove(min(bands, key=lambda b: b[1] - b[0]))


@dataclass
class Rates:
    """Per-second counts (keyed by whole Unix second) of the client histories.

    ``polls`` counts only ``run``-phase reads; the final recovery read is kept
    as the time span ``recovery`` so it does not dwarf the run on a chart.
    """

    acks: Counter[int] = field(default_factory=Counter)
    polls: Counter[int] = field(default_factory=Counter)
    errors: Counter[int] = field(default_factory=Counter)  # fail + info
    by_partition: dict[PartitionKey, Counter[int]] = field(default_factory=dict)
    resets: dict[int, Counter[str]] = field(default_factory=dict)
    recovery: tuple[float, float] | None = None
    span: tuple[float, float] | None = None
    #: sends per partition (invoke events that name their partition: the Java producer)
    sends_by_partition: dict[PartitionKey, Counter[int]] = field(default_factory=dict)
    #: per (client, partition): blocked send calls and gaps
    flows: dict[tuple[str, int], Flow] = field(default_factory=dict)
    #: per (topic, partition): the longest blocked send calls, (start, end, client)
    stall_bands: dict[PartitionKey, list[tuple[float, float, str]]] = field(default_factory=dict)
    _client_topic: dict[str, str] = field(default_factory=dict)
    _flow_clients: set[str] = field(default_factory=set)
    #: clients of the events that read or write the two above (invoke, ok, stall): a scan in
    #: parallel holds when no two files share one (:func:`scan_history`)
    _clients: set[str] = field(default_factory=set)
    #: Key_Shared subscriptions: per-key order of first deliveries (see KeyOrder)
    key_order: dict[str, KeyOrder] = field(default_factory=dict)
    _ks_polls: list[tuple[float, str, str, str, int, tuple[int, int, int], str]] = field(
        default_factory=list)
    #: events left out, per file and reason
    skipped: Skipped = field(default_factory=Skipped)
    #: when set, events outside it are counted in ``skipped`` and ``outside``, nothing else
    window: Window | None = None
    #: every event of a charted type with a usable time, per whole second, in the window or not
    times: Counter[int] = field(default_factory=Counter)
    outside: int = 0

    def finish_key_order(self) -> None:
        """Judges the collected Key_Shared polls in time order (call once, after every file)."""
        seen: set[tuple[str, str]] = set()
        last: dict[tuple[str, str, str, int], tuple[tuple[int, int, int], str]] = {}
        for _, sub, mid, key, partition, pos, client in sorted(self._ks_polls):
            ko = self.key_order.setdefault(sub, KeyOrder(sub))
            ko.polls += 1
            if (sub, mid) in seen:
                ko.redeliveries += 1
                continue
            seen.add((sub, mid))
            ko.first += 1
            ko.keys.add(key)
            k = (sub, key, "", partition)
            if k in last and pos < last[k][0]:
                ko.out_of_order += 1
                if len(ko.examples) < 5:
                    ko.examples.append(f"{mid} (key {key}, {client}) after {last[k][1]}")
            if k not in last or pos > last[k][0]:
                last[k] = (pos, mid)
        self._ks_polls.clear()

    def _flow(self, client: str, partition: int) -> Flow:
        key = (client, partition)
        if key not in self.flows:
            self.flows[key] = Flow(client, partition)
            self._flow_clients.add(client)
        return self.flows[key]

    def _widen(self, t: float) -> None:
        self.span = (min(self.span[0], t), max(self.span[1], t)) if self.span else (t, t)

    def add_batch(self, event: dict[str, Any], where: str = "history") -> bool:
        """Count a well-formed batch event (:data:`harness.history.BATCH_EVENTS`) as
        :meth:`add` counts each of its events, without making them; when it cannot, it makes
        them and adds them one by one, and returns False.

        Its events share every field but the columns, ``t`` among them, so a batch is one
        time: a flow's gaps inside it are zero, and a count per partition does the rest. It
        declines a partitions column holding anything but numbers and nulls (a boolean is
        equal to 1 in a count, a list cannot be counted), and Key_Shared polls, which are
        judged one by one.
        """
        single, columns = BATCH_EVENTS[event["type"]]
        size = batch_size(event) or 0
        if not size:
            return True
        column: list[Any] = []
        if single != "poll":  # a poll's partition only matters for Key_Shared
            if "partitions" in event:  # a null column gives every event a null partition
                column = event["partitions"] or [None] * size
            else:  # the events keep the batch's own field, if any
                column = [event.get("partition")] * size
            if not set(map(type, column)) <= _NUMBERS:
                return self._one_by_one(event, where)
        elif event.get("phase") != "recovery" and event.get("subscription_type") == "Key_Shared":
            return self._one_by_one(event, where)
        t = _time(event.get("t"))
        if t is None:
            self.skipped.add(where, BAD_TIME, size)
            return True
        second = int(t)
        self.times[second] += size
        if self.window is not None and t not in self.window:
            self.outside += size
            self.skipped.add(where, OUTSIDE, size)
            return True
        client, topic = _label(event.get("client")), _label(event.get("topic"))
        if single != "poll":
            self._clients.add(client)
        if single == "invoke":
            self._client_topic.setdefault(client, topic)
            for value, n in Counter(column).items():  # first seen first, as one by one
                partition = _partition(value)
                if partition is not None:
                    self.sends_by_partition.setdefault((topic, partition), Counter())[second] += n
                    flow = self._flow(client, partition)
                    flow.send(t)
                    flow.sends += n - 1
            return True
        if single == "ok":
            self.acks[second] += size
            flows = client in self._flow_clients
            for value, n in Counter(column).items():
                partition = _partition(value)
                key = (topic, -1 if partition is None else partition)
                self.by_partition.setdefault(key, Counter())[second] += n
                if flows:
                    flow = self._flow(client, key[1])
                    flow.ack(t)
                    flow.acks += n - 1
        elif event.get("phase") == "recovery":
            lo, hi = self.recovery or (t, t)
            self.recovery = (min(lo, t), max(hi, t))
        else:
            self.polls[second] += size
        self._widen(t)
        return True

    def _one_by_one(self, batch: dict[str, Any], where: str) -> bool:
        for event in expand_batch(batch):
            self.add(event, where)
        return False

    def add(self, event: dict[str, Any], where: str = "history") -> None:
        """Count one history event (``where``: its file, for ``skipped``)."""
        kind = event.get("type")
        if not isinstance(kind, str) or kind not in CHARTED_TYPES:
            return
        t = _time(event.get("t"))
        if t is None:
            self.skipped.add(where, BAD_TIME)
            return
        second = int(t)
        self.times[second] += 1
        if self.window is not None and t not in self.window:
            self.outside += 1
            self.skipped.add(where, OUTSIDE)
            return
        client = _label(event.get("client"))
        partition = _partition(event.get("partition"))
        if kind in ("invoke", "ok", "stall"):
            self._clients.add(client)
        if kind == "invoke":
            self._client_topic.setdefault(client, _label(event.get("topic")))
            if partition is not None:  # the producer chose it before the call
                key = (_label(event.get("topic")), partition)
                self.sends_by_partition.setdefault(key, Counter())[second] += 1
                self._flow(client, partition).send(t)
            return
        if kind == "stall":
            seconds = _float(event.get("seconds"))
            if seconds is None or seconds < 0:
                self.skipped.add(where, BAD_STALL)
                return
            if partition is None:  # a producer whose router picks the partition after the call
                partition = -1
            self._flow(client, partition).stall(t, seconds)
            key = (self._client_topic.get(client, ""), partition)
            _keep_band(self.stall_bands.setdefault(key, []), (t - seconds, t, client))
            return
        if kind == "ok":
            self.acks[second] += 1
            key = (_label(event.get("topic")), -1 if partition is None else partition)
            self.by_partition.setdefault(key, Counter())[second] += 1
            if client in self._flow_clients:
                self._flow(client, key[1]).ack(t)
        elif kind == "poll" and event.get("phase") == "recovery":
            lo, hi = self.recovery or (t, t)
            self.recovery = (min(lo, t), max(hi, t))
        elif kind == "poll":
            self.polls[second] += 1
            if event.get("subscription_type") == "Key_Shared" and event.get("key") is not None \
                    and isinstance(event.get("mid"), str):
                position = _position(event)
                if position is None:
                    self.skipped.add(where, BAD_POSITION)
                else:
                    self._ks_polls.append((t, _label(event.get("subscription")), event["mid"],
                                           _label(event["key"]), -1 if partition is None else partition,
                                           position, client))
        elif kind == "reset":
            self.resets.setdefault(second, Counter())[_label(event.get("reason")) or "unknown"] += 1
        else:
            self.errors[second] += 1
        self._widen(t)


def scan_owners(run_dir: str | os.PathLike[str]) -> dict[int, list[str]]:
    """Per partition, the distinct leaders/owners of the timeline in order (None skipped)."""
    path = Path(run_dir) / "timeline.jsonl"
    owners: dict[int, list[str]] = {}
    if not os.path.lexists(path):
        return owners
    try:
        for event in _read_timeline(path, Skipped()):  # scan_timeline counts what it leaves out
            partition = _partition(event.get("partition"))
            if event["type"] == "leader" and partition is not None:
                leader = event.get("leader_node") or event.get("leader")
                seq = owners.setdefault(partition, [])
                if isinstance(leader, str) and (not seq or seq[-1] != leader):
                    seq.append(leader)
    except OSError:  # scan_timeline says so
        pass
    return owners


#: Histories of at least this many bytes are scanned a file per process (:func:`scan_history`).
PARALLEL_BYTES = 256 << 20


def scan_history(run_dir: str | os.PathLike[str], window: Window | None = None) -> Rates:
    """Stream every ``history/*.jsonl`` of the run into per-second :class:`Rates`; with a
    ``window``, events outside it are only counted (``Rates.outside``).

    A history of :data:`PARALLEL_BYTES` or more, in several files, is read a file per process
    (as many as there are cores) and the files' counts added up in file order: the same
    :class:`Rates` as one process reading the files in order (each file's own state is
    independent of the others' but for a client's flows and topic, so when a client's sends,
    acknowledgements or stalls are in two files the files are read again one after another).
    """
    run_dir = Path(run_dir)
    files = history_files(run_dir)
    sizes = [_size(path) for path in files]
    total = sum(sizes)
    big = total >= PARALLEL_BYTES
    t0 = time.monotonic()
    if big:  # tens of seconds at 10M records: say so, as the check does
        log.info("report: reading %.1f GB of history (%d files) for its charts", total / 1e9, len(files))
    rates = None
    if big and len(files) > 1 and (os.cpu_count() or 1) > 1:
        rates = _scan_parallel(run_dir, files, sizes, window)
    if rates is None:
        rates = Rates(window=window)
        for path in files:
            _scan_file(rates, run_dir, path)
        rates.finish_key_order()
    if big:
        log.info("report: history read (%.0f s)", time.monotonic() - t0)
    return rates


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # the scan counts it as unreadable


def _scan_file(rates: Rates, run_dir: Path, path: Path) -> None:
    where = path.relative_to(run_dir).as_posix()
    try:
        for event in read_lenient(path, where, rates.skipped, expand=False):
            if event["type"] in BATCH_EVENTS:
                rates.add_batch(event, where)
            else:
                rates.add(event, where)
    except OSError as exc:  # a directory named *.jsonl, no permission: the rest still counts
        rates.skipped.add(where, f"unreadable ({exc.strerror or exc})")


def _scan_one(run_dir: Path, path: Path, window: Window | None) -> Rates:
    """One file's :class:`Rates` (a worker process's task; Key_Shared order is judged later)."""
    rates = Rates(window=window)
    _scan_file(rates, run_dir, path)
    return rates


def _scan_parallel(run_dir: Path, files: list[Path], sizes: list[int],
                   window: Window | None) -> Rates | None:
    """The files (of ``sizes`` bytes) read in worker processes and added up; None when a client
    is in two files (its flows need the files in order) or the workers could not run."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    largest_first = sorted(range(len(files)), key=lambda i: -sizes[i])
    try:  # spawned, not forked: the caller may hold threads (a Spark client's, a run's)
        with ProcessPoolExecutor(max_workers=min(len(files), os.cpu_count() or 1),
                                 mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {i: pool.submit(_scan_one, run_dir, files[i], window) for i in largest_first}
            parts = [futures[i].result() for i in range(len(files))]
    except (BrokenProcessPool, OSError):
        return None
    seen: set[str] = set()
    for part in parts:
        if part._clients & seen:
            return None
        seen |= part._clients
    return _add_up(parts, window)


def _add_up(parts: list[Rates], window: Window | None) -> Rates:
    """The :class:`Rates` of files read one after another, from each file's own (in file order,
    no client in two of them)."""
    out = Rates(window=window)
    for part in parts:
        for mine, theirs in ((out.acks, part.acks), (out.polls, part.polls), (out.errors, part.errors),
                             (out.times, part.times)):
            mine.update(theirs)
        for table, more in ((out.by_partition, part.by_partition),
                            (out.sends_by_partition, part.sends_by_partition)):
            for key, counts in more.items():
                table.setdefault(key, Counter()).update(counts)
        for second, reasons in part.resets.items():
            out.resets.setdefault(second, Counter()).update(reasons)
        out.recovery = _union(out.recovery, part.recovery)
        out.span = _union(out.span, part.span)
        out.flows.update(part.flows)
        for key, bands in part.stall_bands.items():
            kept = out.stall_bands.setdefault(key, [])
            for band in bands:
                _keep_band(kept, band)
        for client, topic in part._client_topic.items():
            out._client_topic.setdefault(client, topic)
        out._flow_clients |= part._flow_clients
        out._clients |= part._clients
        out._ks_polls += part._ks_polls
        for (where, why), n in part.skipped.counts.items():
            out.skipped.add(where, why, n)
        out.outside += part.outside
    out.finish_key_order()
    return out


def _union(a: tuple[float, float] | None, b: tuple[float, float] | None) -> tuple[float, float] | None:
    if a is None or b is None:
        return a or b
    return (min(a[0], b[0]), max(a[1], b[1]))


@dataclass(frozen=True)
class TimelineEntry:
    """One row of the report's timeline: a fault, injection, step, mark or leader change.

    ``tone`` picks the colour (fault, restore, inject, leader, step, error,
    mark); ``marker`` says whether it is drawn on the charts; ``partition`` is
    set for leader entries so per-partition charts show only their own.
    """

    t: float
    kind: str
    tone: str
    label: str
    detail: str
    marker: bool = True
    partition: PartitionKey | None = None
    #: far outside the run's window: listed in the table, not drawn
    outside: bool = False


def _pairs(value: Any) -> str:
    """``key=value`` text of a detail dict (or the value itself)."""
    if isinstance(value, dict):
        return " ".join(f"{k}={_text(v)}" for k, v in value.items())
    return _text(value) or ""


def _join(*parts: Any) -> str:
    return " ".join(str(p) for p in parts if p not in (None, ""))


class _Leaders:
    """Reduces leader snapshots to changes; the first of each partition is not a marker."""

    def __init__(self) -> None:
        self._last: dict[PartitionKey, tuple[str, str]] = {}

    def change(self, event: dict[str, Any], t: float) -> TimelineEntry | None:
        key = (_label(event.get("topic")), _int(event.get("partition")))
        leader = _text(event.get("leader")) or "none"
        isr = event.get("isr")
        isr_text = "[" + ",".join(_label(i) for i in isr) + "]" if isinstance(isr, list) else "?"
        before = self._last.get(key)
        self._last[key] = (leader, isr_text)
        if before == (leader, isr_text):
            return None
        name = f"{key[0]}/{key[1]}"
        if before is None:
            label = f"{name} leader {leader}"
        elif before[0] != leader:
            label = f"{name} leader {before[0]}\u2192{leader}"
        else:
            label = f"{name} ISR {before[1]}\u2192{isr_text}"
        detail = _join(f"isr={isr_text}", f"epoch={_text(event['epoch'])}" if "epoch" in event else None)
        return TimelineEntry(t, "leader", "leader", label, detail,
                             marker=before is not None, partition=key)


def _entry(event: dict[str, Any], t: float) -> TimelineEntry | None:
    """A timeline entry for a non-leader timeline event at ``t``, None for other types."""
    kind = event["type"]
    if kind == "fault":
        action = _text(event.get("action")) or "fault"
        tone = "restore" if action in RESTORE_ACTIONS else "fault"
        detail = _join(f"role={_text(event['role'])}" if event.get("role") else None,
                       _pairs(event.get("detail")))
        return TimelineEntry(t, kind, tone, _join(action, _text(event.get("node"))), detail)
    if kind == "inject":
        status = _text(event.get("status"))
        return TimelineEntry(t, kind, "inject",
                             _join(_text(event.get("point")) or "inject", status, _text(event.get("node"))),
                             _pairs(event.get("detail")), marker=status != "armed")
    if kind == "step":
        status = _text(event.get("status"))
        return TimelineEntry(t, kind, "error" if status == "error" else "step",
                             _join(f"step {_text(event.get('index'))}", _text(event.get("name")), status),
                             _join(_text(event.get("error")), _pairs(event.get("detail"))), marker=False)
    if kind == "mark":
        return TimelineEntry(t, kind, "mark", _text(event.get("label")) or "mark",
                             _pairs(event.get("detail")))
    return None


def _read_timeline(path: Path, skipped: Skipped) -> Iterator[dict[str, Any]]:
    """The events of ``timeline.jsonl`` (:func:`read_lenient`, within :data:`MAX_TIMELINE_BYTES`:
    a FIFO or a device there is counted, never opened or read)."""
    return read_lenient(path, "timeline.jsonl", skipped, limit=MAX_TIMELINE_BYTES, what="the timeline")


#: Timeline event types that become entries.
TIMELINE_KINDS = frozenset({"fault", "inject", "leader", "step", "mark"})


def scan_timeline(run_dir: str | os.PathLike[str], skipped: Skipped | None = None) -> list[TimelineEntry]:
    """The run's ``timeline.jsonl`` as entries in time order (leader snapshots as changes); lines
    and events it cannot use are counted in ``skipped``."""
    path = Path(run_dir) / "timeline.jsonl"
    if not os.path.lexists(path):
        return []
    skipped = Skipped() if skipped is None else skipped
    entries: list[TimelineEntry] = []
    leaders = _Leaders()
    try:
        for event in _read_timeline(path, skipped):
            if event["type"] not in TIMELINE_KINDS:
                continue
            t = _time(event.get("t"))
            if t is None:
                skipped.add("timeline.jsonl", BAD_TIME)
                continue
            entry = leaders.change(event, t) if event["type"] == "leader" else _entry(event, t)
            if entry is not None:
                entries.append(entry)
    except OSError as exc:
        skipped.add("timeline.jsonl", f"unreadable ({exc.strerror or exc})")
    return sorted(entries, key=lambda e: e.t)
