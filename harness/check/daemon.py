"""The shared server's Python daemon (``spark.python.daemon.module``): PySpark's own,
with what the checker's kernels import loaded before it forks its workers, so a
worker started after the pool's idle time does not import NumPy and PyArrow again."""

from __future__ import annotations

import numpy  # noqa: F401
import pyarrow  # noqa: F401
import pyarrow.compute  # noqa: F401
import pyarrow.dataset  # noqa: F401
import pyarrow.json  # noqa: F401
import pyarrow.parquet  # noqa: F401
from pyspark import daemon

if __name__ == "__main__":
    daemon.manager()
