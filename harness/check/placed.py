"""The position and sequence anomalies of one Spark partition, in NumPy (the checker's
``mapInArrow`` kernel; no Spark here, so it is tested on its own).

The job shuffles every row that has a place in a partition (polls, acks, replica
records, resets; see ``spark_job._Job._placed``) by (topic, partition) and hands
each Spark partition's rows to :func:`kernel` as Arrow batches. Per (topic,
partition) the rows are put in position order, then in file order per sequence,
and compared with whole-array operations: the same definitions as
docs/checker.md, without Spark's window operator (which buffered and copied every
row of a partition for each of its passes: two thirds of the step's CPU).

Columns in (all 64-bit integers, nullable): ``client_h``, ``grp`` (0 run polls, 1
recovery polls, 2 acks, null replica records), ``topic_h``, ``part``, ``pl``,
``pe``, ``pb`` (the position; null for resets), ``mh`` (the id's hash), ``seq``
(file order; an ack's is its invoke's) and ``tag`` (``TAG_*``). Out: one row
per anomaly, :data:`OUT_SCHEMA`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

# Row tags (as spark_job): recovery polls sort first among the rows of one position.
TAG_RPOLL, TAG_POLL, TAG_ACK, TAG_REPLICA, TAG_RESET = range(5)
IN_COLUMNS = ("client_h", "grp", "topic_h", "part", "pl", "pe", "pb", "mh", "seq", "tag")
OUT_COLUMNS = ("kind", "client_h", "grp", "topic_h", "part", "pl", "pe", "pb", "seq", "seq2", "ql", "qe",
               "qb", "n")
OUT_SCHEMA = "kind string, " + ", ".join(f"{c} long" for c in OUT_COLUMNS[1:])

_I64_MIN, _I64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max
Columns = dict[str, np.ndarray]


def kernel(batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInArrow`` function: Arrow batches of one Spark partition in, anomaly batches out."""
    import pyarrow as pa

    chunks: list[Any] = []
    for batch in batches:
        if batch.num_rows:
            chunks.append(batch)
    if not chunks:
        return
    table = pa.Table.from_batches(chunks)
    del chunks
    values, valid = {}, {}
    for name in IN_COLUMNS:  # column by column, each batch's copy freed as its column is made
        col = table.column(name).combine_chunks()
        table = table.drop_columns([name])
        valid[name] = _validity(col)
        values[name] = col.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        del col
    del table
    out = anomalies(values, valid)
    if out["kind"].size:
        columns = {"kind": pa.array(out["kind"].tolist(), pa.string())}
        for name in OUT_COLUMNS[1:]:
            columns[name] = pa.array(out[name], pa.int64(), mask=~out["valid:" + name])
        yield pa.RecordBatch.from_pydict(columns)


def _validity(col: Any) -> np.ndarray:
    if col.null_count == 0:
        return np.ones(len(col), dtype=bool)
    return col.is_valid().to_numpy(zero_copy_only=False)


