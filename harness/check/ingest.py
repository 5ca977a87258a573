"""Step 1 of the check, ingest: history and replica lines to the ``events`` table, as
Arrow work inside Spark tasks (``mapInArrow``; one task per file split).

A task reads its split of a file in blocks of whole lines, each parsed to the contract's
fields by :mod:`harness.check.parse` (PyArrow, with the contract's plain-Python reading
near odd lines). Batch lines (``polls``,
``oks``, ``invokes``) then become their events with NumPy index arithmetic, and the
task writes its events as Parquet files in four places under the output directory:
``p/<topic hash>_<partition>/`` the rows with a place in a partition (polls with a
position, replica records with an id and a position), one directory per
(topic, partition), so that the position and sequence step reads a partition's rows
without a shuffle (like a table partitioned on write); ``r/`` the resets; ``x/`` the
``txn`` events (their ``tx``, its hash ``tx_h`` and ``txa``, the action and status:
:func:`harness.check.anomalies.vocab.txa`); ``o/`` all other events. Invokes carry their
``tx`` and ``tx_h`` too, and a copier's ``src``.
With an ids directory, the events of the per-id step (an id, a code up to ``POLL``) are
written once more, narrow (:data:`IDS_SCHEMA`), to ``<ids dir>/<bucket>/`` by
:func:`bucket_of` (:mod:`harness.check.mids`), and the client events among them that
are not polls and have no transaction are left out of ``o/``.
Every file has :data:`EVENTS_SCHEMA`: read together they are the
events table.

A task also counts its split's lines, its sends that copy an input record (with a
``src``) and its Key_Shared run polls (with a ``ks_t``), returned in one row of its result
with the names; and, in a row per reason, the lines it skips (not read, of an unknown
type, a batch whose columns differ in length, in a replica file not a replica record) and
the sends without a message id (:mod:`harness.check.lines`), counted with NumPy over the
block's columns, not line by line.

``seq``, an event's place in file order, is ``file index << 50 | (byte offset of its
line + its index in the batch)``: a batch of k events takes more than k bytes, so
places never collide, and they sort as the files do.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.check.anomalies.vocab import (
    FAIL,
    INFO,
    INVOKE,
    META,
    OK,
    POLL,
    REPLICA,
    RESET,
    ROW_ABORTED,
    ROW_RC,
    ROW_REC,
    TXN,
    TXN_ACTION,
    TXN_STATUS,
)
from harness.check.lines import (
    LONGS,
    NO_TYPE,
    NOT_CLIENT_EVENT,
    NOT_REPLICA,
    UNEQUAL,
    unjudged,
)
from harness.check.parse import parse
from harness.history import BATCH_EVENTS, CLIENT_TYPES, RUNS

__all__ = ["EVENTS_SCHEMA", "IDS_SCHEMA", "MAX_BUCKETS", "MAX_FILES", "SPLIT_BYTES", "TASK_SCHEMA",
           "bucket_of", "kernel", "line_split", "place_dir", "place_pair", "plan", "split_name"]

HISTORY_TYPES = {"invoke": INVOKE, "invokes": INVOKE, "ok": OK, "oks": OK, "fail": FAIL, "info": INFO,
                 "poll": POLL, "polls": POLL, "reset": RESET, "meta": META, "txn": TXN}
REPLICA_TYPES = {"replica": REPLICA}

OFFSET_BITS = 50
MAX_FILES = 1 << (63 - OFFSET_BITS)
SPLIT_BYTES = 64 << 20  # at most this much of a file per task
BLOCK_BYTES = 4 << 20  # parsed at once

_L, _S = pa.int64(), pa.string()
# batch column -> the event field it holds (harness.history.BATCH_EVENTS), for the fields read
_COLUMNS = {"partitions": "partition", "offsets": "offset", "ledgers": "ledger", "entries": "entry",
            "batches": "batch", "mids": "mid", "keys": "key", "srcs": "src"}

EVENTS_SCHEMA = pa.schema([
    ("code", pa.int32()), ("mid", _S), ("topic", _S), ("topic_h", _L), ("part", _L), ("pl", _L),
    ("pe", _L), ("pb", _L), ("client", _S), ("client_h", _L), ("flags", pa.int32()), ("seq", _L),
    ("node", _S), ("ks_t", pa.float64()), ("ks_sub", _S), ("ks_key", _S), ("t", pa.float64()),
    ("tx", _S), ("tx_h", _L), ("txa", pa.int32()), ("bi", pa.int32()), ("due", pa.float64()),
    ("src", _S)])
#: few distinct values: dictionary-encoded in Parquet
_DICTIONARY = ["code", "topic", "topic_h", "part", "client", "client_h", "flags", "node", "ks_sub", "ks_key",
               "tx", "tx_h", "txa"]
#: one row per task: its split, and what it read
TASK_SCHEMA = "path string, file long, replicas boolean, start long, stop long"
#: what a task returns: the distinct (client, topic, polled partition, read_committed) of its events
#: (the rest null); one row of its counts (its file's ``path``, ``lines``, ``copies``, ``keyed``);
#: and a row per reason (``path``, ``reason``, ``n``) of its skipped lines and its sends
#: without a message id (:mod:`harness.check.lines`)
RESULT_SCHEMA = ("client_h long, client string, topic_h long, topic string, polled long, rc boolean, "
                 "path string, lines long, copies long, keyed long, reason string, n long")
#: the send codes, by the event type a send without a message id is counted under
_SENDS = {INVOKE: "invoke", OK: "ok", FAIL: "fail", INFO: "info"}
_NAME_KEYS = ["client_h", "client", "topic_h", "topic", "polled", "rc"]
_KNOWN_TYPES = pa.array(sorted(CLIENT_TYPES), pa.string())
# Where a task writes: see the module docstring.
PLACED, RESETS, OTHER, TXNS = "p", "r", "o", "x"


def place_dir(topic_h: int, part: int) -> str:
    """The directory (under :data:`PLACED`) of one (topic hash, partition)'s rows."""
    return f"{topic_h}_{part}"


