"""How a check's steps hand work to Spark: a kernel over a list of tasks, and a table
staged as Parquet in the scratch directory. Names no anomaly and no step."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.check.engine import tasks

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["Frames"]


class Frames:
    """A check's Spark work on ``spark``, its Parquet in ``scratch``. ``cores``: the cores
    the check counts on; ``spread``: a Spark task per row of a task list (a big check, or
    executors elsewhere) rather than Spark's own cut of a local relation."""

    def __init__(self, spark: SparkSession, scratch: Path, cores: int, spread: bool) -> None:
        self.spark = spark
        self.scratch = scratch
        self.cores = cores
        self.spread = spread

    def stage(self, name: str, df: DataFrame, dictionary: Sequence[str] = ()) -> DataFrame:
        """Write ``df`` as Parquet in the scratch directory and read it back.

        Dictionaries do not pay for mostly distinct values (ids, positions, seq): only the
        ``dictionary`` columns (a few distinct values: names, codes, flags) get one.
        """
        path = str(self.scratch / name)
        writer = df.write.option("parquet.enable.dictionary", "false")
        for col in dictionary:
            writer = writer.option(f"parquet.enable.dictionary#{col}", "true")
        writer.parquet(path)
        return self.spark.read.schema(df.schema).parquet(path)

    def each(self, rows: Sequence[tuple[Any, ...]], ddl: str, kernel: Any, out_schema: str,
             costs: Sequence[float] | None = None, slots: int | None = None) -> DataFrame:
        """``kernel`` (``mapInArrow`` over task rows of schema ``ddl``) over ``rows``. In a
        big check, one Spark task per row, the costliest first when ``costs`` are given
        (:mod:`harness.check.engine.tasks`); else the rows as a local relation, which Spark
        cuts in one task per core (a task costs more than a small check's rows). ``slots``:
        at most that many tasks at once, when fewer than the cores."""
        limit = slots if slots is not None and slots < min(len(rows), self.cores) else None
        if not self.spread:
            frame = self.spark.createDataFrame(rows, ddl)
            if limit is not None:
                frame = frame.coalesce(1) if limit == 1 else frame.repartition(limit)
            return frame.mapInArrow(kernel, out_schema)
        if costs is not None:
            order = sorted(range(len(rows)), key=lambda i: -costs[i])
            rows = [rows[i] for i in order]
        frame = self.spark.range(0, len(rows), 1, max(1, len(rows)))
        if limit is not None:
            frame = frame.coalesce(limit)
        return frame.mapInArrow(tasks.by_index(rows, ddl, kernel), out_schema)
