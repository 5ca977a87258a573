"""The matrix record (reports/matrix.json), its grid page, and docs/regressions.md's table made
from it by bench/regressions_table.py: synthetic results, no cluster."""

from __future__ import annotations

import json
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.result import Expectation, Recovery, RunResult
from harness.run.matrix import (
    Cell,
    CellRun,
    MatrixRecord,
    cells_of,
    format_table,
    read_matrix,
    record_table,
    write_matrix,
)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import regressions_table as bench  # noqa: E402

KIP101 = ROOT / "cases" / "kafka" / "regressions" / "kip-101-loss.yaml"


def _result(run_id: str, lost: int, *, as_expected: bool, repairs: list[str] | None = None) -> RunResult:
    return RunResult(run_id, verdict="fail" if lost else "pass", as_expected=as_expected,
                     anomalies={"lost-write": lost, "unseen": 3},
                     expectations=[Expectation("lost-write", "<= 0", lost, lost == 0)],
                     recovery=Recovery(repairs=repairs or []))


def _cells() -> list[Cell]:
    by_label = {c.label: c for _, c in cells_of([KIP101])}
    buggy, fixed, old = by_label["0.10.2.2"], by_label["0.11.0.3"], by_label["3.9.2"]
    buggy.add(_result("r1", 1, as_expected=True))
    fixed.add(_result("r2", 0, as_expected=True))
    old.add(_result("r3", 0, as_expected=False, repairs=["forced controller election"]))
    return [buggy, fixed, old]


def test_a_cell_keeps_each_run_its_anomalies_over_their_limits_and_its_repairs() -> None:
    buggy, _, repaired = _cells()
    assert buggy.outcomes == [CellRun("r1", "fail", True, {"lost-write": 1}, [], [])]
    assert buggy.as_stated and not repaired.as_stated
    assert repaired.repairs == {"forced controller election": 1}
    assert "repairs: forced controller election in 1" in format_table([repaired])


def test_the_record_holds_every_entry_and_how_it_was_made(tmp_path: Path) -> None:
    (tmp_path / "r1").mkdir()
    write_matrix(_cells(), tmp_path, command="harness matrix", full=True)
    raw = json.loads((tmp_path / "matrix.json").read_text())
    assert raw["schema"] == 1 and raw["command"] == "harness matrix" and raw["full"] is True
    assert raw["date"].endswith("Z") and "commit" in raw and "commit_date" in raw and "dirty" in raw
    entry = raw["entries"][0]
    assert (entry["case"], entry["label"], entry["version"], entry["expected"]) == (
        "kip-101-loss", "0.10.2.2", "0.10.2.2", "fail: lost-write")
    assert entry["as_stated"] is True and entry["run_dirs"] == [str(tmp_path / "r1")]
    assert entry["outcomes"][0] == {"run_id": "r1", "verdict": "fail", "as_expected": True,
                                    "over": {"lost-write": 1}, "repairs": [], "upkeep": []}
    assert raw["entries"][2]["repairs"] == {"forced controller election": 1}
    back = read_matrix(tmp_path)
    assert back.full and [c.label for c in back.cells] == ["0.10.2.2", "0.11.0.3", "3.9.2"]
    assert back.cells[0].outcomes == _cells()[0].outcomes


def test_a_record_of_another_layout_is_an_error_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="no matrix record"):
        read_matrix(tmp_path)
    (tmp_path / "matrix.json").write_text(json.dumps({"cells": []}))
    with pytest.raises(HarnessError, match=r"matrix.json: not a matrix record of schema 1"):
        read_matrix(tmp_path)


class _Grid(HTMLParser):
    """The matrix page's header cells and its entries' classes."""

    def __init__(self) -> None:
        super().__init__()
        self.columns: list[str] = []
        self.entries: dict[str, str] = {}
        self._in_th = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self._in_th = tag == "th"
        if tag == "div" and "entry" in (a.get("class") or ""):
            self.entries[a["id"] or ""] = a["class"] or ""

    def handle_data(self, data: str) -> None:
        if self._in_th and data.strip():
            self.columns.append(data.strip())

    def handle_endtag(self, tag: str) -> None:
        self._in_th = False


def test_the_page_is_a_grid_of_cases_by_version_colored_by_as_stated(tmp_path: Path) -> None:
    (tmp_path / "r1").mkdir()
    page = write_matrix(_cells(), tmp_path, command="harness matrix", full=True)
    html = page.read_text()
    grid = _Grid()
    grid.feed(html)
    assert grid.columns == ["Case", "0.10.2.2", "0.11.0.3", "3.9.2"]  # oldest first
    assert grid.entries == {"kip-101-loss--0.10.2.2": "entry as-stated",
                            "kip-101-loss--0.11.0.3": "entry as-stated",
                            "kip-101-loss--3.9.2": "entry not-as-stated"}
    assert 'href="r1/report.html"' in html and "r2/report.html" not in html  # no such run dir
    assert "repairs: forced controller election (1)" in html


def _record(full: bool = True) -> MatrixRecord:
    return MatrixRecord(_cells(), "2026-12-10T08:00:00Z", "harness matrix", full, commit="0" * 40,
                        commit_date="2026-12-10T07:55:00+00:00", dirty=False)


def test_the_docs_table_is_made_from_a_full_record() -> None:
    table = record_table(_record())
    assert table.splitlines()[0] == ("`harness matrix`, 2026-12-10T08:00:00Z, at the commit of "
                                     "2026-12-10T07:55:00+00:00 (`commit` in the record): 2 of 3 "
                                     "entries as stated.")
    assert "| kip-101-loss | 0.10.2.2 | fail: lost-write | **1/1** | fail | lost-write in 1 | none |" in table
    assert ("| kip-101-loss | 3.9.2 | pass | **0/1** (not as stated) | pass | none | "
            "forced controller election in 1 |") in table
    with pytest.raises(HarnessError, match="not a full matrix"):
        record_table(_record(full=False))


def test_the_script_puts_the_table_between_the_page_s_markers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    page = f"# Regressions\n\nbefore\n{bench.BEGIN}\nold table\n{bench.END}\nafter\n"
    after = f"# Regressions\n\nbefore\n{bench.BEGIN}\nnew\n{bench.END}\nafter\n"
    assert bench.replace_table(page, "new") == after
    with pytest.raises(ValueError, match="markers"):
        bench.replace_table("no markers", "new")
    assert bench.BEGIN in (ROOT / "docs" / "regressions.md").read_text()  # the page has them
    doc, record = tmp_path / "regressions.md", tmp_path / "matrix.json"
    doc.write_text(page)
    monkeypatch.setattr(bench, "DOC", doc)
    monkeypatch.setattr(bench, "DOC_RECORD", record)
    source = tmp_path / "reports"
    source.mkdir()
    (source / "matrix.json").write_text(json.dumps(_record().to_json()))
    assert bench.main([str(source / "matrix.json"), "--write"]) == 0
    assert "| kip-101-loss | 0.11.0.3 |" in doc.read_text() and "old table" not in doc.read_text()
    assert json.loads(record.read_text())["commit"] == "0" * 40
    (source / "matrix.json").write_text(json.dumps(_record(full=False).to_json()))
    assert bench.main([str(source / "matrix.json")]) == 2
    assert "not a full matrix" in capsys.readouterr().err
