"""System adapters (Kafka, Pulsar) over a running cluster: readiness, topics, roles."""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from ..backend.cluster import Cluster
    from .kafka import KafkaSystem
    from .pulsar import PulsarSystem

__all__ = ["open_system"]


def open_system(cluster: Cluster) -> Union[KafkaSystem, PulsarSystem]:
    """The adapter for the cluster's system."""
    if cluster.spec.system == "kafka":
        from .kafka import KafkaSystem

        return KafkaSystem(cluster)
    from .pulsar import PulsarSystem

    return PulsarSystem(cluster)
