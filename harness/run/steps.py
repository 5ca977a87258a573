"""The case's steps, run in order; each kind of step is looked up in :data:`STEPS`.

A step's handler gets the run context and the step's validated arguments, does
the step, and returns its detail (recorded in the timeline and ``result.json``).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..backend.cluster import Node
from ..case import (
    AwaitArgs,
    ChaosArgs,
    ConsumeArgs,
    CopyArgs,
    FaultArgs,
    HealArgs,
    InjectArgs,
    ProduceArgs,
    QuorumArgs,
    ReassignArgs,
    ReleaseArgs,
    SplitArgs,
    Step,
    SubscribeArgs,
    UnloadArgs,
)
from ..errors import HarnessError
from ..faults import ClockPlan, Effects
from ..result import StepRecord
from ..systems.base import (
    Controlled,
    Decommissionable,
    Joinable,
    PowerLoss,
    QuorumChangeable,
    Reassignable,
    Removable,
    Replaceable,
    Splittable,
    Subscribable,
    Unloadable,
)
from .awaits import await_condition, leader_now
from .context import RunContext

__all__ = ["STEPS", "run_steps"]

log = logging.getLogger(__name__)


def run_steps(ctx: RunContext) -> None:
    """Runs every step; an error names the case file's line and the step."""
    for step in ctx.case.steps:
        ctx.remaining(1)
        record = StepRecord(step.index, step.action, step.label, step.line, time.time())
        ctx.steps.append(record)
        ctx.events.record("step", index=step.index, name=step.label, status="start")
        t0 = time.monotonic()
        try:
            detail = _run_step(ctx, step)
        except HarnessError as exc:
            record.status, record.error = "error", str(exc)
            record.duration_s = time.monotonic() - t0
            ctx.events.record("step", index=step.index, name=step.label, status="error",
                              error=str(exc))
            raise HarnessError(f"{ctx.case.path or ctx.case.name}:{step.line}: "
                               f"{step.label}: {exc}") from exc
        record.status, record.detail = "done", detail
        record.duration_s = round(time.monotonic() - t0, 3)
        ctx.events.record("step", index=step.index, name=step.label, status="done",
                          detail=detail)


def _run_step(ctx: RunContext, step: Step) -> Any:
    args = step.args
    if not (isinstance(args, ProduceArgs) and args.driver == "java" and args.background):
        ctx.the_workloads.release()  # connected Java producers start sending together now
    handler = STEPS.get(type(args))
    if handler is None:
        raise HarnessError(f"no runner for step {step.action!r}")
    return handler(ctx, step.action, args)


def _workload(ctx: RunContext, action: str, args: Any) -> Any:
    return ctx.the_workloads.start(args)


def _await(ctx: RunContext, action: str, args: Any) -> Any:
    return await_condition(ctx, args)


def _fault(ctx: RunContext, action: str, args: Any) -> dict[str, Any]:
    assert isinstance(args, FaultArgs)
    system, watch = ctx.the_system, ctx.the_watch
    if args.target.role == "controller" and isinstance(system, Controlled):
        ctx.controller_before_fault = system.controller_now()  # for await controller_change
    node = ctx.the_resolver.resolve(args.target)
    p = args.target.partition
    if args.target.node is None and args.target.role == "leader":
        # just resolved: asking again would delay a kill that must land while a point holds
        ctx.leader_before_fault[p] = system.leader_ref(node)
        watch.observe(p, node.name)
    elif ctx.injector is not None and (last := watch.last_leader(p)) is not None:
        # a point is armed and may be holding a thread: the kill must land at once, and
        # the leader watch (polled every second) knows the leader well enough
        ctx.leader_before_fault[p] = system.leader_ref(last)
    else:
        ctx.leader_before_fault[p] = leader_now(ctx, p)
    peers = [ctx.the_resolver.resolve(args.peer)] if args.peer else None
    apply_fault(ctx, action, node, str(args.target), peers=peers, direction=args.direction,
                effects=args.effects, disk=args.disk, clock=args.clock)
    if ctx.injector is not None:
        ctx.injector.note_fault(action, node)
    return {"node": node.name, "role": str(args.target)}


