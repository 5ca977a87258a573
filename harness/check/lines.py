"""How the checker reads one history line: the single definition of the history
contract's tolerance, shared by the checker's Arrow ingest (its slow path) and the
plain-Python reference checker in ``bench/``.

A line that is not a JSON object, or whose numeric fields are not 64-bit integers,
is dropped; a non-string value of a string field becomes its JSON text; ``t`` (and
``due``, ``every``) is read as a number, or a string cast to a double (hexadecimal strings, which Java's
parser took when Spark read the lines, are not taken); batch columns (``polls``,
``oks``, ``invokes``) must be lists, integer lists for positions, else the line is
dropped. Lines end at ``\\n``, ``\\r\\n`` or ``\\r``; a complete last line without a
newline is kept; bytes that are not UTF-8 read as U+FFFD.

A history line that is not blank is *skipped* (:func:`known`, :class:`Tally`) when it
is dropped, when its ``type`` is not a client event of the contract
(:data:`harness.history.CLIENT_TYPES`), or when it is a batch whose columns differ in
length; a replica line when it is dropped or is not a ``replica`` record. A client event
of a send (``invoke``, ``ok``, ``fail``, ``info``; each record of a batch) without a
message id is *not judged*: nothing can say whether it was lost. Both checkers count
these per file and reason (:func:`reason_of`, :func:`unjudged`), so that nothing the
check cannot use leaves the judgement in silence.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.check.result import UNUSED
from harness.history import BATCH_EVENTS, CLIENT_TYPES, RUNS, batch_size, expand_batch

__all__ = ["ANY_LISTS", "BREAK", "DOUBLES", "FileTally", "LONGS", "LONG_LISTS", "NOT_CLIENT_EVENT",
           "NOT_JSON", "NOT_REPLICA", "NO_TYPE", "SENDS", "STRINGS", "STRING_LISTS", "Tally", "UNEQUAL",
           "RUN_LONGS", "RUN_STRINGS", "blank", "conform", "decode", "double", "events_of", "known",
           "read_line", "read_lines",
           "reason_of", "refusal", "skip_reason", "split_lines", "text", "unjudged", "unused"]

LONGS = ("partition", "offset", "ledger", "entry", "batch")
#: numbers read as doubles (:func:`double`): the event's time; a paced send's schedule
DOUBLES = ("t", "due", "every")
STRINGS = ("type", "client", "mid", "topic", "phase", "txn", "isolation", "node", "key", "subscription",
           "subscription_type", "tx", "action", "status", "src")
#: batch columns: lists of integers, lists of strings, lists of anything
LONG_LISTS = ("partitions", "offsets", "ledgers", "entries", "batches")
STRING_LISTS = ("mids", "keys", "srcs")
ANY_LISTS = ("epochs", "tss", "redeliveries")
#: a batch line's runs (harness.history.RUNS): integers, and the text before each mid
RUN_LONGS = ("count", *RUNS)
RUN_STRINGS = ("mid_prefix",)
REPLICA_STRINGS = ("type", "node", "mid", "topic")
_LONG_MAX = 1 << 63
_BLANKS = "".join(map(chr, range(33)))  # what Java's String.trim removes
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?")
BREAK = re.compile(rb"\r\n|\r|\n")
_BLANK_LINE = b" \t"  # what a blank line holds (the JSON whitespace a line can hold)


#: Why a line is skipped (the bounded reasons a result counts; :func:`refusal` gives the
#: others: ``"<field>: <why>"``), and what a send without a message id is counted as.
NOT_JSON = "not a JSON object"
NO_TYPE = "no type"
NOT_CLIENT_EVENT = "not a client event of the history contract"
NOT_REPLICA = "not a replica record"
UNEQUAL = "batch columns of different lengths"
#: the client events of a send, judged per message id (a batch's records count one by one)
SENDS = ("invoke", "ok", "fail", "info")


def unjudged(kind: str) -> str:
    """The reason a send event of type ``kind`` (:data:`SENDS`) without a message id is
    counted under: ``"ok without a message id"``."""
    return f"{kind} without a message id"


@dataclass
class Tally:
    """A file's lines (not blank), those of them skipped, and, by reason, the skipped lines
    and the sends without a message id (:func:`unjudged`; events, not lines)."""

    lines: int = 0
    skipped: int = 0
    reasons: Counter[str] = field(default_factory=Counter)


#: a send without a message id's reason -> the send's event type
_UNJUDGED = {unjudged(kind): kind for kind in SENDS}


@dataclass
class FileTally:
    """What a check's files gave it that it could not use, summed by both checkers alike:
    each file's lines (not blank), and by reason (the module docstring) its skipped lines
    and its sends without a message id. Files are named as in the run directory:
    ``history/<name>`` and ``replicas/<name>``."""

    lines: Counter[str] = field(default_factory=Counter)
    unread: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    def counts(self) -> dict[str, int]:
        """The totals of :data:`COUNTS` that it holds: ``lines``, ``skipped``, ``unjudged``,
        ``unjudged-ok``, ``replica-lines``, ``replica-skipped``."""
        out = dict.fromkeys(UNUSED, 0)
        for name, n in self.lines.items():
            out["replica-lines" if _replica(name) else "lines"] += n
        for name, reasons in self.unread.items():
            for why, n in reasons.items():
                if _replica(name):
                    out["replica-skipped"] += n
                elif why in _UNJUDGED:
                    out["unjudged"] += n
                    out["unjudged-ok"] += n if _UNJUDGED[why] == "ok" else 0
                else:
                    out["skipped"] += n
        return out

    def by_file(self) -> dict[str, dict[str, int]]:
        """The non-zero counts by file and reason, in name order: a result's ``unread``
        (:attr:`harness.check.result.CheckResult.unread`)."""
        return {name: {why: n for why, n in sorted(reasons.items()) if n}
                for name, reasons in sorted(self.unread.items()) if any(reasons.values())}


def _replica(name: str) -> bool:
    return name.startswith("replicas/")


def split_lines(data: bytes, base: int = 0) -> Iterator[tuple[int, bytes]]:
    """(byte offset of its start + ``base``, line without its end) for each line of
    ``data``; a last line without an end is one too, an empty tail is not."""
    start = 0
    for m in BREAK.finditer(data):
        yield base + start, data[start:m.start()]
        start = m.end()
    if start < len(data):
        yield base + start, data[start:]


def decode(line: bytes) -> dict[str, Any] | None:
    """One line as a JSON object, or None (not JSON, not an object)."""
    try:
        event = json.loads(line.decode("utf-8", errors="replace"))
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def blank(line: bytes) -> bool:
    """Whether a line (without its end) is blank: empty, or spaces and tabs only. A blank
    line is no line: neither read nor skipped."""
    return not line.strip(_BLANK_LINE)


def read_lines(path: Path, *, replicas: bool = False,
               tally: Tally | None = None) -> Iterator[tuple[tuple[int, int], dict[str, Any]]]:
    """((line number, index in its batch), event) for each event the checker reads; a
    batch line gives its events (not in ``replicas`` files, whose lines are read with
    the replica fields only). Lines of unknown types come out too (the checker ignores
    them). ``tally``: the file's lines, its skipped lines and its sends without a message
    id are added to it (:func:`reason_of`)."""
    with open(path, "rb") as fh:
        data = fh.read()
    for n, (_, line) in enumerate(split_lines(data)):
        if blank(line):
            continue
        event, why = read_line(line, replicas)
        if event is not None:
            why = reason_of(event, replicas)
        if tally is not None:
            tally.lines += 1
            if why is not None:
                tally.skipped += 1
                tally.reasons[why] += 1
        if event is None:
            continue
        for i, single in enumerate([event] if replicas else events_of(event)):
            if tally is not None and not replicas and _without_id(single):
                tally.reasons[unjudged(single["type"])] += 1
            yield (n, i), single


def events_of(event: dict[str, Any]) -> list[dict[str, Any]]:
    """The events of a history line read (:func:`read_line`): a batch's records (a null
    column reads like an absent one: the line's own field), else the line itself."""
    if event.get("type") not in BATCH_EVENTS:
        return [event]
    fields = BATCH_EVENTS[event["type"]][1]
    return expand_batch({k: v for k, v in event.items() if not (k in fields and v is None)})


