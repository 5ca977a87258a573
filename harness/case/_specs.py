"""Reading the ``topic``, ``client`` and ``expect`` sections."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from harness.clusters import ClusterDef

from ._fields import (
    NON_NEGATIVE,
    POSITIVE,
    Fields,
    Reader,
    boolean,
    choice,
    duration,
    error,
    name,
    number,
    show,
    str_map,
    string,
)
from ._scenario import read_scenario
from ._yaml import Node
from .model import (
    ACKS,
    ANOMALIES,
    DEFAULT_OBSERVED,
    ISOLATION_LEVELS,
    SUBSCRIPTION_TYPES,
    SYSTEMS,
    VERDICTS,
    ClientSpec,
    Expect,
    TopicSpec,
)

__all__ = ["read_topic", "read_client", "read_expect", "read_client_settings"]

_Table = Mapping[str, Reader[Any]]


def _deduplication(node: Node, field: str) -> bool | str:
    """``true``, ``false`` or ``namespace``."""
    if node.value == "namespace":
        return "namespace"
    if not isinstance(node.value, bool):
        raise error(node, field, f"expected true, false or namespace, got {show(node.value)}")
    return node.value


_TOPIC: dict[str, _Table] = {
    "common": {"name": name, "partitions": POSITIVE, "config": str_map},
    "kafka": {"replication_factor": POSITIVE, "min_insync_replicas": POSITIVE,
              "unclean_leader_election": boolean},
    "pulsar": {"ensemble": POSITIVE, "write_quorum": POSITIVE, "ack_quorum": POSITIVE,
               "deduplication": _deduplication, "spread": boolean},
}

_CLIENT: dict[str, _Table] = {
    "common": {"extra": str_map},
    "kafka": {"acks": choice(*ACKS), "retries": NON_NEGATIVE, "idempotence": boolean,
              "transactional_id": string, "isolation_level": choice(*ISOLATION_LEVELS),
              "linger_ms": NON_NEGATIVE, "request_timeout_ms": POSITIVE,
              "delivery_timeout_ms": POSITIVE, "max_in_flight": POSITIVE},
    "pulsar": {"batching": boolean, "max_pending_messages": NON_NEGATIVE,
               "max_pending_messages_across_partitions": NON_NEGATIVE,
               "memory_limit_bytes": NON_NEGATIVE, "send_timeout_ms": NON_NEGATIVE,
               "subscription_type": choice(*SUBSCRIPTION_TYPES),
               "batching_max_publish_delay_us": POSITIVE, "batching_max_messages": POSITIVE,
               "batching_max_bytes": POSITIVE, "block_if_queue_full": boolean},
}

_EXPECT_KEYS = ("observe", "min_acked", "injection_hit", "verdict", "reproduces", "max_unavailable",
                "p99_latency_ms", "p99_e2e_latency_ms", "min_aborted_seen", "scenario", "repairs")


def _read_section(node: Node, field: str, system: str,
                  tables: dict[str, _Table]) -> tuple[Fields, dict[str, Any]]:
    """The keys of a section valid for ``system``; another system's keys are errors."""
    if isinstance(node.value, dict):
        for key in node.value:
            owners = [s for s in SYSTEMS if s != system and key in tables.get(s, {})]
            if owners and key not in tables[system] and key not in tables["common"]:
                raise error(node.value[key], f"{field}.{key}", f"applies to {' and '.join(owners)} "
                                                               f"cases only (this is a {system} case)")
    readers = {**tables[system], **tables["common"]}
    fields = Fields(node, field, tuple(readers))
    return fields, {key: fields.get(key, read, None) for key, read in readers.items()
                    if fields.has(key)}


def read_topic(node: Node, system: str, cluster: ClusterDef) -> TopicSpec:
    """The ``topic`` section; replication within what the cluster has."""
    f, values = _read_section(node, "topic", system, _TOPIC)
    topic = TopicSpec(**values)
    if system == "kafka":
        brokers = len(cluster.nodes_of("broker"))
        _at_most(f, "replication_factor", topic.replication_factor, brokers,
                 f"the {brokers} brokers of cluster {cluster.name}")
        _at_most(f, "min_insync_replicas", topic.min_insync_replicas, topic.replication_factor,
                 f"replication_factor {topic.replication_factor}")
        return topic
    quorum = ("ensemble", "write_quorum", "ack_quorum")
    if 0 < sum(f.has(key) for key in quorum) < 3:
        raise error(node, "topic", "give all or none of ensemble, write_quorum and ack_quorum")
    bookies = len(cluster.nodes_of("bookie"))
    _at_most(f, "ensemble", topic.ensemble, bookies,
             f"the {bookies} bookies of cluster {cluster.name}")
    _at_most(f, "write_quorum", topic.write_quorum, topic.ensemble, f"ensemble {topic.ensemble}")
    _at_most(f, "ack_quorum", topic.ack_quorum, topic.write_quorum,
             f"write_quorum {topic.write_quorum}")
    return topic


def _at_most(f: Fields, key: str, value: int | None, limit: int | None, what: str) -> None:
    if value is not None and limit is not None and value > limit:
        raise error(f.at(key), f.sub(key), f"{key} {value} exceeds {what}")


def read_client(node: Node, system: str) -> ClientSpec:
    """The ``client`` section; Kafka settings the Java client would reject are errors here."""
    f, values = _read_section(node, "client", system, _CLIENT)
    if "transactional_id" in values:
        values.setdefault("idempotence", True)
    client = ClientSpec(**values)
    if system == "kafka":
        _check_kafka_client(f, client)
    return client


