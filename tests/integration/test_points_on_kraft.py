"""The seed's crash points and node-state transitions on KRaft and on Kafka 4.1.

The same case files run on ZooKeeper mode (kafka-zk, collected from ``cases/``
by the plugin); here they run on KRaft 3.9 and, for C1, on KRaft 4.1. Each must
hit its point (the injection's observed state matches the table) and pass.

The file runs after test_kafka_cluster.py (pytest's file order), whose clusters have broker
settings of their own and go at its end: the KRaft 4.1 cluster that C1 leaves running here is
then the one the 4.1.2 cases reuse, not one more cluster to start.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.kafka]
CASES = Path(__file__).resolve().parents[2] / "cases" / "kafka"


# S2 kills both replicas: on the 3-node combined KRaft cluster that is 2 of 3 controllers,
# the quorum is lost and the partition can never be seen leaderless. S2 runs on kafka-zk
# (from cases/) and on kafka-kraft-split, whose controller is a node of its own.
# A version-matrix repeat (C1-C5 and S1 run on kafka-zk 3.9.2 from cases/ and C1 on KRaft 4.1
# below): left to the full matrix (`bin/test -m full_matrix`) to keep CI within its budget.
@pytest.mark.full_matrix
@pytest.mark.parametrize("name", ["c1", "c2", "c3", "c4", "c5", "s1"])
def test_on_kraft_39(chaos_run, name: str) -> None:
    outcome = chaos_run(CASES / f"{name}.yaml", cluster="kafka-kraft", version="3.9.2")
    res = outcome.result
    assert outcome.exit_code == 0, res.error or res.expectations
    if name.startswith("c"):
        assert res.injection is not None and res.injection.hit, res.injection


def test_c1_on_kraft_41(chaos_run) -> None:
    outcome = chaos_run(CASES / "c1.yaml", cluster="kafka-kraft", version="4.1.2")
    res = outcome.result
    assert outcome.exit_code == 0, res.error or res.expectations
    assert res.injection is not None and res.injection.hit
    truncated = [t for t in res.truncations if t["offset"] == res.injection.n]
    assert truncated, "the old leader should truncate the unreplicated record N"


# CI runs the unclean-on half (the loss); the off half (nothing lost) is left to the full
# matrix: both halves run on kafka-zk in CI as cases/kafka/s2-unclean-*.yaml.
@pytest.mark.parametrize("name", [pytest.param("s2-unclean-off", marks=pytest.mark.full_matrix),
                                  "s2-unclean-on"])
def test_s2_on_kraft_split(chaos_run, name: str) -> None:
    outcome = chaos_run(CASES / f"{name}.yaml", cluster="kafka-kraft-split", version="3.9.2")
    res = outcome.result
    assert outcome.exit_code == 0, res.error or res.expectations
    assert res.verdict == ("pass" if name.endswith("off") else "fail")
    if name.endswith("on"):  # the out-of-sync follower led: the old leader truncated
        assert res.anomalies.get("lost-write", 0) > 0, res.anomalies
