"""The transaction family: atomicity of a transaction's ids (docs/checker.md,
"Transactions", states each transaction: committed, aborted, unknown, seen-committed).

- ``torn-transaction``: a committed or seen-committed transaction with at least one id in
  a read_committed recovery read and at least one id absent from the recovery read
  (atomicity: all or none). Counted per transaction.

Also the transaction counts (``txn-committed``, ``txn-aborted``, ``txn-unknown``,
``txn-seen-committed``), the result's listing of transactions, and each id's
transaction state, which the id family's conditions read (:func:`with_state`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from harness.check.anomalies.columns import has, lacks, sums, uniform
from harness.check.anomalies.vocab import (
    F_RC_READ,
    F_REC,
    F_REC_RC,
    F_RU_READ,
    INVOKE,
    LONG,
    STRING,
    TS_ABORTED,
    TS_COMMITTED,
    TS_NAMES,
    TS_NONE,
    TS_SEEN,
    TS_UNKNOWN,
    Details,
    Names,
    txa,
)
from harness.check.result import MAX_TRANSACTIONS, example

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["CALLS_DDL", "KINDS", "LOOKUP", "calls", "example_of", "listing", "named", "rows", "table",
           "with_state"]

KINDS = ("torn-transaction",)
LOOKUP: tuple[str, ...] = ()
#: a run's transaction calls per transaction (:func:`calls`)
CALLS_DDL = "tx_h long, c_ok int, a_ok int, commit_t double, tx string, tx_client long, tx_seq long"


def calls(txn_events: DataFrame) -> DataFrame:
    """Per transaction hash, from its ``txn`` events: whether a commit or an abort was
    acknowledged, its commit time (its first commit call), its name, client and first
    place in file order."""
    action = F.col("txa")
    return txn_events.where(F.col("tx_h").isNotNull()).groupBy("tx_h").agg(
        F.max(F.when(action == txa("commit", "ok"), 1).otherwise(0)).alias("c_ok"),
        F.max(F.when(action == txa("abort", "ok"), 1).otherwise(0)).alias("a_ok"),
        F.min(F.when(action == txa("commit", "invoke"), F.col("t"))).alias("commit_t"),
        F.min_by("tx", "seq").alias("tx"), F.min_by("client_h", "seq").alias("tx_client"),
        F.min("seq").alias("tx_seq"))


def table(sent: DataFrame, per_tx: DataFrame) -> DataFrame:
    """One row per transaction: its state ``ts`` (``TS_*``), commit time, name, producer
    and order, and of its ids: how many (``n``), in the recovery read (``rec``; by a
    read_committed reader ``rec_rc``), read by read_committed (``rc``) and
    read_uncommitted (``ru``) clients, and one missing from the recovery read. ``sent``:
    the per-id rows of the ids sent in a transaction; ``per_tx``: :func:`calls` (of
    :data:`CALLS_DDL`). A transaction's name is that of its first ``txn`` event (none:
    :func:`named`)."""

    def ids(bits: int) -> Column:
        return F.sum(F.when(has("f", bits), 1).otherwise(0))

    of_ids = sent.groupBy("tx_h").agg(
        F.count(F.lit(1)).alias("n"), ids(F_REC).alias("rec"), ids(F_REC_RC).alias("rec_rc"),
        ids(F_RC_READ).alias("rc"), ids(F_RU_READ).alias("ru"),
        F.min(F.when(lacks("f", F_REC), F.col("mid"))).alias("missing"),
        F.min_by("inv_client", "inv_seq").alias("inv_client"), F.min("inv_seq").alias("inv_seq"))
    both = of_ids.join(per_tx, "tx_h", "full")
    state = (F.when(F.col("c_ok") == 1, TS_COMMITTED).when(F.col("a_ok") == 1, TS_ABORTED)
             .when(F.coalesce(F.col("rc"), F.lit(0)) > 0, TS_SEEN).otherwise(TS_UNKNOWN))
    return both.select(
        "tx_h", state.alias("ts"), "commit_t", "tx",
        F.coalesce("inv_client", "tx_client").alias("client"),
        F.coalesce("inv_seq", "tx_seq").alias("order"),
        *[F.coalesce(F.col(c), F.lit(0)).cast(LONG).alias(c) for c in ("n", "rec", "rec_rc", "rc", "ru")],
        "missing")


def named(txns: DataFrame, events: DataFrame) -> DataFrame:
    """``txns`` with the transactions that have no ``txn`` event named by their first send."""
    sends = (events.where((F.col("code") == INVOKE) & F.col("tx_h").isNotNull())
             .groupBy("tx_h").agg(F.min_by("tx", "seq").alias("sent_tx")))
    return txns.join(sends, "tx_h", "left").select(
        *[F.coalesce("tx", "sent_tx").alias("tx") if c == "tx" else F.col(c) for c in txns.columns])


def with_state(mids: DataFrame, txns: DataFrame | None) -> DataFrame:
    """``mids`` with its transaction's state ``ts``, name ``tx`` and ``commit_t``."""
    if txns is None:
        return mids.select("*", F.lit(TS_NONE).alias("ts"), F.lit(None).cast(STRING).alias("tx"),
                           F.lit(None).cast("double").alias("commit_t"))
    joined = mids.join(F.broadcast(txns.select("tx_h", "ts", "tx", "commit_t")), "tx_h", "left")
    return joined.withColumn("ts", F.coalesce(F.col("ts"), F.lit(TS_NONE)))


def _torn() -> Column:
    return F.col("ts").isin(TS_COMMITTED, TS_SEEN) & (F.col("rec_rc") > 0) & (F.col("rec") < F.col("n"))


def rows(txns: DataFrame) -> DataFrame:
    """torn-transaction, one row per transaction, and the transaction counts."""
    torn = txns.where(_torn()).select(*uniform(
        F.lit("torn-transaction"), {"s": F.col("tx")},
        {"tx": F.col("tx"), "client": F.col("client"), "n": F.col("n"), "n2": F.col("rec"),
         "mid": F.col("missing")}))
    ts = F.col("ts")
    counts = {"txn-committed": ts == TS_COMMITTED, "txn-aborted": ts == TS_ABORTED,
              "txn-unknown": ts.isin(TS_SEEN, TS_UNKNOWN), "txn-seen-committed": ts == TS_SEEN}
    return torn.unionByName(sums(txns, counts))


def listing(txns: DataFrame | None, names: Names, total: int) -> dict[str, Any] | None:
    """The result's listing: up to MAX_TRANSACTIONS transactions, torn ones and aborted
    ones a read_committed client read first, then in the order they began; ``total``
    transactions in all (the counts')."""
    if txns is None:
        return None
    flagged = _torn() | ((F.col("ts") == TS_ABORTED) & (F.col("rc") > 0))
    found = (txns.select("*", flagged.alias("flagged"))
             .orderBy(F.col("flagged").desc(), F.col("order").asc_nulls_last(), "tx")
             .limit(MAX_TRANSACTIONS).collect())
    return {"total": total, "shown": [{
        "tx": r.tx, "client": names.client(r.client), "state": TS_NAMES[r.ts], "ids": r.n,
        "recovered": r.rec, "read_committed": r.rc, "read_uncommitted": r.ru, "flagged": bool(r.flagged)}
        for r in found]}


def example_of(kind: str, ex: Any, names: Names, details: Details) -> dict[str, Any]:
    """The example of one anomaly row (docs/checker.md names its fields)."""
    return example(tx=ex.tx, client=names.client(ex.client), ids=ex.n, recovered=ex.n2, missing=ex.mid)
