"""The checker's ingest (PyArrow fast path, plain-Python slow path) reads every line
as the history contract's reading (``harness.check.lines.read_lines``) does: the
same events, fields and file order, and the same counts of lines, of skipped lines and
of sends without a message id, by reason, whatever the block and split sizes. No Spark:
the task kernel runs in this process."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.check import ingest, parse
from harness.check.lines import SENDS, Tally, read_lines, skip_reason, split_lines, unjudged, unused

_TYPES = {**ingest.HISTORY_TYPES}
_FLAGS = (("phase", "recovery", ingest.ROW_REC), ("txn", "aborted", ingest.ROW_ABORTED),
          ("isolation", "read_committed", ingest.ROW_RC))


def _expected(path: Path, replicas: bool = False) -> list[tuple[Any, ...]]:
    """What ingest must give for ``path``, from the contract's reading, in file order."""
    out = []
    for _, ev in read_lines(path, replicas=replicas):
        code = (ingest.REPLICA_TYPES if replicas else _TYPES).get(ev.get("type", ""))
        if code is None:
            continue
        part, off, led, ent = (ev.get(k) for k in ("partition", "offset", "ledger", "entry"))
        pos: tuple[Any, ...]
        if part is None or (off is not None and off < 0) or (off is None and (led is None or ent is None
                                                                               or led < 0 or ent < 0)):
            pos = (None, None, None)
        elif off is not None:
            pos = (-1, off, -1)
        else:
            pos = (led, ent, -1 if ev.get("batch") is None else ev.get("batch"))
        if replicas:
            out.append((code, ev.get("mid"), ev.get("topic"), part, *pos, None, 0, ev.get("node"), None, None,
                        None))
            continue
        flags = sum(bit for field, value, bit in _FLAGS if ev.get(field) == value)
        ks = (ev.get("type") == "poll" and ev.get("phase") != "recovery"
              and ev.get("subscription_type") == "Key_Shared" and ev.get("key") is not None
              and ev.get("mid") is not None)
        t = ev.get("t") if ks else None
        out.append((code, ev.get("mid"), ev.get("topic"), part, *pos, ev.get("client"), flags, None,
                    None if t is None or not math.isfinite(t) else t,
                    ev.get("subscription") if ks else None, ev.get("key") if ks else None))
    return out


def _read_layout(out_dir: Path) -> list[dict[str, Any]]:
    """All rows the tasks wrote, checking where they went: a (topic, partition)'s polls
    and replica records with an id in its own directory, resets apart, the rest in
    ``o/``."""
    rows = []
    for path in sorted(out_dir.rglob("*.parquet")):
        where = path.parent.relative_to(out_dir)
        got = pq.read_table(path).to_pylist()
        for r in got:
            placed = (r["pl"] is not None and r["topic_h"] is not None
                      and (r["code"] == ingest.POLL
                           or (r["code"] == ingest.REPLICA and r["mid"] is not None)))
            if where.parts[0] == ingest.PLACED:
                assert placed and (r["topic_h"], r["part"]) == ingest.place_pair(where.parts[1]), (where, r)
            elif where.parts[0] == ingest.RESETS:
                assert r["code"] == ingest.RESET, r
            else:
                assert where == Path(ingest.OTHER) and not placed and r["code"] != ingest.RESET, (where, r)
        rows += got
    return rows


def _ingested(tmp: Path, path: Path, split_bytes: int, replicas: bool = False) -> list[tuple[Any, ...]]:
    out_dir = tmp / f"events-{split_bytes}"
    out_dir.mkdir()
    run = ingest.kernel(str(out_dir))
    tasks = ingest.plan([] if replicas else [str(path)], [str(path)] if replicas else [], split_bytes)
    names = pa.RecordBatch.from_pylist([dict(zip(("path", "file", "replicas", "start", "stop"), t,
                                                 strict=False))
                                        for t in tasks]).schema.names
    found = set()
    tally = Tally()
    for task in tasks:
        for batch in run([pa.RecordBatch.from_pylist([dict(zip(names, task, strict=False))])]):
            for r in batch.to_pylist():
                if r["reason"] is not None:  # a row of skipped lines or sends without an id
                    assert r["path"] == str(path) and r["n"] > 0
                    tally.reasons[r["reason"]] += r["n"]
                    tally.skipped += r["n"] if r["reason"] not in _UNJUDGED else 0
                elif r["lines"] is not None:  # the task's row of line counts
                    assert r["path"] == str(path)
                    tally.lines += r["lines"]
                else:
                    found.add((r["client"], r["topic"], r["polled"], r["rc"]))
    # the lines, skipped lines and sends without an id of the contract's reading, by reason
    expected = Tally()
    for _ in read_lines(path, replicas=replicas, tally=expected):
        pass
    assert tally == expected
    rows = _read_layout(out_dir)
    # the tasks' names: (client, topic, partition of a poll, read_committed poll or meta)
    assert found == {(r["client"], r["topic"], r["part"] if r["code"] == ingest.POLL else None,
                      r["code"] in (ingest.POLL, ingest.META) and bool(r["flags"] & ingest.ROW_RC))
                     for r in rows}
    seqs = [r["seq"] for r in rows]
    if not replicas:
        assert len(set(seqs)) == len(seqs), "two events at one place in file order"
        rows.sort(key=lambda r: r["seq"])
    ks_t = [r["ks_t"] for r in rows]
    return [(r["code"], r["mid"], r["topic"], r["part"], r["pl"], r["pe"], r["pb"], r["client"], r["flags"],
             r["node"], None if t is None or not math.isfinite(t) else t, r["ks_sub"], r["ks_key"])
            for r, t in zip(rows, ks_t, strict=False)]