def anomalies(values: Columns, valid: Columns) -> Columns:
    """The anomaly rows of the given rows (any order), any number of (topic, partition) groups: ``kind`` and, per
    :data:`OUT_COLUMNS`, the values and ``valid:<column>`` masks (false where the value
    is null)."""
    n = values["tag"].size
    if n == 0:
        return _empty()
    # Position order within (topic, partition), nulls first (as Spark sorts): a null
    # topic or partition is a group of its own, a null position (a reset) sorts first.
    keys = (values["tag"], values["pb"], values["pe"], values["pl"], valid["pl"],
            values["part"], valid["part"], values["topic_h"], valid["topic_h"])
    order = np.lexsort(keys)
    del keys
    for columns in (values, valid):  # one column at a time: memory for one more, not all
        for c in list(columns):
            columns[c] = columns[c][order]
    del order
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for k in ("part", "topic_h"):
        change[1:] |= (values[k][1:] != values[k][:-1]) | (valid[k][1:] != valid[k][:-1])
    bounds = [*np.flatnonzero(change), n]
    parts = [_group({c: a[lo:hi] for c, a in values.items()}, {c: a[lo:hi] for c, a in valid.items()})
             for lo, hi in zip(bounds[:-1], bounds[1:])]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _group(v: Columns, ok: Columns) -> Columns:
    """The anomalies of one (topic, partition), its rows in position order (null first, then tag)."""
    n = v["tag"].size
    has_pos, tag = ok["pl"], v["tag"]
    same = np.zeros(n, dtype=bool)  # the row's position is the one before it (nulls equal)
    same[1:] = ((has_pos[1:] == has_pos[:-1])
                & (~has_pos[1:] | ((v["pl"][1:] == v["pl"][:-1]) & (v["pe"][1:] == v["pe"][:-1])
                                   & (v["pb"][1:] == v["pb"][:-1]))))
    start = ~same
    starts = np.flatnonzero(start)
    at_rec = tag[starts] == TAG_RPOLL  # recovery polls lead their position
    le = np.cumsum(start & (tag == TAG_RPOLL))  # recovery positions at or below the row
    pid = np.cumsum(start) - 1
    below = le - at_rec[pid]  # recovery positions strictly below the row
    # Per position, the ids bound to it (any row), and those of replica records.
    distinct = _distinct(v["mh"], ok["mh"], starts)
    replica = ok["mh"] & (tag == TAG_REPLICA)
    distinct_replicas = _distinct(v["mh"], replica, starts)
    bound = has_pos[starts] & ok["topic_h"][starts]
    del same, start, pid
    out = [_rows(v, ok, starts[bound & distinct], "inconsistent-offsets"),
           _rows(v, ok, starts[bound & distinct_replicas], "replica-divergence")]

    # -- file order per sequence (client, grp): polls and acks against the one before,
    # unless a reset of that sequence came between them. Replica records and rows
    # without a place in file order take no part.
    member = (tag != TAG_REPLICA) & ok["seq"]
    rows = np.flatnonzero(member)
    if rows.size:
        key = (v["seq"][rows], v["grp"][rows], ok["grp"][rows], v["client_h"][rows], ok["client_h"][rows])
        rows = rows[np.lexsort(key)]
        del key
        first = np.zeros(rows.size, dtype=bool)
        first[0] = True
        for k in (v["grp"], ok["grp"], v["client_h"], ok["client_h"]):
            kk = k[rows]
            first[1:] |= kk[1:] != kk[:-1]
        head = np.maximum.accumulate(np.where(first, np.arange(rows.size), 0))  # its sequence's first row
        reset = tag[rows] == TAG_RESET
        prev = _last_before(~reset, head)
        last_reset = _last_before(reset, head)
        del head
        has_prev = prev >= 0
        cur = rows[has_prev]
        before = rows[prev[has_prev]]
        reset_at = np.where(last_reset[has_prev] >= 0, rows[np.maximum(last_reset[has_prev], 0)], -1)
        judged = ~reset[has_prev] & ((reset_at < 0) | (v["seq"][np.maximum(reset_at, 0)] < v["seq"][before]))
        del rows, prev, last_reset, reset, has_prev, reset_at
        cur, before = cur[judged], before[judged]
        poll = tag[cur] != TAG_ACK
        not_after = ~_after(v, cur, before)
        skipped = below[cur] - le[before]
        for kind, pick in (("nonmonotonic-send", ~poll & not_after),
                           ("nonmonotonic-poll", poll & not_after),
                           ("poll-skip", poll & ~not_after & (skipped > 0))):
            out.append(_rows(v, ok, cur[pick], kind, before[pick],
                             skipped[pick] if kind == "poll-skip" else None))
    return {k: np.concatenate([o[k] for o in out]) for k in out[0]}


def _distinct(mh: np.ndarray, use: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per position (rows from ``starts``): whether the used rows hold more than one value."""
    low = np.minimum.reduceat(np.where(use, mh, _I64_MAX), starts)
    high = np.maximum.reduceat(np.where(use, mh, _I64_MIN), starts)
    count = np.add.reduceat(use.astype(np.int64), starts)
    return (count > 0) & (low != high)


def _last_before(mark: np.ndarray, head: np.ndarray) -> np.ndarray:
    """Per row, the index of the last marked row strictly before it in its sequence
    (rows ``head[i]`` to ``i - 1``), else -1."""
    idx = np.where(mark, np.arange(mark.size), -1)
    last = np.empty_like(idx)
    last[0] = -1
    last[1:] = np.maximum.accumulate(idx)[:-1]
    return np.where(last >= head, last, -1)


def _after(v: Columns, cur: np.ndarray, before: np.ndarray) -> np.ndarray:
    """Whether the position of each ``cur`` row is above that of its ``before`` row."""
    a = [v[c][cur] for c in ("pl", "pe", "pb")]
    b = [v[c][before] for c in ("pl", "pe", "pb")]
    return (a[0] > b[0]) | ((a[0] == b[0]) & ((a[1] > b[1]) | ((a[1] == b[1]) & (a[2] > b[2]))))


def _rows(v: Columns, ok: Columns, at: np.ndarray, kind: str, before: np.ndarray | None = None,
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


def _empty() -> Columns:
    none = np.zeros(0, np.int64)
    return _rows({c: none for c in IN_COLUMNS}, {c: np.zeros(0, bool) for c in IN_COLUMNS}, none, "")
