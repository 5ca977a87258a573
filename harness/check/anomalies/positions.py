"""The position family: what the records at one (topic, partition, position) say, judged
by the position kernel (a NumPy pass over one (topic, partition)'s rows in the Python
workers: :mod:`harness.check.placed` reads them, :func:`anomalies` judges them; its
arrays: :mod:`harness.check.anomalies.arrays`). The same pass judges the sequence family
(:mod:`harness.check.anomalies.sequences`) and the replica family
(:mod:`harness.check.anomalies.replicas`), whose rows it puts in the same position order.

- ``inconsistent-offsets``: a (topic, partition, position) bound to more than one id, by
  acks, polls (any consumer, both phases) or replica records.
- ``truncation-skip``: a (topic, partition, position) where the recovery read holds one
  id, run-phase polls read other ids and none read that one, and a run-phase poll at a
  later position of the partition read the recovery's id there: the consumers read a
  record the log later replaced (a truncation after an unclean election) and went on past
  the record that replaced it without reading it, a log truncation the client did not
  detect (KIP-320). A consumer that detects it seeks back and reads the new record: no
  anomaly. Any run consumer counts (a consumer group restarted from its committed offset
  is another client).

Both are counted per position.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.check.anomalies.arrays import (
    I64_MAX,
    I64_MIN,
    TAG_POLL,
    TAG_RPOLL,
    Columns,
    distinct,
    empty,
    rows,
)
from harness.check.anomalies.replicas import divergent
from harness.check.anomalies.sequences import in_sequences
from harness.check.anomalies.vocab import POLL, REPLICA, ROW_REC, Details, Names, place_of
from harness.check.result import MAX_EXAMPLES, example

__all__ = ["KINDS", "LOOKUP", "anomalies", "example_of"]

KINDS = ("inconsistent-offsets", "truncation-skip")
#: the kinds whose examples need the records at their position looked up again
LOOKUP = KINDS


def anomalies(values: Columns, valid: Columns) -> Columns:
    """The anomaly rows of the given rows (any order), any number of (topic, partition) groups: ``kind``
    and, per :data:`OUT_COLUMNS`, the values and ``valid:<column>`` masks (false where the value
    is null)."""
    n = values["tag"].size
    if n == 0:
        return empty()
    # Position order within (topic, partition), nulls first (as Spark sorts): a null
    # topic or partition is a group of its own, a null position (a reset) sorts first.
    keys = (values["tag"], values["pb"], values["pe"], values["pl"], valid["pl"],
            values["part"], valid["part"], values["topic_h"], valid["topic_h"])
    # (a key that holds one value, as topic and partition in a task of one partition
    # do, orders nothing: left out)
    order = np.lexsort([k for k in keys if k.min() != k.max()] or [keys[0]])
    del keys
    for columns in (values, valid):  # one column at a time: memory for one more, not all
        for c in list(columns):
            if columns[c].strides != (0,):  # (a value broadcast is in every order)
                columns[c] = columns[c][order]
    del order
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for k in ("part", "topic_h"):
        change[1:] |= (values[k][1:] != values[k][:-1]) | (valid[k][1:] != valid[k][:-1])
    bounds = [*np.flatnonzero(change), n]
    parts = [_group({c: a[lo:hi] for c, a in values.items()}, {c: a[lo:hi] for c, a in valid.items()})
             for lo, hi in zip(bounds[:-1], bounds[1:], strict=False)]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _group(v: Columns, ok: Columns) -> Columns:
    """The anomalies of one (topic, partition), its rows in position order (null first, then tag)."""
    n = v["tag"].size
    idx = np.int32 if n < 1 << 31 else np.int64  # row indices and counts: half the memory
    has_pos, tag = ok["pl"], v["tag"]
    same = np.zeros(n, dtype=bool)  # the row's position is the one before it (nulls equal)
    same[1:] = ((has_pos[1:] == has_pos[:-1])
                & (~has_pos[1:] | ((v["pl"][1:] == v["pl"][:-1]) & (v["pe"][1:] == v["pe"][:-1])
                                   & (v["pb"][1:] == v["pb"][:-1]))))
    start = ~same
    starts = np.flatnonzero(start)
    at_rec = tag[starts] == TAG_RPOLL  # recovery polls lead their position
    le = np.cumsum(start & (tag == TAG_RPOLL), dtype=idx)  # recovery positions at or below the row
    pid = np.cumsum(start, dtype=idx) - 1
    below = le - at_rec[pid]  # recovery positions strictly below the row
    # Per position, the ids bound to it (any row).
    bound_ids = distinct(v["mh"], ok["mh"], starts)
    replicas = divergent(v, ok, starts)
    bound = has_pos[starts] & ok["topic_h"][starts]
    skips = _truncation_skips(v, ok, starts, pid)
    del same, start, pid
    out = [rows(v, ok, starts[bound & bound_ids], "inconsistent-offsets"),
           rows(v, ok, starts[bound & replicas], "replica-divergence"),
           rows(v, ok, starts[bound & skips], "truncation-skip"),
           *in_sequences(v, ok, le, below, idx)]
    return {k: np.concatenate([o[k] for o in out]) for k in out[0]}


def _truncation_skips(v: Columns, ok: Columns, starts: np.ndarray, pid: np.ndarray) -> np.ndarray:
    """Per position (rows from ``starts``, in position order): whether it is a
    ``truncation-skip``. The recovery read holds one id there, run polls read another id
    there and none read the recovery's, and a run poll at a later position read the
    recovery's id at that position (so a consumer went past this one after the record
    that replaced the truncated one was written)."""
    tag, has_id = v["tag"], ok["mh"]
    rec = (tag == TAG_RPOLL) & has_id
    rec_count = np.add.reduceat(rec.astype(np.int64), starts)
    rec_low = np.minimum.reduceat(np.where(rec, v["mh"], I64_MAX), starts)
    rec_high = np.maximum.reduceat(np.where(rec, v["mh"], I64_MIN), starts)
    one_id = (rec_count > 0) & (rec_low == rec_high)  # the recovery read's one id here
    run = (tag == TAG_POLL) & has_id & one_id[pid]
    same = run & (v["mh"] == rec_low[pid])
    matched = np.add.reduceat(same.astype(np.int64), starts) > 0
    other = np.add.reduceat((run & ~same).astype(np.int64), starts) > 0
    later = np.zeros(starts.size, dtype=bool)  # a matched position after this one
    later[:-1] = np.logical_or.accumulate(matched[::-1])[::-1][1:]
    return one_id & other & ~matched & later


def example_of(kind: str, ex: Any, names: Names, details: Details) -> dict[str, Any]:
    """The example of one anomaly row of this family (docs/checker.md names its fields)."""
    place = place_of(ex)
    here = [r for r in details.events if r.code in (POLL, REPLICA) and r.mid is not None
            and (r.topic_h, r.part, r.pl, r.pe, r.pb) == place]
    pos = (ex.pl, ex.pe, ex.pb)
    topic = names.topic(ex.topic)
    if kind == "truncation-skip":
        recovered = sorted({r.mid for r in here if r.code == POLL and r.flags & ROW_REC})
        run = sorted((r for r in here if r.code == POLL and not r.flags & ROW_REC and r.mid not in recovered),
                     key=lambda r: r.seq)
        read = run[0] if run else None
        return example(topic=topic, partition=ex.part, pos=pos, mid=read.mid if read else None,
                       client=read.client if read else None,
                       recovered_mid=recovered[0] if recovered else None)
    acked = {a.mid for a in details.acks
             if (a.ack_topic, a.ack_part, a.ack_pl, a.ack_pe, a.ack_pb) == place}
    mids = sorted({r.mid for r in here} | acked)
    return example(topic=topic, partition=ex.part, pos=pos, mids=mids[:MAX_EXAMPLES])
