"""Hand-written histories pinning the rules of docs/checker.md, one scenario per rule:
through the reference checker one by one, and through Spark all in one run (each
scenario has its own topic, clients and ids, so they do not interact)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.check import ANOMALIES, check_run
from harness.testing import reference_checker

Files = dict[str, list[dict[str, Any]]]


def _ev(type_: str, client: str, **fields: Any) -> dict[str, Any]:
    return {"type": type_, "client": client, "t": 0.0, "m": 0.0, **fields}


def _sent(client: str, mid: str, topic: str, offset: int | None, *, with_topic: bool = True,
          **extra: Any) -> list[dict[str, Any]]:
    ok = {"topic": topic} if with_topic else {}
    return [_ev("invoke", client, mid=mid, topic=topic, key=None),
            _ev("ok", client, mid=mid, partition=0, offset=offset, epoch=1, **ok, **extra)]


def _poll(client: str, mid: str | None, topic: str, offset: int | None = None, *,
          phase: str | None = "run", pulsar: tuple[int, int, int] | None = None,
          **extra: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {"phase": phase} if phase is not None else {}
    if pulsar is not None:
        fields.update(zip(("ledger", "entry", "batch"), pulsar, strict=False))
    return _ev("poll", client, mid=mid, topic=topic, partition=0, offset=offset, **fields, **extra)


def _recovery(topic: str, *reads: tuple[str | None, int]) -> list[dict[str, Any]]:
    return [_poll("recovery", mid, topic, off, phase="recovery") for mid, off in reads]


def _polls(client: str, topic: str, *, phase: str | None = "run", **columns: Any) -> dict[str, Any]:
    """A polls line: batch fields and columns as given."""
    fields: dict[str, Any] = {"phase": phase} if phase is not None else {}
    return _ev("polls", client, topic=topic, **fields, **columns)


def _ks(client: str, mid: str | None, key: str | None, entry: int, t: Any, *, ledger: int = 1,
        partition: int = 0, subscription: str = "s", kind: str = "Key_Shared",
        phase: str = "run") -> dict[str, Any]:
    """A Pulsar poll of the key-order scenario (topic key-order)."""
    return {**_ev("poll", client, mid=mid, topic="key-order", partition=partition, offset=None,
                  ledger=ledger, entry=entry, batch=-1, phase=phase, key=key, subscription=subscription,
                  subscription_type=kind), "t": t}


RC, RU = "read_committed", "read_uncommitted"


def _txn(client: str, tx: str, topic: str, sends: list[tuple[str, int]], end: str,
         status: str) -> list[dict[str, Any]]:
    """A transaction ``tx``: begin at t=1, its sends (partition 0) acked, then ``end``
    (commit or abort) invoked at t=10 and completed with ``status``."""
    mids = [m for m, _ in sends]
    return [{**_ev("txn", client, tx=tx, action="begin", status="ok"), "t": 1.0},
            {**_ev("invokes", client, topic=topic, tx=tx, mids=mids, keys=None, partitions=None), "t": 2.0},
            {**_ev("oks", client, topic=topic, mids=mids, partitions=[0] * len(sends),
                   offsets=[o for _, o in sends]), "t": 3.0},
            {**_ev("txn", client, tx=tx, action=end, status="invoke"), "t": 10.0},
            {**_ev("txn", client, tx=tx, action=end, status=status), "t": 11.0}]


def _rc_recovery(client: str, topic: str, *reads: tuple[str, int]) -> list[dict[str, Any]]:
    """A read_committed recovery read (with a meta line, so that an empty one is one too)."""
    return ([_ev("meta", client, isolation=RC)]
            + [_poll(client, mid, topic, off, phase="recovery", isolation=RC, t=30.0) for mid, off in reads])


def _copies(client: str, tx: str, sends: list[tuple[str, int, str]], end: str,
             status: str) -> list[dict[str, Any]]:
    """A copier's transaction on topic eos-out: (copy id, offset, input id) per send."""
    events = _txn(client, tx, "eos-out", [(m, o) for m, o, _ in sends], end, status)
    events[1]["srcs"] = [src for _, _, src in sends]
    return events


