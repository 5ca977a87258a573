"""The report counts a batch event whole (:meth:`Rates.add_batch`) exactly as it counts the
events the batch stands for, one by one: same counts, gaps, flows, order and left-out lines."""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import re
from pathlib import Path
from typing import Any

import pytest

from harness.history import expand_batch
from harness.report.inputs import Window, read_lenient
from harness.report.load import Rates, scan_history

T0 = 1_800_000_000.0
TOPIC = "topic-0"


def _state(rates: Rates) -> dict[str, Any]:
    """Every field of ``rates``, dicts as item lists so that their order counts too."""
    def norm(value: Any) -> Any:
        if isinstance(value, dict):
            return [(k, norm(v)) for k, v in value.items()]
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return [(f.name, norm(getattr(value, f.name))) for f in dataclasses.fields(value)]
        return value
    return {f.name: norm(getattr(rates, f.name)) for f in dataclasses.fields(rates)}


def _one_by_one(events: list[dict[str, Any]], window: Window | None) -> Rates:
    rates = Rates(window=window)
    for event in events:
        for one in expand_batch(event) if event["type"] in ("oks", "invokes", "polls") else [event]:
            rates.add(one, "h.jsonl")
    rates.finish_key_order()
    return rates


def _whole(events: list[dict[str, Any]], window: Window | None) -> tuple[Rates, int]:
    rates, declined = Rates(window=window), 0
    for event in events:
        if event["type"] not in ("oks", "invokes", "polls"):
            rates.add(event, "h.jsonl")
        elif not rates.add_batch(event, "h.jsonl"):  # it added the events one by one
            declined += 1
    rates.finish_key_order()
    return rates, declined


PARTITIONS: list[Any] = [0, 1, 2, 1.0, 2.5, None, True, False, [0], "1", 10**30, float("nan")]


def _batch(rnd: random.Random, t: float) -> dict[str, Any]:
    kind = rnd.choice(["oks", "invokes", "polls"])
    size = rnd.choice([0, 1, 3, 8])
    columns = {"oks": ("mids", "partitions", "offsets"), "invokes": ("mids", "keys", "partitions"),
               "polls": ("mids", "partitions", "offsets", "keys")}[kind]
    event: dict[str, Any] = {"type": kind, "client": rnd.choice(["p", "q", "c"]), "t": t, "m": 0.0,
                             "topic": TOPIC}
    plain = rnd.random() < 0.7  # mostly well-behaved partitions, sometimes anything
    for name in columns:
        if name == "partitions":
            how = rnd.random()
            if how < 0.15:
                event[name] = None
            elif how < 0.3:  # no column: the batch's own field, if any
                if rnd.random() < 0.5:
                    event["partition"] = rnd.choice(PARTITIONS[:6])
                continue
            else:
                pool = PARTITIONS[:3] if plain else PARTITIONS
                event[name] = [rnd.choice(pool) for _ in range(size)]
        elif name == "mids":
            event[name] = [f"m{rnd.randrange(20)}" for _ in range(size)]
        elif name == "keys":
            event[name] = None if rnd.random() < 0.3 else [f"k{rnd.randrange(3)}" for _ in range(size)]
        else:
            event[name] = list(range(size))
    if kind == "polls":
        event["phase"] = rnd.choice(["run", "run", "recovery"])
        if rnd.random() < 0.3:
            event["subscription_type"] = "Key_Shared"
            event["subscription"] = "s"
    if rnd.random() < 0.05:
        event["t"] = rnd.choice([None, "x", 1e18, float("inf")])
    return event


def _single(rnd: random.Random, t: float) -> dict[str, Any]:
    kind = rnd.choice(["ok", "invoke", "poll", "fail", "stall", "reset"])
    event: dict[str, Any] = {"type": kind, "client": rnd.choice(["p", "q", "c"]), "t": t, "m": 0.0,
                             "topic": TOPIC, "partition": rnd.choice(PARTITIONS[:3]), "mid": "m1"}
    if kind == "stall":
        event["seconds"] = rnd.choice([0.5, 2.0])
    if kind == "reset":
        event["reason"] = "truncation"
    return event


@pytest.mark.parametrize("seed", range(40))
def test_a_batch_counts_as_its_events(seed: int) -> None:
    rnd = random.Random(seed)
    t, events = T0, []
    for _ in range(60):
        t += rnd.choice([0.0, 0.2, 1.5, 4.0])
        events.append(_batch(rnd, t) if rnd.random() < 0.7 else _single(rnd, t))
    window = rnd.choice([None, Window(T0 + 20, T0 + 60, "test")])
    whole, _ = _whole(events, window)
    assert _state(whole) == _state(_one_by_one(events, window))


def test_the_comparison_sees_what_a_batch_holds() -> None:
    """The two ways differ when a batch is not counted as its events: the comparison can fail."""
    events = [{"type": "oks", "client": "p", "t": T0, "m": 0.0, "topic": TOPIC, "mids": ["a", "b"],
               "partitions": [0, 1], "offsets": [0, 0]}]
    broken = Rates()
    broken.add(expand_batch(events[0])[0], "h.jsonl")  # the second event left out
    assert _state(broken) != _state(_one_by_one(events, None))


