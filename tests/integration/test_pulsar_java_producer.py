"""The Java producer workload and the topic helpers the Pulsar chaos cases use.

Uses the session's ``pulsar_cluster`` (PulsarSystem; reused if one is running, removed at
the end of the session if this session started it). Every loop is bounded.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import uuid
from pathlib import Path

import pytest

from harness.case import ClientSpec
from harness.check.lines import Tally, read_lines
from harness.clients.pulsar import PulsarJavaProducer
from harness.history import read_events

pytestmark = [pytest.mark.docker, pytest.mark.pulsar]


def test_spread_and_unload(pulsar_cluster) -> None:
    topic = f"it-spread-{uuid.uuid4().hex[:6]}"
    pulsar_cluster.create_topic(topic, 8)
    try:
        owners = pulsar_cluster.spread(topic, 8)
        counts = {b: sum(1 for o in owners.values() if o == b) for b in ("broker-1", "broker-2")}
        assert min(counts.values()) >= 2, owners
        before = owners[3]
        after = pulsar_cluster.unload(topic, 3)
        assert after.name != before
    finally:
        pulsar_cluster.delete_topics([topic, f"{topic}-one"])


def test_java_producer_writes_the_history(pulsar_cluster, tmp_path: Path) -> None:
    topic = f"it-java-{uuid.uuid4().hex[:6]}"
    pulsar_cluster.create_topic(topic, 4)
    try:
        spec = dataclasses.replace(ClientSpec(), max_pending_messages=100,
                                   batching_max_publish_delay_us=50)
        ready = threading.Event()
        producer = PulsarJavaProducer(pulsar_cluster.cluster, tmp_path, topic, "jp", spec, ready)
        stats = producer.run(count=400, rate=400, keys=4, max_s=120)
        assert ready.is_set()
        assert (stats.sent, stats.ok, stats.fail, stats.info) == (400, 400, 0, 0)
        events = list(read_events(tmp_path / "history" / "jp.jsonl"))
        meta = [e for e in events if e["type"] == "meta"]
        assert meta[0]["status"] == "ready" and meta[0]["client_version"] == "4.0.7"
        assert meta[0]["topic_partitions"] == 4
        # the checker reads every line the program writes (a meta field named like a batch
        # column, "partitions", once made it skip the ready line)
        tally = Tally()
        for _ in read_lines(tmp_path / "history" / "jp.jsonl", tally=tally):
            pass
        lines = (tmp_path / "history" / "jp.jsonl").read_text().splitlines()
        assert tally.lines == len(lines) and tally.skipped == 0, tally
        # sends go in invokes lines (the sends due), acknowledgements in oks lines
        kinds = {json.loads(line)["type"] for line in lines}
        assert {"invokes", "oks"} <= kinds and not {"invoke", "ok"} & kinds, kinds
        # the 4.x client's minimum delay is 1 ms: applied as 1000 us, the request recorded
        assert meta[0]["producer"]["batchingMaxPublishDelayMicros"] == 1000
        assert meta[0]["producer"]["batchingMaxPublishDelayMicrosRequested"] == 50
        invokes = {e["mid"]: e for e in events if e["type"] == "invoke"}
        oks = [e for e in events if e["type"] == "ok"]
        assert [invokes[f"jp-{n + 1}"]["partition"] for n in range(8)] == [0, 1, 2, 3] * 2
        for ok in oks:  # the acknowledged partition is the one chosen before the call
            assert ok["partition"] == invokes[ok["mid"]]["partition"]
            assert ok["ledger"] >= 0 and ok["entry"] >= 0 and ok["offset"] is None
        # one oks line per broker batch (an entry), never one per acknowledgement: unpaced,
        # 2,000 records go in batches of many, and a line per acknowledgement would make 2,000
        # (on a topic of one partition, where a batch's sends are consecutive)
        pulsar_cluster.create_topic(f"{topic}-one", 0)
        fast = PulsarJavaProducer(pulsar_cluster.cluster, tmp_path, f"{topic}-one", "jq", ClientSpec())
        assert fast.run(count=2000, max_s=120).ok == 2000
        fast_lines = (tmp_path / "history" / "jq.jsonl").read_text().splitlines()
        oks_lines = [json.loads(line) for line in fast_lines if '"type":"oks"' in line]
        # one entry a line, its position the line's own fields
        positions = {(line["partition"], line["ledger"], line["entry"]) for line in oks_lines}
        # the mids and batch indexes as runs (harness.history.RUNS), not lists
        assert all("mids" not in line and "batches" not in line for line in oks_lines)
        assert sum(line["count"] for line in oks_lines) == 2000
        fast_events = list(read_events(tmp_path / "history" / "jq.jsonl"))
        assert sorted(e["mid"] for e in fast_events if e["type"] == "ok") == sorted(
            f"jq-{n}" for n in range(1, 2001))
        assert {e["mid"] for e in fast_events if e["type"] == "invoke"} == {f"jq-{n}" for n in range(1, 2001)}
        # (the 1-ms timer may split an entry whose callbacks take longer: harmless, and rare)
        assert len(oks_lines) <= 2 * len(positions), (len(oks_lines), len(positions))
        assert len(positions) < 1000, len(positions)
        # on the partitioned topic an entry holds every 4th send: its mids as a list, and the
        # same acknowledgements come out
        spread = PulsarJavaProducer(pulsar_cluster.cluster, tmp_path, topic, "jr", ClientSpec())
        assert spread.run(count=2000, max_s=120).ok == 2000
        spread_text = (tmp_path / "history" / "jr.jsonl").read_text()
        spread_lines = [json.loads(line) for line in spread_text.splitlines() if '"type":"oks"' in line]
        assert any(isinstance(line.get("mids"), list) and len(line["mids"]) > 1 for line in spread_lines)
        assert len(spread_lines) <= 2 * len({(x["partition"], x["ledger"], x["entry"]) for x in spread_lines})
        spread_oks = [e for e in read_events(tmp_path / "history" / "jr.jsonl") if e["type"] == "ok"]
        assert sorted(e["mid"] for e in spread_oks) == sorted(f"jr-{n}" for n in range(1, 2001))
        assert all(e["partition"] == (int(e["mid"][3:]) - 1) % 4 for e in spread_oks)  # send n: n mod 4
        # no container left behind
        engine = pulsar_cluster.cluster.engine
        assert not engine.containers({"io.chaosharness.role": "workload"})
    finally:
        pulsar_cluster.delete_topics([topic, f"{topic}-one"])
