"""A cluster on hosts (harness/backend/remote.py), without a host: what each node's entrypoint
is given, the names every host gets, the reset script, the supervisor's stamped log (run
for real, on this machine), and the errors of ``harness run --nodes`` before anything runs.
The same run against real sshd hosts: tests/integration/test_ssh_nodes.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from harness import cli
from harness.backend.clock import LIBFAKETIME, faketime_env
from harness.backend.cluster import Cluster
from harness.backend.prepare import SUPERVISOR
from harness.backend.remote import RemoteCluster, fit, hosts_block, node_environment, reset_script
from harness.backend.ssh import _restamp
from harness.case import load_case, load_nodes
from harness.clusters import get_cluster
from harness.errors import CaseError

ROOT = Path(__file__).resolve().parents[2]
KAFKA = """\
cluster: kafka-zk
user: root
key: id_test
nodes:
  zk:      {host: 10.0.0.11}
  kafka-1: {host: 10.0.0.12}
  kafka-2: {host: 10.0.0.13}
  kafka-3: {host: 10.0.0.14}
"""
PULSAR = """\
cluster: pulsar
user: root
key: id_test
nodes:
  zk: {host: 10.0.1.1}
  bookie-1: {host: 10.0.1.2}
  bookie-2: {host: 10.0.1.3}
  bookie-3: {host: 10.0.1.4}
  broker-1: {host: 10.0.1.5}
  broker-2: {host: 10.0.1.6}
  broker-3: {host: 10.0.1.7}
