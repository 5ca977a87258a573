"""The checker on a real Spark cluster: a standalone master and two workers on
loopback (separate JVMs, executors in their own processes), against the shared local
server. No Docker."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.check import check_run, plan
from harness.testing.spark_cluster import StandaloneCluster
from harness.testing.synthetic import Profile, generate

pytestmark = [pytest.mark.slow]


#: JVMs that only start and check a small run: the quick JIT only (a third less time)
QUICK_JIT = "-XX:TieredStopAtLevel=1"


def test_a_standalone_cluster_gives_the_local_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    inject = {"lost-write": 2, "duplicate": 1, "inconsistent-offsets": 1, "replica-divergence": 1,
              "poll-skip": 1, "nonmonotonic-poll": 1, "aborted-read": 1}
    expected = generate(run, Profile(records=4000, partitions=4, producers=2, consumers=2, replicas=2,
                                     txn=True, seed=3, inject=inject))
    local = check_run(run)  # the default: local[*] in the shared Spark Connect server
    assert local.anomalies == expected.anomalies and local.counts == expected.counts

    # the driver's JVM starts in this process with the classic session (the shared server
    # is already up: the local check started it if it was not)
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", QUICK_JIT)
    with StandaloneCluster(tmp_path / "cluster", workers=2, cores=1, memory="1g",
                           java_options=QUICK_JIT) as cluster:
        try:
            on_cluster = check_run(run, spark_master=cluster.master)
            sc = plan.session_for(cluster.master).sparkContext
            assert sc.master == cluster.master
            # two executors ran it (the status map also holds the driver)
            assert sc._jsc.sc().getExecutorMemoryStatus().size() == 3
        finally:
            plan.close()  # before the cluster goes
    assert on_cluster == local
