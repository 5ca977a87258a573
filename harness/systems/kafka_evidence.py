"""Kafka's replica evidence after a run: each replica's records, read from the brokers' files.

Kafka-specific, so it lives with the Kafka adapter; the generic collector
(:mod:`harness.collect`) keeps the logs and truncation lines and never imports
a system. Writes ``replicas/<node>.jsonl`` (one ``replica`` event per record of
each replica of the case topic, for the checker's divergence test) and adds
each replica's log end offset, checkpointed high watermark and leader epochs
to ``evidence.replicas``.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..backend.cluster import Cluster
from ..collect import Evidence
from ..errors import BackendError
from .kafka_segments import HW_CHECKPOINT, LOG_DIR, log_end_offset, node_checkpoint, read_partition_dir

__all__ = ["collect_kafka_replicas"]


def collect_kafka_replicas(cluster: Cluster, run_dir: Path, evidence: Evidence, topic: str,
                           partitions: int, when: str = "after-recovery") -> None:
    """Dumps every replica of ``topic`` from each broker's files into ``replicas/``."""
    out_dir = run_dir / "replicas"
    out_dir.mkdir(parents=True, exist_ok=True)
    for node in (n for n in cluster.nodes() if n.kind == "broker" and n.member):
        hws = node_checkpoint(node, HW_CHECKPOINT)
        lines = []
        for p in range(partitions):
            try:
                files = list(node.container.get_files(f"{LOG_DIR}/{topic}-{p}"))
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