def place_pair(name: str) -> tuple[int, int]:
    """The (topic hash, partition) of a :func:`place_dir` name."""
    topic_h, part = name.rsplit("_", 1)
    return int(topic_h), int(part)


def plan(history: Sequence[str], replicas: Sequence[str],
         split_bytes: int | None = None) -> list[tuple[Any, ...]]:
    """The tasks: (path, file index, replicas?, start, stop) splits of at most
    ``split_bytes`` (:data:`SPLIT_BYTES`) each; a split holds the lines that start in it."""
    split_bytes = split_bytes or SPLIT_BYTES
    out = []
    for is_replica, group in ((False, history), (True, replicas)):
        for index, path in enumerate(group):
            size = os.path.getsize(path)
            for start in range(0, max(size, 1), split_bytes):
                out.append((path, index, is_replica, start, min(size, start + split_bytes)))
    return out


def split_name(replicas: bool, file: int, start: int) -> str:
    """The name of the files a split (:func:`plan`) writes, in each directory it writes to."""
    return f"{'r' if replicas else 'h'}{file:05d}-{start:015d}.parquet"


def line_split(path: str, offset: int, split_bytes: int | None = None) -> int:
    """The start of the split (:func:`plan`) that reads the line under way at byte
    ``offset`` of ``path``: a split reads the lines that start in it, after a \\n (so a
    ``seq``'s offset, which may pass the end of its batch line's split, still finds it)."""
    split_bytes = split_bytes or SPLIT_BYTES
    with open(path, "rb") as fh:
        end = offset
        while end > 0:  # back to the \n before offset
            begin = max(0, end - BLOCK_BYTES)
            fh.seek(begin)
            at = fh.read(end - begin).rfind(b"\n")
            if at >= 0:
                return (begin + at + 1) // split_bytes * split_bytes
            end = begin
    return 0


