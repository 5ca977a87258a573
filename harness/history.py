"""The history: the one contract between clients, collector, checker and report.

A run directory holds ``history/*.jsonl``: one file per client (producer,
consumer, the recovery reader), one JSON object per line, appended and flushed
as the run goes, so a crash of the harness keeps what was recorded (a torn last
line is skipped by :func:`read_events`). It also holds ``timeline.jsonl``
(faults, injections, leadership snapshots) in the same line format.

Every event has ``type``, ``client`` (who wrote it), ``t`` (wall clock, Unix
seconds) and ``m`` (monotonic seconds, comparable within one harness process).
On the clients' hot paths events less than half a millisecond apart may share one
stamp (``STAMP_S``); the order of events is the order of the lines.

Client events (Jepsen's ok / fail / info split: a timed-out send is *not* a
failed send):

``invoke``
    A send was attempted. ``mid`` (unique message id, also the start of the
    value), ``topic``, ``key`` (or null), ``tx`` (the transaction it is sent in,
    absent outside one), ``due`` (a paced producer's: when its schedule had this send
    due, wall clock like ``t``; absent when unpaced: ``t - due`` is the publish delay),
    ``src`` (a copier's send: the ``mid`` of the input record it copies; absent otherwise).
``invokes``
    Sends a producer attempts next, in columns (like ``polls``): ``mids``, ``keys``,
    ``partitions`` (the partition asked for, or null) and a copier's ``srcs``; batch fields ``topic``, ``tx``,
    and for a paced producer ``due`` and ``every``: the first send was due at ``due``,
    send i at ``due + i * every``. It means exactly its ``invoke`` events
    (:data:`INVOKES_FIELDS`; each with its own ``due``), written before any of them is
    sent; :func:`read_events` expands it.
``ok``
    The broker acknowledged ``mid``: ``topic`` and position fields (below).
``oks``
    A producer's acknowledgements of one poll or flush call, in columns (like
    ``polls``): ``mids`` and the position columns ``partitions``, Kafka
    ``offsets``, ``epochs``, Pulsar ``ledgers``, ``entries``, ``batches``; batch
    fields (``topic``, ``txn``) hold for every record. It means exactly its ``ok``
    events, in list order (:data:`OKS_FIELDS`); :func:`read_events` expands it.
Runs. An ``invokes``, ``oks`` or ``polls`` line may give its ``mids`` and its ``batches``
    as runs instead of lists (a fast producer's sends and a broker batch's acknowledgements
    are consecutive): ``mid_prefix`` and ``mids_from`` (record i's ``mid`` is the prefix
    followed by ``mids_from + i`` in decimal), ``batches_from`` (record i's ``batch`` is
    ``batches_from + i``), and ``count``, the number of records, which a line with a run
    must give and its lists must match. A run and the list it replaces never come
    together (:data:`RUNS`, :func:`batch_size`).
``fail``
    The send definitely did not happen. ``mid``, ``error``.
``info``
    Outcome unknown (timeout, connection lost after sending). ``mid``, ``error``.
``poll``
    A consumer read a record: ``mid`` (parsed from the value, or null if the
    value is not ours), ``phase`` (``run`` during the case, ``recovery`` for
    the final read after heal), ``topic``, position fields, ``ts`` (record
    timestamp, ms), ``key``.
``polls``
    A consumer's batch of records (one ``consume`` call), in columns: the same
    record as ``poll`` events, written once per batch because a line per record
    costs the consumer more Python than the read itself. Batch fields: ``phase``,
    ``topic`` and any other field that holds for every record (``isolation``).
    Record fields are equal-length lists named by the plural of the ``poll``
    field: ``partitions``, ``mids``, ``tss``, ``keys`` and Kafka ``offsets``,
    ``epochs``, Pulsar ``ledgers``, ``entries``, ``batches``, ``redeliveries``
    (batch fields there: ``subscription``, ``subscription_type``). A list is null
    when every element is null (``keys`` of unkeyed records). A ``polls`` event
    means exactly its ``poll`` events, in list order, all with the batch's
    stamp; :func:`read_events` expands it (:data:`POLLS_FIELDS`). The stamp is
    taken when the call returns, and the Kafka consumer's call returns as soon
    as a record is there (``harness.clients.kafka.take``), so it is when the
    batch's first record arrived, not when a full batch did.
``reset``
    The consumer saw its position move other than forward by one: ``topic``,
    ``partition``, ``reason`` (``offset-out-of-range``, ``truncation``,
    ``rebalance``, ...), ``from`` and ``to`` offsets where known.
``stall``
    A send call blocked the caller (Pulsar queue full): ``seconds``.
``txn``
    A transactional producer's call on transaction ``tx`` (an id unique in the run,
    ``<client>.t<n>``): ``action`` (``begin``, ``commit``, ``abort``) and ``status``
    (Jepsen's split again): ``invoke`` just before a ``commit`` or ``abort`` call, then
    exactly one of ``ok`` (it returned), ``fail`` (it definitely did not take effect:
    the client must abort) or ``info`` (unknown: a timeout, a fatal error), with
    ``error``; ``begin`` is local to the client and records ``ok`` only. The sends of the
    transaction are the ``invoke`` events with its ``tx``. An ``ok``/``fail`` event
    may also carry ``txn`` = ``aborted`` or ``committed``: the older shortcut for the
    outcome of the transaction it was sent in (still read).

Position fields: ``partition`` (int). Kafka: ``offset`` (int) and ``epoch``
(leader epoch, int or null). Pulsar: ``ledger``, ``entry``, ``batch`` (ints;
``batch`` is -1 for a non-batched message) and ``offset`` null. The total
order of positions within a partition is :func:`position_key`.

Timeline events (``timeline.jsonl``, ``client`` = ``runner``):

``fault``
    ``action`` (kill9, stop, start, pause, resume, partition, heal, ...),
    ``node``, ``role`` (the selector it resolved from), ``detail``.
``inject``
    ``point``, ``node``, ``status`` (armed, hit, timeout), ``detail`` (the
    rule's event fields: leo, hw, fetch offset ...).
``leader``
    ``topic``, ``partition``, ``leader``, ``isr`` (list), ``epoch``.
``step``
    ``index``, ``name``, ``status`` (start, done, error).
``mark``
    Free-form marker with ``label``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

__all__ = [
    "Recorder",
    "CLIENT_TYPES",
    "TIMELINE_TYPES",
    "HistoryWriter",
    "read_events",
    "history_files",
    "position_key",
    "make_value",
    "parse_mid",
    "SCHEMA_VERSION",
    "POLLS_FIELDS",
    "OKS_FIELDS",
    "INVOKES_FIELDS",
    "TXN_ACTIONS",
    "TXN_STATUSES",
    "BATCH_EVENTS",
    "RUNS",
    "RUN_FIELDS",
    "batch_size",
    "expand_batch",
    "expand_polls",
    "ensemble_at",
    "write_set",
]

SCHEMA_VERSION = 1
CLIENT_TYPES = frozenset({"invoke", "invokes", "ok", "oks", "fail", "info", "poll", "polls", "reset", "stall",
                          "meta", "txn"})
#: ``txn`` event ``action`` and ``status`` values
TXN_ACTIONS = ("begin", "commit", "abort")
TXN_STATUSES = ("invoke", "ok", "fail", "info")
#: column of a ``polls`` event -> the ``poll`` field it holds
POLLS_FIELDS = {"partitions": "partition", "offsets": "offset", "epochs": "epoch",
                "ledgers": "ledger", "entries": "entry", "batches": "batch",
                "mids": "mid", "tss": "ts", "keys": "key", "redeliveries": "redelivery"}
#: column of an ``oks`` event -> the ``ok`` field it holds
OKS_FIELDS = {"mids": "mid", "partitions": "partition", "offsets": "offset", "epochs": "epoch",
              "ledgers": "ledger", "entries": "entry", "batches": "batch"}
#: column of an ``invokes`` event -> the ``invoke`` field it holds
INVOKES_FIELDS = {"mids": "mid", "keys": "key", "partitions": "partition", "srcs": "src"}
#: batch event type -> (the type of its events, its columns)
BATCH_EVENTS = {"polls": ("poll", POLLS_FIELDS), "oks": ("ok", OKS_FIELDS),
                "invokes": ("invoke", INVOKES_FIELDS)}
#: a batch line's runs (the module docstring): the field that starts one -> the column it
#: replaces; ``mids_from`` needs ``mid_prefix``, and a line with a run gives ``count``
RUNS = {"mids_from": "mids", "batches_from": "batches"}
#: the fields of a batch line that only describe its runs (not fields of its events)
RUN_FIELDS = ("mids_from", "batches_from", "mid_prefix", "count")
TIMELINE_TYPES = frozenset({"fault", "inject", "leader", "step", "mark", "meta"})
#: the ``fault`` action that restores each lasting fault of a node (``heal-all`` restores
#: them all; other faults, e.g. a bundle ``unload``, are instantaneous)
RESTORED_BY = {"kill9": "start", "stop": "start", "powerloss": "start", "pause": "resume",
               "partition": "heal", "diskfull": "heal", "degrade": "heal", "clock": "heal",
               "readonly": "heal"}

_MID_SEP = b"|"
_MID_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"


def make_value(mid: str, size: int = 0) -> bytes:
    """A record value that starts with its message id, padded to ``size`` bytes."""
    head = mid.encode() + _MID_SEP
    if size > len(head):
        return head + b"x" * (size - len(head))
    return head


def parse_mid(value: bytes | None) -> str | None:
    """The message id at the start of a value made by :func:`make_value`, else None.

    Ids are made of letters, digits, ``_``, ``.`` and ``-`` (workload name and sequence);
    anything else is not ours.
    """
    if not value:
        return None
    sep = value.find(_MID_SEP)
    if sep <= 0 or sep > 64:
        return None
    head = value[:sep]
    return None if head.translate(None, _MID_CHARS) else head.decode("ascii")


def position_key(event: dict[str, Any]) -> tuple[int, int, int]:
    """Total order of a record's position within its partition (Kafka or Pulsar)."""
    if event.get("offset") is not None:
        return (-1, int(event["offset"]), -1)
    def part(name: str) -> int:
        value = event.get(name)
        return -1 if value is None else int(value)

    return (part("ledger"), part("entry"), part("batch"))