_EOS_IN = [(f"in{i}", i - 1) for i in range(1, 7)]
_EOS_OUT = [("co1", 0), ("co2", 1), ("co4", 5), ("co5", 6), ("co6", 8)]

_KO_MIDS = [f"m{i}" for i in (1, 2, 4, 5, 6, 11, 12, 20, 21, 30, 31, 32, 33, 34, 36, 37, 38)]


SCENARIOS: dict[str, tuple[Files, dict[str, int]]] = {
    # An ok event without a topic binds its position in the topic of its invoke.
    "ack-topic": ({
        "producer-a": _sent("producer-a", "a1", "ack-topic", 5, with_topic=False),
        "producer-b": _sent("producer-b", "b1", "ack-topic", 6),
        "recovery": _recovery("ack-topic", ("b1", 5)),
    }, {"lost-write": 1, "unseen": 1, "duplicate": 1, "inconsistent-offsets": 1}),
    # A reset without a partition covers every partition of its topic.
    "reset-all": ({
        "producer": _sent("producer", "r1", "reset-all", 0) + _sent("producer", "r2", "reset-all", 1),
        "covered": [_poll("covered", "r1", "reset-all", 0), _poll("covered", "r2", "reset-all", 1),
                    _ev("reset", "covered", topic="reset-all", partition=None, reason="truncation"),
                    _poll("covered", "r1", "reset-all", 0)],
        "uncovered": [_poll("uncovered", "r1", "reset-all", 0), _poll("uncovered", "r2", "reset-all", 1),
                      _poll("uncovered", "r1", "reset-all", 0)],
        "recovery": _recovery("reset-all", ("r1", 0), ("r2", 1)),
    }, {"nonmonotonic-poll": 1, "silent-reread": 1}),
    # read_committed may be on the polls (not only on a meta event).
    "isolation": ({
        "producer": [_ev("invoke", "producer", mid="z1", topic="isolation"),
                     _ev("fail", "producer", mid="z1", error="abort", txn="aborted")],
        "committed": [_poll("committed", "z1", "isolation", 0, isolation="read_committed")],
        "uncommitted": [_poll("uncommitted", "z1", "isolation", 0, isolation="read_uncommitted")],
    }, {"aborted-read": 1}),
    # A poll without a phase is a run-phase poll.
    "no-phase": ({
        "producer": _sent("producer", "n1", "no-phase", 0),
        "consumer": [_poll("consumer", "n1", "no-phase", 0, phase=None)],
        "recovery": _recovery("no-phase", ("n1", 0)),
    }, {}),
    # Negative offsets (acks=0 gives -1) are no position: they bind nothing.
    "no-offset": ({
        "producer": _sent("producer", "o1", "no-offset", -1) + _sent("producer", "o2", "no-offset", -1),
        "consumer": [_poll("consumer", "o1", "no-offset", 0), _poll("consumer", "o2", "no-offset", 1)],
        "recovery": _recovery("no-offset", ("o1", 0), ("o2", 1)),
    }, {}),
    # Pulsar positions order by (ledger, entry, batch); a batch index -1 is a whole entry.
    "pulsar": ({
        "consumer": [_poll("consumer", f"q{i}", "pulsar", pulsar=at)
                     for i, at in enumerate([(1, 0, 0), (1, 0, 1), (1, 1, -1), (2, 0, -1)])]
                    + [_poll("consumer", "q1", "pulsar", pulsar=(1, 0, 1))],
        "producer": [_ev("invoke", "producer", mid=f"q{i}", topic="pulsar") for i in range(4)],
        # (unacked sends a reader saw are committed: without a recovery read, all 4 are lost)
    }, {"nonmonotonic-poll": 1, "lost-write": 4}),
    # A skip is judged against the recovery read: offset 1 (a transaction marker) is no record.
    "skip": ({
        "producer": [e for i, off in enumerate([0, 2, 3]) for e in _sent("producer", f"s{i}", "skip", off)],
        "skipper": [_poll("skipper", "s0", "skip", 0), _poll("skipper", "s2", "skip", 3)],
        "reader": [_poll("reader", f"s{i}", "skip", off) for i, off in enumerate([0, 2, 3])],
        "recovery": _recovery("skip", ("s0", 0), ("s1", 2), ("s2", 3)),
    }, {"poll-skip": 1}),
    # A polls line is its poll events in list order, then the next line: po2 skips po1 (the
    # recovery read has it), po1 after po2 goes back.
    "polls-order": ({
        "producer": [e for i in range(3) for e in _sent("producer", f"po{i}", "polls-order", i)],
        "consumer": [_polls("po-c", "polls-order", partitions=[0, 0], offsets=[0, 2], mids=["po0", "po2"]),
                     _poll("po-c", "po1", "polls-order", 1)],
        "recovery": [_polls("recovery", "polls-order", phase="recovery", partitions=[0, 0, 0],
                            offsets=[0, 1, 2], mids=["po0", "po1", "po2"], keys=None)],
    }, {"poll-skip": 1, "nonmonotonic-poll": 1, "int-poll-skip": 1}),  # (the skip is in one polls line)
    # Malformed batches are dropped whole (each would poll an id never sent): lists of
    # different lengths (used columns or not), a column that is no list, a float offset. A
    # batch without columns or with empty ones has no records; the one good batch has one.
    "polls-malformed": ({
        "consumer": [
            _polls("pm-c", "polls-malformed", partitions=[0, 0], offsets=[0, 1], mids=["zz1"]),
            _polls("pm-c", "polls-malformed", partitions=0, offsets=[2], mids=["zz2"]),
            _polls("pm-c", "polls-malformed", partitions=[0], offsets=[3.5], mids=["zz3"]),
            _polls("pm-c", "polls-malformed", partitions=[0], offsets=[4], mids=["zz4"], tss="x"),
            _polls("pm-c", "polls-malformed", partitions=[0], offsets=[5], mids=["zz5"], keys=[]),
            _polls("pm-c", "polls-malformed", partitions=[0], offsets=[6], mids=["zz6"], epochs=[1, 2]),
            _polls("pm-c", "polls-malformed", partitions=[0], offsets=[7], mids=["zz7"], redeliveries={}),
            _polls("pm-c", "polls-malformed", mid="zz8", partition=0, offset=8),
            _polls("pm-c", "polls-malformed", partitions=[], offsets=[], mids=[]),
            _polls("pm-c", "polls-malformed", partitions=[0], offsets=[9], mids=["zz9"], keys=None,
                   epochs=[None], tss=["x"]),
        ],
    }, {"unexpected": 1}),
    # Batch fields hold for every record: partition (no partitions column), isolation; a
    # null column (offsets of Pulsar records) is all null; absent batches are -1.
    "polls-fields": ({
        "producer": (_sent("pf-p", "f0", "polls-fields", 0) + _sent("pf-p", "f1", "polls-fields", 1)
                     + [_ev("invoke", "pf-p", mid=f"g{i}", topic="polls-fields-p") for i in range(2)]
                     + [_ev("invoke", "pf-p", mid="z2", topic="polls-fields-i"),
                        _ev("fail", "pf-p", mid="z2", error="abort", txn="aborted")]),
        "consumer": [_polls("pf-c", "polls-fields", partition=0, offsets=[1, 0], mids=["f1", "f0"],
                            keys=None),
                     _polls("pf-c", "polls-fields-p", partitions=[0, 0], offsets=None, ledgers=[1, 1],
                            entries=[1, 0], mids=["g1", "g0"]),
                     _polls("pf-rc", "polls-fields-i", partitions=[0], offsets=[5], mids=["z2"],
                            isolation="read_committed")],
        "recovery": [_polls("recovery", "polls-fields", phase="recovery", partitions=[0, 0], offsets=[0, 1],
                            mids=["f0", "f1"])],
        # (g0, g1: unacked sends a reader saw are committed, and the recovery read lacks them)
    }, {"nonmonotonic-poll": 2, "int-nonmonotonic-poll": 2, "aborted-read": 1, "lost-write": 2}),
    # key-order: per (topic, subscription, key, partition) in order of t (a string t is cast;
    # ties in file order), first polls only. Three violations: m4 after m5 (another client,
    # earlier t), m12 after m11 (one batch, one t), m21 (file earlier, t later) after m20.
    # Redeliveries, other keys, partitions, subscriptions and types, the recovery phase, and
    # polls without key, id or usable t are not judged (each would be one more).
    "key-order": ({
        "producer": [_ev("invoke", "ko-p", mid=m, topic="key-order") for m in _KO_MIDS],
        "ks-a": [_ks("ks-a", "m1", "k", 1, 1.0), _ks("ks-a", "m2", "k", 2, 2.0), _ks("ks-a", "m4", "k", 4, 4),
                 _ks("ks-a", "m6", "j", 6, 7.0),
                 {**_polls("ks-a", "key-order", subscription="s", subscription_type="Key_Shared",
                           partitions=[0, 0], ledgers=[1, 1], entries=[11, 10], batches=None,
                           mids=["m11", "m12"], keys=["k", "k"], redeliveries=[0, 0]), "t": 20.0},
                 _ks("ks-a", "m21", "k", 29, "31")],
        "ks-b": [_ks("ks-b", "m5", "k", 5, 3.0),
                 _ev("reset", "ks-b", topic="key-order", partition=0, reason="rebalance"),
                 _ks("ks-b", "m1", "k", 1, 6.0), _ks("ks-b", "m20", "k", 30, 30.0)],
        "ks-x": [_ks("ks-x", "m30", "k", 0, 40.0, ledger=0, phase="recovery"),
                 _ks("ks-x", "m31", "k", 1, 41.0, ledger=0, kind="Shared"),
                 _ks("ks-x", "m32", None, 2, 42.0, ledger=0),
                 _ks("ks-x", "m33", "k", 3, 43.0, ledger=0, subscription="s2"),
                 _ks("ks-x", "m34", "k", 4, 44.0, ledger=0, partition=1),
                 _ks("ks-x", None, "k", 5, 45.0, ledger=0),
                 _ks("ks-x", "m36", "k", 6, None, ledger=0),
                 _ks("ks-x", "m37", "k", 7, "soon", ledger=0),
                 _ks("ks-x", "m38", "k", 8, float("nan"), ledger=0)],
        # (unacked sends a reader saw are committed: without a recovery read, 16 are lost)
    }, {"key-order": 3, "nonmonotonic-poll": 1, "int-nonmonotonic-poll": 1, "lost-write": 16}),
    # Sends acked out of their order: within one transaction also int-nonmonotonic-send;
    # across two transactions, or outside any, not.
    "send-order": ({
        "p-so": (_txn("p-so", "so", "send-order", [("so1", 5), ("so2", 2)], "commit", "ok")
                 + _txn("p-so", "so-b", "send-order", [("so3", 1)], "commit", "ok")
                 + _sent("p-so", "so4", "send-order", 0)),
        "rec-so": _rc_recovery("rec-so", "send-order", ("so4", 0), ("so3", 1), ("so2", 2), ("so1", 5)),
    }, {"nonmonotonic-send": 3, "int-nonmonotonic-send": 1, "unseen": 4}),
    # Records that are not ours (mid null) are no anomaly; ids never sent are.
    "foreign": ({
        "consumer": [_poll("consumer", None, "foreign", 0), _poll("consumer", "zz", "foreign", 1)],
        "recovery": _recovery("foreign", (None, 0), ("zz", 1)),
    }, {"unexpected": 1}),
    # Transactions (docs/checker.md "Transactions"): a committed one read whole is clean.
    "txn-whole": ({
        "p-whole": _txn("p-whole", "tw", "txn-whole", [("tw1", 0), ("tw2", 1)], "commit", "ok"),
        "rc-whole": [_poll("rc-whole", m, "txn-whole", o, isolation=RC, t=20.0)
                     for m, o in (("tw1", 0), ("tw2", 1))],
        "rec-whole": _rc_recovery("rec-whole", "txn-whole", ("tw1", 0), ("tw2", 1)),
    }, {}),
    # An aborted transaction's records: an aborted read for read_committed, allowed for
    # read_uncommitted.
    "txn-aborted": ({
        "p-ab": _txn("p-ab", "ta", "txn-aborted", [("ta1", 0), ("ta2", 1)], "abort", "ok"),
        "rc-ab": [_poll("rc-ab", "ta1", "txn-aborted", 0, isolation=RC, t=20.0)],
        "ru-ab": [_poll("ru-ab", m, "txn-aborted", o, isolation=RU, t=20.0)
                  for m, o in (("ta1", 0), ("ta2", 1))],
        "rec-ab": _rc_recovery("rec-ab", "txn-aborted"),
    }, {"aborted-read": 1}),
    # A commit that timed out, seen by a read_committed reader: committed, so the one record
    # missing from the recovery read is lost and the transaction torn.
    "txn-torn": ({
        "p-torn": _txn("p-torn", "tt", "txn-torn", [("tt1", 0), ("tt2", 1)], "commit", "info"),
        "rc-torn": [_poll("rc-torn", "tt1", "txn-torn", 0, isolation=RC, t=20.0)],
        "rec-torn": _rc_recovery("rec-torn", "txn-torn", ("tt1", 0)),
    }, {"torn-transaction": 1, "lost-write": 1}),
    # A commit that timed out, never seen: not committed, nothing is owed.
    "txn-unseen": ({
        "p-unseen": _txn("p-unseen", "tu", "txn-unseen", [("tu1", 0)], "commit", "info"),
        "rec-unseen": _rc_recovery("rec-unseen", "txn-unseen"),
    }, {}),
    # Sends of a transaction with no txn event (its producer killed before it logged one):
    # unknown, nothing owed; the transaction is named by its first send.
    "txn-nameless": ({
        "p-nameless": _txn("p-nameless", "tn", "txn-nameless", [("tn1", 0)], "commit", "ok")[1:3],
        "rec-nameless": _rc_recovery("rec-nameless", "txn-nameless"),
    }, {}),
    # Read by read_committed before the commit call: a precommitted read (not within 1 ms).
    "txn-early": ({
        "p-early": _txn("p-early", "te", "txn-early", [("te1", 0), ("te2", 1)], "commit", "ok"),
        "rc-early": [_poll("rc-early", "te1", "txn-early", 0, isolation=RC, t=5.0),
                     _poll("rc-early", "te2", "txn-early", 1, isolation=RC, t=9.9995)],
        "rec-early": _rc_recovery("rec-early", "txn-early", ("te1", 0), ("te2", 1)),
    }, {"precommitted-read": 1}),
    # A send that definitely failed, read (by any reader): an aborted read. An unknown send
    # that a reader saw is committed: absent at the end, it is lost; unseen, nothing is owed.
    "failed-read": ({
        "p-failed": [_ev("invoke", "p-failed", mid="fr1", topic="failed-read"),
                     _ev("fail", "p-failed", mid="fr1", error="NOT_ENOUGH_REPLICAS"),
                     _ev("invoke", "p-failed", mid="fr2", topic="failed-read"),
                     _ev("info", "p-failed", mid="fr2", error="timed out"),
                     _ev("invoke", "p-failed", mid="fr3", topic="failed-read"),
                     _ev("info", "p-failed", mid="fr3", error="timed out")],
        "ru-failed": [_poll("ru-failed", "fr1", "failed-read", 0, isolation=RU),
                      _poll("ru-failed", "fr2", "failed-read", 1, isolation=RU)],
        "rec-failed": _rc_recovery("rec-failed", "failed-read", ("fr1", 0)),
    }, {"aborted-read": 1, "lost-write": 1}),
    # A copier (docs/checker.md "Exactly once"): in1 and in2 copied; in3's copy aborted, then
    # copied again in a transaction whose commit timed out but which a reader saw (committed);
    # in4 passed over (in5 copied): lost; in2 copied a second time: a duplicate; in6, after the
    # last copied input, is not judged.
    "eos": ({
        "p-eos": [e for m, o in _EOS_IN for e in _sent("p-eos", m, "eos-in", o)],
        "copier": (_copies("copier", "c1", [("co1", 0, "in1"), ("co2", 1, "in2")], "commit", "ok")
                   + _copies("copier", "c2", [("co3", 3, "in3")], "abort", "ok")
                   + _copies("copier", "c3", [("co4", 5, "in3"), ("co5", 6, "in5")], "commit", "info")
                   + _copies("copier", "c4", [("co6", 8, "in2")], "commit", "ok")),
        "r-eos": ([_poll("r-eos", m, "eos-in", o, isolation=RC, t=20.0) for m, o in _EOS_IN]
                  + [_poll("r-eos", m, "eos-out", o, isolation=RC, t=20.0) for m, o in _EOS_OUT]),
        "rec-eos": (_rc_recovery("rec-eos", "eos-in", *_EOS_IN)
                    + _rc_recovery("rec-eos", "eos-out", *_EOS_OUT)),
    }, {"eos-duplicate": 1, "eos-loss": 1}),
}


