"""Fixtures for the checker tests: one SparkSession (one JVM) for the whole session, the
reference checker, synthetic runs, and strategies for their profiles."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import strategies as st

from harness.check import ANOMALIES, check_run, spark_job
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


def profiles(*, inject: bool) -> st.SearchStrategy[Profile]:
    """Random small profiles; with ``inject``, a random set of anomalies (1-2 of each)."""

    @st.composite
    def build(draw: st.DrawFn) -> Profile:
        replicas = draw(st.integers(0, 3))
        kinds = [k for k in ANOMALIES if replicas >= 2 or k != "replica-divergence"]
        chosen = draw(st.dictionaries(st.sampled_from(kinds), st.integers(1, 2))) if inject else {}
        return Profile(
            records=draw(st.integers(150, 400)) + 60 * sum(chosen.values()),
            system=draw(st.sampled_from(["kafka", "pulsar"])),
            topics=draw(st.integers(1, 2)),
            partitions=draw(st.integers(1, 4)),
            producers=draw(st.integers(1, 3)),
            consumers=draw(st.integers(1, 3)),
            replicas=replicas,
            txn=draw(st.booleans()),
            rewinds=draw(st.booleans()),
            torn=draw(st.booleans()),
            seed=draw(st.integers(0, 1 << 16)),
            inject=chosen,
        )

    return build()


def example_mids(example: dict[str, Any]) -> set[str]:
    """The message ids an example names (not its ``prev``)."""
    found = {example["mid"]} if "mid" in example else set()
    found |= set(example.get("mids", []))
    found |= {r["mid"] for r in example.get("replicas", [])}
    return found
