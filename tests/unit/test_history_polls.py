"""Batch events (``polls``, ``oks``): each means exactly its single events (history contract)."""

import json
import pathlib

from harness.history import HistoryWriter, expand_polls, read_events


def _batch(**cols):
    return {"type": "polls", "client": "c0", "t": 1.5, "m": 2.5, "phase": "run", "topic": "t",
            "isolation": "read_committed", **cols}


def test_a_kafka_batch_expands_to_its_polls_in_order() -> None:
    polls = expand_polls(_batch(partitions=[0, 1, 0], offsets=[5, 9, 6], epochs=[2, 3, None],
                                mids=["p-1", None, "p-2"], tss=[10, 11, 12], keys=None))
    assert [p["offset"] for p in polls] == [5, 9, 6]
    assert [p["partition"] for p in polls] == [0, 1, 0]
    assert [p["mid"] for p in polls] == ["p-1", None, "p-2"]
    assert [p["epoch"] for p in polls] == [2, 3, None]
    assert all(p["key"] is None and p["type"] == "poll" and p["t"] == 1.5 and p["m"] == 2.5
               and p["isolation"] == "read_committed" and p["topic"] == "t" for p in polls)
    assert "ledger" not in polls[0] and "offsets" not in polls[0]


def test_a_pulsar_batch_expands_with_message_id_parts() -> None:
    polls = expand_polls(_batch(partitions=[3], ledgers=[17], entries=[4], batches=[-1],
                                mids=["x-0"], tss=[1], keys=["k"]))
    assert polls == [{"type": "poll", "client": "c0", "t": 1.5, "m": 2.5, "phase": "run",
                      "topic": "t", "isolation": "read_committed", "partition": 3, "ledger": 17,
                      "entry": 4, "batch": -1, "mid": "x-0", "ts": 1, "key": "k"}]


def test_a_malformed_batch_gives_nothing() -> None:
    assert expand_polls(_batch(partitions=[0, 1], offsets=[1])) == []
    assert expand_polls(_batch(partitions=0, offsets=[1])) == []
    assert expand_polls(_batch()) == []


def test_read_events_expands_batches_unless_told_not_to(tmp_path) -> None:
    path = tmp_path / "c.jsonl"
    with HistoryWriter(path, "c0") as w:
        w.record("poll", phase="run", topic="t", partition=0, offset=0, mid="a-0")
        w.write_line(json.dumps(_batch(partitions=[0, 0], offsets=[1, 2], mids=["a-1", "a-2"]))
                     + "\n")
        w.record("reset", topic="t", partition=0, reason="truncation")
    kinds = [(e["type"], e.get("offset")) for e in read_events(path)]
    assert kinds == [("poll", 0), ("poll", 1), ("poll", 2), ("reset", None)]
    assert [e["type"] for e in read_events(path, expand=False)] == ["poll", "polls", "reset"]


def test_an_oks_batch_expands_to_its_acks_with_batch_fields() -> None:
    from harness.history import expand_batch

    oks = expand_batch({"type": "oks", "client": "p0", "t": 1.5, "m": 2.5, "topic": "t",
                        "txn": "committed", "mids": ["p0-1", "p0-2"], "partitions": [1, 0],
                        "offsets": [7, 3], "epochs": [4, 4], "keys": ["not", "a", "column"]})
    assert oks == [{"type": "ok", "client": "p0", "t": 1.5, "m": 2.5, "topic": "t", "txn": "committed",
                    "keys": ["not", "a", "column"], "mid": mid, "partition": p, "offset": o, "epoch": 4}
                   for mid, p, o in (("p0-1", 1, 7), ("p0-2", 0, 3))]
    assert expand_batch({"type": "oks", "mids": ["a", "b"], "partitions": [0]}) == []


def test_read_events_expands_oks(tmp_path) -> None:
    path = tmp_path / "p.jsonl"
    with HistoryWriter(path, "p0") as w:
        w.record("invoke", mid="p0-1", topic="t")
        w.record("invoke", mid="p0-2", topic="t")
        w.write_line(json.dumps({"type": "oks", "client": "p0", "t": 1.0, "m": 1.0,
                                 "mids": ["p0-1", "p0-2"], "partitions": [0, 0], "offsets": [0, 1]}) + "\n")
    assert [(e["type"], e["mid"], e.get("offset")) for e in read_events(path)] == [
        ("invoke", "p0-1", None), ("invoke", "p0-2", None), ("ok", "p0-1", 0), ("ok", "p0-2", 1)]


def test_read_events_skips_lines_no_writer_makes(tmp_path: pathlib.Path) -> None:
    good = '{"type":"ok","client":"p","t":1,"m":1,"mid":"a"}'
    lines = [good, '{"type":["ok"],"t":1}', '{"type":{"a":1}}', '{"type":"ok","n":' + "9" * 5000 + "}",
             "[" * 100_000, "not json", good]
    path = tmp_path / "h.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert [e["mid"] for e in read_events(path)] == ["a", "a"]


def test_runs_expand_to_consecutive_mids_and_batch_indexes() -> None:
    from harness.history import batch_size, expand_batch

    oks = {"type": "oks", "client": "pj", "t": 1.0, "topic": "t", "partition": 0, "ledger": 6, "entry": 2,
           "offset": None, "mid_prefix": "pj-", "mids_from": 7, "batches_from": 0, "count": 3}
    assert batch_size(oks) == 3
    assert [(e["type"], e["mid"], e["batch"], e["ledger"], e["entry"]) for e in expand_batch(oks)] == [
        ("ok", "pj-7", 0, 6, 2), ("ok", "pj-8", 1, 6, 2), ("ok", "pj-9", 2, 6, 2)]
    assert not {"mid_prefix", "mids_from", "batches_from", "count"} & set(expand_batch(oks)[0])
    # a run beside lists: the lists are count long
    mixed = {**oks, "mids_from": None, "mid_prefix": None, "mids": ["a", "b", "c"]}
    assert [e["mid"] for e in expand_batch(mixed)] == ["a", "b", "c"]
    # an invokes line has no batch field: its batches_from is not a run
    invokes = {"type": "invokes", "client": "pj", "topic": "t", "mid_prefix": "q", "mids_from": 1,
               "batches_from": 5, "count": 2}
    assert [(e["mid"], e.get("batch")) for e in expand_batch(invokes)] == [("q1", None), ("q2", None)]


def test_a_run_that_does_not_agree_gives_nothing() -> None:
    from harness.history import batch_size, expand_batch

    run = {"type": "oks", "mid_prefix": "p", "mids_from": 1, "count": 2}
    for bad in ({**run, "count": None}, {**run, "mid_prefix": None}, {**run, "mids": ["a", "b"]},
                {**run, "count": -1}, {**run, "count": True}, {**run, "mids_from": 1.0},
                {**run, "partitions": [0, 0, 0]}, {**run, "mids_from": (1 << 63) - 1}):
        assert batch_size(bad) is None and expand_batch(bad) == [], bad
    assert batch_size({**run, "mids_from": (1 << 63) - 2}) == 2  # its last mid still a 64-bit integer
    assert batch_size({"type": "oks", "count": 0}) == 0 and expand_batch({"type": "oks", "count": 0}) == []
