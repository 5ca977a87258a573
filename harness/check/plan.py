"""The steps of a check: what :func:`harness.check.check_run` runs, composing the anomaly
families (:mod:`harness.check.anomalies`) on the engine (:mod:`harness.check.engine`).

Each step is one Spark action, its intermediate data Parquet in a scratch directory:

1. ingest (:mod:`harness.check.ingest`, in the Python workers, one task per file split):
   parse ``history/*.jsonl`` and ``replicas/*.jsonl`` once into compact columns (a type
   code, hashes of client and topic, a validated position, row flags, ``seq``: the event's
   place in file order...). Polls and replica records are written in one directory per
   (topic, partition), resets in one of their own, and the events of step 3 again by id
   bucket. The tasks also count the lines, and per file and reason the lines they skip
   and the sends without a message id. (The inputs are validated before Spark starts:
   :mod:`harness.check.inputs`.)
2. names: the client and topic names behind the hashes, the read_committed clients and
   the polled partitions, from the distinct rows the ingest tasks return.
3. per message id (:mod:`harness.check.mids`, in the Python workers, one task per id
   bucket: no shuffle): outcome and read flags, first invoke, first ack, and whether the id
   sits at more than one position; written in a directory per (ack topic, ack partition).
   Each task also writes its flag counts, its ids sent in a transaction, and in a big check
   its ids whose flags can make an id anomalous (:func:`harness.check.anomalies.ids.loud_flags`).
4. anomalies: the id family's conditions over step 3's ids that can have one (a big check)
   or all of them (a small one), its outcome counts over the flag counts; the position
   pass (:mod:`harness.check.placed`: one task per (topic, partition), the position,
   sequence and replica families in one NumPy kernel); key-order, transactions and copies
   where the run has them. All anomaly rows and counts go through one window that keeps
   the total and the first examples of each kind.
5. details (:mod:`harness.check.details`, PyArrow in this process, no Spark job): the few
   example ids, sends and positions are looked up again for their examples' fields, which
   each family builds.
6. latency and availability (:mod:`harness.check.latency`): one task per directory of the
   per-id table, summed here.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from harness.anomalies import REGISTRY
from harness.check import details, ingest, latency, lines, mids, parse, placed
from harness.check.anomalies import (
    arrays,
    bookies,
    key_order,
    positions,
    replicas,
    sequences,
    transactions,
)
from harness.check.anomalies import copies as copies_family
from harness.check.anomalies import ids as ids_family
from harness.check.anomalies import vocab as vocab_module
from harness.check.anomalies.columns import Ranks, uniform
from harness.check.anomalies.vocab import Details, Event, Names, Place
from harness.check.engine import memory, scratch, session, tasks
from harness.check.engine.conf import shuffle_partitions
from harness.check.engine.frames import Frames
from harness.check.engine.master import require_reachable
from harness.check.inputs import require_lines, run_files
from harness.check.lines import FileTally
from harness.check.result import MAX_EXAMPLES, CheckResult, make_result
from harness.errors import CheckError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

__all__ = ["FAMILY", "KERNELS", "TRAINER", "close", "example_of", "run", "session_for"]

#: the modules whose code runs in the Python workers (pickled by value: an executor needs
#: NumPy and PyArrow, not this package)
KERNELS: tuple[ModuleType, ...] = (ingest, parse, latency, lines, mids, placed, tasks, memory, vocab_module,
                                   arrays, positions, sequences, replicas)
#: the module that trains the shared server's AOT cache with this plan's check
TRAINER = "harness.check.train"
#: input (JSON lines) per bucket of the per-id step: a task holds its bucket's events (at
#: 10M records, 128 MiB of input are about 2.9M events)
MIDS_BUCKET_BYTES = 128 << 20
#: a check of more input than this says where it is, step by step (this module's
#: logger, at INFO: ``harness run`` and ``harness check`` show it); a smaller one is quiet
PROGRESS_BYTES = 256 << 20
log = logging.getLogger(__name__)
# The per-id table as read back: the kernel's columns, its directories' last (Spark's order).
_DDL = {"int64": "long", "int32": "int", "double": "double", "string": "string"}
#: :func:`harness.check.anomalies.ids.loud_flags`, once worked out (once per process: the
#: conditions are code)
_loud: tuple[bytes, bytes] | None = None


#: the family modules by the registry's family names
FAMILY: dict[str, ModuleType] = {module.__name__.rsplit(".", 1)[1]: module for module in (
    ids_family, positions, replicas, bookies, sequences, key_order, transactions, copies_family)}
_OF_KIND = {a.name: FAMILY[a.family] for a in REGISTRY}


def example_of(kind: str, row: Any, names: Names, details: Details) -> dict[str, Any]:
    """The example of an anomaly row of ``kind``, built by its family."""
    return _OF_KIND[kind].example_of(kind, row, names, details)


def _ddl(fields: Any) -> str:
    """Spark's DDL schema string of Arrow fields."""
    return ", ".join(f"{f.name} {_DDL[str(f.type)]}" for f in fields)