_UNJUDGED = {unjudged(kind) for kind in SENDS}


def _poll(**fields: Any) -> dict[str, Any]:
    return {"type": "polls", "client": "c", "t": 1.5, "topic": "t", "phase": "run", **fields}


ODD_LINES = [
    json.dumps(_poll(partitions=[0, 1], offsets=[4, 5], mids=["a", "b"], epochs=[1, 1], tss=[1, 2])),
    json.dumps(_poll(partition=3, offsets=[1, 2], mids=["c", None], keys=None)),
    json.dumps(_poll(partitions=[0], offsets=None, ledgers=[7], entries=[2], batches=[None], mids=["d"])),
    json.dumps(_poll(partitions=[0, 0], offsets=[1], mids=["e", "f"])),  # lengths differ
    json.dumps(_poll(partitions=[], offsets=[], mids=[])),
    json.dumps(_poll(partitions=[0], offsets=[1.5], mids=["g"])),
    json.dumps(_poll(partitions=[0], offsets=[2], mids=["h"], tss=["x"], epochs=[None])),
    json.dumps(_poll(partitions=[0], offsets=[2], mids=["i"], redeliveries={})),
    json.dumps(_poll(partitions=[0], offsets=[3], mids=[5], keys=[{"k": 1}])),
    json.dumps({"type": "invokes", "client": 7, "topic": "t", "mids": ["j", "k"], "keys": None,
                "partitions": None, "offsets": [9]}),
    json.dumps({"type": "oks", "client": "p", "mids": ["j"], "partitions": [1], "offsets": [9],
                "epochs": [3], "txn": "aborted"}),
    '{"type":"ok","client":"p","mid":"l","partition":1,"offset":-1}',
    '{"type":"poll","client":"k","mid":"m","topic":"t","partition":0,"ledger":1,"entry":2,"batch":0,'
    '"subscription":"s","subscription_type":"Key_Shared","key":"q","t":"12.5"}',
    '{"type":"poll","client":"k","mid":"n","topic":"t","partition":0,"ledger":1,"entry":3,'
    '"subscription":"s","subscription_type":"Key_Shared","key":"q","t":NaN}',
    '{"type":"poll","client":"k","mid":"o","topic":"t","partition":0,"offset":1,"t":1e400}',
    json.dumps(_poll(subscription="s", subscription_type="Key_Shared", partitions=[0, 0], ledgers=[1, 1],
                     entries=[4, 5], mids=["ka", None], keys=[None, "q"])),
    json.dumps(_poll(subscription="s", subscription_type="Key_Shared", phase="recovery", partitions=[0],
                     ledgers=[1], entries=[6], mids=["kb"], keys=["q"])),
    '{"type":"poll","client":"a","client":"b","mid":"p","partition":0,"offset":1}',
    '{"type":"poll","mid":"q","partition":1}{"type":"poll","mid":"r","partition":1}',
    '{"type":"poll","mid":"\\ud800","partition":99999999999999999999}',
    '{"type":"poll","mid":"\\ud800s","partition":0,"offset":0}',
    '{"type":"meta","client":"c","isolation":"read_committed"}',
    '{"type":"reset","client":"c","topic":"t","partition":null}',
    '[1,2]', '3', '', '   ', '{this is not json', '{"type":"poll","mid":"s","partition":0,"offset":01}',
    '{"type":"poll","mid":"\u00e9\u4e2d","topic":"t","partition":true}',
    '{"type":"poll","mid":"u","topic":"t","partition":2,"offset":0,"phase":"recovery"}',
    # runs (harness.history.RUNS): mids and batch indexes as a start and a count
    '{"type":"invokes","client":"pj","topic":"t","partition":0,"mid_prefix":"pj-","mids_from":7,"count":3,'
    '"keys":null}',
    '{"type":"oks","client":"pj","topic":"t","partition":0,"ledger":6,"entry":2,"offset":null,'
    '"mid_prefix":"pj-","mids_from":7,"batches_from":0,"count":3}',
    '{"type":"oks","client":"pj","topic":"t","partition":1,"ledger":6,"entry":3,"mids":["pj-10","pj-11"],'
    '"batches_from":-1,"count":2}',
    '{"type":"polls","client":"c","topic":"t","phase":"run","partitions":[0,0],"ledgers":[1,1],"entries":[2,2],'
    '"batches_from":4,"mid_prefix":"x","mids_from":0,"count":2}',
    '{"type":"oks","client":"pj","topic":"t","mid_prefix":"pj-","mids_from":1}',  # a run without a count
    '{"type":"oks","client":"pj","topic":"t","mids_from":1,"count":2}',  # no prefix
    '{"type":"oks","client":"pj","topic":"t","mid_prefix":"p","mids_from":1,"mids":["a"],"count":1}',  # both
    '{"type":"oks","client":"pj","topic":"t","partitions":[0,0],"mid_prefix":"p","mids_from":1,"count":3}',
    '{"type":"oks","client":"pj","topic":"t","mid_prefix":"p","mids_from":1,"count":-1}',
    '{"type":"oks","client":"pj","topic":"t","mid_prefix":"p","mids_from":1.5,"count":1}',
    '{"type":"oks","client":"pj","topic":"t","mid_prefix":7,"mids_from":9223372036854775807,"count":1}',
    '{"type":"invokes","client":"pj","topic":"t","mid_prefix":"p","mids_from":1,"batches_from":3,"count":2}',
    '{"type":"oks","client":"pj","topic":"t","mid_prefix":"q","mids_from":9223372036854775807,"count":2}',
    '{"type":"oks","client":"pj","topic":"t","count":0}',
    '{"type":"ok","client":"pj","topic":"t","mid":"z","partition":0,"count":"x"}',
]


