"""The sequence family: each send or poll against the one before it in its sequence, in
file order. A producer's sequence: its acknowledged sends per (topic, partition), in the
order of their first invokes; a consumer's: its polls per (client, phase, topic,
partition). A reset of the sequence between two polls (one without a partition covers
every partition of its topic, one without a topic every topic) ends the comparison. Judged
in the position kernel's pass (:mod:`harness.check.anomalies.positions`).

- ``nonmonotonic-send``: per producer (the invoke's client), topic and partition, taking
  acked sends in invoke order (file order of the invokes), an ack position not greater
  than the previous one. Counted per send.
- ``nonmonotonic-poll``: per consumer client, phase, topic and partition, in poll order, a
  position lower than or equal to the previous poll's, with no reset covering that
  partition between them. Counted per poll.
- ``poll-skip``: the same sequences: consecutive polls a < b (no reset between) such that
  the recovery read has a position strictly between a and b. Counted per poll (the later
  one); its example says how many recovery positions lie between.
- ``int-nonmonotonic-send``: a ``nonmonotonic-send`` whose two sends are of one transaction
  (their first invokes carry the same ``tx``): Jepsen's intra-transaction order.
- ``int-nonmonotonic-poll``: a ``nonmonotonic-poll`` whose two polls are records of one
  ``polls`` line (one poll call): Jepsen's intra-poll order.
- ``int-poll-skip``: a ``poll-skip`` whose two polls are records of one ``polls`` line.
- ``silent-reread``: per consumer client, phase, topic and partition, in poll order, a poll
  of an id at a Kafka offset that the client polled at that offset before, with no reset
  covering that partition between the two polls: the client library moved the position
  back without telling the application (an out-of-range reset to the beginning). Not
  judged at Pulsar positions (a Pulsar consumer's redeliveries after a reconnect are
  at-least-once delivery). Counted per poll (the later one).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.check.anomalies.arrays import TAG_ACK, TAG_REPLICA, TAG_RESET, Columns, gather, rows
from harness.check.anomalies.vocab import Details, Names, pos_of
from harness.check.result import example

__all__ = ["KINDS", "LOOKUP", "SENDS", "example_of", "in_sequences"]

KINDS = ("nonmonotonic-send", "nonmonotonic-poll", "poll-skip", "int-nonmonotonic-send",
         "int-nonmonotonic-poll", "int-poll-skip", "silent-reread")
#: the kinds of a producer's sequence (the others are a consumer's)
SENDS = ("nonmonotonic-send", "int-nonmonotonic-send")
#: the kinds whose examples need the ids of their two rows looked up again (by ``seq``)
LOOKUP = KINDS


def in_sequences(v: Columns, ok: Columns, le: np.ndarray, below: np.ndarray, idx: Any) -> list[Columns]:
    """The anomaly rows of one (topic, partition)'s rows (in position order) in file order
    per sequence (client, grp): polls and acks against the one before, unless a reset of
    that sequence came between them. Replica records and rows without a place in file
    order take no part. ``le``, ``below``: per row, the recovery positions at or below it
    and strictly below it; ``idx``: the integer type of row indices."""
    tag = v["tag"]
    member = (tag != TAG_REPLICA) & ok["seq"]
    at = np.flatnonzero(member).astype(idx)
    del member
    if not at.size:
        return []
    out = []
    # Each sequence's rows together (sequences in any order), in file order: a stable
    # sort by seq, then by a small sequence number (NumPy's radix sort)
    at = at[np.argsort(v["seq"][at], kind="stable")]
    sequence = _sequence_numbers(v, ok, at)
    at = at[np.argsort(sequence, kind="stable")]
    del sequence
    first = np.zeros(at.size, dtype=bool)
    first[0] = True
    for k in (v["grp"], ok["grp"], v["client_h"], ok["client_h"]):
        kk = k[at]
        first[1:] |= kk[1:] != kk[:-1]
    # its sequence's first row
    head = np.maximum.accumulate(np.where(first, np.arange(at.size, dtype=idx), 0))
    reset = tag[at] == TAG_RESET
    again, earlier = _silent_rereads(v, ok, at, first, reset)
    out.append(rows(v, ok, again, "silent-reread", earlier))
    prev = _last_before(~reset, head)
    last_reset = _last_before(reset, head)
    del head
    has_prev = prev >= 0
    cur = at[has_prev]
    before = at[prev[has_prev]]
    del prev
    judged = ~reset[has_prev]
    last_reset = last_reset[has_prev]
    del reset, has_prev
    # after a reset of its sequence (few rows): judged only if the reset came before the
    # row it is judged against (gathers of these rows only, not of every row)
    after_reset = np.flatnonzero(last_reset >= 0)
    judged[after_reset] &= v["seq"][at[last_reset[after_reset]]] < v["seq"][before[after_reset]]
    del at, last_reset, after_reset
    cur, before = cur[judged], before[judged]
    poll = tag[cur] != TAG_ACK
    not_after = ~_after(v, cur, before)
    skipped = below[cur] - le[before]
    # one poll call (a polls line) or one transaction: the int- kinds too
    unit = ok["unit"][cur] & ok["unit"][before] & (v["unit"][cur] == v["unit"][before])
    for kind, pick in (("nonmonotonic-send", ~poll & not_after),
                       ("nonmonotonic-poll", poll & not_after),
                       ("poll-skip", poll & ~not_after & (skipped > 0))):
        for name, where in ((kind, pick), (f"int-{kind}", pick & unit)):
            out.append(rows(v, ok, cur[where], name, before[where],
                            skipped[where] if kind == "poll-skip" else None))
    return out


def _silent_rereads(v: Columns, ok: Columns, rows: np.ndarray, first: np.ndarray,
                    reset: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ``silent-reread`` rows and the earlier poll of each: ``rows`` are the sequence
    members (each sequence's together, in file order; ``first`` marks a sequence's first
    row, ``reset`` its resets). A poll of an id at a Kafka offset (``pl`` -1) that the same
    sequence polled there before, with no reset of the sequence between the two."""
    sequence = np.cumsum(first, dtype=rows.dtype)
    resets = np.cumsum(reset, dtype=rows.dtype)  # resets up to each row: a sequence's rows are contiguous
    at = rows
    polls = np.flatnonzero(~reset & (v["tag"][at] != TAG_ACK) & gather(ok["mh"], at) & gather(ok["pl"], at)
                           & (gather(v["pl"], at) == -1)).astype(rows.dtype)
    none = np.zeros(0, np.int64)
    if polls.size < 2:
        return none, none
    # (sequence, offset) as one key (a Kafka position is its offset): the polls are in
    # sequence then file order, so a poll at or below the highest key before it went back
    # in its sequence; only the offsets such polls read can be read twice
    offset = v["pe"][at[polls]]
    if offset.min() >= 0 and offset.max() < 1 << 42 and sequence[-1] < 1 << 21:
        key = sequence[polls].astype(np.int64)
        key <<= 42  # in place: a poll's row is one of a partition's millions
        key |= offset
    else:  # the rank of (sequence, offset): the same order, any values
        key = np.unique(np.stack([sequence[polls], offset]), axis=1, return_inverse=True)[1].ravel()
    del offset, sequence
    back = np.zeros(polls.size, dtype=bool)
    back[1:] = key[1:] <= np.maximum.accumulate(key)[:-1]
    if not back.any():
        return none, none
    wanted = np.unique(key[back])  # few: a binary search for each key, not a sort of all
    keep = wanted[np.minimum(np.searchsorted(wanted, key), wanted.size - 1)] == key
    polls, key = polls[keep], key[keep]
    mh = v["mh"][at[polls]]
    order = np.lexsort([polls, mh, key])  # the same read together, in file order
    polls, key, mh = polls[order], key[order], mh[order]
    same = (key[1:] == key[:-1]) & (mh[1:] == mh[:-1])
    earlier, again = polls[:-1][same], polls[1:][same]
    silent = resets[again] == resets[earlier]
    return at[again[silent]], at[earlier[silent]]