_MIDS_SCHEMA = _ddl(sorted(mids.MIDS_SCHEMA, key=lambda f: f.name in ("ack_topic", "ack_part")))


def session_for(master: str | None = None) -> SparkSession:
    """The process's Spark session on ``master``, with this plan's kernels registered."""
    return session.session(master, KERNELS, TRAINER)


def close() -> None:
    """Stops this process's session (never the shared server)."""
    session.close()


def run(run_dir: Path, master: str | None = None) -> CheckResult:
    """Check one run directory on ``master``; see :func:`harness.check.check_run`."""
    files, replica_files = run_files(run_dir)  # before Spark starts: one clear error for a bad input
    names = [str(f.relative_to(run_dir)) for f in [*files, *replica_files]]
    require_reachable(master)  # a bad master, or a cluster gone: one line, not Spark's retries
    if max(len(files), len(replica_files)) > ingest.MAX_FILES:
        raise CheckError(f"{run_dir}: {max(len(files), len(replica_files))} history or replica files; "
                         f"at most {ingest.MAX_FILES} supported")
    failures = session.spark_errors()
    with session.checking(master):
        spark = session_for(master)
        input_bytes = sum(f.stat().st_size for f in [*files, *replica_files])
        partitions = shuffle_partitions(input_bytes)
        spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
        # Adaptive execution re-plans after each shuffle: it pays on big inputs (coalescing,
        # skew), and on a small one (one partition) it is only a fixed cost per stage.
        spark.conf.set("spark.sql.adaptive.enabled", str(partitions > 1).lower())
        local = session.workers_see_local_files(master)
        work = scratch.make(input_bytes, local)
        try:
            if not local:  # executors elsewhere read the scratch directory
                files = session.stage_files(work / "input", files)
                replica_files = session.stage_files(work / "replicas-input", replica_files)
            inputs = _Inputs(run_dir, [str(f.resolve()) for f in files],
                             [str(f.resolve()) for f in replica_files], local=local, names=names)
            return _Job(spark, work, inputs).result()
        except failures as exc:
            raise CheckError(f"{run_dir}: Spark check failed: {session.failure(exc, master, work)}") from exc
        finally:
            shutil.rmtree(work, ignore_errors=True)


@dataclass(frozen=True)
class _Inputs:
    run_dir: Path
    history: list[str]
    replicas: list[str]
    #: the executors run on this machine (a local master): their memory is this machine's
    local: bool = True
    #: each history file's name in the run directory, then each replica file's
    #: (``history/producer-0.jsonl``): how a result names them
    names: list[str] = dataclasses.field(default_factory=list)