@pytest.mark.parametrize("split_bytes", [1 << 20, 97, 31])
@pytest.mark.parametrize("block_bytes", [1 << 20, 64, 7])
def test_odd_lines_read_as_the_contract_reads_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  split_bytes: int, block_bytes: int) -> None:
    monkeypatch.setattr(ingest, "BLOCK_BYTES", block_bytes)
    path = tmp_path / "h.jsonl"
    body = "\n".join(ODD_LINES * 3) + "\r\n" + "\r".join(ODD_LINES[:3]) + "\n" + ODD_LINES[0][:40]
    path.write_bytes(body.encode("utf-8", errors="surrogatepass")
                     + b"\n\xff\xfe{\"type\":\"poll\",\"mid\":\"\xe9\"}")
    expected = _expected(path)
    assert len(expected) > 20
    assert _ingested(tmp_path, path, split_bytes) == expected


SKIPPED_LINES = [  # (line, counted as a line, skipped)
    ('{"type":"poll","mid":"a","topic":"t","partition":0,"offset":1}', True, False),
    ("", False, False),  # blank lines are no lines
    (" \t ", False, False),
    ("{not json", True, True),
    ("[1,2]", True, True),
    ('{"type":"stall","client":"p","seconds":1}', True, False),  # a client event the checker does not use
    ('{"type":"fault","node":"kafka-1"}', True, True),  # not a client event
    ('{"mid":"x","partition":0,"offset":3}', True, True),  # no type
    ('{"type":"polls","partitions":[0,0],"offsets":[1],"mids":["b","c"]}', True, True),  # lengths differ
    ('{"type":"polls","partitions":[],"offsets":[],"mids":[]}', True, False),  # an empty batch
    ('{"type":"polls","partitions":[0],"offsets":[2],"mids":["d"],"tss":[1,2]}', True, True),
    ('{"type":"ok","mid":"e","partition":0,"offset":1.5}', True, True),  # a float offset
    ('{"type":"invoke","mid":"f","partitions":7}', True, True),  # a batch column that is no list
    ('{"type":"oks","mid_prefix":"p","mids_from":1,"count":2}', True, False),  # a run
    ('{"type":"oks","mid_prefix":"p","mids_from":1}', True, True),  # a run without a count
    ('{"type":"oks","mids":["a"],"count":2}', True, True),  # a count that is not the lists' length
    ('{"type":"oks","mid_prefix":"p","mids_from":"1","count":1}', True, True),  # a run start no integer
]


