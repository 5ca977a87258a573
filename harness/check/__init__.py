"""The checker: judges a run's history against Jepsen's queue anomalies, with Spark.

``check_run(run_dir)`` reads ``history/*.jsonl`` (client events, see
:mod:`harness.history`) and the optional ``replicas/*.jsonl`` (records found in
each replica's log after recovery) and returns a :class:`CheckResult`: anomaly
counts, a few examples of each, outcome counts, the count of history lines and of
those that could not be read and were skipped, and the run's latency and availability
(:mod:`harness.check.latency`). The anomaly definitions are
in ``docs/checker.md``; :mod:`harness.testing.reference_checker` implements the
same definitions in plain Python.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.check.result import ANOMALIES, COUNTS, INFORMATIONAL, CheckResult

__all__ = ["ANOMALIES", "COUNTS", "INFORMATIONAL", "CheckResult", "check_run"]


def check_run(run_dir: str | os.PathLike[str], *, spark_master: str | None = None) -> CheckResult:
    """Check the run in ``run_dir`` with Spark on ``spark_master`` (default: the shared local
    Spark Connect server, :mod:`harness.check.server`; see :func:`spark_job.session`).

    Raises :class:`harness.errors.CheckError` when the run cannot be read (a missing
    ``history/``, a history or replica file that is not a readable regular file: found
    before Spark starts), when no history line could be read, or when Spark (or pyspark,
    or Java) is missing or fails.
    """
    from harness.check import spark_job  # pyspark loads only when a check runs

    return spark_job.run(Path(run_dir), spark_master)
