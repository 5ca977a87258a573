"""The Spark columns the families build their conditions and rows from: flag tests, the
uniform anomaly row (:data:`harness.check.anomalies.vocab.SK_FIELDS`, ``EX_FIELDS``), count
rows, and the sort ranks of names."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from harness.check.anomalies.vocab import EX_FIELDS, LONG, SK_FIELDS, Names

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["Ranks", "any_of", "explode_kinds", "has", "lacks", "pos", "sums", "uniform"]


def has(col: str, bits: int) -> Column:
    """Some of ``bits`` are set in ``col``."""
    return F.col(col).bitwiseAND(bits) != 0


def lacks(col: str, bits: int) -> Column:
    """None of ``bits`` is set in ``col``."""
    return F.col(col).bitwiseAND(bits) == 0


def pos(prefix: str = "") -> Column:
    """A row's position as a struct (``l``, ``e``, ``b``): it compares as positions do."""
    return F.struct(F.col(prefix + "pl").alias("l"), F.col(prefix + "pe").alias("e"),
                    F.col(prefix + "pb").alias("b"))


def uniform(kind: Column, sk: Mapping[str, Column], ex: Mapping[str, Column],
            n: Column | None = None) -> list[Column]:
    """Columns of the uniform anomaly row (kind, n, sk, ex); missing fields null."""

    def typed(fields: Iterable[tuple[str, str]], given: Mapping[str, Column]) -> Column:
        return F.struct(*[given.get(name, F.lit(None)).cast(t).alias(name) for name, t in fields])

    return [kind.alias("kind"), (F.lit(1) if n is None else n).cast(LONG).alias("n"),
            typed(SK_FIELDS, sk).alias("sk"), typed(EX_FIELDS, ex).alias("ex")]


def any_of(conditions: Mapping[str, Column]) -> Column:
    """True where one of ``conditions`` holds (a null one counts as false)."""
    anyone = F.lit(False)
    for cond in conditions.values():
        anyone = anyone | F.coalesce(cond, F.lit(False))
    return anyone


def explode_kinds(df: DataFrame, conditions: Mapping[str, Column]) -> DataFrame:
    """One row per (row of ``df``, kind whose condition holds), kind in column ``kind``."""
    kinds = F.array_compact(F.array(*[F.when(cond, F.lit(kind)) for kind, cond in conditions.items()]))
    return df.where(any_of(conditions)).select(F.explode(kinds).alias("kind"), "*")


def sums(df: DataFrame, conditions: Mapping[str, Column], weight: str | None = None) -> DataFrame:
    """Uniform ``count:<name>`` rows: the rows of ``df`` where each condition holds (each
    counting as its ``weight`` column, else as one)."""
    names = list(conditions)
    one = F.lit(1) if weight is None else F.col(weight)
    totals = df.agg(*[F.sum(F.when(cond, one).otherwise(0)).alias(f"c{i}")
                      for i, cond in enumerate(conditions.values())])
    counts = totals.select(F.explode(F.array(*[
        F.struct(F.lit(f"count:{name}").alias("kind"), F.coalesce(F.col(f"c{i}"), F.lit(0)).alias("n"))
        for i, name in enumerate(names)])).alias("c"))
    return counts.select(*uniform(F.col("c.kind"), {}, {}, n=F.col("c.n")))


class Ranks:
    """Sort ranks of client and topic hashes (their names' order), as Spark columns."""

    def __init__(self, names: Names) -> None:
        self._clients = names.rank(names.clients)
        self._topics = names.rank(names.topics)

    def client(self, col: str) -> Column:
        return self._lookup(self._clients, col)

    def topic(self, col: str) -> Column:
        return self._lookup(self._topics, col)

    def _lookup(self, ranks: Mapping[int, int], col: str) -> Column:
        if not ranks:
            return F.lit(None).cast(LONG)
        pairs = [F.lit(x) for h, r in ranks.items() for x in (h, r)]
        return F.element_at(F.create_map(*pairs), F.col(col))
