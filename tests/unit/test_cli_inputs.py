"""``harness validate`` and ``harness list`` on bad inputs (issue 18): exit 2 and one clear
message naming the path and the fix; never a traceback, a hang or exit 0 for nothing."""

from __future__ import annotations

import errno
import os
import signal
import time
from pathlib import Path

import pytest

from harness.case import MAX_CASE_BYTES
from harness.cli import main

CASES = Path(__file__).resolve().parents[2] / "cases"
GOOD_CASE = "system: kafka\ncluster: kafka-zk\nsteps: [{kill9: leader}]\n"
COMMANDS = pytest.mark.parametrize("command", ["validate", "list"])


def _run(capsys: pytest.CaptureFixture[str], *argv: str, timeout: int = 20) -> tuple[int, str, str]:
    """``harness ARGV``: exit code, stdout, stderr (failing if it runs past ``timeout``: main
    installs signal handlers, so it runs in this thread, under an alarm)."""
    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"harness {' '.join(argv)} still running after {timeout}s (blocked?)")

    alarm = hasattr(signal, "SIGALRM")
    if alarm:
        previous = signal.signal(signal.SIGALRM, expired)
        signal.alarm(timeout)
    try:
        code = main(list(argv))
    finally:
        if alarm:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_the_shipped_cases_are_valid(capsys: pytest.CaptureFixture[str]) -> None:
    count = len([p for p in CASES.rglob("*.y*ml") if not p.name.startswith("_")])
    code, out, err = _run(capsys, "validate")
    assert (code, out, err) == (0, f"{count} of {count} case file(s) valid\n", "")
    code, out, err = _run(capsys, "validate", str(CASES / "kafka" / "user-rule.yaml"))
    assert (code, out, err) == (0, "1 of 1 case file(s) valid\n", "")
    code, out, err = _run(capsys, "list")
    assert (code, err) == (0, "") and len(out.splitlines()) == count and "INVALID" not in out


@COMMANDS
def test_an_empty_directory(capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str) -> None:
    (tmp_path / "_draft.yaml").write_text(GOOD_CASE, encoding="utf-8")
    code, out, err = _run(capsys, command, str(tmp_path))
    assert (code, out) == (2, "")
    assert err == (f"harness: error: {tmp_path}: no case files in this directory (case files are "
                   "*.yaml or *.yml, not starting with '_')\n")


@COMMANDS
def test_an_empty_path(capsys: pytest.CaptureFixture[str], command: str) -> None:
    code, out, err = _run(capsys, command, "")
    assert (code, out) == (2, "")
    assert err == ("harness: error: an empty path was given (name a case file or a directory "
                   "of them)\n")


@COMMANDS
def test_a_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str) -> None:
    missing = tmp_path / "missing.yaml"
    code, out, err = _run(capsys, command, str(CASES / "kafka" / "c1.yaml"), str(missing))
    assert (code, out) == (2, "")
    assert err == f"harness: error: {missing}: No such file or directory (check the path)\n"


@COMMANDS
def test_a_path_component_over_255_bytes(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                        command: str) -> None:
    path = tmp_path / ("x" * 300) / "c.yaml"
    code, out, err = _run(capsys, command, str(path))
    assert (code, out) == (2, "")
    assert err == (f"harness: error: {path}: File name too long (each part of a path may have "
                   "at most 255 bytes)\n")


@pytest.mark.parametrize("command", ["report", "check"])
def test_a_run_directory_name_over_255_bytes(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                             command: str) -> None:
    path = tmp_path / ("r" * 300)
    code, out, err = _run(capsys, command, str(path))
    assert code == 2 and "Traceback" not in out + err
    assert err.startswith(f"harness: error: {path}") and "too long" in err and err.count("\n") == 1


@COMMANDS
def test_permission_denied(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                           tmp_path: Path, command: str) -> None:
    # Simulated (the tests may run as root, whom permission bits do not stop).
    path = tmp_path / "locked" / "c.yaml"

    def denied(p: object, *args: object, **kwargs: object) -> os.stat_result:
        raise PermissionError(errno.EACCES, "Permission denied", str(p))

    monkeypatch.setattr(os, "stat", denied)
    code, out, err = _run(capsys, command, str(path))
    assert (code, out) == (2, "")
    assert err == (f"harness: error: {path}: Permission denied (make the file readable and the "
                   "directories above it searchable)\n")


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="permission bits do not stop root")
@COMMANDS
def test_a_directory_without_search_permission(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                               command: str) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "c.yaml").write_text(GOOD_CASE, encoding="utf-8")
    locked.chmod(0o600)
    try:
        code, out, err = _run(capsys, command, str(locked / "c.yaml"))
    finally:
        locked.chmod(0o700)
    assert (code, out) == (2, "")
    assert "Permission denied" in err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    code, out, err = _run(capsys, "validate", str(fifo))
    assert (code, out) == (2, "0 of 1 case file(s) valid\n")
    assert err == (f"{fifo}: the case file is a FIFO (named pipe), not a regular file (name a "
                   "regular file)\n")
    code, out, err = _run(capsys, "list", str(fifo))
    assert code == 2 and out == f"{str(fifo):45} INVALID (see below)\n"
    assert "is a FIFO (named pipe)" in err


