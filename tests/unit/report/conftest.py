"""Synthetic run directories for the report tests.

Tests reach everything through the ``make_run`` fixture (no imports from this
file, so any pytest import mode works). ``make_run()`` writes a complete run:
~20 s of produce/consume history over three partitions (partition 0 loses its
leader at t+8 s and stops acking for three seconds), a recovery read, a timeline
with faults, an injection, leader snapshots and steps, broker logs and a
``result.json`` (as ``RunResult.to_json`` gives it; overrides are raw JSON, so a
test can write a malformed one).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from harness.result import Expectation, InjectionSummary, RunResult, StepRecord

START = datetime(2026, 11, 22, 1, 30, tzinfo=timezone.utc)
SECONDS = 20
PARTITIONS = 3
PER_SECOND = 40  # acks per partition per second
OUTAGE = range(8, 11)  # seconds in which partition 0 does not ack

def write_jsonl(path: Path, events: Iterable[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for event in events:
            fh.write(json.dumps(event, separators=(",", ":")) + "\n")


def _producer(t0: float) -> Iterable[dict[str, Any]]:
    for second in range(SECONDS):
        for partition in range(PARTITIONS):
            for i in range(PER_SECOND):
                t = t0 + second + i / PER_SECOND
                mid = f"p{partition}-{second * PER_SECOND + i}"
                yield {"type": "invoke", "client": "producer", "t": t, "m": t - t0, "mid": mid,
                       "topic": "t", "key": None}
                if partition == 0 and second in OUTAGE:
                    yield {"type": "info", "client": "producer", "t": t + 0.5, "m": t - t0 + 0.5,
                           "mid": mid, "error": "timed out"}
                    continue
                yield {"type": "ok", "client": "producer", "t": t + 0.005, "m": t - t0, "mid": mid,
                       "topic": "t", "partition": partition, "offset": second * PER_SECOND + i, "epoch": 0}


def _consumer(t0: float, mids: list[tuple[float, str, int]]) -> Iterable[dict[str, Any]]:
    for t, mid, partition in mids:
        yield {"type": "poll", "client": "consumer", "t": t + 0.05, "m": t - t0, "mid": mid, "phase": "run",
               "topic": "t", "partition": partition, "offset": 0, "ts": int(t * 1000), "key": None}
    yield {"type": "reset", "client": "consumer", "t": t0 + 11.2, "m": 11.2, "topic": "t", "partition": 0,
           "reason": "truncation", "from": 330, "to": 318}
    for i, (_, mid, partition) in enumerate(mids):
        t = t0 + SECONDS + 1 + i / len(mids)
        yield {"type": "poll", "client": "recovery", "t": t, "m": t - t0, "mid": mid, "phase": "recovery",
               "topic": "t", "partition": partition, "offset": 0, "ts": int(t * 1000), "key": None}


def _timeline(t0: float) -> Iterable[dict[str, Any]]:
    def ev(dt: float, type_: str, **fields: Any) -> dict[str, Any]:
        return {"type": type_, "client": "runner", "t": t0 + dt, "m": dt, **fields}

    yield ev(0, "step", index=0, name="produce", status="start")
    for second in range(SECONDS):
        for partition in range(PARTITIONS):
            moved = partition == 0 and second >= 9
            isr = [2, 3] if moved and second < 16 else [2, 3, 1] if moved else [1, 2, 3]
            yield ev(second + 0.5, "leader", topic="t", partition=partition,
                     leader="kafka-2" if moved else "kafka-1", isr=isr, epoch=1 if moved else 0)
        if second == 7:
            yield ev(7.9, "inject", point="C1", node="kafka-1", status="hit", detail={"leo": 524, "hw": 523})
        if second == 8:
            yield ev(8.0, "fault", action="kill9", node="kafka-1", role="leader(t/0)", detail={})
        if second == 14:
            yield ev(14.0, "fault", action="start", node="kafka-1", role="leader(t/0)", detail={})
    yield ev(18, "mark", label="heal done")
    yield ev(SECONDS, "step", index=0, name="produce", status="done")


def _result(run_id: str, at: datetime, overrides: dict[str, Any]) -> dict[str, Any]:
    """The JSON of a failed run (``RunResult.to_json``), with raw ``overrides`` (``...`` drops a key)."""
    stamp = at.isoformat().replace("+00:00", "Z")
    result = RunResult(
        run_id, case="kafka-zk-kill-leader", case_file="cases/kafka/kill-leader.yaml",
        description="Kill the leader of t/0 mid-stream.", system="kafka", cluster="kafka-zk",
        version="3.9.2", topic="t", started=stamp, finished=stamp, duration_s=42.1, verdict="fail",
        observed=["unseen"],
        counts={"invoked": 2400, "ok": 2280, "fail": 0, "info": 120, "polled": 2280, "recovered": 2280},
        anomalies={"lost-write": 0, "duplicate": 2, "unseen": 0},
        examples={"duplicate": [
            {"mid": "p0-17", "topic": "t", "partition": 0, "offset": 18, "client": "c0"},
            {"mid": "p0-18", "topic": "t", "partition": 0, "offset": 19, "client": "c0"}]},
        expectations=[Expectation("lost-write", "<= 0", 0, True), Expectation("duplicate", "<= 0", 2, False)],
        injection=InjectionSummary("C1", 518, leader="kafka-1", follower="kafka-2", hit=True, node="kafka-1",
                                   detail={"leo": 524, "hw": 523},
                                   expected="leader dies with an uncommitted suffix",
                                   observed="leo 524 > hw 523"),
        truncations=[{"node": "kafka-1", "topic": "t", "partition": 0, "offset": 518,
                      "line": "[UnifiedLog partition=t-0] Truncating to offset 518"}],
        replicas=[{"node": "kafka-1", "topic": "t", "partition": 0, "log_end_offset": 524,
                   "high_watermark": 518, "when": "kill"},
                  {"node": "kafka-2", "topic": "t", "partition": 0, "log_end_offset": 518,
                   "high_watermark": 518, "when": "kill"}],
        steps=[StepRecord(0, "produce", "steps[0].produce", 12, at.timestamp(), "done", duration_s=20.0),
               StepRecord(1, "kill9", "steps[1].kill9", 16, at.timestamp() + 8, "done", duration_s=0.3)],
        files={"logs": ["logs/kafka-1.log", "logs/kafka-2.log"], "case": "case.yaml"},
    ).to_json()
    result.update(overrides)
    return {k: v for k, v in result.items() if v is not ...}


class RunFactory:
    """``make_run(name, at=start, history=True, result=True, **result_overrides)`` -> run dir.

    A result override of ``...`` drops that key; ``result=False`` writes no
    ``result.json``; ``history=False`` writes no history, timeline or logs.
    """

    start = START
    partitions = PARTITIONS
    write_jsonl = staticmethod(write_jsonl)

    def __init__(self, root: Path) -> None:
        self.root = root

    def __call__(self, name: str = "20261122-013000-kill-leader-ab12", *, at: datetime = START,
                 history: bool = True, result: bool = True, **overrides: Any) -> Path:
        run_dir = self.root / name
        run_dir.mkdir(parents=True)
        if result:
            (run_dir / "result.json").write_text(json.dumps(_result(name, at, overrides)))
        if not history:
            return run_dir
        t0 = at.timestamp()
        producer = list(_producer(t0))
        write_jsonl(run_dir / "history" / "producer.jsonl", producer)
        acked = [(e["t"], e["mid"], e["partition"]) for e in producer if e["type"] == "ok"]
        write_jsonl(run_dir / "history" / "consumer.jsonl", _consumer(t0, acked))
        write_jsonl(run_dir / "timeline.jsonl", _timeline(t0))
        (run_dir / "logs").mkdir()
        (run_dir / "logs" / "kafka-1.log").write_text(
            "[2026-11-22 01:30:09,000] INFO [UnifiedLog partition=t-0] Truncating to offset 518\n")
        (run_dir / "logs" / "kafka-2.log").write_text("[2026-11-22 01:30:09,000] INFO elected leader\n")
        (run_dir / "case.yaml").write_text("name: kafka-zk-kill-leader\n")
        return run_dir


@pytest.fixture
def make_run(tmp_path: Path) -> RunFactory:
    """A :class:`RunFactory` writing run directories under ``tmp_path/reports``."""
    return RunFactory(tmp_path / "reports")
