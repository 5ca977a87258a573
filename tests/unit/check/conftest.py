"""Fixtures for the checker tests: one SparkSession (one JVM) for the whole session, and
the reference checker."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from harness.check import check_run, spark_job
from harness.check.synthetic import Profile, generate

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session", autouse=True)
def spark(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The process's checker session, started once: every check_run below reuses it.

    One small check warms it up here, not inside a hypothesis example: the JIT, and
    pyspark's first DataFrame call, which imports IPython (if installed), which raises
    the recursion limit (hypothesis warns about that).
    """
    session = spark_job.session()
    run = tmp_path_factory.mktemp("warm-up")
    generate(run, Profile(records=50))
    check_run(run)
    return session


@pytest.fixture(scope="session")
def reference() -> ModuleType:
    """bench/reference_checker.py (the bench directory is not a package)."""
    path = ROOT / "bench" / "reference_checker.py"
    spec = importlib.util.spec_from_file_location("reference_checker", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
