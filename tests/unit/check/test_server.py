"""The shared Spark Connect server's bookkeeping (harness.check.server), without a JVM:
what counts as running, idle, stopped. (Every checker test runs on a real one.)"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from harness.check import server
from harness.errors import CheckError


@pytest.fixture()
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HARNESS_SPARK_STATE", str(tmp_path))
    return tmp_path


def _record(state: Path, pid: int, jvm_pid: int) -> None:
    (state / "server.json").write_text(json.dumps({
        "pid": pid, "jvm_pid": jvm_pid, "port": 1, "python": "py", "pyspark": "4", "started": 1.0,
        "session": "00000000-0000-0000-0000-000000000000"}))


def test_a_record_of_dead_processes_is_not_a_running_server(state: Path) -> None:
    _record(state, pid=2**22 + 7, jvm_pid=2**22 + 8)  # above any pid in use here
    assert server.running() is None
    assert server.stop() is False and not (state / "server.json").exists()
    (state / "server.json").write_text("{not json")
    assert server.running() is None


def test_the_url_joins_the_one_session(state: Path) -> None:
    _record(state, pid=os.getpid(), jvm_pid=os.getpid())
    found = server.running()
    assert found is not None
    assert found.url == "sc://127.0.0.1:1/;session_id=00000000-0000-0000-0000-000000000000"


def test_idle_means_no_check_running_and_none_for_the_idle_time(state: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "IDLE_S", 60.0)
    (state / "server.json").write_text("{}")
    with server.using():
        old = time.time() - 120
        os.utime(state / "used", (old, old))
        assert not server._idle(state)  # a check holds the lock
    assert not server._idle(state)  # it just ended: `used` is fresh
    old = time.time() - 120
    os.utime(state / "used", (old, old))
    assert server._idle(state)


def test_an_unusable_state_directory_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_SPARK_STATE", "/proc/no-such-dir")
    with pytest.raises(CheckError, match=r"cannot use /proc/no-such-dir .*HARNESS_SPARK_STATE"):
        with server.using():
            pass


def test_python_and_python3_of_one_environment_are_one_interpreter(tmp_path: Path) -> None:
    """Two names of one interpreter in one bin directory share the server (pytest run as
    ``python -m pytest`` and the ``harness`` script's ``python3.11`` replaced each other's
    server mid-check); a virtual environment's link to the same file does not."""
    from harness.check.server import _same_python

    base, venv = tmp_path / "base" / "bin", tmp_path / "venv" / "bin"
    base.mkdir(parents=True)
    venv.mkdir(parents=True)
    (base / "python3.11").write_text("")
    for name in ("python", "python3"):
        (base / name).symlink_to("python3.11")
    (venv / "python").symlink_to(base / "python3.11")
    assert _same_python(str(base / "python"), str(base / "python3.11"))
    assert _same_python(str(base / "python3"), str(base / "python"))
    assert not _same_python(str(venv / "python"), str(base / "python3.11"))