def _without_id(event: dict[str, Any]) -> bool:
    """A send (:data:`SENDS`) without a message id: not judged."""
    return event.get("type") in SENDS and event.get("mid") is None


def read_line(line: bytes, replicas: bool = False) -> tuple[dict[str, Any] | None, str | None]:
    """A line (without its end) as the checker reads it (:func:`conform`), and None; or
    None and why it is dropped (:data:`NOT_JSON` or the :func:`refusal`)."""
    event = decode(line)
    if event is None:
        return None, NOT_JSON
    why = refusal(event, replicas)
    if why is not None:
        return None, why
    conform(event, replicas)
    return event, None


def refusal(event: dict[str, Any], replicas: bool = False) -> str | None:
    """Why a line's JSON object is not read (its first refused field, as
    ``"<field>: <why>"``), or None when it is read (:func:`conform`)."""
    for name in LONGS:
        value = event.get(name)
        if value is not None and not _is_long(value):
            return f"{name}: not a 64-bit integer"
    if replicas:
        return None
    for name in RUN_LONGS:
        value = event.get(name)
        if value is not None and not _is_long(value):
            return f"{name}: not a 64-bit integer"
    for name in (*LONG_LISTS, *STRING_LISTS, *ANY_LISTS):
        value = event.get(name)
        if value is not None and not isinstance(value, list):
            return f"{name}: not a list"
    for name in LONG_LISTS:
        if any(v is not None and not _is_long(v) for v in event.get(name) or ()):
            return f"{name}: not a list of 64-bit integers"
    return None


