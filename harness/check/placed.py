"""The position pass's rows: one (topic, partition)'s polls, replica records, acks and
resets, read in a Spark task (``mapInArrow``; one task per (topic, partition) that has a
poll, a replica record or an ack) and handed to the position kernel
(:func:`harness.check.anomalies.positions.anomalies`), which judges the position, sequence
and replica families in one NumPy pass. No Spark here, so it is tested on its own.

Its polls and replica records are the ingest's directory of that pair (like a table
partitioned on write: no shuffle gathers them), its acks the per-id table's directory of
that pair, its resets the ingest's directory of resets (a row for each phase they cover).
The rows are held once, as NumPy columns (:class:`_Collector`; the kernel's columns:
:mod:`harness.check.anomalies.arrays`). Out: one row per anomaly,
:data:`harness.check.anomalies.arrays.OUT_SCHEMA`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from harness.check.anomalies.arrays import (
    IN_COLUMNS,
    OUT_COLUMNS,
    TAG_ACK,
    TAG_POLL,
    TAG_REPLICA,
    TAG_RESET,
    TAG_RPOLL,
    Columns,
)
from harness.check.anomalies.positions import anomalies
from harness.check.anomalies.vocab import POLL, ROW_REC
from harness.check.engine.memory import give_back, short_of_memory


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
        joined, and given back to the system when memory is short:
        :func:`harness.check.engine.memory.short_of_memory`)."""
        short = short_of_memory(self.n, PEAK_BYTES_PER_ROW)
        if short:
            give_back()
        values, valid = {}, {}
        for name in IN_COLUMNS:
            valid[name] = joined(self._valid.pop(name), bool)
            values[name] = joined(self._values.pop(name), _NARROW.get(name, np.int64), valid[name])
            if short:
                give_back()
        return values, valid


def joined(pieces: list[np.ndarray], dtype: Any, valid: np.ndarray | None = None) -> np.ndarray:
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
