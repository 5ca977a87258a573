"""Where a check runs: a bad ``--spark-master`` or an unreachable cluster is one clear error
before any work (harness.check.engine.master), from the CLI, the pytest plugin and check_run."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.check import check_run
from harness.check.engine.master import DEFAULT_MASTER, FORMS, require_reachable, validate
from harness.cli import main
from harness.errors import CheckError
from harness.testing.synthetic import Profile, generate


@pytest.fixture(autouse=True)
def _no_env_master(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HARNESS_SPARK_MASTER", raising=False)


@pytest.fixture
def listening() -> Iterator[int]:
    """A port on loopback that accepts connections (and nothing more)."""
    with socket.create_server(("127.0.0.1", 0)) as srv:
        yield srv.getsockname()[1]


@pytest.fixture
def closed() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("master", [
    "local-connect", "local", "local[1]", "local[*]", "local[4,2]", "local[*,3]",
    "spark://127.0.0.1:7077", "spark://a:7077,b.example:7078", "sc://localhost", "sc://127.0.0.1:15002",
    "sc://[::1]:15002/;session_id=x", "yarn", "k8s://https://10.0.0.1:6443"])
def test_the_forms_spark_takes_are_accepted(master: str) -> None:
    assert validate(master) == master


@pytest.mark.parametrize(("master", "why"), [
    ("bogus", "not a Spark master"),
    ("local[0]", "not a Spark master"),
    ("local[x]", "not a Spark master"),
    ("Local[2]", "not a Spark master"),
    ("k8s://", "not a Spark master"),
    ("spark://h", "'h' is not HOST:PORT"),
    ("spark://h:7077,", "no HOST:PORT"),
    ("spark://h:99999", "port 99999 is out of range"),
    ("sc://", "no HOST:PORT"),
    ("sc://a b:1", "'a b:1' is not HOST:PORT"),
])
def test_anything_else_is_named_with_the_accepted_forms(master: str, why: str) -> None:
    with pytest.raises(CheckError) as err:
        validate(master)
    assert str(err.value) == f"--spark-master {master!r}: {why}; give {FORMS}"


def test_the_environment_is_named_when_it_gave_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    assert validate(None) == DEFAULT_MASTER
    monkeypatch.setenv("HARNESS_SPARK_MASTER", "spark:/x")
    with pytest.raises(CheckError, match=r"^\$HARNESS_SPARK_MASTER 'spark:/x': not a Spark master"):
        validate(None)
    assert validate("local[2]") == "local[2]"  # the option wins


def test_a_cluster_that_answers_passes(listening: int, closed: int) -> None:
    require_reachable(f"spark://127.0.0.1:{listening}")
    require_reachable(f"sc://127.0.0.1:{listening}/;user_id=me")
    require_reachable(f"spark://127.0.0.1:{closed},127.0.0.1:{listening}")  # a standby master answers
    require_reachable("local[*]")  # nothing to reach


def test_a_cluster_nobody_answers_on_is_one_line(closed: int) -> None:
    with pytest.raises(CheckError) as err:
        require_reachable(f"sc://127.0.0.1:{closed}", option="--chaos-spark-master")
    assert str(err.value) == (f"cannot reach the Spark master sc://127.0.0.1:{closed} "
                              f"(--chaos-spark-master): 127.0.0.1:{closed}: connection refused")


def test_check_run_refuses_before_spark_starts(tmp_path: Path, closed: int) -> None:
    generate(tmp_path, Profile(records=20))
    with pytest.raises(CheckError, match="not a Spark master"):
        check_run(tmp_path, spark_master="bogus")
    with pytest.raises(CheckError, match=f"cannot reach the Spark master spark://127.0.0.1:{closed}"):
        check_run(tmp_path, spark_master=f"spark://127.0.0.1:{closed}")


def test_harness_run_refuses_before_the_run(capsys: pytest.CaptureFixture[str], closed: int,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.run

    def no_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the run started")

    monkeypatch.setattr(harness.run, "run_case", no_run)
    for argv, message in [
        (["run", "--spark-master", "bogus"], "harness: error: --spark-master 'bogus': not a Spark master"),
        (["run", "--spark-master", f"spark://127.0.0.1:{closed}"],
         f"harness: error: cannot reach the Spark master spark://127.0.0.1:{closed} (--spark-master): "
         f"127.0.0.1:{closed}: connection refused"),
        (["matrix", "--spark-master", "bogus"], "harness: error: --spark-master 'bogus': not a Spark master"),
    ]:
        assert main(argv) == 2, argv
        out, err = capsys.readouterr()
        assert err.startswith(message) and "Traceback" not in out + err, err


def test_the_shared_servers_settings_are_checked_before_the_run(capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.run

    def no_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the run started")

    monkeypatch.setattr(harness.run, "run_case", no_run)
    monkeypatch.setenv("HARNESS_SPARK_JAVA_HOME", "/nonexistent/jdk")
    assert main(["run"]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("harness: error: $HARNESS_SPARK_JAVA_HOME '/nonexistent/jdk' does not exist: "), err
    assert "Traceback" not in out + err
    require_reachable("local[1]")  # a check in this process does not use the server's settings
    monkeypatch.delenv("HARNESS_SPARK_JAVA_HOME")
    monkeypatch.setenv("HARNESS_SPARK_IDLE_S", "soon")
    with pytest.raises(CheckError, match=r"^\$HARNESS_SPARK_IDLE_S 'soon': not a positive number"):
        require_reachable(None)
    monkeypatch.delenv("HARNESS_SPARK_IDLE_S")
    monkeypatch.setenv("HARNESS_SPARK_DRIVER_MEMORY", "lots")
    for master in (None, "local[1]"):
        with pytest.raises(CheckError, match=r"^\$HARNESS_SPARK_DRIVER_MEMORY 'lots': not a memory size"):
            require_reachable(master)


def test_the_pytest_option_is_a_usage_error(tmp_path: Path, closed: int) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--co", "-q",
                           f"--chaos-spark-master=spark://127.0.0.1:{closed}", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error
    assert (f"ERROR: cannot reach the Spark master spark://127.0.0.1:{closed} (--chaos-spark-master): "
            f"127.0.0.1:{closed}: connection refused") in done.stderr
