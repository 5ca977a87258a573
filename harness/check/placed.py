"""The position and sequence anomalies of one (topic, partition), in NumPy (the
checker's ``mapInArrow`` kernel; no Spark here, so it is tested on its own).

One Spark task per (topic, partition) (:func:`pair_kernel`) reads that partition's
rows: its polls and replica records (the ingest wrote them to a directory of their
own, like a table partitioned on write, so no shuffle gathers them), its acks (from
the per-id table), and its resets (one row for each phase they cover). Per (topic,
partition) the rows are put in position order, then in file order per sequence,
and compared with whole-array operations: the same definitions as
docs/checker.md, without Spark's window operator (which buffered and copied every
row of a partition for each of its passes: two thirds of the step's CPU).

The rows, as the kernel takes them (:func:`kernel` also takes them as Arrow
batches), are columns (all 64-bit integers, nullable): ``client_h``, ``grp`` (0
run polls, 1 recovery polls, 2 acks, null replica records), ``topic_h``, ``part``, ``pl``,
``pe``, ``pb`` (the position; null for resets), ``mh`` (the id's hash), ``seq``
(file order; an ack's is its invoke's), ``tag`` (``TAG_*``) and ``unit`` (a poll's line,
as the ``seq`` of its first record: the records of one ``polls`` line came from one poll
call; an ack's transaction hash; else null). Out: one row per anomaly,
:data:`OUT_SCHEMA`; a sequence anomaly whose two rows share a unit is also reported as its
``int-`` kind.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from harness.check.ingest import POLL, ROW_REC

# Row tags: recovery polls sort first among the rows of one position.
TAG_RPOLL, TAG_POLL, TAG_ACK, TAG_REPLICA, TAG_RESET = range(5)
IN_COLUMNS = ("client_h", "grp", "topic_h", "part", "pl", "pe", "pb", "mh", "seq", "tag", "unit")
OUT_COLUMNS = ("kind", "client_h", "grp", "topic_h", "part", "pl", "pe", "pb", "seq", "seq2", "ql", "qe",
               "qb", "n")
OUT_SCHEMA = "kind string, " + ", ".join(f"{c} long" for c in OUT_COLUMNS[1:])

_I64_MIN, _I64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max
Columns = dict[str, np.ndarray]


def kernel(batches: Iterator[Any]) -> Iterator[Any]:
    """Arrow batches of rows (:data:`IN_COLUMNS`) in, one batch of anomaly rows out."""
    rows = _Collector()
    for batch in batches:
        rows.add(batch)
    if rows.n:
        yield from _run(*rows.done())


def pair_kernel(resets_dir: str | None) -> Any:
    """The ``mapInArrow`` function for task rows of :data:`PAIR_SCHEMA`: per (topic hash,
    partition), the anomalies of its rows. ``path``: the directory of its polls and
    replica records (events, as the ingest wrote them), ``acks``: the directory of its
    rows of the per-id table, each null if none; ``polled``: whether polls read it
    (resets cover only those). Resets come from the events in ``resets_dir`` (null:
    none)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            for task in batch.to_pylist():
                yield from _run(*_pair_rows(resets_dir, **task))

    return run


PAIR_SCHEMA = "topic_h long, part long, polled boolean, path string, acks string"

#: what a task holds at its peak per row of its partition, with a margin (measured: 190
#: bytes on a 4.5M-row partition of a 10M-record history, the process's resident memory)
PEAK_BYTES_PER_ROW = 256


def task_rows(path: str | None, acks: str | None) -> int:
    """The rows a task of :func:`pair_kernel` reads (its Parquet files' footers; the acks
    directory's rows without an ack position counted too): an upper bound."""
    import pyarrow.dataset as ds

    return sum(ds.dataset(d, format="parquet").count_rows() for d in (path, acks) if d is not None)


