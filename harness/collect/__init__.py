"""Evidence from the brokers after a run: logs and truncation lines, into :class:`Evidence`.

Writes into the run directory ``logs/<node>.log`` (the container's whole
output, which survives kill -9 and restart) and gathers the truncation events
and the unclean elections a KRaft controller logged for ``result.json``. What
only one system has (Kafka's replica dumps:
:mod:`harness.systems.kafka_evidence`) is the system adapter's, which fills
``Evidence.replicas``; this package imports no system. Every step is best
effort: a node that cannot be read is noted, never fatal, so that a failed run
keeps all the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..backend.cluster import Cluster
from ..errors import BackendError

__all__ = ["Evidence", "collect_logs", "parse_truncations", "parse_unclean_elections"]

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

#: a KRaft controller's line for an election outside the ISR and the ELR, among them Kafka's
#: "last known leader" rule (docs/exploration.md); every controller logs it as it replays the
#: change, so one election is one (topic, partition, leader epoch)
_UNCLEAN = re.compile(_TS + r".*UNCLEAN partition change for (?P<tp>\S+) with topic ID \S+: (?P<change>.*?)"
                      r"(?: \(org\.apache|$)")
_VALUE = r"(\[[^\]]*\]|-?\d+)"
_CHANGE = re.compile(r"(?P<field>isr|leader|leaderEpoch): (?P<old>" + _VALUE + r") -> (?P<new>"
                     + _VALUE + ")")


@dataclass
class Evidence:
    """What the collector found; ``problems`` lists what could not be read."""

    logs: list[str] = field(default_factory=list)
    truncations: list[dict[str, Any]] = field(default_factory=list)
    elections: list[dict[str, Any]] = field(default_factory=list)
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


def parse_unclean_elections(node: str, text: str, topic: str | None = None) -> list[dict[str, Any]]:
    """The unclean elections one node's log records as a KRaft controller (optionally only
    for ``topic``): ``node`` (who logged it), ``topic``, ``partition``, ``leader`` (the broker
    elected), ``epoch`` (its leader epoch), ``isr`` (the ISR before), ``time``, ``line``."""
    found = []
    for line in text.splitlines():
        if "UNCLEAN partition change" not in line:
            continue
        m = _UNCLEAN.search(line)
        if not m:
            continue
        t, _, p = m.group("tp").rpartition("-")
        if not p.isdigit() or (topic is not None and t != topic):
            continue
        change = {c.group("field"): (c.group("old"), c.group("new"))
                  for c in _CHANGE.finditer(m.group("change"))}
        leader, epoch = change.get("leader"), change.get("leaderEpoch")
        found.append({
            "node": node, "topic": t, "partition": int(p),
            "leader": int(leader[1]) if leader else None, "epoch": int(epoch[1]) if epoch else None,
            "isr": change["isr"][0] if "isr" in change else None,
            "time": _log_time(m.group("ts")), "line": line.strip()[:500],
        })
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
    seen = {(e["topic"], e["partition"], e["epoch"]) for e in evidence.elections}
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
        for e in parse_unclean_elections(node.name, text, topic):
            if (e["topic"], e["partition"], e["epoch"]) not in seen:
                seen.add((e["topic"], e["partition"], e["epoch"]))
                evidence.elections.append(e)