def test_dev_zero(capsys: pytest.CaptureFixture[str]) -> None:
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    code, out, err = _run(capsys, "validate", "/dev/zero")
    assert (code, out) == (2, "0 of 1 case file(s) valid\n")
    assert err == ("/dev/zero: the case file is a character device, not a regular file (name a "
                   "regular file)\n")


def test_a_huge_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as f:
        f.truncate(50 * 1024 * 1024)  # sparse
    start = time.monotonic()
    code, out, err = _run(capsys, "validate", str(huge))
    assert time.monotonic() - start < 5
    assert (code, out) == (2, "0 of 1 case file(s) valid\n")
    assert err == (f"{huge}: the case file is too large (52428800 bytes): at most "
                   f"{MAX_CASE_BYTES} bytes (256 KiB) are allowed; real ones have a few KB (is it "
                   "the right file?)\n")


def test_validate_counts_valid_and_invalid_files(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text(GOOD_CASE, encoding="utf-8")
    (tmp_path / "bad.yaml").write_text(GOOD_CASE.replace("leader", "leadr"), encoding="utf-8")
    code, out, err = _run(capsys, "validate", str(tmp_path))
    assert (code, out) == (2, "1 of 2 case file(s) valid\n")
    assert err.startswith(f"{tmp_path / 'bad.yaml'}:3: steps[0].kill9: unknown role 'leadr'")
    assert err.count("\n") == 1
    code, out, err = _run(capsys, "list", str(tmp_path))
    assert code == 2
    assert out.splitlines()[0] == f"{str(tmp_path / 'bad.yaml'):45} INVALID (see below)"
    assert out.splitlines()[1].startswith(f"{str(tmp_path / 'good.yaml'):45} kafka-zk")


def test_a_rule_outside_the_case_directory(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    case = tmp_path / "case.yaml"
    case.write_text(GOOD_CASE.replace("[{kill9: leader}]",
                                      "[{inject: {point: A1, rule: ../../../etc/passwd}}]"),
                    encoding="utf-8")
    code, out, err = _run(capsys, "validate", str(case))
    assert (code, out) == (2, "0 of 1 case file(s) valid\n")
    assert err.startswith(f"{case}:3: steps[0].inject.rule: rule file '../../../etc/passwd' is "
                          "outside the case file's directory")


def test_matrix_refuses_bad_arguments_before_any_cluster_starts(capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path) -> None:
    kip101 = str(CASES / "kafka" / "regressions" / "kip-101-loss.yaml")
    code, out, err = _run(capsys, "matrix", kip101, "--reps", "0", "--reports", str(tmp_path))
    assert (code, out) == (2, "") and "--reps 0: give at least 1 run per cell" in err
    code, out, err = _run(capsys, "matrix", kip101, "--version", "9.9.9", "--reports", str(tmp_path))
    assert (code, out) == (2, "") and "no case has a version entry named 9.9.9" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("system: kafka\ncluster: kafka-zk\nsteps: []\n", encoding="utf-8")
    code, out, err = _run(capsys, "matrix", str(bad), "--reports", str(tmp_path))
    assert code == 2 and f"{bad}:3: steps" in err
    assert list(tmp_path.iterdir()) == [bad]  # no run directory, no matrix page


def test_images_build_of_a_version_no_cluster_runs_names_the_known_ones(
        capsys: pytest.CaptureFixture[str]) -> None:
    # checked before Docker is touched: no daemon is needed for this answer
    code, _, err = _run(capsys, "images", "build", "--version", "9.9.9")
    assert code == 2
    assert "no cluster runs version 9.9.9" in err and "kafka: 3.9.2" in err and "--system" in err


def test_versions_of_lists_each_version_of_a_system_once() -> None:
    from harness.clusters import versions_of

    kafka = versions_of("kafka")
    assert len(kafka) == len(set(kafka)) and {"3.9.2", "4.1.2", "0.10.2.2", "2.0.1"} <= set(kafka)
    assert versions_of("pulsar") and not set(versions_of("pulsar")) & set(kafka)
