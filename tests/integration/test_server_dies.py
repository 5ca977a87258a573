"""The shared checker server's JVM killed during a check, for real: the check fails at once
with what happened (not after Spark Connect's ten minutes of retries), and the next check
starts a new server and finds what the history holds."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.check import check_run, plan
from harness.check.engine import server
from harness.errors import CheckError
from harness.testing.synthetic import Profile, generate


@pytest.fixture()
def own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A state directory of the test's own: its servers, not the session's shared one."""
    monkeypatch.setenv("HARNESS_SPARK_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("HARNESS_SPARK_AOT", "0")  # no training after the idle stop
    plan.close()  # this process's session is on the suite's server
    yield tmp_path / "state"
    plan.close()
    server.stop()


def test_a_check_whose_server_dies_fails_at_once_and_the_next_starts_a_new_one(
        own_state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    expected = generate(run, Profile(records=400, inject={"lost-write": 1}))
    ingest = plan._Job._ingest
    killed: list[int] = []

    def kill_the_jvm_first(self: Any) -> Any:  # the session is made: kill -9 the server's JVM
        srv = server.running()
        assert srv is not None
        os.kill(srv.jvm_pid, signal.SIGKILL)
        killed.append(srv.jvm_pid)
        deadline = time.monotonic() + 30
        while server.alive(srv.jvm_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        return ingest(self)

    monkeypatch.setattr(plan._Job, "_ingest", kill_the_jvm_first)
    with pytest.raises(CheckError) as err:
        check_run(run)
    log = server.server_dir() / "server.log"
    assert str(err.value) == (f"{run}: Spark check failed: the shared Spark server stopped during the check "
                              f"(its JVM exited; see {log}): check again, a new server starts")
    assert killed and server.running() is None

    monkeypatch.setattr(plan._Job, "_ingest", ingest)
    result = check_run(run)
    srv = server.running()
    assert srv is not None and srv.jvm_pid not in killed
    assert result.anomalies == expected.anomalies and result.counts == expected.counts
