"""Cases run on hosts over SSH (``harness run --nodes``) beside the verdicts they have on
Docker nodes: KIP-101's loss on Kafka 0.10.2.2 (a regression case: the bug's loss, its
crash points held on hosts) and a Pulsar owner kill (the bookies' entries read back from
the hosts). Stand-in hosts are containers that run sshd and nothing else the harness does
not install (harness.backend.standin). The C1 case runs in CI (test_ssh_nodes.py); these
are left to the full matrix (`bin/test -m full_matrix`): each prepares its own hosts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.backend.cluster import this_owner
from harness.backend.docker import Engine
from harness.backend.standin import StandinHosts
from harness.cli import main
from harness.clusters import get_cluster

pytestmark = [pytest.mark.docker, pytest.mark.full_matrix]
CASES = Path(__file__).resolve().parents[2] / "cases"


def standin(name: str, folder: Path) -> Iterator[StandinHosts]:
    hosts = StandinHosts(Engine(), get_cluster(name), folder, owner=this_owner())
    hosts.up()
    try:
        yield hosts
    finally:
        hosts.down()


def run_on(hosts: StandinHosts, case: Path, reports: Path, capsys: pytest.CaptureFixture[str],
           *extra: str) -> tuple[int, dict[str, Any]]:
    code = main(["run", str(case), "--nodes", str(hosts.nodes_file), "--reports", str(reports), *extra])
    out, err = capsys.readouterr()
    results = list(reports.glob("*/result.json"))
    assert results, out + err[-3000:]
    return code, json.loads(results[0].read_text())


def nothing_running(hosts: StandinHosts) -> None:
    for node in hosts.cluster.node_names:
        _, out = hosts.container(node).exec_run(["sh", "-c", "pgrep -c java || true"])
        assert out.decode().strip() == "0", node


def test_kip_101_loss_on_hosts(tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str],
                               tmp_path: Path) -> None:
    """0.10.2.2 loses the acknowledged record, as on Docker nodes (docs/regressions.md)."""
    for hosts in standin("kafka-zk", tmp_path_factory.mktemp("standin-zk")):
        code, result = run_on(hosts, CASES / "kafka" / "regressions" / "kip-101-loss.yaml", tmp_path,
                              capsys, "--version", "0.10.2.2")
        assert result["verdict"] == "fail" and result["as_expected"], result.get("error")
        assert result["anomalies"]["lost-write"] >= 1 and code == 0
        hit = {i["point"]: i["hit"] for i in result["injections"]}
        assert hit == {"HW-LEADER-ONLY": True, "NEW-LEADER-FETCH": True}
        nothing_running(hosts)


def test_pulsar_kill_owner_on_hosts(tmp_path_factory: pytest.TempPathFactory,
                                    capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The owner broker killed -9 under load: nothing acknowledged lost, the bookies' copies
    read back from the hosts agree (as on Docker nodes)."""
    for hosts in standin("pulsar", tmp_path_factory.mktemp("standin-pulsar")):
        code, result = run_on(hosts, CASES / "pulsar" / "kill-owner.yaml", tmp_path, capsys)
        assert (result["verdict"], result["as_expected"]) == ("pass", True), result.get("error")
        assert code == 0 and result["counts"]["ok"] > 0
        assert (tmp_path / result["run_id"] / "bookies" / "entries.jsonl").stat().st_size > 0
        nothing_running(hosts)
