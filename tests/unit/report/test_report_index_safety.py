"""The index (issue 18): a bad run is one row saying what is wrong, never the end of the index;
``harness report`` wants a run directory and replaces only an index the harness wrote."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import harness.report.render as render
from harness.cli import main
from harness.errors import HarnessError
from harness.report import render_index, render_run
from harness.report.load import load_run, not_a_run_dir

if TYPE_CHECKING:
    from conftest import RunFactory

#: The head of an index written before the generator mark existed (as the harness wrote it).
LEGACY_INDEX = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>Chaos runs (7)</title>
</head><body>old</body></html>
"""


def _rows(html: str) -> dict[str, str]:
    """The index's rows by run id (broken rows too)."""
    return dict(re.findall(r'<tr class="run(?: bad)?" data-run="([^"]+)">(.*?)</tr>', html, re.S))


def _report(capsys: pytest.CaptureFixture[str], run_dir: Path) -> tuple[int, str, str]:
    code = main(["report", str(run_dir)])
    out, err = capsys.readouterr()
    return code, out, err


# -- 3. one bad run cannot break the index ------------------------------------------------------
def test_a_bad_run_beside_a_good_one_keeps_the_index(make_run: RunFactory,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    good = make_run("good", history=False, verdict="pass", expectations=[])
    make_run("overflow", history=False, at=make_run.start - timedelta(hours=1),
             started="0001-01-01T00:00:00+23:59", finished="9999-12-31T23:59:59-23:59")
    (make_run("digits", history=False) / "result.json").write_text('{"run_id": "d", "n": ' + "9" * 5000 + "}")
    make_run("nan", history=False, duration_s=float("nan"), anomalies={"lost-write": float("inf")})
    code, out, err = _report(capsys, good)
    assert (code, err) == (0, "") and f"report: {good / 'report.html'}" in out
    rows = _rows((good.parent / "index.html").read_text())
    assert set(rows) == {"good", "overflow", "digits", "nan"}
    assert "verdict-pass" in rows["good"]
    assert "started: not a time" in rows["overflow"] and "verdict-fail" in rows["overflow"]
    assert "verdict-unknown" in rows["digits"] and "not JSON" in rows["digits"]
    assert "verdict-unknown" in rows["nan"] and "duration_s: expected a number" in rows["nan"]


def test_a_row_that_cannot_be_built_says_why_and_the_others_stay(make_run: RunFactory,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    good = make_run("good", history=False, verdict="pass")
    make_run("cursed", history=False)

    def load(run_dir: Path) -> object:
        if run_dir.name == "cursed":
            raise RuntimeError("something nobody foresaw")
        return load_run(run_dir)

    monkeypatch.setattr(render, "load_run", load)
    html = render_index(good.parent).read_text()  # type: ignore[union-attr]
    rows = _rows(html)
    assert "verdict-pass" in rows["good"]
    assert "verdict-unknown" in rows["cursed"] and "RuntimeError: something nobody foresaw" in rows["cursed"]
    assert re.search(r'verdict-unknown">UNKNOWN</span> 1', html)


# -- 4. a run directory is required; only the harness's own index is replaced -------------------
def test_report_wants_a_run_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    some = tmp_path / "some" / "dir"
    some.mkdir(parents=True)
    (some / "notes.txt").write_text("mine")
    with pytest.raises(HarnessError, match="not a run directory: it holds no result.json, timeline.jsonl "
                                           "or history/"):
        render_run(some)
    code, out, err = _report(capsys, some)
    assert code == 2 and out == ""
    assert err == (f"harness: error: {some}: not a run directory: it holds no result.json, timeline.jsonl "
                   "or history/\n")
    assert not (some / "report.html").exists() and not (tmp_path / "some" / "index.html").exists()


def test_a_reports_directory_names_three_of_its_runs_and_counts_the_rest(tmp_path: Path) -> None:
    for name in ("r5", "r1", "r4", "r2", "r3"):
        (tmp_path / name / "history").mkdir(parents=True)
    (tmp_path / "r0").mkdir()  # no marker: not a run
    assert not_a_run_dir(tmp_path) == (f"{tmp_path}: not a run directory: it holds no result.json, "
                                       "timeline.jsonl or history/; it holds runs (r1, r2, r3 and 2 more): "
                                       "give one of them")


@pytest.mark.parametrize("marker", ["result.json", "timeline.jsonl", "history"])
def test_any_of_the_three_makes_a_run_directory(tmp_path: Path, marker: str) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    if marker == "history":
        (run_dir / "history").mkdir()
    else:
        (run_dir / marker).write_text("")
    html = render_run(run_dir).read_text()
    assert "verdict-unknown" in html


def test_a_users_index_is_never_replaced(make_run: RunFactory, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = make_run("run", history=False)
    mine = "<html><title>My page</title><body>my own notes</body></html>"
    (run_dir.parent / "index.html").write_text(mine)
    code, out, err = _report(capsys, run_dir)
    assert code == 0 and (run_dir / "report.html").is_file()
    assert (run_dir.parent / "index.html").read_text() == mine
    assert err == (f"harness: index not updated: {run_dir.parent.resolve() / 'index.html'} was not written "
                   "by the harness (left as it is)\n")
    assert render_index(run_dir.parent) is None


@pytest.mark.parametrize("kind", ["symlink", "directory"])
def test_an_index_that_is_not_a_plain_file_is_left_alone(make_run: RunFactory, kind: str) -> None:
    run_dir = make_run("run", history=False)
    index = run_dir.parent / "index.html"
    if kind == "symlink":
        target = run_dir.parent.parent / "elsewhere.html"
        target.write_text("theirs")
        index.symlink_to(target)
    else:
        index.mkdir()
    assert render_index(run_dir.parent) is None
    assert index.is_symlink() == (kind == "symlink")
    if kind == "symlink":
        assert index.read_text() == "theirs"


@pytest.mark.parametrize("previous", ["ours", "legacy"])
def test_the_harness_index_is_rewritten(make_run: RunFactory, previous: str) -> None:
    first = make_run("first", history=False)
    index = first.parent / "index.html"
    if previous == "ours":
        render_index(first.parent)
        assert render.INDEX_MARK in index.read_text()[:1000]
    else:
        index.write_text(LEGACY_INDEX)
    make_run("second", history=False, at=make_run.start + timedelta(hours=1))
    assert render_index(first.parent) == index
    html = index.read_text()
    assert list(_rows(html)) == ["second", "first"] and render.INDEX_MARK in html


def test_the_run_page_and_index_are_marked(make_run: RunFactory) -> None:
    run_dir = make_run("run", history=False)
    head = render_run(run_dir).read_text()[:600]
    assert '<meta name="generator" content="chaos-harness report">' in head
    head = render_index(run_dir.parent).read_text()[:600]  # type: ignore[union-attr]
    assert render.INDEX_MARK in head and "<!-- Written by the chaos harness" in head
