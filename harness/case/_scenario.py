"""Reading ``expect.scenario``: what must have happened, and whether the steps can make it.

A fact of :data:`~.model.SCENARIO_FACTS` maps to a count (at least that many) or to
``{at_least: N, at_most: M}``. A fact the case's steps cannot produce is an error at load
time (a ``truncated`` bound without an inject step could never hold), and so is a bound
that always holds (``at least 0``): an expectation must be able to fail.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ._fields import NON_NEGATIVE, POSITIVE, Fields, error, show
from ._yaml import Node
from .model import (
    SCENARIO_FACTS,
    Bound,
    ChaosArgs,
    ConsumeArgs,
    CopyArgs,
    FaultArgs,
    InjectArgs,
    ProduceArgs,
    Step,
)

__all__ = ["read_scenario", "scenario_gaps"]


def scenario_gaps(steps: tuple[Step, ...], system: str, isolation_level: str,
                  disk: str = "plain") -> Mapping[str, str]:
    """The facts ``steps`` cannot produce, each with the reason (the rest can happen)."""
    holds = [s for s in steps if isinstance(s.args, (ProduceArgs, CopyArgs))
             and s.args.transactions is not None and s.args.transactions.hold_at is not None]
    gaps = {}
    if not (holds or (system == "pulsar" and any(isinstance(s.args, ProduceArgs) for s in steps))):
        gaps["stalls"] = "no step can stall (a produce with transactions.hold, or a Pulsar produce)"
    if not holds:
        gaps["held-transactions-aborted"] = "no produce or copy step holds a transaction (transactions.hold)"
    elif isolation_level != "read_committed":
        gaps["held-transactions-aborted"] = ("the recovery read is read_uncommitted, so it holds aborted "
                                             "records too (expected client.isolation_level: read_committed)")
    if not any(isinstance(s.args, InjectArgs) for s in steps):
        gaps["truncated"] = "no inject step (a point whose HIT line has leo_before and leo: TRUNCATE-AFTER)"
    if not any(s.action == "powerloss" and isinstance(s.args, FaultArgs)
               or isinstance(s.args, ChaosArgs) and "powerloss" in s.args.faults for s in steps):
        gaps["powerloss-cut"] = "no powerloss step, and no chaos step draws powerloss"
        gaps["powerloss-bytes"] = gaps["powerlosses"] = gaps["powerloss-cut"]
    if disk != "lazy":
        gaps["powerloss-bytes"] = "the nodes' disks are plain (a lazy disk counts what a power loss drops)"
    if not any(s.action == "clock" for s in steps):
        gaps["clock-faults"] = "no clock step"
    if not any(s.action == "degrade" and isinstance(s.args, FaultArgs)
               and {"delay_ms", "jitter_ms"} & set(s.args.effects) for s in steps):
        gaps["delayed-packets"] = "no degrade step with a delay"
    if not any(s.action == "replace" for s in steps):
        gaps["wiped-bytes"] = "no replace step"
    if not any(isinstance(s.args, ConsumeArgs) for s in steps):
        gaps["polled"] = "no consume step"
    if not any(isinstance(s.args, ChaosArgs) for s in steps):
        gaps["chaos-faults"] = "no chaos step"
    if system != "pulsar":
        gaps["lock-loops"] = "only Pulsar's metadata locks are watched for a loop (apache/pulsar#17759)"
        gaps["sessions-lost"] = "only Pulsar's metadata sessions are watched"
        gaps["fenced-writes"] = "only Pulsar's bookies fence ledgers"
        gaps["ledger-directories"] = "only Pulsar's bookies have ledger directories"
        gaps["ensemble-changes"] = "only Pulsar's ledgers have ensembles (the bookie dump)"
        gaps["fenced-rereplications"] = "only Pulsar's bookies re-replicate ledgers (AutoRecovery)"
    return MappingProxyType(gaps)


def read_scenario(node: Node, field: str, gaps: Mapping[str, str]) -> Mapping[str, Bound]:
    """``expect.scenario``: a mapping of facts to bounds, each fact one the steps can produce."""
    f = Fields(node, field, tuple(SCENARIO_FACTS), kind="scenario fact")
    bounds = {}
    for fact in SCENARIO_FACTS:
        if not f.has(fact):
            continue
        if fact in gaps:
            raise error(f.at(fact), f.sub(fact), f"cannot happen in this case: {gaps[fact]}")
        bounds[fact] = _bound(f.at(fact), f.sub(fact))
    if not bounds:
        raise error(node, field, "names no fact (expected one or more of: "
                                 f"{', '.join(SCENARIO_FACTS)})")
    return MappingProxyType(bounds)


def _bound(node: Node, field: str) -> Bound:
    """``N`` (at least N, N >= 1) or ``{at_least: N, at_most: M}`` (one or both)."""
    if isinstance(node.value, int) and not isinstance(node.value, bool):
        if node.value == 0:
            raise error(node, field, "at least 0 always holds (expected at least 1, or "
                                     "{at_most: 0}: it must not have happened)")
        return Bound(at_least=POSITIVE(node, field))
    if not isinstance(node.value, dict):
        raise error(node, field, f"expected a count (at least that many) or {{at_least: N, "
                                 f"at_most: M}}, got {show(node.value)}")
    f = Fields(node, field, ("at_least", "at_most"))
    at_least, at_most = f.get("at_least", NON_NEGATIVE, None), f.get("at_most", NON_NEGATIVE, None)
    if at_most is None and not at_least:
        raise error(node, field, "give at_most, or at_least of 1 or more (at least 0 always holds)")
    if at_least is not None and at_most is not None and at_least > at_most:
        raise error(f.at("at_most"), f.sub("at_most"), f"at_most {at_most} is below at_least {at_least}")
    return Bound(at_least=at_least or None, at_most=at_most)