def read_client_settings(node: Node, field: str, system: str) -> Mapping[str, Any]:
    """A workload's ``settings``: client keys of ``system`` that replace the case's for it."""
    _, values = _read_section(node, field, system, {**_CLIENT, "common": {}})
    return MappingProxyType(values)


def _check_kafka_client(f: Fields, client: ClientSpec) -> None:
    def fail(key: str, message: str) -> None:
        raise error(f.at(key), f.sub(key), message)

    if client.transactional_id is not None and not client.idempotence:
        fail("idempotence", "a transactional_id needs idempotence: true")
    if client.idempotence and client.acks not in ("all", "-1"):
        fail("acks", "idempotence needs acks: all")
    if client.idempotence and client.retries == 0:
        fail("retries", "idempotence needs retries > 0")
    if client.idempotence and client.max_in_flight > 5:
        fail("max_in_flight", "idempotence allows at most 5 requests in flight")
    floor = client.linger_ms + client.request_timeout_ms
    if client.delivery_timeout_ms < floor:
        timeouts = ("delivery_timeout_ms", "request_timeout_ms", "linger_ms")
        key = next((k for k in timeouts if k in f), timeouts[0])
        fail(key, f"delivery_timeout_ms ({client.delivery_timeout_ms}) must be at least "
                  f"linger_ms + request_timeout_ms ({floor})")


def read_expect(node: Node, armed: bool, field: str = "expect",
                gaps: Mapping[str, str] = MappingProxyType({})) -> Expect:
    """The ``expect`` section; ``armed``: whether the case has an inject step; ``gaps``: the
    scenario facts its steps cannot produce, with the reason (:func:`._scenario.scenario_gaps`)."""
    f = Fields(node, field, ANOMALIES + _EXPECT_KEYS, kind="anomaly")
    # the informational anomalies (`unseen`: the recovery read found it; `under-write-quorum`)
    # are observed unless limited, with or without an `observe` list, or when a bug reproduces
    # them: `under-write-quorum`, a bookie that lost what it acknowledged; `unseen` only when
    # the scenario bounds `polled` (the consumers read the rest, so an unseen id is one their
    # subscription skipped; else a consumer may just not have read it)
    reproduces = f.get("reproduces", _anomaly_list, frozenset())
    scenario = f.get("scenario", lambda n, fld: read_scenario(n, fld, gaps), MappingProxyType({}))
    if "unseen" in reproduces and not (scenario.get("polled") and scenario["polled"].at_least):
        raise error(f.at("reproduces"), f.sub("reproduces"),
                    "unseen is reproduced only when the consumers read the rest: give "
                    "scenario: {polled: {at_least: N}} (else a consumer may just not have read it)")
    default_observe = frozenset(a for a in DEFAULT_OBSERVED
                                if not f.has(a) and a not in reproduces)
    observe = f.get("observe", _anomaly_list, frozenset()) | default_observe
    limits = {a: f.get(a, NON_NEGATIVE, 0) for a in ANOMALIES}
    for anomaly in observe:
        if f.has(anomaly):
            raise error(f.at(anomaly), f.sub(anomaly),
                        f"{anomaly} is also in observe (observed anomalies are not judged)")
    injection_hit = f.get("injection_hit", boolean, None)
    if injection_hit is not None and not armed:
        raise error(f.at("injection_hit"), f.sub("injection_hit"),
                    "the case has no inject step to judge")
    for anomaly in reproduces:
        if anomaly in observe:
            raise error(f.at("reproduces"), f.sub("reproduces"),
                        f"{anomaly} is observed, not judged: it cannot be reproduced")
    verdict = f.get("verdict", choice(*VERDICTS), "fail" if reproduces else "pass")
    if reproduces and verdict != "fail":
        raise error(f.at("verdict"), f.sub("verdict"),
                    "a case that reproduces an anomaly expects verdict fail")
    if verdict == "fail" and not reproduces:
        # else any failure, or none of the bug's, would count as the bug reproduced
        raise error(f.at("verdict"), f.sub("verdict"),
                    "verdict fail needs reproduces: the anomalies the bug makes (expected e.g. "
                    "reproduces: [lost-write], which implies verdict fail)")
    return Expect(anomalies=MappingProxyType({a: n for a, n in limits.items() if a not in observe}),
                  observe=observe, min_acked=f.get("min_acked", NON_NEGATIVE, 1),
                  injection_hit=injection_hit, verdict=verdict, reproduces=reproduces,
                  max_unavailable_s=f.get("max_unavailable", duration, None),
                  p99_latency_ms=f.get("p99_latency_ms", number, None),
                  p99_e2e_latency_ms=f.get("p99_e2e_latency_ms", number, None),
                  min_aborted_seen=f.get("min_aborted_seen", NON_NEGATIVE, None),
                  scenario=scenario,
                  repairs=f.get("repairs", NON_NEGATIVE, None))


def _anomaly_list(node: Node, field: str) -> frozenset[str]:
    if not isinstance(node.value, list):
        raise error(node, field, f"expected a list of anomaly names, got {show(node.value)}")
    read = choice(*ANOMALIES, kind="anomaly")
    return frozenset(read(item, f"{field}[{i}]") for i, item in enumerate(node.value))
