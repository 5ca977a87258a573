"""Latency and availability of a run, from what the Spark job aggregates (no Spark here).

The job (:meth:`harness.check.plan._Job._latency`) gives, per message id, its
first invoke time, first ack time and first run-phase poll time (the events' ``t``,
the harness's one wall clock), and aggregates:

* **send latency**: ack time minus invoke time, per acknowledged id, in ms;
* **end-to-end latency**: first poll (run phase) minus invoke time, per id read, in ms;
* **publish delay**: invoke time minus the time the producer's schedule had the send
  due (``due``, harness.history), per send of a paced producer, in ms: a client that
  stalls sends late, and its send latency alone would hide the stall (coordinated
  omission; OpenMessaging Benchmark's publishDelay). Unpaced producers have none;

as percentiles (p50, p90, p99, p99.9: counted in buckets 1% wide, so each is within
0.5% of the true value; :class:`Histograms`) and the exact max, over the whole run,
per window of invoke time (:func:`window_for`: 10 s as OpenMessaging Benchmark's, shorter
for a short run so that a chart has points), per producer and partition, and per
phase: ``before`` the first fault, ``during`` (from the first fault until no fault
is in force: each ``kill9``, ``stop`` or ``powerloss`` of a node restored by its
``start``, a ``pause`` by its ``resume``, a ``partition`` by its ``heal``, all by a
``heal-all``; a fault never restored makes it last to the end), ``after``. An id
falls in the window and phase of its invoke; a send invoked before the first fault and
before its producer's first acknowledgement on its partition is in ``warm-up`` instead
of ``before`` (the client's start: its producer id and metadata, a topic seconds old),
so that ``before`` is the healthy cluster's latency.

**Availability** per fault (each timeline ``fault`` event that is not a restore) and
per partition: ``unavailable_s``, from the fault to the first acknowledgement on
that partition at or after it (10 ms resolution), and ``longest_gap_s``, the longest
time without an acknowledgement on that partition from the fault until the first
acknowledgement after the phase ``during`` ends (a gap still open then counts whole;
with none after it, up to the end of ``during`` if sends went on). Acknowledgements of
sends made before the fault can still arrive just after it, so ``unavailable_s`` can be
short while the partition is down for long: ``longest_gap_s`` is the outage, and
``max_unavailable_s``, per fault and for the run, is the largest of them. Both are null
when no send was invoked within :data:`IDLE_AFTER_S` of the fault (the producer was
idle: silence is not unavailability) or no acknowledgement came on that partition
after it.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.history import RESTORED_BY

__all__ = ["BIN_S", "BUCKET_BASE", "IDLE_AFTER_S", "METRICS", "PERCENTILES", "WINDOW_S", "Faults",
           "Histograms", "availability", "faults_of", "stats", "window_for"]

WINDOW_S = 10
#: the window lengths :func:`window_for` chooses from, in seconds
WINDOWS_S = (0.5, 1, 2, 5, WINDOW_S)
#: at most about this many windows before the next length is chosen
MAX_WINDOWS = 120
#: the metrics, in the job's order (its ``m`` column)
METRICS = ("send", "e2e", "delay")
BIN_S = 0.01  # acknowledgement times are kept at this resolution for availability
IDLE_AFTER_S = 1.0
PERCENTILES = (0.5, 0.9, 0.99, 0.999)
PERCENTILE_NAMES = ("p50", "p90", "p99", "p999")
RESTORES = frozenset({*RESTORED_BY.values(), "heal-all"})


@dataclass(frozen=True)
class Fault:
    t: float
    action: str
    node: str | None


@dataclass(frozen=True)
class Faults:
    """The run's faults (not restores), and the phase ``during``: ``[start, end)`` (end
    None: to the end of the run; start None: no fault, everything is ``before``)."""

    faults: tuple[Fault, ...]
    start: float | None
    end: float | None


def faults_of(run_dir: Path) -> Faults:
    """The faults of ``run_dir/timeline.jsonl`` (none if it is missing or unreadable)."""
    from harness.history import read_events

    path = run_dir / "timeline.jsonl"
    events: list[tuple[float, str, str | None]] = []
    try:
        for e in read_events(path):
            t, action = e.get("t"), e.get("action")
            if e.get("type") == "fault" and _finite(t) and isinstance(action, str):
                node = e.get("node")
                events.append((float(t), action, node if isinstance(node, str) else None))  # type: ignore[arg-type]
    except OSError:
        pass
    events.sort(key=lambda x: x[0])
    faults = tuple(Fault(t, a, n) for t, a, n in events if a not in RESTORES)
    if not faults:
        return Faults((), None, None)
    # the faults still in force, as (restoring action, node); `during` ends when none is
    # (a heal-all restores all; one with nothing in force, as at recovery, changes nothing)
    open_: set[tuple[str, str | None]] = set()
    end: float | None = None
    for t, action, node in events:
        if action in RESTORED_BY:
            open_.add((RESTORED_BY[action], node))
        elif action in RESTORES:
            if open_:
                if action == "heal-all":
                    open_.clear()
                else:
                    open_ -= {(a, n) for a, n in open_ if a == action and (n == node or node is None)}
                if not open_:
                    end = t
        elif not open_:  # an instantaneous fault
            end = t
    return Faults(faults, faults[0].t, None if open_ else end)


def window_for(span_s: float) -> float:
    """The window length for sends spread over ``span_s`` seconds: the shortest of
    :data:`WINDOWS_S` that gives at most :data:`MAX_WINDOWS` windows, and
    :data:`WINDOW_S` from a run of 20 minutes on."""
    for w in WINDOWS_S:
        if span_s / w <= MAX_WINDOWS:
            return w
    return WINDOW_S


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


BUCKET_BASE = 1.01  # latency buckets: [1.01^b, 1.01^(b+1)) ms, so a percentile is within 0.5%
ZERO_MS = 1e-3  # at or below 1 µs: the zero bucket (stamps shared by an invoke and its ack)
ZERO_BUCKET = -(1 << 40)


class Histograms:
    """The bucket counts of one group (run, phase, window, producer partition) for the
    metrics (:data:`METRICS`: 0 send, 1 end-to-end, 2 publish delay), as the job sums them;
    :meth:`stats` reads them."""

    def __init__(self) -> None:
        self.counts: tuple[dict[int, int], ...] = tuple({} for _ in METRICS)
        self.top: list[float | None] = [None for _ in METRICS]

    def add(self, metric: int, bucket: int, n: int, top: float | None) -> None:
        counts = self.counts[metric]
        counts[bucket] = counts.get(bucket, 0) + int(n)
        if top is not None and (self.top[metric] is None or top > self.top[metric]):  # type: ignore[operator]
            self.top[metric] = float(top)

    def stats(self) -> dict[str, Any]:
        return {name: self._one(i) for i, name in enumerate(METRICS)}

    def _one(self, metric: int) -> dict[str, Any]:
        counts, top = self.counts[metric], self.top[metric]
        total = sum(counts.values())
        values: list[float | None] = []
        order = sorted(counts.items())
        for p in PERCENTILES:
            rank = max(1, math.ceil(p * total))
            seen, value = 0, None
            for bucket, n in order:
                seen += n
                if seen >= rank:
                    value = 0.0 if bucket == ZERO_BUCKET else BUCKET_BASE ** (bucket + 0.5)
                    break
            values.append(None if value is None else min(value, top) if top is not None else value)
        return stats(total, values if total else None, top)


def stats(n: int, percentiles: Sequence[float | None] | None, top: float | None) -> dict[str, Any]:
    """One latency summary: count, percentiles and max, in ms (rounded to 0.01 ms)."""
    out: dict[str, Any] = {"n": int(n)}
    values = list(percentiles or [None] * len(PERCENTILES))
    for name, v in zip(PERCENTILE_NAMES, values, strict=True):
        out[name] = None if v is None or not math.isfinite(v) else round(float(v), 2)
    out["max"] = None if top is None or not math.isfinite(top) else round(float(top), 2)
    return out


def availability(faults: Faults, ack_bins: Mapping[tuple[str, int], Sequence[int]],
                 invoke_bins: Iterable[int], run_end: float | None) -> list[dict[str, Any]]:
    """Per fault, per partition: ``unavailable_s`` and ``longest_gap_s`` (see the module
    docstring). ``ack_bins``: per (topic, partition), the sorted distinct acknowledgement
    times in units of :data:`BIN_S`; ``invoke_bins``: the sorted distinct invoke times, same
    unit."""
    invokes = sorted(invoke_bins)
    out = []
    for fault in faults.faults:
        f_bin = math.floor(fault.t / BIN_S)
        i = bisect.bisect_left(invokes, f_bin)
        sending = i < len(invokes) and invokes[i] * BIN_S < fault.t + IDLE_AFTER_S
        until = faults.end if faults.end is not None else run_end
        rows: list[dict[str, Any]] = []
        for (topic, part), bins in sorted(ack_bins.items()):
            j = bisect.bisect_left(bins, f_bin)
            unavailable = gap = None
            if sending and j < len(bins):
                unavailable = round(max(0.0, bins[j] * BIN_S - fault.t), 2)
                stop = len(bins) if until is None else bisect.bisect_right(bins, math.floor(until / BIN_S))
                # the first ack after the faults end closes a gap still open then
                stop = min(len(bins), stop + 1)
                # from the fault to the first ack, then between acks
                gaps = [0.0, bins[j] * BIN_S - fault.t]
                gaps += [(b - a) * BIN_S for a, b in zip(bins[j:stop - 1], bins[j + 1:stop], strict=True)]
                last = bins[stop - 1]
                if stop == len(bins) and until is not None and last * BIN_S < until:
                    # no ack after the faults end: a gap to their end if sends went on meanwhile
                    k = bisect.bisect_right(invokes, last)
                    if k < len(invokes) and invokes[k] * BIN_S <= until:
                        gaps.append(until - last * BIN_S)
                gap = round(max(gaps), 2)
            rows.append({"topic": topic, "partition": part, "unavailable_s": unavailable,
                         "longest_gap_s": gap})
        measured = [r["longest_gap_s"] for r in rows if r["longest_gap_s"] is not None]
        out.append({"t": fault.t, "action": fault.action, "node": fault.node, "sending": sending,
                    "max_unavailable_s": max(measured) if measured else None, "partitions": rows})
    return out


# -- the job's kernel: one task per directory of the per-id table ------------------------

#: the kernel's task rows: a directory of the per-id table (its ack topic and partition)
TASK_SCHEMA = "topic_h long, part long, path string"
#: what the kernel returns: ``s`` the set (:data:`INVOKE_BINS` ..), ``k`` its key (a phase
#: index, a window index or the producer's client hash; for the time bins the first of a
#: run of consecutive bins, ``n`` its length), the ack topic and partition (ack bins and
#: per producer and partition), the metric, the bucket, the count and the max
OUT_SCHEMA = "s int, k long, topic_h long, part long, m int, b long, n long, mx double"
INVOKE_BINS, ACK_BINS, BY_PHASE, BY_WINDOW, BY_PAIR = range(5)
PHASES = ("before", "during", "after", "warm-up")
#: the phase of a producer's sends invoked before its first acknowledgement on their
#: partition, before the first fault: the client's start (its producer id, its metadata,
#: a topic seconds old), not the cluster's latency; left out of ``before``
WARM_UP = PHASES.index("warm-up")


def kernel(t0: float, window_s: float, start: float | None, end: float | None) -> Any:
    """The ``mapInArrow`` function over task rows of :data:`TASK_SCHEMA`: per directory of
    the per-id table (one ack topic and partition, or the ids without an ack position),
    the distinct invoke and ack time bins (units of :data:`BIN_S`; only if the run has a
    fault: the availability is all they are for) and the latencies' bucket counts per
    phase, per window (of length ``window_s`` from ``t0``) and per producer on that
    partition. ``start`` and ``end``: the phase ``during`` (None: no fault; an open end: to
    the end of the run)."""

    def run(batches: Any) -> Any:
        for batch in batches:
            for task in batch.to_pylist():
                out = _kernel_rows(task["path"], task["topic_h"], task["part"], t0, window_s, start, end)
                if out is not None:
                    yield out

    return run


def _kernel_rows(path: str, topic_h: int | None, part: int | None, t0: float, window_s: float,
                 start: float | None, end: float | None) -> Any:
    import numpy as np
    import pyarrow as pa
    import pyarrow.dataset as ds

    table = ds.dataset(path, format="parquet").to_table(
        columns=["inv_t", "ack_t", "poll_t", "due_t", "inv_client"])

    def floats(name: str) -> Any:
        return table[name].to_numpy(zero_copy_only=False).astype(np.float64, copy=False)

    inv = floats("inv_t")
    timed = np.isfinite(inv)  # nulls arrive as NaN
    inv = inv[timed]
    if not len(inv):
        return None
    ack, poll, due = (floats(c)[timed] for c in ("ack_t", "poll_t", "due_t"))
    client_col = table["inv_client"]
    client_known = ~np.asarray(client_col.is_null().to_numpy(zero_copy_only=False), bool)[timed]
    clients = client_col.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)[timed]
    by_pair = topic_h is not None and part is not None  # the ids of an acknowledged partition
    schema = pa.schema([("s", pa.int32()), ("k", pa.int64()), ("topic_h", pa.int64()), ("part", pa.int64()),
                        ("m", pa.int32()), ("b", pa.int64()), ("n", pa.int64()), ("mx", pa.float64())])
    tables = []

    def emit(s: int, k: Any, n: Any = None, m: int | None = None, b: Any = None, mx: Any = None,
             pair: bool = False) -> None:
        size = len(k)
        given = {"s": np.full(size, s), "k": k, "topic_h": np.full(size, topic_h) if pair else None,
                 "part": np.full(size, part) if pair else None,
                 "m": None if m is None else np.full(size, m), "b": b, "n": n, "mx": mx}
        tables.append(pa.table({name: pa.nulls(size, schema.field(name).type) if given[name] is None
                                else pa.array(given[name], schema.field(name).type) for name in schema.names},
                               schema=schema))

    if start is not None:  # a fault: its availability
        emit(INVOKE_BINS, *_runs(np.floor(inv / BIN_S)))
        acked = np.isfinite(ack)
        if by_pair and acked.any():
            emit(ACK_BINS, *_runs(np.floor(ack[acked] / BIN_S)), pair=True)
    phase = np.zeros(len(inv), np.int64)
    if start is not None:
        phase[inv >= start] = 1
        if end is not None:
            phase[inv >= end] = 2
    phase[(phase == 0) & _warming_up(inv, ack, clients, client_known)] = WARM_UP
    window = np.floor((inv - t0) / window_s).astype(np.int64)
    with np.errstate(invalid="ignore"):
        metrics = ((ack - inv) * 1000.0, (poll - inv) * 1000.0, np.maximum(0.0, (inv - due) * 1000.0))
    log_base = math.log(BUCKET_BASE)
    for m, values in enumerate(metrics):
        have = np.isfinite(values)
        v = values[have]
        if not len(v):
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            bucket = np.where(v <= ZERO_MS, ZERO_BUCKET, np.floor(np.log(np.maximum(v, ZERO_MS)) / log_base))
        bucket = bucket.astype(np.int64)
        sets = [(BY_PHASE, phase[have], bucket, v), (BY_WINDOW, window[have], bucket, v)]
        known = client_known[have]
        if by_pair and known.any():
            sets.append((BY_PAIR, clients[have][known], bucket[known], v[known]))
        for s, k, bk, vk in sets:
            keys, buckets, n, mx = _group(k, bk, vk)
            emit(s, keys, n, m, buckets, mx, pair=s == BY_PAIR)
    batches = pa.concat_tables(tables).combine_chunks().to_batches() if tables else []
    return batches[0] if batches else None


def _warming_up(inv: Any, ack: Any, clients: Any, known: Any) -> Any:
    """Which sends (of one partition's ids) were invoked before their producer's first
    acknowledgement on that partition; none of a producer with no acknowledgement there."""
    import numpy as np

    acked = np.isfinite(ack) & known
    if not acked.any():
        return np.zeros(len(inv), bool)
    order = np.lexsort((ack[acked], clients[acked]))
    by_client, first_ack = clients[acked][order], ack[acked][order]
    head = np.ones(len(by_client), bool)
    head[1:] = by_client[1:] != by_client[:-1]
    producers, first_ack = by_client[head], first_ack[head]
    at = np.minimum(np.searchsorted(producers, clients), len(producers) - 1)
    has_ack = known & (producers[at] == clients)
    return has_ack & (inv < np.where(has_ack, first_ack[at], -np.inf))


def _runs(bins: Any) -> tuple[Any, Any]:
    """The distinct time bins as runs of consecutive ones: (first bins, lengths): fewer
    rows to the driver where sends are dense (a bin is 10 ms). On a 10M-record history
    over 10,000 s the 1.84M rows of bins and counts became 0.51M."""
    import numpy as np

    distinct = _sorted_distinct(bins.astype(np.int64))
    if not len(distinct):
        return distinct, distinct
    starts = np.flatnonzero(np.diff(distinct, prepend=distinct[0] - 2) != 1)
    return distinct[starts], np.diff(np.append(starts, len(distinct)))


def _bins(first: Any, length: Any) -> list[int]:
    """The sorted distinct bins of runs (:func:`_runs`; runs of several tasks may overlap)."""
    import numpy as np

    if not len(first):
        return []
    before = np.repeat(np.cumsum(length) - length, length)
    return _sorted_distinct(np.repeat(first, length) + (np.arange(int(length.sum())) - before)).tolist()


def _sorted_distinct(values: Any) -> Any:
    """The distinct int64 values, sorted: Arrow's hash set, then a sort of what is left
    (NumPy's ``unique`` took 9 times as long on a million time bins)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    return np.sort(pc.unique(pa.array(values, pa.int64())).to_numpy())


def _group(keys: Any, buckets: Any, values: Any) -> tuple[Any, Any, Any, Any]:
    """Count and max of ``values`` per distinct (key, bucket), in no particular order:
    Arrow's hash aggregate (no sort; the values are finite)."""
    import pyarrow as pa

    table = pa.table({"k": pa.array(keys, pa.int64()), "b": pa.array(buckets, pa.int64()),
                      "v": pa.array(values, pa.float64())})
    out = table.group_by(["k", "b"], use_threads=False).aggregate([("v", "count"), ("v", "max")])
    return (out["k"].to_numpy(), out["b"].to_numpy(), out["v_count"].to_numpy(),
            out["v_max"].to_numpy())


def gather(out: Any, topics: Mapping[int, str]) -> tuple[list[int], dict[tuple[str, int], list[int]],
                                                      dict[str, dict[Any, Histograms]]]:
    """The kernel's rows (a PyArrow table of :data:`OUT_SCHEMA`, one task's rows after
    another's) summed: the sorted distinct invoke bins, the sorted distinct ack bins per
    (topic name, partition), and the histograms per group: ``run`` (key None), ``phase``
    (its name), ``window`` (its index), ``pair`` ((client, topic, partition) hashes)."""
    import numpy as np
    import pyarrow.compute as pc

    s = out["s"].to_numpy()
    k, n = out["k"].to_numpy(), out["n"].fill_null(0).to_numpy()
    invokes = _bins(k[s == INVOKE_BINS], n[s == INVOKE_BINS])
    acks: dict[tuple[str, int], list[int]] = {}
    ack_rows = np.flatnonzero(s == ACK_BINS)
    pairs: dict[tuple[int, int], list[int]] = {}
    for row, topic_h, part in zip(ack_rows.tolist(), out["topic_h"].take(ack_rows).to_pylist(),
                                  out["part"].take(ack_rows).to_pylist(), strict=True):
        pairs.setdefault((topic_h, part), []).append(row)
    for (topic_h, part), rows in pairs.items():
        acks[(topics.get(topic_h, str(topic_h)), part)] = _bins(k[rows], n[rows])
    groups: dict[str, dict[Any, Histograms]] = {"run": {}, "phase": {}, "window": {}, "pair": {}}
    hist = (out.filter(pc.greater_equal(out["s"], BY_PHASE))
            .group_by(["s", "k", "topic_h", "part", "m", "b"]).aggregate([("n", "sum"), ("mx", "max")]))
    columns = [hist[c].to_pylist() for c in ("s", "k", "topic_h", "part", "m", "b", "n_sum", "mx_max")]
    for si, k, topic_h, part, m, b, n, mx in zip(*columns, strict=True):
        if si == BY_PHASE:
            groups["phase"].setdefault(PHASES[k], Histograms()).add(m, b, n, mx)
            groups["run"].setdefault(None, Histograms()).add(m, b, n, mx)
        elif si == BY_WINDOW:
            groups["window"].setdefault(k, Histograms()).add(m, b, n, mx)
        else:
            groups["pair"].setdefault((k, topic_h, part), Histograms()).add(m, b, n, mx)
    return invokes, acks, groups
