"""The send-stall table and per-partition send lines (the Pulsar producer's blocked sends)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from harness.report import render_run
from harness.report.load import scan_history, scan_owners

T0 = 1_800_000_000.0


def _write(path: Path, events: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")


def _run(tmp_path: Path) -> Path:
    """Two partitions, 10 sends/s each for 20 s; at t+5 a send to partition 1 blocks 6 s."""
    events: list[dict] = []
    t = T0
    n = 0
    while t < T0 + 20:
        p = n % 2
        mid = f"j-{n}"
        events.append({"type": "invoke", "client": "j", "t": t, "m": t, "mid": mid,
                       "topic": "persistent://public/default/x", "key": None, "partition": p})
        if p == 1 and T0 + 5 <= t < T0 + 5.1:
            events.append({"type": "stall", "client": "j", "t": t + 6, "m": t + 6, "mid": mid,
                           "partition": 1, "seconds": 6.0})
            t += 6
        events.append({"type": "ok", "client": "j", "t": t + 0.01, "m": t, "mid": mid,
                       "topic": "persistent://public/default/x", "partition": p, "ledger": 1,
                       "entry": n, "batch": -1, "offset": None})
        t += 0.05
        n += 1
    _write(tmp_path / "history" / "j.jsonl", events)
    _write(tmp_path / "timeline.jsonl", [
        {"type": "leader", "client": "runner", "t": T0, "m": 0, "topic": "x", "partition": 0,
         "leader": "broker-1", "leader_node": "broker-1"},
        {"type": "leader", "client": "runner", "t": T0, "m": 0, "topic": "x", "partition": 1,
         "leader": "broker-2", "leader_node": "broker-2"},
        {"type": "fault", "client": "runner", "t": T0 + 4, "m": 4, "action": "kill9",
         "node": "broker-2", "role": "owner"},
        {"type": "leader", "client": "runner", "t": T0 + 9, "m": 9, "topic": "x", "partition": 1,
         "leader": "broker-1", "leader_node": "broker-1"},
    ])
    (tmp_path / "result.json").write_text(json.dumps({"run_id": "r", "verdict": "pass"}))
    return tmp_path


def test_flows_measure_blocks_and_gaps(tmp_path: Path) -> None:
    rates = scan_history(_run(tmp_path))
    f0, f1 = rates.flows[("j", 0)], rates.flows[("j", 1)]
    assert f1.stalls == 1 and f1.longest_block == 6.0 and f0.stalls == 0
    # the blocked call stopped sends to the other partition too
    assert 5.9 < f0.send_gap < 6.2 and 5.9 < f0.ack_gap < 6.2
    assert sum(rates.sends_by_partition[("persistent://public/default/x", 0)].values()) == f0.sends
    assert scan_owners(tmp_path) == {0: ["broker-1"], 1: ["broker-2", "broker-1"]}


def test_report_has_send_stall_table_and_bands(tmp_path: Path) -> None:
    html = render_run(_run(tmp_path)).read_text(encoding="utf-8")
    table = re.search(r'<section id="send-stalls">(.*?)</section>', html, re.S).group(1)
    rows = re.findall(r'<tr[^>]*data-partition="(\d)"', table)
    assert rows == ["0", "1"]
    assert "broker-2 \u2192 broker-1" in table and "6.00 s" in table
    assert 'class="bad" data-partition="1"' in table
    assert "blocked 6.0s" in html  # the band on partition 1's chart
    assert "sends/s" in html


def test_key_shared_order_counts_first_deliveries_only(tmp_path: Path) -> None:
    def poll(t: float, client: str, mid: str, key: str, entry: int) -> dict:
        return {"type": "poll", "client": client, "t": T0 + t, "m": t, "phase": "run", "mid": mid,
                "topic": "x", "partition": 0, "ledger": 1, "entry": entry, "batch": -1,
                "key": key, "subscription": "ks", "subscription_type": "Key_Shared"}

    _write(tmp_path / "history" / "a.jsonl", [poll(1, "a", "m1", "k1", 1), poll(2, "a", "m3", "k1", 3),
                                              poll(5, "a", "m1", "k1", 1)])  # a redelivery
    _write(tmp_path / "history" / "b.jsonl", [poll(3, "b", "m2", "k1", 2),  # after m3: out of order
                                              poll(4, "b", "m4", "k2", 4)])
    (tmp_path / "result.json").write_text(json.dumps({"run_id": "r", "verdict": "pass"}))
    ko = scan_history(tmp_path).key_order["ks"]
    assert (ko.polls, ko.first, ko.redeliveries, len(ko.keys), ko.out_of_order) == (5, 4, 1, 2, 1)
    assert ko.examples == ["m2 (key k1, b) after m3"]
    html = render_run(tmp_path).read_text(encoding="utf-8")
    assert 'id="key-order"' in html and "m2 (key k1, b) after m3" in html


def test_a_stall_whose_partition_the_producer_did_not_know_is_shown_not_skipped(tmp_path: Path) -> None:
    """The Python Pulsar producer on a partitioned topic: its router picks the partition after
    the call, so a blocked call's stall names none; it is a row of its own, not bad input."""
    events = [{"type": "invoke", "client": "p", "t": T0, "m": 0.0, "mid": "p-0", "topic": "x"},
              {"type": "stall", "client": "p", "t": T0 + 2, "m": 2.0, "mid": "p-1", "seconds": 1.5},
              {"type": "ok", "client": "p", "t": T0 + 2.1, "m": 2.1, "mid": "p-0", "topic": "x",
               "partition": 1, "ledger": 1, "entry": 0, "batch": -1, "offset": None}]
    _write(tmp_path / "history" / "p.jsonl", events)
    (tmp_path / "result.json").write_text(json.dumps({"run_id": "r", "verdict": "pass"}))
    rates = scan_history(tmp_path)
    assert rates.flows[("p", -1)].stalls == 1 and rates.flows[("p", -1)].longest_block == 1.5
    assert not rates.skipped.counts
    html = render_run(tmp_path).read_text(encoding="utf-8")
    table = re.search(r'<section id="send-stalls">(.*?)</section>', html, re.S).group(1)
    assert "not known" in table and "1.50 s" in table
