"""The arrays of the position kernel (a NumPy pass over one (topic, partition)'s rows, in
the Python workers): its input columns and row tags, its output row, and the helpers
every family of that pass uses. No Spark here, and no package import: the plan registers
these modules for pickling by value.

The rows, as the kernel takes them, are columns (all 64-bit integers, nullable):
``client_h``, ``grp`` (0 run polls, 1 recovery polls, 2 acks, null replica records),
``topic_h``, ``part``, ``pl``, ``pe``, ``pb`` (the position; null for resets), ``mh`` (the
id's hash), ``seq`` (file order; an ack's is its invoke's), ``tag`` (``TAG_*``) and
``unit`` (a poll's line, as the ``seq`` of its first record: the records of one ``polls``
line came from one poll call; an ack's transaction hash; else null). Each column is a
pair: its values (nulls as 0) and its validity. Out: one row per anomaly,
:data:`OUT_COLUMNS`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["IN_COLUMNS", "OUT_COLUMNS", "OUT_SCHEMA", "Columns", "distinct", "empty", "gather", "rows"]

# Row tags: recovery polls sort first among the rows of one position.
TAG_RPOLL, TAG_POLL, TAG_ACK, TAG_REPLICA, TAG_RESET = range(5)
IN_COLUMNS = ("client_h", "grp", "topic_h", "part", "pl", "pe", "pb", "mh", "seq", "tag", "unit")
OUT_COLUMNS = ("kind", "client_h", "grp", "topic_h", "part", "pl", "pe", "pb", "seq", "seq2", "ql", "qe",
               "qb", "n")
OUT_SCHEMA = "kind string, " + ", ".join(f"{c} long" for c in OUT_COLUMNS[1:])

I64_MIN, I64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max
Columns = dict[str, np.ndarray]


def rows(v: Columns, ok: Columns, at: np.ndarray, kind: str, before: np.ndarray | None = None,
          n: np.ndarray | None = None) -> Columns:
    """Anomaly rows at rows ``at``: a position's (topic, partition and position only: which
    row of a position comes first is arbitrary), or a sequence's, with the row before."""
    size = at.size
    out: Columns = {"kind": np.full(size, kind, dtype=object)}
    for name in ("client_h", "grp", "topic_h", "part", "pl", "pe", "pb", "seq"):
        if before is None and name in ("client_h", "grp", "seq"):
            out[name], out["valid:" + name] = np.zeros(size, np.int64), np.zeros(size, bool)
        else:
            out[name], out["valid:" + name] = v[name][at], ok[name][at]
    for name, src in (("seq2", "seq"), ("ql", "pl"), ("qe", "pe"), ("qb", "pb")):
        if before is None:
            out[name], out["valid:" + name] = np.zeros(size, np.int64), np.zeros(size, bool)
        else:
            out[name], out["valid:" + name] = v[src][before], ok[src][before]
    out["n"] = np.zeros(size, np.int64) if n is None else n.astype(np.int64)
    out["valid:n"] = np.zeros(size, bool) if n is None else np.ones(size, bool)
    return out


def empty() -> Columns:
    none = np.zeros(0, np.int64)
    return rows({c: none for c in IN_COLUMNS}, {c: np.zeros(0, bool) for c in IN_COLUMNS}, none, "")


def gather(col: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``col[rows]``, or a view of its one value when ``col`` is a value broadcast
    (:func:`harness.check.placed.joined`): not an array of the rows' size."""
    if col.strides == (0,) and col.size:
        return np.broadcast_to(col[:1], rows.shape)
    return col[rows]


def distinct(mh: np.ndarray, use: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per position (rows from ``starts``): whether the used rows hold more than one value."""
    low = np.minimum.reduceat(np.where(use, mh, I64_MAX), starts)
    high = np.maximum.reduceat(np.where(use, mh, I64_MIN), starts)
    count = np.add.reduceat(use.astype(np.int64), starts)
    return (count > 0) & (low != high)
