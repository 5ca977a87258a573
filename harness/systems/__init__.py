"""System adapters (Kafka, Pulsar) over a running cluster: readiness, topics, roles."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    from ..backend.cluster import Cluster
    from .kafka import KafkaSystem
    from .pulsar import PulsarSystem

__all__ = ["open_system", "fit_for_reuse"]


def open_system(cluster: Cluster) -> Union[KafkaSystem, PulsarSystem]:
    """The adapter for the cluster's system."""
    if cluster.spec.system == "kafka":
        from .kafka import KafkaSystem

        return KafkaSystem(cluster)
    from .pulsar import PulsarSystem

    return PulsarSystem(cluster)


def fit_for_reuse(system: Any, cluster: Any, progress: Callable[[str], None],
                  ready_s: Callable[[float], float] = lambda s: s) -> bool:
    """Makes a reused, ready cluster fit for another case; False when it had to be recreated.

    A cluster can pass its readiness check and still be unfit: earlier cases may have left
    a ZooKeeper-mode Kafka controller on stale broker epochs, or a Pulsar bookie's
    registration lock flapping (apache/pulsar#17759). The system says what is wrong
    (``reuse_problem``) and tries its remedy (``reuse_remedy``: a forced controller election,
    a restart of the flapping nodes); if that does not help, the cluster is recreated.
    ``ready_s`` caps a readiness wait (the caller's remaining time).
    """
    problem = system.reuse_problem()
    if problem is None:
        return True
    progress(f"the reused cluster is unfit ({problem}); trying the remedy")
    progress(f"remedy: {system.reuse_remedy(problem)}")
    system.wait_ready(timeout=ready_s(90))
    problem = system.reuse_problem()
    if problem is None:
        return True
    progress(f"still unfit after the remedy ({problem}); recreating the cluster")
    cluster.up(progress, reuse=False)
    return False
