"""Step 3 of the check, per message id, as a columnar kernel inside Spark tasks
(``mapInArrow``; one task per id bucket).

The ingest (:mod:`harness.check.ingest`) writes the rows this step reads (the events
with an id and a client event or poll code) a second time, narrow and split by a hash
of their id into buckets: ``<ids dir>/<bucket>/<ingest split>.parquet``. So all events
of one id are in one bucket, and a task aggregates its bucket on its own: the shuffle
is the ingest's write. The aggregate is NumPy over the bucket's rows, with no sort: Arrow's
dictionary encoding numbers the ids, and a group's first invoke or first ack is its such
row of least ``seq``, a minimum an unbuffered ufunc reduction (``minimum.at``), as are
its flags and least times. Spark's hash aggregate did the same work row by row (at 10M records
about 24 s of a 58-s check; this kernel: see bench/LOG.md).

What each output column is (one row per id): :data:`MIDS_SCHEMA` and
:func:`aggregate`. The task writes its rows as Parquet in Hive's layout, a directory
per (ack topic, ack partition), the layout the anomaly step reads, one file per bucket in
each (:func:`bucket_stem`): the details find an id's row in its bucket's files.

Two small tables come with it, so that the anomaly step need not scan the per-id table
with Spark SQL (two scans of 10M rows were most of the JVM's work in a 10M check:
bench/LOG.md): the **flag counts**, how many of the bucket's ids have
each (flags, transaction) pair (:data:`COUNTS_SCHEMA`), over which the step evaluates its
outcome counts; and, when the step gives the kernel the flag values that can make an id
anomalous (:class:`Loud`, worked out by the step's own conditions), the bucket's ids with
such flags, a second time (:data:`MIDS_SCHEMA`, one file per bucket), the only rows the
step's id anomalies then read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.check.anomalies.vocab import (
    F_ABORTED,
    F_DUP,
    F_FAIL,
    F_INFO,
    F_INV,
    F_OK,
    F_RC_READ,
    F_REC,
    F_REC_RC,
    F_RU_READ,
    F_RUN,
    FAIL,
    FLAG_VALUES,
    INFO,
    INVOKE,
    OK,
    POLL,
    ROW_ABORTED,
    ROW_REC,
)
from harness.check.ingest import IDS_SCHEMA, dirs_under

__all__ = ["COUNTS_SCHEMA", "FLAG_VALUES", "MIDS_SCHEMA", "TASK_SCHEMA", "Loud", "aggregate", "bucket_stem",
           "kernel"]


_L, _D, _S = pa.int64(), pa.float64(), pa.string()
#: one row per id; ``ack_topic`` and ``ack_part`` name its directory
MIDS_SCHEMA = pa.schema([
    ("mid", _S), ("f", pa.int32()), ("inv_seq", _L), ("inv_client", _L), ("ack_client", _L),
    ("ack_topic", _L), ("ack_part", _L), ("ack_pl", _L), ("ack_pe", _L), ("ack_pb", _L), ("inv_t", _D),
    ("due_t", _D), ("ack_t", _D), ("poll_t", _D), ("tx_h", _L), ("rc_t", _D), ("src", _S)])
#: the flag counts: how many ids of a bucket have these flags and this transaction
COUNTS_SCHEMA = pa.schema([("f", pa.int32()), ("tx_h", _L), ("n", _L)])
#: a task: one bucket
TASK_SCHEMA = "bucket long"
#: what a task returns: its bucket's ids, those sent in a transaction, and the least and
#: greatest finite first-invoke time (null if none)
RESULT_SCHEMA = "bucket long, ids long, tx_ids long, inv_lo double, inv_hi double"
_NO_SEQ = np.iinfo(np.int64).max
_RESULT = pa.schema([("bucket", _L), ("ids", _L), ("tx_ids", _L), ("inv_lo", _D), ("inv_hi", _D)])
#: the columns whose Parquet statistics the later steps' filters use (``ingest.STATS``)
_STATS = ["f", "ack_pl", "tx_h", "src"]
#: Hive's directory name for a null partition value (Spark's and PyArrow's)
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


@dataclass(frozen=True)
class Loud:
    """The flag values (``f``, below :data:`FLAG_VALUES`) that can make an id anomalous:
    ``plain[f]`` for an id sent without a transaction, ``tx[f]`` for one with; and where
    the ids with such flags go (a file per bucket)."""

    plain: bytes
    tx: bytes
    out_dir: str

    def mask(self, table: pa.Table) -> np.ndarray:
        """Which rows of a per-id ``table`` have such flags."""
        f = table["f"].to_numpy(zero_copy_only=False)  # never null
        plain = np.frombuffer(self.plain, np.bool_)
        tx = np.frombuffer(self.tx, np.bool_)
        return np.where(_valid(table["tx_h"]), tx[f], plain[f])


def kernel(ids_dir: str, out_dir: str, rc_clients: Iterable[int], counts_dir: str, tx_dir: str,
           loud: Loud | None = None) -> Any:
    """The ``mapInArrow`` function for task rows of :data:`TASK_SCHEMA`: each bucket's
    ids aggregated (:func:`aggregate`) and written under ``out_dir``, its flag counts in
    ``counts_dir``, its ids sent in a transaction again in ``tx_dir`` and, with ``loud``,
    its ids of those flags in ``loud.out_dir`` (a file per bucket each, none when it has no
    such id); a row of its bucket and id count comes back."""
    rc = np.array(sorted(rc_clients), np.int64)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for bucket in batch.column(0).to_pylist():
                yield _one_bucket(ids_dir, out_dir, bucket, rc, counts_dir, tx_dir, loud)

    return run


def _one_bucket(ids_dir: str, out_dir: str, bucket: int, rc: np.ndarray, counts_dir: str, tx_dir: str,
                loud: Loud | None) -> pa.RecordBatch:
    directory = os.path.join(ids_dir, str(bucket))
    names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    files = [os.path.join(directory, name) for name in names]
    out = _aggregate(_Rows.read(files), rc) if files else MIDS_SCHEMA.empty_table()
    if out.num_rows:
        stem = bucket_stem(bucket)
        _write(out, out_dir, stem)
        pq.write_table(flag_counts(out), os.path.join(counts_dir, f"{stem}.parquet"), compression="lz4")
        again = [(tx_dir, _valid(out["tx_h"]))]
        if loud is not None:
            again.append((loud.out_dir, loud.mask(out)))
        for target, rows in again:
            if rows.any():
                pq.write_table(out.filter(pa.array(rows)), os.path.join(target, f"{stem}.parquet"),
                               compression="lz4", use_dictionary=False, write_statistics=False)
    inv_t = out["inv_t"].to_numpy(zero_copy_only=False)  # nulls read as NaN
    finite = inv_t[np.isfinite(inv_t)]
    return pa.RecordBatch.from_pydict({
        "bucket": [bucket], "ids": [out.num_rows], "tx_ids": [len(out) - out["tx_h"].null_count],
        "inv_lo": [float(finite.min()) if finite.size else None],
        "inv_hi": [float(finite.max()) if finite.size else None]}, schema=_RESULT)


def flag_counts(table: pa.Table) -> pa.Table:
    """How many rows of a per-id ``table`` have each (``f``, ``tx_h``) pair
    (:data:`COUNTS_SCHEMA`; a null ``tx_h`` is a pair of its own)."""
    in_tx = _valid(table["tx_h"])
    plain = np.bincount(table["f"].to_numpy(zero_copy_only=False)[~in_tx])  # most ids: no hashing
    f = np.flatnonzero(plain)
    parts = [pa.table([pa.array(f.astype(np.int32)), pa.nulls(len(f), _L), pa.array(plain[f])],
                      schema=COUNTS_SCHEMA)]
    if in_tx.any():
        counted = table.select(["f", "tx_h"]).filter(pa.array(in_tx)).group_by(
            ["f", "tx_h"], use_threads=False).aggregate([([], "count_all")])
        parts.append(pa.table([counted["f"], counted["tx_h"], counted["count_all"]], schema=COUNTS_SCHEMA))
    return pa.concat_tables(parts)


def bucket_stem(bucket: int) -> str:
    """The name (without ``.parquet``) of a bucket's file in each directory of the per-id table."""
    return f"b{bucket:05d}"


