"""Fuzzing the report (issue 18): whatever a run directory holds, render_run and render_index write
a page or raise one HarnessError (never a traceback), in bounded time and with bounded output.

Run directories are random, or a small valid one mutated: result.json values of the wrong type,
history and timeline lines with random JSON values, NaN and Infinity, far-off and huge numbers,
lists where scalars go, torn lines, binary junk.
"""

from __future__ import annotations

import contextlib
import copy
import json
import signal
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import HarnessError
from harness.report import render_index, render_run
from harness.result import Expectation, InjectionSummary, RunResult, StepRecord
from harness.testing.mutation import slots as json_slots

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: Per example (both pages); a small run renders in well under a second even on a busy machine.
TIME_LIMIT_S = 15.0
#: The pages of a run of a few dozen events, whatever their values.
MAX_PAGE_BYTES = 1 << 20
MAX_PEAK_BYTES = 128 << 20

T0 = 1_800_000_000.0
STAMP = "2027-01-15T08:00:00Z"

WORDS = st.sampled_from((
    "ok", "oks", "poll", "polls", "invoke", "invokes", "fail", "info", "reset", "stall", "meta", "fault",
    "inject", "leader", "step", "mark", "Key_Shared", "run", "recovery", "kafka-1", "t", "", "pass",
    "error", "unknown", "kill9", "heal", "armed", "hit", STAMP, "0001-01-01T00:00:00+23:59", "yesterday",
    "../etc/passwd", "javascript:alert(1)", "logs/kafka-1.log", "<script>alert(1)</script>", "a" * 300))
NUMBERS = st.sampled_from((T0 + 1.5, 1e12, 1e15, -1e15, 1e17, 1e300, -0.0, 1.5, 2 ** 63, -1))
SCALARS = (st.none() | st.booleans() | st.integers(-3, 10) | st.integers(-10 ** 30, 10 ** 30)
           | st.floats(allow_nan=True, allow_infinity=True) | NUMBERS | st.text(max_size=12) | WORDS)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(WORDS | st.text(max_size=6), inner, max_size=3), max_leaves=6)
#: Keys the loaders read, so that mutations reach them.
KEYS = st.sampled_from((
    "type", "t", "client", "topic", "partition", "offset", "ledger", "entry", "batch", "mid", "key", "phase",
    "subscription", "subscription_type", "seconds", "reason", "node", "leader", "leader_node", "isr",
    "epoch", "action", "role", "detail", "status", "point", "label", "index", "name", "error", "mids",
    "partitions", "offsets", "keys"))
#: Lines no JSON writer makes: junk, torn, and what json.loads cannot take.
RAW_LINES = st.sampled_from((
    '{"type":"ok","t":' + "9" * 5000 + "}", "[" * 5000, '{"type": "ok", "t": 18', "\x00\x01\x02",
    "NaN", "{}", "[]", '"ok"', '{"type": null}', '{"type": {"a": 1}, "t": 1}', "\ufffd\ufffe")) \
    | st.text(max_size=40)
JUNK = st.binary(max_size=200)


def _event(type_: str, dt: float, **fields: Any) -> dict[str, Any]:
    return {"type": type_, "client": fields.pop("client", "producer"), "t": T0 + dt, "m": dt, **fields}


def _base() -> dict[str, Any]:
    """A small valid run: name -> JSON document (result.json) or list of events (JSONL files)."""
    producer = [_event("invoke", 0.1, mid="p-0", topic="t", key=None, partition=0),
                _event("ok", 0.2, mid="p-0", topic="t", partition=0, offset=0, epoch=0),
                _event("invokes", 1.0, topic="t", mids=["p-1", "p-2"], keys=["k", None], partitions=[1, 0]),
                _event("oks", 1.1, topic="t", mids=["p-1", "p-2"], partitions=[1, 0], offsets=[0, 1],
                       epochs=[0, 0]),
                _event("stall", 2.0, seconds=1.5, partition=1, mid="p-3"),
                _event("info", 2.5, mid="p-3", error="timed out"),
                _event("fail", 3.0, mid="p-4", error="rejected")]
    consumer = [_event("poll", 1.5, client="c", mid="p-0", phase="run", topic="t", partition=0, offset=0,
                       key="k", subscription="s", subscription_type="Key_Shared"),
                _event("polls", 2.0, client="c", phase="run", topic="t", subscription="s",
                       subscription_type="Key_Shared", mids=["p-1", "p-2"], partitions=[1, 0],
                       offsets=[0, 1], keys=["k", "k"]),
                _event("reset", 3.5, client="c", topic="t", partition=0, reason="truncation"),
                _event("poll", 5.0, client="r", mid="p-0", phase="recovery", topic="t", partition=0,
                       offset=0, key=None)]
    timeline = [_event("step", 0.0, client="runner", index=0, name="produce", status="start"),
                _event("leader", 0.5, client="runner", topic="t", partition=0, leader="kafka-1",
                       isr=[1, 2], epoch=0),
                _event("inject", 1.8, client="runner", point="C1", node="kafka-1", status="hit",
                       detail={"leo": 3, "hw": 2}),
                _event("fault", 2.0, client="runner", action="kill9", node="kafka-1", role="leader(t/0)"),
                _event("leader", 2.5, client="runner", topic="t", partition=0, leader="kafka-2", isr=[2]),
                _event("mark", 4.0, client="runner", label="heal done"),
                _event("step", 4.5, client="runner", index=0, name="produce", status="error", error="boom")]
    result = RunResult(
        "fuzz", case="fuzz-case", system="kafka", cluster="kafka-zk", version="3.9.2", topic="t",
        started=STAMP, finished="2027-01-15T08:00:06Z", duration_s=6.0, verdict="fail", observed=["unseen"],
        counts={"invoked": 5, "ok": 3}, anomalies={"lost-write": 1, "unseen": 0},
        examples={"lost-write": [{"mid": "p-3", "partition": 1}]},
        expectations=[Expectation("lost-write", "<= 0", 1, False)],
        steps=[StepRecord(0, "produce", "steps[0].produce", 3, T0, "error", "boom", 4.5)],
        injection=InjectionSummary("C1", 3, hit=True, node="kafka-1", detail={"leo": 3}),
        replicas=[{"node": "kafka-1", "topic": "t", "partition": 0, "log_end_offset": 3,
                   "high_watermark": 2}],
        truncations=[{"node": "kafka-1", "topic": "t", "partition": 0, "offset": 2, "line": "Truncating"}],
        story=["kafka-1 was killed"], files={"case": "case.yaml", "logs": ["logs/kafka-1.log"]},
    ).to_json()
    return {"result.json": result, "history/producer.jsonl": producer, "history/consumer.jsonl": consumer,
            "timeline.jsonl": timeline}


