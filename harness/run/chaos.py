"""The ``chaos`` step: random faults from a seed, one at a time, each healed before the next.

The schedule is drawn in full before the first fault (:func:`plan`): when each fault
starts (seconds after the step began), which fault, on which selector, for how long, and
for a fault with parameters what it does (:func:`draw_params`: a degraded link's effects, a
clock's jump or strobe). The same seed, duration, fault list, targets and bounds give the
same schedule, so ``harness run CASE --seed N`` replays it: the same faults on the same
roles at the same times. Which node a role names is decided when the fault starts, from
the cluster's state then, and is recorded beside the plan.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..case import ChaosArgs, Selector
from ..case.model import FAULTS, NodeGroup
from ..errors import HarnessError
from .context import RunContext
from .halts import fatal_line

__all__ = ["Planned", "draw_params", "plan", "run_chaos", "step_seed"]

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class Planned:
    """One fault of a schedule: it starts ``at_s`` after the step began, lasts ``hold_s``."""

    at_s: float
    fault: str
    target: str  # the selector as the case wrote it
    hold_s: float
    #: what the fault does, for a fault with parameters (degrade: effects; clock: the plan)
    params: dict[str, float] = field(default_factory=dict)
    #: the nodes a group target drew (empty: the target is a selector, resolved at the start)
    nodes: tuple[str, ...] = ()


def draw_params(rng: random.Random, fault: str) -> dict[str, float]:
    """A drawn fault's parameters: a ``degrade`` is one of four mixes (delay with jitter; loss;
    a rate limit; delay with duplication and reordering) toward every other node, a
    ``clock`` a jump of 30 s to 10 min either way or a strobe of 5 to 60 s every second;
    the other faults have none (and draw nothing, so schedules of those alone stay as
    they were)."""
    if fault == "degrade":
        mix = rng.randrange(4)
        if mix == 0:
            return {"delay_ms": round(rng.uniform(50, 300)), "jitter_ms": round(rng.uniform(0, 100))}
        if mix == 1:
            return {"loss_pct": round(rng.uniform(5, 30), 1)}
        if mix == 2:
            return {"rate_bps": rng.choice((1e6, 4e6, 16e6))}
        return {"delay_ms": round(rng.uniform(20, 150)), "duplicate_pct": 5.0, "reorder_pct": 10.0}
    if fault == "clock":
        sign = rng.choice((-1, 1))
        if rng.random() < 0.5:
            return {"jump_s": sign * round(rng.uniform(30, 600))}
        return {"strobe_s": sign * round(rng.uniform(5, 60)), "period_s": 1.0}
    return {}

def step_seed(run_seed: int, step_index: int) -> int:
    """The seed of the chaos step at ``step_index`` of a run seeded ``run_seed`` (a case's
    two chaos steps draw different schedules; each is fixed by the run's seed)."""
    return random.Random(f"{run_seed}:{step_index}").getrandbits(53)


def plan(seed: int, duration_s: float, faults: tuple[str, ...], targets: tuple[str, ...],
         gap_s: tuple[float, float], hold_s: tuple[float, float],
         groups: Mapping[str, NodeGroup] | None = None, order: str = "random") -> list[Planned]:
    """The schedule: a gap, a fault held for a while, a gap, ... until ``duration_s``. A
    target that names a group (``groups``) draws its nodes (sorted) after the fault's
    parameters; the others draw nothing more, so their schedules stay as they were.
    ``order`` ``rotate``: the faults in turn; times, targets and parameters are still drawn
    from the seed."""
    rng = random.Random(seed)
    groups = groups or {}
    out: list[Planned] = []
    t = 0.0
    while True:
        t += rng.uniform(*gap_s)
        hold = rng.uniform(*hold_s)
        if t + hold > duration_s:
            return out
        fault, target = rng.choice(faults), rng.choice(targets)
        if order == "rotate":
            fault = faults[len(out) % len(faults)]
        params = draw_params(rng, fault)
        group = groups.get(target)
        nodes = tuple(sorted(rng.sample(group.nodes, group.count()))) if group is not None else ()
        out.append(Planned(round(t, 3), fault, target, round(hold, 3), params, nodes))
        t += hold


def run_chaos(ctx: RunContext, index: int, args: ChaosArgs) -> dict[str, Any]:
    """Runs the schedule; every fault is healed before the next, and when the step ends
    (also on an error: the run's cleanup heals everything too)."""
    seed = args.seed if args.seed is not None else step_seed(ctx.seed, index)
    targets = {str(t): t for t in args.targets}
    groups = {name: t for name, t in targets.items() if isinstance(t, NodeGroup)}
    schedule = plan(seed, args.duration_s, args.faults, tuple(targets), args.gap_s, args.hold_s, groups,
                    args.order)
    ctx.events.record("chaos", seed=seed, schedule=[asdict(p) for p in schedule])
    log.info("chaos: seed %d, %d faults over %gs", seed, len(schedule), args.duration_s)
    t0 = time.monotonic()
    done: list[dict[str, Any]] = []
    for p in schedule:
        _sleep_until(ctx, t0 + p.at_s)
        entry: dict[str, Any] = {**asdict(p), "started_s": round(time.monotonic() - t0, 3)}
        hit: list[str] = []
        try:
            for aim in p.nodes or (targets[p.target],):
                hit.append(_apply(ctx, p.fault, aim, p.params))
        except HarnessError as exc:  # e.g. no leader to aim at while the cluster is in flux
            entry["skipped"] = str(exc)[:300]
            log.info("chaos: %s on %s skipped: %s", p.fault, p.target, exc)
            for name in hit:  # a group's nodes already faulted are healed
                _heal(ctx, p.fault, name)
            done.append(entry)
            continue
        entry["node"] = ", ".join(hit)
        entry["nodes"] = hit
        _sleep_until(ctx, time.monotonic() + p.hold_s)
        for name in hit:
            _heal(ctx, p.fault, name)
        entry["healed_s"] = round(time.monotonic() - t0, 3)
        done.append(entry)
    _sleep_until(ctx, t0 + args.duration_s)
    applied = sum(1 for e in done if "node" in e)
    out = {"seed": seed, "planned": len(schedule), "applied": applied,
           "skipped": len(done) - applied, "schedule": done}
    restarted = _restart_exited(ctx, sorted({n for e in done for n in e.get("nodes", ())}))
    if restarted:
        out["restarted"] = restarted
    return out


def _restart_exited(ctx: RunContext, faulted: list[str]) -> list[dict[str, str]]:
    """Nodes the step faulted that exited on their own after it healed them (a Kafka
    broker started while its old ZooKeeper session still holds its registration stops
    itself: "Fatal error during KafkaServer startup"): started once more, as a supervisor
    would, and recorded (the step's detail, the story, the timeline) with their last
    ERROR line. The schedule went on without them."""
    out = []
    for name in faulted:
        node = ctx.the_cluster.node(name)
        if name in ctx.the_nemesis.down or node.container.status != "exited":
            continue
        fatal = fatal_line(ctx, [name])
        note = (f"chaos: {name} exited on its own after the step healed it"
                f"{f' ({fatal})' if fatal else ''}; the harness started it again when the step ended")
        ctx.recovery.observations.append(note)
        ctx.events.mark("node exited after a chaos heal", {"node": name, "fatal": fatal})
        log.warning("%s", note)
        ctx.the_nemesis.apply("start", node, role="chaos:restart")
        out.append({"node": name, "fatal": fatal})
    return out


def _sleep_until(ctx: RunContext, deadline: float) -> None:
    left = deadline - time.monotonic()
    if left > 0:
        time.sleep(min(left, ctx.remaining(left)))


def _apply(ctx: RunContext, fault: str, target: Selector | NodeGroup | str, params: dict[str, float]) -> str:
    from .steps import apply_fault

    if isinstance(target, NodeGroup):
        raise HarnessError(f"chaos: the group {target} drew no nodes")  # plan() draws them
    node = ctx.the_cluster.node(target) if isinstance(target, str) else ctx.the_resolver.resolve(target)
    apply_fault(ctx, fault, node, f"chaos:{target}", effects=params if fault == "degrade" else None,
                clock=params if fault == "clock" else None)
    return node.name


def _heal(ctx: RunContext, fault: str, name: str) -> None:
    """Undoes ``fault`` on node ``name`` with the fault its descriptor names."""
    node = ctx.the_cluster.node(name)
    heal = FAULTS[fault].healed_by
    if heal == "heal":
        ctx.the_nemesis.heal(node)
    elif heal is not None:
        ctx.the_nemesis.apply(heal, node, role="chaos:heal")