def _write(table: pa.Table, out_dir: str, stem: str) -> None:
    """One Parquet file per (ack topic, ack partition) in Hive's layout."""
    topic = pc.fill_null(table["ack_topic"], 0).to_numpy()
    part = pc.fill_null(table["ack_part"], 0).to_numpy()
    t_null = pc.is_null(table["ack_topic"]).to_numpy(zero_copy_only=False)
    p_null = pc.is_null(table["ack_part"]).to_numpy(zero_copy_only=False)
    order = np.lexsort((part, p_null, topic, t_null))
    keys = np.stack([t_null[order], topic[order], p_null[order], part[order]])
    change = np.flatnonzero(np.any(keys[:, 1:] != keys[:, :-1], axis=0)) + 1
    body = table.drop_columns(["ack_topic", "ack_part"]).take(pa.array(order))
    for lo, hi in zip([0, *change], [*change, len(order)], strict=False):
        tn, tv, pn, pv = keys[:, lo]
        path = dirs_under(out_dir, f"ack_topic={HIVE_NULL if tn else int(tv)}",
                          f"ack_part={HIVE_NULL if pn else int(pv)}")
        pq.write_table(body.slice(lo, hi - lo), os.path.join(path, f"{stem}.parquet"),
                       compression="lz4", use_dictionary=False, write_statistics=_STATS)


