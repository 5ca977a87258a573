"""The key-order family: Pulsar's Key_Shared delivery order (docs/pulsar.md).

- ``key-order``: run-phase polls with ``subscription_type`` ``Key_Shared``, a ``key``, a
  ``mid``, a position and a time ``t``; per (topic, subscription, id) only the first poll
  in poll order (by ``t``, then file order) counts, later ones are redeliveries; per
  (topic, subscription, key, partition), a first poll whose position is lower than the
  highest position among the earlier first polls. Counted per poll.

Polls of different partitions, keys, subscriptions or topics are not compared, nor
recovery-phase polls, nor polls of other subscription types; a poll whose ``t`` is
absent, not a number or not finite is not judged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import Window
from pyspark.sql import functions as F

from harness.check.anomalies.columns import Ranks, pos, uniform
from harness.check.anomalies.vocab import Details, Names, pos_of
from harness.check.result import example

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["KINDS", "LOOKUP", "example_of", "rows"]

KINDS = ("key-order",)
LOOKUP: tuple[str, ...] = ()


def rows(events: DataFrame, ranks: Ranks) -> DataFrame:
    """key-order rows of the events: Key_Shared run polls (``ks_t`` set at ingest) with a
    position; per (topic, subscription, id) the first in poll order (time, then file
    order); per (topic, subscription, key, partition), each first poll against the highest
    position of the earlier ones (the latest such poll is the example's ``prev``)."""
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
    found = firsts.select("*", top.alias("prev")).where(pos() < pos("prev."))
    return found.select(*uniform(
        F.lit("key-order"),
        {"s": F.col("ks_sub"), "a": ranks.topic("topic_h"), "k": F.col("ks_key"), "b": F.col("part"),
         "c": F.col("seq")},
        {"sub": F.col("ks_sub"), "key": F.col("ks_key"), "client": F.col("client_h"), "mid": F.col("mid"),
         "topic": F.col("topic_h"), "part": F.col("part"), "pl": F.col("pl"), "pe": F.col("pe"),
         "pb": F.col("pb"), "client2": F.col("prev.client_h"), "mid2": F.col("prev.mid"),
         "ql": F.col("prev.pl"), "qe": F.col("prev.pe"), "qb": F.col("prev.pb")}))


def example_of(kind: str, ex: Any, names: Names, details: Details) -> dict[str, Any]:
    """The example of one anomaly row (docs/checker.md names its fields)."""
    return example(subscription=ex.sub, key=ex.key, client=names.client(ex.client), mid=ex.mid,
                   topic=names.topic(ex.topic), partition=ex.part, pos=pos_of(ex),
                   prev={"client": names.client(ex.client2), "mid": ex.mid2, "pos": pos_of(ex, "q")})
