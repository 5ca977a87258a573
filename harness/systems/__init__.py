"""System adapters (Kafka, Pulsar) over a running cluster: readiness, topics, roles.

Both implement :class:`~harness.systems.base.System`; what only one of them can do
is an optional protocol in :mod:`harness.systems.base`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from .base import System

if TYPE_CHECKING:
    from ..backend.cluster import Cluster

__all__ = ["System", "fit_for_reuse", "open_system"]

log = logging.getLogger(__name__)


def open_system(cluster: Cluster) -> System:
    """The adapter for the cluster's system."""
    from .kafka import KafkaSystem
    from .pulsar import PulsarSystem

    systems: dict[str, Callable[[Cluster], System]] = {KafkaSystem.name: KafkaSystem,
                                                        PulsarSystem.name: PulsarSystem}
    return systems[cluster.spec.system](cluster)


def fit_for_reuse(system: System, cluster: Cluster,
                  ready_s: Callable[[float], float] = lambda s: s,
                  repaired: Callable[[str, str, bool], None] = lambda problem, done, kept: None) -> bool:
    """Makes a reused, ready cluster fit for another case; False when it had to be recreated.

    A cluster can pass its readiness check and still be unfit: earlier cases may have left
    a ZooKeeper-mode Kafka controller on stale broker epochs, or a Pulsar bookie's
    registration lock flapping (apache/pulsar#17759). The system says what is wrong
    (``reuse_problem``) and tries its remedy (``reuse_remedy``: a forced controller election,
    a restart of the flapping nodes); if that does not help, the cluster is recreated.
    ``ready_s`` caps a readiness wait (the caller's remaining time); ``repaired(problem, done,
    kept)`` is told of the remedy (what was wrong, what it did, whether the cluster was kept),
    so that a run records it.
    """
    problem = system.reuse_problem()
    if problem is None:
        return True
    log.info("the reused cluster is unfit (%s); trying the remedy", problem)
    done = system.reuse_remedy(problem)
    log.info("remedy: %s", done)
    system.wait_ready(timeout=ready_s(90))
    still = system.reuse_problem()
    repaired(problem, done, still is None)
    if still is None:
        return True
    log.info("still unfit after the remedy (%s); recreating the cluster", still)
    cluster.up(reuse=False)
    return False