def kernel(out_dir: str, ids_dir: str | None = None, buckets: int = 1) -> Any:
    """The ``mapInArrow`` function for task rows of :data:`TASK_SCHEMA`: each split's
    events go to Parquet files in ``out_dir`` (and, with ``ids_dir``, its events of the
    per-id step to ``ids_dir``'s ``buckets``: :mod:`harness.check.mids`); its names and
    its counts of lines, skipped lines and sends without a message id
    (:data:`RESULT_SCHEMA`) come back."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for task in batch.to_pylist():
                yield from _ingest_split(out_dir, ids_dir, buckets, **task).to_batches()

    return run


def _ingest_split(out_dir: str, ids_dir: str | None, buckets: int, path: str, file: int, replicas: bool,
                  start: int, stop: int) -> pa.Table:
    name = split_name(replicas, file, start)
    names = []
    lines = copies = keyed = 0
    reasons: Counter[str] = Counter()
    with _Writers(out_dir, name, ids_dir, buckets) as writers:
        for base, block in _blocks(path, start, stop):
            table, refused = parse(block, base, replicas)
            events, unused = _events(table, file, replicas)
            lines += table.num_rows + refused.total()
            reasons += refused + unused
            copies += events.num_rows - events.column("src").null_count
            keyed += events.num_rows - events.column("ks_t").null_count
            if events.num_rows:
                writers.write(events)
                names.append(_names(events))
    found = (pa.concat_tables(names).group_by(_NAME_KEYS, use_threads=False).aggregate([]).select(_NAME_KEYS)
             if names else _NAMES_SCHEMA.empty_table())
    why = sorted(reasons)
    counted = pa.table({"path": [path] * (1 + len(why)), "lines": [lines, *[None] * len(why)],
                        "copies": [copies, *[None] * len(why)], "keyed": [keyed, *[None] * len(why)],
                        "reason": [None, *why], "n": [None, *(reasons[r] for r in why)]})
    nulls = {k: pa.nulls(counted.num_rows, _NAMES_SCHEMA.field(k).type) for k in _NAME_KEYS}
    counted = pa.table({**nulls, **{k: counted[k] for k in counted.column_names}}).cast(_RESULT_SCHEMA)
    nulls = {f.name: pa.nulls(found.num_rows, f.type) for f in _RESULT_SCHEMA if f.name not in _NAME_KEYS}
    return pa.concat_tables([pa.table({**{k: found[k] for k in _NAME_KEYS}, **nulls}, schema=_RESULT_SCHEMA),
                             counted])


def dirs_under(root: str, *parts: str) -> str:
    """``root/parts...``, made where missing, but never ``root`` itself (the driver makes
    it in the check's scratch directory): a task still writing when its check failed and
    removed that directory gets FileNotFoundError instead of making it again."""
    path = root
    for part in os.path.join(*parts).split(os.sep):
        path = os.path.join(path, part)
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
    return path


class _Writers:
    """One split's Parquet writers, opened as rows come: ``o/`` (always, so that every
    split leaves a file), ``r/``, and one per ``p/<topic hash>_<partition>/``. A split's
    rows of each id bucket are held until the split is read, then written as one row
    group (a block has only a few thousand rows per bucket: a row group per block cost
    more to write and to read back than its rows)."""

    def __init__(self, out_dir: str, name: str, ids_dir: str | None = None, buckets: int = 1) -> None:
        self.out_dir, self.name, self.ids_dir, self.buckets = out_dir, name, ids_dir, buckets
        self.open: dict[str, pq.ParquetWriter] = {}
        self.held: dict[int, list[pa.Table]] = {}
        self._writer(OTHER)

    def _writer(self, where: str, root: str | None = None) -> pq.ParquetWriter:
        root = root or self.out_dir
        key = os.path.join(root, where)
        writer = self.open.get(key)
        if writer is None:
            dirs_under(root, where)
            ids = root != self.out_dir
            writer = self.open[key] = pq.ParquetWriter(
                os.path.join(key, self.name), IDS_SCHEMA if ids else EVENTS_SCHEMA, compression="lz4",
                use_dictionary=_IDS_DICTIONARY if ids else _DICTIONARY,
                write_statistics=_IDS_STATS if ids else _STATS)
        return writer

    def write(self, events: pa.Table) -> None:
        code = _filled(events["code"], -1)
        located = _valid(events["pl"]) & _valid(events["topic_h"])
        placed = located & ((code == POLL) | ((code == REPLICA) & _valid(events["mid"])))
        reset = code == RESET
        txn = code == TXN
        other = ~placed & ~reset & ~txn
        if self.ids_dir is not None:
            in_ids = _valid(events["mid"]) & (code >= 0) & (code <= POLL)
            self._write_ids(events, np.flatnonzero(in_ids))
            # A client event (invoke, ok, fail, info) with an id and no transaction is in
            # its bucket only: the later steps read those there. (Polls are read in place,
            # and a transaction's sends name it: those are in both.)
            other &= ~(in_ids & (code < POLL) & ~_valid(events["tx_h"]))
        if other.all():
            self._writer(OTHER).write_table(events)
            return
        if other.any():
            self._writer(OTHER).write_table(events.filter(pa.array(other)))
        if reset.any():
            self._writer(RESETS).write_table(events.filter(pa.array(reset)))
        if txn.any():
            self._writer(TXNS).write_table(events.filter(pa.array(txn)))
        rows = np.flatnonzero(placed)
        if not rows.size:
            return
        topic_h = _filled(events["topic_h"], 0)[rows]  # no nulls in these rows
        part = _filled(events["part"], 0)[rows]
        change = _changes(topic_h, part)
        starts = [0, *change]
        runs = set(zip(topic_h[starts].tolist(), part[starts].tolist(), strict=True))
        if rows[-1] - rows[0] + 1 == rows.size and len(runs) == len(starts):
            taken = events.slice(rows[0], rows.size)  # in whole runs (_polls_first): a slice, no take
        else:
            order = np.lexsort((part, topic_h))
            rows, topic_h, part = rows[order], topic_h[order], part[order]
            change = _changes(topic_h, part)
            taken = events.take(pa.array(rows))
        for lo, hi in zip([0, *change], [*change, rows.size], strict=False):
            where = os.path.join(PLACED, place_dir(int(topic_h[lo]), int(part[lo])))
            self._writer(where).write_table(taken.slice(lo, hi - lo))

    def _write_ids(self, events: pa.Table, rows: np.ndarray) -> None:
        """The per-id step's events (``rows``: an id, a client event or poll code), narrow,
        by bucket."""
        assert self.ids_dir is not None
        if not rows.size:
            return
        bucket = bucket_of(events["mid"].take(pa.array(rows)), self.buckets)
        if self.buckets > 1:  # a radix sort on 16-bit keys (MAX_BUCKETS)
            order = np.argsort(bucket.astype(np.int16), kind="stable")
            rows, bucket = rows[order], bucket[order]
        taken = events.select(IDS_SCHEMA.names).take(pa.array(rows))
        change = np.flatnonzero(bucket[1:] != bucket[:-1]) + 1
        for lo, hi in zip([0, *change], [*change, len(bucket)], strict=False):
            self.held.setdefault(int(bucket[lo]), []).append(taken.slice(lo, hi - lo))

    def __enter__(self) -> _Writers:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None and self.ids_dir is not None:
                for bucket in sorted(self.held):
                    rows = pa.concat_tables(self.held.pop(bucket))
                    self._writer(str(bucket), self.ids_dir).write_table(rows)
        finally:
            for writer in self.open.values():
                writer.close()


def _changes(topic_h: np.ndarray, part: np.ndarray) -> np.ndarray:
    """The indices where (topic hash, partition) differs from the row before."""
    return np.flatnonzero((topic_h[1:] != topic_h[:-1]) | (part[1:] != part[:-1])) + 1


#: the columns of the per-id step's buckets (:mod:`harness.check.mids`)
IDS_SCHEMA = pa.schema([EVENTS_SCHEMA.field(n) for n in (
    "mid", "code", "flags", "client_h", "topic_h", "part", "pl", "pe", "pb", "seq", "t", "due", "tx_h",
    "src")])
_IDS_DICTIONARY = [n for n in _DICTIONARY if n in IDS_SCHEMA.names]
#: the columns whose Parquet statistics a reader uses, to skip row groups or files: the
#: details step's positions and ``seq``s, the kernels' and Spark's filters (code,
#: transaction, Key_Shared time). Statistics on the others (ids, names, times) cost about
#: a tenth of the writes and skip nothing (bench/LOG.md).
STATS = ("code", "seq", "topic_h", "part", "pl", "pe", "pb", "tx_h", "ks_t")
_STATS = [n for n in STATS if n in EVENTS_SCHEMA.names]
_IDS_STATS = [n for n in STATS if n in IDS_SCHEMA.names]
#: the most id buckets (:func:`bucket_of`)
MAX_BUCKETS = 1 << 14
_PAD, _EMPTY = pa.scalar(bytes(16), pa.binary()), pa.scalar(b"", pa.binary())
_MIX_1, _MIX_2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)

_NAMES_SCHEMA = pa.schema([("client_h", _L), ("client", _S), ("topic_h", _L), ("topic", _S), ("polled", _L),
                           ("rc", pa.bool_())])
_RESULT_SCHEMA = pa.schema([*_NAMES_SCHEMA, ("path", _S), ("lines", _L), ("copies", _L), ("keyed", _L),
                            ("reason", _S), ("n", _L)])


def _names(events: pa.Table) -> pa.Table:
    """The distinct (client, topic, partition if a poll, read_committed poll or meta) rows."""
    code = events["code"]
    polled = pc.if_else(pc.equal(code, POLL), events["part"], pa.scalar(None, _L))
    rc = pc.and_(pc.is_in(code, value_set=pa.array([POLL, META], pa.int32())),
                 pc.not_equal(pc.bit_wise_and(events["flags"], ROW_RC), 0))
    table = pa.table([events["client_h"], events["client"], events["topic_h"], events["topic"], polled, rc],
                     schema=_NAMES_SCHEMA)
    return table.group_by(_NAME_KEYS, use_threads=False).aggregate([]).select(_NAME_KEYS)


def _blocks(path: str, start: int, stop: int) -> Iterator[tuple[int, bytes]]:
    """(offset, bytes) blocks of whole lines: those that start in [start, stop)."""
    with open(path, "rb") as fh:
        pos = start
        if start > 0:  # the line under way at start belongs to the split before
            fh.seek(start - 1)
            rest = fh.readline()
            pos = start - 1 + len(rest)
        fh.seek(pos)
        while pos < stop:
            data = fh.read(min(BLOCK_BYTES, stop - pos))
            if not data:
                return
            if not data.endswith(b"\n"):  # finish the last line (it may run past stop)
                data += fh.readline()
            yield pos, data
            pos += len(data)


def _events(table: pa.Table, file: int, replicas: bool) -> tuple[pa.Table, Counter[str]]:
    """Lines to events (:data:`EVENTS_SCHEMA`): a batch line becomes its events in list
    order (a record's field: its column's element, or the line's own field where the
    column is null or absent); a batch whose columns differ in length, or have none,
    gives none. The polls come first, each (topic, partition)'s together, then the other
    events, each in file order (:func:`_polls_first`; not in replica files). And, by reason
    (:mod:`harness.check.lines`), the lines skipped (of no type or a type that is no client
    event, batches whose columns differ in length; in a replica file, lines that are not
    replica records) and the sends without a message id."""
    n_lines = table.num_rows
    types = table.column("type")
    code_line = _filled(_lookup(types, REPLICA_TYPES if replicas else HISTORY_TYPES, pa.int32()), -1)
    has_code = code_line >= 0
    counts = has_code.astype(np.int64)
    columns: dict[str, tuple[pa.Array, np.ndarray]] = {}
    runs: dict[str, np.ndarray] = {}  # run field -> the lines that start one
    reasons: Counter[str] = Counter()
    if replicas and not has_code.all():
        no_type = ~_valid(types)
        reasons.update({NO_TYPE: int(np.count_nonzero(no_type)),
                        NOT_REPLICA: int(np.count_nonzero(~has_code & ~no_type))})
    if not replicas and n_lines:
        size = np.full(n_lines, -1, np.int64)
        same = np.ones(n_lines, bool)
        is_batch = np.zeros(n_lines, bool)
        count, has_count = _filled(table.column("count"), -1), _valid(table.column("count"))
        for batch_type, (_, fields) in BATCH_EVENTS.items():
            rows = _eq(types, batch_type)
            is_batch |= rows
            for column in fields:
                arr = table.column(column).combine_chunks()
                length = _filled(pc.list_value_length(arr), -1)
                present = rows & (length >= 0)
                grown = np.maximum(size, length)
                same &= ~present | (size < 0) | (length == size)
                size = np.where(present, grown, size)
                if column in _COLUMNS:
                    use = present if column not in columns else columns[column][1] | present
                    columns[column] = (arr, use)
            # runs (harness.history.batch_size): a count, which a run needs and the lists match
            for run, column in RUNS.items():
                if column not in fields or run not in table.column_names:
                    continue
                started = rows & _valid(table.column(run))
                start = _filled(table.column(run), 0)  # its last value a 64-bit integer too
                same &= ~started | (start <= np.iinfo(np.int64).max - np.maximum(count - 1, 0))
                same &= ~started | (has_count & ~_valid(table.column(column)))
                if run == "mids_from":
                    same &= ~started | _valid(table.column("mid_prefix"))
                runs[run] = runs.get(run, np.zeros(n_lines, bool)) | started
            counted = rows & has_count
            same &= ~counted | ((count >= 0) & ((size < 0) | (count == size)))
            size = np.where(counted & (count >= 0), count, size)
        ok = same & (size > 0)
        counts = np.where(is_batch, np.where(ok, size, 0), counts)
        known = _filled(pc.is_in(types, value_set=_KNOWN_TYPES), False)
        no_type = ~_valid(types)
        reasons.update({NO_TYPE: int(np.count_nonzero(no_type)),
                        NOT_CLIENT_EVENT: int(np.count_nonzero(~known & ~no_type)),
                        UNEQUAL: int(np.count_nonzero(is_batch & ~same))})
    line = np.repeat(np.arange(n_lines, dtype=np.int64), counts)
    first = np.cumsum(counts) - counts
    index = np.arange(len(line), dtype=np.int64) - np.repeat(first, counts)
    if not replicas:
        order = _polls_first(table, code_line, columns.get("partitions"), line, index)
        if order is not None:
            line, index = line[order], index[order]
    take = pa.array(line, _L)

    def spread(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
        """A line column, one value per event (all null without a take when the column is)."""
        if arr.null_count == len(arr):
            return pa.nulls(len(line), arr.type)
        out = arr.take(take)
        return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out

    def field(name: str) -> pa.Array:
        own = spread(table.column(name))
        column = next((c for c, f in _COLUMNS.items() if f == name), None)
        if column is None or column not in columns:
            return own
        arr, use_line = columns[column]
        use = use_line[line]
        if not use.any():
            return own
        offsets = arr.offsets.to_numpy()
        at = np.where(use, offsets[line] + index, 0)
        values = arr.values.take(pa.array(at, _L))
        return pc.if_else(pa.array(use), values, own)

    def named(arr: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, pa.Array]:
        """A line column of names and their hashes, per event (hashed per line)."""
        arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
        if arr.null_count == len(arr):
            return pa.nulls(len(line), arr.type), pa.nulls(len(line), _L)
        return arr.take(take), _hash(arr).take(take)

    def run_of(name: str, values: pa.Array) -> pa.Array:
        """``values`` where no run gives the field, else the run's value (``name`` a key of
        harness.history.RUNS): its start plus the event's index, after ``mid_prefix``."""
        started = runs.get(name)
        if started is None or not started[line].any():
            return values
        use = started[line]
        at = pa.array(np.where(use, _filled(spread(table.column(name)), 0) + index, 0), _L)
        if name == "mids_from":
            at = pc.binary_join_element_wise(spread(table.column("mid_prefix")), pc.cast(at, _S), "")
        return pc.if_else(pa.array(use), at, values)

    part, offset, ledger, entry, batch = (field(n) for n in LONGS)
    batch = run_of("batches_from", batch)
    mid, (topic, topic_h) = run_of("mids_from", field("mid")), named(table.column("topic"))
    code = pa.array(code_line[line].astype(np.int32), pa.int32())
    pl, pe, pb = _position(part, offset, ledger, entry, batch)
    out: dict[str, pa.Array] = {"code": code, "mid": mid, "topic": topic, "topic_h": topic_h,
                                "part": part, "pl": pl, "pe": pe, "pb": pb}
    n = len(line)
    if replicas:
        out.update(client=pa.nulls(n, _S), client_h=pa.nulls(n, _L), flags=pa.array(np.zeros(n, np.int32)),
                   seq=pa.nulls(n, _L), node=spread(table.column("node")),
                   ks_t=pa.nulls(n, pa.float64()), ks_sub=pa.nulls(n, _S), ks_key=pa.nulls(n, _S),
                   t=pa.nulls(n, pa.float64()), tx=pa.nulls(n, _S), tx_h=pa.nulls(n, _L),
                   txa=pa.nulls(n, pa.int32()), bi=pa.nulls(n, pa.int32()), due=pa.nulls(n, pa.float64()),
                   src=pa.nulls(n, _S))
        return pa.table(out, schema=EVENTS_SCHEMA), +reasons
    if mid.null_count:  # sends without an id (polls: records not ours): not judged, counted by type
        without = code_line[line[~_valid(mid)]]
        reasons.update({unjudged(kind): int(np.count_nonzero(without == c)) for c, kind in _SENDS.items()})
    recovery = _eq(table.column("phase"), "recovery")
    flags_line = (np.where(recovery, ROW_REC, 0)
                  | np.where(_eq(table.column("txn"), "aborted"), ROW_ABORTED, 0)
                  | np.where(_eq(table.column("isolation"), "read_committed"), ROW_RC, 0))
    at = table.column("_at").to_numpy()
    seq = (np.int64(file) << OFFSET_BITS) | (at[line] + index)
    key = field("key")
    # Key_Shared run polls (key-order): time, subscription and key; null on other rows.
    ks_line = ((_eq(types, "poll") | _eq(types, "polls")) & ~recovery
               & _eq(table.column("subscription_type"), "Key_Shared"))
    ks = ks_line[line] & _valid(key) & _valid(mid)
    ks_mask = pa.array(~ks)
    t = spread(table.column("t"))
    # transactions: tx on invokes and txn events (null elsewhere), txa on txn events
    is_txn = code_line == TXN
    tx_line = _masked(table.column("tx").combine_chunks(), pa.array(~((code_line == INVOKE) | is_txn)))
    action = _filled(_lookup(table.column("action"), TXN_ACTION, pa.int32()), -1)
    status = _filled(_lookup(table.column("status"), TXN_STATUS, pa.int32()), -1)
    txa_line = np.where(is_txn & (action >= 0) & (status >= 0), action * 4 + status, -1)[line]
    # a copier's send: the input record it copies (invokes only)
    src = field("src")
    if src.null_count < len(src):
        src = _masked(src, pa.array(code_line[line] != INVOKE))
    tx, tx_h = named(tx_line)
    out.update(tx=tx, tx_h=tx_h, src=src,
               txa=pc.if_else(pa.array(txa_line < 0), pa.scalar(None, pa.int32()),
                              pa.array(txa_line.astype(np.int32))))
    client, client_h = named(table.column("client"))
    out.update(client=client, client_h=client_h, flags=pa.array(flags_line[line].astype(np.int32)),
               seq=pa.array(seq, _L), node=pa.nulls(n, _S), t=t,
               bi=pa.array(index.astype(np.int32)),  # its place in its line: a batch's records share seq - bi
               ks_t=_masked(t, ks_mask),
               ks_sub=_masked(spread(table.column("subscription")), ks_mask),
               ks_key=_masked(key, ks_mask), due=_due(table, code_line, line, index))
    return pa.table(out, schema=EVENTS_SCHEMA), +reasons