#: how long the hot paths reuse one rendered time stamp (see HistoryWriter.head)
STAMP_S = 0.0005


class Recorder(Protocol):
    """Anything that records timeline events: a :class:`HistoryWriter`, or the run's event
    hook (``harness.run.events.RunEvents``), which also tells the console and listeners."""

    def record(self, type_: str, **fields: Any) -> dict[str, Any]: ...


class HistoryWriter:
    """Appends events to one JSONL file; thread-safe; flushes at most every ``flush_s``.

    Use as a context manager. ``record`` stamps ``client``, ``t`` and ``m``.
    """

    def __init__(self, path: str | os.PathLike[str], client: str, *, flush_s: float = 0.2) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.client = client
        self._client_js = json.dumps(client)
        self._fh: IO[str] | None = open(self.path, "a", encoding="utf-8", buffering=1 << 16)
        self._lock = threading.Lock()
        self._flush_s = flush_s
        self._last_flush = time.monotonic()
        self._stamped: tuple[float, str] = (-1.0, "")

    def record(self, type_: str, **fields: Any) -> dict[str, Any]:
        event: dict[str, Any] = {"type": type_, "client": self.client,
                                 "t": round(time.time(), 6), "m": round(time.monotonic(), 6)}
        event.update(fields)
        line = json.dumps(event, separators=(",", ":"), default=str) + "\n"
        with self._lock:
            if self._fh is None:
                raise ValueError(f"history {self.path} is closed")
            self._fh.write(line)
            now = event["m"]
            if now - self._last_flush >= self._flush_s:
                self._fh.flush()
                self._last_flush = now
        return event

    def head(self, type_: str) -> str:
        """The start of an event line stamped now: ``{"type":..,"client":..,"t":..,"m":..``.

        The clients' hot paths append ``,"k":v...}\n`` and pass the line to
        :meth:`write_line`. Rendering two floats costs more than the rest of an event, so
        the stamp is rendered again only once ``STAMP_S`` has passed: events within the
        same half millisecond share a stamp (their order is the order of the file).
        """
        m = time.monotonic()
        # one tuple, assigned at once: a producer's callbacks call this from the client's
        # threads while its send loop does, and neither may pair a new time with an old stamp
        stamped, stamp = self._stamped
        if m - stamped >= STAMP_S:
            stamp = f'"t":{time.time():.6f},"m":{m:.6f}'
            self._stamped = (m, stamp)
        return f'{{"type":"{type_}","client":{self._client_js},{stamp}'

    def write_line(self, line: str) -> None:
        """Appends one line made from :meth:`head` (or :meth:`line`)."""
        with self._lock:
            if self._fh is None:
                raise ValueError(f"history {self.path} is closed")
            self._fh.write(line)
            now = time.monotonic()
            if now - self._last_flush >= self._flush_s:
                self._fh.flush()
                self._last_flush = now

    def line(self, type_: str, body: str, t: float, m: float) -> str:
        """One event line from a pre-rendered JSON ``body`` (``,"k":v...``): the clients' hot path.

        Same format as :meth:`record`; ``body`` must be valid JSON members.
        """
        return f'{{"type":"{type_}","client":{self._client_js},"t":{t:.6f},"m":{m:.6f}{body}}}\n'

    def write_lines(self, lines: list[str]) -> None:
        """Appends lines made by :meth:`line` under one lock (a consumer's whole batch)."""
        with self._lock:
            if self._fh is None:
                raise ValueError(f"history {self.path} is closed")
            self._fh.write("".join(lines))
            now = time.monotonic()
            if now - self._last_flush >= self._flush_s:
                self._fh.flush()
                self._last_flush = now

    def flush(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.flush()
                os.fsync(self._fh.fileno())

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.flush()
                self._fh.close()
                self._fh = None

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def history_files(run_dir: str | os.PathLike[str]) -> list[Path]:
    """The client history files of a run directory, in name order."""
    return sorted((Path(run_dir) / "history").glob("*.jsonl"))


def _long(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(1 << 63) <= value < (1 << 63)


def batch_size(event: Mapping[str, Any]) -> int | None:
    """How many events a batch event stands for: the length its list columns share, and its
    ``count`` when it gives one; None when it is malformed (a column that is not a list,
    lists of different lengths, a count that differs or is no integer, a run without a
    count, a run beside the list it replaces, ``mids_from`` without a text ``mid_prefix``)
    or nothing gives its size."""
    fields = BATCH_EVENTS[event["type"]][1]
    sizes = set()
    for plural in fields:
        col = event.get(plural)
        if col is None:
            continue
        if not isinstance(col, list):
            return None
        sizes.add(len(col))
    runs = [r for r, plural in RUNS.items() if plural in fields and event.get(r) is not None]
    count: Any = event.get("count")
    if runs or count is not None:
        if not _long(count) or count < 0:
            return None
        for r in runs:  # every value of the run a 64-bit integer, and no list beside it
            last = event[r] + max(count - 1, 0) if _long(event[r]) else None
            if not _long(last) or event.get(RUNS[r]) is not None:
                return None
        if "mids_from" in runs and not isinstance(event.get("mid_prefix"), str):
            return None
        sizes.add(count)
    return sizes.pop() if len(sizes) == 1 else None


def expand_batch(event: dict[str, Any]) -> list[dict[str, Any]]:
    """The events a batch event (``polls``, ``oks``, ``invokes``: :data:`BATCH_EVENTS`)
    stands for.

    A malformed batch (:func:`batch_size`) gives no events, like a corrupt line.
    """
    size = batch_size(event)
    if size is None:
        return []
    single, fields = BATCH_EVENTS[event["type"]]
    base = {k: v for k, v in event.items() if k not in fields and k not in RUN_FIELDS}
    base["type"] = single
    columns: dict[str, list[Any] | None] = {}
    for plural, field in fields.items():
        col = event.get(plural)
        if col is None:
            if plural in event:
                columns[field] = None
            continue
        columns[field] = col
    mids_from = event.get("mids_from") if "mids" in fields else None
    batches_from = event.get("batches_from") if "batches" in fields else None
    prefix = event.get("mid_prefix")
    # a paced batch of sends: each send's own due time (the module docstring)
    every = base.pop("every", None) if single == "invoke" else None
    due = base.get("due")
    step = every if _number(due) and _number(every) else None
    out = []
    for i in range(size):
        e = dict(base)
        for field, col in columns.items():
            e[field] = None if col is None else col[i]
        if mids_from is not None:
            e["mid"] = f"{prefix}{mids_from + i}"
        if batches_from is not None:
            e["batch"] = batches_from + i
        if step is not None:
            e["due"] = due + i * step
        out.append(e)
    return out


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


#: the name the ``polls`` batches came with
expand_polls = expand_batch


def read_events(path: str | os.PathLike[str], *, expand: bool = True) -> Iterator[dict[str, Any]]:
    """Events of one JSONL file; a torn or corrupt line (crash mid-write) is skipped.

    Batches (:data:`BATCH_EVENTS`) come out as their events unless ``expand`` is false.
    """
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.endswith("\n"):
                return  # torn tail from a crash
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):  # not JSON, a 5000-digit number, deep nesting
                continue
            if isinstance(event, dict) and isinstance(event.get("type"), str):
                if expand and event["type"] in BATCH_EVENTS:
                    yield from expand_batch(event)
                else:
                    yield event


# -- the bookie dump's ledgers (bookies/ledgers.json) ------------------------------------------
def ensemble_at(ensembles: Mapping[int, Sequence[str]], entry: int) -> tuple[str, ...]:
    """The ensemble entry ``entry`` of a ledger is written to: the one from the last
    ensemble change at or before it (``ensembles``: first entry id -> bookie ids)."""
    first = max((k for k in ensembles if k <= entry), default=None)
    return tuple(ensembles[first]) if first is not None else ()


def write_set(ensembles: Mapping[int, Sequence[str]], write_quorum: int, entry: int) -> list[str]:
    """The bookies entry ``entry`` is written to: BookKeeper's round-robin distribution
    (``RoundRobinDistributionSchedule``): bookie ``entry mod E`` of its ensemble and the next
    ``write_quorum - 1``, never more than the ensemble. The bookie dump's readers (the
    checker's bookie family, the Pulsar points' judgement) share this one rule."""
    ensemble = ensemble_at(ensembles, entry)
    return [ensemble[(entry + i) % len(ensemble)] for i in range(min(write_quorum, len(ensemble)))]