def _sequence_numbers(v: Columns, ok: Columns, rows: np.ndarray) -> np.ndarray:
    """A number per sequence (client, phase) of the rows, as small an integer type as
    holds them (the values are hashed, not sorted)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def index(name: str) -> tuple[np.ndarray, int]:
        encoded = pc.dictionary_encode(pa.array(v[name][rows], mask=~ok[name][rows]))
        count = len(encoded.dictionary)  # a null is one more value
        return encoded.indices.fill_null(count).to_numpy(zero_copy_only=False).astype(np.int64), count + 1

    (client, clients), (grp, grps) = index("client_h"), index("grp")
    top = clients * grps
    number = client * grps + grp
    return number.astype(np.int16 if top <= (1 << 15) else np.int32 if top <= (1 << 31) else np.int64)


def _last_before(mark: np.ndarray, head: np.ndarray) -> np.ndarray:
    """Per row, the index of the last marked row strictly before it in its sequence
    (rows ``head[i]`` to ``i - 1``), else -1."""
    at = np.where(mark, np.arange(mark.size, dtype=head.dtype), -1)
    last = np.empty_like(at)
    last[0] = -1
    last[1:] = np.maximum.accumulate(at)[:-1]
    return np.where(last >= head, last, -1)


def _after(v: Columns, cur: np.ndarray, before: np.ndarray) -> np.ndarray:
    """Whether the position of each ``cur`` row is above that of its ``before`` row."""
    a = [gather(v[c], cur) for c in ("pl", "pe", "pb")]
    b = [gather(v[c], before) for c in ("pl", "pe", "pb")]
    return (a[0] > b[0]) | ((a[0] == b[0]) & ((a[1] > b[1]) | ((a[1] == b[1]) & (a[2] > b[2]))))


def example_of(kind: str, ex: Any, names: Names, details: Details) -> dict[str, Any]:
    """The example of one anomaly row of this family (docs/checker.md names its fields):
    the send or poll and the one before it, their ids looked up by ``seq``."""
    phase = None if kind in SENDS else ("recovery" if ex.rec else "run")
    mid_at = {r.seq: r.mid for r in details.events if r.seq in (ex.seq, ex.seq2)}
    return example(client=names.client(ex.client), phase=phase, mid=mid_at.get(ex.seq),
                   topic=names.topic(ex.topic), partition=ex.part, pos=pos_of(ex),
                   prev={"mid": mid_at.get(ex.seq2), "pos": pos_of(ex, "q")}, skipped=ex.n)
