"""The run page and the index, rendered from synthetic run directories."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harness.anomalies import ANOMALIES
from harness.errors import HarnessError
from harness.report import render_index, render_run

if TYPE_CHECKING:
    from conftest import RunFactory

EVIL = "<script>alert(1)</script>"


def _html(run_dir: Path) -> str:
    path = render_run(run_dir)
    assert path == run_dir / "report.html"
    return path.read_text(encoding="utf-8")


def _find(pattern: str, html: str) -> str:
    match = re.search(pattern, html, re.S)
    assert match, f"no match for {pattern}"
    return match.group(1)


def _section(html: str, section_id: str) -> str:
    return _find(rf'<section id="{section_id}">(.*?)</section>', html)


def test_page_shows_verdict_case_and_expectations(make_run: RunFactory) -> None:
    html = _html(make_run())
    assert '<span class="verdict verdict-fail">FAIL</span>' in html
    for text in ("kafka-zk-kill-leader", "kafka-zk", "3.9.2", "42.1 s", "cases/kafka/kill-leader.yaml"):
        assert text in _section(html, "summary")
    expectations = _section(html, "expectations")
    assert expectations.count("<tr") == 2  # header + the check not met; lost-write held at 0
    assert "&lt;= 0" in expectations and "not met" in expectations
    assert '1 more anomaly held at 0: <span class="mono">lost-write</span>' in expectations


def test_anomaly_rows_carry_counts_and_examples(make_run: RunFactory) -> None:
    anomalies = _section(_html(make_run()), "anomalies")
    rows = re.findall(r'<tr class="anomaly[^"]*" data-kind="([^"]+)">', anomalies)
    assert rows == ["duplicate"]
    assert "mid=p0-17 topic=t partition=0 offset=18 client=c0" in anomalies
    assert 'class="anomaly bad" data-kind="duplicate"' in anomalies
    assert '2 more anomalies counted 0: <span class="mono">lost-write, unseen (observed)</span>' in anomalies


def _first_screen_run(make_run: RunFactory) -> Path:
    """A run whose case bounds every anomaly: two not met, one held above 0 within its limit,
    the rest held at 0; one observed anomaly counted; an injection and acknowledged writes."""
    counts = dict.fromkeys(ANOMALIES, 0) | {"lost-write": 3, "duplicate": 2, "nonmonotonic-send": 1,
                                            "unseen": 7}
    limits = dict.fromkeys(ANOMALIES, 0) | {"nonmonotonic-send": 1}
    del limits["unseen"]  # observed, not judged
    expectations = [{"name": kind, "expected": f"<= {limit}", "observed": counts[kind],
                     "ok": counts[kind] <= limit} for kind, limit in limits.items()]
    expectations += [{"name": "acknowledged writes", "expected": ">= 10", "observed": 400, "ok": True},
                     {"name": "injection hit", "expected": True, "observed": True, "ok": True}]
    return make_run(anomalies=counts, expectations=expectations, observed=["unseen"],
                    examples={"lost-write": [{"mid": "p0-1"}]})


def test_the_first_screen_lists_what_failed_and_what_the_case_stated_and_folds_the_zeros(
        make_run: RunFactory) -> None:
    html = _html(_first_screen_run(make_run))
    expectations = _section(html, "expectations")
    listed = re.findall(r"<tr[^>]*>\s*<td>([^<]+)</td>", expectations)
    assert listed == ["lost-write", "duplicate", "nonmonotonic-send", "acknowledged writes", "injection hit"]
    assert expectations.count("not met") == 2
    zeros = [k for k in ANOMALIES if k not in ("lost-write", "duplicate", "nonmonotonic-send", "unseen")]
    assert len(zeros) == 20
    assert (f'{len(zeros)} more anomalies held at 0: <span class="mono">{", ".join(zeros)}</span>'
            in expectations)
    anomalies = _section(html, "anomalies")
    kinds = re.findall(r'<tr class="anomaly[^"]*" data-kind="([^"]+)">', anomalies)
    assert kinds == ["lost-write", "duplicate", "unseen", "nonmonotonic-send"]  # not met first
    assert "observed, not judged" in anomalies
    assert f'{len(zeros)} more anomalies counted 0: <span class="mono">{", ".join(zeros)}</span>' in anomalies
    # the expectations come first on the page; no zero row at all
    assert html.index('id="expectations"') < html.index('id="anomalies"')
    assert 'class="num zero"' not in anomalies


def test_a_run_where_everything_held_at_zero_shows_one_line(make_run: RunFactory) -> None:
    held = [{"name": kind, "expected": "<= 0", "observed": 0, "ok": True}
            for kind in ("lost-write", "duplicate")]
    html = _html(make_run(anomalies={"lost-write": 0, "duplicate": 0}, examples={}, expectations=held))
    expectations, anomalies = _section(html, "expectations"), _section(html, "anomalies")
    assert "<table>" not in expectations and "<table>" not in anomalies
    assert '2 anomalies held at 0: <span class="mono">lost-write, duplicate</span>' in expectations
    assert '2 anomalies counted 0: <span class="mono">lost-write, duplicate</span>' in anomalies


def test_many_examples_are_capped(make_run: RunFactory) -> None:
    examples = {"duplicate": [{"mid": f"p0-{i}"} for i in range(12)]}
    anomalies = _section(_html(make_run(examples=examples)), "anomalies")
    assert anomalies.count('class="example mono"') == 5
    assert "+7 more" in anomalies


def test_injection_section(make_run: RunFactory) -> None:
    injection = _section(_html(make_run()), "injection")
    assert "C1" in injection and ">hit<" in injection and "leo 524 &gt; hw 523" in injection
    missed = _section(_html(make_run("missed", injection={"point": "C2", "n": 7, "hit": False})), "injection")
    assert ">miss<" in missed


def test_chart_has_lines_fault_injection_and_leader_markers(make_run: RunFactory) -> None:
    chart = _find(r'<figure class="chart" id="timeline-chart">(.*?)</figure>', _html(make_run()))
    assert chart.count("<polyline") == 3  # acks, polls, fail+info
    labels = re.findall(r'<g class="marker tone-(\w+)">.*?(?:<text[^>]*>([^<]*)</text>)?\s*</g>', chart, re.S)
    assert ("fault", "kill9 kafka-1") in labels
    assert ("restore", "start kafka-1") in labels
    assert ("inject", "C1 hit kafka-1") in labels
    assert ("leader", "t/0 leader kafka-1\u2192kafka-2") in labels
    assert ("leader", "t/0 ISR [2,3]\u2192[2,3,1]") in labels
    assert ("mark", "heal done") in labels
    assert ("reset", "") in labels  # a tick on the axis, no label
    assert sum(tone == "leader" for tone, _ in labels) == 2  # unchanged snapshots are not markers
    assert "recovery read" in chart


def test_acks_per_second_are_plotted(make_run: RunFactory) -> None:
    chart = _find(r'id="timeline-chart">(.*?)</figure>', _html(make_run()))
    assert "acks/s <span class=\"muted\">(2280)</span>" in chart
    assert [label for _, label in re.findall(r'<text class="ytick" x="[^"]+" y="([^"]+)">([^<]+)<', chart)] \
        == ["0", "50", "100", "150"]  # 120 acks/s at peak


def test_partition_small_multiples(make_run: RunFactory) -> None:
    section = _find(r'<details class="multiples" id="partition-charts" open>(.*?)</details>',
                    _html(make_run()))
    titles = re.findall(r'<span class="chart-title">([^<]+)</span>', section)
    assert titles == [f"t/{p}" for p in range(make_run.partitions)]
    charts = section.split('<figure class="chart"')[1:]
    assert [c.count("marker tone-leader") for c in charts] == [2, 0, 0]  # only their own leader changes
    assert [c.count("marker tone-fault") for c in charts] == [1, 1, 1]  # faults on every partition


def test_single_partition_has_no_small_multiples(make_run: RunFactory) -> None:
    run_dir = make_run()
    producer = run_dir / "history" / "producer.jsonl"
    events = [json.loads(line) for line in producer.read_text().splitlines()]
    make_run.write_jsonl(producer, [e for e in events if e.get("partition", 0) == 0])
    assert 'id="partition-charts"' not in _html(run_dir)


def test_timeline_table_in_time_order(make_run: RunFactory) -> None:
    timeline = _section(_html(make_run()), "timeline")
    offsets = [float(t) for t in re.findall(r'<td class="num mono">\+([\d.]+)s</td>', timeline)]
    assert offsets == sorted(offsets) and offsets[0] == 0.0
    for text in ("kill9 kafka-1", "role=leader(t/0)", "leo=524 hw=523", "consumer reset \u00d71",
                 "truncation=1", "step 0 produce done", "t/1 leader kafka-1"):
        assert text in timeline


def test_replicas_truncations_and_files(make_run: RunFactory) -> None:
    html = _html(make_run())
    replicas = _section(html, "replicas")
    assert '<a href="logs/kafka-1.log" title="broker log">kafka-1</a>' in replicas
    assert '<td class="num notok">6</td>' in replicas  # LEO 524 - HW 518
    assert "Truncating to offset 518" in replicas
    files = _section(html, "files")
    for href in ("case.yaml", "logs/kafka-1.log", "logs/kafka-2.log", "result.json", "timeline.jsonl",
                 "history/consumer.jsonl", "history/producer.jsonl"):
        assert f'<a href="{href}">' in files


def test_page_is_self_contained(make_run: RunFactory) -> None:
    html = _html(make_run())
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert "<script" not in html.lower() and "<link" not in html.lower()
    assert not re.search(r'(?:src|href)="(?:https?:)?//', html)


def test_broker_and_client_strings_are_escaped(make_run: RunFactory) -> None:
    run_dir = make_run(
        "evil", case=EVIL, error=f"broker said {EVIL}",
        examples={"lost-write": [{"mid": EVIL, "topic": "t"}]},
        truncations=[{"node": EVIL, "topic": "t", "partition": 0, "offset": 1, "line": f"Truncating {EVIL}"}],
        expectations=[{"name": EVIL, "expected": EVIL, "observed": EVIL, "ok": False}],
        steps=[{"index": 0, "action": "produce", "label": EVIL, "line": 3, "t": make_run.start.timestamp(),
                "status": "error", "error": EVIL}],
    )
    with (run_dir / "timeline.jsonl").open("a") as fh:
        fh.write(json.dumps({"type": "fault", "client": "runner", "t": make_run.start.timestamp() + 5,
                             "action": "pause", "node": EVIL, "detail": {"why": EVIL}}) + "\n")
    html = _html(run_dir)
    assert "<script" not in html.lower()
    assert html.count(escape(EVIL)) >= 10
    index = render_index(run_dir.parent).read_text()
    assert "<script" not in index.lower() and escape(EVIL) in index


def test_unsafe_file_paths_are_not_links(make_run: RunFactory) -> None:
    files = _section(_html(make_run(files={"logs": ["javascript:alert(1)", "../../etc/passwd", "/etc/passwd"],
                                           "case": "case.yaml"})), "files")
    hrefs = re.findall(r'href="([^"]*)"', files)
    assert "case.yaml" in hrefs
    assert not [h for h in hrefs if ":" in h or h.startswith("/") or ".." in h]
    assert files.count('class="missing"') == 3


def test_errored_run_with_missing_keys_renders(make_run: RunFactory) -> None:
    dropped: dict[str, Any] = dict.fromkeys(
        ("case", "counts", "anomalies", "examples", "expectations", "injection", "truncations", "replicas",
         "steps", "files", "started", "finished", "duration_s", "system"), ...)
    run_dir = make_run("errored", history=False, verdict="error", error="WaitTimeout: kafka-1 not ready",
                       **dropped)
    html = _html(run_dir)
    assert '<span class="verdict verdict-error">ERROR</span>' in html
    assert "WaitTimeout: kafka-1 not ready" in _section(html, "summary")
    assert "No history or timeline was recorded." in html
    assert 'id="injection"' not in html


def test_nulls_and_wrong_types_render(make_run: RunFactory) -> None:
    html = _html(make_run("nulls", history=False, verdict=None, counts=None, anomalies=[], examples={"x": 3},
                          expectations=[None, {"name": "x"}], injection="C1", replicas=[{"node": None}],
                          steps=None, files={"logs": None}, started="yesterday", duration_s="long"))
    assert "verdict-unknown" in html


@pytest.mark.parametrize("content", [None, "{not json", "[1, 2]"])
def test_missing_or_corrupt_result_renders(make_run: RunFactory, content: str | None) -> None:
    run_dir = make_run("crashed", result=False)
    with (run_dir / "history" / "producer.jsonl").open("a") as fh:
        fh.write('{"type": "ok", "t": 17')  # torn tail of a crash
    if content is not None:
        (run_dir / "result.json").write_text(content)
    html = _html(run_dir)
    assert "verdict-unknown" in html and "Incomplete run" in html and "crashed" in html
    assert "acks/s <span class=\"muted\">(2280)</span>" in html


def test_missing_run_dir_is_a_harness_error(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="no such run directory"):
        render_run(tmp_path / "nope")
    with pytest.raises(HarnessError, match="no such reports directory"):
        render_index(tmp_path / "nope")


def test_index_lists_runs_newest_first(make_run: RunFactory) -> None:
    make_run("b-middle", history=False, at=make_run.start, verdict="pass", anomalies={"lost-write": 0})
    newest = make_run("a-newest", history=False, at=make_run.start + timedelta(hours=2), verdict="error",
                      anomalies=..., case="kafka-kraft-pause", error="WaitTimeout: kafka-1 not ready")
    make_run("c-oldest", history=False, at=make_run.start - timedelta(days=1))
    render_run(newest)
    (newest.parent / "not-a-run").mkdir()
    index = render_index(newest.parent)
    assert index == newest.parent / "index.html"
    html = index.read_text()
    assert re.findall(r'<tr class="run" data-run="([^"]+)">', html) == ["a-newest", "b-middle", "c-oldest"]
    rows = html.split('<tr class="run"')[1:]
    assert "verdict-error" in rows[0] and '<a href="a-newest/report.html">report</a>' in rows[0]
    assert "WaitTimeout: kafka-1 not ready" in rows[0] and "Chaos runs (3)" in html
    assert "kafka-kraft-pause" in rows[0]
    assert "verdict-pass" in rows[1] and ">none<" in rows[1] and "not rendered" in rows[1]
    assert "duplicate 2" in rows[2] and "42.1 s" in rows[2]
    assert re.search(r"verdict-fail\">FAIL</span> 1", html)


def test_empty_index(tmp_path: Path) -> None:
    assert "No runs yet." in render_index(tmp_path).read_text()


def test_the_page_names_the_version_entry_and_its_settings(make_run: RunFactory) -> None:
    html = _html(make_run(variant="3.9.2-ibp-0.11.0-IV1",
                          broker_config={"inter.broker.protocol.version": "0.11.0-IV1"}))
    summary = _section(html, "summary")
    assert "(entry 3.9.2-ibp-0.11.0-IV1)" in summary
    assert "<code>inter.broker.protocol.version=0.11.0-IV1</code>" in summary
    plain = _section(_html(make_run("20261122-013100-kill-leader-cd34")), "summary")
    assert 'id="settings"' not in plain and "(entry" not in plain