class _Rows:
    """A bucket's rows (:data:`harness.check.ingest.IDS_SCHEMA`) as NumPy columns, nulls
    filled (:data:`_FILLS`), with a validity mask for those read as null or not
    (:data:`_MASKED`); the ids and ``src`` stay Arrow chunks. Read a file at a time into
    arrays of the bucket's size: the Arrow copy of a file is transient, and the columns
    are not copied again to be NumPy (the bucket as one Arrow table, its columns then
    made NumPy, peaked at 600 MB of Arrow's pool per task at 10M records, above what the
    ingest's tasks hold: new memory for each worker; bench/LOG.md)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.values = {c: np.empty(n, dtype) for c, (dtype, _) in _FILLS.items()}
        self.valid = {c: np.empty(n, bool) for c in _MASKED}
        self.mid: list[pa.Array] = []
        self.src: list[pa.Array] = []
        self._at = 0

    @classmethod
    def read(cls, files: list[str]) -> _Rows:
        sizes = []
        for path in files:
            with pq.ParquetFile(path) as f:
                sizes.append(f.metadata.num_rows)
        rows = cls(sum(sizes))
        for path in files:
            rows.add(pq.read_table(path, schema=IDS_SCHEMA, use_threads=False))
        return rows

    @classmethod
    def of(cls, table: pa.Table) -> _Rows:
        rows = cls(table.num_rows)
        rows.add(table)
        return rows

    def add(self, table: pa.Table) -> None:
        lo, hi = self._at, self._at + table.num_rows
        if hi > self.n:
            raise ValueError(f"{hi} rows for a bucket of {self.n}")
        for name, (_, fill) in _FILLS.items():
            column = table[name]
            self.values[name][lo:hi] = _np(column, fill)
            if name in self.valid:
                self.valid[name][lo:hi] = True if column.null_count == 0 else _valid(column)
        self.mid.extend(table["mid"].chunks)
        self.src.extend(table["src"].chunks)
        self._at = hi

    def taken(self, name: str, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Column ``name`` at rows ``at`` (-1: none): values (the fill where null) and validity."""
        given = at >= 0
        where = np.where(given, at, 0)
        valid = given & self.valid[name][where]
        return np.where(valid, self.values[name][where], _FILLS[name][1]), valid