def _write(run: Path, files: Files, prefix: str = "") -> None:
    (run / "history").mkdir(parents=True, exist_ok=True)
    for name, events in files.items():
        (run / "history" / f"{prefix}{name}.jsonl").write_text(
            "".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")


@pytest.mark.parametrize("name", SCENARIOS)
def test_reference_follows_the_rule(tmp_path: Path, name: str) -> None:
    files, expected = SCENARIOS[name]
    _write(tmp_path, files)
    assert reference_checker.check(tmp_path).anomalies == {k: expected.get(k, 0) for k in ANOMALIES}


def test_spark_follows_every_rule(tmp_path: Path) -> None:
    for name, (files, _) in SCENARIOS.items():
        _write(tmp_path, files, prefix=f"{name}-")
    result = check_run(tmp_path)
    assert result.anomalies == {k: sum(exp.get(k, 0) for _, exp in SCENARIOS.values()) for k in ANOMALIES}
    assert result.examples["poll-skip"][0]["skipped"] == 1
    assert [ex["mid"] for ex in result.examples["key-order"]] == ["m4", "m12", "m21"]
    assert result.examples["key-order"][0] == {
        "subscription": "s", "key": "k", "client": "ks-a", "mid": "m4", "topic": "key-order",
        "partition": 0, "ledger": 1, "entry": 4, "batch": -1,
        "prev": {"client": "ks-b", "mid": "m5", "ledger": 1, "entry": 5, "batch": -1}}
    assert result.examples["eos-duplicate"] == [{"mid": "in2", "copies": 2, "copy": "co2"}]
    assert result.examples["eos-loss"] == [{"mid": "in4", "topic": "eos-in", "partition": 0, "offset": 3}]
    assert result.counts["eos-copied"] == 4
    # the listing of transactions: all of them (a state each), the total from step 4's counts
    txs = {e["tx"] for files, _ in SCENARIOS.values() for lines in files.values() for e in lines
           if e.get("tx")}
    listing = result.transactions
    assert listing is not None and listing["total"] == len(txs) == len(listing["shown"])
    assert {t["tx"] for t in listing["shown"]} == txs
    states = {t["tx"]: t["state"] for t in listing["shown"]}
    assert [states[tx] for tx in ("tw", "ta", "tt", "tu", "tn")] == ["committed", "aborted", "seen-committed",
                                                                     "unknown", "unknown"]
    assert result == reference_checker.check(tmp_path)
