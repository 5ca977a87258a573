"""The shared Spark Connect server's bookkeeping (harness.check.server), without a JVM:
what counts as running, idle, stopped. (Every checker test runs on a real one.)"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from harness.check.engine import server
from harness.errors import CheckError


@pytest.fixture()
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HARNESS_SPARK_STATE", str(tmp_path))
    return tmp_path


def _record(state: Path, pid: int, jvm_pid: int, directory: Path | None = None) -> None:
    directory = directory or server.server_dir()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "server.json").write_text(json.dumps({
        "pid": pid, "jvm_pid": jvm_pid, "port": 1, "python": "py", "pyspark": "4", "started": 1.0,
        "session": "00000000-0000-0000-0000-000000000000"}))


def test_a_record_of_dead_processes_is_not_a_running_server(state: Path) -> None:
    _record(state, pid=2**22 + 7, jvm_pid=2**22 + 8)  # above any pid in use here
    assert server.running() is None
    assert server.stop() is False and not (server.server_dir() / "server.json").exists()
    (server.server_dir() / "server.json").write_text("{not json")
    assert server.running() is None


def test_the_url_joins_the_one_session(state: Path) -> None:
    _record(state, pid=os.getpid(), jvm_pid=os.getpid())
    found = server.running()
    assert found is not None
    assert found.url == "sc://127.0.0.1:1/;session_id=00000000-0000-0000-0000-000000000000"


def test_idle_means_no_check_running_and_none_for_the_idle_time(state: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "IDLE_S", 60.0)
    directory = server.server_dir()
    directory.mkdir(parents=True)
    (directory / "server.json").write_text("{}")
    with server.using():
        old = time.time() - 120
        os.utime(directory / "used", (old, old))
        assert not server._idle(directory)  # a check holds the lock
    assert not server._idle(directory)  # it just ended: `used` is fresh
    old = time.time() - 120
    os.utime(directory / "used", (old, old))
    assert server._idle(directory)


def test_an_unusable_state_directory_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_SPARK_STATE", "/proc/no-such-dir")
    with pytest.raises(CheckError, match=r"cannot use /proc/no-such-dir/py-\w+ .*HARNESS_SPARK_STATE"):
        with server.using():
            pass


def test_each_interpreter_has_its_own_server(state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two names of one interpreter in one bin directory share a server (pytest run as
    ``python -m pytest`` and the ``harness`` script's ``python3.11`` replaced each other's
    server mid-check); a virtual environment's link to the same file has its own, so that
    neither replaces a server the other's check may be using."""
    base, venv = state / "base" / "bin", state / "venv" / "bin"
    base.mkdir(parents=True)
    venv.mkdir(parents=True)
    (base / "python3.11").write_text("")
    for name in ("python", "python3"):
        (base / name).symlink_to("python3.11")
    (venv / "python").symlink_to(base / "python3.11")

    def dir_of(python: Path) -> Path:
        monkeypatch.setattr(server.sys, "executable", str(python))
        return server.server_dir()

    assert dir_of(base / "python") == dir_of(base / "python3.11") == dir_of(base / "python3")
    assert dir_of(venv / "python") != dir_of(base / "python3.11")
    assert dir_of(venv / "python").parent == state
    # another version of the checker's code: another server (its workers keep the old code)
    before = dir_of(base / "python")
    monkeypatch.setattr(server, "_code_version", lambda: "another")
    assert dir_of(base / "python") != before


def test_stop_stops_the_server_of_every_interpreter(state: Path) -> None:
    """``harness clean`` stops them all, and a record in the state directory itself (the
    layout before one directory per interpreter)."""
    import subprocess

    # a supervisor that takes its JVM with it on SIGTERM: one process as both
    procs = [subprocess.Popen(["sleep", "60"]) for _ in range(2)]
    try:
        _record(state, procs[0].pid, procs[0].pid, state / "py-0123456789ab")
        _record(state, procs[1].pid, procs[1].pid, state)
        assert len(server.servers()) == 2 and server.running() is None  # neither is this interpreter's
        assert server.stop() is True
        for p in procs:
            assert p.wait(10) is not None
        assert server.servers() == [] and server.stop() is False
    finally:
        for p in procs:
            p.kill()


