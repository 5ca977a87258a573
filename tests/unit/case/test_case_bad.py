"""Bad case files: exactly one CaseError, naming the file, the line and the field."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from harness import points
from harness.case import load_case, load_case_text
from harness.errors import CaseError

BAD = Path(__file__).resolve().parents[2] / "data" / "cases" / "bad"
PointsFn = Callable[[str, str], frozenset[str]]
_EXPECT = re.compile(r"# expect: (\d+): (.+)")


def _expectation(path: Path) -> tuple[int, str]:
    """The ``# expect: LINE: message fragment`` first line of a bad fixture."""
    match = _EXPECT.fullmatch(path.read_text(encoding="utf-8").splitlines()[0])
    assert match, f"{path.name} lacks its '# expect: LINE: fragment' first line"
    return int(match[1]), match[2]


def test_there_are_enough_bad_fixtures() -> None:
    assert len(list(BAD.glob("*.yaml"))) >= 15


@pytest.mark.parametrize("path", sorted(BAD.glob("*.yaml")), ids=lambda p: p.stem)
def test_bad_fixture(path: Path) -> None:
    line, fragment = _expectation(path)
    with pytest.raises(CaseError) as info:
        load_case(path)
    err = info.value
    assert (err.path, err.line) == (str(path), line)
    assert str(err).startswith(f"{path}:{line}: ")
    assert fragment in str(err)


_HEAD = "system: kafka\ncluster: kafka-zk\n"