def _polls_first(table: pa.Table, code_line: np.ndarray, partitions: tuple[pa.Array, np.ndarray] | None,
                 line: np.ndarray, index: np.ndarray) -> np.ndarray | None:
    """An order of a block's events (``line``, ``index``) with its polls first, those of one
    (topic, partition) together and in their order, then every other event in its order:
    the writers then write each partition's polls as a slice of the block's events, not a
    take of them (:meth:`_Writers.write`, which checks the runs and takes when they are not
    whole). A stable radix sort on 16-bit keys; None when the block has no polls, or its
    topics times its span of partition numbers do not fit in such a key."""
    poll = code_line[line] == POLL
    if not poll.any():
        return None
    topic = table.column("topic")
    topic = topic.combine_chunks() if isinstance(topic, pa.ChunkedArray) else topic
    t_code = _filled(pc.dictionary_encode(topic).indices, -1).astype(np.int64)[line]
    part = _filled(table.column("partition"), 0)[line]
    valid = _valid(table.column("partition"))[line]
    if partitions is not None:
        arr, use_line = partitions
        use = np.flatnonzero(use_line[line])
        at = arr.offsets.to_numpy()[line[use]] + index[use]
        part[use] = _filled(arr.values, 0)[at]
        valid[use] = _valid(arr.values)[at]
    known = poll & (t_code >= 0) & valid
    if not known.any():
        return None
    low = int(part[known].min())
    width = int(part[known].max()) - low + 1
    if (int(t_code[known].max()) + 1) * width >= _LAST_KEY:
        return None
    key = np.where(known, t_code * width + np.where(known, part - low, 0), _LAST_KEY).astype(np.int16)
    return np.argsort(key, kind="stable")