def conform(event: dict[str, Any], replicas: bool = False) -> bool:
    """Whether the line is read (:func:`refusal`); if so its fields are made what the
    checker reads (texts for string fields, a double or None for ``t``), in place."""
    if refusal(event, replicas) is not None:
        return False
    if replicas:
        for name in REPLICA_STRINGS:
            event[name] = text(event.get(name))
        return True
    for name in STRINGS:
        event[name] = text(event.get(name))
    for name in STRING_LISTS:
        if event.get(name) is not None:
            event[name] = [text(v) for v in event[name]]
    for name in RUN_STRINGS:
        if event.get(name) is not None:
            event[name] = text(event[name])
    event["t"] = double(event.get("t"))
    for name in DOUBLES[1:]:
        if name in event:
            event[name] = double(event[name])
    return True


def known(event: dict[str, Any]) -> bool:
    """Whether a history line read (:func:`conform`) is an event of the contract: a client
    event type, and for a batch, columns (of its type) of one length (a batch without
    columns, or with empty ones, is known and has no events)."""
    kind = event.get("type")
    if kind not in CLIENT_TYPES:
        return False
    if kind in BATCH_EVENTS:
        if batch_size(event) is not None:
            return True
        # nothing gives it a size: known, and no events
        return all(event.get(c) is None for c in (*BATCH_EVENTS[kind][1], *RUN_LONGS))
    return True


def reason_of(event: dict[str, Any], replicas: bool = False) -> str | None:
    """Why a line read (:func:`conform`) is skipped all the same (:data:`NO_TYPE`,
    :data:`NOT_CLIENT_EVENT`, :data:`UNEQUAL`; in a replica file :data:`NOT_REPLICA`), or
    None when it is an event of the contract (:func:`known`)."""
    kind = event.get("type")
    if replicas:
        return None if kind == "replica" else NO_TYPE if kind is None else NOT_REPLICA
    if known(event):
        return None
    if kind is None:
        return NO_TYPE
    return NOT_CLIENT_EVENT if kind not in CLIENT_TYPES else UNEQUAL


def skip_reason(line: bytes, replicas: bool = False) -> str | None:
    """Why a history (``replicas``: replica) line, without its end, is skipped, or None when
    it is read and known, or blank: :func:`read_lines`' tally, with an unknown type named."""
    return unused(line, replicas)[0]


def unused(line: bytes, replicas: bool = False) -> tuple[str | None, str | None]:
    """What the check cannot use of a history (``replicas``: replica) line without its end,
    as :func:`read_lines` tallies it: why it is skipped (None when it is read and known, or
    blank; an unknown type named), and its sends without a message id (None when it has
    none: ``"ok without a message id"``, or for a batch ``"oks: 2 of 5 records without a
    message id"``)."""
    if blank(line):
        return None, None
    event, why = read_line(line, replicas)
    if event is None:
        return why, None
    why = reason_of(event, replicas)
    if why in (NOT_CLIENT_EVENT, NOT_REPLICA):
        return f"type {event['type']!r}: {why}", None
    if why is not None or replicas:
        return why, None
    events = events_of(event)
    missing = sum(map(_without_id, events))
    if not missing:
        return None, None
    if event["type"] not in BATCH_EVENTS:
        return None, unjudged(event["type"])
    return None, f"{event['type']}: {missing} of {len(events)} records without a message id"


def _is_long(value: Any) -> bool:
    return type(value) is int and -_LONG_MAX <= value < _LONG_MAX


def text(value: Any) -> str | None:
    """A string field's value: a non-string becomes its JSON text; a lone surrogate
    (``"\\ud800"``, no character) becomes U+FFFD."""
    if value is None:
        return None
    if not isinstance(value, str):
        value = json.dumps(value, separators=(",", ":"))
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-8", errors="surrogatepass").decode("utf-8", errors="replace")
    return value


def double(value: Any) -> float | None:
    """``t`` as the checker reads it (a number, or a string cast to double), when finite."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        try:
            out = float(value)
        except OverflowError:  # an integer beyond any double
            return None
    elif isinstance(value, str) and _DECIMAL.fullmatch(value.strip(_BLANKS)):
        out = float(value.strip(_BLANKS).rstrip("fFdD"))
    else:
        return None
    return out if math.isfinite(out) else None


def receipts(files: list[Path] | list[str]) -> Iterator[tuple[str, Any, int, int, Any]]:
    """(mid, partition, ledger, entry, client) of each producer receipt (``ok``) in ``files``
    that names a ledger and an entry (Pulsar; a deduplicated resend's receipt names -1:-1:
    none), batch lines expanded; what the bookie family judges ``past-closed-end`` on."""
    for path in files:
        for _, ev in read_lines(Path(path)):
            lid, eid, mid = ev.get("ledger"), ev.get("entry"), ev.get("mid")
            if (ev.get("type") == "ok" and isinstance(mid, str) and isinstance(lid, int)
                    and isinstance(eid, int) and lid >= 0 and eid >= 0):
                yield mid, ev.get("partition"), lid, eid, ev.get("client")
