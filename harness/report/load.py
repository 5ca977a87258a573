"""Reading a run directory for the report: its result, histories and timeline.

``result.json`` is read only through :meth:`RunResult.read` (the one parser of it);
:class:`LoadedRun` adds what the report needs around it: the directory, why the
result is unusable when it is (the page and the index still render, verdict
``unknown``), and parsed times for sorting. Histories and the timeline are
tolerant: an errored or crashed run may lack any file or key. Histories are
streamed and reduced to per-second counts, so a run of millions of events costs
only its buckets in memory.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote, urlsplit

from harness.errors import ResultError
from harness.history import history_files, position_key, read_events
from harness.result import Expectation, RunResult

__all__ = [
    "LoadedRun",
    "Rates",
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


def _text(value: Any) -> str | None:
    """A display string for a free-form value (None stays None)."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else -1


def _timestamp(value: str | None) -> datetime | None:
    """An ISO 8601 time of ``result.json`` (UTC when it names no zone); None if it is not one."""
    if value is None:
        return None
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)


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
    :class:`ResultError` message), ``result`` is an empty one named after the
    directory and the verdict shown is ``unknown``; the rest of the directory
    (histories, timeline, logs) is still shown.
    """

    run_dir: Path
    result: RunResult
    problem: str | None = None

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

    def expectation(self, name: str) -> Expectation | None:
        """The judged expectation ``name`` (an anomaly kind, ``injection hit``, ...), if any."""
        return next((e for e in self.result.expectations if e.name == name), None)


def load_run(run_dir: str | os.PathLike[str]) -> LoadedRun:
    """The run in ``run_dir``; never raises for a bad ``result.json`` (see :class:`LoadedRun`)."""
    run_dir = Path(run_dir)
    try:
        return LoadedRun(run_dir, RunResult.read(run_dir))
    except ResultError as exc:
        # the message starts with the file's path; inside the run's page it is just result.json
        problem = str(exc).removeprefix(f"{run_dir}{os.sep}")
        return LoadedRun(run_dir, RunResult(run_dir.name), problem)


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


#: At most this many blocked-send bands are kept per partition (the longest ones).
MAX_STALL_BANDS = 8


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
    #: Key_Shared subscriptions: per-key order of first deliveries (see KeyOrder)
    key_order: dict[str, KeyOrder] = field(default_factory=dict)
    _ks_polls: list[tuple[float, str, str, str, int, tuple[int, int, int], str]] = field(
        default_factory=list)

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

    def add(self, event: dict[str, Any]) -> None:
        """Count one history event."""
        t = _float(event.get("t"))
        kind = event.get("type")
        if t is None or kind not in ("ok", "poll", "fail", "info", "reset", "invoke", "stall"):
            return
        second = int(t)
        client = str(event.get("client", ""))
        if kind == "invoke":
            self._client_topic.setdefault(client, str(event.get("topic", "")))
            if isinstance(event.get("partition"), int):  # the producer chose it before the call
                key = (str(event.get("topic", "")), event["partition"])
                self.sends_by_partition.setdefault(key, Counter())[second] += 1
                self._flow(client, event["partition"]).send(t)
            return
        if kind == "stall":
            seconds = _float(event.get("seconds"))
            partition = event.get("partition")
            if seconds is not None and isinstance(partition, int):
                self._flow(client, partition).stall(t, seconds)
                key = (self._client_topic.get(client, ""), partition)
                bands = self.stall_bands.setdefault(key, [])
                bands.append((t - seconds, t, client))
                if len(bands) > MAX_STALL_BANDS:
                    bands.remove(min(bands, key=lambda b: b[1] - b[0]))
            return
        if kind == "ok":
            self.acks[second] += 1
            key = (str(event.get("topic", "")), _int(event.get("partition")))
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
                self._ks_polls.append((t, str(event.get("subscription")), event["mid"],
                                       str(event["key"]), _int(event.get("partition")),
                                       position_key(event), client))
        elif kind == "reset":
            self.resets.setdefault(second, Counter())[str(event.get("reason") or "unknown")] += 1
        else:
            self.errors[second] += 1
        self._widen(t)


def scan_owners(run_dir: str | os.PathLike[str]) -> dict[int, list[str]]:
    """Per partition, the distinct leaders/owners of the timeline in order (None skipped)."""
    path = Path(run_dir) / "timeline.jsonl"
    owners: dict[int, list[str]] = {}
    if not path.is_file():
        return owners
    for event in read_events(path):
        if event.get("type") == "leader" and isinstance(event.get("partition"), int):
            leader = event.get("leader_node") or event.get("leader")
            seq = owners.setdefault(event["partition"], [])
            if isinstance(leader, str) and (not seq or seq[-1] != leader):
                seq.append(leader)
    return owners


def scan_history(run_dir: str | os.PathLike[str]) -> Rates:
    """Stream every ``history/*.jsonl`` of the run into per-second :class:`Rates`."""
    rates = Rates()
    for path in history_files(run_dir):
        for event in read_events(path):
            rates.add(event)
    rates.finish_key_order()
    return rates


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

    def change(self, event: dict[str, Any]) -> TimelineEntry | None:
        key = (str(event.get("topic", "")), _int(event.get("partition")))
        leader = _text(event.get("leader")) or "none"
        isr = event.get("isr")
        isr_text = "[" + ",".join(str(i) for i in isr) + "]" if isinstance(isr, list) else "?"
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
        return TimelineEntry(event["t"], "leader", "leader", label, detail,
                             marker=before is not None, partition=key)


def _entry(event: dict[str, Any]) -> TimelineEntry | None:
    """A timeline entry for a non-leader timeline event, None for other types."""
    kind, t = event.get("type"), event["t"]
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


def scan_timeline(run_dir: str | os.PathLike[str]) -> list[TimelineEntry]:
    """The run's ``timeline.jsonl`` as entries in time order (leader snapshots as changes)."""
    path = Path(run_dir) / "timeline.jsonl"
    if not path.is_file():
        return []
    entries: list[TimelineEntry] = []
    leaders = _Leaders()
    for event in read_events(path):
        if _float(event.get("t")) is not None:
            entry = leaders.change(event) if event["type"] == "leader" else _entry(event)
            if entry is not None:
                entries.append(entry)
    return sorted(entries, key=lambda e: e.t)