"""


def nodes_file(tmp_path: Path, text: str) -> Path:
    (tmp_path / "id_test").write_text("read only when a host is reached\n")
    path = tmp_path / "nodes.yaml"
    path.write_text(text)
    return path


def test_a_kafka_broker_on_a_host_advertises_its_host_to_the_harness_and_its_name_inside() -> None:
    spec = get_cluster("kafka-zk")
    env = node_environment(spec, spec.node("kafka-2"), "10.0.0.13", {"CHAOS_BROKER_CONFIG": "a=1;b=2"})
    assert env["ROLE"] == "broker" and env["NODE_ID"] == "2"
    assert env["ENTRYPOINT"] == "/opt/kafka/entrypoint.sh" and env["HOST_PORT"] == "9092"
    # the case's settings first, the address last (the entrypoint applies the last of a key)
    assert env["BROKER_CONFIG"] == ("a=1;b=2;advertised.listeners=EXTERNAL://10.0.0.13:9092,"
                                    "INTERNAL://kafka-2:9094")
    bare = node_environment(spec, spec.node("kafka-1"), "10.0.0.12", {})
    assert bare["BROKER_CONFIG"].startswith("advertised.listeners=")
    assert "HOST_PORT" not in node_environment(spec, spec.node("zk"), "10.0.0.11", {})


def test_a_dynamic_quorum_node_advertises_its_controller_listener_and_a_spare_waits_at_its_gate() -> None:
    spec = get_cluster("kafka-kraft-dynamic")
    combined = node_environment(spec, spec.node("kafka-1"), "10.0.2.1", {})
    assert combined["BROKER_CONFIG"].endswith(",CONTROLLER://kafka-1:9093")
    spare = node_environment(spec, spec.node("kafka-5"), "10.0.2.5", {})
    assert spare["JOIN_GATE"] == "/opt/chaos-harness/join"
    assert "CONTROLLER://" not in spare["BROKER_CONFIG"]  # a broker-only node
    assert "JOIN_GATE" not in combined


def test_a_pulsar_broker_advertises_both_listeners_and_a_bookie_keeps_the_compose_settings() -> None:
    spec = get_cluster("pulsar")
    env = node_environment(spec, spec.node("broker-1"), "10.0.1.5", {})
    assert (env["HOST_PORT"], env["ADMIN_PORT"]) == ("6650", "8080")
    assert env["BROKER_CONFIG"].endswith(
        "advertisedListeners=internal:pulsar://broker-1:6650,internal:http://broker-1:8080,"
        "external:pulsar://10.0.1.5:6650,external:http://10.0.1.5:8080")
    bookie = node_environment(spec, spec.node("bookie-2"), "10.0.1.3", {"CHAOS_BOOKIE_CONFIG": "x=y"})
    assert bookie["BOOKIE_CONFIG"] == "diskCheckInterval=1000;x=y" and bookie["ROLE"] == "bookie"


def test_every_host_names_every_node_and_compose_s_aliases() -> None:
    spec = get_cluster("pulsar")
    block = hosts_block(spec, {n.name: f"10.0.1.{i}" for i, n in enumerate(spec.nodes, 1)})
    lines = block.splitlines()
    assert len(lines) == len(spec.nodes)
    assert lines[0] == "10.0.1.1 zk zookeeper # chaos-harness"  # Pulsar reaches ZooKeeper by its alias
    assert all(line.endswith("# chaos-harness") for line in lines)


def test_the_cluster_on_hosts_reaches_each_node_at_its_host_and_own_port(tmp_path: Path) -> None:
    engine = cast(Any, None)  # no image is built: nothing here reaches Docker
    kafka = RemoteCluster.from_nodes(engine, load_nodes(nodes_file(tmp_path, KAFKA)))
    assert kafka.spec.bootstrap == "10.0.0.12:9092,10.0.0.13:9092,10.0.0.14:9092"
    assert kafka.spec.node("zk").endpoint == "10.0.0.11:2181"
    assert kafka.on_hosts and not Cluster.on_hosts and kafka.state() == "absent"
    pulsar = RemoteCluster.from_nodes(engine, load_nodes(nodes_file(tmp_path, PULSAR)), "4.2.4")
    assert pulsar.version == "4.2.4"
    assert pulsar.spec.bootstrap == "pulsar://10.0.1.5:6650,10.0.1.6:6650"  # broker-3 is a spare
    assert pulsar.spec.admin_urls == ("http://10.0.1.5:8080", "http://10.0.1.6:8080")


def test_the_reset_script_is_valid_shell_and_touches_only_what_the_harness_made() -> None:
    script = reset_script("172.18.0.3", unname=True)
    assert subprocess.run(["bash", "-n", "-c", script]).returncode == 0
    assert "rm -rf /data/* /chaos/*" in script and "grep -v '# chaos-harness' /etc/hosts" in script
    assert "tc qdisc del" in script and "'^qdisc htb 1: root'" in script  # only the faults' own root
    assert "/etc/hosts" not in reset_script("172.18.0.3")


def test_a_stamped_log_line_reads_as_docker_s_or_bare() -> None:
    line = "1796575647.798979 hello world\n"
    assert _restamp(line, timestamps=False) == "hello world\n"
    assert _restamp(line, timestamps=True) == "2026-12-06T16:47:27.798979000Z hello world\n"
    assert _restamp("no stamp here\n", timestamps=True) == "no stamp here\n"


@pytest.mark.skipif(shutil.which("setsid") is None, reason="util-linux's setsid is not installed")
def test_the_supervisor_stamps_the_output_keeps_signals_and_a_killed_node_down(tmp_path: Path) -> None:
    """The supervisor itself, on this machine (its home moved to a temporary folder): the
    node's output stamped with the time; SIGQUIT reaches the node (not ignored, as it would
    be for a command started with "&"); the stamper outlives a signal; kill -9 leaves the
    node down."""
    node = tmp_path / "node"
    node.write_text(SUPERVISOR.replace("HOME_DIR=/opt/chaos-harness", f"HOME_DIR={tmp_path}"))
    node.chmod(0o755)
    entry = tmp_path / "entry.sh"
    entry.write_text('#!/bin/bash\necho "I am $(hostname)"\ntrap "echo got QUIT" QUIT\n'
                     "for i in $(seq 1 200); do echo tick $i; sleep 0.05; done\n")
    entry.chmod(0o755)
    (tmp_path / "shim").mkdir()
    (tmp_path / "shim" / "hostname").write_text("#!/bin/sh\necho kafka-9\n")
    (tmp_path / "shim" / "hostname").chmod(0o755)
    (tmp_path / "node.env").write_text(f"ENTRYPOINT={entry}\n")

    def sup(*args: str) -> str:
        out = subprocess.run([str(node), *args], capture_output=True, text=True, timeout=30,
                             env={**os.environ, "PATH": os.environ["PATH"]})
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    t0 = time.time()
    try:
        sup("start")
        assert sup("status") == "running"
        time.sleep(0.5)
        sup("signal", "QUIT")
        time.sleep(0.3)
        sup("pause")
        assert sup("status") == "paused"
        sup("resume")
        time.sleep(0.3)
        sup("kill")
        time.sleep(0.5)
        assert sup("status") == "exited"
        time.sleep(0.5)
        assert sup("status") == "exited"  # nobody started it again
    finally:
        subprocess.run([str(node), "kill"], timeout=30)
    lines = (tmp_path / "node.log").read_text().splitlines()
    stamps = [float(line.split(" ", 1)[0]) for line in lines]
    texts = [line.split(" ", 1)[1] for line in lines]
    assert texts[0] == "I am kafka-9"  # the shim answers for the host's name
    assert "got QUIT" in texts and "tick 3" in texts
    assert all(t0 - 1 <= s <= time.time() + 1 for s in stamps) and stamps == sorted(stamps)
    assert texts.index("got QUIT") < len(texts) - 1  # the node went on after the signal


@pytest.mark.skipif(not LIBFAKETIME.is_file() or shutil.which("setsid") is None,
                    reason="libfaketime (bin/setup installs it) or setsid is missing")
def test_a_node_s_own_clock_moves_its_entrypoint_and_not_the_log_s_time_stamps(tmp_path: Path) -> None:
    """CHAOS_PRELOAD: libfaketime in the node's entrypoint alone, its offset file read as in
    a container; the supervisor's stamps keep the real time."""
    node = tmp_path / "node"
    node.write_text(SUPERVISOR.replace("HOME_DIR=/opt/chaos-harness", f"HOME_DIR={tmp_path}"))
    node.chmod(0o755)
    entry = tmp_path / "entry.sh"
    entry.write_text("#!/bin/bash\necho clock $(date +%s)\nsleep 30\n")
    entry.chmod(0o755)
    (tmp_path / "offset").write_text("+3600.000\n")
    env = {"ENTRYPOINT": str(entry), "CHAOS_PRELOAD": str(LIBFAKETIME),
           **faketime_env(str(tmp_path / "offset"))}
    (tmp_path / "node.env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    try:
        assert subprocess.run([str(node), "start"], timeout=30).returncode == 0
        deadline = time.monotonic() + 10
        while "clock" not in (text := (tmp_path / "node.log").read_text(errors="replace")):
            assert time.monotonic() < deadline, text
            time.sleep(0.1)
    finally:
        subprocess.run([str(node), "kill"], timeout=30)
    stamp, _, seen = next(line for line in text.splitlines() if " clock " in line).partition(" clock ")
    assert abs(float(stamp) - time.time()) < 60  # the stamp: the real time
    assert 3500 < int(seen) - float(stamp) < 3700  # the node: an hour ahead


def test_run_on_hosts_refuses_a_case_of_another_cluster_or_a_kept_cluster_before_anything_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pulsar = nodes_file(tmp_path, PULSAR)
    case = ROOT / "cases" / "kafka" / "c1.yaml"
    assert cli.main(["run", str(case), "--nodes", str(pulsar), "--reports", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "nodes.yaml" in err and "cluster kafka-zk" in err and "Traceback" not in err
    kafka = nodes_file(tmp_path, KAFKA)
    assert cli.main(["run", str(case), "--nodes", str(kafka), "--keep-cluster"]) == 2
    assert "--keep-cluster and --nodes" in capsys.readouterr().err
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]  # no run directory was made


def test_a_case_that_needs_a_lazy_disk_is_refused_on_hosts(tmp_path: Path) -> None:
    pulsar = load_nodes(nodes_file(tmp_path, PULSAR))
    with pytest.raises(CaseError, match="disk: lazy is not available on hosts"):
        fit(load_case(ROOT / "cases" / "pulsar" / "powerloss-every-bookie.yaml"), pulsar)
    fit(load_case(ROOT / "cases" / "pulsar" / "clock-jumps.yaml"), pulsar)  # clocks of their own: yes
    fit(load_case(ROOT / "cases" / "pulsar" / "kill-owner.yaml"), pulsar)


class HostProcess:
    """A node process on a host: its network (and the faults' rules in it) outlives it."""

    net_persists = True

    def __init__(self, ip: str, commands: list[str]) -> None:
        self.status, self._ip, self.commands = "running", ip, commands

    def ip(self) -> str:
        return self._ip

    def netns(self) -> Any:
        commands = self.commands

        class Net:
            pid = None
            persists = True

            def run(self, tool: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
                commands.append(" ".join(tool))
                return subprocess.CompletedProcess(tool, 0, "", "")
        return Net()

    def kill(self, signal: str) -> None:
        self.status = "exited"

    def start(self) -> None:
        self.status = "running"


def test_a_partition_of_a_node_on_a_host_ends_when_its_process_is_killed_as_on_docker() -> None:
    """A container's namespace dies with its process, and a partition with it; a host's network
    stays, so the kill flushes the node's chain there: the same fault means the same on both."""
    from types import SimpleNamespace

    from harness.backend.cluster import Node
    from harness.faults import Nemesis

    commands: list[str] = []
    a = cast(Node, SimpleNamespace(name="kafka-1", container=HostProcess("10.0.0.12", commands), disk=None))
    b = cast(Node, SimpleNamespace(name="kafka-2", container=HostProcess("10.0.0.13", commands), disk=None))
    nemesis = Nemesis(cast(Cluster, SimpleNamespace(nodes=lambda: [a, b])), None)
    nemesis.apply("partition", a)
    assert "iptables -w 5 -A CHAOS -s 10.0.0.13 -j DROP" in commands and "kafka-1" in nemesis.partitioned
    commands.clear()
    nemesis.apply("kill9", a)
    assert "iptables -w 5 -F CHAOS" in commands and "kafka-1" not in nemesis.partitioned
    commands.clear()
    assert nemesis.heal_all() == []  # a dead node on a host: its rules flushed too, then it starts
    assert "iptables -w 5 -F CHAOS" in commands and a.container.status == "running"


def test_a_java_workload_on_hosts_runs_on_this_machine_s_network_knowing_every_node_s_name(
        tmp_path: Path) -> None:
    """The Java programs reach the nodes by their names (kafka-1:9094, broker-1:6650), as in a
    cluster of containers: the helper's /etc/hosts names each node's host (and aliases)."""
    seen: dict[str, Any] = {}

    class Engine:
        def run_container(self, image: str, cmd: list[str], **kw: Any) -> str:
            seen.update(kw, image=image)
            return "box"

    pulsar = RemoteCluster.from_nodes(cast(Any, Engine()), load_nodes(nodes_file(tmp_path, PULSAR)))
    assert pulsar.run_helper("w", ["true"], role="workload", mounts={"/r": "/run-dir"},
                             working_dir="/run-dir") == "box"
    assert seen["network"] == "host" and seen["image"] == "chaos-harness/pulsar:4.0.7"
    assert seen["extra_hosts"]["broker-1"] == "10.0.1.5" and seen["extra_hosts"]["zookeeper"] == "10.0.1.1"
    assert seen["labels"]["io.chaosharness.role"] == "workload"


def test_a_node_s_clock_on_its_host_is_its_offset_file_written_whole(tmp_path: Path) -> None:
    """RemoteClock writes the offset as a new file renamed over the old one (libfaketime never
    reads half a write) and reads it back; a cluster with a clock step gives each node one."""
    from harness.backend.remote import CLOCK_FILE, RemoteClock

    class Host:
        node = SimpleNamespace(name="kafka-1", where="root@10.0.0.12:22")

        def __init__(self) -> None:
            self.files: dict[str, str] = {}

        def run(self, command: str, *, timeout: float = 60.0) -> tuple[int, str]:
            out = subprocess.run(["sh", "-c", command.replace("/opt/chaos-harness", str(tmp_path))],
                                 capture_output=True, text=True)
            return out.returncode, out.stdout + out.stderr

    clock = RemoteClock(cast(Any, Host()))
    clock.set(-42.5)
    assert (tmp_path / "clock" / "offset").read_text() == "-42.500\n"
    assert clock.offset() == -42.5 and CLOCK_FILE == "/opt/chaos-harness/clock/offset"
    assert not (tmp_path / "clock" / "offset.new").exists()