def apply_fault(ctx: RunContext, action: str, node: Node, role: str, *,
                peers: list[Node] | None = None, direction: str = "both",
                effects: Mapping[str, float] | None = None, disk: Mapping[str, Any] | None = None,
                clock: Mapping[str, float] | None = None) -> None:
    """Applies fault ``action`` to ``node`` (a ``powerloss`` cuts the case's topic only, or on
    a lazy disk every file of the node, ``disk["torn"]``: its last write torn; a ``partition``
    cuts ``node`` off from ``peers``, None: from every other node; a ``degrade`` applies
    ``effects`` between them; a ``corrupt`` changes a file of its lazy disk as ``disk`` says)
    and makes it the ``last-target``."""
    params: dict[str, Any] = {}
    disk = dict(disk or {})
    if action == "remove":
        system = ctx.the_system
        if not isinstance(system, Removable) or not system.removable(node):
            raise HarnessError(f"remove: {node.name} cannot be removed for good (only a Pulsar bookie)")
        system.removed.add(node.name)
    if action == "powerloss" and node.disk is not None:
        params["lose"] = functools.partial(_lose_lazy, torn=bool(disk.get("torn")))
    elif action == "powerloss":
        if not isinstance(system := ctx.the_system, PowerLoss):
            raise HarnessError(f"{system.name} has no power-loss fault")
        params["lose"] = functools.partial(system.lose_unflushed, topics=(ctx.topic,))
    if action == "powerloss" and ctx.injector is not None:  # a point's state at the kill: before the cut
        params["lose"] = functools.partial(ctx.injector.before_cut, params["lose"])
    if action == "corrupt":
        params.update(disk, prefer=ctx.topic)
    if action == "replace":
        system = _able(ctx, Replaceable, "no node that can be replaced with an empty disk")
        params["forget"] = system.forget_node
    if action == "join":
        params["wait"] = _able(ctx, Joinable, "no spare node that can join").joined
    if action == "decommission":
        retiring = _able(ctx, Decommissionable, "no node that can be decommissioned")
        params["drain"], params["retire"] = retiring.drain, retiring.retire
    if action in ("partition", "degrade"):
        params["peers"], params["direction"] = peers, direction
    if action == "degrade":
        params["effects"] = Effects(**dict(effects or {}))
    if action == "clock":
        params["plan"] = ClockPlan(**dict(clock or {}))
    ctx.the_nemesis.apply(action, node, role=role, **params)
    ctx.the_resolver.last_target = node.name
    log.info("%s %s (%s)", action, node.name, role)


def _lose_lazy(node: Node, torn: bool) -> dict[str, Any]:
    """A power loss of ``node``'s lazy disk: what each file lost, and the torn write."""
    assert node.disk is not None
    return node.disk.lose(torn=torn)


def _chaos(ctx: RunContext, action: str, args: Any) -> dict[str, Any]:
    assert isinstance(args, ChaosArgs)
    from .chaos import run_chaos

    return run_chaos(ctx, ctx.steps[-1].index, args)  # run_steps recorded this step last


def _heal(ctx: RunContext, action: str, args: Any) -> dict[str, Any]:
    assert isinstance(args, HealArgs)
    node = ctx.the_resolver.resolve(args.target) if args.target else None
    ctx.the_nemesis.heal(node)
    log.info("%s: healed %s", action, node.name if node else "everything")
    return {"node": node.name if node else None}


def _inject(ctx: RunContext, action: str, args: Any) -> dict[str, Any]:
    assert isinstance(args, InjectArgs)
    from ..inject import injector_for

    if ctx.injector is None:
        ctx.injector = injector_for(ctx.the_system, ctx.topic, ctx.run_dir, ctx.events)
        ctx.stack.callback(ctx.injector.disarm_all)
    return ctx.injector.arm(args, ctx.the_resolver)


def _unload(ctx: RunContext, action: str, args: Any) -> dict[str, Any]:
    """Moves the partition's bundle to another broker (a graceful ownership transfer)."""
    assert isinstance(args, UnloadArgs)
    system = _able(ctx, Unloadable, "no bundles to unload")
    p = args.partition
    before = leader_now(ctx, p)
    ctx.leader_before_fault[p] = before
    dest = ctx.the_resolver.resolve(args.to) if args.to is not None else None
    t0 = time.monotonic()
    new = system.unload(ctx.topic, p, to=dest, timeout=ctx.remaining(90))
    detail = {"partition": p, "from": before, "to": new.name,
              "seconds": round(time.monotonic() - t0, 3)}
    ctx.events.record("fault", action="unload", node=new.name, role="bundle", detail=detail)
    ctx.the_watch.observe(p, new.name)
    if before is not None:
        ctx.the_resolver.last_target = str(before)
    log.info("unload partition %d: %s -> %s (%ss)", p, before, new.name, detail["seconds"])
    return detail


