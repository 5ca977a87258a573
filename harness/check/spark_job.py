"""The Spark job behind :func:`harness.check.check_run`; the only module that imports pyspark.

Plan (each step one Spark action, intermediate data as Parquet in a scratch dir):

1. ingest: parse ``history/*.jsonl`` and ``replicas/*.jsonl`` once (explicit
   schema, malformed and torn lines dropped; a batch line (``polls``, ``oks``,
   ``invokes``) becomes its events) into compact columns: a type code, 64-bit hashes of client and topic,
   a validated position ``(pl, pe, pb)`` (``harness.history.position_key``), row
   flags, ``seq``, the event's place in file order, and for Key_Shared run polls
   their time, subscription and key.
2. names: the client and topic names behind the hashes, and the read_committed
   clients (small).
3. per message id (hash aggregate, fixed-width buffers only, no map-side partial
   aggregate): outcome and read flags, first invoke, first ack, and whether the
   id sits at more than one position.
4. anomalies: id anomalies are filters of step 3. Polls, acks, replica records
   and resets go through one shuffle by (topic, partition) into the NumPy kernel of
   ``harness.check.placed`` (``mapInArrow``): in position order, the recovery
   positions at or below each row and the ids bound to each position; in file order
   per sequence (client, phase and partition, or producer and partition), each poll
   or ack against the one before it. Only anomaly rows come back. Key_Shared polls
   (usually none; skipped by the Parquet statistics) go through two windows of their
   own (key-order). All anomaly rows and the outcome counts go through one window
   that keeps the total and the first examples of each kind.
5. details: the few example ids and positions are looked up again for their
   example fields (only when there are such anomalies).
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.check import placed as placed_kernel
from harness.check.placed import TAG_ACK, TAG_REPLICA, TAG_RESET  # row tags of the placed rows
from harness.check.result import MAX_EXAMPLES, CheckResult, example, make_result
from harness.errors import CheckError
from harness.history import history_files

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Row, SparkSession

__all__ = ["DEFAULT_MASTER", "run", "session"]

DEFAULT_MASTER = "local[*]"
_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")

# Event type codes.
INVOKE, OK, FAIL, INFO, POLL, RESET, META, REPLICA = range(8)
_HISTORY_TYPES = {"invoke": INVOKE, "invokes": INVOKE, "ok": OK, "oks": OK, "fail": FAIL, "info": INFO,
                  "poll": POLL, "polls": POLL, "reset": RESET, "meta": META}

# Row flags (ingest).
ROW_REC, ROW_ABORTED, ROW_RC = 1, 2, 4
# Per-id flags.
F_INV, F_OK, F_FAIL, F_INFO, F_RUN, F_REC, F_ABORTED, F_RC_READ, F_DUP = (1 << i for i in range(9))

# seq = file index | split (4 MiB units of its start) | row within the task: file order, one long.
_SPLIT_UNIT_BITS, _ROW_BITS, _SPLIT_BITS = 22, 33, 17
_MAX_FILES = 1 << (63 - _ROW_BITS - _SPLIT_BITS)
_SPLIT_BYTES = 128 << 20  # at most this much of a file per task (a multiple of 4 MiB)

_L, _S = "long", "string"
_LONGS, _STRINGS = "array<long>", "array<string>"
# The columns of a ``polls`` batch (harness.history.POLLS_FIELDS) -> (poll field, type). Those
# the checker does not use are read as lists of anything (strings hold any JSON value), only
# to check that they are lists of the batch's length.
_POLLS_COLUMNS = {"partitions": ("partition", _LONGS), "offsets": ("offset", _LONGS),
                  "ledgers": ("ledger", _LONGS), "entries": ("entry", _LONGS),
                  "batches": ("batch", _LONGS), "mids": ("mid", _STRINGS), "keys": ("key", _STRINGS),
                  "epochs": ("epoch", _STRINGS), "tss": ("ts", _STRINGS),
                  "redeliveries": ("redelivery", _STRINGS)}
# Batch types -> their columns (harness.history.BATCH_EVENTS); other lists in them are not read.
_BATCHES = {"polls": tuple(_POLLS_COLUMNS),
            "oks": ("partitions", "offsets", "ledgers", "entries", "batches", "mids", "epochs"),
            "invokes": ("mids", "keys", "partitions")}
_HISTORY_FIELDS = (("type", _S), ("client", _S), ("mid", _S), ("topic", _S), ("partition", _L),
                   ("offset", _L), ("ledger", _L), ("entry", _L), ("batch", _L), ("phase", _S),
                   ("txn", _S), ("isolation", _S), ("key", _S), ("t", _S), ("subscription", _S),
                   ("subscription_type", _S),
                   *[(name, t) for name, (_, t) in _POLLS_COLUMNS.items()])
_REPLICA_FIELDS = (("type", _S), ("node", _S), ("mid", _S), ("topic", _S), ("partition", _L),
                   ("offset", _L), ("ledger", _L), ("entry", _L), ("batch", _L))
# The uniform anomaly row: a sort key and a generic example, typed.
_SK_FIELDS = (("s", _S), ("a", _L), ("k", _S), ("b", _L), ("c", _L), ("d", _L), ("e", _L))
_EX_FIELDS = (("mid", _S), ("seq", _L), ("seq2", _L), ("client", _L), ("topic", _L), ("part", _L),
              ("rec", "boolean"), ("pl", _L), ("pe", _L), ("pb", _L), ("ql", _L), ("qe", _L),
              ("qb", _L), ("n", _L), ("sub", _S), ("key", _S), ("client2", _L), ("mid2", _S))

_POS_KINDS = ("inconsistent-offsets", "replica-divergence")
_SEQ_KINDS = ("nonmonotonic-send", "nonmonotonic-poll", "poll-skip")

_BYPASS_PARTIAL = "spark.sql.execution.bypassPartialAggregation"

_session_lock = threading.Lock()
_run_lock = threading.Lock()
_session: SparkSession | None = None


def session(master: str | None = None) -> SparkSession:
    """The process's SparkSession on ``master`` (default ``local[*]``): made once, then reused.

    Asking for another master stops the current session and starts one on it
    (the JVM, and so ``spark.driver.memory``, stays).
    """
    global _session
    master = master or DEFAULT_MASTER
    with _session_lock:
        if _session is not None and _session.sparkContext._jsc is not None:
            if _session.sparkContext.master == master:
                return _session
            _session.stop()
        _session = _start(master)
        return _session


def _start(master: str) -> SparkSession:
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise CheckError("the checker needs pyspark 4 and Java 17: pip install 'pyspark>=4'") from exc
    # Loopback only, and no "hostname resolves to a loopback address" warning.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(master).appName("harness-check")
    if master.startswith("local"):  # the Python workers are this interpreter (with NumPy, PyArrow)
        builder = builder.config("spark.pyspark.python", sys.executable)
    for key, value in _session_conf().items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # the JVM failed to start: pyspark raises several types here
        raise CheckError(f"cannot start Spark on {master}: {exc} (is Java 17 installed?)") from exc
    spark.sparkContext.setLogLevel("WARN")
    # The kernel goes to the Python workers by value: a Spark cluster's executors need
    # NumPy and PyArrow (PySpark's own SQL extra), not this package.
    from pyspark import cloudpickle

    from harness.check import placed

    cloudpickle.register_pickle_by_value(placed)
    return spark


def _session_conf() -> dict[str, str]:
    # The throughput collector: this is batch work, pauses do not matter.
    java = ["-XX:+UseParallelGC"]
    if _LOG_CONFIG.is_file():  # absent if not installed as package data: Spark's defaults then
        java.append(f"-Dlog4j2.configurationFile={_LOG_CONFIG.as_uri()}")
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": os.environ.get("HARNESS_SPARK_DRIVER_MEMORY") or _driver_memory(),
        "spark.driver.extraJavaOptions": " ".join(java),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.debug.maxToStringFields": "1000",
        "spark.sql.parquet.compression.codec": "lz4_raw",
        # Read the JSON lines in 1 MiB reads, not Hadoop's default 4 KiB.
        "spark.hadoop.io.file.buffer.size": str(1 << 20),
        # The kernel's Arrow batches: 100k rows, not 10k (fewer round trips to the worker).
        "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
        # Shuffle files of finished checks are removed when the driver collects garbage.
        "spark.cleaner.periodicGC.interval": "1min",
    }


def _driver_memory() -> str:
    """Half the machine's memory, 1 to 16 GiB: room for the JVM's off-heap use and the rest."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return f"{max(1, min(16, total // (2 << 30)))}g"


def _shuffle_partitions(input_bytes: int) -> int:
    """About one shuffle partition per 64 MiB of JSON input; one for small runs."""
    return max(1, min(2000, math.ceil(input_bytes / (64 << 20))))


def run(run_dir: Path, master: str | None = None) -> CheckResult:
    """Check one run directory on ``master``; see :func:`harness.check.check_run`."""
    if not run_dir.is_dir():
        raise CheckError(f"{run_dir}: not a run directory")
    files = history_files(run_dir)
    if not files:
        raise CheckError(f"{run_dir}: no history/*.jsonl files")
    replicas = sorted((run_dir / "replicas").glob("*.jsonl"))
    if len(files) >= _MAX_FILES:
        raise CheckError(f"{run_dir}: {len(files)} history files; at most {_MAX_FILES - 1} supported")
    try:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException
    except ImportError as exc:
        raise CheckError("the checker needs pyspark 4 and Java 17: pip install 'pyspark>=4'") from exc
    with _run_lock:
        spark = session(master)
        input_bytes = sum(f.stat().st_size for f in [*files, *replicas])
        spark.conf.set("spark.sql.shuffle.partitions", str(_shuffle_partitions(input_bytes)))
        # seq needs file splits to start at multiples of >= 4 MiB: set what decides them.
        spark.conf.set("spark.sql.files.maxPartitionBytes", str(_SPLIT_BYTES))
        spark.conf.set("spark.sql.files.openCostInBytes", str(1 << _SPLIT_UNIT_BITS))
        scratch = Path(tempfile.mkdtemp(prefix="harness-check-",
                                        dir=os.environ.get("HARNESS_CHECK_SCRATCH")))
        try:
            return _Job(spark, scratch, _link_inputs(scratch, files, replicas)).result()
        except (PySparkException, Py4JError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CheckError(f"{run_dir}: Spark check failed: {first}") from exc
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


@dataclass(frozen=True)
class _Inputs:
    history: list[str]
    replicas: list[str]


def _link_inputs(scratch: Path, files: Sequence[Path], replicas: Sequence[Path]) -> _Inputs:
    """Symlink inputs under plain names: Hadoop paths break on ':' and glob characters,
    and the name carries the file's index (``h00003.jsonl``) for ``seq``."""
    links = scratch / "in"
    links.mkdir()
    out: dict[str, list[str]] = {"h": [], "r": []}
    for prefix, group in (("h", files), ("r", replicas)):
        for i, path in enumerate(group):
            link = links / f"{prefix}{i:05d}.jsonl"
            link.symlink_to(path.resolve())
            out[prefix].append(str(link))
    return _Inputs(out["h"], out["r"])


@dataclass(frozen=True)
class _Names:
    """Client and topic names behind their hashes, the read_committed clients, and the
    (topic hash, partition) pairs that polls read."""

    clients: dict[int, str]
    topics: dict[int, str]
    rc_clients: frozenset[int]
    partitions: tuple[tuple[int, int], ...]

    def rank(self, names: Mapping[int, str]) -> dict[int, int]:
        return {h: i for i, (h, _) in enumerate(sorted(names.items(), key=lambda kv: kv[1]))}


class _Job:
    """One check: the steps of the module docstring, over Parquet in ``scratch``."""

    def __init__(self, spark: SparkSession, scratch: Path, inputs: _Inputs) -> None:
        from pyspark.sql import functions as F

        self.spark = spark
        self.F = F
        self.scratch = scratch
        self.inputs = inputs

    # -- helpers ---------------------------------------------------------------

    def _stage(self, name: str, df: DataFrame, dictionary: Sequence[str] = ()) -> DataFrame:
        """Write ``df`` as Parquet in the scratch directory and read it back.

        Dictionaries do not pay for mostly distinct values (ids, positions, seq): only the
        ``dictionary`` columns (a few distinct values: names, codes, flags) get one.
        """
        path = str(self.scratch / name)
        writer = df.write.option("parquet.enable.dictionary", "false")
        for col in dictionary:
            writer = writer.option(f"parquet.enable.dictionary#{col}", "true")
        writer.parquet(path)
        return self.spark.read.parquet(path)

    def _has(self, col: str, bits: int) -> Column:
        return self.F.col(col).bitwiseAND(bits) != 0

    def _lacks(self, col: str, bits: int) -> Column:
        return self.F.col(col).bitwiseAND(bits) == 0

    def _pos(self, prefix: str = "") -> Column:
        F = self.F
        return F.struct(F.col(prefix + "pl").alias("l"), F.col(prefix + "pe").alias("e"),
                        F.col(prefix + "pb").alias("b"))

    def _uniform(self, kind: Column, sk: Mapping[str, Column], ex: Mapping[str, Column],
                 n: Column | None = None) -> list[Column]:
        """Columns of the uniform anomaly row (kind, n, sk, ex); missing fields null."""
        F = self.F

        def typed(fields: Iterable[tuple[str, str]], given: Mapping[str, Column]) -> Column:
            return F.struct(*[given.get(name, F.lit(None)).cast(t).alias(name) for name, t in fields])

        return [kind.alias("kind"), (F.lit(1) if n is None else n).cast(_L).alias("n"),
                typed(_SK_FIELDS, sk).alias("sk"), typed(_EX_FIELDS, ex).alias("ex")]

    # -- 1. ingest -------------------------------------------------------------

    def _read(self, paths: list[str], fields: Sequence[tuple[str, str]]) -> DataFrame:
        schema = ", ".join(f"`{name}` {t}" for name, t in fields)
        return self.spark.read.schema(schema).option("mode", "DROPMALFORMED").json(paths)

    def _ingest(self) -> DataFrame:
        F = self.F
        raw = self._read(self.inputs.history, _HISTORY_FIELDS)
        raw = raw.select("*", F.col("_metadata.file_name").alias("_file"),
                         F.col("_metadata.file_block_start").alias("_start"))
        # A batch (polls, oks, invokes) becomes its events, in list order; then every row gets its place.
        raw = self._explode_polls(raw)
        # monotonically_increasing_id counts rows as the scan (and explode) yields them.
        raw = raw.select("*", F.monotonically_increasing_id().alias("_row"))
        seq = (F.shiftleft(F.substring("_file", 2, 5).cast(_L), _ROW_BITS + _SPLIT_BITS)
               .bitwiseOR(F.shiftleft(F.shiftright("_start", _SPLIT_UNIT_BITS), _ROW_BITS))
               .bitwiseOR(F.col("_row").bitwiseAND((1 << _ROW_BITS) - 1)))
        rec = F.col("phase") == "recovery"
        flags = (F.when(rec, ROW_REC).otherwise(0)
                 .bitwiseOR(F.when(F.col("txn") == "aborted", ROW_ABORTED).otherwise(0))
                 .bitwiseOR(F.when(F.col("isolation") == "read_committed", ROW_RC).otherwise(0)))
        # Key_Shared run polls (key-order): their time, subscription and key; null on other rows
        # (t is cast only there; key-order drops times that are not finite).
        ks = ((F.col("type").isin("poll", "polls")) & ~F.coalesce(rec, F.lit(False))
              & (F.col("subscription_type") == "Key_Shared") & F.col("key").isNotNull()
              & F.col("mid").isNotNull())
        history = raw.select(*self._common(_HISTORY_TYPES), "client", self._hash("client").alias("client_h"),
                             flags.alias("flags"), seq.alias("seq"), F.lit(None).cast(_S).alias("node"),
                             F.when(ks, F.col("t").try_cast("double")).alias("ks_t"),
                             F.when(ks, F.col("subscription")).alias("ks_sub"),
                             F.when(ks, F.col("key")).alias("ks_key"))
        events = history
        if self.inputs.replicas:
            reps = self._read(self.inputs.replicas, _REPLICA_FIELDS).select(
                *self._common({"replica": REPLICA}), F.lit(None).cast(_S).alias("client"),
                F.lit(None).cast(_L).alias("client_h"), F.lit(0).alias("flags"),
                F.lit(None).cast(_L).alias("seq"), "node", F.lit(None).cast("double").alias("ks_t"),
                F.lit(None).cast(_S).alias("ks_sub"), F.lit(None).cast(_S).alias("ks_key"))
            events = history.unionByName(reps)
        return self._stage("events", events.where(F.col("code").isNotNull()),
                           dictionary=("code", "topic", "topic_h", "part", "client", "client_h", "flags",
                                       "node", "ks_sub", "ks_key"))

    def _explode_polls(self, raw: DataFrame) -> DataFrame:
        """One row per record of a batch line (``polls``, ``oks``, ``invokes``: its columns'
        elements, in list order), the line itself for every other type. A record's field is
        its column's element, or the line's own field when the column is null or absent (or
        not one of its type's columns). A batch whose lists differ in length gives no
        rows (like a malformed line).

        The used columns are zipped into one array of structs and inlined: the lists are not
        carried through the generator (that would copy them for every record)."""
        F = self.F
        typ = F.col("type")
        # A batch's columns are those of its type; any other list in it is not read.
        column = {c: F.when(typ.isin(*[b for b, cols in _BATCHES.items() if c in cols]), F.col(c))
                  for c in _POLLS_COLUMNS}
        sizes = [F.when(col.isNotNull(), F.size(col)) for col in column.values()]
        n = F.greatest(*sizes)
        same = F.lit(True)
        for col, size in zip(column.values(), sizes):
            same = same & (col.isNull() | (size == n))
        names = {f for f, _ in _HISTORY_FIELDS}
        used = [(c, field) for c, (field, _) in _POLLS_COLUMNS.items() if field in names]
        # The length and its check first, as columns: inlined into every use, the expression
        # grows past what the JIT compiles.
        raw = raw.select("*", n.alias("_n"), (same & (n > 0)).alias("_ok"))
        n = F.col("_n")
        records = F.arrays_zip(*[F.coalesce(column[c], F.array_repeat(F.col(field), n)).alias(field)
                                 for c, field in used])
        line = F.array(F.struct(*[F.col(field) for _, field in used]))
        records = (F.when(~typ.isin(*_BATCHES), line)
                   .when(F.col("_ok"), records)
                   .otherwise(F.array().cast(_record_type(used))))
        keep = [c for c in raw.columns if c not in _POLLS_COLUMNS and c not in dict(used).values()
                and c not in ("_n", "_ok")]
        return raw.select(*keep, F.inline(records))

    def _common(self, types: Mapping[str, int]) -> list[Column]:
        """Columns shared by history and replica lines: type code (null for other types),
        topic, validated position (null when absent or negative)."""
        F = self.F
        code = F.lit(None).cast("int")
        for name, value in types.items():
            code = F.when(F.col("type") == name, value).otherwise(code)
        off, led, ent = F.col("offset"), F.col("ledger"), F.col("entry")
        kafka = off.isNotNull()
        valid = F.col("partition").isNotNull() & F.when(kafka, off >= 0).otherwise((led >= 0) & (ent >= 0))
        return [code.alias("code"), "mid", "topic", self._hash("topic").alias("topic_h"),
                F.col("partition").alias("part"),
                F.when(valid, F.when(kafka, F.lit(-1)).otherwise(led)).alias("pl"),
                F.when(valid, F.coalesce(off, ent)).alias("pe"),
                F.when(valid, F.when(kafka, F.lit(-1)).otherwise(F.coalesce("batch", F.lit(-1))))
                .alias("pb")]

    def _hash(self, col: str) -> Column:
        F = self.F
        return F.when(F.col(col).isNotNull(), F.xxhash64(col))

    # -- 2. names --------------------------------------------------------------

    def _names(self, events: DataFrame) -> _Names:
        F = self.F
        code = F.col("code")
        rows = events.groupBy(
            "client_h", "client", "topic_h", "topic",
            F.when(code == POLL, F.col("part")).alias("polled"),
            (code.isin(POLL, META) & self._has("flags", ROW_RC)).alias("rc"),
        ).count().collect()  # a few rows per (client, topic, partition)
        names: tuple[dict[int, str], dict[int, str]] = ({}, {})
        for row in rows:
            for known, h, name in ((names[0], row.client_h, row.client), (names[1], row.topic_h, row.topic)):
                if h is not None and known.setdefault(h, name) != name:
                    raise CheckError(f"names {known[h]!r} and {name!r} have the same 64-bit hash; rename one")
        return _Names(names[0], names[1],
                      frozenset(r.client_h for r in rows if r.rc and r.client_h is not None),
                      tuple(sorted({(r.topic_h, r.polled) for r in rows
                                    if r.polled is not None and r.topic_h is not None})))

    # -- 3. per message id -----------------------------------------------------

    def _mids(self, events: DataFrame, names: _Names) -> DataFrame:
        F = self.F
        code, seq = F.col("code"), F.col("seq")
        poll, rec = code == POLL, self._has("flags", ROW_REC)
        rc = F.col("client_h").isin(sorted(names.rc_clients)) if names.rc_clients else F.lit(False)
        flags = self._bits({F_INV: code == INVOKE, F_OK: code == OK, F_FAIL: code == FAIL,
                            F_INFO: code == INFO, F_RUN: poll & ~rec, F_REC: poll & rec,
                            F_ABORTED: code.isin(OK, FAIL) & self._has("flags", ROW_ABORTED),
                            F_RC_READ: poll & rc})
        first_invoke, first_ok = F.when(code == INVOKE, seq), F.when(code == OK, seq)
        binding = F.when(poll & F.col("pl").isNotNull() & F.col("topic_h").isNotNull(),
                         self._binding("topic_h", "part", "pl", "pe", "pb"))
        agg = (events.where(F.col("mid").isNotNull() & (code <= POLL)).groupBy("mid").agg(
            F.bit_or(flags).alias("f"),
            F.min(first_invoke).alias("inv_seq"),
            F.min_by("client_h", first_invoke).alias("inv_client"),
            F.min_by("topic_h", first_invoke).alias("inv_topic"),
            F.min_by("client_h", first_ok).alias("ack_client"),
            F.min_by("topic_h", first_ok).alias("ack_topic0"),
            *[F.min_by(c, first_ok).alias(f"ack_{c}") for c in ("part", "pl", "pe", "pb")],
            F.min(binding).alias("bmin"), F.max(binding).alias("bmax")))
        # ok events need not name their topic: an ack binds the topic of its invoke.
        agg = agg.withColumn("ack_topic", F.coalesce("ack_topic0", "inv_topic"))
        ack = F.when(F.col("ack_pl").isNotNull() & F.col("ack_topic").isNotNull(),
                     self._binding("ack_topic", "ack_part", "ack_pl", "ack_pe", "ack_pb"))
        bmin = F.col("bmin")
        dup = (bmin != F.col("bmax")) | (bmin.isNotNull() & ack.isNotNull() & (ack != bmin))
        # An id's events are in different files (producer, consumers, recovery): a map-side
        # partial aggregate hardly reduces the rows (38M to 28M at 10M records) and costs more
        # than it saves (47 -> 29 CPU-s at 10M): the rows go to the shuffle as they are. (A
        # Spark without this setting ignores it.)
        conf = self.spark.conf
        before = conf.get(_BYPASS_PARTIAL, None)
        conf.set(_BYPASS_PARTIAL, "true")
        try:
            return self._stage("mids", agg.select(
                "mid", F.col("f").bitwiseOR(self._bits({F_DUP: dup})).alias("f"), "inv_seq",
                "inv_client", "ack_client", "ack_topic", "ack_part", "ack_pl", "ack_pe", "ack_pb"))
        finally:
            if before is None:
                conf.unset(_BYPASS_PARTIAL)
            else:
                conf.set(_BYPASS_PARTIAL, before)

    def _bits(self, conditions: Mapping[int, Column]) -> Column:
        F = self.F
        out = F.lit(0)
        for bit, cond in conditions.items():
            out = out.bitwiseOR(F.when(cond, bit).otherwise(0))
        return out

    def _binding(self, *cols: str) -> Column:
        """A (topic, partition, position) binding as one hash: distinct bindings of one id
        collide with probability 2^-64, which could only hide a duplicate."""
        return self.F.xxhash64(*cols)

    # -- 4. anomalies -----------------------------------------------------------

    def _anomalies(self, events: DataFrame, mids: DataFrame, names: _Names) -> list[Row]:
        from pyspark.sql import Window

        F = self.F
        ranks = _Ranks(F, names)
        rows = (self._mid_rows(mids)
                .unionByName(self._placed_rows(self._placed(events, mids, ranks), ranks))
                .unionByName(self._key_order_rows(events, ranks))
                .unionByName(self._count_rows(mids)))
        kind = Window.partitionBy("kind")
        ranked = rows.select("kind", "ex", F.sum("n").over(kind).alias("total"),
                             F.row_number().over(kind.orderBy("sk")).alias("rn"))
        return ranked.where(F.col("rn") <= MAX_EXAMPLES).collect()

    def _explode_kinds(self, df: DataFrame, conditions: Mapping[str, Column]) -> DataFrame:
        """One row per (row of ``df``, kind whose condition holds), kind in column ``kind``."""
        F = self.F
        anyone = F.lit(False)
        for cond in conditions.values():
            anyone = anyone | F.coalesce(cond, F.lit(False))
        kinds = F.array_compact(F.array(*[F.when(cond, F.lit(kind)) for kind, cond in conditions.items()]))
        return df.where(anyone).select(F.explode(kinds).alias("kind"), "*")

    def _mid_rows(self, mids: DataFrame) -> DataFrame:
        F = self.F
        committed = self._has("f", F_OK) & self._lacks("f", F_ABORTED)
        found = self._explode_kinds(mids, {
            "lost-write": committed & self._lacks("f", F_REC),
            "unseen": committed & self._lacks("f", F_RUN) & self._has("f", F_REC),
            "duplicate": self._has("f", F_DUP),
            "unexpected": self._has("f", F_RUN | F_REC) & self._lacks("f", F_INV),
            "aborted-read": self._has("f", F_ABORTED) & self._has("f", F_RC_READ),
        })
        ack = {c: F.col(f"ack_{c}") for c in ("client", "topic", "part", "pl", "pe", "pb")}
        return found.select(*self._uniform(F.col("kind"), {"s": F.col("mid")},
                                           {"mid": F.col("mid"), **ack}))

    def _placed(self, events: DataFrame, mids: DataFrame, ranks: _Ranks) -> DataFrame:
        """Everything that has a place in a partition, in one shuffle by (topic, partition):
        polls, acks (with their invoke's client and file order), replica records, and
        resets (one row per partition and phase they cover). ``grp`` is the sequence a row
        belongs to: 0 run polls, 1 recovery polls, 2 acks; ``tag`` its kind, recovery polls
        first so that they lead the rows of their position."""
        F = self.F
        pos = ("pl", "pe", "pb")
        none_l, none_i = F.lit(None).cast(_L), F.lit(None).cast("int")
        rec = self._has("flags", ROW_REC).cast("int")
        mid_h = self._hash("mid").alias("mh")
        polls = events.where((F.col("code") == POLL) & F.col("pl").isNotNull()
                             & F.col("topic_h").isNotNull()).select(
            "client_h", rec.alias("grp"), "topic_h", "part", *pos, mid_h, "seq", (1 - rec).alias("tag"))
        acks = mids.where(F.col("ack_pl").isNotNull()).select(
            F.col("inv_client").alias("client_h"), F.lit(2).alias("grp"), F.col("ack_topic").alias("topic_h"),
            F.col("ack_part").alias("part"), *[F.col(f"ack_{c}").alias(c) for c in pos], mid_h,
            F.col("inv_seq").alias("seq"), F.lit(TAG_ACK).alias("tag"))
        placed = polls.unionByName(acks)
        if self.inputs.replicas:
            placed = placed.unionByName(events.where(
                (F.col("code") == REPLICA) & F.col("pl").isNotNull() & F.col("topic_h").isNotNull()
                & F.col("mid").isNotNull()).select(
                none_l.alias("client_h"), none_i.alias("grp"), "topic_h", "part", *pos, mid_h,
                none_l.alias("seq"), F.lit(TAG_REPLICA).alias("tag")))
        if ranks.partitions:  # a reset without topic or partition covers all those polls read
            pairs = F.array(*[F.struct(F.lit(t).cast(_L).alias("t"), F.lit(p).cast(_L).alias("p"))
                              for t, p in ranks.partitions])
            covered = F.filter(pairs, lambda x: (F.col("topic_h").isNull() | (x.t == F.col("topic_h")))
                               & (F.col("part").isNull() | (x.p == F.col("part"))))
            placed = placed.unionByName(
                events.where(F.col("code") == RESET).select("client_h", "seq", F.explode(covered).alias("at"))
                .select("client_h", F.explode(F.array(F.lit(0), F.lit(1))).alias("grp"),
                        F.col("at.t").alias("topic_h"), F.col("at.p").alias("part"),
                        *[none_l.alias(c) for c in pos], none_l.alias("mh"), "seq",
                        F.lit(TAG_RESET).alias("tag")))
        return placed

    def _placed_rows(self, placed: DataFrame, ranks: _Ranks) -> DataFrame:
        """Position and sequence anomalies: one shuffle by (topic, partition), then each
        Spark partition's rows go to the NumPy kernel of ``harness.check.placed`` (in
        position order: the recovery positions at or below each row and the ids bound to
        each position; in file order per sequence (client, phase and partition for polls;
        producer and partition for acks): each poll or ack against the one before it).
        Only anomaly rows come back."""
        F = self.F
        rows = (placed.select(*[F.col(c).cast(_L).alias(c) for c in placed_kernel.IN_COLUMNS])
                .repartition(self._spread(ranks.partitions), "topic_h", "part")
                .mapInArrow(placed_kernel.kernel, placed_kernel.OUT_SCHEMA))
        pos = ("pl", "pe", "pb")
        at_position = self._uniform(F.col("kind"), {
            "a": ranks.topic("topic_h"), "b": F.col("part"), "c": F.col("pl"), "d": F.col("pe"),
            "e": F.col("pb")}, {"topic": F.col("topic_h"), **{c: F.col(c) for c in ("part", *pos)}})
        poll = F.col("kind") != "nonmonotonic-send"
        in_sequence = self._uniform(F.col("kind"), self._sequence_key(ranks), {
            **self._sequence_example(),
            "rec": F.when(poll, F.col("grp") == 1),
            "n": F.when(F.col("kind") == "poll-skip", F.col("n")),
        })
        of_position = F.col("kind").isin(*_POS_KINDS)
        return rows.select(*[F.when(of_position, a).otherwise(b).alias(name)
                             for a, b, name in zip(at_position, in_sequence, ("kind", "n", "sk", "ex"))])

    def _spread(self, pairs: Sequence[tuple[int, int]]) -> int:
        """A task count under which the (topic hash, partition) pairs polls read fall in
        different tasks when they can (one kernel call per partition: hashed into the
        default count, two of six partitions often share a task while a core idles). The
        task of a pair is Spark's hash partitioning: pmod(hash(topic_h, part), n)."""
        default = int(self.spark.conf.get("spark.sql.shuffle.partitions"))
        if not pairs:
            return default
        from pyspark.sql.types import LongType, StructField, StructType

        schema = StructType([StructField("t", LongType()), StructField("p", LongType())])
        hashes = [r.h for r in self.spark.createDataFrame(list(pairs), schema)
                  .select(self.F.hash("t", "p").alias("h")).collect()]
        k = len(hashes)

        def load(n: int) -> int:  # the most pairs in one task
            return max(Counter(h % n for h in hashes).values())

        return min(range(k, 4 * k + 1), key=lambda n: (load(n), n))

    def _key_order_rows(self, events: DataFrame, ranks: _Ranks) -> DataFrame:
        """key-order: Key_Shared run polls (``ks_t`` set at ingest) with a position; per
        (topic, subscription, id) the first in poll order (time, then file order); per
        (topic, subscription, key, partition), each first poll against the highest position
        of the earlier ones (the latest such poll is the example's ``prev``)."""
        from pyspark.sql import Window

        F = self.F
        order = ("ks_t", "seq")
        t = F.col("ks_t")
        polls = events.where(t.isNotNull() & ~F.isnan(t) & (F.abs(t) < float("inf")) & F.col("pl").isNotNull()
                             & F.col("topic_h").isNotNull()).select(
            "client_h", "topic_h", "part", "pl", "pe", "pb", "mid", "seq", "ks_t", "ks_sub", "ks_key")
        by_mid = Window.partitionBy("topic_h", "ks_sub", "mid").orderBy(*order)
        firsts = (polls.select("*", F.row_number().over(by_mid).alias("nth"))
                  .where(F.col("nth") == 1).drop("nth"))
        earlier = (Window.partitionBy("topic_h", "ks_sub", "ks_key", "part").orderBy(*order)
                   .rowsBetween(Window.unboundedPreceding, -1))
        top = F.max(F.struct("pl", "pe", "pb", *order, "client_h", "mid")).over(earlier)
        found = (firsts.select("*", top.alias("prev"))
                 .where(self._pos() < self._pos("prev.")))
        return found.select(*self._uniform(
            F.lit("key-order"),
            {"s": F.col("ks_sub"), "a": ranks.topic("topic_h"), "k": F.col("ks_key"), "b": F.col("part"),
             "c": F.col("seq")},
            {"sub": F.col("ks_sub"), "key": F.col("ks_key"), "client": F.col("client_h"), "mid": F.col("mid"),
             "topic": F.col("topic_h"), "part": F.col("part"), "pl": F.col("pl"), "pe": F.col("pe"),
             "pb": F.col("pb"), "client2": F.col("prev.client_h"), "mid2": F.col("prev.mid"),
             "ql": F.col("prev.pl"), "qe": F.col("prev.pe"), "qb": F.col("prev.pb")}))

    def _sequence_key(self, ranks: _Ranks) -> dict[str, Column]:
        F = self.F
        return {"a": ranks.client("client_h"), "b": ranks.topic("topic_h"), "c": F.col("part"),
                "d": F.col("seq")}

    def _sequence_example(self) -> dict[str, Column]:
        """Example fields of a poll or ack and the one before it; their ids are looked up
        later by ``seq`` (ids stay out of the big shuffle)."""
        F = self.F
        cols = ("client_h", "topic_h", "part", "pl", "pe", "pb", "seq")
        return {
            **{name.removesuffix("_h"): F.col(name) for name in cols},
            **{name: F.col(name) for name in ("seq2", "ql", "qe", "qb")},
        }

    def _count_rows(self, mids: DataFrame) -> DataFrame:
        F = self.F
        has, lacks = self._has, self._lacks
        outcomes = {
            "fail": has("f", F_FAIL) & lacks("f", F_OK),
            "info": has("f", F_INFO) & lacks("f", F_OK | F_FAIL),
            "unacked": has("f", F_INV) & lacks("f", F_OK | F_FAIL | F_INFO),
        }
        conditions = {"invoked": has("f", F_INV), "ok": has("f", F_OK), "fail": has("f", F_FAIL),
                      "info": has("f", F_INFO), "polled": has("f", F_RUN),
                      "recovered": has("f", F_REC)}
        for outcome, cond in outcomes.items():
            conditions[f"{outcome}-present"] = cond & has("f", F_REC)
            conditions[f"{outcome}-absent"] = cond & lacks("f", F_REC)
        names = list(conditions)
        sums = mids.agg(*[F.sum(F.when(cond, 1).otherwise(0)).alias(f"c{i}")
                          for i, cond in enumerate(conditions.values())])
        counts = sums.select(F.explode(F.array(*[
            F.struct(F.lit(f"count:{name}").alias("kind"), F.coalesce(F.col(f"c{i}"), F.lit(0)).alias("n"))
            for i, name in enumerate(names)])).alias("c"))
        return counts.select(*self._uniform(F.col("c.kind"), {}, {}, n=F.col("c.n")))

    # -- 5. details and the result ---------------------------------------------

    def result(self) -> CheckResult:
        events = self._ingest()
        names = self._names(events)
        mids = self._mids(events, names)
        totals: dict[str, int] = {}
        firsts: dict[str, list[Row]] = {}
        for row in sorted(self._anomalies(events, mids, names), key=lambda r: r.rn):
            totals[row.kind] = row.total
            firsts.setdefault(row.kind, []).append(row.ex)
        details = self._details(events, mids, firsts)
        examples = {kind: [_example(kind, ex, names, details) for ex in exs]
                    for kind, exs in firsts.items() if not kind.startswith("count:")}
        counts = {kind.removeprefix("count:"): n for kind, n in totals.items() if kind.startswith("count:")}
        anomalies = {kind: n for kind, n in totals.items() if not kind.startswith("count:")}
        return make_result(anomalies, examples, counts)

    def _details(self, events: DataFrame, mids: DataFrame, firsts: Mapping[str, list[Row]]) -> _Details:
        """The events of the example ids and positions that need more than the anomaly row."""
        F = self.F
        ids = sorted({ex.mid for kind in ("duplicate", "unexpected", "aborted-read")
                      for ex in firsts.get(kind, [])})
        places = sorted({_place(ex) for kind in _POS_KINDS for ex in firsts.get(kind, [])})
        seqs = sorted({s for kind in _SEQ_KINDS for ex in firsts.get(kind, []) for s in (ex.seq, ex.seq2)})
        if not ids and not places and not seqs:
            return _Details([], [])

        def at(*cols: str) -> Column:
            cond = F.lit(False)
            for place in places:
                match = F.lit(True)
                for col, value in zip(cols, place):
                    match = match & (F.col(col) == value)
                cond = cond | match
            return cond

        wanted = (F.col("mid").isin(ids) | F.col("seq").isin(seqs)
                  | (F.col("code").isin(POLL, REPLICA) & at(*_PLACE)))
        found = events.where(wanted).select(
            "code", "client", "client_h", "mid", "topic", "topic_h", "part", "pl", "pe", "pb", "flags",
            "seq", "node")
        acks = mids.where(F.col("mid").isin(ids) | at(*[f"ack_{c}" for c in ("topic", *_PLACE[1:])])).select(
            "mid", "ack_topic", "ack_part", "ack_pl", "ack_pe", "ack_pb")
        return _Details(found.collect(), acks.collect())


def _record_type(used: Sequence[tuple[str, str]]) -> str:
    """The struct of one polls record: the used fields with their types."""
    types = dict(_HISTORY_FIELDS)
    return "array<struct<" + ",".join(f"`{field}`:{types[field]}" for _, field in used) + ">>"


class _Ranks:
    """Sort ranks of client and topic hashes (their names' order), as Spark columns; the
    polled partitions."""

    def __init__(self, F: Any, names: _Names) -> None:
        self.F = F
        self.partitions = names.partitions
        self._clients = names.rank(names.clients)
        self._topics = names.rank(names.topics)

    def client(self, col: str) -> Column:
        return self._lookup(self._clients, col)

    def topic(self, col: str) -> Column:
        return self._lookup(self._topics, col)

    def _lookup(self, ranks: Mapping[int, int], col: str) -> Column:
        F = self.F
        if not ranks:
            return F.lit(None).cast(_L)
        pairs = [F.lit(x) for h, r in ranks.items() for x in (h, r)]
        return F.element_at(F.create_map(*pairs), F.col(col))


@dataclass(frozen=True)
class _Details:
    events: list[Row]
    acks: list[Row]


Place = tuple[int, int, int, int, int]
_PLACE = ("topic_h", "part", "pl", "pe", "pb")


def _place(ex: Row) -> Place:
    return (ex.topic, ex.part, ex.pl, ex.pe, ex.pb)


def _pos_of(row: Any, prefix: str = "p") -> tuple[int, int, int] | None:
    first = getattr(row, prefix + "l")
    return None if first is None else (first, getattr(row, prefix + "e"), getattr(row, prefix + "b"))


def _example(kind: str, ex: Row, names: _Names, details: _Details) -> dict[str, Any]:
    """The example dict of one anomaly row (see docs/checker.md for each kind's fields)."""
    topic = names.topics.get(ex.topic) if ex.topic is not None else None
    client = names.clients.get(ex.client) if ex.client is not None else None
    if kind == "key-order":
        return example(subscription=ex.sub, key=ex.key, client=client, mid=ex.mid, topic=topic,
                       partition=ex.part, pos=_pos_of(ex),
                       prev={"client": names.clients.get(ex.client2) if ex.client2 is not None else None,
                             "mid": ex.mid2, "pos": _pos_of(ex, "q")})
    if kind in ("lost-write", "unseen"):
        return example(mid=ex.mid, client=client, topic=topic, partition=ex.part, pos=_pos_of(ex))
    if kind in _SEQ_KINDS:
        phase = None if kind == "nonmonotonic-send" else ("recovery" if ex.rec else "run")
        mid_at = {r.seq: r.mid for r in details.events if r.seq in (ex.seq, ex.seq2)}
        return example(client=client, phase=phase, mid=mid_at.get(ex.seq), topic=topic, partition=ex.part,
                       pos=_pos_of(ex), prev={"mid": mid_at.get(ex.seq2), "pos": _pos_of(ex, "q")},
                       skipped=ex.n)
    if kind == "duplicate":
        bindings = {(r.topic, r.part, _pos_of(r)) for r in details.events
                    if r.mid == ex.mid and r.code == POLL and r.pl is not None and r.topic is not None}
        bindings |= {(names.topics[a.ack_topic], a.ack_part, _pos_of(a, "ack_p")) for a in details.acks
                     if a.mid == ex.mid and a.ack_pl is not None and a.ack_topic is not None}
        return example(mid=ex.mid, positions=[example(topic=t, partition=p, pos=pos)
                                              for t, p, pos in sorted(bindings)[:MAX_EXAMPLES]])
    if kind in ("unexpected", "aborted-read"):
        reads = [r for r in details.events if r.mid == ex.mid and r.code == POLL
                 and (kind == "unexpected" or r.client_h in names.rc_clients)]
        first = min(reads, key=lambda r: r.seq)
        return example(mid=ex.mid, client=first.client,
                       phase="recovery" if first.flags & ROW_REC else "run", topic=first.topic,
                       partition=first.part, pos=_pos_of(first))
    place = _place(ex)
    here = [r for r in details.events if r.code in (POLL, REPLICA) and r.mid is not None
            and (r.topic_h, r.part, r.pl, r.pe, r.pb) == place]
    pos = (ex.pl, ex.pe, ex.pb)
    if kind == "replica-divergence":
        replicas = sorted({(r.node, r.mid) for r in here if r.code == REPLICA}, key=_none_first)
        return example(topic=topic, partition=ex.part, pos=pos,
                       replicas=[{"node": node, "mid": mid} for node, mid in replicas])
    acked = {a.mid for a in details.acks
             if (a.ack_topic, a.ack_part, a.ack_pl, a.ack_pe, a.ack_pb) == place}
    mids = sorted({r.mid for r in here} | acked)
    return example(topic=topic, partition=ex.part, pos=pos, mids=mids[:MAX_EXAMPLES])


def _none_first(item: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((x is not None, x if x is not None else "") for x in item)
