"""A block of history or replica lines to an Arrow table of the contract's fields, for the
ingest (:mod:`harness.check.ingest`, in the Python workers).

PyArrow's JSON reader parses the block, with the types it infers when they cast to the
contract's (:func:`read_inferred`), else with an explicit schema, which takes only
well-typed lines: any line it refuses (not JSON, a number in a string field, a float
offset, a list of strings where the contract allows anything...) sends the block's halves
back to it, down to small groups that go through :mod:`harness.check.lines`, the
contract's plain-Python reading (what the reference checker uses). So the slow path runs
only near odd lines, and both paths read a line the same way.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.json as pj

from harness.check.lines import (
    ANY_LISTS,
    BREAK,
    DOUBLES,
    LONG_LISTS,
    LONGS,
    RUN_LONGS,
    RUN_STRINGS,
    STRING_LISTS,
    STRINGS,
    blank,
    read_line,
    split_lines,
)

__all__ = ["HISTORY_LINE", "REPLICA_LINE", "parse", "read_explicit", "read_inferred"]

_L, _S = pa.int64(), pa.string()
_SLOW_LINES = 32  # a refused group this small is read line by line
_FIELD_TYPES = {**{n: _L for n in LONGS}, **{n: _S for n in STRINGS}, **{n: pa.float64() for n in DOUBLES},
                **{n: _L for n in RUN_LONGS}, **{n: _S for n in RUN_STRINGS},
                **{n: pa.list_(_L) for n in LONG_LISTS}, **{n: pa.list_(_S) for n in STRING_LISTS},
                # values never read, only counted: numbers here, anything on the slow path
                **{n: pa.list_(pa.float64()) for n in ANY_LISTS}}
HISTORY_LINE = pa.schema([(n, t) for n, t in _FIELD_TYPES.items() if n != "node"])
REPLICA_LINE = pa.schema([(n, _FIELD_TYPES[n]) for n in ("type", "node", "mid", "topic", *LONGS)])


def parse(block: bytes, base: int, replicas: bool) -> tuple[pa.Table, Counter[str]]:
    """The block's lines that are read, as a table of the line schema plus ``_at`` (the
    line's byte offset), and the other lines (not blank) by why they were not read
    (:func:`harness.check.lines.read_line`)."""
    schema = REPLICA_LINE if replicas else HISTORY_LINE
    parts = list(_parse_fast(block, base, schema, replicas))
    refused: Counter[str] = Counter()
    for _, why in parts:
        refused.update(why)
    return (pa.concat_tables([t for t, _ in parts]) if parts else _empty(schema)), refused


def _empty(schema: pa.Schema) -> pa.Table:
    return schema.append(pa.field("_at", _L)).empty_table()


def _parse_fast(block: bytes, base: int, schema: pa.Schema,
                replicas: bool) -> Iterator[tuple[pa.Table, Counter[str]]]:
    if b"\r" not in block:  # lines end at \n only: the table's rows are the non-blank lines
        table = read_inferred(block, schema)
        if table is None:
            table = read_explicit(block, schema)
        starts = None if table is None else _line_starts(block, table.num_rows)
        if table is not None and starts is not None:
            yield table.select(schema.names).append_column("_at", pa.array(starts + base, _L)), Counter()
            return
    # Refused: halves (by lines), down to small groups read line by line.
    breaks = [0, *[m.end() for m in BREAK.finditer(block)]]
    if breaks[-1] != len(block):
        breaks.append(len(block))
    n = len(breaks) - 1
    if n <= _SLOW_LINES:
        yield _parse_slow(block, base, schema, replicas)
        return
    mid = breaks[n // 2]
    yield from _parse_fast(block[:mid], base, schema, replicas)
    yield from _parse_fast(block[mid:], base + mid, schema, replicas)


def _read_json(block: bytes, options: pj.ParseOptions) -> pa.Table | None:
    """The block's lines as a table, None if PyArrow's reader refuses one."""
    try:
        return pj.read_json(io.BytesIO(block), parse_options=options, read_options=pj.ReadOptions(
            use_threads=False, block_size=max(1 << 20, len(block) + 1)))
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None


def read_explicit(block: bytes, schema: pa.Schema) -> pa.Table | None:
    """The block read with ``schema`` (fields not in it ignored), None if a line does
    not fit it."""
    return _read_json(block, pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"))


def read_inferred(block: bytes, schema: pa.Schema) -> pa.Table | None:
    """The block read with the types PyArrow infers, as a table of ``schema``; None if
    the reader refuses a line, infers for a field of ``schema`` a type that does not
    cast to that field's without a change of value (a float or a string where the contract
    wants an integer...), or the table it reads is not valid (PyArrow 26's inference drops
    the nulls that begin a list whose later value gives its type, and its list columns then
    span more values than they hold): then the explicit schema reads the block, which
    refuses exactly the lines the contract's fast path does. Faster when it works: the
    explicit schema's reader fills every absent field of every line (33 fields, most
    absent from a given line), 42 to 46 ms per 4-MiB block of a 10M-record history where
    inference takes 36 to 40 (bench/LOG.md)."""
    table = _read_json(block, pj.ParseOptions())
    if table is None:
        return None
    columns = []
    for field in schema:
        if field.name not in table.column_names:
            columns.append(pa.nulls(table.num_rows, field.type))
            continue
        column = table.column(field.name)
        if column.type != field.type:
            if not _widens(column.type, field.type):
                return None
            column = column.cast(field.type)
        columns.append(column)
    try:  # validated: PyArrow 26 drops a list's leading nulls when a later value gives its type
        return pa.table(columns, schema=schema)
    except pa.ArrowInvalid:
        return None


def _widens(inferred: pa.DataType, wanted: pa.DataType) -> bool:
    """A column of type ``inferred`` casts to ``wanted`` and holds what the explicit
    schema would read: nulls (all null, or lists of nulls), integers where it wants
    doubles (the JSON reader's doubles are correctly rounded, as is the cast; only ``-0``
    reads as 0.0 where the explicit schema reads -0.0, which compares equal), lists of
    such."""
    if inferred == wanted or pa.types.is_null(inferred):
        return True
    if pa.types.is_list(inferred) and pa.types.is_list(wanted):
        return _widens(inferred.value_type, wanted.value_type)
    return inferred == pa.int64() and wanted == pa.float64()


def _line_starts(block: bytes, rows: int) -> np.ndarray | None:
    """Byte offsets of the block's non-blank lines (\\n-ended) if there are ``rows`` of
    them, else None (a line held more than one JSON value)."""
    buf = np.frombuffer(block, dtype=np.uint8)
    ends = np.flatnonzero(buf == 10)
    starts = np.concatenate(([0], ends + 1))
    if starts[-1] == len(buf):
        starts = starts[:-1]
    if len(starts) != rows:  # blank lines (only JSON whitespace: space, tab) give no row
        stops = np.append(ends, len(buf))[: len(starts)]
        solid = ~((buf == 32) | (buf == 9) | (buf == 10))
        count = np.concatenate(([0], np.cumsum(solid, dtype=np.int64)))
        starts = starts[(count[stops] - count[starts]) > 0]
    return starts.astype(np.int64) if len(starts) == rows else None


def _parse_slow(block: bytes, base: int, schema: pa.Schema, replicas: bool) -> tuple[pa.Table, Counter[str]]:
    rows = []
    refused: Counter[str] = Counter()
    for at, line in split_lines(block, base):
        if blank(line):
            continue
        event, why = read_line(line, replicas)
        if event is None:
            refused[why or ""] += 1
            continue
        row = {name: event.get(name) for name in schema.names}
        for name in ANY_LISTS:  # counted, not read
            value = row.get(name)
            if value is not None:
                row[name] = [None] * len(value)
        row["_at"] = at
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=schema.append(pa.field("_at", _L))), refused
