"""The version matrix's cells, table and page, from results (no cluster)."""

from __future__ import annotations

from pathlib import Path

from harness.result import Expectation, InjectionSummary, RunResult
from harness.run.matrix import cells_of, format_table, read_matrix, write_matrix

ROOT = Path(__file__).resolve().parents[2]
KIP101 = ROOT / "cases" / "kafka" / "regressions" / "kip-101-loss.yaml"


def _result(run_id: str, lost: int, *, as_expected: bool, hit: bool = True) -> RunResult:
    return RunResult(run_id, verdict="fail" if lost else "pass", as_expected=as_expected,
                     anomalies={"lost-write": lost, "unseen": 100},
                     expectations=[Expectation("lost-write", "<= 0", lost, lost == 0),
                                   Expectation("injection hit", True, hit, hit)],
                     injections=[InjectionSummary("HW-LEADER-ONLY", 100, hit=True),
                                 InjectionSummary("NEW-LEADER-FETCH", 100, hit=hit)])


def test_cells_are_every_case_and_version_entry_validated_up_front() -> None:
    cells = cells_of([KIP101])
    assert [(c.case, c.label, c.expected) for _, c in cells] == [
        ("kip-101-loss", "3.9.2-ibp-0.11.0-IV1", "fail: lost-write"),
        ("kip-101-loss", "3.9.2", "pass"), ("kip-101-loss", "0.10.2.2", "fail: lost-write"),
        ("kip-101-loss", "0.11.0.3", "pass"), ("kip-101-loss", "2.0.1", "pass")]
    assert [c.label for _, c in cells_of([KIP101], only=["3.9.2"])] == ["3.9.2"]
    assert cells[0][0].broker_config["inter.broker.protocol.version"] == "0.11.0-IV1"


def test_a_cell_counts_runs_as_expected_anomalies_and_point_hits(tmp_path: Path) -> None:
    (_, buggy), (_, fixed) = cells_of([KIP101])[:2]
    buggy.add(_result("r1", 1, as_expected=True))
    buggy.add(_result("r2", 0, as_expected=False, hit=False))  # the interleaving was missed
    fixed.add(_result("r3", 0, as_expected=True))
    assert (buggy.as_expected, len(buggy.runs)) == (1, 2)
    assert buggy.anomalies == {"lost-write": 1}  # unseen is observed, not over a limit
    assert buggy.hits == {"HW-LEADER-ONLY": [2, 2], "NEW-LEADER-FETCH": [1, 2]}
    table = format_table([buggy, fixed])
    assert "3.9.2-ibp-0.11.0-IV1" in table and "1/2" in table and "NEW-LEADER-FETCH 1/2" in table
    (tmp_path / "r1").mkdir()
    page = write_matrix([buggy, fixed], tmp_path)
    html = page.read_text()
    assert 'href="r1/report.html"' in html and "r2/report.html" not in html  # no such run dir
    assert "inter.broker.protocol.version=0.11.0-IV1" in html
    assert 'id="matrix-link"' in (tmp_path / "index.html").read_text()
    assert [c.runs for c in read_matrix(tmp_path).cells] == [["r1", "r2"], ["r3"]]