def test_batches_it_cannot_count_whole_go_one_by_one() -> None:
    base = {"type": "oks", "client": "p", "t": T0, "m": 0.0, "topic": TOPIC, "mids": ["a", "b"]}
    declined = [{**base, "partitions": [True, 1]}, {**base, "partitions": [[0], 1]},
                {"type": "polls", "client": "c", "t": T0, "m": 0.0, "topic": TOPIC, "phase": "run",
                 "subscription_type": "Key_Shared", "subscription": "s", "mids": ["a", "b"],
                 "keys": ["k", "k"], "partitions": [0, 0], "ledgers": [1, 1], "entries": [2, 1],
                 "batches": [-1, -1]}]
    whole, n = _whole(declined, None)
    assert n == 3
    assert _state(whole) == _state(_one_by_one(declined, None))
    assert whole.key_order["s"].out_of_order == 1
    # the boolean and the list are no partition; only the two 1s are partition 1
    assert whole.by_partition[(TOPIC, -1)][int(T0)] == 2
    assert whole.by_partition[(TOPIC, 1)][int(T0)] == 2


def test_scan_history_matches_one_by_one_on_a_file(tmp_path: Path) -> None:
    rnd = random.Random(3)
    t, lines = T0, []
    for _ in range(400):
        t += rnd.choice([0.0, 0.3, 1.0])
        lines.append(json.dumps(_batch(rnd, t) if rnd.random() < 0.8 else _single(rnd, t)))
    lines.insert(5, "{not json")
    lines.insert(9, json.dumps({"type": "oks", "client": "p", "t": T0, "mids": [1, 2], "partitions": [0]}))
    path = tmp_path / "history" / "h.jsonl"
    path.parent.mkdir()
    path.write_text("\n".join(lines) + "\n" + '{"type": "ok", "t": 1', encoding="utf-8")
    for window in (None, Window(T0 + 30, T0 + 200, "test")):
        slow = Rates(window=window)
        for event in read_lenient(path, "history/h.jsonl", slow.skipped):
            slow.add(event, "history/h.jsonl")
        slow.finish_key_order()
        fast = scan_history(tmp_path, window)
        assert _state(fast) == _state(slow)
        assert fast.skipped.total >= 3  # not JSON, the malformed batch, the torn tail


def _history_files(tmp_path: Path, shared_client: bool = False) -> Path:
    """Four history files of random batches and single events (stalls of equal lengths
    among them, Key_Shared polls, bad lines, a torn tail), each file's clients its own unless
    ``shared_client``."""
    rnd = random.Random(11)
    for k in range(4):
        t, lines = T0 + k, []
        for _ in range(300):
            t += rnd.choice([0.0, 0.3, 1.0])
            event = _batch(rnd, t) if rnd.random() < 0.7 else _single(rnd, t)
            # with shared_client, h3's acknowledgements are h0's clients'
            mine = 0 if shared_client and k == 3 and event["type"] in ("ok", "oks") else k
            event["client"] = f"{event['client']}-{mine}"
            lines.append(json.dumps(event))
        lines.insert(7, "{not json")
        path = tmp_path / "history" / f"h{k}.jsonl"
        path.parent.mkdir(exist_ok=True)
        path.write_text("\n".join(lines) + "\n" + ('{"type": "ok", "t": 1' if k == 2 else ""),
                        encoding="utf-8")
    return tmp_path


def test_a_big_history_read_a_file_per_process_counts_as_one_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.report import load

    run = _history_files(tmp_path)
    added: list[int] = []
    add_up = load._add_up

    def counted(parts: Any, window: Any) -> Any:
        added.append(len(parts))
        return add_up(parts, window)

    monkeypatch.setattr(load, "_add_up", counted)
    for window in (None, Window(T0 + 30, T0 + 200, "test")):
        monkeypatch.setattr(load, "PARALLEL_BYTES", 1 << 62)
        serial = scan_history(run, window)
        monkeypatch.setattr(load, "PARALLEL_BYTES", 0)
        parallel = scan_history(run, window)
        assert _state(parallel) == _state(serial)
        assert serial.skipped.total >= 5 and serial.stall_bands and serial.key_order
    assert added == [4, 4]  # both went through the workers


def test_a_client_in_two_files_is_read_in_one_process(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.report import load

    run = _history_files(tmp_path, shared_client=True)
    monkeypatch.setattr(load, "PARALLEL_BYTES", 0)
    files = sorted((run / "history").glob("*.jsonl"))
    assert load._scan_parallel(run, files, [f.stat().st_size for f in files], None) is None
    parallel = scan_history(run)
    monkeypatch.setattr(load, "PARALLEL_BYTES", 1 << 62)
    assert _state(parallel) == _state(scan_history(run))


def test_a_big_history_is_announced_and_a_small_one_is_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    """A history of PARALLEL_BYTES or more takes tens of seconds at 10M records: the scan says
    so before and after, as the check does; a small one reads without a word."""
    from harness.report import load

    run = _history_files(tmp_path)
    caplog.set_level(logging.INFO, logger="harness.report.load")
    monkeypatch.setattr(load, "PARALLEL_BYTES", 1 << 62)
    scan_history(run)
    assert not caplog.records
    monkeypatch.setattr(load, "PARALLEL_BYTES", 0)
    scan_history(run)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert re.fullmatch(r"report: reading 0\.0 GB of history \(4 files\) for its charts", messages[0])
    assert re.fullmatch(r"report: history read \(\d+ s\)", messages[1])
