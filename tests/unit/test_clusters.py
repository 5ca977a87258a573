"""The cluster table agrees with the compose files; the history writer survives crashes."""

from __future__ import annotations

import re

import pytest
import yaml

from harness.clusters import CLUSTERS
from harness.errors import BackendError
from harness.history import HistoryWriter, make_value, parse_mid, read_events


def test_compose_files_define_exactly_the_table_nodes_and_ports() -> None:
    for spec in CLUSTERS.values():
        doc = yaml.safe_load(spec.compose_file.read_text())
        assert set(doc["services"]) == set(spec.node_names), spec.name
        for node in spec.nodes:
            service = doc["services"][node.name]
            assert service["labels"]["io.chaosharness.cluster"] == spec.name
            published = {p.split(":")[1] for p in service.get("ports", [])}
            for port in (node.host_port, node.admin_port):
                if port is not None:
                    assert str(port) in published, (spec.name, node.name, port)
            assert all(p.startswith("127.0.0.1:") for p in service.get("ports", [])), \
                "ports are published on loopback only"


def test_history_keeps_what_was_written_and_skips_a_torn_line(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    with HistoryWriter(path, "p0") as w:
        for i in range(3):
            w.record("invoke", mid=f"p0-{i}")
    with open(path, "a") as fh:
        fh.write('{"type":"ok","mid":"p0-0"')  # a crash mid-line
    events = list(read_events(path))
    assert [e["mid"] for e in events] == ["p0-0", "p0-1", "p0-2"]
    assert all(e["client"] == "p0" and "t" in e and "m" in e for e in events)


def test_values_carry_their_message_id() -> None:
    assert parse_mid(make_value("load-17", 100)) == "load-17"
    assert len(make_value("load-17", 100)) == 100
    assert parse_mid(b"no separator here") is None and parse_mid(None) is None
    # not ours: characters outside the id alphabet (would break the JSON), too long, empty
    assert parse_mid(b'a"b|x') is None and parse_mid(b"a\\b|x") is None
    assert parse_mid(b"\xff\xfe|x") is None and parse_mid(b"|x") is None
    assert parse_mid(b"a" * 65 + b"|x") is None


def test_hot_path_lines_match_record_and_share_a_stamp_only_briefly(tmp_path) -> None:
    import json
    import time

    path = tmp_path / "h.jsonl"
    with HistoryWriter(path, "c\"1") as w:
        w.write_line(f'{w.head("invoke")},"mid":"c-1","key":null}}\n')
        w.record("ok", mid="c-1", partition=0, offset=7)
        time.sleep(0.002)
        w.write_line(f'{w.head("ok")},"mid":"c-2"}}\n')
    events = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["type"] for e in events] == ["invoke", "ok", "ok"]
    assert all(e["client"] == 'c"1' for e in events)
    assert set(events[0]) == {"type", "client", "t", "m", "mid", "key"}
    assert events[2]["m"] > events[0]["m"] and events[2]["t"] > events[0]["t"]


def test_host_ports_are_below_the_ephemeral_range() -> None:
    """A host port in 32768-60999 can be held by any outgoing connection (CI saw
    kafka-kraft-split fail on 39092, then in that range)."""
    from pathlib import Path

    for cluster in CLUSTERS.values():
        for node in cluster.nodes:
            for port in (node.host_port, node.admin_port):
                assert port is None or port < 32768, (cluster.name, node.name, port)
        text = Path(cluster.compose_file).read_text()
        published = [int(p) for p in re.findall(r'"127\.0\.0\.1:(\d+):\d+"', text)]
        assert published and all(p < 32768 for p in published), (cluster.name, published)


def test_every_node_has_a_fixed_address_in_a_free_subnet() -> None:
    """A node keeps its address across restarts, as a host does. KRaft resolves its voters'
    addresses once: a controller started again on an address another restarted node took is
    never found again (seen: a voter's requests for kafka-1 reached kafka-3 for four minutes),
    and a JVM caches a name's address for 30 s. Containers the harness adds to a cluster's
    network take theirs from the upper half, where no node's is."""
    from harness.backend.cluster import free_subnet

    for spec in CLUSTERS.values():
        doc = yaml.safe_load(spec.compose_file.read_text())
        assert doc["networks"]["chaos"]["ipam"]["config"] == [
            {"subnet": "${CHAOS_SUBNET:-172.28.91}.0/24", "ip_range": "${CHAOS_SUBNET:-172.28.91}.128/25"}]
        addresses = [doc["services"][n]["networks"]["chaos"]["ipv4_address"] for n in doc["services"]]
        assert len(set(addresses)) == len(addresses), spec.name
        for a in addresses:
            m = re.fullmatch(r"\$\{CHAOS_SUBNET:-172\.28\.91\}\.(\d+)", a)
            assert m and 2 <= int(m.group(1)) < 128, (spec.name, a)
    # the subnet: none of an existing network's, tried from a start of its own
    assert free_subnet(["172.17.0.0/16"], 7) == "172.28.7"
    assert free_subnet(["172.28.7.0/24", "172.28.0.0/22"], 7) == "172.28.8"
    assert free_subnet(["172.28.255.0/24", "172.28.0.0/24"], 255) == "172.28.1"
    with pytest.raises(BackendError, match="no free /24"):
        free_subnet(["172.16.0.0/12"])
