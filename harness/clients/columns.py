"""JSON of a batch event's columns (``polls``, ``oks``, ``invokes``: :mod:`harness.history`),
rendered a column at a time: a consumer's or producer's hot path writes one line per
batch instead of one per record."""

from __future__ import annotations

import json
from operator import eq

from ..history import _MID_CHARS, parse_mid

__all__ = ["ENCODE", "all_ints_json", "ints_json", "keys_json", "mids_json"]

#: compact JSON of any value
ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def ints_json(column: list[int | None], n: int) -> str:
    """JSON of a column of ints (or Nones: null when all are); quick when all are equal."""
    first = column[0]
    if column.count(first) == n:
        if first is None:
            return "null"
        item = str(int(first))
        return f"[{(item + ',') * (n - 1)}{item}]"
    return ENCODE(column)


def all_ints_json(column: list[int], n: int) -> str:
    """JSON of a column of ints (no None): one %-format for the batch, cheaper than json."""
    return ("[" + "%d," * (n - 1) + "%d]") % tuple(column)


def mids_json(values: list[bytes | None], n: int) -> str:
    """JSON of the message ids of ``values`` (:func:`parse_mid` of each; null when none is ours).

    Fast path for a batch of our records: every value has a ``|``, every head (the bytes
    before the first) has 1 to 64 bytes, and the heads joined by ``|`` hold nothing but
    id characters (one translate for the batch); the ids are then JSON strings as they
    are. Otherwise :func:`parse_mid` per record.
    """
    try:
        heads = [v.partition(b"|")[0] for v in values]  # type: ignore[union-attr]  # None: below
    except AttributeError:  # a None value (tombstone)
        heads = None
    # a value without "|" is its own head (and only then equal to it)
    if heads is not None and not any(map(eq, heads, values)):
        sizes = list(map(len, heads))
        if min(sizes) > 0 and max(sizes) <= 64:
            joined = b"|".join(heads)
            if len(joined.translate(None, _MID_CHARS)) == n - 1:  # only the n - 1 joins left
                return '["' + joined.decode("ascii").replace("|", '","') + '"]'
    mids = [parse_mid(v) for v in values]
    return "null" if mids.count(None) == n else ENCODE(mids)


def keys_json(keys: list[bytes | None]) -> str:
    return ENCODE([k.decode("utf-8", "replace") if k else None for k in keys])