# (text, line, fragment): rules the fixture files do not cover.
_INLINE = [
    (_HEAD + "steps: []\n", 3, "steps: expected a non-empty list of steps, got a list"),
    (_HEAD + "steps:\n  - kill9\n", 4, "steps[0]: a step is a mapping with one action"),
    (_HEAD + "steps:\n  - kill9: leader\n    stop: leader\n", 4, "got 2 keys: kill9, stop"),
    ("system: kafka\nsteps: [{kill9: leader}]\n", 1, "cluster: missing required key"),
    ("system: kafak\ncluster: kafka-zk\nsteps: [{kill9: leader}]\n", 1,
     "system: unknown system 'kafak' (expected one of: kafka, pulsar); did you mean 'kafka'?"),
    (_HEAD + "name: my case\nsteps: [{kill9: leader}]\n", 3, "name: invalid name 'my case'"),
    (_HEAD + "timeout: 0s\nsteps: [{kill9: leader}]\n", 3, "timeout: must be positive"),
    (_HEAD + "timeout: .inf\nsteps: [{kill9: leader}]\n", 3, "timeout: must be positive"),
    (_HEAD + "broker_config: {a: [1]}\nsteps: [{kill9: leader}]\n", 3,
     "broker_config.a: expected a value, got a list"),
    (_HEAD + "topic: {partitions: 1.5}\nsteps: [{kill9: leader}]\n", 3,
     "topic.partitions: expected an integer, got float 1.5"),
    (_HEAD + "topic: {min_insync_replicas: 3, replication_factor: 2}\nsteps: [{kill9: leader}]\n",
     3, "topic.min_insync_replicas: min_insync_replicas 3 exceeds replication_factor 2"),
    ("system: pulsar\ncluster: pulsar\ntopic: {ensemble: 3}\nsteps: [{kill9: owner}]\n", 3,
     "give all or none of ensemble, write_quorum and ack_quorum"),
    ("system: pulsar\ncluster: pulsar\ntopic: {ensemble: 2, write_quorum: 3, ack_quorum: 1}\n"
     "steps: [{kill9: owner}]\n", 3, "topic.write_quorum: write_quorum 3 exceeds ensemble 2"),
    ("system: pulsar\ncluster: pulsar\ntopic: {ensemble: 4, write_quorum: 3, ack_quorum: 1}\n"
     "steps: [{kill9: owner}]\n", 3, "topic.ensemble: ensemble 4 exceeds the 3 bookies"),
    ("system: pulsar\ncluster: pulsar\nclient: {acks: all}\nsteps: [{kill9: owner}]\n", 3,
     "client.acks: applies to kafka cases only (this is a pulsar case)"),
    ("system: pulsar\ncluster: pulsar\nclient: {subscription_type: shared}\n"
     "steps: [{kill9: owner}]\n", 3, "did you mean 'Shared'?"),
    (_HEAD + "client: {acks: 2}\nsteps: [{kill9: leader}]\n", 3,
     "client.acks: unknown value '2' (expected one of: all, -1, 0, 1)"),
    (_HEAD + "client:\n  idempotence: false\n  transactional_id: t\nsteps: [{kill9: leader}]\n", 4,
     "client.idempotence: a transactional_id needs idempotence: true"),
    (_HEAD + "client: {idempotence: true, retries: 0}\nsteps: [{kill9: leader}]\n", 3,
     "client.retries: idempotence needs retries > 0"),
    (_HEAD + "client: {idempotence: true, max_in_flight: 6}\nsteps: [{kill9: leader}]\n", 3,
     "client.max_in_flight: idempotence allows at most 5"),
    (_HEAD + "client:\n  request_timeout_ms: 200000\nsteps: [{kill9: leader}]\n", 4,
     "client.request_timeout_ms: delivery_timeout_ms (120000) must be at least linger_ms + "
     "request_timeout_ms (200005)"),
    (_HEAD + "steps:\n  - produce: {rate: 5}\n", 4, "give exactly one of count and duration"),
    (_HEAD + "steps:\n  - produce: {count: 5, partition: 1}\n", 4,
     "steps[0].produce.partition: partition 1 does not exist (the topic has 1)"),
    (_HEAD + "steps:\n  - consume: {group: g}\n", 4,
     "a consume that is not in the background needs count or duration"),
    (_HEAD + "steps:\n  - produce: {count: 1, name: w}\n  - consume: {count: 1, name: w}\n", 5,
     "steps[1].consume.name: workload name 'w' is already used by steps[0].produce"),
    (_HEAD + "steps:\n  - produce: {count: 1, name: w}\n  - await: {workload: w}\n", 5,
     "workload 'w' (steps[0].produce) is not a background workload"),
    (_HEAD + "steps:\n  - await: {workload: w}\n"
     "  - produce: {count: 1, name: w, background: true}\n",
     4, "no background workload 'w' before this step"),
    (_HEAD + "steps:\n  - await: {injection: C1}\n  - inject: {point: C1}\n", 4,
     "no inject step for point 'C1' before this step"),
    (_HEAD + "steps:\n  - await: {timeout: 5s}\n", 4, "give exactly one condition"),
    (_HEAD + "steps:\n  - await: {time: 5s, no_leader: {}}\n", 4, "; got time, no_leader"),
    (_HEAD + "steps:\n  - await: {time: 5s, timeout: 6s}\n", 4,
     "steps[0].await.timeout: a time await takes no timeout"),
    (_HEAD + "steps:\n  - await: {leader_chnge: {}}\n", 4,
     "steps[0].await: unknown condition 'leader_chnge'"),
    (_HEAD + "steps:\n  - await: {isr_size: {partition: 0}}\n", 4,
     "steps[0].await.isr_size.size: missing required key"),
    (_HEAD + "steps:\n  - await: {isr_size: {size: 4}}\n", 4,
     "size 4 exceeds the topic's replication_factor 3"),
    ("system: pulsar\ncluster: pulsar\nsteps:\n  - await: {isr_size: {size: 1}}\n", 4,
     "isr_size applies to kafka cases only"),
    ("system: pulsar\ncluster: pulsar\ntopic: {deduplication: topic}\nsteps:\n  - produce: {count: 1}\n",
     3, "topic.deduplication: expected true, false or namespace, got string 'topic'"),
    (_HEAD + "topic: {deduplication: namespace}\nsteps:\n  - produce: {count: 1}\n", 3,
     "topic.deduplication: applies to pulsar cases only"),
    (_HEAD + "steps:\n  - await: {checkpoint: {node: leader, kind: recovery, at_least: 1}}\n", 4,
     "steps[0].await.checkpoint.kind: unknown checkpoint kind 'recovery' (expected one of: "
     "recovery-point, high-watermark); did you mean 'recovery-point'?"),
    (_HEAD + "steps:\n  - await: {checkpoint: {node: leader, kind: high-watermark}}\n", 4,
     "steps[0].await.checkpoint.at_least: missing required key"),
    (_HEAD + "steps:\n  - await: {checkpoint: {node: leader, kind: high-watermark, at_least: -1}}\n",
     4, "steps[0].await.checkpoint.at_least: must be at least 0, got -1"),
    ("system: pulsar\ncluster: pulsar\nsteps:\n  - await: {checkpoint: {node: owner, "
     "kind: high-watermark, at_least: 1}}\n", 4, "checkpoint applies to kafka cases only"),
    (_HEAD + "steps:\n  - await: {log: {node: zk, pattern: '(('}}\n", 4,
     "steps[0].await.log.pattern: invalid regular expression"),
    (_HEAD + "steps:\n  - partition: {node: kafka-1, from: kafka-1}\n", 4,
     "steps[0].partition.from: cannot partition kafka-1 from itself"),
    (_HEAD + "steps:\n  - partition: {node: leader, direction: up}\n", 4,
     "steps[0].partition.direction: unknown value 'up' (expected one of: both, in, out)"),
    (_HEAD + "steps:\n  - kill9: {node: leader, partition: -1}\n", 4,
     "steps[0].kill9.partition: must be at least 0, got -1"),
    (_HEAD + "steps:\n  - inject: {point: C1, offset: last}\n", 4,
     "steps[0].inject.offset: expected an offset (integer) or 'next'"),
    (_HEAD + "steps: [{kill9: leader}]\nexpect: {observe: [unseen], unseen: 1}\n", 4,
     "expect.unseen: unseen is also in observe"),
    (_HEAD + "steps: [{kill9: leader}]\nexpect: {observe: [unsen]}\n", 4,
     "expect.observe[0]: unknown anomaly 'unsen'"),
    (_HEAD + "steps: [{kill9: leader}]\nexpect: {injection_hit: true}\n", 4,
     "expect.injection_hit: the case has no inject step to judge"),
    (_HEAD + "steps: [{kill9: leader}]\nexpect: {verdict: ok}\n", 4,
     "expect.verdict: unknown value 'ok' (expected one of: pass, fail)"),
    # YAML-level problems
    (_HEAD + "steps: &s [*s]\n", 3, "recursive YAML alias"),
    (_HEAD + "steps: !!set {a, b}\n", 3, "unsupported YAML tag !!set"),
    (_HEAD + "steps: [{kill9: !custom leader}]\n", 3, "unsupported YAML tag !custom"),
    (_HEAD + "topic: {partitions: !!int ''}\nsteps: [{kill9: leader}]\n", 3, "invalid !!int value"),
    (_HEAD + "topic: {partitions: 99999999999999999999}\nsteps: [{kill9: leader}]\n", 3,
     "integer out of range"),
    (_HEAD + "base: &b {kill9: leader}\nsteps: [{<<: *b}]\n", 4,
     "YAML merge keys (<<) are not supported"),
    (_HEAD + "steps: [{kill9: leader}]\n[a]: 1\n", 4, "mapping keys must be plain names"),
    (_HEAD + "steps: [{kill9: leader}]\n---\nname: x\n", 4,
     "expected a single document in the stream"),
    (_HEAD + "name: \x01\n", 3, "unacceptable character #x0001"),
    ("a:\n  b: 'open\n", 3, "invalid YAML: found unexpected end of stream (while scanning a quoted "
                            "scalar on line 2)"),
    ("[" * 5000, 1, "the YAML is nested too deeply"),
    # lazy disks: the faults that need one, and their arguments
    (_HEAD + "disk: ssd\nsteps: [{kill9: leader}]\n", 3,
     "disk: unknown disk 'ssd' (expected one of: plain, lazy)"),
    ("system: pulsar\ncluster: pulsar\nsteps: [{powerloss: bookie}]\n", 3,
     "or any node's files on a lazy disk (disk: lazy); pulsar has none (use kill9)"),
    (_HEAD + "steps: [{powerloss: {node: leader, torn: true}}]\n", 3,
     "torn: a torn write needs a lazy disk (set disk: lazy)"),
    (_HEAD + "steps: [{corrupt: {node: leader, file: log, how: bitflip}}]\n", 3,
     "corrupt changes a file of a node's lazy disk (set disk: lazy)"),
    (_HEAD + "disk: lazy\nsteps: [{corrupt: {node: leader, file: swap, how: bitflip}}]\n", 4,
     "file: unknown file kind 'swap'"),
    (_HEAD + "disk: lazy\nsteps: [{corrupt: {node: leader, file: log, how: shred}}]\n", 4,
     "how: unknown corruption 'shred'"),
    (_HEAD + "disk: lazy\nsteps: [{corrupt: {node: leader, file: log}}]\n", 4, "how: missing required key"),
    (_HEAD + "steps: [{rollback: follower}]\n", 3,
     "rollback puts back a node's lazy disk as its last snapshot (set disk: lazy)"),
    ("system: pulsar\ncluster: pulsar\nsteps: [{chaos: {duration: 1m, faults: [powerloss]}}]\n", 3,
     "powerloss cuts Kafka log segments"),
]