@pytest.mark.parametrize(("line", "counted", "skipped"), SKIPPED_LINES)
def test_a_skipped_line_says_why(tmp_path: Path, line: str, counted: bool, skipped: bool) -> None:
    """skip_reason gives a reason for exactly the lines the tally skips."""
    path = tmp_path / "h.jsonl"
    path.write_text(line + "\n")
    tally = Tally()
    for _ in read_lines(path, tally=tally):
        pass
    assert (tally.lines, tally.skipped) == (int(counted), int(skipped))
    assert (skip_reason(line.encode()) is not None) == skipped


@pytest.mark.parametrize(("line", "why"), [
    ("{not json", "not a JSON object"),
    ("[1,2]", "not a JSON object"),
    ('{"type":"fault","node":"kafka-1"}', "type 'fault': not a client event of the history contract"),
    ('{"mid":"x","partition":0,"offset":3}', "no type"),
    ('{"type":7,"mid":"x"}', "type '7': not a client event of the history contract"),
    ('{"type":"polls","partitions":[0,0],"offsets":[1],"mids":["b","c"]}',
     "batch columns of different lengths"),
    ('{"type":"ok","mid":"e","partition":0,"offset":1.5}', "offset: not a 64-bit integer"),
    ('{"type":"meta","partitions":8}', "partitions: not a list"),
    ('{"type":"polls","partitions":[0],"offsets":["1"],"mids":["a"]}',
     "offsets: not a list of 64-bit integers"),
])
def test_the_reasons(line: str, why: str) -> None:
    assert skip_reason(line.encode()) == why


@pytest.mark.parametrize(("split_bytes", "block_bytes"), [(1 << 20, 1 << 20), (97, 64), (31, 7)])
def test_skipped_lines_are_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, split_bytes: int,
                                   block_bytes: int) -> None:
    """Lines that are not read, not client events, or batches of unequal columns are
    skipped; blank lines are no lines; a torn last line is skipped."""
    monkeypatch.setattr(ingest, "BLOCK_BYTES", block_bytes)
    path = tmp_path / "h.jsonl"
    torn = '{"type":"poll","mid":"g","partition":0,"offset":2'
    path.write_text("\n".join(line for line, _, _ in SKIPPED_LINES * 2) + "\n" + torn)
    tally = Tally()
    for _ in read_lines(path, tally=tally):
        pass
    assert (tally.lines, tally.skipped) == (2 * sum(c for _, c, _ in SKIPPED_LINES) + 1,
                                            2 * sum(s for _, _, s in SKIPPED_LINES) + 1)
    assert _ingested(tmp_path, path, split_bytes) == _expected(path)  # the kernel counts the same


