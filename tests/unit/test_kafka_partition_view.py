"""The leader of a KRaft partition as most brokers name it (each asked on its own)."""

from __future__ import annotations

from harness.systems.kafka import majority_view

View = tuple[int, tuple[int, ...], tuple[int, ...]]


def test_the_leader_is_voted_on_alone_then_the_in_sync_set() -> None:
    """Seen in an exploration run: kafka-2, started again 6 s before, still named itself the
    leader while kafka-1 and kafka-3 named kafka-3 with different in-sync sets (one had not
    applied kafka-2's return yet). Voting on the whole view split kafka-3's two votes, and a
    point was armed for leader kafka-2 (its await timed out)."""
    replicas = (2, 3, 1)
    views: list[View] = [(2, replicas, (2, 3, 1)), (3, replicas, (3, 1)), (3, replicas, (3, 1, 2))]
    assert majority_view(views) == (3, replicas, (3, 1))
    assert majority_view(views[::-1])[0] == 3
    # agreement is kept as it was; a lone answer is the view
    agreed: list[View] = [(1, replicas, (1, 2)), (1, replicas, (1, 2)), (2, replicas, (2,))]
    assert majority_view(agreed) == (1, replicas, (1, 2))
    assert majority_view([(2, replicas, (2,))]) == (2, replicas, (2,))
    # brokers that agree on the leader and its in-sync set outvote one that does not
    assert majority_view([(3, replicas, (3,)), (3, replicas, (3, 1)), (3, replicas, (3, 1))])[2] == (3, 1)
