"""Nodes files against real SSH hosts: four containers running sshd and nothing else the
harness installs (harness.backend.standin). A good file checks; an unreachable host, a
wrong key, a host without a tool and a host without the prepared Java each give one clear
error naming the node and the fix, exit 2, and leave nothing running on any host."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.backend.cluster import this_owner
from harness.backend.docker import Engine
from harness.backend.ssh import SshProcess, hosts
from harness.backend.standin import StandinHosts
from harness.case import load_nodes
from harness.cli import main
from harness.clusters import get_cluster
from harness.wait import wait_until

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def standins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandinHosts]:
    hosts = StandinHosts(Engine(), get_cluster("kafka-zk"), tmp_path_factory.mktemp("standin"),
                         owner=this_owner())
    hosts.up()
    try:
        yield hosts
    finally:
        hosts.down()


def check(nodes_file: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main(["nodes", "check", str(nodes_file), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def edited(hosts: StandinHosts, old: str, new: str, name: str) -> Path:
    text = hosts.nodes_file.read_text()
    assert old in text
    path = hosts.folder / name
    path.write_text(text.replace(old, new, 1))
    return path


def one_error(err: str, path: Path, node: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"harness: error: {path}:"), lines[0]
    assert f": nodes.{node}: " in lines[0], lines[0]
    return lines[0]


def nothing_running(hosts: StandinHosts) -> None:
    for node in hosts.cluster.node_names:
        ps = "ps -e -o comm= | grep -v -x -e sshd -e ps -e sh -e grep -e docker-init"
        _, out = hosts.container(node).exec_run(["sh", "-c", ps])
        assert out.decode().split() == [], (node, out)


def test_a_good_file_checks_every_host_and_starts_nothing(standins: StandinHosts,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = check(standins.nodes_file, capsys, "--no-runtime")
    assert code == 0, err
    for node in standins.cluster.node_names:
        assert re.search(rf"^{node}: root@[\d.]+:22 \(\w+\) answers: Linux ", out, re.M), out
    assert "4 hosts ready to play cluster kafka-zk (3.9.2)" in out
    nothing_running(standins)


def test_a_host_without_the_prepared_java_names_the_command_that_installs_it(
        standins: StandinHosts, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = check(standins.nodes_file, capsys)
    line = one_error(err, standins.nodes_file, "zk")
    assert code == 2
    assert "has no Java at /opt/chaos-harness/java/bin/java" in line
    assert f"run harness nodes prepare {standins.nodes_file}" in line


def test_an_unreachable_host_is_one_error_naming_host_and_port(standins: StandinHosts,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    kafka2 = standins.addresses["kafka-2"]
    path = edited(standins, f"kafka-2: {{host: {kafka2}", f"kafka-2: {{port: 2, host: {kafka2}",
                  "closed.yaml")
    code, _, err = check(path, capsys, "--no-runtime")
    line = one_error(err, path, "kafka-2")
    assert code == 2
    assert f"{kafka2} port 2 does not answer (Connection refused)" in line
    assert "check host and port, and that sshd runs there" in line
    nothing_running(standins)


def test_a_wrong_key_is_one_error_naming_user_and_key(standins: StandinHosts,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import paramiko

    other = standins.folder / "id_other"
    paramiko.RSAKey.generate(2048).write_private_key_file(str(other))
    path = edited(standins, "  kafka-1: {", f"  kafka-1: {{key: {other}, ", "wrong-key.yaml")
    code, _, err = check(path, capsys, "--no-runtime")
    line = one_error(err, path, "kafka-1")
    assert code == 2
    assert f"refused the key {other}: check user and key" in line
    nothing_running(standins)


def test_a_host_lacking_a_tool_names_the_tool_and_its_package(standins: StandinHosts,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    box = standins.container("kafka-3")
    assert box.exec_run(["sh", "-c", "mv /usr/sbin/iptables /usr/sbin/iptables.away"]).exit_code == 0
    try:
        code, _, err = check(standins.nodes_file, capsys, "--no-runtime")
    finally:
        box.exec_run(["sh", "-c", "mv /usr/sbin/iptables.away /usr/sbin/iptables"])
    line = one_error(err, standins.nodes_file, "kafka-3")
    assert code == 2
    assert "lacks iptables (partitions): install it there (Debian: apt-get install iptables)" in line


def test_prepare_sends_java_and_the_supervisor_once_and_the_check_then_passes(
        standins: StandinHosts, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nodes", "prepare", str(standins.nodes_file)]) == 0
    out, err = capsys.readouterr()
    for node in standins.cluster.node_names:
        assert re.search(rf"^{node}: root@[\d.]+:22 prepared \(\d+ MiB sent", out, re.M), out + err
    assert main(["nodes", "prepare", str(standins.nodes_file)]) == 0  # idempotent
    out, _ = capsys.readouterr()
    assert out.count("already prepared") == 4, out
    code, out, err = check(standins.nodes_file, capsys)
    assert code == 0, err
    box = standins.container("kafka-1")
    for path in ("/opt/kafka/entrypoint.sh", "/opt/byteman/byteman.jar", "/opt/chaos-harness/bin/node"):
        assert box.exec_run(["test", "-f", path]).exit_code == 0, path
    nothing_running(standins)


def test_the_supervisor_keeps_a_killed_process_down_until_start(standins: StandinHosts) -> None:
    box = standins.container("kafka-2")

    def node(*args: str) -> tuple[int, str]:
        code, out = box.exec_run(["/opt/chaos-harness/bin/node", *args])
        return code, out.decode().strip()

    def state() -> str:
        _, pid = node("pid")
        if not pid:
            return "none"
        _, out = box.exec_run(["ps", "-o", "stat=", "-p", pid])
        return out.decode().strip()[:1]

    box.exec_run(["sh", "-c", "printf '#!/bin/sh\\nexec sleep 600\\n' > /opt/chaos-harness/sleeper && "
                              "chmod +x /opt/chaos-harness/sleeper && "
                              "echo ENTRYPOINT=/opt/chaos-harness/sleeper > /opt/chaos-harness/node.env"])
    try:
        assert node("start")[0] == 0 and node("status")[1] == "running"
        assert state() == "S"
        assert node("pause")[0] == 0 and state() == "T"
        assert node("resume")[0] == 0 and state() == "S"
        assert node("kill")[0] == 0
        time.sleep(2)
        assert node("status")[1] == "exited"  # nobody started it again
        assert node("start")[0] == 0 and node("status")[1] == "running"
        assert node("stop", "5")[0] == 0 and node("status")[1] == "exited"
    finally:
        node("kill")
        box.exec_run(["rm", "-f", "/opt/chaos-harness/node.env", "/opt/chaos-harness/sleeper"])


def ruok(ip: str) -> str:
    """ZooKeeper's four-letter answer on ``ip``:2181, or why there is none."""
    try:
        with socket.create_connection((ip, 2181), timeout=2.0) as sock:
            sock.sendall(b"ruok")
            sock.settimeout(2.0)
            return sock.recv(16).decode() or "closed"
    except TimeoutError:
        return "timeout"
    except OSError as exc:
        return type(exc).__name__