#: the bucket's columns read as NumPy (:class:`_Rows`): their type and the value of a null
_FILLS: dict[str, tuple[Any, Any]] = {
    "code": (np.int32, -1), "flags": (np.int32, 0), "seq": (np.int64, np.iinfo(np.int64).max),
    **{c: (np.int64, 0) for c in ("client_h", "topic_h", "part", "pl", "pe", "pb", "tx_h")},
    "t": (np.float64, 0.0), "due": (np.float64, 0.0)}
_MASKED = ("client_h", "topic_h", "part", "pl", "pe", "pb", "tx_h", "t", "due")


def aggregate(table: pa.Table, rc_clients: np.ndarray) -> pa.Table:
    """One row per id (:data:`MIDS_SCHEMA`) of ``table``'s events (:data:`harness.check.ingest.IDS_SCHEMA`;
    an id and a code at most ``POLL``), in the id's event order (``seq``):

    - ``f``: per-id flags: invoked, acked, failed, info, read in the run phase or in
      recovery, in an aborted transaction, read by a read_committed or a
      read_uncommitted client, read_committed in recovery; and ``F_DUP``, the id at more
      than one (topic, partition, position) among its polls and first ack;
    - the first invoke's ``seq``, client, time, due time, transaction and ``src``;
    - the first ack's client, topic (else the first invoke's), partition and position;
    - the first time of an ack, of a run-phase poll and of a read_committed poll.
    """
    return _aggregate(_Rows.of(table), rc_clients)


def _aggregate(rows_in: _Rows, rc_clients: np.ndarray) -> pa.Table:
    if not rows_in.n:
        return MIDS_SCHEMA.empty_table()
    values, valid = rows_in.values, rows_in.valid
    enc = pc.dictionary_encode(pa.concat_arrays(rows_in.mid))
    g = enc.indices.to_numpy().astype(np.intp)
    n_ids = len(enc.dictionary)
    # No sort: a group's first event of a kind is the one with its least seq (unique:
    # the event's place in the history files), found with unbuffered ufunc reductions.
    seq = values["seq"]

    code, flags = values["code"], values["flags"]
    rc = np.isin(values["client_h"], rc_clients) & valid["client_h"]
    poll, rec = code == POLL, (flags & ROW_REC) != 0
    invoke, ok = code == INVOKE, code == OK
    row_f = (np.where(invoke, F_INV, 0) | np.where(ok, F_OK, 0) | np.where(code == FAIL, F_FAIL, 0)
             | np.where(code == INFO, F_INFO, 0) | np.where(poll & ~rec, F_RUN, 0)
             | np.where(poll & rec, F_REC, 0)
             | np.where((ok | (code == FAIL)) & ((flags & ROW_ABORTED) != 0), F_ABORTED, 0)
             | np.where(poll & rc, F_RC_READ, 0) | np.where(poll & ~rc, F_RU_READ, 0)
             | np.where(poll & rec & rc, F_REC_RC, 0))
    f = np.zeros(n_ids, np.int64)
    np.bitwise_or.at(f, g, row_f)
    del row_f

    seq_ok = seq != _NO_SEQ
    first_inv = _first(invoke & seq_ok, g, seq, n_ids)
    first_ok = _first(ok & seq_ok, g, seq, n_ids)
    inv_topic, inv_topic_ok = rows_in.taken("topic_h", first_inv)
    ack_topic, ack_topic_ok = rows_in.taken("topic_h", first_ok)
    ack_topic = np.where(ack_topic_ok, ack_topic, inv_topic)  # else the invoke's topic
    ack_topic_ok |= inv_topic_ok
    ack_pos = [rows_in.taken(c, first_ok) for c in ("part", "pl", "pe", "pb")]

    # F_DUP: bindings (topic, partition, position) of the polls that differ from one of
    # them, or the first ack's binding differing from it.
    bound = poll & valid["pl"] & valid["topic_h"]
    cols = [values[c] for c in ("topic_h", "part", "pl", "pe", "pb")]
    first_bound = _any(bound, g, n_ids)
    rows = np.flatnonzero(bound)
    rep = first_bound[g[rows]]
    differs = np.zeros(len(rows), bool)
    for col in cols:
        differs |= col[rows] != col[rep]
    dup = np.zeros(n_ids, bool)
    dup[g[rows][differs]] = True
    ack_cols = [ack_topic, *[v for v, _ in ack_pos]]
    ack_bound = ack_pos[1][1] & ack_topic_ok
    has_bound = first_bound >= 0
    rep_all = np.where(has_bound, first_bound, 0)
    ack_differs = np.zeros(n_ids, bool)
    for a, col in zip(ack_cols, cols, strict=True):
        ack_differs |= a != col[rep_all]
    # a null partition hashes apart from any value (the polls' are never null)
    ack_differs |= ~ack_pos[0][1]
    dup |= has_bound & ack_bound & ack_differs
    f |= np.where(dup, F_DUP, 0)

    def column(name: str, at: np.ndarray) -> pa.Array:
        vals, ok_ = rows_in.taken(name, at)
        return pa.array(vals, _TYPES[name], mask=~ok_)

    def least(mask: np.ndarray) -> pa.Array:
        return _min(values["t"], mask & valid["t"], g, n_ids)

    src = pa.chunked_array(rows_in.src, _S).take(_indices(first_inv))
    out = {
        "mid": enc.dictionary,
        "f": pa.array(f.astype(np.int32)),
        "inv_seq": pa.array(seq[np.maximum(first_inv, 0)], _L, mask=first_inv < 0),  # a first's seq is set
        "inv_client": column("client_h", first_inv),
        "ack_client": column("client_h", first_ok),
        "ack_topic": pa.array(ack_topic, _L, mask=~ack_topic_ok),
        **{f"ack_{c}": pa.array(v, _L, mask=~ok_) for c, (v, ok_) in zip(("part", "pl", "pe", "pb"), ack_pos,
                                                                          strict=True)},
        "inv_t": least(invoke),
        "due_t": column("due", first_inv),
        "ack_t": least(ok),
        "poll_t": least(poll & ~rec),
        "tx_h": column("tx_h", first_inv),
        "rc_t": least(poll & rc),
        "src": src,
    }
    return pa.table({k: _combined(v) for k, v in out.items()}, schema=MIDS_SCHEMA)


