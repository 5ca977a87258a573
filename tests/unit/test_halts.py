"""A broker that began to halt and hung: found in its log since its last start only."""

from harness.run.halts import halted_since_start

FATAL = ("[2026-12-06 05:40:46,209] FATAL [ReplicaFetcherThread-0-3], Exiting because log truncation is "
         "not allowed for partition t-0, Current leader 3's latest offset 100 is less than replica 2's "
         "latest offset 101 (kafka.server.ReplicaFetcherThread)\n"
         "[2026-12-06 05:40:46,210] INFO [Kafka Server 2], shutting down (kafka.server.KafkaServer)\n")
START_010 = "[2026-12-06 05:39:01,000] INFO [Kafka Server 2], starting (kafka.server.KafkaServer)\n"
START_39 = "[2026-12-06 05:39:01,000] INFO [KafkaServer id=2] starting (kafka.server.KafkaServer)\n"


def test_a_halt_after_the_last_start_counts_and_one_before_a_later_start_does_not() -> None:
    assert halted_since_start(START_010 + FATAL)
    assert halted_since_start(FATAL)  # the start scrolled out of the tail
    assert not halted_since_start(START_010 + FATAL + START_010)  # restarted since, and well
    assert not halted_since_start(START_39 + FATAL + START_39)
    assert not halted_since_start(START_010 + "INFO all is well\n")
