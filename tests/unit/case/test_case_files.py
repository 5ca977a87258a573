"""Finding case files in directories, and validating many at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.case import find_case_files, validate_paths
from harness.errors import CaseError

DATA = Path(__file__).resolve().parents[2] / "data" / "cases"


def _touch(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_find_case_files(tmp_path: Path) -> None:
    a = _touch(tmp_path / "cases" / "a.yaml")
    b = _touch(tmp_path / "cases" / "kafka" / "b.yml")
    _touch(tmp_path / "cases" / "_shared.yaml")
    _touch(tmp_path / "cases" / "kafka" / "_partial.yml")
    _touch(tmp_path / "cases" / "notes.txt")
    explicit = _touch(tmp_path / "_explicit.yaml")
    found = find_case_files([tmp_path / "cases", str(explicit), a])
    assert found == [a, b, explicit]


def test_validate_good_and_bad_directories() -> None:
    assert validate_paths([DATA / "good"]) == []
    bad = sorted((DATA / "bad").glob("*.yaml"))
    errors = validate_paths([DATA / "bad", DATA / "good" / "minimal.yaml"])
    assert [e.path for e in errors] == [str(p) for p in bad]
    assert all(e.line for e in errors)


def test_validate_reports_missing_files(tmp_path: Path) -> None:
    with pytest.raises(CaseError) as info:
        validate_paths([DATA / "good", tmp_path / "nope.yaml"])
    assert (info.value.path, info.value.line) == (str(tmp_path / "nope.yaml"), None)
    assert "No such file or directory (check the path)" in str(info.value)