_TYPES = {f.name: f.type for f in IDS_SCHEMA}


def _np(arr: pa.Array | pa.ChunkedArray, fill: Any) -> np.ndarray:
    return pc.fill_null(arr, fill).to_numpy(zero_copy_only=False)


def _valid(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return pc.is_valid(arr).to_numpy(zero_copy_only=False)


def _combined(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def _first(mask: np.ndarray, g: np.ndarray, seq: np.ndarray, n_ids: int) -> np.ndarray:
    """Per id, the row of its event with the least ``seq`` (unique) where ``mask``; -1 if none."""
    rows = np.flatnonzero(mask)
    least = np.full(n_ids, _NO_SEQ, np.int64)
    np.minimum.at(least, g[rows], seq[rows])
    rows = rows[seq[rows] == least[g[rows]]]
    out = np.full(n_ids, -1, np.int64)
    out[g[rows]] = rows
    return out


def _any(mask: np.ndarray, g: np.ndarray, n_ids: int) -> np.ndarray:
    """Per id, one of its rows where ``mask``; -1 if none."""
    rows = np.flatnonzero(mask)
    out = np.full(n_ids, -1, np.int64)
    out[g[rows]] = rows
    return out


def _indices(rows: np.ndarray) -> pa.Array:
    return pa.array(rows, _L, mask=rows < 0)


def _min(values: np.ndarray, mask: np.ndarray, g: np.ndarray, n_ids: int) -> pa.Array:
    """Per id, the least of ``values`` where ``mask`` (the caller leaves nulls out; NaN only
    if all are NaN, as Spark's ``min`` orders NaN last); null if none."""
    rows = np.flatnonzero(mask)
    out = np.full(n_ids, np.nan)
    np.fmin.at(out, g[rows], values[rows])
    has = np.zeros(n_ids, bool)
    has[g[rows]] = True
    return pa.array(out, _D, mask=~has)
