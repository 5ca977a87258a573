"""One Spark task per row of a kernel's task list (no Spark here: the function runs in
the Python workers, pickled by value).

A kernel of the checker (``mapInArrow`` over rows of task arguments: file splits, id
buckets, (topic, partition) pairs, directories) got its rows as a local relation, which
Spark cuts into one partition per core: on 2 cores, at 10M records, two ingest tasks of
15 and 16 file splits, fixed before either started, so that one core could sit idle
while the other finished a costlier share. In a big check the job now runs
``spark.range(n, numPartitions=n)`` (one id per partition) and :func:`by_index` hands
the kernel the row of each id: tasks are taken as cores free up, in the order of the
list (the job puts the costliest first).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

Kernel = Callable[[Iterable[Any]], Iterator[Any]]


def columns(ddl: str) -> list[str]:
    """The column names of a DDL schema string (``"path string, file long"``)."""
    return [part.split()[0] for part in ddl.split(",")]


def by_index(rows: Sequence[tuple[Any, ...]], ddl: str, kernel: Kernel) -> Kernel:
    """The ``mapInArrow`` function over ``spark.range`` ids: ``kernel`` over the rows
    (of schema ``ddl``) at those indices of ``rows``."""
    names = columns(ddl)

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa

        picked = [dict(zip(names, rows[i], strict=True))
                  for batch in batches for i in batch.column(0).to_pylist()]
        if picked:
            yield from kernel(iter([pa.RecordBatch.from_pylist(picked)]))

    return run
