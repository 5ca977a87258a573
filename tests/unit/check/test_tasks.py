"""One Spark task per row of a kernel's task list (harness.check.engine.tasks, Frames.each)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from harness.check import ingest, plan
from harness.check.engine import tasks


def _ids(*ids: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array(ids, pa.int64())], names=["id"])


def test_by_index_hands_the_kernel_the_rows_of_its_ids_in_their_order() -> None:
    seen: list[list[dict[str, Any]]] = []

    def kernel(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            seen.append(batch.to_pylist())
            yield batch

    rows = [("a", 1, None), ("b", 2, True), ("c", 3, False)]
    run = tasks.by_index(rows, "name string, n long, flag boolean", kernel)
    assert len(list(run([_ids(2, 0), _ids(1)]))) == 1  # one batch for the task's rows
    assert seen == [[{"name": "c", "n": 3, "flag": False}, {"name": "a", "n": 1, "flag": None},
                     {"name": "b", "n": 2, "flag": True}]]
    seen.clear()
    assert list(run([_ids()])) == [] and seen == []  # no ids: the kernel is not called
    assert tasks.columns("path string, file long,replicas boolean") == ["path", "file", "replicas"]


def test_each_row_is_its_own_spark_task_costliest_first(tmp_path: Path) -> None:
    """In a big check; the local relation this replaced gave 2 tasks (one per core) of
    fixed shares of the rows. A small check keeps that: a task costs more than its rows."""

    def _where_run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        assert context is not None
        for batch in batches:
            for row in batch.to_pylist():
                yield pa.RecordBatch.from_pydict({"n": pa.array([row["n"]], pa.int64()),
                                                  "part": pa.array([context.partitionId()], pa.int64())})

    # the session now: a test before may have stopped the one the fixture started
    job = plan._Job(plan.session_for(), tmp_path, plan._Inputs(tmp_path, [], [])).frames
    assert not job.spread  # no input
    job.spread = True
    rows = [(n,) for n in range(7)]
    costs = [1, 7, 3, 2, 6, 5, 4]
    out = {r.n: r.part for r in job.each(rows, "n long", _where_run, "n long, part long", costs).collect()}
    assert sorted(out) == list(range(7))
    assert sorted(out.values()) == list(range(7))  # a partition, so a task, each
    assert sorted(out, key=out.__getitem__) == [1, 4, 5, 6, 2, 3, 0]  # by cost, highest first
    if job.cores > 1:  # one slot is a limit
        one = job.each(rows, "n long", _where_run, "n long, part long", costs, slots=1).collect()
        assert sorted(r.n for r in one) == list(range(7)) and {r.part for r in one} == {0}
    cores = job.each(rows, "n long", _where_run, "n long, part long", costs, slots=job.cores).collect()
    assert len({r.part for r in cores}) == 7  # a slot per core: no limit
    assert job.each([], "n long", _where_run, "n long, part long").collect() == []

    job.spread = False
    small = {r.n: r.part for r in job.each(rows, "n long", _where_run, "n long, part long", costs).collect()}
    assert sorted(small) == list(range(7))
    assert len(set(small.values())) == min(7, job.cores)  # a task per core
    assert [small[n] for n in range(7)] == sorted(small.values())  # shares in the rows' order


def test_a_check_is_big_from_more_than_a_split_per_core(tmp_path: Path) -> None:
    history = tmp_path / "h.jsonl"
    with open(history, "wb") as fh:
        fh.truncate(2 * ingest.SPLIT_BYTES)  # sparse: no disk used
    cores = os.cpu_count() or 1

    def spread(size: int, local: bool = True) -> bool:
        os.truncate(history, size)
        inputs = plan._Inputs(tmp_path, [str(history)], [], local)
        return plan._Job(None, tmp_path, inputs).spread  # type: ignore[arg-type]

    assert not spread(cores * ingest.SPLIT_BYTES)
    assert spread(cores * ingest.SPLIT_BYTES + 1)
    assert spread(1, local=False)  # a cluster's cores are not counted here