_LAST_KEY = np.iinfo(np.int16).max  # _polls_first's key of the events after the polls


def bucket_of(mid: pa.Array | pa.ChunkedArray, buckets: int) -> np.ndarray:
    """Each id's bucket in [0, buckets) (at most :data:`MAX_BUCKETS`), the same in every task and process: a
    multiplicative hash of its last 16 bytes (ids differ most at their end: a counter),
    read as two words after a padding of zeros. ``mid`` has no nulls."""
    n = len(mid)
    if not 1 <= buckets <= MAX_BUCKETS:
        raise ValueError(f"{buckets} buckets: 1 to {MAX_BUCKETS}")
    if buckets == 1 or not n:
        return np.zeros(n, np.int64)
    if isinstance(mid, pa.ChunkedArray):
        mid = mid.combine_chunks()
    padded = pc.binary_join_element_wise(_PAD, mid.cast(pa.binary()), _EMPTY)
    tail = pc.binary_slice(padded, start=-16)  # 16 bytes each, one after the other
    first = int(np.frombuffer(tail.buffers()[1], np.int32)[tail.offset])
    data = np.frombuffer(tail.buffers()[2], np.uint8)[first: first + 16 * n]
    words = data.view(np.uint64).reshape(n, 2)
    h = (words[:, 0] * _MIX_1) ^ (words[:, 1] * _MIX_2)
    h ^= h >> np.uint64(29)
    return ((h * _MIX_1 >> np.uint64(32)) % np.uint64(buckets)).astype(np.int64)