def memory_budget() -> int:
    """Bytes the kernel tasks may hold together: 80% of what the system has available now
    (free and reclaimable, after what the Spark JVM already holds)."""
    try:
        with open("/proc/meminfo") as fh:
            fields = dict(line.split(":", 1) for line in fh)
        return int(fields["MemAvailable"].split()[0]) * 1024 * 4 // 5
    except (OSError, KeyError, ValueError):
        return 1 << 62  # not Linux: no limit known


def task_slots(rows: list[int], budget: int, cores: int) -> int:
    """How many tasks of :func:`pair_kernel` may run at once: one per core, fewer when the
    largest of them, running together, would hold more than ``budget`` bytes (each
    partition's rows are held whole by its task: the tasks then take turns, and the check
    is slower but fits)."""
    largest = sorted(rows, reverse=True)
    for slots in range(min(cores, len(rows)), 1, -1):
        if sum(largest[:slots]) * PEAK_BYTES_PER_ROW <= budget:
            return slots
    return 1


def _pair_rows(resets_dir: str | None, topic_h: int | None, part: int, polled: bool, path: str | None,
               acks: str | None) -> tuple[Columns, Columns]:
    """One (topic, partition)'s rows as the kernel's columns (values and validity), read a
    Parquet batch at a time: the partition's rows are held once, as NumPy columns."""
    rows = _Collector()
    for table in _pair_tables(resets_dir, topic_h, part, polled, path, acks):
        rows.add(table)
    return rows.done()