@pytest.mark.parametrize(("text", "line", "fragment"), _INLINE)
def test_bad_text(text: str, line: int, fragment: str) -> None:
    with pytest.raises(CaseError) as info:
        load_case_text(text, "inline.yaml")
    assert (info.value.path, info.value.line) == ("inline.yaml", line), str(info.value)
    assert fragment in str(info.value)


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(CaseError, match=r"^.*missing\.yaml: cannot read the case file: "):
        load_case(tmp_path / "missing.yaml")
    with pytest.raises(CaseError, match="the case file is a directory, not a regular file"):
        load_case(tmp_path)
    with pytest.raises(CaseError, match="cannot read the case file: embedded null byte"):
        load_case("bad\0name.yaml")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"system: kafka\n\xff\xfe\n")
    with pytest.raises(CaseError, match=r"binary\.yaml:2: the case file is not UTF-8 text"):
        load_case(binary)


def test_points_come_from_harness_points(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                         real_available_points: PointsFn) -> None:
    # The loader offers exactly what the points table and the rule library offer (a leaf
    # module: the case model never imports harness.inject).
    assert real_available_points is points.available_points
    (tmp_path / "kafka-4.1.btm").write_text("RULE C1 x\nENDRULE\nRULE X1 y\nENDRULE\n")
    monkeypatch.setattr(points, "RULES_DIR", tmp_path)
    assert real_available_points("kafka", "4.1.2") == frozenset({"C1"})
    assert real_available_points("kafka", "3.9.2") == frozenset()
