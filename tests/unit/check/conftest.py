"""Fixtures for the checker tests: one SparkSession (one JVM) for the whole session."""

from __future__ import annotations

from typing import Any

import pytest

from harness.check import check_run, plan
from harness.testing.synthetic import Profile, generate


@pytest.fixture(scope="session", autouse=True)
def spark(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The process's checker session, started once: every check_run below reuses it.

    One small check warms it up here, not inside a hypothesis example: the JIT, and
    pyspark's first DataFrame call and its imports (hypothesis warns about a first call
    that changes the recursion limit, as IPython's import did before the check's
    session stopped importing it).
    """
    session = plan.session_for()
    run = tmp_path_factory.mktemp("warm-up")
    generate(run, Profile(records=50))
    check_run(run)
    return session