def _able(ctx: RunContext, kind: Any, lacks: str) -> Any:
    """The run's system when it is a ``kind`` (a runtime-checkable protocol of
    harness.systems.base), or one error saying what it lacks."""
    system = ctx.the_system
    if not isinstance(system, kind):
        raise HarnessError(f"{system.name} has {lacks}")
    return system


def _reassign(ctx: RunContext, action: str, args: Any) -> dict[str, Any]:
    """Moves the partition's replicas to other brokers (Kafka's reassignment) and waits until
    it is complete."""
    assert isinstance(args, ReassignArgs)
    system = _able(ctx, Reassignable, "no partition reassignment")
    nodes = [ctx.the_resolver.resolve(sel) for sel in args.to]
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise HarnessError(f"reassign: the brokers {', '.join(map(str, args.to))} name {', '.join(names)}: "
                           "a broker twice")
    detail = system.reassign(ctx.topic, args.partition, nodes, timeout=ctx.remaining(args.timeout_s))
    ctx.events.record("fault", action="reassign", node=nodes[0].name, role="replicas", detail=detail)
    log.info("reassign partition %d: %s -> %s (%ss)", args.partition, detail["replicas_before"],
             detail["replicas"], detail["seconds"])
    return detail


def _quorum(ctx: RunContext, action: str, args: Any) -> dict[str, Any]:
    """One controller in or out of a dynamic KRaft quorum; waits for the new voters."""
    assert isinstance(args, QuorumArgs)
    system = _able(ctx, QuorumChangeable, "no controller quorum whose voters can change")
    add = ctx.the_resolver.resolve(args.add) if args.add is not None else None
    remove = ctx.the_resolver.resolve(args.remove) if args.remove is not None else None
    detail = system.change_voters(add=add, remove=remove, timeout=ctx.remaining(args.timeout_s))
    ctx.events.record("fault", action="quorum", node=detail["node"], role=detail["action"], detail=detail)
    log.info("quorum %s %s: voters %s -> %s (%ss)", detail["action"], detail["node"], detail["voters_before"],
             detail["voters"], detail["seconds"])
    return detail


def _split(ctx: RunContext, action: str, args: Any) -> dict[str, Any]:
    """Splits the partition's namespace bundle (both halves unloaded) and waits for its owner."""
    assert isinstance(args, SplitArgs)
    system = _able(ctx, Splittable, "no bundles to split")
    detail = system.split_bundle(ctx.topic, args.partition, timeout=ctx.remaining(args.timeout_s))
    ctx.events.record("fault", action="split", node=detail["owner"], role="bundle", detail=detail)
    ctx.the_watch.observe(args.partition, detail["owner"])
    log.info("split bundle %s -> %s, owner %s (%ss)", detail["bundle_before"], detail["bundle"],
             detail["owner"], detail["seconds"])
    return detail


def _subscribe(ctx: RunContext, action: str, args: Any) -> dict[str, Any]:
    """Creates a durable subscription with no consumer (the admin API); records its cursor."""
    assert isinstance(args, SubscribeArgs)
    system = _able(ctx, Subscribable, "no admin-made subscriptions")
    cursors = system.create_subscription(ctx.topic, args.group, args.position)
    log.info("subscription %s created at %s: %s", args.group, args.position, cursors)
    return {"group": args.group, "position": args.position, "cursors": cursors}


def _release(ctx: RunContext, action: str, args: Any) -> Any:
    assert isinstance(args, ReleaseArgs)
    return ctx.the_workloads.release_held(args.name)


#: step arguments -> handler(ctx, action, args) -> the step's detail
STEPS: dict[type, Callable[[RunContext, str, Any], Any]] = {
    ProduceArgs: _workload,
    ConsumeArgs: _workload,
    CopyArgs: _workload,
    AwaitArgs: _await,
    FaultArgs: _fault,
    HealArgs: _heal,
    InjectArgs: _inject,
    UnloadArgs: _unload,
    ReassignArgs: _reassign,
    QuorumArgs: _quorum,
    SplitArgs: _split,
    SubscribeArgs: _subscribe,
    ChaosArgs: _chaos,
    ReleaseArgs: _release,
}