def _due(table: pa.Table, code_line: np.ndarray, line: np.ndarray, index: np.ndarray) -> pa.Array:
    """When each send was due (a paced producer's schedule; harness.history): the line's
    ``due`` plus the send's index in its line times ``every``; null but on invokes with a
    ``due``."""
    due = table.column("due").combine_chunks()
    if due.null_count == len(due):
        return pa.nulls(len(line), pa.float64())
    due_np = due.to_numpy(zero_copy_only=False)  # nulls read as NaN
    every = np.nan_to_num(table.column("every").combine_chunks().to_numpy(zero_copy_only=False), nan=0.0)
    out = np.where(code_line == INVOKE, due_np, np.nan)[line] + every[line] * index
    return pa.array(out, pa.float64(), mask=~np.isfinite(out))


def _position(part: pa.Array, offset: pa.Array, ledger: pa.Array, entry: pa.Array,
              batch: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array]:
    """The validated position (harness.history.position_key): Kafka (-1, offset, -1)
    with offset >= 0, Pulsar (ledger, entry, batch or -1) with ledger, entry >= 0;
    null without a partition or with a negative or missing part."""
    kafka = _valid(offset)
    off, led, ent = _filled(offset, -1), _filled(ledger, -1), _filled(entry, -1)
    valid = _valid(part) & np.where(kafka, off >= 0, (led >= 0) & (ent >= 0) & _valid(ledger) & _valid(entry))
    invalid = pa.array(~valid)
    minus = np.full(len(off), -1, np.int64)
    pl = np.where(kafka, minus, led)
    pe = np.where(kafka, off, ent)
    pb = np.where(kafka, minus, _filled(batch, -1))
    return tuple(pc.if_else(invalid, pa.scalar(None, _L), pa.array(x, _L)) for x in (pl, pe, pb))


