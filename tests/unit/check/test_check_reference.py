"""The Spark job and the reference checker agree: on synthetic histories, and on histories
damaged line by line (lines dropped, repeated, swapped, moved, torn; fields changed or removed)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from check_helpers import profiles
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.check import check_run, ingest
from harness.history import BATCH_EVENTS
from harness.testing import copier_history, reference_checker
from harness.testing.synthetic import Profile, generate

PURE = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SPARK = settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_FIELDS = {
    "offset": lambda rng, v: rng.choice([None, -1, 0, rng.randrange(60), (v or 0) + rng.choice([-1, 1])]),
    "partition": lambda rng, v: rng.choice([None, 0, 1, 2]),
    "ledger": lambda rng, v: rng.choice([None, -1, 1, 2, (v or 0) + 1]),
    "entry": lambda rng, v: rng.choice([None, 0, (v or 0) + rng.choice([-1, 1])]),
    "batch": lambda rng, v: rng.choice([None, -1, 0, 1]),
    "phase": lambda rng, v: rng.choice([None, "run", "recovery", "warmup"]),
    "topic": lambda rng, v: rng.choice([None, "topic-0", "topic-1"]),
    "type": lambda rng, v: rng.choice(["invoke", "ok", "fail", "info", "poll", "reset", "meta", "replica",
                                       "txn"]),
    "tx": lambda rng, v: rng.choice([None, "tx-0-0", "tx-0-1", "tx-0-4"]),
    "action": lambda rng, v: rng.choice([None, "begin", "commit", "abort"]),
    "status": lambda rng, v: rng.choice([None, "invoke", "ok", "fail", "info"]),
    "txn": lambda rng, v: rng.choice([None, "aborted", "committed"]),
    # a copier's input id (eos-duplicate, eos-loss): ids of the synthetic producers
    # (and of harness.testing.copier_history's input)
    "src": lambda rng, v: rng.choice([None, "p0-1", "p0-2", "p0-3", "p1-2", "in1", "in7", "in30"]),
    "isolation": lambda rng, v: rng.choice([None, "read_committed", "read_uncommitted"]),
    "client": lambda rng, v: rng.choice([None, "producer-0", "consumer-0", "consumer-1", "recovery"]),
    "key": lambda rng, v: rng.choice([None, "k0", "k1"]),
    "subscription": lambda rng, v: rng.choice([None, "sub-0", "sub-1"]),
    "subscription_type": lambda rng, v: rng.choice([None, "Key_Shared", "Shared"]),
    "t": lambda rng, v: rng.choice([None, 0.5, 1700000000.0005, 1700000099.0, "1700000000.001", "soon"]),
}


def mangle(run: Path, rng: random.Random, edits: int) -> None:
    """Damage ``run``'s files at random, keeping each field's JSON type (so both checkers
    read the same events; type mismatches are Spark's to define)."""
    files = sorted(run.glob("history/*.jsonl")) + sorted(run.glob("replicas/*.jsonl"))
    lines = {f: f.read_text(encoding="utf-8").splitlines(keepends=True) for f in files}
    mids = sorted({m for f in files for ln in lines[f][:40] for m in re.findall(r'"mid":"([^"]+)"', ln)})
    for _ in range(edits):
        here = lines[rng.choice(files)]
        if not here:
            continue
        i = rng.randrange(len(here))
        op = rng.randrange(10)
        if op >= 8:  # a batch line (polls, oks): damage one of its columns
            try:
                event = json.loads(here[i])
            except ValueError:
                continue
            if not isinstance(event, dict) or event.get("type") not in BATCH_EVENTS:
                continue
            _damage_batch(event, rng, mids)
            here[i] = json.dumps(event, separators=(",", ":")) + "\n"
        elif op == 0:
            del here[i]
        elif op == 1:
            here.insert(rng.randrange(len(here) + 1), here[i])
        elif op == 2:
            j = rng.randrange(len(here))
            here[i], here[j] = here[j], here[i]
        elif op == 3:
            elsewhere = lines[rng.choice(files)]
            elsewhere.insert(rng.randrange(len(elsewhere) + 1), here.pop(i))
        elif op == 4:  # torn: any proper prefix of an object is invalid JSON
            here[i] = here[i][:rng.randrange(1, max(2, len(here[i].rstrip()) - 1))] + "\n"
        else:
            try:
                event = json.loads(here[i])
            except ValueError:
                continue
            if op == 5:
                event["mid"] = rng.choice(mids + [None])
            else:
                key = rng.choice(sorted(_FIELDS))
                if rng.random() < 0.2:
                    event.pop(key, None)
                else:
                    old = event.get(key)
                    event[key] = _FIELDS[key](rng, old if isinstance(old, int) else None)
            here[i] = json.dumps(event, separators=(",", ":")) + "\n"
    for f, text in lines.items():
        body = "".join(text)
        if body and rng.random() < 0.3:
            body = body.rstrip("\n")  # a complete last line without its newline: kept
        f.write_text(body, encoding="utf-8")


def _damage_batch(event: dict, rng: random.Random, mids: list[str]) -> None:
    """One edit of a batch line's columns: an element changed, dropped or added (lists of
    different lengths: the line is dropped), a column nulled, removed or made a scalar."""
    fields = BATCH_EVENTS[event["type"]][1]
    columns = sorted(c for c in fields if c in event)
    if not columns:
        return
    column = rng.choice(columns)
    values = event[column]
    field = fields[column]
    op = rng.randrange(6)
    if op == 0 and isinstance(values, list) and values:
        j = rng.randrange(len(values))
        if column == "mids":
            values[j] = rng.choice(mids + [None])
        elif field in _FIELDS:
            values[j] = _FIELDS[field](rng, values[j] if isinstance(values[j], int) else None)
        else:
            values[j] = rng.choice([None, 0, 1, "x"])
    elif op == 1 and isinstance(values, list) and values:
        del values[rng.randrange(len(values))]
    elif op == 2 and isinstance(values, list):
        values.insert(rng.randrange(len(values) + 1), values[0] if values else None)
    elif op == 3:
        event[column] = None
    elif op == 4:
        del event[column]
    else:
        event[column] = rng.choice([0, "x", {}])


@PURE
@given(profiles(inject=True))
def test_reference_finds_what_was_injected(tmp_path_factory, profile: Profile) -> None:
    run = tmp_path_factory.mktemp("ref")
    expected = generate(run, profile)
    result = reference_checker.check(run)
    assert result.anomalies == expected.anomalies
    assert result.counts == expected.counts


@SPARK
@given(profiles(inject=True), st.integers(0, 1 << 32), st.integers(1, 60))
def test_spark_agrees_with_reference_on_damaged_histories(
        tmp_path_factory, profile: Profile, seed: int, edits: int) -> None:
    run = tmp_path_factory.mktemp("damaged")
    generate(run, profile)
    mangle(run, random.Random(seed), edits)
    assert check_run(run) == reference_checker.check(run)


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_spark_agrees_with_reference_on_damaged_copier_histories(tmp_path, seed: int) -> None:
    """Copier histories (src columns, rewinds, every transaction state, a duplicate and a
    loss) damaged line by line: both checkers still agree, the eos rules included."""
    copier_history.generate(tmp_path, seed, inputs=200, duplicates=1, losses=2)
    mangle(tmp_path, random.Random(seed), 40)
    assert check_run(tmp_path) == reference_checker.check(tmp_path)


def test_file_order_survives_split_files(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files read as several splits (1 MiB each here) in blocks (64 KiB): poll and send
    order is still file order, and no line is lost or read twice at the seams."""
    monkeypatch.setattr(ingest, "SPLIT_BYTES", 1 << 20)
    monkeypatch.setattr(ingest, "BLOCK_BYTES", 1 << 16)
    expected = generate(tmp_path, Profile(records=25000, producers=1, consumers=1, seed=3, inject={
        "nonmonotonic-send": 3, "nonmonotonic-poll": 3, "poll-skip": 3}))
    assert max(f.stat().st_size for f in tmp_path.glob("history/*.jsonl")) > 3 << 19
    result = check_run(tmp_path)
    assert result.anomalies == expected.anomalies
    assert result == reference_checker.check(tmp_path)
