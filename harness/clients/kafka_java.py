"""The Java Kafka transactional producer (harness/clients/java/KafkaTxnProducer.java): the
Java client beside librdkafka, so that a case can compare the two on the same faults.

It runs with the kafka-clients jar of the ``chaos-harness/kafka`` image of
:data:`JAVA_CLIENT_VERSION` (4.1.2: a 4.x client, which uses transaction version 2,
KIP-890, with brokers that enable it), whatever the cluster's version, in a helper
container on the cluster's network (harness.clients.jvm). Its history is the contract of
harness.history, as the librdkafka workload writes it (no leader epoch on acks)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .jvm import JavaProgram
from .kafka import WorkloadStats

if TYPE_CHECKING:
    from ..backend.cluster import Cluster

__all__ = ["JAVA_CLIENT_VERSION", "KafkaJavaProducer"]

#: the image whose Java client runs the workload
JAVA_CLIENT_VERSION = "4.1.2"
#: the brokers' listener for clients on the cluster network (compose/images/kafka entrypoint)
INTERNAL_PORT = 9094


class KafkaJavaProducer(JavaProgram):
    """A transactional Java producer workload (``produce: {driver: java, transactions: ...}``)."""

    source = "KafkaTxnProducer.java"
    libs = "/opt/kafka/libs/*"

    def __init__(self, cluster: Cluster, run_dir: Path, topic: str, name: str, spec: Any,
                 ready: threading.Event | None = None) -> None:
        super().__init__(cluster, run_dir, name, ready, version=JAVA_CLIENT_VERSION)
        self.topic = topic
        self.spec = spec
        #: the workload's transactions, a harness.case.TxnArgs (set by the runner before run)
        self.transactions: Any = None

    def run(self, *, count: int | None = None, duration_s: float | None = None,
            rate: float | None = None, value_size: int = 100, keys: int | None = None,
            partition: int | None = None, stop: threading.Event | None = None,
            drain_timeout_s: float = 60.0, max_s: float = 600.0) -> WorkloadStats:
        txn = self.transactions
        if txn is None:
            raise ValueError("the Kafka Java driver runs transactional workloads only")
        brokers = ",".join(f"{n.name}:{INTERNAL_PORT}" for n in self.cluster.spec.nodes_of("broker"))
        spec = self.spec
        props = self.properties(
            name=self.name, topic=self.topic, bootstrap=brokers, **self.files(),
            transactional_id=spec.transactional_id,
            count=count if count is not None else -1,
            duration_ms=int(duration_s * 1000) if duration_s is not None else -1,
            rate=rate or 0, value_size=value_size, keys=keys or 0,
            partition=partition if partition is not None else -1, deadline_ms=int(max_s * 1000),
            # the Java client wants delivery.timeout.ms >= linger.ms + request.timeout.ms
            linger_ms=spec.linger_ms,
            request_timeout_ms=max(1, min(spec.request_timeout_ms,
                                          spec.delivery_timeout_ms - spec.linger_ms)),
            delivery_timeout_ms=spec.delivery_timeout_ms,
            transaction_timeout_ms=spec.extra.get("transaction.timeout.ms"),
            txn_size=txn.size, txn_abort=txn.abort,
            hold_at=txn.hold_at if txn.hold_at is not None else -1, hold_ms=int(txn.hold_s * 1000))
        return self.execute(props, stop=stop, max_s=max_s, drain_timeout_s=drain_timeout_s)
