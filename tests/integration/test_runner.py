"""The runner end to end on a real cluster: failures read well, crashes lose nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.backend.docker import LABEL_OWNER, Engine
from harness.history import read_events
from harness.result import Expectation, RunResult
from harness.run import RunOutcome

pytestmark = [pytest.mark.docker, pytest.mark.kafka]
DATA = Path(__file__).resolve().parent.parent / "data" / "integration"


def _harness(*args: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, timeout=600, **kw)


def test_killing_the_harness_keeps_history_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """A run killed with SIGKILL keeps its history on disk; the next run (here violated.yaml,
    whose expectation is wrong on purpose) removes its containers, then fails as it should: exit
    1 with a readable message, in result.json, the report and what pytest prints."""
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", str(DATA / "long.yaml"),
                             "--reports", str(tmp_path)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    history = None
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        found = list(tmp_path.glob("*/history/load.jsonl"))
        # enough of both on disk (acks lag the sends on a loaded machine: count them)
        if found and sum(1 for e in read_events(found[0]) if e["type"] == "ok") > 450:
            history = found[0]
            break
        time.sleep(1)
    assert history is not None, "the run never recorded 450 acknowledgements"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    owner_label = {LABEL_OWNER: f"pid:{os.uname().nodename}:{proc.pid}"}
    assert Engine().containers(owner_label), "the killed run's cluster should still exist"

    events = list(read_events(history))  # a torn last line is skipped, never an error
    invoked = [e for e in events if e["type"] == "invoke"]
    acked = [e for e in events if e["type"] == "ok"]
    assert len(invoked) > 450 and len(acked) > 400  # >450 acks were on disk before the kill
    assert [e["mid"] for e in invoked] == [f"load-{i}" for i in range(1, len(invoked) + 1)]

    # the next run removes the dead run's containers before it starts
    res = _harness("run", str(DATA / "violated.yaml"), "--reports", str(tmp_path))
    assert "removed leftovers of a dead run" in res.stderr
    assert not Engine().containers(owner_label)
    _assert_violated_reads_well(res, tmp_path)


def _assert_violated_reads_well(res: subprocess.CompletedProcess[str], reports: Path) -> None:
    """violated.yaml loses 50 acknowledged records where it expects none: exit 1, and every
    place that shows the run says which expectation failed and which records were lost."""
    assert res.returncode == 1, res.stderr[-2000:]
    run_dir = next(p.parent for p in reports.glob("*violated*/result.json"))
    outcome = RunOutcome(run_dir, RunResult.read(run_dir))
    result = outcome.result
    assert result.verdict == "fail" and result.anomalies["lost-write"] == 50
    row = next(r for r in result.expectations if r.name == "lost-write")
    assert row == Expectation(name="lost-write", expected="<= 0", observed=50, ok=False)
    # the examples name the lost records, and the report shows them
    assert all(e["mid"].startswith("produce-3-") for e in result.examples["lost-write"])
    html = outcome.report.read_text()
    assert "lost-write" in html and "produce-3-" in html
    # what the command printed, and what pytest would print for such a case
    from harness.pytest_plugin import _summary

    for text in (res.stdout, _summary(outcome)):
        assert "lost-write: expected <= 0, observed 50" in text
        assert str(run_dir) in text


@pytest.mark.parametrize("args, message", [
    (["cluster", "up", "kafka-bogus"],
     "unknown cluster 'kafka-bogus' (known: kafka-kraft, kafka-kraft-dynamic, kafka-kraft-split, kafka-zk, "
     "pulsar)"),
    (["cluster", "up", "kafka-kraft", "--version", "3.1.0"],
     "does not support version '3.1.0' (supported: 3.9.2, 4.1.2)"),
    (["images", "build", "--system", "kafka", "--version", "9.9.9"],
     "org.apache.kafka:kafka_2.13:9.9.9 does not resolve on Maven Central"),
    (["run", str(DATA.parent / "cases" / "bad" / "unknown-role.yaml")], "unknown role 'leadr'"),
])
def test_bad_input_gives_one_clear_error(args: list[str], message: str) -> None:
    before = {c.id for c in Engine().containers({"io.chaosharness.managed": "true"})}
    res = _harness(*args)
    assert res.returncode == 2
    assert message in res.stderr
    assert "Traceback" not in res.stderr + res.stdout
    after = {c.id for c in Engine().containers({"io.chaosharness.managed": "true"})}
    assert after <= before, "a failed command left containers behind"


def test_dead_daemon_gives_one_clear_error() -> None:
    res = _harness("cluster", "status", env={**os.environ, "DOCKER_HOST": "unix:///nonexistent.sock"})
    assert res.returncode == 2
    assert "the Docker engine is not reachable" in res.stderr and "bin/setup" in res.stderr
    assert "Traceback" not in res.stderr


def test_unknown_node_name_is_a_clear_error(kafka_cluster) -> None:
    from harness.errors import BackendError

    with pytest.raises(BackendError, match=r"no node 'kafka-9' in cluster kafka-zk \(nodes: zk, kafka-1"):
        kafka_cluster.cluster.node("kafka-9")
