"""The per-id step (harness.check.mids): its aggregate on a small table whose answer is
worked out by hand, the id buckets, and whole checks split over many buckets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from check_helpers import example_mids

from harness.check import check_run, plan
from harness.check.anomalies.vocab import (
    F_ABORTED,
    F_DUP,
    F_FAIL,
    F_INV,
    F_OK,
    F_RC_READ,
    F_REC,
    F_REC_RC,
    F_RU_READ,
    F_RUN,
    FAIL,
    FLAG_VALUES,
    INVOKE,
    OK,
    POLL,
    ROW_ABORTED,
    ROW_REC,
)
from harness.check.ingest import IDS_SCHEMA, bucket_of
from harness.check.mids import Loud, aggregate, flag_counts
from harness.testing.copier_history import generate as copier_history
from harness.testing.synthetic import INJECTABLE, Profile, generate

RC = 77  # the read_committed client


def _table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{name: row.get(name) for name in IDS_SCHEMA.names} for row in rows],
                                schema=IDS_SCHEMA)


def _event(mid: str, code: int, seq: int, **fields: object) -> dict:
    return {"mid": mid, "code": code, "seq": seq, "flags": 0, **fields}


AT_10 = {"topic_h": 7, "part": 0, "pl": -1, "pe": 10, "pb": -1}
AT_11 = {**AT_10, "pe": 11}


def test_flag_counts_and_loud_ids() -> None:
    """Step 3's flag counts (ids per flags and transaction, a null transaction a pair of its
    own) and its loud ids (flags marked for an id sent with or without a transaction)."""
    ids = pa.table({"f": pa.array([F_INV | F_OK, F_INV, F_INV | F_OK, F_INV, F_INV | F_OK], pa.int32()),
                    "tx_h": pa.array([None, 5, 5, None, None], pa.int64())})
    assert sorted(flag_counts(ids).to_pylist(), key=lambda r: (r["f"], r["tx_h"] or 0)) == [
        {"f": F_INV, "tx_h": None, "n": 1}, {"f": F_INV, "tx_h": 5, "n": 1},
        {"f": F_INV | F_OK, "tx_h": None, "n": 2}, {"f": F_INV | F_OK, "tx_h": 5, "n": 1}]
    plain, tx = np.zeros(FLAG_VALUES, np.bool_), np.zeros(FLAG_VALUES, np.bool_)
    plain[F_INV | F_OK] = True
    tx[F_INV] = True
    loud = Loud(plain.tobytes(), tx.tobytes(), "")
    assert loud.mask(ids).tolist() == [True, True, False, False, True]


def test_the_aggregate_takes_firsts_by_seq_and_finds_duplicates() -> None:
    rows = [  # not in seq order: the firsts are by seq, not by row
        _event("a", POLL, 40, client_h=RC, t=4.0, flags=ROW_REC, **AT_10),
        _event("a", INVOKE, 9, client_h=2, topic_h=7, t=0.5, due=0.4, tx_h=5, src="z"),
        _event("a", OK, 30, client_h=2, t=3.0, **AT_11),
        _event("a", INVOKE, 5, client_h=1, topic_h=7, t=1.0, due=0.9, tx_h=3, src="s"),
        _event("a", OK, 20, client_h=1, t=2.0, **AT_10),
        _event("a", POLL, 35, client_h=8, t=3.5, **AT_10),
        _event("b", POLL, 50, client_h=8, t=6.0, **AT_10),
        _event("b", POLL, 45, client_h=8, t=5.0, **AT_11),
        _event("c", INVOKE, 60, client_h=1, topic_h=7, t=7.0),
        _event("c", FAIL, 61, client_h=1, t=7.5, flags=ROW_ABORTED),
        _event("d", OK, 70, client_h=1, t=8.0, **AT_10),  # its only binding: no duplicate
    ]
    out = {r["mid"]: r for r in aggregate(_table(rows), np.array([RC])).to_pylist()}
    a, b, c, d = out["a"], out["b"], out["c"], out["d"]
    # a: first invoke seq 5, first ack seq 20 (at 10, as its polls): no duplicate
    assert a["f"] == F_INV | F_OK | F_RUN | F_REC | F_RC_READ | F_RU_READ | F_REC_RC
    assert (a["inv_seq"], a["inv_client"], a["due_t"], a["tx_h"], a["src"]) == (5, 1, 0.9, 3, "s")
    assert (a["ack_client"], a["ack_topic"], a["ack_part"], a["ack_pl"], a["ack_pe"], a["ack_pb"]) == (
        1, 7, 0, -1, 10, -1)
    assert (a["inv_t"], a["ack_t"], a["poll_t"], a["rc_t"]) == (0.5, 2.0, 3.5, 4.0)  # least times
    # b: read at two positions, never sent
    assert b["f"] == F_RUN | F_RU_READ | F_DUP
    assert b["inv_seq"] is None and b["ack_topic"] is None and b["poll_t"] == 5.0 and b["rc_t"] is None
    # c: failed in an aborted transaction; the ack topic falls back to the invoke's
    assert c["f"] == F_INV | F_FAIL | F_ABORTED and c["ack_topic"] == 7 and c["ack_pl"] is None
    assert d["f"] == F_OK and d["inv_seq"] is None
    assert set(out) == {"a", "b", "c", "d"}


def test_an_ack_at_another_position_than_the_polls_is_a_duplicate() -> None:
    rows = [_event("a", OK, 1, client_h=1, **AT_11), _event("a", POLL, 2, client_h=8, t=1.0, **AT_10),
            _event("a", POLL, 3, client_h=8, t=2.0, **AT_10)]
    (row,) = aggregate(_table(rows), np.array([RC])).to_pylist()
    assert row["f"] & F_DUP
    rows[0].update(AT_10)
    (row,) = aggregate(_table(rows), np.array([RC])).to_pylist()
    assert not row["f"] & F_DUP


def test_an_id_has_one_bucket_wherever_it_is_read() -> None:
    ids = [f"p{i % 3}-{i}" for i in range(20_000)] + ["", "é" * 20, "x" * 100]
    whole = bucket_of(pa.array(ids), 10)
    chunked = bucket_of(pa.chunked_array([pa.array(ids[:7]), pa.array(ids[7:])]), 10)
    sliced = bucket_of(pa.array(["pad", *ids]).slice(1), 10)
    assert (whole == chunked).all() and (whole == sliced).all()
    assert whole.min() >= 0 and whole.max() < 10
    counts = np.bincount(whole, minlength=10)
    assert counts.min() > 0.08 * len(ids) and counts.max() < 0.12 * len(ids), counts  # counters spread
    assert (bucket_of(pa.array(ids), 1) == 0).all()
    with pytest.raises(ValueError):
        bucket_of(pa.array(ids), 0)


@pytest.mark.parametrize("system", ["kafka", "pulsar"])
def test_a_check_over_many_buckets_finds_every_anomaly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      system: str) -> None:
    """A small run has one bucket; this one is split into about 40 (48 KB of input each)."""
    kinds = [k for k in INJECTABLE if k != ("silent-reread" if system == "pulsar" else "key-order")]
    expected = generate(tmp_path, Profile(records=3000, system=system, replicas=3, txn=True, seed=11,
                                          inject=dict.fromkeys(kinds, 2), key_shared=system == "pulsar"))
    monkeypatch.setattr(plan, "MIDS_BUCKET_BYTES", 48 << 10)
    result = check_run(tmp_path)
    assert result.anomalies == expected.anomalies
    assert result.counts == expected.counts
    for kind, examples in result.examples.items():
        for ex in examples:
            assert example_mids(ex) <= expected.mids.get(kind, frozenset()), (kind, ex)
    assert len(list((tmp_path / "history").iterdir())) >= 1


def test_a_copier_check_over_many_buckets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    answer = copier_history(tmp_path, 2, inputs=200, duplicates=1, losses=1)
    monkeypatch.setattr(plan, "MIDS_BUCKET_BYTES", 2048)
    result = check_run(tmp_path)
    assert result.anomalies["eos-duplicate"] == answer["duplicates"]
    assert result.anomalies["eos-loss"] == 1
