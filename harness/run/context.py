"""The state one run carries through its phases: case, deadline, timeline, cleanup stack.

Phases (:mod:`.setup`, :mod:`.steps`, :mod:`.awaits`, :mod:`.recovery`) are functions
of a :class:`RunContext`; what set-up creates (cluster, system, nemesis, watch,
resolver, workloads) is filled in by :func:`harness.run.setup.setup` and read by the
later phases. Cleanup is held by ``stack`` (an ``ExitStack``), never remembered.
"""

from __future__ import annotations

import secrets
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import WaitTimeout
from ..result import Recovery, StepRecord
from .events import RunEvents

if TYPE_CHECKING:
    from ..backend.cluster import Cluster
    from ..case import Case
    from ..clusters import NodesFile
    from ..collect import Evidence
    from ..faults import Nemesis
    from ..inject import RuleInjector
    from ..systems.base import LeaderRef, System
    from .roles import LeaderWatch, Resolver
    from .workloads import Workloads

__all__ = ["RunContext"]


@dataclass(eq=False)
class RunContext:
    """One run of one case (see :func:`harness.run.run_case`)."""

    case: Case
    run_dir: Path
    stack: ExitStack
    events: RunEvents
    keep_cluster: bool = False
    #: the owner label of a cluster this run creates (None: this process)
    owner: str | None = None
    #: the hosts that play the cluster's nodes (``harness run --nodes``; None: Docker nodes)
    hosts: NodesFile | None = None
    topic: str = ""
    #: the run's seed: each ``chaos`` step without a seed of its own draws its schedule from it
    seed: int = field(default_factory=lambda: secrets.randbits(31))
    deadline: float = 0.0
    started_wall: float = field(default_factory=time.time)
    steps: list[StepRecord] = field(default_factory=list)
    recovery: Recovery = field(default_factory=Recovery)
    #: the partition's leader just before the last fault or unload (``await leader_change``)
    leader_before_fault: dict[int, LeaderRef] = field(default_factory=dict)
    #: the controller and its epoch just before the last fault on the controller role
    controller_before_fault: tuple[str, int | None] | None = None
    #: the cluster outlives this run (reused, or kept): it is left healthy, not removed
    kept: bool = False
    recovered: bool = False
    # -- filled by set-up ----------------------------------------------------------------
    cluster: Cluster | None = None
    system: System | None = None
    nemesis: Nemesis | None = None
    watch: LeaderWatch | None = None
    resolver: Resolver | None = None
    workloads: Workloads | None = None
    injector: RuleInjector | None = None
    evidence: Evidence | None = None

    def __post_init__(self) -> None:
        if not self.deadline:
            self.deadline = time.monotonic() + self.case.timeout_s
        if not self.topic:
            self.topic = self.case.topic.qualified(
                self.case.topic.name or f"chaos-{self.run_dir.name[-4:]}-{secrets.token_hex(3)}")

    def remaining(self, want: float) -> float:
        """``want``, capped by what is left of the case's time budget."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise WaitTimeout(f"the case's time budget ({self.case.timeout_s:.0f}s) is used up")
        return min(want, left)

    # -- set-up's parts, for the phases after it -------------------------------------------
    # (each raises if set-up did not get that far: a phase bug, not a user error)
    @property
    def the_cluster(self) -> Cluster:
        assert self.cluster is not None, "set-up did not bring the cluster up"
        return self.cluster

    @property
    def the_system(self) -> System:
        assert self.system is not None, "set-up did not open the system"
        return self.system

    @property
    def the_nemesis(self) -> Nemesis:
        assert self.nemesis is not None, "set-up did not make the nemesis"
        return self.nemesis

    @property
    def the_watch(self) -> LeaderWatch:
        assert self.watch is not None, "set-up did not start the leader watch"
        return self.watch

    @property
    def the_resolver(self) -> Resolver:
        assert self.resolver is not None, "set-up did not make the resolver"
        return self.resolver

    @property
    def the_workloads(self) -> Workloads:
        assert self.workloads is not None, "set-up did not make the workloads"
        return self.workloads