def _pair_tables(resets_dir: str | None, topic_h: int | None, part: int, polled: bool, path: str | None,
                 acks: str | None) -> Iterator[Any]:
    """One (topic, partition)'s rows, in :data:`IN_COLUMNS`, as Arrow tables of a batch each."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    i64 = pa.int64()

    def const(value: int | None, n: int) -> Any:
        return pa.nulls(n, i64) if value is None else pa.array(np.full(n, value, np.int64), i64)

    schema = pa.schema([(c, i64) for c in IN_COLUMNS])
    if path is not None:  # polls and replica records
        columns = ["code", "flags", "client_h", "topic_h", "part", "pl", "pe", "pb", "mid", "seq", "bi"]
        for ev in _batches(path, columns):
            poll = pc.equal(ev["code"], POLL)
            rec = pc.not_equal(pc.bit_wise_and(ev["flags"], ROW_REC), 0)
            yield pa.table({
                "client_h": ev["client_h"],
                "grp": pc.if_else(poll, pc.if_else(rec, 1, 0).cast(i64), pa.scalar(None, i64)),
                "topic_h": ev["topic_h"], "part": ev["part"], "pl": ev["pl"], "pe": ev["pe"], "pb": ev["pb"],
                "mh": id_hash(ev["mid"]), "seq": ev["seq"],
                "tag": pc.if_else(poll, pc.if_else(rec, TAG_RPOLL, TAG_POLL), TAG_REPLICA).cast(i64),
                "unit": pc.if_else(poll, pc.subtract(ev["seq"], ev["bi"].cast(i64)), pa.scalar(None, i64)),
            }).cast(schema)
    if acks is not None:  # the first ack of each id, with its first invoke's client and place in file order
        for ack in ds.dataset(acks, format="parquet").to_batches(
                columns=["inv_client", "ack_pl", "ack_pe", "ack_pb", "mid", "inv_seq", "tx_h"],
                filter=pc.field("ack_pl").is_valid(), **_SCAN):
            n = ack.num_rows
            yield pa.table({
                "client_h": ack["inv_client"], "grp": const(2, n), "topic_h": const(topic_h, n),
                "part": const(part, n),
                "pl": ack["ack_pl"], "pe": ack["ack_pe"], "pb": ack["ack_pb"], "mh": id_hash(ack["mid"]),
                "seq": ack["inv_seq"], "tag": const(TAG_ACK, n), "unit": ack["tx_h"]}).cast(schema)
    if polled and resets_dir is not None:  # a reset without topic or partition covers all those polls read
        resets = ds.dataset(resets_dir, format="parquet").to_table(
            columns=["client_h", "seq"],
            filter=(pc.field("topic_h").is_null() | (pc.field("topic_h") == topic_h))
            & (pc.field("part").is_null() | (pc.field("part") == part)))
        n = resets.num_rows
        for grp in (0, 1):  # each phase of its client
            yield pa.table({
                "client_h": resets["client_h"], "grp": const(grp, n), "topic_h": const(topic_h, n),
                "part": const(part, n), "pl": const(None, n), "pe": const(None, n), "pb": const(None, n),
                "mh": const(None, n), "seq": resets["seq"], "tag": const(TAG_RESET, n),
                "unit": const(None, n)}).cast(schema)


#: a task reads its Parquet files a batch at a time, one file at a time, with no
#: read-ahead: the Arrow copy of a batch is transient
_SCAN = {"batch_size": 1 << 18, "batch_readahead": 0, "fragment_readahead": 0, "use_threads": False}


def _batches(path: str, columns: list[str]) -> Iterator[Any]:
    """The directory's Parquet files (an ingest split's rows each) in batches of up to
    ``_SCAN["batch_size"]`` rows across their row groups (a row group holds one 4-MiB
    block's rows: a batch per row group cost 1.5 CPU-s a 10M-record check)."""
    import pyarrow.parquet as pq

    for name in sorted(os.listdir(path)):
        if name.endswith(".parquet"):
            with pq.ParquetFile(os.path.join(path, name)) as file:
                yield from file.iter_batches(batch_size=_SCAN["batch_size"], columns=columns,
                                             use_threads=False)


#: columns of few values, held as 8-bit integers
_NARROW = {"tag": np.int8, "grp": np.int8}


class _Collector:
    """Rows in :data:`IN_COLUMNS`, added an Arrow table or batch at a time and kept as
    NumPy columns: a value array (nulls as 0, or as the column's one value) and a
    validity array per column. A column that holds one value (topic and partition in a
    task of one partition, a Kafka position's ledger and batch; a validity array with no
    null) is kept as that value broadcast, not as an array of rows, and the tag and phase
    as 8-bit integers."""

    def __init__(self) -> None:
        self.n = 0
        self._values: dict[str, list[np.ndarray]] = {c: [] for c in IN_COLUMNS}
        self._valid: dict[str, list[np.ndarray]] = {c: [] for c in IN_COLUMNS}

    def add(self, table: Any) -> None:
        if not table.num_rows:
            return
        for name in IN_COLUMNS:
            col = table.column(name)
            if hasattr(col, "combine_chunks"):
                col = col.combine_chunks()
            self._valid[name].append(_validity(col))
            values = (col.fill_null(0) if col.null_count else col).to_numpy(zero_copy_only=False)
            self._values[name].append(values.astype(_NARROW.get(name, np.int64), copy=False))
        self.n += table.num_rows

    def done(self) -> tuple[Columns, Columns]:
        """The columns (taken out of the collector: each column's pieces are freed as it is
        joined, and given back to the system when memory is short: :func:`short_of_memory`)."""
        short = short_of_memory(self.n)
        if short:
            _give_back()
        values, valid = {}, {}
        for name in IN_COLUMNS:
            valid[name] = _joined(self._valid.pop(name), bool)
            values[name] = _joined(self._values.pop(name), _NARROW.get(name, np.int64), valid[name])
            if short:
                _give_back()
        return values, valid


#: a partition of fewer rows never gives its freed memory back while its columns are
#: joined (about 190 MB at its peak): it leaves that to the worker's limit after the task
#: (:mod:`harness.check.daemon`)
_GIVE_BACK_ROWS = 1 << 20


def short_of_memory(rows: int) -> bool:
    """Whether a partition of ``rows`` rows gives its freed memory back as its columns are
    joined: when it has :data:`_GIVE_BACK_ROWS` or more and its peak (:data:`PEAK_BYTES_PER_ROW`),
    twice over for a task beside it, is more than the :func:`memory_budget` now (a 100M
    history's partitions). Otherwise the worker keeps that memory for the rest of the task
    and the next: on a VM that hands free pages back to its host, what it gave back cost
    system time again when touched (at 10M, 12 gives per partition took a check's
    workers from 2.6 to about 4.5 system-s: docs/checker-log.md, session 45)."""
    return rows >= _GIVE_BACK_ROWS and 2 * rows * PEAK_BYTES_PER_ROW > memory_budget()


def _trim() -> Any:
    """glibc's ``malloc_trim``, None elsewhere. Looked up at each call (about 20 us; only
    partitions short of memory call it, 12 times each: :func:`short_of_memory`): the kernel
    goes to the workers by value, so a memo would go with it, and a ctypes function cannot be pickled
    (a ``functools.cache`` wrapper would go by reference to this package, which a
    cluster's executors need not have)."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):  # glibc only
        return ctypes.CDLL("libc.so.6").malloc_trim
    return None


def _give_back() -> None:
    """Return the memory freed so far to the system: Arrow's pool keeps what the batches
    read used, and the C allocator's heap keeps the pieces of columns already joined."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    trim = _trim()
    if trim is not None:
        trim(0)


def _joined(pieces: list[np.ndarray], dtype: Any, valid: np.ndarray | None = None) -> np.ndarray:
    """The pieces as one array, or one value broadcast when they hold only that value
    where ``valid`` (a null's value is never read: a Kafka position's ledger and batch,
    -1, are one value even with resets, whose position is null, among the rows)."""
    whole = np.concatenate(pieces) if len(pieces) != 1 else pieces[0]
    pieces.clear()
    if whole.size == 0:
        return np.zeros(0, dtype)
    if valid is not None and valid.strides == (0,) and not valid[0]:  # no valid row: nulls as 0
        return np.broadcast_to(np.zeros(1, whole.dtype), whole.shape)
    if valid is None or valid.strides == (0,):  # every row valid
        low, high = whole.min(), whole.max()
    else:
        info = np.iinfo(whole.dtype)
        low = whole.min(where=valid, initial=info.max)
        high = whole.max(where=valid, initial=info.min)
    if low == high:
        return np.broadcast_to(np.array([low], whole.dtype), whole.shape)
    return whole


def _run(values: Columns, valid: Columns) -> Iterator[Any]:
    """The anomaly rows of the given rows as one Arrow batch (none when there are none)."""
    import pyarrow as pa

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
    """The anomaly rows of the given rows (any order), any number of (topic, partition) groups: ``kind``
    and, per :data:`OUT_COLUMNS`, the values and ``valid:<column>`` masks (false where the value
    is null)."""
    n = values["tag"].size
    if n == 0:
        return _empty()
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
    # Per position, the ids bound to it (any row), and those of replica records.
    distinct = _distinct(v["mh"], ok["mh"], starts)
    replica = ok["mh"] & (tag == TAG_REPLICA)
    distinct_replicas = _distinct(v["mh"], replica, starts)
    bound = has_pos[starts] & ok["topic_h"][starts]
    skips = _truncation_skips(v, ok, starts, pid)
    del same, start, pid
    out = [_rows(v, ok, starts[bound & distinct], "inconsistent-offsets"),
           _rows(v, ok, starts[bound & distinct_replicas], "replica-divergence"),
           _rows(v, ok, starts[bound & skips], "truncation-skip")]

    # -- file order per sequence (client, grp): polls and acks against the one before,
    # unless a reset of that sequence came between them. Replica records and rows
    # without a place in file order take no part.
    member = (tag != TAG_REPLICA) & ok["seq"]
    rows = np.flatnonzero(member).astype(idx)
    del member
    if rows.size:
        # Each sequence's rows together (sequences in any order), in file order: a stable
        # sort by seq, then by a small sequence number (NumPy's radix sort)
        rows = rows[np.argsort(v["seq"][rows], kind="stable")]
        sequence = _sequence_numbers(v, ok, rows)
        rows = rows[np.argsort(sequence, kind="stable")]
        del sequence
        first = np.zeros(rows.size, dtype=bool)
        first[0] = True
        for k in (v["grp"], ok["grp"], v["client_h"], ok["client_h"]):
            kk = k[rows]
            first[1:] |= kk[1:] != kk[:-1]
        # its sequence's first row
        head = np.maximum.accumulate(np.where(first, np.arange(rows.size, dtype=idx), 0))
        reset = tag[rows] == TAG_RESET
        again, earlier = _silent_rereads(v, ok, rows, first, reset)
        out.append(_rows(v, ok, again, "silent-reread", earlier))
        prev = _last_before(~reset, head)
        last_reset = _last_before(reset, head)
        del head
        has_prev = prev >= 0
        cur = rows[has_prev]
        before = rows[prev[has_prev]]
        del prev
        judged = ~reset[has_prev]
        last_reset = last_reset[has_prev]
        del reset, has_prev
        # after a reset of its sequence (few rows): judged only if the reset came before the
        # row it is judged against (gathers of these rows only, not of every row)
        after_reset = np.flatnonzero(last_reset >= 0)
        judged[after_reset] &= v["seq"][rows[last_reset[after_reset]]] < v["seq"][before[after_reset]]
        del rows, last_reset, after_reset
        cur, before = cur[judged], before[judged]
        poll = tag[cur] != TAG_ACK
        not_after = ~_after(v, cur, before)
        skipped = below[cur] - le[before]
        # one poll call (a polls line) or one transaction: the int- kinds too
        unit = ok["unit"][cur] & ok["unit"][before] & (v["unit"][cur] == v["unit"][before])
        for kind, pick in (("nonmonotonic-send", ~poll & not_after),
                           ("nonmonotonic-poll", poll & not_after),
                           ("poll-skip", poll & ~not_after & (skipped > 0))):
            for name, at in ((kind, pick), (f"int-{kind}", pick & unit)):
                out.append(_rows(v, ok, cur[at], name, before[at],
                                 skipped[at] if kind == "poll-skip" else None))
    return {k: np.concatenate([o[k] for o in out]) for k in out[0]}


def _silent_rereads(v: Columns, ok: Columns, rows: np.ndarray, first: np.ndarray,
                    reset: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ``silent-reread`` rows and the earlier poll of each: ``rows`` are the sequence
    members (each sequence's together, in file order; ``first`` marks a sequence's first
    row, ``reset`` its resets). A poll of an id at a Kafka offset (``pl`` -1) that the same
    sequence polled there before, with no reset of the sequence between the two."""
    sequence = np.cumsum(first, dtype=rows.dtype)
    resets = np.cumsum(reset, dtype=rows.dtype)  # resets up to each row: a sequence's rows are contiguous
    at = rows
    polls = np.flatnonzero(~reset & (v["tag"][at] != TAG_ACK) & _gather(ok["mh"], at) & _gather(ok["pl"], at)
                           & (_gather(v["pl"], at) == -1)).astype(rows.dtype)
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


def _gather(col: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``col[rows]``, or a view of its one value when ``col`` is a value broadcast
    (:func:`_joined`): not an array of the rows' size."""
    if col.strides == (0,) and col.size:
        return np.broadcast_to(col[:1], rows.shape)
    return col[rows]


def _truncation_skips(v: Columns, ok: Columns, starts: np.ndarray, pid: np.ndarray) -> np.ndarray:
    """Per position (rows from ``starts``, in position order): whether it is a
    ``truncation-skip``. The recovery read holds one id there, run polls read another id
    there and none read the recovery's, and a run poll at a later position read the
    recovery's id at that position (so a consumer went past this one after the record
    that replaced the truncated one was written)."""
    tag, has_id = v["tag"], ok["mh"]
    rec = (tag == TAG_RPOLL) & has_id
    rec_count = np.add.reduceat(rec.astype(np.int64), starts)
    rec_low = np.minimum.reduceat(np.where(rec, v["mh"], _I64_MAX), starts)
    rec_high = np.maximum.reduceat(np.where(rec, v["mh"], _I64_MIN), starts)
    one_id = (rec_count > 0) & (rec_low == rec_high)  # the recovery read's one id here
    run = (tag == TAG_POLL) & has_id & one_id[pid]
    same = run & (v["mh"] == rec_low[pid])
    matched = np.add.reduceat(same.astype(np.int64), starts) > 0
    other = np.add.reduceat((run & ~same).astype(np.int64), starts) > 0
    later = np.zeros(starts.size, dtype=bool)  # a matched position after this one
    later[:-1] = np.logical_or.accumulate(matched[::-1])[::-1][1:]
    return one_id & other & ~matched & later


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


def _distinct(mh: np.ndarray, use: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per position (rows from ``starts``): whether the used rows hold more than one value."""
    low = np.minimum.reduceat(np.where(use, mh, _I64_MAX), starts)
    high = np.maximum.reduceat(np.where(use, mh, _I64_MIN), starts)
    count = np.add.reduceat(use.astype(np.int64), starts)
    return (count > 0) & (low != high)


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
    a = [_gather(v[c], cur) for c in ("pl", "pe", "pb")]
    b = [_gather(v[c], before) for c in ("pl", "pe", "pb")]
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


# id_hash: 64-bit arithmetic that wraps (NumPy's unsigned integers).
_U64 = np.uint64
_SEED, _K = _U64(0x2545F4914F6CDD1D), _U64(0x9E3779B97F4A7C15)
_ALL = _U64(0xFFFFFFFFFFFFFFFF)


def _mix(h: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer: a bijection of 64-bit values that spreads every bit."""
    h = (h ^ (h >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> _U64(27))) * _U64(0x94D049BB133111EB)
    return h ^ (h >> _U64(31))


def id_hash(arr: Any) -> Any:
    """A 64-bit hash of each string's UTF-8 bytes (null for null), in whole-array steps:
    the length, then each 8-byte word in turn, each step a bijection of the state. It
    stands for a message id where ids are compared by the million (the position step:
    two ids at one position); distinct ids collide with probability about 2^-64."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    if n == 0:
        return pa.array([], pa.int64())
    buffers = arr.buffers()
    width = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    offsets = np.frombuffer(buffers[1], width)[arr.offset:arr.offset + n + 1].astype(np.int64)
    start, length = offsets[:-1], offsets[1:] - offsets[:-1]
    data = buffers[2]
    padded = np.zeros((0 if data is None else data.size) + 8, np.uint8)
    if data is not None and data.size:
        padded[:-8] = np.frombuffer(data, np.uint8)
    # a little-endian 64-bit word at every byte offset (unaligned reads)
    words = np.ndarray((padded.size - 7,), dtype="<u8", buffer=padded, strides=(1,))
    h = _mix(length.astype(_U64) ^ _SEED)
    for w in range(int(-(-length.max() // 8))):
        rest = length - 8 * w
        rows = None if rest.min() > 0 else np.flatnonzero(rest > 0)  # the strings still going
        if rows is not None:
            rest = rest[rows]
        word = words[(start if rows is None else start[rows]) + 8 * w]
        word &= np.where(rest >= 8, _ALL, (_U64(1) << (np.minimum(rest, 7) * 8).astype(_U64)) - _U64(1))
        if rows is None:
            h = _mix((h ^ word) * _K)
        else:
            h[rows] = _mix((h[rows] ^ word) * _K)
    return pa.array(h.view(np.int64), pa.int64(), mask=pc.is_null(arr).to_numpy(zero_copy_only=False))