def test_a_real_zookeeper_started_killed_paused_and_read_over_ssh(standins: StandinHosts,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The node verbs of SshProcess on a prepared host: the image's own entrypoint runs
    ZooKeeper there; kill -9 leaves it down until start; pause stops its answers; its log
    and its data directory come back over SSH."""
    assert main(["nodes", "prepare", str(standins.nodes_file)]) == 0
    capsys.readouterr()
    nodes = load_nodes(standins.nodes_file)
    ip = standins.addresses["zk"]
    with hosts(nodes) as connected:
        zk = SshProcess(connected["zk"])
        zk.configure({"ENTRYPOINT": "/opt/kafka/entrypoint.sh", "ROLE": "zookeeper", "HEAP": "128m"})
        try:
            zk.start()
            wait_until(lambda: ruok(ip) == "imok", timeout=60, what="ZooKeeper on the stand-in answers")
            assert zk.status == "running" and zk.pid > 1
            zk.kill()
            time.sleep(1)
            assert zk.status == "exited" and ruok(ip) == "ConnectionRefusedError"
            time.sleep(2)
            assert zk.status == "exited"  # nobody started it again
            zk.start()
            wait_until(lambda: ruok(ip) == "imok", timeout=60, what="ZooKeeper answers after start")
            zk.pause()
            assert zk.status == "paused" and ruok(ip) == "timeout"
            zk.unpause()
            wait_until(lambda: ruok(ip) == "imok", timeout=30, what="ZooKeeper answers after resume")
            assert "binding to port" in zk.logs().lower() or "zookeeper" in zk.logs().lower()
            files = dict(zk.get_files("/data/zookeeper"))
            assert any(name.startswith("zookeeper/version-2/") for name in files), sorted(files)
            code, out = zk.exec(["java", "-version"])
            assert code == 0 and "17." in out
            zk.stop(10)
            assert zk.status == "exited"
        finally:
            zk.kill()
            connected["zk"].run("rm -rf /data/zookeeper /opt/chaos-harness/node.env "
                                "/opt/chaos-harness/node.log")


# -- a case run on the hosts (harness run --nodes): after prepare above ------------------------
CASES = Path(__file__).resolve().parents[2] / "cases"


def test_run_on_hosts_with_an_unreachable_host_is_one_error_before_anything_starts(
        standins: StandinHosts, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    kafka2 = standins.addresses["kafka-2"]
    path = edited(standins, f"kafka-2: {{host: {kafka2}", f"kafka-2: {{port: 2, host: {kafka2}",
                  "closed-run.yaml")
    code = main(["run", str(CASES / "kafka" / "c1.yaml"), "--nodes", str(path), "--reports", str(tmp_path)])
    _, err = capsys.readouterr()
    assert code == 2
    assert "does not answer (Connection refused)" in one_error(err, path, "kafka-2")
    assert not list(tmp_path.iterdir())  # no run began
    nothing_running(standins)


def test_c1_runs_on_the_hosts_with_its_point_hit_and_the_verdict_it_has_on_docker(
        standins: StandinHosts, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Seed 003's C1 through the SSH backend: the leader held by Byteman on its host, killed
    -9 by the supervisor, started again; the point hit, nothing lost, as on Docker nodes."""
    code = main(["run", str(CASES / "kafka" / "c1.yaml"), "--nodes", str(standins.nodes_file),
                 "--reports", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, out + err[-3000:]
    result = json.loads(next(tmp_path.glob("*/result.json")).read_text())
    assert (result["verdict"], result["as_expected"]) == ("pass", True), result.get("error")
    assert result["injection"]["point"] == "C1" and result["injection"]["hit"] is True
    assert result["anomalies"].get("lost-write", 0) == 0 and result["counts"]["ok"] >= 100
    nothing_running(standins)  # the run stopped every node on its way out


def test_reset_stops_what_a_killed_harness_left_on_the_hosts(standins: StandinHosts,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A harness killed with -9 cannot stop its nodes: `harness nodes reset` does what the end
    of a run does (the node killed, its data and the nodes' names gone)."""
    nodes = load_nodes(standins.nodes_file)
    with hosts(nodes) as connected:
        zk = SshProcess(connected["zk"])
        zk.configure({"ENTRYPOINT": "/opt/kafka/entrypoint.sh", "ROLE": "zookeeper", "HEAP": "128m"})
        zk.start()
        connected["zk"].run("echo '10.9.9.9 leftover # chaos-harness' >> /etc/hosts")
    assert main(["nodes", "reset", str(standins.nodes_file)]) == 0
    out, _ = capsys.readouterr()
    assert "4 hosts reset" in out
    nothing_running(standins)
    box = standins.container("zk")
    assert box.exec_run(["grep", "-c", "chaos-harness", "/etc/hosts"]).output.decode().strip() == "0"
    assert box.exec_run(["sh", "-c", "ls -A /data | wc -l"]).output.decode().strip() == "0"
    assert "localhost" in box.exec_run(["cat", "/etc/hosts"]).output.decode()  # its own lines kept