def test_a_killed_servers_temporary_files_are_removed_not_a_running_ones(state: Path) -> None:
    """``harness clean`` removes Spark's ``tmp/`` of a server killed with kill -9; a running
    server's stays."""
    import subprocess

    dead = state / "py-0123456789ab"
    _record(state, pid=2**22 + 7, jvm_pid=2**22 + 8, directory=dead)
    (dead / "tmp" / "blockmgr-1").mkdir(parents=True)
    (dead / "tmp" / "blockmgr-1" / "shuffle_0.data").write_bytes(b"x")
    proc = subprocess.Popen(["sleep", "60"])
    try:
        live = server.server_dir()
        _record(state, proc.pid, proc.pid, live)
        (live / "tmp" / "artifacts-1").mkdir(parents=True)
        stopped = state / "py-ba9876543210"  # a server that stopped leaves empty directories
        (stopped / "tmp" / "spark_connect_model_cache" / "x").mkdir(parents=True)
        assert server.remove_leftovers() == 1
        assert not (dead / "tmp").exists() and (live / "tmp" / "artifacts-1").is_dir()
        assert not (stopped / "tmp").exists()
        assert server.remove_leftovers() == 0
    finally:
        proc.kill()
        proc.wait()


def test_the_server_keeps_sparks_temporary_files_in_its_directory(state: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    tmp = state / "py-0123456789ab" / "tmp"
    cmd = server._command(4040, tmp)
    conf = dict(cmd[i + 1].split("=", 1) for i, word in enumerate(cmd) if word == "--conf")
    assert f"-Djava.io.tmpdir={tmp}" in conf["spark.driver.extraJavaOptions"].split()
    spaced = server._command(4040, state / "a dir" / "tmp")  # Spark would split the option
    assert "java.io.tmpdir" not in " ".join(spaced)
    monkeypatch.delenv("SPARK_LOCAL_DIRS", raising=False)
    assert server._environment(tmp)["SPARK_LOCAL_DIRS"] == str(tmp)  # the block manager's
    monkeypatch.setenv("SPARK_LOCAL_DIRS", "/big/disk")  # the user's choice stays
    assert server._environment(tmp)["SPARK_LOCAL_DIRS"] == "/big/disk"


@pytest.mark.parametrize(("given", "seconds"), [(None, 900.0), ("", 900.0), ("60", 60.0), (" 0.5 ", 0.5)])
def test_the_idle_time_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch, given: str | None,
                                                     seconds: float) -> None:
    if given is None:
        monkeypatch.delenv("HARNESS_SPARK_IDLE_S", raising=False)
    else:
        monkeypatch.setenv("HARNESS_SPARK_IDLE_S", given)
    assert server.idle_s(strict=True) == seconds


@pytest.mark.parametrize("given", ["abc", "0", "-5", "inf", "nan"])
def test_a_bad_idle_time_is_one_line_before_a_server_starts(state: Path, monkeypatch: pytest.MonkeyPatch,
                                                            given: str) -> None:
    monkeypatch.setenv("HARNESS_SPARK_IDLE_S", given)
    assert server.idle_s() == 900.0  # where nobody can be told (the module's import): the default
    with pytest.raises(CheckError) as err:
        server.ensure()
    assert str(err.value) == (f"$HARNESS_SPARK_IDLE_S {given!r}: not a positive number of seconds; give one "
                              "such as 900 (the default), or unset it")
    assert not list(state.iterdir())  # nothing started, nothing made


@pytest.mark.parametrize("given", ["lots", "-1", "1.5", "2g"])
def test_a_bad_worker_keep_is_one_line_before_a_server_starts(state: Path, monkeypatch: pytest.MonkeyPatch,
                                                              given: str) -> None:
    monkeypatch.setenv("HARNESS_WORKER_KEEP_MB", given)
    with pytest.raises(CheckError) as err:
        server.ensure()
    assert str(err.value) == (f"$HARNESS_WORKER_KEEP_MB {given!r}: not a number of MiB; give one such as "
                              "2048, 0 (give everything back), or unset it")
    assert not list(state.iterdir())


@pytest.mark.parametrize("layout", ["missing", "empty", "not-runnable"])
def test_a_java_home_without_java_is_one_line_before_a_server_starts(
        state: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
        layout: str) -> None:
    home = tmp_path_factory.mktemp("java") / "jdk"
    if layout != "missing":
        (home / "bin").mkdir(parents=True)
    if layout == "not-runnable":
        (home / "bin" / "java").write_text("")  # not executable
    monkeypatch.setenv("HARNESS_SPARK_JAVA_HOME", str(home))
    with pytest.raises(CheckError) as err:
        server.ensure()
    why = "does not exist" if layout == "missing" else "has no runnable bin/java"
    assert str(err.value) == (f"$HARNESS_SPARK_JAVA_HOME {str(home)!r} {why}: give the home of a Java 17 or "
                              "later (the directory that holds bin/java), or unset it to use the packaged "
                              "Java 25")
    assert not list(state.iterdir())