def test_replica_lines(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    lines = [{"type": "replica", "node": "kafka-1", "mid": "a", "topic": "t", "partition": 0, "offset": 3},
             {"type": "replica", "node": 2, "mid": "b", "topic": "t", "partition": 0, "ledger": 1,
              "entry": 0},
             {"type": "replica", "node": "kafka-1", "partitions": "not read", "partition": 1, "offset": 1},
             {"type": "other", "node": "x", "partition": 0, "offset": 1},
             {"type": "replica", "node": "kafka-1", "partition": 0, "offset": 1.5}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + "{not json\n\n" + '{"node":"kafka-1"}\n')
    expected = _expected(path, replicas=True)
    assert len(expected) == 3
    # replica records have no file order (no seq): as many of each; the kernel counts what
    # it skips as read_lines does (_ingested checks it)
    assert sorted(_ingested(tmp_path, path, 1 << 20, replicas=True), key=repr) == sorted(expected, key=repr)
    tally = Tally()
    for _ in read_lines(path, replicas=True, tally=tally):
        pass
    assert (tally.lines, tally.skipped) == (7, 4)
    assert tally.reasons == {"not a replica record": 1, "offset: not a 64-bit integer": 1,
                             "not a JSON object": 1, "no type": 1}
    assert [skip_reason(line, replicas=True) for _, line in split_lines(path.read_bytes())][3:] == [
        "type 'other': not a replica record", "offset: not a 64-bit integer", "not a JSON object", None,
        "no type"]


_OK, _INVOKE = "ok without a message id", "invoke without a message id"
SENDS_WITHOUT_IDS = [  # (line, its sends without a message id by reason)
    ('{"type":"ok","client":"p","partition":0,"offset":1}', {_OK: 1}),
    ('{"type":"ok","client":"p","mid":null,"topic":"t","partition":0,"offset":1}', {_OK: 1}),
    ('{"type":"oks","client":"p","partitions":[0,0,1],"offsets":[1,2,3],"epochs":[1,1,1]}',
     {_OK: 3}),  # a batch counts its records
    ('{"type":"oks","client":"p","mids":["a",null,"b"],"partitions":[0,0,1],"offsets":[1,2,3]}', {_OK: 1}),
    ('{"type":"oks","client":"p","mids":null,"mid":"x","partitions":[0],"offsets":[4]}', {}),  # the line's id
    ('{"type":"oks","client":"p","partitions":[0,0],"offsets":[1]}',
     {"batch columns of different lengths": 1}),  # skipped, not counted twice
    ('{"type":"oks","client":"p"}', {}),  # no columns: no records
    ('{"type":"ok","client":"p","mid":5,"partition":0,"offset":1}', {}),  # an id that is no string: its text
    ('{"type":"invokes","client":"p","topic":"t","mids":[null,"c"],"keys":null}', {_INVOKE: 1}),
    ('{"type":"invoke","client":"p","topic":"t","key":null}', {_INVOKE: 1}),
    ('{"type":"fail","client":"p","error":"NOT_LEADER"}', {"fail without a message id": 1}),
    ('{"type":"info","client":"p","mid":null,"error":"timeout"}', {"info without a message id": 1}),
    ('{"type":"poll","client":"c","topic":"t","partition":0,"offset":1}', {}),  # a record not ours: judged
    ('{"type":"polls","client":"c","topic":"t","partitions":[0],"offsets":[2],"mids":[null]}', {}),
    ('{"type":"reset","client":"c","topic":"t"}', {}),
]


@pytest.mark.parametrize(("split_bytes", "block_bytes"), [(1 << 20, 1 << 20), (97, 64), (31, 7)])
def test_sends_without_a_message_id_are_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                split_bytes: int, block_bytes: int) -> None:
    """A send (invoke, ok, fail, info) without a message id cannot be judged: each is counted
    by its type, a batch's records one by one, by the contract's reading and by the kernel
    alike; polls of records that are not ours are not; ``unused`` names the lines."""
    monkeypatch.setattr(ingest, "BLOCK_BYTES", block_bytes)
    path = tmp_path / "h.jsonl"
    path.write_text("\n".join(line for line, _ in SENDS_WITHOUT_IDS * 2) + "\n")
    tally = Tally()
    for _ in read_lines(path, tally=tally):
        pass
    expected: dict[str, int] = {}
    for _, reasons in SENDS_WITHOUT_IDS * 2:
        for why, n in reasons.items():
            expected[why] = expected.get(why, 0) + n
    assert tally.reasons == expected and tally.skipped == 2
    assert _ingested(tmp_path, path, split_bytes) == _expected(path)  # the kernel counts the same
    described = [unused(line.encode())[1] for line, _ in SENDS_WITHOUT_IDS]
    assert [d is not None for d in described] == [bool(set(r) & _UNJUDGED) for _, r in SENDS_WITHOUT_IDS]
    assert described[:4] == [_OK, _OK, "oks: 3 of 3 records without a message id",
                             "oks: 1 of 3 records without a message id"]


_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.integers(-(1 << 70), 1 << 70),
                     st.floats(allow_nan=True), st.sampled_from(["", "a", "run", "recovery", "aborted",
                                                                 "read_committed", "Key_Shared", "1.5"]),
                     st.text(max_size=3))
_VALUES = st.one_of(_SCALARS, st.lists(_SCALARS, max_size=3), st.dictionaries(st.text(max_size=2), _SCALARS,
                                                                              max_size=2))
_KEYS = st.sampled_from(["type", "client", "mid", "topic", "partition", "offset", "ledger", "entry", "batch",
                         "phase", "txn", "isolation", "key", "t", "subscription", "subscription_type",
                         "partitions", "offsets", "ledgers", "entries", "batches", "mids", "keys", "epochs",
                         "tss", "redeliveries", "other"])
_LINE = st.one_of(
    st.dictionaries(_KEYS, _VALUES, max_size=8).map(
        lambda d: {**d, "type": d.get("type", "polls")}),
    st.fixed_dictionaries({"type": st.sampled_from(["polls", "oks", "invokes", "poll", "ok", "invoke",
                                                    "fail"]),
                           "partitions": st.lists(st.integers(0, 2), min_size=1, max_size=3),
                           "offsets": st.lists(st.integers(-1, 9), min_size=1, max_size=3),
                           "mids": st.lists(st.text(max_size=2), min_size=1, max_size=3)},
                          optional={"ledgers": st.lists(st.integers(0, 3), max_size=3), "partition": _SCALARS,
                                    "offset": _SCALARS, "mid": _SCALARS, "phase": _SCALARS}))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_LINE, max_size=40), st.integers(1, 400), st.integers(1, 300))
