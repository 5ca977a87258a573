"""``harness validate``, ``list`` and ``run`` on what a case states per version: every entry
of ``versions:`` is validated, a vacuous expectation is refused, an empty ``--version`` is an
error; each exits 2 with one line naming the file and the line, before any cluster starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main

BAD = Path(__file__).resolve().parent.parent / "data" / "cases" / "bad"
CASES = Path(__file__).resolve().parents[2] / "cases"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.mark.parametrize(("name", "line"), [
    ("verdict-fail-without-reproduces", 7),
    ("versions-later-unknown-version", 10),
    ("versions-later-wrong-cluster", 10),
    ("versions-later-bad-anomaly", 10),
    ("versions-later-bad-limit", 11),
    ("version-beside-versions", 4),
])
@pytest.mark.parametrize("command", ["validate", "list"])
def test_a_bad_expectation_or_entry_exits_2_naming_file_and_line(
        capsys: pytest.CaptureFixture[str], command: str, name: str, line: int) -> None:
    path = BAD / f"{name}.yaml"
    code, out, err = _run(capsys, command, str(path))
    assert code == 2
    assert err.startswith(f"{path}:{line}: ") and err.count("\n") == 1


def test_run_with_an_empty_version_is_an_error_not_the_default(capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    case = CASES / "kafka" / "regressions" / "kip-101-loss.yaml"
    code, out, err = _run(capsys, "run", str(case), "--version", "", "--reports", str(tmp_path))
    assert (code, out) == (2, "")
    assert err.startswith(f"harness: error: {case}: version (override): an empty version was given")
    assert err.count("\n") == 1 and not list(tmp_path.iterdir())  # no run started
