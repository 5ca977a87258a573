"""The case format's transactions: ``produce.transactions``, ``consume.isolation_level``,
``copy``, ``expect.min_aborted_seen`` and the coordinator roles."""

from __future__ import annotations

import pytest

from harness.case import CopyArgs, TxnArgs, load_case_text
from harness.errors import CaseError

_KAFKA = "system: kafka\ncluster: kafka-kraft\n"
_PULSAR = "system: pulsar\ncluster: pulsar\n"
_RC = "client: {isolation_level: read_committed}\n"


def test_good() -> None:
    case = load_case_text(_KAFKA + """\
steps:
  - consume: {background: true, isolation_level: read_uncommitted}
  - produce: {count: 60, transactions: {size: 6, abort: 0.25}}
  - produce: {count: 1, transactions: {}}
  - kill9: txn-coordinator
  - kill9: group-coordinator
expect: {min_aborted_seen: 3}
""")
    consume, produce, bare, txn_kill, group_kill = (s.args for s in case.steps)
    assert consume.isolation_level == "read_uncommitted"
    assert produce.transactions == TxnArgs(size=6, abort=0.25)
    assert bare.transactions == TxnArgs(size=10, abort=0.0)
    assert txn_kill.target.role == "txn-coordinator" and group_kill.target.role == "group-coordinator"
    assert case.expect.min_aborted_seen == 3
    assert case.expect.anomalies["torn-transaction"] == 0 and case.expect.anomalies["precommitted-read"] == 0


def test_copy() -> None:
    case = load_case_text(_KAFKA + _RC + """\
steps:
  - copy: {name: c, background: true, count: 100, duration: 1m, transactions: {size: 5, abort: 0.5}}
  - copy: {duration: 10s, rewind: none}
  - await: {workload: c, timeout: 2m}
""")
    copy, bare = case.steps[0].args, case.steps[1].args
    assert copy == CopyArgs(name="c", background=True, count=100, duration_s=60.0,
                            transactions=TxnArgs(size=5, abort=0.5))
    assert bare == CopyArgs(name="copy-1", duration_s=10.0, transactions=TxnArgs(), rewind="none")


def test_defaults() -> None:
    case = load_case_text(_KAFKA + "steps:\n  - produce: {count: 1}\n  - consume: {count: 1}\n")
    produce, consume = (s.args for s in case.steps)
    assert produce.transactions is None and consume.isolation_level is None
    assert case.expect.min_aborted_seen is None


@pytest.mark.parametrize(("abort", "aborted"), [
    (0.0, []), (1.0, list(range(8))), (0.5, [1, 3, 5, 7]), (0.25, [3, 7]), (0.34, [2, 5]),
])
def test_aborts_are_spread_evenly(abort: float, aborted: list[int]) -> None:
    txn = TxnArgs(size=1, abort=abort)
    assert [i for i in range(8) if txn.aborts(i)] == aborted


@pytest.mark.parametrize(("text", "line", "fragment"), [
    (_KAFKA + "steps:\n  - produce: {count: 1, transactions: {abort: 2}}\n", 4,
     "steps[0].produce.transactions.abort: is the share of transactions aborted, from 0 to 1 (got 2)"),
    (_KAFKA + "steps:\n  - produce: {count: 1, transactions: {size: 0}}\n", 4,
     "steps[0].produce.transactions.size"),
    (_KAFKA + "steps:\n  - produce: {count: 1, transactions: {sise: 3}}\n", 4,
     "steps[0].produce.transactions: unknown key 'sise'"),
    (_PULSAR + "steps:\n  - produce: {count: 1, transactions: {size: 3}}\n", 4,
     "steps[0].produce.transactions: applies to kafka cases only (this is a pulsar case)"),
    (_PULSAR + "steps:\n  - consume: {count: 1, isolation_level: read_committed}\n", 4,
     "steps[0].consume.isolation_level: applies to kafka cases only"),
    (_KAFKA + "steps:\n  - consume: {count: 1, isolation_level: committed}\n", 4,
     "steps[0].consume.isolation_level: unknown value 'committed'"),
    (_KAFKA + "steps:\n  - produce: {count: 1}\nexpect: {min_aborted_seen: -1}\n", 5,
     "expect.min_aborted_seen"),
    (_PULSAR + "steps:\n  - copy: {count: 1}\n", 4,
     "steps[0].copy: a copier uses Kafka transactions; this is a pulsar case"),
    (_KAFKA + "steps:\n  - copy: {count: 1}\n", 4,
     "steps[0].copy: a copier's exactly-once is judged on a read_committed recovery read: "
     "set client.isolation_level: read_committed"),
    (_KAFKA + _RC + "steps:\n  - copy: {background: true}\n", 5,
     "steps[0].copy: a copy needs count (input records to copy) or duration"),
    (_KAFKA + _RC + "steps:\n  - copy: {count: 1, rewind: back}\n", 5,
     "steps[0].copy.rewind: unknown value 'back'"),
    (_KAFKA + _RC + "steps:\n  - copy: {count: 1, transactions: {abort: 3}}\n", 5,
     "steps[0].copy.transactions.abort"),
    (_PULSAR + "steps:\n  - kill9: txn-coordinator\n", 4,
     "steps[0].kill9: role 'txn-coordinator' is for kafka cases"),
])
def test_bad(text: str, line: int, fragment: str) -> None:
    with pytest.raises(CaseError) as info:
        load_case_text(text, "x.yaml")
    message = str(info.value)
    assert message.startswith(f"x.yaml:{line}: ") and fragment in message, message