def test_any_lines_read_as_the_contract_reads_them(tmp_path_factory: pytest.TempPathFactory,
                                                   lines: list[dict[str, Any]], split_bytes: int,
                                                   block_bytes: int) -> None:
    tmp = tmp_path_factory.mktemp("ingest")
    path = tmp / "h.jsonl"
    path.write_bytes("".join(json.dumps(x) + "\n" for x in lines).encode("utf-8", errors="surrogatepass"))
    old = ingest.BLOCK_BYTES
    ingest.BLOCK_BYTES = block_bytes
    try:
        assert _ingested(tmp, path, split_bytes) == _expected(path)
    finally:
        ingest.BLOCK_BYTES = old
    tally = Tally()
    for _ in read_lines(path, tally=tally):
        pass
    assert sum(skip_reason(line) is not None for _, line in split_lines(path.read_bytes())) == tally.skipped


def test_kernels_run_without_this_package(tmp_path: Path) -> None:
    """On a Spark cluster the executors have NumPy and PyArrow, not this package: the
    ingest and placed kernels, pickled as the session ships them, run in a Python
    where ``harness`` cannot be imported."""
    import subprocess
    import sys

    from pyspark import cloudpickle

    from harness.check import plan

    plan.session_for()  # registers the kernel modules for pickling by value
    out = tmp_path / "events"
    out.mkdir()
    history = tmp_path / "h.jsonl"
    history.write_text("\n".join(ODD_LINES) + "\n")
    (tmp_path / "k.pkl").write_bytes(cloudpickle.dumps(ingest.kernel(str(out))))
    code = f"""
import importlib.abc, pickle, sys
class NoHarness(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "harness":
            raise ImportError(name)
sys.meta_path.insert(0, NoHarness())
import pyarrow as pa
run = pickle.load(open({str(tmp_path / "k.pkl")!r}, "rb"))
task = dict(path={str(history)!r}, file=0, replicas=False, start=0, stop={history.stat().st_size})
print(sum(b.num_rows for b in run([pa.RecordBatch.from_pylist([task])])), "harness" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[1] == "False"
    assert pq.read_table(out).num_rows == len(_expected(history))


def test_with_id_buckets_each_event_is_written_where_the_steps_read_it(tmp_path: Path) -> None:
    """With id buckets: every event with an id and a code up to POLL is in its id's bucket
    (all of an id's in one); the client events among them without a transaction are in no
    other file; everything else is where it is without buckets. The task counts its
    Key_Shared run polls."""
    history = tmp_path / "h.jsonl"
    history.write_text("\n".join([
        '{"type":"invokes","client":"p","topic":"t","mids":["a","b","c"],"t":1.0}',
        '{"type":"invoke","client":"q","topic":"t","mid":"x","tx":"T1","t":1.5}',
        '{"type":"oks","client":"p","topic":"t","mids":["a","b"],"partitions":[0,1],"offsets":[0,0],"t":2.0}',
        '{"type":"fail","client":"p","topic":"t","mid":"c","t":2.1}',
        '{"type":"polls","client":"k","topic":"t","partition":0,"mids":["a","b"],"offsets":[0,1],"t":3.0}',
        '{"type":"poll","client":"k","topic":"t","partition":1,"mid":"z","offset":5,"t":3.5,'
        '"subscription":"s","subscription_type":"Key_Shared","key":"k1"}',
        '{"type":"reset","client":"k","topic":"t","partition":0,"t":4.0}',
        '{"type":"meta","client":"k","t":0.5}',
    ]) + "\n")
    out, ids = tmp_path / "events", tmp_path / "ids"
    out.mkdir()
    ids.mkdir()
    run = ingest.kernel(str(out), str(ids), 4)
    task = dict(zip(("path", "file", "replicas", "start", "stop"), ingest.plan([str(history)], [])[0],
                    strict=True))
    (tally,) = [r for b in run([pa.RecordBatch.from_pylist([task])]) for r in b.to_pylist()
                if r["lines"] is not None]
    assert tally["keyed"] == 1 and tally["lines"] == 8
    events = [(r["code"], r["mid"]) for r in _read_layout(out)]
    bucketed: dict[str, set[str]] = {}
    for path in ids.rglob("*.parquet"):
        for r in pq.read_table(path).to_pylist():
            bucketed.setdefault(r["mid"], set()).add(path.parent.name)
            assert r["code"] <= ingest.POLL
    assert all(len(b) == 1 for b in bucketed.values()) and set(bucketed) == {"a", "b", "c", "x", "z"}
    # sends without a transaction: buckets only; the transaction's send, polls, the rest: events
    assert sorted(events, key=str) == sorted([
        (ingest.INVOKE, "x"), (ingest.POLL, "a"), (ingest.POLL, "b"), (ingest.POLL, "z"),
        (ingest.RESET, None), (ingest.META, None)], key=str)
    rows = sum(pq.read_table(p).num_rows for p in ids.rglob("*.parquet"))
    assert rows == 3 + 1 + 2 + 1 + 2 + 1  # invokes, the tx invoke, oks, fail, polls, poll
    # statistics on the columns that readers filter on (ingest.STATS), none on the others
    for path in [*out.rglob("*.parquet"), *ids.rglob("*.parquet")]:
        group = pq.ParquetFile(path).metadata.row_group(0)
        stats = {group.column(i).path_in_schema: group.column(i).is_stats_set
                 for i in range(group.num_columns)}
        assert {c for c, has in stats.items() if has} == set(ingest.STATS) & set(stats), path


@pytest.mark.parametrize("odd", [False, True])
def test_a_partitions_polls_are_written_together_in_file_order(tmp_path: Path, odd: bool) -> None:
    """Polls of two topics and two partitions each, interleaved within lines and across
    them, with sends between: each (topic, partition)'s directory holds its polls, in file
    order, and every other event is in ``o/`` (the events come out of the lines with each
    partition's polls together, so a write is a slice of them; ``odd``: a poll without a
    position among them, which is not placed, so the writer takes the rows instead)."""
    lines = []
    for i in range(6):
        topic = "t" if i % 2 else "u"
        offsets = [i * 10 + j for j in range(4)]
        if odd and i == 3:
            offsets[1] = -1  # no position: in o/
        lines += [f'{{"type":"invokes","client":"p","topic":"{topic}","mids":["s{i}"],"t":{i}}}',
                  f'{{"type":"polls","client":"k","topic":"{topic}","partitions":[0,1,0,1],'
                  f'"offsets":{json.dumps(offsets)},"mids":["a{i}","b{i}","c{i}","d{i}"],"t":{i}.5}}',
                  f'{{"type":"poll","client":"k","topic":"{topic}","partition":{i % 2},"offset":{100 + i},'
                  f'"mid":"e{i}","t":{i}.7}}']
    history = tmp_path / "h.jsonl"
    history.write_text("\n".join(lines) + "\n")
    out = tmp_path / "events"
    out.mkdir()
    run = ingest.kernel(str(out))
    task = dict(zip(("path", "file", "replicas", "start", "stop"), ingest.plan([str(history)], [])[0],
                    strict=True))
    list(run([pa.RecordBatch.from_pylist([task])]))
    rows = _read_layout(out)  # checks where each row went
    placed = {}
    for path in sorted((out / ingest.PLACED).iterdir()):
        seqs = [r["seq"] for f in sorted(path.glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
        assert seqs == sorted(seqs), path
        placed[path.name] = len(seqs)
    assert len(placed) == 4 and sum(placed.values()) == 6 * 5 - odd
    assert sum(r["code"] == ingest.POLL for r in rows) == 6 * 5
    unplaced = sorted(r["mid"] for r in rows if r["code"] == ingest.POLL and r["pl"] is None)
    assert unplaced == (["b3"] if odd else [])


def test_a_task_that_outlives_its_check_writes_nothing(tmp_path: Path) -> None:
    """A check that failed removes its scratch directory while other tasks of the step may
    still run: their writes fail instead of making the directory again (no leftover)."""
    history = tmp_path / "h.jsonl"
    history.write_text("".join(f'{{"type":"invoke","client":"p","topic":"t","mid":"m{i}","t":{i}}}\n'
                               for i in range(20)))
    scratch = tmp_path / "harness-check-1-x"
    out, ids = scratch / "events", scratch / "ids"
    out.mkdir(parents=True)
    ids.mkdir()
    run = ingest.kernel(str(out), str(ids), 2)
    task = dict(zip(("path", "file", "replicas", "start", "stop"), ingest.plan([str(history)], [])[0],
                    strict=True))
    shutil.rmtree(scratch)  # the check failed and removed it
    with pytest.raises(FileNotFoundError):
        list(run([pa.RecordBatch.from_pylist([task])]))
    assert not scratch.exists()
    assert ingest.dirs_under(str(tmp_path), "a/b", "c") == str(tmp_path / "a" / "b" / "c")
    assert ingest.dirs_under(str(tmp_path), "a", "b/c") == str(tmp_path / "a" / "b" / "c")  # made: no error
    with pytest.raises(FileNotFoundError):
        ingest.dirs_under(str(tmp_path / "gone"), "a")
    assert not (tmp_path / "gone").exists()


def test_a_split_writes_each_id_bucket_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A split read in many blocks writes each id bucket's rows as one row group, in
    file order (a row group per block and bucket cost more than its rows)."""
    monkeypatch.setattr(ingest, "BLOCK_BYTES", 128)  # about one line a block
    history = tmp_path / "h.jsonl"
    history.write_text("".join(f'{{"type":"invoke","client":"p","topic":"t","mid":"m{i}","t":{i}}}\n'
                               for i in range(200)))
    out, ids = tmp_path / "events", tmp_path / "ids"
    out.mkdir()
    ids.mkdir()
    run = ingest.kernel(str(out), str(ids), 8)
    task = dict(zip(("path", "file", "replicas", "start", "stop"), ingest.plan([str(history)], [])[0],
                    strict=True))
    list(run([pa.RecordBatch.from_pylist([task])]))
    files = sorted(ids.rglob("*.parquet"))
    assert len(files) == 8  # 200 ids over 8 buckets: each has some
    for path in files:
        assert pq.ParquetFile(path).num_row_groups == 1
        seqs = pq.read_table(path).column("seq").to_pylist()
        assert seqs == sorted(seqs)
    assert sorted(r for p in files for r in pq.read_table(p).column("mid").to_pylist()) == \
        sorted(f"m{i}" for i in range(200))


@pytest.mark.parametrize("split_bytes", [1 << 20, 97, 31, 5])
def test_a_seq_names_the_split_that_wrote_it(tmp_path: Path, split_bytes: int) -> None:
    """The split :func:`ingest.line_split` finds from an event's ``seq`` is the one whose
    files hold the event: batch lines longer than a split (a ``seq`` then passes into a
    later split), \\r and \\r\\n line ends, blank lines. The details step reads only those
    files for its example sends."""
    history = tmp_path / "h.jsonl"
    long_batch, other_batch = (json.dumps({"type": "invokes", "client": "p", "topic": "t",
                                           "mids": [f"{m}{i}" for i in range(40)]}) for m in "mn")
    history.write_bytes("\n".join([
        '{"type":"invoke","client":"p","topic":"t","mid":"a"}', long_batch, "",
        '{"type":"invoke","client":"p","topic":"t","mid":"b"}\r{"type":"invoke","client":"p","topic":"t",'
        '"mid":"c"}\r\n{"type":"fail","client":"p","topic":"t","mid":"b"}', other_batch,
        '{"type":"polls","client":"k","topic":"t","partition":0,"mids":["a","b"],"offsets":[0,1]}',
    ]).encode() + b"\n")
    out, ids = tmp_path / "events", tmp_path / "ids"
    out.mkdir()
    ids.mkdir()
    run = ingest.kernel(str(out), str(ids), 3)
    for task in ingest.plan([str(history)], [], split_bytes):
        row = dict(zip(("path", "file", "replicas", "start", "stop"), task, strict=True))
        list(run([pa.RecordBatch.from_pylist([row])]))
    mask = (1 << ingest.OFFSET_BITS) - 1
    seen = 0
    for path in [*ids.rglob("*.parquet"), *out.rglob("*.parquet")]:
        for seq in pq.read_table(path, columns=["seq"])["seq"].to_pylist():
            start = ingest.line_split(str(history), seq & mask, split_bytes)
            assert path.name == ingest.split_name(False, seq >> ingest.OFFSET_BITS, start), (seq, path)
            seen += 1
    assert seen == 1 + 40 + 3 + 40 + 2 * 2  # polls: in their bucket and in their place


@pytest.mark.parametrize("lines, inferred", [
    (['{"type":"polls","mids":["a",null],"partitions":[0,0],"offsets":[1,2],"t":1}',
      '{"type":"poll","mid":"b","partition":0,"offset":3,"t":2.5,"error":{"x":[1]}}'], True),
    # PyArrow's inference drops the null that begins a list whose later value types it
    (['{"type":"polls","mids":[null,"a"],"partitions":[0,0],"offsets":[1,2]}'], False),
    (['{"type":"poll","mid":"c","partition":0,"offset":1.5}'], False),  # a float offset
    (['{"type":"poll","mid":7,"partition":0,"offset":1}'], False),  # a number as an id
    (['{"type":"poll","mid":"d","partition":0,"offset":1,"t":"2"}'], False),  # a string time
])
def test_inferred_types_read_as_the_explicit_schema_or_not_at_all(lines: list[str], inferred: bool) -> None:
    """A block read with inferred types (faster) is the explicit schema's table, or None
    (then the explicit schema reads it: the rest of the ingest, and the contract's tolerance
    of odd lines, see the same table either way)."""
    block = ("\n".join(lines) + "\n").encode()
    schema = parse.HISTORY_LINE
    got = parse.read_inferred(block, schema)
    assert (got is not None) == inferred
    if got is not None:
        assert got.equals(parse.read_explicit(block, schema))
