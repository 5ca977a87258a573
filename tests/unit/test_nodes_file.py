"""Nodes files (harness/case/_nodes.py): what a good one gives, and one clear error, naming
file, line and field, for each kind of bad one."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.case import load_nodes
from harness.errors import CaseError

GOOD = """\
cluster: kafka-zk
user: root
key: id_test
nodes:
  zk:      {host: 10.0.0.11, role: zookeeper}
  kafka-1: {host: 10.0.0.12, role: broker}
  kafka-2: {host: 10.0.0.13}
  kafka-3: {host: 10.0.0.14, port: 2222, user: chaos}
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "id_test").write_text("not read until a host is reached\n")
    return tmp_path


def write(folder: Path, text: str) -> Path:
    path = folder / "nodes.yaml"
    path.write_text(text)
    return path


def test_a_good_file_gives_every_node_its_role_and_how_to_reach_it(folder: Path) -> None:
    nodes = load_nodes(write(folder, GOOD))
    assert nodes.cluster.name == "kafka-zk" and nodes.version == "3.9.2"
    assert [(n.name, n.kind, n.where) for n in nodes.nodes] == [
        ("zk", "zookeeper", "root@10.0.0.11:22"),
        ("kafka-1", "broker", "root@10.0.0.12:22"),
        ("kafka-2", "broker", "root@10.0.0.13:22"),
        ("kafka-3", "broker", "chaos@10.0.0.14:2222"),
    ]
    assert nodes.node("kafka-2").key == folder / "id_test"  # relative to the file
    assert nodes.node("kafka-2").line == 7


@pytest.mark.parametrize("edit, line, field, words", [
    (("cluster: kafka-zk", "cluster: kafka-xx"), 1, "cluster", "unknown cluster 'kafka-xx'"),
    (("user: root\n", 'user: root\nversion: "9.9.9"\n'), 3, "version", "version '9.9.9' not available"),
    (("  kafka-3: {host: 10.0.0.14, port: 2222, user: chaos}\n", ""), 4, "nodes",
     "cluster kafka-zk also needs kafka-3"),
    (("  kafka-3:", "  kafka-4:"), 8, "nodes", "did you mean 'kafka-3'"),
    (("{host: 10.0.0.12, role: broker}", "{host: 10.0.0.12, role: bookie}"), 6, "nodes.kafka-1.role",
     "kafka-1 is a broker in cluster kafka-zk, not a bookie"),
    (("key: id_test", "key: id_gone"), 3, "key", "no key file at"),
    (("user: root\n", ""), 4, "nodes.zk.user", "set user here or at the top"),
    (("port: 2222", "port: 70000"), 8, "nodes.kafka-3.port", "not a TCP port"),
    (("10.0.0.13", "10.0.0.12"), 7, "nodes.kafka-2.host", "10.0.0.12:22 already plays kafka-1"),
    (("{host: 10.0.0.11, role: zookeeper}", "{hostname: 10.0.0.11}"), 5, "nodes.zk",
     "unknown key 'hostname'"),
    (("{host: 10.0.0.11, role: zookeeper}", "{role: zookeeper}"), 5, "nodes.zk.host", "missing required key"),
])
def test_each_bad_file_gives_one_error_naming_file_line_and_field(
        folder: Path, edit: tuple[str, str], line: int, field: str, words: str) -> None:
    assert edit[0] in GOOD
    path = write(folder, GOOD.replace(edit[0], edit[1], 1))
    with pytest.raises(CaseError) as caught:
        load_nodes(path)
    err = caught.value
    assert (err.path, err.line, err.field) == (str(path), line, field), str(err)
    assert words in str(err)
    assert str(err).startswith(f"{path}:{line}: {field}: ")


def test_an_empty_or_missing_file_is_one_error(folder: Path) -> None:
    with pytest.raises(CaseError, match="empty"):
        load_nodes(write(folder, ""))
    with pytest.raises(CaseError, match="no such nodes file"):
        load_nodes(folder / "absent.yaml")
    with pytest.raises(CaseError, match="expected a mapping of node names"):
        load_nodes(write(folder, "cluster: pulsar\nkey: id_test\nuser: u\nnodes: [a, b]\n"))


def test_a_key_file_that_is_no_private_key_is_named_before_any_host_is_reached(folder: Path) -> None:
    from harness.backend.ssh import connect

    nodes = load_nodes(write(folder, GOOD))  # id_test holds a line of text
    with pytest.raises(CaseError) as caught:
        connect(nodes, nodes.node("zk"))
    assert (caught.value.line, caught.value.field) == (5, "nodes.zk")
    assert f"{folder / 'id_test'} is not a private key the harness can use" in str(caught.value)
