"""The copy family: a copier's exactly-once (docs/checker.md, "Exactly once"). A copier
reads an input topic and writes each record it reads to an output topic in transactions;
each of its sends is a new id whose first invoke carries ``src``, the input id it copies.
A copy counts when the read_committed recovery read has it.

- ``eos-duplicate``: an input id with two or more copies in the read_committed recovery
  read. Counted per input id.
- ``eos-loss``: an input id in the read_committed recovery read, with an acknowledged
  position, without a copy there, below (in its topic and partition) the highest
  acknowledged position of an input id that has one: the copier went past it and never
  copied it. Counted per input id.

Also the count ``eos-copied``: the input ids with at least one visible copy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from harness.check.anomalies.columns import has, sums, uniform
from harness.check.anomalies.vocab import F_REC_RC, Details, Names, pos_of
from harness.check.result import example

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["KINDS", "LOOKUP", "example_of", "rows"]

KINDS = ("eos-duplicate", "eos-loss")
LOOKUP: tuple[str, ...] = ()


def rows(mids: DataFrame) -> DataFrame:
    """eos-duplicate, eos-loss and the eos-copied count of the per-id rows ``mids`` (of a
    run where some send copies an input record: has a ``src``)."""
    copies = (mids.where(F.col("src").isNotNull() & has("f", F_REC_RC)).groupBy("src")
              .agg(F.count(F.lit(1)).alias("copies"), F.min("mid").alias("copy")))
    duplicate = copies.where(F.col("copies") > 1).select(*uniform(
        F.lit("eos-duplicate"), {"s": F.col("src")},
        {"mid": F.col("src"), "n": F.col("copies"), "mid2": F.col("copy")}))
    # per input (topic, partition): the highest acknowledged position of a copied input id
    at = F.struct("ack_pl", "ack_pe", "ack_pb")
    placed = mids.where(F.col("ack_pl").isNotNull() & F.col("ack_topic").isNotNull()).select(
        "mid", "f", "ack_topic", "ack_part", "ack_pl", "ack_pe", "ack_pb", at.alias("at"))
    copied = copies.select(F.col("src").alias("mid"))
    bound = (placed.join(copied, "mid", "left_semi").groupBy("ack_topic", "ack_part")
             .agg(F.max("at").alias("bound")))
    lost = (placed.where(has("f", F_REC_RC)).join(copied, "mid", "left_anti")
            .join(F.broadcast(bound), ["ack_topic", "ack_part"]).where(F.col("at") < F.col("bound")))
    loss = lost.select(*uniform(F.lit("eos-loss"), {"s": F.col("mid")}, {
        "mid": F.col("mid"), "topic": F.col("ack_topic"), "part": F.col("ack_part"),
        "pl": F.col("ack_pl"), "pe": F.col("ack_pe"), "pb": F.col("ack_pb")}))
    return duplicate.unionByName(loss).unionByName(sums(copies, {"eos-copied": F.lit(True)}))


def example_of(kind: str, ex: Any, names: Names, details: Details) -> dict[str, Any]:
    """The example of one anomaly row (docs/checker.md names its fields)."""
    if kind == "eos-duplicate":
        return example(mid=ex.mid, copies=ex.n, copy=ex.mid2)
    return example(mid=ex.mid, topic=names.topic(ex.topic), partition=ex.part, pos=pos_of(ex))
