"""The checker: judges a run's history against Jepsen's queue anomalies, with Spark.

Two wings and a plan between them. :mod:`harness.check.anomalies`: what each anomaly is,
one module per family (its definition, its Spark condition or NumPy kernel, its example).
:mod:`harness.check.engine`: where a check runs and how fast (the Spark session, the shared
Connect server, its AOT cache, the worker daemon, the master, scratch space, task
scheduling and memory), naming no anomaly. :mod:`harness.check.plan`: the steps of a
check, composing the families on the engine, with the step kernels beside it (``ingest``,
``mids``, ``placed``, ``details``, ``latency``) and its inputs (``inputs``, ``lines``,
``result``). The rule, which ``tests/unit/test_layering.py`` enforces file by file: the
engine never imports the anomalies or the plan; the anomalies never import the engine or
the plan; no two files of ``check/`` import each other in a circle.

``check_run(run_dir)`` reads ``history/*.jsonl`` (client events, see
:mod:`harness.history`) and the optional ``replicas/*.jsonl`` (records found in
each replica's log after recovery) and returns a :class:`CheckResult`: anomaly
counts, a few examples of each, outcome counts, the count of history lines and of
those that could not be read and were skipped, and the run's latency and availability
(:mod:`harness.check.latency`). The anomaly definitions are
in their family modules (:mod:`harness.check.anomalies`) and ``docs/checker.md``;
:mod:`harness.testing.reference_checker` implements the same definitions in plain Python.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.check.result import ANOMALIES, COUNTS, INFORMATIONAL, CheckResult

__all__ = ["ANOMALIES", "COUNTS", "INFORMATIONAL", "CheckResult", "check_run"]


def check_run(run_dir: str | os.PathLike[str], *, spark_master: str | None = None) -> CheckResult:
    """Check the run in ``run_dir`` with Spark on ``spark_master`` (default: the shared local
    Spark Connect server, :mod:`harness.check.engine.server`; see
    :func:`harness.check.engine.session.session`).

    Raises :class:`harness.errors.CheckError` when the run cannot be read (a missing
    ``history/``, a history or replica file that is not a readable regular file: found
    before Spark starts), when no history line could be read, or when Spark (or pyspark,
    or Java) is missing or fails.
    """
    from harness.check import plan  # pyspark loads only when a check runs

    return plan.run(Path(run_dir), spark_master)