def _valid(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return pc.is_valid(arr).to_numpy(zero_copy_only=False)


def _filled(arr: pa.Array | pa.ChunkedArray, fill: Any) -> np.ndarray:
    return pc.fill_null(arr, fill).to_numpy(zero_copy_only=False)


def _eq(arr: pa.Array | pa.ChunkedArray, value: str) -> np.ndarray:
    """arr == value, false where null."""
    return pc.fill_null(pc.equal(arr, value), False).to_numpy(zero_copy_only=False)


def _masked(arr: pa.Array, mask: pa.Array) -> pa.Array:
    """``arr`` with nulls where ``mask`` is true."""
    return pc.if_else(mask, pa.scalar(None, arr.type), arr)


def _lookup(arr: pa.Array | pa.ChunkedArray, mapping: dict[str, int], type_: pa.DataType) -> pa.Array:
    """mapping[value] for each value (null where absent)."""
    encoded = pc.dictionary_encode(arr).combine_chunks() if len(arr) else None
    if encoded is None:
        return pa.array([], type_)
    table = pa.array([mapping.get(v) for v in encoded.dictionary.to_pylist()], type_)
    return table.take(encoded.indices)


def _hash(arr: pa.Array) -> pa.Array:
    """A 64-bit hash of each string (BLAKE2b), null for null: names are few, so each
    distinct one is hashed once."""
    if not len(arr):
        return pa.array([], _L)
    encoded = pc.dictionary_encode(arr)
    digests = [None if s is None else int.from_bytes(
        hashlib.blake2b(s.encode("utf-8"), digest_size=8).digest(), "little", signed=True)
        for s in encoded.dictionary.to_pylist()]
    return pa.array(digests, _L).take(encoded.indices)
