"""Where the checker's servers keep their state, which Spark and Java they run, and
whether a process lives: what the server, its AOT cache and the scratch space share."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["alive", "pyspark_version", "spark_home", "state_dir"]


def state_dir() -> Path:
    """``$HARNESS_SPARK_STATE``, else ``$XDG_CACHE_HOME/harness/spark-connect``."""
    explicit = os.environ.get("HARNESS_SPARK_STATE")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "harness" / "spark-connect"


def spark_home() -> Path:
    """The Spark distribution inside the installed pyspark (its jars, bin/, sbin/)."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


def pyspark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (and is not a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    try:  # a zombie child of this process is not alive
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
