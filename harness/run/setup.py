"""Set-up and teardown of a run: the cluster (new or reused), the topic, the watchers.

:func:`setup` registers every cleanup it makes necessary on the run's stack as it
goes (teardown of a cluster it created, evidence collection, healing, stopping the
workloads), so an error or Ctrl-C at any point unwinds exactly what was done.
"""

from __future__ import annotations

import logging
import time

from ..errors import WaitTimeout
from .context import RunContext

__all__ = ["REUSE_READY_S", "setup"]

log = logging.getLogger(__name__)

#: How long a reused cluster may take to look healthy before it is recreated.
REUSE_READY_S = 45.0
#: How long a new cluster may take to become ready.
READY_S = 240.0


def setup(ctx: RunContext) -> None:
    """Brings the cluster up (or reuses it), creates the topic, starts the leader watch."""
    from ..backend.cluster import Cluster, remove_leftovers
    from ..backend.docker import Engine
    from ..faults import Nemesis
    from ..systems import open_system
    from ..systems.base import DiskFull, StartGate
    from .recovery import collect_once, heal_quietly, wait_ready_remedied
    from .roles import LeaderWatch, Resolver
    from .workloads import Workloads, output_topics

    case = ctx.case
    engine = Engine()
    for name in remove_leftovers(engine):
        log.info("removed leftovers of a dead run: cluster %s", name)
    if ctx.hosts is not None:
        from ..backend.remote import RemoteCluster

        cluster: Cluster = RemoteCluster.from_nodes(engine, ctx.hosts, case.version, case.broker_config,
                                                    owner=ctx.owner, clock=case.clock)
        log.info("the nodes are hosts: %s", ctx.hosts.path)
        ctx.events.mark("nodes on hosts", {"file": str(ctx.hosts.path),
                                           "hosts": {n.name: n.where for n in ctx.hosts.nodes}})
    else:
        cluster = Cluster.named(engine, case.cluster, case.version, case.broker_config, owner=ctx.owner,
                                disk=case.disk, clock=case.clock)
    ctx.cluster = cluster
    log.info("cluster %s (%s %s)", case.cluster, case.system, cluster.version)
    reused = cluster.up()
    system = ctx.system = open_system(cluster)
    t0 = time.monotonic()
    if reused:
        try:  # reuse is an optimisation: a cluster an earlier run left unhealthy is replaced
            system.wait_ready(timeout=ctx.remaining(REUSE_READY_S))
        except WaitTimeout as exc:
            log.info("the reused cluster is not healthy (%s); recreating it",
                     str(exc).splitlines()[0])
            cluster.up(reuse=False)
            reused = False
    if reused and not _reuse_healthy(ctx):
        reused = False
    ctx.kept = reused or ctx.keep_cluster
    if not ctx.kept:
        ctx.stack.callback(_teardown, ctx)
    # with the system's readiness remedy: on a fresh Pulsar cluster whose bookies run
    # AutoRecovery, one of them may exit at start (BadVersion on /ledgers/underreplication/
    # LAYOUT, which they all initialize at once: seen on 3.2.0); it is started again, a repair
    wait_ready_remedied(ctx, ctx.remaining(READY_S),
                        after="setup: not ready {s:g} s after the cluster started")
    log.info("cluster ready (%.1fs)", time.monotonic() - t0)
    ctx.stack.callback(collect_once, ctx)
    ctx.nemesis = Nemesis(cluster, ctx.events)
    if isinstance(system, StartGate):
        ctx.nemesis.before_start = system.before_start
    if isinstance(system, DiskFull):
        ctx.nemesis.set_disk_full = system.set_disk_full
    ctx.stack.callback(heal_quietly, ctx)
    for mark in system.create_case_topic(ctx.topic, case.topic):
        ctx.events.mark(mark.label, mark.detail)
        log.info("topic %s: %s %s", ctx.topic, mark.label, mark.detail)
    log.info("topic %s: %d partition(s)", ctx.topic, case.topic.partitions)
    for topic in output_topics(case, ctx.topic):  # a copier's, like the case topic
        system.create_case_topic(topic, case.topic)
        log.info("topic %s: a copier's output", topic)
    ctx.watch = LeaderWatch(system, ctx.topic, case.topic.partitions, ctx.events).start()
    ctx.stack.callback(ctx.watch.stop)
    ctx.resolver = Resolver(system, ctx.topic, ctx.watch, down=lambda: list(ctx.the_nemesis.down),
                            held=lambda: ctx.injector.held_node() if ctx.injector else None)
    ctx.workloads = Workloads(case, ctx.run_dir, ctx.topic, system)
    ctx.stack.callback(_stop_workloads_quietly, ctx)


def _reuse_healthy(ctx: RunContext) -> bool:
    """A reused cluster must be fit for this case (:func:`~harness.systems.fit_for_reuse`);
    False when it had to be recreated. A repair is recorded as the run's upkeep (shown with
    its repairs, never judged: it mends what an earlier run left)."""
    from ..systems import fit_for_reuse
    from .recovery import record_repair, repair_name

    def repaired(problem: str, done: str, kept: bool) -> None:
        outcome = "" if kept else ", which did not help: the cluster is recreated"
        record_repair(ctx, f"reused cluster: {repair_name(done)}" + ("" if kept else ", then recreated"),
                      f"the reused cluster was unfit ({problem}); before the case the harness "
                      f"{done}{outcome}", "reused cluster repaired",
                      {"problem": problem, "action": done, "recreated": not kept}, upkeep=True)

    ctx.the_system.wait_ready(timeout=ctx.remaining(REUSE_READY_S))
    return fit_for_reuse(ctx.the_system, ctx.the_cluster, ctx.remaining, repaired)


def _stop_workloads_quietly(ctx: RunContext) -> None:
    for problem in ctx.the_workloads.stop_all(timeout_s=60):
        log.warning("stopping workloads: %s", problem)


def _teardown(ctx: RunContext) -> None:
    log.info("removing cluster %s", ctx.case.cluster)
    ctx.the_cluster.down()