BASE = _base()
JSONL = [name for name in BASE if name.endswith(".jsonl")]


def _write(run_dir: Path, files: dict[str, Any]) -> None:
    """JSON documents as JSON (NaN and Infinity included), event lists as JSONL, str and bytes raw."""
    for name, content in files.items():
        path = run_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, str):
            path.write_text(content, encoding="utf-8", errors="surrogatepass")
        elif name.endswith(".jsonl"):
            path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n"
                                    for line in content), encoding="utf-8", errors="surrogatepass")
        else:
            path.write_text(json.dumps(content), encoding="utf-8")


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Fails the example (instead of hanging the suite) when it runs longer than ``seconds``."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"rendering took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _check(files: dict[str, Any]) -> None:
    """The property: both pages are written (or one HarnessError that is not the report's own bug
    net), in bounded time, memory and size, and the index still lists a good run beside."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "reports"
        run_dir, good = root / "fuzz", root / "good"
        _write(good, {"result.json": {**BASE["result.json"], "run_id": "good"}})
        _write(run_dir, files)
        started = time.monotonic()
        tracemalloc.start()
        try:
            with _time_limit(TIME_LIMIT_S):
                pages = []
                for render, where in ((render_run, run_dir), (render_index, root)):
                    try:
                        pages.append(render(where))
                    except HarnessError as exc:
                        assert "bug in harness.report" not in str(exc), str(exc)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert time.monotonic() - started < TIME_LIMIT_S
        assert peak < MAX_PEAK_BYTES, f"peak {peak >> 20} MiB"
        for page in pages:
            assert page is not None and page.stat().st_size < MAX_PAGE_BYTES
        index = root / "index.html"
        if index.is_file():  # a row for each run, whatever the fuzzed one holds
            html = index.read_text(encoding="utf-8")
            assert html.count('<tr class="run') == 2 and 'data-run="good"' in html


@FUZZ
@given(st.data())
def test_mutated_run_directories(data: st.DataObject) -> None:
    files = copy.deepcopy(BASE)
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        name = data.draw(st.sampled_from(sorted(files)), label="file")
        content = files[name]
        action = data.draw(st.sampled_from(("set", "set", "set", "delete", "wrap", "line", "far", "truncate",
                                            "junk")), label="action")
        if action == "junk":
            files[name] = data.draw(JUNK | RAW_LINES)
        elif action == "truncate":
            text = content.decode("utf-8", "replace") if isinstance(content, bytes) else \
                content if isinstance(content, str) else json.dumps(content) if name == "result.json" \
                else "".join(json.dumps(e) + "\n" for e in content)
            files[name] = text[:data.draw(st.integers(0, len(text)))]
        elif not isinstance(content, (dict, list)):
            continue  # already junk
        elif action == "line" and name in JSONL:
            content.insert(data.draw(st.integers(0, len(content))), data.draw(RAW_LINES | VALUES))
        elif action == "far" and name in JSONL and content and isinstance(content[0], dict):
            content.append({**content[0], "t": data.draw(NUMBERS | SCALARS)})
        else:
            slots = json_slots(content)
            if not slots:
                continue
            container, key = data.draw(st.sampled_from(slots), label="slot")
            if action == "delete":
                del container[key]
            elif action == "wrap":
                container[key] = [container[key]]
            elif isinstance(container, dict) and data.draw(st.booleans()):
                container[data.draw(KEYS)] = data.draw(VALUES)  # a field the loaders read
            else:
                container[key] = data.draw(VALUES)
    _check(files)


@FUZZ
@given(result=VALUES | RAW_LINES | JUNK,
       history=st.lists(VALUES | RAW_LINES | st.dictionaries(KEYS, VALUES, max_size=6), max_size=12),
       timeline=st.lists(st.dictionaries(KEYS, VALUES, max_size=6) | RAW_LINES, max_size=8))
def test_random_run_directories(result: Any, history: list[Any], timeline: list[Any]) -> None:
    _check({"result.json": result, "history/x.jsonl": history, "timeline.jsonl": timeline})
