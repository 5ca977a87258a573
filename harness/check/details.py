"""Step 5 of the check: the rows behind its examples, read with PyArrow by the checking
process (no Spark job: a handful of rows from files whose names the earlier steps give).

The anomaly rows carry what most examples show. Some need more: an id's polls and its
acknowledgement (``duplicate``, ``unexpected``, ``aborted-read``, ``precommitted-read``), the
id of a send or poll known by its ``seq`` (the sequence anomalies), the polls, replica
records and acknowledgements at a position (``inconsistent-offsets``, ``replica-divergence``,
``truncation-skip``). They are read where the ingest and the per-id step put them, never
by a scan of a whole table:

* an id's polls: its id bucket's files (``ingest.bucket_of``);
* a ``seq``'s event: the bucket files of the split that read its line (a ``seq`` holds
  the history file and the line's byte offset; ``ingest.line_split`` finds the split);
* a position's polls and replica records: its (topic, partition)'s directory of the
  ingest; its acknowledgements and an id's: the per-id table's files of that pair's
  directory and of the id's bucket.

Row groups whose statistics rule a position out are skipped. The checking process reads
the scratch directory itself, as it lists it for the other steps: on a cluster the
scratch directory is a path it sees too (docs/checker.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from harness.check import ingest
from harness.check import mids as mids_kernel
from harness.check.anomalies.vocab import POLL, REPLICA, Ack, Place

__all__ = ["PLACE", "Ack", "Place", "read"]

PLACE = ("topic_h", "part", "pl", "pe", "pb")
#: the event columns the examples read (an id bucket has no names: they are null there)
COLUMNS = ("code", "client", "client_h", "mid", "topic", "topic_h", "part", "pl", "pe", "pb", "flags", "seq",
           "node", "t")
_HIVE = ds.HivePartitioning(pa.schema([("ack_topic", pa.int64()), ("ack_part", pa.int64())]),
                            null_fallback=mids_kernel.HIVE_NULL)


def read(scratch: Path, buckets: int, history: Sequence[str], ids: Sequence[str], places: Sequence[Place],
         seqs: Sequence[int]) -> tuple[list[dict[str, Any]], list[Ack]]:
    """The events (dicts of :data:`COLUMNS`) that are a poll of one of ``ids``, a send or
    poll of one of ``seqs``, or a poll or replica record at one of ``places``; and the
    acknowledgements of ``ids`` and at ``places``. ``scratch`` is the check's scratch
    directory, ``buckets`` the ingest's count of id buckets."""
    id_buckets = sorted({int(b) for b in ingest.bucket_of(pa.array(ids, pa.string()), buckets)})
    bucket_dir = scratch / "ids"
    files = sorted({*[str(f) for b in id_buckets for f in (bucket_dir / str(b)).glob("*.parquet")],
                    *(_send_files(bucket_dir, history, seqs) if seqs and bucket_dir.is_dir() else [])})
    events: list[dict[str, Any]] = []
    wanted = _any([*([(pc.field("mid").isin(ids)) & (pc.field("code") == POLL)] if ids else []),
                   *([pc.field("seq").isin(seqs)] if seqs else [])])
    if files:
        table = ds.dataset(files, schema=ingest.IDS_SCHEMA, format="parquet").to_table(
            columns=[c for c in COLUMNS if c in ingest.IDS_SCHEMA.names], filter=wanted)
        events += [{c: row.get(c) for c in COLUMNS} for row in table.to_pylist()]
    placed = scratch / "events" / ingest.PLACED
    dirs = sorted({placed / ingest.place_dir(t, p) for t, p, *_ in places})
    placed_files = [str(f) for d in dirs if d.is_dir() for f in sorted(d.glob("*.parquet"))]
    if placed_files:
        table = ds.dataset(placed_files, schema=ingest.EVENTS_SCHEMA, format="parquet").to_table(
            columns=list(COLUMNS),
            filter=pc.field("code").isin([POLL, REPLICA]) & _at(places, PLACE))
        events += table.to_pylist()
    table_dir = scratch / "mids"
    ack_files = sorted({*[str(f) for b in id_buckets
                          for f in table_dir.glob(f"*/*/{mids_kernel.bucket_stem(b)}.parquet")],
                        *[str(f) for t, p, *_ in places
                          for f in table_dir.glob(f"ack_topic={t}/ack_part={p}/*.parquet")]})
    acks: list[Ack] = []
    if ack_files:
        dataset = ds.dataset(ack_files, format="parquet", partitioning=_HIVE,
                             partition_base_dir=str(table_dir))
        found = _any([*([pc.field("mid").isin(ids)] if ids else []),
                      _at(places, tuple(f"ack_{c}" for c in ("topic", *PLACE[1:])))])
        acks = [Ack(**row) for row in dataset.to_table(columns=list(Ack._fields), filter=found).to_pylist()]
    return events, acks


def _any(conditions: Sequence[pc.Expression]) -> pc.Expression:
    out = pc.scalar(False)
    for cond in conditions:
        out = out | cond
    return out


def _at(places: Sequence[Place], cols: Sequence[str]) -> pc.Expression:
    """Rows at one of ``places``, its fields in columns ``cols`` (a null field matches nothing)."""
    matches = []
    for place in places:
        match = pc.scalar(True)
        for col, value in zip(cols, place, strict=True):
            match = match & (pc.field(col) == value)
        matches.append(match)
    return _any(matches)


def _send_files(bucket_dir: Path, history: Sequence[str], seqs: Sequence[int]) -> list[str]:
    """The id-bucket files that may hold the events of these ``seq``s: those their
    lines' splits wrote (a ``seq`` holds its file and the byte offset in it), in
    every bucket, not the whole directory (hundreds of thousands of files at 100M)."""
    mask = (1 << ingest.OFFSET_BITS) - 1
    names = {ingest.split_name(False, s >> ingest.OFFSET_BITS, ingest.line_split(
        history[s >> ingest.OFFSET_BITS], s & mask)) for s in seqs}
    return sorted(str(f) for name in names for f in bucket_dir.glob(f"*/{name}"))
