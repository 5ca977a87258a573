"""Evidence from the brokers after a run: logs, truncation lines, replica dumps.

Writes into the run directory: ``logs/<node>.log`` (the container's whole
output, which survives kill -9 and restart), ``replicas/<node>.jsonl`` (one
``replica`` event per record of each replica of the case topic, for the
checker's divergence test) and returns the truncation events and per-replica
offsets for ``result.json``. Every step is best effort: a node that cannot be
read is noted, never fatal, so that a failed run keeps all the rest.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..backend.cluster import Cluster
from ..errors import BackendError
from .segments import log_end_offset, read_partition_dir

__all__ = ["Evidence", "collect_logs", "collect_kafka_replicas", "parse_truncations"]

# Tolerant patterns over Kafka 0.10 .. 4.x formats (see shared research notes).
_TS = r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]"
_TRUNCATION_PATTERNS = [
    ("log", re.compile(_TS + r".*\[(?:UnifiedLog|Log) partition=(?P<tp>[^,\]]+), dir=[^\]]*\] "
                       r"Truncating to (?:offset )?(?P<offset>\d+)(?P<noop> has no effect)?")),
    ("fetcher", re.compile(_TS + r".*Truncating partition (?P<tp>\S+) with TruncationState\(offset="
                           r"(?P<offset>\d+).*?due to (?P<reason>.*?)(?: \(kafka\.|$)")),
    ("below-hw", re.compile(_TS + r".*Truncating (?P<tp>\S+?) to offset (?P<offset>\d+) below high "
                            r"watermark (?P<hw>\d+)")),
    ("legacy", re.compile(_TS + r".*Truncating log (?P<tp>\S+) to offset (?P<offset>\d+)")),
]


@dataclass
class Evidence:
    """What the collector found; ``problems`` lists what could not be read."""

    logs: list[str] = field(default_factory=list)
    truncations: list[dict[str, Any]] = field(default_factory=list)
    replicas: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def parse_truncations(node: str, text: str, topic: str | None = None) -> list[dict[str, Any]]:
    """Truncation events in one broker log (optionally only for ``topic``)."""
    found = []
    for line in text.splitlines():
        if "Truncating" not in line:
            continue
        for source, pattern in _TRUNCATION_PATTERNS:
            m = pattern.search(line)
            if not m:
                continue
            tp = m.group("tp")
            t, _, p = tp.rpartition("-")
            if topic is not None and t != topic:
                break
            groups = m.groupdict()
            found.append({
                "node": node, "topic": t, "partition": int(p) if p.isdigit() else None,
                "offset": int(m.group("offset")), "source": source,
                "effective": not groups.get("noop"), "reason": groups.get("reason"),
                "hw": int(groups["hw"]) if groups.get("hw") else None,
                "time": _log_time(m.group("ts")), "line": line.strip()[:500],
            })
            break
    return found


def _log_time(ts: str) -> float | None:
    try:
        return datetime.strptime(ts, "%Y-%m-%d %H:%M:%S,%f").timestamp()
    except ValueError:
        return None


def collect_logs(cluster: Cluster, run_dir: Path, evidence: Evidence, topic: str | None) -> None:
    """Saves each node's output and parses truncation lines out of broker logs."""
    logs = run_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    try:
        nodes = cluster.nodes()
    except BackendError as exc:
        evidence.problems.append(f"logs: {exc}")
        return
    for node in nodes:
        try:
            text = node.container.logs()
        except BackendError as exc:
            evidence.problems.append(f"logs of {node.name}: {exc}")
            continue
        path = logs / f"{node.name}.log"
        path.write_text(text, encoding="utf-8")
        evidence.logs.append(f"logs/{path.name}")
        if node.kind == "broker":
            evidence.truncations.extend(parse_truncations(node.name, text, topic))


def collect_kafka_replicas(cluster: Cluster, run_dir: Path, evidence: Evidence, topic: str,
                           partitions: int, when: str = "after-recovery") -> None:
    """Dumps every replica of ``topic`` from each broker's files into ``replicas/``."""
    out_dir = run_dir / "replicas"
    out_dir.mkdir(parents=True, exist_ok=True)
    for node in (n for n in cluster.nodes() if n.kind == "broker"):
        hws = _high_watermarks(node)
        lines = []
        for p in range(partitions):
            try:
                files = list(node.container.get_files(f"/data/kafka/{topic}-{p}"))
            except BackendError:
                continue  # not a replica of this partition
            records = read_partition_dir(files).get((topic, p), [])
            for r in records:
                if not r.control:
                    lines.append(json.dumps({"type": "replica", "client": "collector",
                                             "node": node.name, "topic": topic, "partition": p,
                                             "offset": r.offset, "epoch": r.epoch, "mid": r.mid,
                                             "crc": r.crc}, separators=(",", ":")))
            evidence.replicas.append({"node": node.name, "topic": topic, "partition": p,
                                      "log_end_offset": log_end_offset(records),
                                      "high_watermark": hws.get((topic, p)), "when": when,
                                      "epochs": sorted({r.epoch for r in records})})
        (out_dir / f"{node.name}.jsonl").write_text("".join(ln + "\n" for ln in lines))


def _high_watermarks(node: Any) -> dict[tuple[str, int], int]:
    """The broker's last checkpointed high watermarks (``replication-offset-checkpoint``)."""
    try:
        files = dict(node.container.get_files("/data/kafka/replication-offset-checkpoint"))
    except BackendError:
        return {}
    out = {}
    for content in files.values():
        for line in content.decode(errors="replace").splitlines()[2:]:
            parts = line.split()
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                out[(parts[0], int(parts[1]))] = int(parts[2])
    return out