class _Job:
    """One check: the steps of the module docstring, over Parquet in ``scratch``."""

    def __init__(self, spark: SparkSession, scratch: Path, inputs: _Inputs) -> None:
        self.spark = spark
        self.scratch = scratch
        self.inputs = inputs
        #: the per-id step's buckets: about one per MIDS_BUCKET_BYTES of input, in rounds of
        #: as many as this machine has cores when the executors are on it (no round half idle)
        size = sum(os.path.getsize(p) for p in (*inputs.history, *inputs.replicas))
        buckets = math.ceil(size / MIDS_BUCKET_BYTES)
        #: the cores the check counts on (1 when the executors are not this machine's)
        cores = (os.cpu_count() or 1) if inputs.local else 1
        #: a task per row of each step's task list when the input is more than a split per
        #: core, or when the executors are not this machine's
        self.frames = Frames(spark, scratch, cores, not inputs.local or size > cores * ingest.SPLIT_BYTES)
        if buckets > 1:
            buckets = math.ceil(buckets / cores) * cores
        self.buckets = max(1, min(ingest.MAX_BUCKETS, buckets))
        #: from step 3: how many ids were sent in a transaction, and the least and greatest
        #: finite first-invoke time (None: none)
        self.tx_ids = 0
        self.inv_span: tuple[float, float] | None = None
        #: from step 3: its flag counts, its ids sent in a transaction, and in a big check
        #: the ids that can be anomalous (each a small table in most runs)
        self.flag_counts: DataFrame | None = None
        self.tx_mids: DataFrame | None = None
        self.loud: DataFrame | None = None
        self.size = size
        self._started = time.monotonic()

    @property
    def spread(self) -> bool:
        return self.frames.spread

    def _progress(self, message: str) -> None:
        """One line of a big check's progress (:data:`PROGRESS_BYTES`), with the time so far."""
        if self.size > PROGRESS_BYTES:
            log.info("check: %s (%.0f s)", message, time.monotonic() - self._started)

    # -- 1. ingest -------------------------------------------------------------

    def _ingest(self) -> tuple[DataFrame, list[Row]]:
        """Step 1: one task per file split writes its events as Parquet, read back from
        there, and returns its names, its counts of lines, and its skipped lines and sends
        without a message id by reason."""
        out = self.scratch / "events"
        out.mkdir()
        (self.scratch / "ids").mkdir()  # the tasks make what is below, never these
        splits = ingest.plan(self.inputs.history, self.inputs.replicas)
        kernel = ingest.kernel(str(out), str(self.scratch / "ids"), self.buckets)
        names = self.frames.each(splits, ingest.TASK_SCHEMA, kernel, ingest.RESULT_SCHEMA,
                                 costs=[stop - start for *_, start, stop in splits]).collect()
        return self.spark.read.option("recursiveFileLookup", "true").parquet(str(out)), names

    # -- 2. names --------------------------------------------------------------

    def _names(self, rows: Sequence[Row]) -> Names:
        """From the ingest tasks' distinct (client, topic, polled partition,
        read_committed) rows: a few per (client, topic, partition) and task (a task's row
        of line counts has no names)."""
        names: tuple[dict[int, str], dict[int, str]] = ({}, {})
        for row in rows:
            for known, h, name in ((names[0], row.client_h, row.client), (names[1], row.topic_h, row.topic)):
                if h is not None and known.setdefault(h, name) != name:
                    raise CheckError(f"names {known[h]!r} and {name!r} have the same 64-bit hash; rename one")
        return Names(names[0], names[1],
                     frozenset(r.client_h for r in rows if r.rc and r.client_h is not None),
                     tuple(sorted({(r.topic_h, r.polled) for r in rows
                                   if r.polled is not None and r.topic_h is not None})))

    # -- 3. per message id -----------------------------------------------------

    def _mids(self, names: Names) -> DataFrame:
        """Step 3: one task per id bucket the ingest wrote aggregates its ids and writes
        them in a directory per (ack topic, ack partition), read back from there."""
        out, counts, tx = self.scratch / "mids", self.scratch / "mids-counts", self.scratch / "mids-tx"
        for directory in (out, counts, tx):
            directory.mkdir()
        loud = None
        if self.spread:  # a big check: its id anomalies read only the ids that can have one
            loud_dir = self.scratch / "mids-loud"
            loud_dir.mkdir()
            loud = mids.Loud(*self._loud_flags(), str(loud_dir))
        kernel = mids.kernel(str(self.scratch / "ids"), str(out), names.rc_clients, str(counts), str(tx),
                             loud)
        stats = self.frames.each([(b,) for b in range(self.buckets)], mids.TASK_SCHEMA, kernel,
                                 mids.RESULT_SCHEMA).collect()
        self.tx_ids = sum(r.tx_ids for r in stats)
        finite = [r for r in stats if r.inv_lo is not None]
        self.inv_span = (min(r.inv_lo for r in finite), max(r.inv_hi for r in finite)) if finite else None
        self.flag_counts = self.spark.read.schema(_ddl(mids.COUNTS_SCHEMA)).parquet(str(counts))
        schema = _ddl(mids.MIDS_SCHEMA)
        self.tx_mids = self.spark.read.schema(schema).parquet(str(tx))
        self.loud = None if loud is None else self.spark.read.schema(schema).parquet(loud.out_dir)
        return self.spark.read.schema(_MIDS_SCHEMA).parquet(str(out))

    def _loud_flags(self) -> tuple[bytes, bytes]:
        global _loud
        if _loud is None:
            _loud = ids_family.loud_flags(self.spark)
        return _loud

    # -- 4. anomalies -----------------------------------------------------------

    def _anomalies(self, events: DataFrame, per_id: DataFrame, names: Names,
                   txns: DataFrame | None, copies: bool, keyed: bool) -> list[Row]:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        ranks = Ranks(names)
        assert self.flag_counts is not None  # step 3's
        # the id anomalies over the ids that can have one (a big check) or all; the outcome
        # counts over the flag counts (step 3's): neither scans the whole per-id table
        some = per_id if self.loud is None else self.loud
        rows = (ids_family.rows(transactions.with_state(some, txns))
                .unionByName(self._placed_rows(self._by_pair(names), ranks))
                .unionByName(ids_family.count_rows(transactions.with_state(self.flag_counts, txns))))
        if keyed:  # Key_Shared run polls (the ingest counts them)
            rows = rows.unionByName(key_order.rows(events, ranks))
        if txns is not None:
            rows = rows.unionByName(transactions.rows(txns))
        if copies:
            rows = rows.unionByName(copies_family.rows(per_id))
        kind = Window.partitionBy("kind")
        ranked = rows.select("kind", "ex", F.sum("n").over(kind).alias("total"),
                             F.row_number().over(kind.orderBy("sk")).alias("rn"))
        return ranked.where(F.col("rn") <= MAX_EXAMPLES).collect()

    def _transactions(self, events: DataFrame) -> DataFrame | None:
        """One row per transaction (:func:`harness.check.anomalies.transactions.table`),
        staged; None when the run has no transaction (no ``txn`` event, no send with a
        ``tx``)."""
        x = self.scratch / "events" / ingest.TXNS
        if not x.is_dir() and not self.tx_ids:
            return None
        assert self.tx_mids is not None  # step 3's
        per_tx = (transactions.calls(self.spark.read.parquet(str(x))) if x.is_dir()
                  else self.spark.createDataFrame([], transactions.CALLS_DDL))
        staged = "txns"
        txns = self.frames.stage(staged, transactions.table(self.tx_mids, per_tx))
        nulls = _has_nulls(self.scratch / staged, "tx")
        if nulls is False or (nulls is None and not txns.where(txns.tx.isNull()).limit(1).count()):
            return txns
        # Transactions without a txn event: named by their first send (one more scan of the
        # events, only then).
        return self.frames.stage("txns-named", transactions.named(txns, events))

    def _by_pair(self, names: Names) -> DataFrame:
        """The position pass (:mod:`harness.check.placed`), one task per (topic, partition)
        that has a poll, a replica record or an ack. Only anomaly rows come back."""
        events = self.scratch / "events"
        placed_dir = events / ingest.PLACED
        places: dict[tuple[int | None, int], str] = (
            {ingest.place_pair(d.name): str(d) for d in placed_dir.iterdir()} if placed_dir.is_dir() else {})
        acks = {(topic, part): path for topic, part, path in self._mids_dirs()
                if part is not None}  # else rows without an ack position
        polled = set(names.partitions)
        pairs = sorted(places.keys() | acks.keys(), key=lambda tp: (tp[0] is not None, tp[0] or 0, tp[1]))
        pair_tasks = [(t, p, (t, p) in polled, places.get((t, p)), acks.get((t, p))) for t, p in pairs]
        if not pair_tasks:
            return self.spark.createDataFrame([], arrays.OUT_SCHEMA)
        resets = events / ingest.RESETS
        kernel = placed.pair_kernel(str(resets) if resets.is_dir() else None)
        sizes: list[int] | None = None
        slots = None
        if self.inputs.local:  # as many tasks at once as the machine's memory holds
            sizes = [placed.task_rows(t[3], t[4]) for t in pair_tasks]
            slots = memory.task_slots(sizes, memory.memory_budget(), self.frames.cores,
                                      placed.PEAK_BYTES_PER_ROW)
        return self.frames.each(pair_tasks, placed.PAIR_SCHEMA, kernel, arrays.OUT_SCHEMA, sizes, slots)

    def _mids_dirs(self) -> list[tuple[int | None, int | None, str]]:
        """The per-id table's directories (its ack topic, its ack partition, its path)."""
        return [(_hive_value(topic_dir.name), _hive_value(part_dir.name), str(part_dir))
                for topic_dir in sorted((self.scratch / "mids").glob("ack_topic=*"))
                for part_dir in sorted(topic_dir.glob("ack_part=*"))]

    def _placed_rows(self, rows: DataFrame, ranks: Ranks) -> DataFrame:
        """The position pass's anomaly rows as uniform rows: a position's (the position and
        replica families'), or a sequence's (the sequence family's)."""
        from pyspark.sql import functions as F

        pos = ("pl", "pe", "pb")
        at_position = uniform(F.col("kind"), {
            "a": ranks.topic("topic_h"), "b": F.col("part"), "c": F.col("pl"), "d": F.col("pe"),
            "e": F.col("pb")}, {"topic": F.col("topic_h"), **{c: F.col(c) for c in ("part", *pos)}})
        poll = ~F.col("kind").isin(*sequences.SENDS)
        in_sequence = uniform(F.col("kind"), {
            "a": ranks.client("client_h"), "b": ranks.topic("topic_h"), "c": F.col("part"),
            "d": F.col("seq")}, {
            # the ids of a sequence's two rows are looked up later by ``seq`` (ids stay out
            # of the big shuffle)
            **{name.removesuffix("_h"): F.col(name)
               for name in ("client_h", "topic_h", "part", "pl", "pe", "pb", "seq")},
            **{name: F.col(name) for name in ("seq2", "ql", "qe", "qb")},
            "rec": F.when(poll, F.col("grp") == 1),
            "n": F.when(F.col("kind").isin("poll-skip", "int-poll-skip"), F.col("n")),
        })
        of_position = F.col("kind").isin(*positions.KINDS, *replicas.KINDS)
        return rows.select(*[F.when(of_position, a).otherwise(b).alias(name)
                             for a, b, name in zip(at_position, in_sequence, ("kind", "n", "sk", "ex"),
                                                   strict=False)])

    # -- 5. details and the result ---------------------------------------------

    def result(self) -> CheckResult:
        self._progress(f"reading {self.size / 1e9:.1f} GB of history "
                       f"({len(self.inputs.history) + len(self.inputs.replicas)} files)")
        events, name_rows = self._ingest()
        tallies = [r for r in name_rows if r.lines is not None]
        copies = any(r.copies for r in tallies)
        keyed = any(r.keyed for r in tallies)
        name = dict(zip([*self.inputs.history, *self.inputs.replicas], self.inputs.names, strict=True))
        tally = FileTally()
        for r in tallies:
            tally.lines[name[r.path]] += r.lines
        for r in name_rows:
            if r.reason is not None:
                tally.unread[name[r.path]][r.reason] += r.n
        counts = tally.counts()
        read = counts["lines"]
        require_lines(self.inputs.run_dir, read, counts["skipped"])
        plural = "s" if self.buckets > 1 else ""
        self._progress(f"{read:,} lines read; per message id ({self.buckets} bucket{plural})")
        names = self._names(name_rows)
        per_id = self._mids(names)
        self._progress("anomalies")
        txns = self._transactions(events)
        totals: dict[str, int] = {}
        firsts: dict[str, list[Row]] = {}
        for row in sorted(self._anomalies(events, per_id, names, txns, copies, keyed), key=lambda r: r.rn):
            totals[row.kind] = row.total
            firsts.setdefault(row.kind, []).append(row.ex)
        self._progress("examples, latency and transactions")
        looked_up = self._details(names, firsts)
        examples = {kind: [example_of(kind, ex, names, looked_up) for ex in exs]
                    for kind, exs in firsts.items() if not kind.startswith("count:")}
        counts.update({kind.removeprefix("count:"): n for kind, n in totals.items()
                       if kind.startswith("count:")})
        found = {kind: n for kind, n in totals.items() if not kind.startswith("count:")}
        on_bookies, bookie_examples, bookie_unread = bookies.find(
            self.inputs.run_dir, receipts=functools.partial(lines.receipts, self.inputs.history))
        found.update(on_bookies)
        examples.update(bookie_examples)
        result = make_result(found, examples, counts, {**tally.by_file(), **bookie_unread})
        # every transaction has one state: committed, aborted or unknown (seen committed or not)
        listed = sum(counts.get(f"txn-{state}", 0) for state in ("committed", "aborted", "unknown"))
        result = dataclasses.replace(result, latency=self._latency(names),
                                     transactions=transactions.listing(txns, names, listed))
        self._progress("done")
        return result

    def _details(self, names: Names, firsts: Mapping[str, list[Row]]) -> Details:
        """The events and acks of the example ids, sends and positions that need more than
        the anomaly row, read by this process with PyArrow where the ingest and the per-id
        step put them (:mod:`harness.check.details`; no Spark job for a handful of rows)."""
        wanted_ids = sorted({ex.mid for kind in ids_family.LOOKUP for ex in firsts.get(kind, [])})
        places: list[Place] = sorted({(ex.topic, ex.part, ex.pl, ex.pe, ex.pb)
                                      for kind in (*positions.LOOKUP, *replicas.LOOKUP)
                                      for ex in firsts.get(kind, [])
                                      if ex.topic is not None and ex.part is not None})
        seqs = sorted({s for kind in sequences.LOOKUP for ex in firsts.get(kind, [])
                       for s in (ex.seq, ex.seq2) if s is not None})
        if not wanted_ids and not places and not seqs:
            return Details([], [])
        found, acks = details.read(self.scratch, self.buckets, self.inputs.history, wanted_ids, places, seqs)
        return Details([Event.of(r, names) for r in found], acks)

    # -- 6. latency and availability (harness.check.latency) ----------------------

    def _latency(self, names: Names) -> dict[str, Any] | None:
        """Send and end-to-end latency percentiles (run, windows, phases) and availability
        per fault: the invoke time span of the per-id table (step 3's), then one
        ``mapInArrow`` task per directory of it (``latency.kernel``: NumPy bucket counts and
        time bins), handed to the driver as Arrow and summed there (``latency.gather``)."""
        lat = latency
        if self.inv_span is None:  # no finite first-invoke time (step 3's tasks tell)
            return None
        lo, hi = (math.floor(t / lat.BIN_S) for t in self.inv_span)
        t0 = lo * lat.BIN_S
        window_s = lat.window_for(hi * lat.BIN_S - t0)
        faults = lat.faults_of(self.inputs.run_dir)
        dirs = self._mids_dirs()
        sizes = [sum(f.stat().st_size for f in Path(path).iterdir()) for *_, path in dirs]
        out = self.frames.each(dirs, lat.TASK_SCHEMA, lat.kernel(t0, window_s, faults.start, faults.end),
                               lat.OUT_SCHEMA, sizes).toArrow()
        invokes, acks, groups = lat.gather(out, names.topics)
        whole = groups["run"].get(None, lat.Histograms())
        per_partition = []  # per producer and partition acknowledged: its ids' send and e2e latency
        for (client_h, topic_h, part), hist in groups["pair"].items():
            per_partition.append({"client": names.clients.get(client_h, str(client_h)),
                                  "topic": names.topics.get(topic_h, str(topic_h)), "partition": part,
                                  **hist.stats()})
        per_partition.sort(key=lambda p: (p["client"], p["topic"], p["partition"]))
        all_acks = [values[-1] for values in acks.values() if values]
        # no fault, no time bins (the kernel's): nothing to measure
        run_end = max([*invokes[-1:], *all_acks]) * lat.BIN_S if invokes else None
        availability = lat.availability(faults, acks, invokes, run_end)
        for fault in availability:
            fault["t"] = round(fault["t"] - t0, 3)
        measured = [f["max_unavailable_s"] for f in availability if f["max_unavailable_s"] is not None]
        return {
            "window_s": window_s, "start": t0, **whole.stats(),
            "phases": {k: h.stats() for k, h in sorted(groups["phase"].items())},
            "during": None if faults.start is None else
            [round(faults.start - t0, 3), None if faults.end is None else round(faults.end - t0, 3)],
            "windows": [{"t": k * window_s, **h.stats()} for k, h in sorted(groups["window"].items())],
            "partitions": per_partition,
            "availability": availability,
            "max_unavailable_s": max(measured) if measured else None,
        }


def _has_nulls(directory: Path, column: str) -> bool | None:
    """Whether the Parquet files Spark wrote in ``directory`` hold a null in ``column``, read
    from their footers' statistics (a Spark job less); None when there is no file or a
    footer has no null count for it."""
    import pyarrow.parquet as pq

    files = sorted(directory.glob("*.parquet"))
    if not files:
        return None
    for path in files:
        meta = pq.read_metadata(path)
        names = meta.schema.names
        if column not in names:
            return None
        index = names.index(column)
        for group in range(meta.num_row_groups):
            stats = meta.row_group(group).column(index).statistics
            if stats is None or not stats.has_null_count:
                return None
            if stats.null_count:
                return True
    return False


def _hive_value(name: str) -> int | None:
    """The value of a Hive-style directory name ``column=value`` of a long column."""
    value = name.split("=", 1)[1]
    return None if value == mids.HIVE_NULL else int(value)
