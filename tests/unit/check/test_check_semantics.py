"""Hand-written histories pinning the rules of docs/checker.md, one scenario per rule:
through the reference checker one by one, and through Spark all in one run (each
scenario has its own topic, clients and ids, so they do not interact)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from harness.check import ANOMALIES, check_run

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
    fields = {"phase": phase} if phase is not None else {}
    if pulsar is not None:
        fields.update(zip(("ledger", "entry", "batch"), pulsar))
    return _ev("poll", client, mid=mid, topic=topic, partition=0, offset=offset, **fields, **extra)


def _recovery(topic: str, *reads: tuple[str | None, int]) -> list[dict[str, Any]]:
    return [_poll("recovery", mid, topic, off, phase="recovery") for mid, off in reads]


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
    }, {"nonmonotonic-poll": 1}),
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
    }, {"nonmonotonic-poll": 1}),
    # A skip is judged against the recovery read: offset 1 (a transaction marker) is no record.
    "skip": ({
        "producer": [e for i, off in enumerate([0, 2, 3]) for e in _sent("producer", f"s{i}", "skip", off)],
        "skipper": [_poll("skipper", "s0", "skip", 0), _poll("skipper", "s2", "skip", 3)],
        "reader": [_poll("reader", f"s{i}", "skip", off) for i, off in enumerate([0, 2, 3])],
        "recovery": _recovery("skip", ("s0", 0), ("s1", 2), ("s2", 3)),
    }, {"poll-skip": 1}),
    # Records that are not ours (mid null) are no anomaly; ids never sent are.
    "foreign": ({
        "consumer": [_poll("consumer", None, "foreign", 0), _poll("consumer", "zz", "foreign", 1)],
        "recovery": _recovery("foreign", (None, 0), ("zz", 1)),
    }, {"unexpected": 1}),
}


def _write(run: Path, files: Files, prefix: str = "") -> None:
    (run / "history").mkdir(parents=True, exist_ok=True)
    for name, events in files.items():
        (run / "history" / f"{prefix}{name}.jsonl").write_text(
            "".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")


@pytest.mark.parametrize("name", SCENARIOS)
def test_reference_follows_the_rule(tmp_path: Path, reference: ModuleType, name: str) -> None:
    files, expected = SCENARIOS[name]
    _write(tmp_path, files)
    assert reference.check(tmp_path).anomalies == {k: expected.get(k, 0) for k in ANOMALIES}


def test_spark_follows_every_rule(tmp_path: Path, reference: ModuleType) -> None:
    for name, (files, _) in SCENARIOS.items():
        _write(tmp_path, files, prefix=f"{name}-")
    result = check_run(tmp_path)
    assert result.anomalies == {k: sum(exp.get(k, 0) for _, exp in SCENARIOS.values()) for k in ANOMALIES}
    assert result.examples["poll-skip"][0]["skipped"] == 1
    assert result == reference.check(tmp_path)
