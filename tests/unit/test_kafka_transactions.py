"""The Kafka side of transactions that needs no broker: the coordinator partition of an id
(Kafka's ``Utils.abs(String.hashCode) % partitions``), the judge's ``min_aborted_seen``,
and the transactional producer's config."""

from __future__ import annotations

import pytest

from harness.case import load_case_text
from harness.clients.kafka import producer_config
from harness.run.judge import judge
from harness.systems.kafka import coordinator_partition


@pytest.mark.parametrize(("key", "partitions", "expected"), [
    ("a", 50, 97 % 50),                    # "a".hashCode() == 97
    ("ab", 50, 3105 % 50),                 # 97 * 31 + 98
    ("polygenelubricants", 50, 0),         # hashCode == Integer.MIN_VALUE: Utils.abs gives 0
    ("", 4, 0),
    ("é", 7, 233 % 7),                     # one UTF-16 code unit
    ("😀", 50, (0xD83D * 31 + 0xDE00) % 50),  # a surrogate pair: two code units
    ("zzzzzzzzzz", 50, None),              # overflows: compared with Java's arithmetic below
])
def test_coordinator_partition_is_javas(key: str, partitions: int, expected: int | None) -> None:
    h = 0
    for unit in [int.from_bytes(key.encode("utf-16-be")[i:i + 2], "big")
                 for i in range(0, len(key.encode("utf-16-be")), 2)]:
        h = (h * 31 + unit) % (1 << 32)
    java = h - (1 << 32) if h >= 1 << 31 else h
    if expected is None:
        expected = (0 if java == -(1 << 31) else abs(java)) % partitions
    assert coordinator_partition(key, partitions) == expected


def test_min_aborted_seen_is_judged() -> None:
    case = load_case_text("system: kafka\ncluster: kafka-kraft\nsteps:\n  - produce: {count: 1}\n"
                          "expect: {min_aborted_seen: 2}\n")
    check = {"anomalies": {}, "counts": {"ok": 5, "aborted-uncommitted-read": 1}}
    rows, verdict = judge(case, check, None)
    row = next(r for r in rows if r.name == "aborted records read uncommitted")
    assert (row.expected, row.observed, row.ok, verdict) == (">= 2", 1, False, "fail")
    check["counts"]["aborted-uncommitted-read"] = 2
    assert judge(case, check, None)[1] == "pass"


def test_transactional_config_keeps_the_delivery_timeout_inside_the_transaction() -> None:
    case = load_case_text("system: kafka\ncluster: kafka-kraft\nclient: {transactional_id: t, "
                          "idempotence: true, delivery_timeout_ms: 90000}\nsteps:\n  - produce: {count: 1}\n")
    conf = producer_config("127.0.0.1:1", case.client)
    assert conf["transactional.id"] == "t" and conf["transaction.timeout.ms"] == 90000
    assert conf["delivery.timeout.ms"] <= conf["transaction.timeout.ms"]
    assert "transaction.timeout.ms" not in producer_config("127.0.0.1:1", load_case_text(
        "system: kafka\ncluster: kafka-kraft\nsteps:\n  - produce: {count: 1}\n").client)


def test_a_call_that_never_returns_is_given_up() -> None:
    """librdkafka #5456/#5511: send_offsets_to_transaction can block past its timeout; the
    copier gives up STUCK_GRACE_S after it (a StuckCall) instead of hanging the run."""
    import threading

    from harness.clients import kafka as kafka_client

    release = threading.Event()
    original = kafka_client.STUCK_GRACE_S
    kafka_client.STUCK_GRACE_S = 0.2
    try:
        with pytest.raises(kafka_client.StuckCall, match="send_offsets_to_transaction did not return"):
            kafka_client.bounded(lambda: release.wait(30), 0.1, "send_offsets_to_transaction")
        # calls that return: a grace far above any pause of a loaded machine (the short one
        # is only for the call that never returns)
        kafka_client.STUCK_GRACE_S = 30.0
        assert kafka_client.bounded(lambda: 7, 0.1, "x") == 7
        with pytest.raises(ValueError, match="refused"):
            kafka_client.bounded(lambda: (_ for _ in ()).throw(ValueError("refused")), 0.1, "x")
    finally:
        release.set()
        kafka_client.STUCK_GRACE_S = original


def test_the_java_driver_runs_transactions_only() -> None:
    from harness.errors import CaseError

    base = "system: kafka\ncluster: kafka-kraft\nsteps:\n"
    case = load_case_text(base + "  - produce: {count: 6, driver: java, transactions: {size: 3}}\n")
    assert case.steps[0].args.driver == "java"
    with pytest.raises(CaseError, match="x.yaml:4: steps\\[0\\].produce.driver: the Kafka Java driver runs "
                                        "transactional workloads only"):
        load_case_text(base + "  - produce: {count: 6, driver: java}\n", "x.yaml")
