"""``await`` steps, looked up by condition in :data:`AWAITS`.

Each waits (within the case's time budget) until its condition holds and returns
what it saw; a timeout names what was awaited and shows the nodes' last log lines.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..case import AwaitArgs
from ..errors import HarnessError, InjectError
from ..systems.base import Checkpoints, Controlled, InSyncReplicas, LeaderRef, LeaderServes
from ..wait import wait_until
from .context import RunContext
from .recovery import wait_unsticking

__all__ = ["AWAITS", "await_condition", "leader_now"]

log = logging.getLogger(__name__)

Params = dict[str, Any]


def leader_now(ctx: RunContext, partition: int) -> LeaderRef:
    """The partition's leader as the system names it (None when it cannot be read);
    the leader watch is told of it."""
    try:
        leader = ctx.the_system.leader_of(ctx.topic, partition)
    except HarnessError:
        return None
    ctx.the_watch.observe(partition, leader.node)
    return leader.ref


def await_condition(ctx: RunContext, args: AwaitArgs) -> dict[str, Any]:
    cond, params = args.condition, dict(args.params)
    if cond == "time":
        time.sleep(ctx.remaining(float(params["seconds"])))
        return {"seconds": params["seconds"]}
    wait = AWAITS.get(cond)
    if wait is None:
        raise HarnessError(f"unknown await condition {cond!r}")
    timeout = ctx.remaining(args.timeout_s)
    t0 = time.monotonic()
    result = wait(ctx, params, timeout)
    if cond in _TIMED:
        result["waited_s"] = round(time.monotonic() - t0, 3)
        log.info("await %s: %s", cond, result)
    return result


def _workload(ctx: RunContext, params: Params, timeout: float) -> dict[str, Any]:
    return ctx.the_workloads.wait(str(params["name"]), timeout)


def _injection(ctx: RunContext, params: Params, timeout: float) -> dict[str, Any]:
    if ctx.injector is None:
        raise InjectError("no injection point is armed")
    return ctx.injector.await_hit(str(params["point"]), timeout)


def _leader_change(ctx: RunContext, params: Params, timeout: float) -> dict[str, Any]:
    p = int(params.get("partition", 0))
    before = ctx.leader_before_fault.get(p, leader_now(ctx, p))
    now = wait_until(lambda: (v := leader_now(ctx, p)) not in (None, -1, before) and v,
                     timeout=timeout, what=f"partition {p}: a leader other than {before}",
                     logs=ctx.the_cluster.node_logs)
    return {"from": before, "to": now}


def _controller_change(ctx: RunContext, params: Params, timeout: float) -> dict[str, Any]:
    """Another node is the controller than before the last fault step (or than when the
    await began); the detail gives both and their epochs (a new one counts one more)."""
    system = ctx.the_system
    if not isinstance(system, Controlled):
        raise HarnessError(f"{system.name} has no elected controller to await")
    before = ctx.controller_before_fault or system.controller_now()
    def moved() -> tuple[str, int | None] | None:
        now = system.controller_now()
        return now if now[0] != before[0] else None

    now = wait_until(moved, timeout=timeout, what=f"a controller other than {before[0]}",
                     logs=ctx.the_cluster.node_logs)
    assert now is not None  # wait_until returns a truthy value
    return {"from": before[0], "from_epoch": before[1], "to": now[0], "to_epoch": now[1]}


def _no_leader(ctx: RunContext, params: Params, timeout: float) -> dict[str, Any]:
    p = int(params.get("partition", 0))
    wait_until(lambda: leader_now(ctx, p) in (-1, None), timeout=timeout,
               what=f"partition {p}: no leader", logs=ctx.the_cluster.node_logs)
    return {}


def _leader_is(ctx: RunContext, params: Params, timeout: float) -> dict[str, Any]:
    p = int(params.get("partition", 0))
    target = ctx.the_resolver.resolve(params["target"])
    want = ctx.the_system.leader_ref(target)
    system = ctx.the_system
    # named leader (the controller's record), then serving as one (the node's own answer)
    serves = system.serves_as_leader if isinstance(system, LeaderServes) else None
    named_at: list[float] = []

    def leading() -> bool:
        if leader_now(ctx, p) != want:
            return False
        if not named_at:
            named_at.append(time.monotonic())
        return serves is None or serves(target, ctx.topic, p)

    # with the stuck-controller remedy, as ``isr_size``: a controller on the restarted
    # broker's old epoch names it leader in ZooKeeper, and the broker rejects the
    # LeaderAndIsr that would make it lead (seen in CI on 3.9.2: the other replica fetched
    # from it for a minute and got UNKNOWN_TOPIC_ID)
    wait_unsticking(ctx, leading, timeout=timeout, what=f"partition {p}: {target.name} leading")
    out: dict[str, Any] = {"leader": target.name}
    if serves is not None and named_at:
        out["serving_after_s"] = round(time.monotonic() - named_at[0], 3)
    return out


def _isr_size(ctx: RunContext, params: Params, timeout: float) -> dict[str, Any]:
    p, size = int(params.get("partition", 0)), int(params["size"])
    system = ctx.the_system
    if not isinstance(system, InSyncReplicas):
        raise HarnessError(f"{system.name} has no in-sync replica set to await")
    wait_unsticking(ctx, lambda: system.isr_size(ctx.topic, p) == size, timeout=timeout,
                    what=f"partition {p}: an ISR of {size}")
    return {"size": size}


def _log(ctx: RunContext, params: Params, timeout: float) -> dict[str, Any]:
    node = ctx.the_resolver.resolve(params["target"])
    # {topic}: the run's topic (its local name), which a case file cannot know
    pattern = re.compile(str(params["pattern"]).replace("{topic}", re.escape(ctx.topic.rsplit("/", 1)[-1])))
    since = ctx.started_wall
    line = wait_until(lambda: next((ln for ln in node.container.logs(since=since).splitlines()
                                    if pattern.search(ln)), None),
                      timeout=timeout, what=f"{node.name} to log /{pattern.pattern}/",
                      logs=lambda: ctx.the_cluster.node_logs([node.name]))
    return {"node": node.name, "line": str(line)[:300]}


@dataclass(frozen=True)
class _Checkpointed:
    """One read of a checkpoint file: true once it holds ``at_least`` or more."""

    offset: int | None
    at_least: int

    def __bool__(self) -> bool:
        return self.offset is not None and self.offset >= self.at_least

    def __str__(self) -> str:
        return "the partition not in the file" if self.offset is None else f"offset {self.offset}"


def _checkpoint(ctx: RunContext, params: Params, timeout: float) -> dict[str, Any]:
    """The node's checkpoint file of ``kind`` holds the partition at ``at_least`` or more
    (read from the node's files: what a crash of it would keep)."""
    system = ctx.the_system
    if not isinstance(system, Checkpoints):
        raise HarnessError(f"{system.name} has no checkpoint files to await")
    node = ctx.the_resolver.resolve(params["target"])
    p, kind, at_least = int(params.get("partition", 0)), str(params["kind"]), int(params["at_least"])
    read = wait_until(
        lambda: _Checkpointed(system.checkpointed(node, kind).get((ctx.topic, p)), at_least),
        timeout=timeout, what=f"{node.name}'s {kind} checkpoint of partition {p} at {at_least} "
                              "or more", logs=lambda: ctx.the_cluster.node_logs([node.name]))
    return {"node": node.name, "kind": kind, "offset": read.offset}


#: condition -> wait(ctx, params, timeout) -> what was seen (``time`` is handled first)
AWAITS: dict[str, Callable[[RunContext, Params, float], dict[str, Any]]] = {
    "workload": _workload,
    "injection": _injection,
    "leader_change": _leader_change,
    "no_leader": _no_leader,
    "leader_is": _leader_is,
    "isr_size": _isr_size,
    "log": _log,
    "controller_change": _controller_change,
    "checkpoint": _checkpoint,
}
#: the conditions whose result carries the time waited (a leader or ISR wait, not a sleep)
_TIMED = frozenset({"leader_change", "no_leader", "leader_is", "isr_size", "log",
                    "controller_change", "checkpoint"})
