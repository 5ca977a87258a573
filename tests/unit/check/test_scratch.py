"""Where a check's scratch goes (harness.check.scratch), and the removal of a killed
check's scratch by ``harness clean``."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from harness.check.engine import scratch
from harness.errors import CheckError


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for /dev/shm, with 10 GB of memory budget; no HARNESS_CHECK_SCRATCH; a
    temporary directory of the test's own."""
    directory = tmp_path / "shm"
    directory.mkdir()
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setattr(scratch, "MEMORY_DIR", str(directory))
    monkeypatch.setattr(scratch, "memory_budget", lambda: 10 * 10**9)
    monkeypatch.delenv("HARNESS_CHECK_SCRATCH", raising=False)
    return directory


def test_a_local_check_that_fits_goes_to_memory(memory: Path) -> None:
    assert scratch.root(10**9, local=True) == str(memory)
    made = scratch.make(10**9, local=True)
    assert made.parent == memory and made.name.startswith(f"{scratch.PREFIX}{os.getpid()}-")


def test_a_check_too_big_for_memory_goes_to_the_temporary_directory(memory: Path) -> None:
    assert scratch.root(2 * 10**9, local=True) == str(memory)  # a fifth of the budget
    assert scratch.root(2 * 10**9 + 1, local=True) is None


def test_the_free_space_of_the_memory_directory_bounds_it(memory: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    free = os.statvfs(memory)
    monkeypatch.setattr(scratch, "memory_budget", lambda: 1 << 62)
    half = free.f_bavail * free.f_frsize // 2
    assert scratch.root(half // 2, local=True) == str(memory)
    assert scratch.root(half * 4, local=True) is None


def test_executors_elsewhere_never_use_this_machines_memory(memory: Path) -> None:
    assert scratch.root(1, local=False) is None


def test_no_memory_directory_falls_back(memory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scratch, "MEMORY_DIR", str(memory / "absent"))
    assert scratch.root(1, local=True) is None


def test_the_variable_names_the_directory(memory: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_CHECK_SCRATCH", str(tmp_path))
    assert scratch.root(1, local=True) == str(tmp_path)
    assert scratch.root(10**15, local=False) == str(tmp_path)
    assert scratch.make(1, local=True).parent == tmp_path


def test_a_place_that_cannot_hold_it_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("")
    for place, why in [(tmp_path / "absent" / "x", "No such file or directory"),
                       (tmp_path / "file", "Not a directory")]:
        monkeypatch.setenv("HARNESS_CHECK_SCRATCH", str(place))
        with pytest.raises(CheckError) as err:
            scratch.make(1, local=True)
        assert str(err.value) == (f"$HARNESS_CHECK_SCRATCH {place}: cannot make the check's scratch "
                                  f"directory there: {why}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_remove_stale_removes_only_the_scratch_of_dead_processes(memory: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead_pid = int(dead.stdout)
    stale = memory / f"{scratch.PREFIX}{dead_pid}-abc"
    (stale / "ids" / "3").mkdir(parents=True)
    (stale / "ids" / "3" / "h00000.parquet").write_bytes(b"x" * 100)
    live = scratch.make(1, local=True)  # this process's own: in use
    other = memory / "harness-check-notapid"  # not named by a check
    other.mkdir()
    kept_file = memory / f"{scratch.PREFIX}{dead_pid}-file"  # a file, not a scratch directory
    kept_file.write_text("")
    assert scratch.remove_stale() == 1
    assert not stale.exists()
    assert live.is_dir() and other.is_dir() and kept_file.exists()
    assert scratch.remove_stale() == 0
