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
length; both checkers count such lines the same way.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.history import BATCH_EVENTS, CLIENT_TYPES, expand_batch

__all__ = ["ANY_LISTS", "BREAK", "DOUBLES", "LONGS", "LONG_LISTS", "STRINGS", "STRING_LISTS", "Tally",
           "blank", "conform", "decode", "double", "known", "read_lines", "refusal", "skip_reason",
           "split_lines", "text"]

LONGS = ("partition", "offset", "ledger", "entry", "batch")
#: numbers read as doubles (:func:`double`): the event's time; a paced send's schedule
DOUBLES = ("t", "due", "every")
STRINGS = ("type", "client", "mid", "topic", "phase", "txn", "isolation", "node", "key", "subscription",
           "subscription_type", "tx", "action", "status", "src")
#: batch columns: lists of integers, lists of strings, lists of anything
LONG_LISTS = ("partitions", "offsets", "ledgers", "entries", "batches")
STRING_LISTS = ("mids", "keys", "srcs")
ANY_LISTS = ("epochs", "tss", "redeliveries")
REPLICA_STRINGS = ("type", "node", "mid", "topic")
_LONG_MAX = 1 << 63
_BLANKS = "".join(map(chr, range(33)))  # what Java's String.trim removes
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?")
BREAK = re.compile(rb"\r\n|\r|\n")
_BLANK_LINE = b" \t"  # what a blank line holds (the JSON whitespace a line can hold)


@dataclass
class Tally:
    """History lines (not blank) and those of them skipped (see the module docstring)."""

    lines: int = 0
    skipped: int = 0


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
    them). ``tally``: the file's lines and skipped lines are added to it (history files
    only: replica lines are not tallied)."""
    with open(path, "rb") as fh:
        data = fh.read()
    for n, (_, line) in enumerate(split_lines(data)):
        event = decode(line)
        if event is not None and not conform(event, replicas):
            event = None
        if tally is not None and not replicas and not blank(line):
            tally.lines += 1
            tally.skipped += event is None or not known(event)
        if event is None:
            continue
        if replicas or event.get("type") not in BATCH_EVENTS:
            yield (n, 0), event
            continue
        # A null column reads like an absent one: the line's own field.
        fields = BATCH_EVENTS[event["type"]][1]
        batch = {k: v for k, v in event.items() if not (k in fields and v is None)}
        for i, single in enumerate(expand_batch(batch)):
            yield (n, i), single


def refusal(event: dict[str, Any], replicas: bool = False) -> str | None:
    """Why a line's JSON object is not read (its first refused field, as
    ``"<field>: <why>"``), or None when it is read (:func:`conform`)."""
    for name in LONGS:
        value = event.get(name)
        if value is not None and not _is_long(value):
            return f"{name}: not a 64-bit integer"
    if replicas:
        return None
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
        lengths = {len(event[c]) for c in BATCH_EVENTS[kind][1] if event.get(c) is not None}
        return len(lengths) <= 1
    return True


def skip_reason(line: bytes) -> str | None:
    """Why a history line (without its end) is skipped, or None when it is read and known
    or blank: the reading of :func:`read_lines`' tally, with the reason."""
    if blank(line):
        return None
    event = decode(line)
    if event is None:
        return "not a JSON object"
    why = refusal(event)
    if why is not None:
        return why
    conform(event)
    if known(event):
        return None
    kind = event.get("type")
    if kind is None:
        return "no type"
    if kind not in CLIENT_TYPES:
        return f"type {kind!r}: not a client event of the history contract"
    return "batch columns of different lengths"


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
