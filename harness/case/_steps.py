"""Reading the ``steps`` list: workloads, faults, awaits and injections."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from harness.clusters import CORRUPTIONS, DISK_FILE_KINDS, ClusterDef
from harness.errors import CaseError
from harness.points import available_points

from ._fields import (
    NON_NEGATIVE,
    POSITIVE,
    Fields,
    boolean,
    choice,
    clip,
    duration,
    error,
    listing,
    name,
    number,
    show,
    string,
    suggest,
    unknown,
)
from ._files import MAX_RULE_BYTES, Unreadable, os_reason, read_limited
from ._specs import read_client_settings
from ._yaml import Node
from .model import (
    ACTIONS,
    CHAOS_FAULTS,
    CHAOS_ORDERS,
    CONDITIONS,
    DEFAULT_AWAIT_TIMEOUT_S,
    DEFAULT_INJECT_TIMEOUT_S,
    DIRECTIONS,
    DRIVERS,
    FAULTS,
    GROUP_SIZES,
    ISOLATION_LEVELS,
    MAX_SEED,
    NODE_FAULTS,
    PROFILES,
    SUBSCRIBE_POSITIONS,
    SUBSCRIPTION_TYPES,
    AwaitArgs,
    ChaosArgs,
    ConsumeArgs,
    CopyArgs,
    FaultArgs,
    HealArgs,
    InjectArgs,
    NodeGroup,
    ProduceArgs,
    QuorumArgs,
    ReassignArgs,
    ReleaseArgs,
    Selector,
    SplitArgs,
    Step,
    StepArgs,
    SubscribeArgs,
    TxnArgs,
    UnloadArgs,
    roles_for,
    systems_with_role,
)

__all__ = ["StepContext", "read_steps", "available_points"]

#: A point name of a user rule: it becomes part of file names inside the containers.
_POINT = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")
#: A Byteman rule: a ``RULE <name>`` line, later an ``ENDRULE`` line.
_RULE_START = re.compile(r"RULE \S")
_RULE_END = re.compile(r"ENDRULE\s*")


def _natural(text: str) -> tuple[Any, ...]:
    """Sort key putting ``C2`` before ``C10``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


@dataclass
class StepContext:
    """What reading steps needs from the rest of the case, and what earlier steps defined."""

    system: str
    cluster: ClusterDef
    version: str
    partitions: int
    replication_factor: int
    base_dir: Path  # rule files are relative to it
    case_timeout_s: float
    isolation_level: str = "read_uncommitted"  # the client section's (the recovery read's)
    disk: str = "plain"  # the case's (harness.clusters.DISKS)
    index: int = 0  # of the step being read
    workloads: dict[str, str] = field(default_factory=dict)  # name -> label of its step
    background: set[str] = field(default_factory=set)
    armed: set[str] = field(default_factory=set)  # injection points of earlier inject steps
    held: set[str] = field(default_factory=set)  # held producers no release step named yet

    def partition(self, node: Node, field: str) -> int:
        """A partition number of the case's topic."""
        number_ = NON_NEGATIVE(node, field)
        if number_ >= self.partitions:
            raise error(node, field, f"partition {number_} does not exist "
                                     f"(the topic has {self.partitions})")
        return number_

    def selector(self, node: Node, field: str) -> Selector:
        """``leader`` or ``{node: leader, partition: 1}``."""
        if isinstance(node.value, str):
            return self._resolve(string(node, field), node, field, 0)
        if not isinstance(node.value, dict):
            raise error(node, field, "expected a role or node name, or {node: ..., "
                                     f"partition: ...}}; got {show(node.value)}")
        return self.selector_in(Fields(node, field, ("node", "partition")))

    def selector_in(self, fields: Fields) -> Selector:
        """The selector written as the ``node`` and ``partition`` keys of ``fields``."""
        text = fields.need("node", string)
        partition = fields.get("partition", self.partition, 0)
        return self._resolve(text, fields.at("node"), fields.sub("node"), partition)

    def _resolve(self, text: str, node: Node, field: str, partition: int) -> Selector:
        roles = roles_for(self.system)
        if text in roles:
            return Selector(role=text, partition=partition)
        if text in self.cluster.node_names:
            return Selector(node=text, partition=partition)
        others = systems_with_role(text)
        if others:
            raise error(node, field, f"role {text!r} is for {' and '.join(others)} cases; "
                                     f"{self.system} roles: {', '.join(roles)}")
        raise error(node, field, unknown("role", text, roles + self.cluster.node_names))

    def builtin_point(self, node: Node, field: str) -> str:
        """An injection point that :func:`available_points` offers for the case's version."""
        point = string(node, field)
        points = sorted(available_points(self.system, self.version), key=_natural)
        if point not in points:
            raise error(node, field, f"point {clip(point)!r} not available for {self.system} "
                                     f"{self.version} (available: {', '.join(points) or 'none'})")
        return point

    def rule_file(self, node: Node, field: str) -> Path:
        """A Byteman rule file in the case file's directory or below it (symbolic links
        resolved): a regular UTF-8 text file of at most :data:`MAX_RULE_BYTES` that holds
        at least one ``RULE`` ... ``ENDRULE`` block. The path returned is resolved."""
        written = string(node, field)
        try:
            root = self.base_dir.resolve()
            path = (self.base_dir / written).resolve()
        except (OSError, ValueError, RuntimeError) as exc:  # RuntimeError: a symlink loop
            reason = os_reason(exc) if isinstance(exc, (OSError, ValueError)) else exc
            raise error(node, field, f"cannot use rule file {clip(written)!r}: {reason}") from None
        if not path.is_relative_to(root):
            raise error(node, field, f"rule file {clip(written)!r} is outside the case file's "
                                     f"directory {root} (move it into that directory or below "
                                     "it, and give its path relative to the case file)")
        try:
            data = read_limited(path, MAX_RULE_BYTES, f"rule file {path}")
        except Unreadable as exc:
            raise error(node, field, str(exc)) from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            raise error(node, field, f"rule file {path} is not UTF-8 text (line {line}): "
                                     "a rule file is Byteman rules as text") from None
        if not _has_rule(text):
            raise error(node, field, f"rule file {path} holds no Byteman rule (a 'RULE <name>' "
                                     "line, the rule, then an 'ENDRULE' line)")
        return path

    def workload_name(self, fields: Fields, action: str, background: bool) -> str:
        """The workload's name (default ``produce-3``), checked unique and recorded."""
        label = f"steps[{self.index}].{action}"
        chosen = fields.get("name", name, f"{action}-{self.index}")
        if chosen in self.workloads:
            raise error(fields.at("name"), fields.sub("name"),
                        f"workload name {chosen!r} is already used by {self.workloads[chosen]}")
        self.workloads[chosen] = label
        if background:
            self.background.add(chosen)
        return chosen


_Parser = Callable[[Node, str, StepContext], StepArgs]


def read_steps(node: Node, ctx: StepContext) -> tuple[Step, ...]:
    """The ``steps`` list: a non-empty list of one-key mappings (``- kill9: leader``)."""
    if not isinstance(node.value, list) or not node.value:
        raise error(node, "steps", f"expected a non-empty list of steps, got {show(node.value)}")
    steps = []
    for index, item in enumerate(node.value):
        field = f"steps[{index}]"
        if not isinstance(item.value, dict) or len(item.value) != 1:
            got = (f"{len(item.value)} keys: {listing(list(item.value))} (is a '-' missing?)"
                   if isinstance(item.value, dict) else show(item.value))
            raise error(item, field, f"a step is a mapping with one action, like "
                                     f"'- kill9: leader'; got {got}")
        ((action, arg),) = item.value.items()
        line = item.key_lines[action]
        parser = _PARSERS.get(action)
        if parser is None:
            raise CaseError(unknown("step", action, ACTIONS), line=line, field=field)
        ctx.index = index
        steps.append(Step(index, line, action, parser(arg, f"{field}.{action}", ctx)))
    for step in steps:  # a producer held for good would only time the case out
        if isinstance(step.args, ProduceArgs) and step.args.name in ctx.held:
            raise CaseError(f"held producer {step.args.name!r} is never released: add a "
                            f"'release: {step.args.name}' step after it", line=step.line,
                            field=f"steps[{step.index}].produce.held")
    return tuple(steps)


def _pulsar_only(f: Fields, ctx: StepContext, *keys: str) -> None:
    """Keys of a step that only Pulsar cases take."""
    if ctx.system != "pulsar":
        for key in keys:
            if f.has(key):
                raise error(f.at(key), f.sub(key),
                            f"applies to pulsar cases only (this is a {ctx.system} case)")


def _produce(node: Node, field: str, ctx: StepContext) -> ProduceArgs:
    f = Fields(node, field, ("name", "count", "duration", "rate", "background", "value_size",
                             "keys", "partition", "driver", "settings", "transactions", "held"))
    _pulsar_only(f, ctx, "settings")
    _kafka_only(f, ctx, "transactions")
    count = f.get("count", POSITIVE, None)
    duration_s = f.get("duration", duration, None)
    if (count is None) == (duration_s is None):
        raise error(node, field, "give exactly one of count and duration"
                                 + (" (got both)" if count is not None else ""))
    background = f.get("background", boolean, False)
    transactions = f.get("transactions", _transactions, None)
    driver = f.get("driver", choice(*DRIVERS), "python")
    if driver == "java" and ctx.system == "kafka" and transactions is None:
        raise error(f.at("driver"), f.sub("driver"), "the Kafka Java driver runs transactional workloads "
                    "only: add transactions (or use the python driver)")
    held = f.get("held", boolean, False)
    if held and (not background or driver != "python" or transactions is not None):
        raise error(f.at("held"), f.sub("held"), "a held producer is a background python producer "
                    "without transactions (it connects, then waits for a release step)")
    chosen = ctx.workload_name(f, "produce", background)
    if held:
        ctx.held.add(chosen)
    return ProduceArgs(
        name=chosen, count=count, duration_s=duration_s, held=held,
        rate=f.get("rate", number, None), background=background,
        value_size=f.get("value_size", POSITIVE, 100), keys=f.get("keys", POSITIVE, None),
        partition=f.get("partition", ctx.partition, None),
        driver=driver,
        settings=f.get("settings", lambda n, fld: read_client_settings(n, fld, ctx.system),
                       MappingProxyType({})),
        transactions=transactions)


def _transactions(node: Node, field: str) -> TxnArgs:
    """``produce.transactions``: ``{size: 10, abort: 0.25, timeout: 10s, hold: {transaction:
    3, for: 20s}}``."""
    f = Fields(node, field, ("size", "abort", "timeout", "hold"))
    abort = f.get("abort", number, 0.0)
    if not 0 <= abort <= 1:
        raise error(f.at("abort"), f.sub("abort"),
                    f"is the share of transactions aborted, from 0 to 1 (got {abort:g})")
    timeout_s = f.get("timeout", duration, None)
    if timeout_s is not None and not 1 <= timeout_s <= 900:
        raise error(f.at("timeout"), f.sub("timeout"),
                    f"is the transaction timeout, from 1s to 15m (the brokers' "
                    f"transaction.max.timeout.ms); got {timeout_s:g}s")
    hold_at, hold_s = None, 0.0
    if f.has("hold"):
        h = Fields(f.at("hold"), f.sub("hold"), ("transaction", "for"))
        hold_at = h.get("transaction", POSITIVE, 1)
        held = h.get("for", duration, None)
        if held is None:
            raise error(f.at("hold"), f.sub("hold"), "give for: how long to hold the producer")
        hold_s = held
    return TxnArgs(size=f.get("size", POSITIVE, 10), abort=abort, timeout_s=timeout_s, hold_at=hold_at,
                   hold_s=hold_s)


def _kafka_only(f: Fields, ctx: StepContext, *keys: str) -> None:
    """Keys of a step that only Kafka cases take."""
    if ctx.system != "kafka":
        for key in keys:
            if f.has(key):
                raise error(f.at(key), f.sub(key),
                            f"applies to kafka cases only (this is a {ctx.system} case)")


def _consume(node: Node, field: str, ctx: StepContext) -> ConsumeArgs:
    f = Fields(node, field, ("name", "background", "duration", "count", "group",
                             "subscription_type", "isolation_level"))
    _pulsar_only(f, ctx, "subscription_type")
    _kafka_only(f, ctx, "isolation_level")
    background = f.get("background", boolean, False)
    count = f.get("count", POSITIVE, None)
    duration_s = f.get("duration", duration, None)
    if not background and count is None and duration_s is None:
        raise error(node, field, "a consume that is not in the background needs count or duration")
    return ConsumeArgs(name=ctx.workload_name(f, "consume", background), background=background,
                       duration_s=duration_s, count=count, group=f.get("group", name, None),
                       subscription_type=f.get("subscription_type", choice(*SUBSCRIPTION_TYPES),
                                               None),
                       isolation_level=f.get("isolation_level", choice(*ISOLATION_LEVELS), None))


def _copy(node: Node, field: str, ctx: StepContext) -> CopyArgs:
    """``copy: {name: copier, count: 1200, transactions: {size: 10, abort: 0.1}}`` (kafka)."""
    if ctx.system != "kafka":
        raise error(node, field, f"a copier uses Kafka transactions; this is a {ctx.system} case")
    f = Fields(node, field, ("name", "background", "count", "duration", "value_size", "transactions",
                             "rewind"))
    background = f.get("background", boolean, False)
    count = f.get("count", POSITIVE, None)
    duration_s = f.get("duration", duration, None)
    if count is None and duration_s is None:
        raise error(node, field, "a copy needs count (input records to copy) or duration")
    if ctx.isolation_level != "read_committed":
        raise error(node, field, "a copier's exactly-once is judged on a read_committed recovery "
                                 "read: set client.isolation_level: read_committed")
    return CopyArgs(name=ctx.workload_name(f, "copy", background), background=background,
                    count=count, duration_s=duration_s, value_size=f.get("value_size", POSITIVE, 100),
                    transactions=f.get("transactions", _transactions, TxnArgs()),
                    rewind=f.get("rewind", choice("committed", "none", "beginning"), "committed"))


def _node_fault(node: Node, field: str, ctx: StepContext) -> FaultArgs:
    missing = FAULTS[field.rsplit(".", 1)[-1]].missing_on(ctx.system, ctx.disk)
    if missing:
        raise error(node, field, f"{missing} (use kill9)")
    args = FaultArgs(ctx.selector(node, field))
    action = field.rsplit(".", 1)[-1]
    bookie = (args.target.role in ("bookie", "non-auditor-bookie")
              or (args.target.node or "").startswith("bookie-"))
    if action == "remove" and not bookie:
        raise error(node, field, f"{args.target} is not a bookie (remove takes a bookie out for good: "
                                 "bookie, non-auditor-bookie or bookie-N)")
    if action == "replace" and ctx.system == "pulsar" and not (bookie or args.target.role == "last-target"):
        raise error(node, field, f"{args.target} is not a bookie (replace puts a new bookie at a "
                                 "bookie's address: bookie, non-auditor-bookie, bookie-N or last-target)")
    if action == "replace" and ctx.system == "kafka":
        if ctx.cluster.mode != "zk":
            raise error(node, field, "replace puts a new broker at a broker's address in ZooKeeper mode "
                                     "(cluster kafka-zk); in KRaft a combined node is a controller voter, "
                                     "and a new broker's log directory has a new id (KIP-858): not built")
        if args.target.node and not args.target.node.startswith("kafka-"):
            raise error(node, field, f"{args.target} is not a broker (replace puts a new broker at a "
                                     "broker's address: leader, follower, held or kafka-N)")
    if action == "replace" and ctx.disk != "lazy":
        raise error(node, field, "replace empties the node's lazy disk (set disk: lazy)")
    if action == "join" and args.target.node not in {n.name for n in ctx.cluster.spares}:
        spares = ", ".join(n.name for n in ctx.cluster.spares)
        raise error(node, field, f"join adds a spare node of the cluster, named: {args.target} is none ("
                                 + (f"spares: {spares})" if spares else f"cluster {ctx.cluster.name} has "
                                    "none; kafka-kraft-dynamic has kafka-5, pulsar has broker-3)"))
    if action == "decommission" and ctx.system == "pulsar" and not bookie:
        raise error(node, field, f"{args.target} is not a bookie (on Pulsar decommission retires a bookie: "
                                 "bookie, non-auditor-bookie or bookie-N; a broker's bundles move when it "
                                 "stops: use stop)")
    if action == "decommission" and ctx.system == "kafka" and args.target.node is not None:
        spec = ctx.cluster.node(args.target.node)
        if spec.kind != "broker" or spec in ctx.cluster.controllers:
            kind = spec.kind if spec.kind != "broker" else "combined"
            raise error(node, field, f"{spec.name} is a {kind} node: decommission takes a broker that is "
                                     "no controller out")
    return args


def _powerloss(node: Node, field: str, ctx: StepContext) -> FaultArgs:
    """``powerloss: leader``, or ``{node: leader, torn: true}`` on a lazy disk (the node's
    last unsynced write survives in part)."""
    if not isinstance(node.value, dict):
        return _node_fault(node, field, ctx)
    missing = FAULTS["powerloss"].missing_on(ctx.system, ctx.disk)
    if missing:
        raise error(node, field, f"{missing} (use kill9)")
    f = Fields(node, field, ("node", "partition", "torn"))
    torn = f.get("torn", boolean, False)
    if torn and ctx.disk != "lazy":
        raise error(f.at("torn"), f.sub("torn"), "a torn write needs a lazy disk (set disk: lazy)")
    return FaultArgs(ctx.selector_in(f), disk=MappingProxyType({"torn": torn}))


def _corrupt(node: Node, field: str, ctx: StepContext) -> FaultArgs:
    """``corrupt: {node: follower, file: log, how: bitflip, offset: 120}``: a file of the
    node's lazy disk (the largest of its kind); ``offset`` (optional) the byte to flip or the
    length to cut to (default: the middle)."""
    missing = FAULTS["corrupt"].missing_on(ctx.system, ctx.disk)
    if missing:
        raise error(node, field, missing)
    f = Fields(node, field, ("node", "partition", "file", "how", "offset"))
    spec: dict[str, Any] = {"file": f.need("file", choice(*DISK_FILE_KINDS, kind="file kind")),
            "how": f.need("how", choice(*CORRUPTIONS, kind="corruption"))}
    if f.has("offset"):
        spec["offset"] = f.need("offset", NON_NEGATIVE)
    return FaultArgs(ctx.selector_in(f), disk=MappingProxyType(spec))


def _partition_fault(node: Node, field: str, ctx: StepContext) -> FaultArgs:
    if isinstance(node.value, str):
        return FaultArgs(ctx.selector(node, field))
    f = Fields(node, field, ("node", "partition", "from", "direction"))
    target = ctx.selector_in(f)

    def peer(from_node: Node, from_field: str) -> Selector | None:
        return None if from_node.value == "others" else ctx.selector(from_node, from_field)

    args = FaultArgs(target, f.get("from", peer, None),
                     f.get("direction", choice(*DIRECTIONS), "both"))
    if args.peer == target:
        raise error(f.at("from"), f.sub("from"), f"cannot partition {target} from itself")
    return args


_RATE = re.compile(r"(\d+(?:\.\d+)?)\s*(bit|kbit|mbit|gbit)")
_RATE_UNITS = {"bit": 1, "kbit": 1_000, "mbit": 1_000_000, "gbit": 1_000_000_000}
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*%")


def _percent(node: Node, field: str) -> float:
    """``30%`` or 30: a share of packets, above 0 and at most 100."""
    value = node.value
    if isinstance(value, str) and (m := _PERCENT.fullmatch(value.strip())):
        pct = float(m[1])
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        pct = float(value)
    else:
        raise error(node, field, f"expected a percentage like 10% (or 10), got {show(value)}")
    if not 0 < pct <= 100:
        raise error(node, field, f"a percentage above 0 and at most 100, got {show(value)}")
    return pct


def _rate(node: Node, field: str) -> float:
    """``10mbit``, ``500kbit``: tc's rate units, in bits per second."""
    m = _RATE.fullmatch(str(node.value).strip().lower()) if isinstance(node.value, str) else None
    bits = float(m[1]) * _RATE_UNITS[m[2]] if m else 0.0
    if m is None or bits < 8:
        raise error(node, field, f"expected a rate like 10mbit or 500kbit (units: "
                                 f"{', '.join(_RATE_UNITS)}), got {show(node.value)}")
    return float(int(bits))


def _degrade(node: Node, field: str, ctx: StepContext) -> FaultArgs:
    f = Fields(node, field, ("node", "partition", "from", "direction", "loss", "delay", "jitter",
                             "duplicate", "reorder", "rate"))
    target = ctx.selector_in(f)

    def peer(from_node: Node, from_field: str) -> Selector | None:
        return None if from_node.value == "others" else ctx.selector(from_node, from_field)

    def millis(n: Node, fld: str) -> float:
        return duration(n, fld) * 1000

    read = (("loss_pct", "loss", _percent), ("delay_ms", "delay", millis), ("jitter_ms", "jitter", millis),
            ("duplicate_pct", "duplicate", _percent), ("reorder_pct", "reorder", _percent),
            ("rate_bps", "rate", _rate))
    effects = {key: f.need(name_, reader) for key, name_, reader in read if f.has(name_)}
    if not effects:
        raise error(node, field, "give at least one effect: loss, delay (and jitter), duplicate, "
                                 "reorder or rate")
    for needs in ("jitter", "reorder"):
        if f.has(needs) and not f.has("delay"):
            raise error(f.at(needs), f.sub(needs), f"{needs} needs a delay (netem reorders by "
                                                   "sending some packets without it)")
    args = FaultArgs(target, f.get("from", peer, None), f.get("direction", choice(*DIRECTIONS), "both"),
                     MappingProxyType(effects))
    if args.peer == target:
        raise error(f.at("from"), f.sub("from"), f"cannot degrade the network of {target} to itself")
    return args


def _signed(reader: Callable[[Node, str], float]) -> Callable[[Node, str], float]:
    """``reader`` of a value that may carry a sign: ``+10m``, ``-30s``, ``-5%``, ``-2``."""
    def read(node: Node, field: str) -> float:
        value = node.value
        if isinstance(value, str) and value.strip()[:1] in ("+", "-"):
            text = value.strip()
            return (-1.0 if text[0] == "-" else 1.0) * reader(Node(text[1:], node.line), field)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
            return -reader(Node(-value, node.line), field)
        return reader(node, field)
    return read


def _clock(node: Node, field: str, ctx: StepContext) -> FaultArgs:
    """``clock: {node: leader, jump: +10m}``, ``{node: X, drift: 5%, for: 30s}`` (``-5%``:
    slow), ``{node: X, strobe: 10s, period: 1s, for: 20s}``: the node's own wall clock."""
    f = Fields(node, field, ("node", "partition", "jump", "drift", "strobe", "period", "for"))
    given = [k for k in ("jump", "drift", "strobe") if f.has(k)]
    if len(given) != 1:
        raise error(node, field, "give one of jump (+10m, -30s), drift (5%, -5%) or strobe (a duration)"
                    + (f", not {' and '.join(given)}" if given else ""))
    spec: dict[str, float] = {}
    if f.has("jump"):
        spec["jump_s"] = f.need("jump", _signed(duration))
    if f.has("drift"):
        spec["drift"] = f.need("drift", _signed(_percent)) / 100
    if f.has("strobe"):
        spec["strobe_s"] = f.need("strobe", _signed(duration))
        spec["period_s"] = f.get("period", duration, 1.0)
        if spec["period_s"] < 1:
            raise error(f.at("period"), f.sub("period"), "a strobe's period is at least 1s (the node "
                                                         "reads its clock's offset once a second)")
    elif f.has("period"):
        raise error(f.at("period"), f.sub("period"), "period belongs to a strobe")
    if f.has("for"):
        if f.has("jump"):
            raise error(f.at("for"), f.sub("for"), "a jump is at once: for belongs to a drift or a strobe "
                                                   "(a heal sets the clock back)")
        spec["for_s"] = f.need("for", duration)
    return FaultArgs(ctx.selector_in(f), clock=MappingProxyType(spec))


def _heal(node: Node, field: str, ctx: StepContext) -> HealArgs:
    if node.value is None or node.value == "all":
        return HealArgs()
    return HealArgs(ctx.selector(node, field))


def _step_of(system: str, node: Node, field: str, ctx: StepContext) -> None:
    """A step only ``system``'s cases take: one error naming it on another system's case."""
    if ctx.system != system:
        step = field.rsplit(".", 1)[-1]
        raise error(node, field, f"{step} applies to {system} cases only (this is a {ctx.system} case)")


def _reassign(node: Node, field: str, ctx: StepContext) -> ReassignArgs:
    """``reassign: {partition: 0, to: [kafka-2, kafka-3], timeout: 2m}``: the partition's new
    replicas, the first its preferred leader."""
    _step_of("kafka", node, field, ctx)
    f = Fields(node, field, ("partition", "to", "timeout"))
    to_node = f.need("to", lambda n, _fld: n)
    if not isinstance(to_node.value, list) or not to_node.value:
        raise error(to_node, f.sub("to"), f"expected a list of brokers, got {show(to_node.value)}")
    to = tuple(ctx.selector(item, f"{f.sub('to')}[{i}]") for i, item in enumerate(to_node.value))
    texts = [str(sel) for sel in to]
    if len(set(texts)) != len(texts):
        raise error(to_node, f.sub("to"), f"a broker is named twice: {', '.join(texts)}")
    return ReassignArgs(to=to, partition=f.get("partition", ctx.partition, 0),
                        timeout_s=f.get("timeout", duration, 120.0))


def _quorum(node: Node, field: str, ctx: StepContext) -> QuorumArgs:
    """``quorum: {add: controller-4}`` or ``{remove: kafka-1}`` (and ``timeout``): one
    controller in or out of a dynamic KRaft quorum."""
    _step_of("kafka", node, field, ctx)
    if ctx.cluster.quorum != "dynamic":
        raise error(node, field, f"cluster {ctx.cluster.name} has a static controller quorum "
                                 "(controller.quorum.voters): its voters cannot change; use cluster "
                                 "kafka-kraft-dynamic")
    f = Fields(node, field, ("add", "remove", "timeout"))
    given = [k for k in ("add", "remove") if f.has(k)]
    if len(given) != 1:
        raise error(node, field, "give one of add (a controller that follows as an observer) or remove "
                                 "(a voter)" + (", not both" if given else ""))
    which = given[0]
    sel = f.need(which, ctx.selector)
    names = {n.name for n in ctx.cluster.controllers}
    if sel.node is not None and sel.node not in names:
        known = ", ".join(sorted(names))
        raise error(f.at(which), f.sub(which),
                    f"{sel.node} is not a controller of cluster {ctx.cluster.name} (controllers: {known})")
    return QuorumArgs(**{which: sel}, timeout_s=f.get("timeout", duration, 120.0))


def _split(node: Node, field: str, ctx: StepContext) -> SplitArgs:
    """``split: {partition: 0, timeout: 90s}`` (or empty): the bundle of the partition."""
    _step_of("pulsar", node, field, ctx)
    if node.value is None:
        return SplitArgs()
    f = Fields(node, field, ("partition", "timeout"))
    return SplitArgs(partition=f.get("partition", ctx.partition, 0),
                     timeout_s=f.get("timeout", duration, 90.0))


def _unload(node: Node, field: str, ctx: StepContext) -> UnloadArgs:
    """``unload: {partition: 1, to: broker-2}``; empty: partition 0 to the other broker."""
    _step_of("pulsar", node, field, ctx)
    if node.value is None:
        return UnloadArgs()
    f = Fields(node, field, ("partition", "to"))
    to = f.get("to", ctx.selector, None)
    if to is not None and to.node is not None and not to.node.startswith("broker-"):
        raise error(f.at("to"), f.sub("to"), f"{to.node} is not a broker")
    if to is not None and to.role not in (None, "owner", "non-owner", "any-broker", "last-target"):
        raise error(f.at("to"), f.sub("to"), f"{to.role} does not name a broker")
    return UnloadArgs(partition=f.get("partition", ctx.partition, 0), to=to)


def _subscribe(node: Node, field: str, ctx: StepContext) -> SubscribeArgs:
    """``subscribe: {group: app, position: latest}``: a durable subscription made by the admin
    API, with no consumer."""
    _step_of("pulsar", node, field, ctx)
    if not isinstance(node.value, dict):
        raise error(node, field, f"expected {{group: NAME, position: latest|earliest}}, "
                                 f"got {show(node.value)}")
    f = Fields(node, field, ("group", "position"))
    return SubscribeArgs(group=f.need("group", name),
                         position=f.get("position", choice(*SUBSCRIBE_POSITIONS), "latest"))


def _sleep(node: Node, field: str, ctx: StepContext) -> AwaitArgs:
    seconds = duration(node, field)
    return AwaitArgs("time", seconds, MappingProxyType({"seconds": seconds}))


def _await(node: Node, field: str, ctx: StepContext) -> AwaitArgs:
    f = Fields(node, field, CONDITIONS + ("timeout",), kind="condition")
    given = [c for c in CONDITIONS if c in f]
    if len(given) != 1:
        raise error(node, field, f"give exactly one condition (one of: {', '.join(CONDITIONS)})"
                                 + (f"; got {', '.join(given)}" if given else ""))
    condition = given[0]
    if condition == "time":
        if "timeout" in f:
            raise error(f.at("timeout"), f.sub("timeout"), "a time await takes no timeout")
        return _sleep(f.at("time"), f.sub("time"), ctx)
    params = _CONDITIONS[condition](f.at(condition), f.sub(condition), ctx)
    default = ctx.case_timeout_s if condition == "workload" else DEFAULT_AWAIT_TIMEOUT_S
    return AwaitArgs(condition, f.get("timeout", duration, default), MappingProxyType(params))


def _on_partition(node: Node, field: str, ctx: StepContext) -> dict[str, Any]:
    if node.value is None:
        return {"partition": 0}
    return {"partition": Fields(node, field, ("partition",)).get("partition", ctx.partition, 0)}


def _isr_size(node: Node, field: str, ctx: StepContext) -> dict[str, Any]:
    if ctx.system != "kafka":
        raise error(node, field, "isr_size applies to kafka cases only")
    f = Fields(node, field, ("partition", "size"))
    size = f.need("size", POSITIVE)
    if size > ctx.replication_factor:
        raise error(f.at("size"), f.sub("size"), f"size {size} exceeds the topic's "
                                                 f"replication_factor {ctx.replication_factor}")
    return {"partition": f.get("partition", ctx.partition, 0), "size": size}


def _controller_change(node: Node, field: str, ctx: StepContext) -> dict[str, Any]:
    if ctx.system != "kafka":
        raise error(node, field, "controller_change applies to kafka cases only")
    if node.value not in (None, {}):
        raise error(node, field, f"controller_change takes no argument; got {show(node.value)}")
    return {}


def _leader_is(node: Node, field: str, ctx: StepContext) -> dict[str, Any]:
    target = ctx.selector_in(Fields(node, field, ("node", "partition")))
    return {"partition": target.partition, "target": target}


def _log(node: Node, field: str, ctx: StepContext) -> dict[str, Any]:
    f = Fields(node, field, ("node", "partition", "pattern"))
    target = ctx.selector_in(f)
    pattern = f.need("pattern", string)
    try:
        re.compile(pattern)
    except re.error as exc:
        raise error(f.at("pattern"), f.sub("pattern"),
                    f"invalid regular expression: {exc}") from None
    return {"partition": target.partition, "target": target, "pattern": pattern}


#: checkpoint files an await may read, by the name a case gives them
CHECKPOINT_KINDS = ("recovery-point", "high-watermark")


def _checkpoint(node: Node, field: str, ctx: StepContext) -> dict[str, Any]:
    if ctx.system != "kafka":
        raise error(node, field, "checkpoint applies to kafka cases only")
    f = Fields(node, field, ("node", "partition", "kind", "at_least"))
    target = ctx.selector_in(f)
    return {"partition": target.partition, "target": target,
            "kind": f.need("kind", choice(*CHECKPOINT_KINDS, kind="checkpoint kind")),
            "at_least": f.need("at_least", NON_NEGATIVE)}


def _injection(node: Node, field: str, ctx: StepContext) -> dict[str, Any]:
    point = string(node, field)
    if point not in ctx.armed:
        raise error(node, field, _not_earlier("inject step for point", point, ctx.armed))
    return {"point": point}


def _workload(node: Node, field: str, ctx: StepContext) -> dict[str, Any]:
    workload = string(node, field)
    if workload in ctx.workloads and workload not in ctx.background:
        raise error(node, field, f"workload {workload!r} ({ctx.workloads[workload]}) "
                                 "is not a background workload")
    if workload not in ctx.background:
        raise error(node, field, _not_earlier("background workload", workload, ctx.background))
    return {"name": workload}


def _release(node: Node, field: str, ctx: StepContext) -> ReleaseArgs:
    workload = string(node, field)
    if workload not in ctx.held:
        raise error(node, field, _not_earlier("held producer (produce with held: true)", workload,
                                              ctx.held))
    ctx.held.discard(workload)  # released once
    return ReleaseArgs(workload)


def _not_earlier(kind: str, value: str, earlier: set[str]) -> str:
    names = sorted(earlier, key=_natural)
    shown = f" (earlier: {listing(names)})" if names else ""
    return f"no {kind} {clip(value)!r} before this step{shown}{suggest(value, names)}"


def _has_rule(text: str) -> bool:
    """Whether ``text`` has a ``RULE`` line with an ``ENDRULE`` line after it (linear time)."""
    started = False
    for line in text.split("\n"):
        if not started:
            started = _RULE_START.match(line) is not None
        elif _RULE_END.fullmatch(line):
            return True
    return False


def _point_name(node: Node, field: str) -> str:
    """The point name of a user rule: a letter, then letters, digits, '_' or '-'."""
    point = string(node, field)
    if not _POINT.fullmatch(point):
        raise error(node, field, f"invalid point name {clip(point)!r} (start with a letter, then "
                                 "letters, digits, '_' or '-'; at most 32 characters)")
    return point


def _inject(node: Node, field: str, ctx: StepContext) -> InjectArgs:
    f = Fields(node, field, ("point", "partition", "offset", "rule", "timeout"))
    rule = f.get("rule", ctx.rule_file, None)
    point = f.need("point", _point_name if rule else ctx.builtin_point)
    ctx.armed.add(point)
    return InjectArgs(point=point, partition=f.get("partition", ctx.partition, 0),
                      offset=f.get("offset", _offset, "next"), rule=rule,
                      timeout_s=f.get("timeout", duration, DEFAULT_INJECT_TIMEOUT_S))


def _offset(node: Node, field: str) -> int | str:
    if node.value == "next":
        return "next"
    if not isinstance(node.value, int) or isinstance(node.value, bool):
        raise error(node, field, f"expected an offset (integer) or 'next', got {show(node.value)}")
    return NON_NEGATIVE(node, field)


_CONDITIONS: dict[str, Callable[[Node, str, StepContext], dict[str, Any]]] = {
    "leader_change": _on_partition,
    "no_leader": _on_partition,
    "isr_size": _isr_size,
    "leader_is": _leader_is,
    "controller_change": _controller_change,
    "log": _log,
    "checkpoint": _checkpoint,
    "injection": _injection,
    "workload": _workload,
}

_CHAOS_DEFAULT_FAULTS = ("kill9", "pause", "partition")


def _chaos(node: Node, field: str, ctx: StepContext) -> ChaosArgs:
    """``chaos: {duration: 2m, faults: [kill9, pause], targets: [leader], gap: [5s, 15s],
    hold: [3s, 10s], seed: 7}``: only ``duration`` is required."""
    f = Fields(node, field, ("duration", "faults", "targets", "gap", "hold", "seed", "order"))
    duration_s = f.need("duration", duration)

    def fault_list(n: Node, fld: str) -> tuple[str, ...]:
        if not isinstance(n.value, list) or not n.value:
            raise error(n, fld, f"expected a non-empty list of faults ({', '.join(CHAOS_FAULTS)}); "
                                f"got {show(n.value)}")
        out = tuple(choice(*CHAOS_FAULTS, kind="fault")(item, f"{fld}[{i}]")
                    for i, item in enumerate(n.value))
        for fault in out:
            missing = FAULTS[fault].missing_on(ctx.system, ctx.disk)
            if missing:
                raise error(n, fld, missing)
        return tuple(dict.fromkeys(out))

    def target(item: Node, fld: str) -> Selector | NodeGroup:
        if not (isinstance(item.value, dict) and "group" in item.value):
            return ctx.selector(item, fld)
        g = Fields(item, fld, ("group", "of"))
        kinds = tuple(dict.fromkeys(n.kind for n in ctx.cluster.nodes))
        kind = g.need("of", choice(*kinds, kind="node kind"))
        return NodeGroup(g.need("group", choice(*GROUP_SIZES, kind="group")), kind,
                         tuple(n.name for n in ctx.cluster.nodes_of(kind)))

    def target_list(n: Node, fld: str) -> tuple[Selector | NodeGroup, ...]:
        if not isinstance(n.value, list) or not n.value:
            raise error(n, fld, "expected a non-empty list of roles, node names or groups; "
                                f"got {show(n.value)}")
        return tuple(target(item, f"{fld}[{i}]") for i, item in enumerate(n.value))

    def bounds(n: Node, fld: str) -> tuple[float, float]:
        if not isinstance(n.value, list) or len(n.value) != 2:
            raise error(n, fld, f"expected [shortest, longest], like [5s, 15s]; got {show(n.value)}")
        low, high = duration(n.value[0], f"{fld}[0]"), duration(n.value[1], f"{fld}[1]")
        if low > high:
            raise error(n, fld, f"the shortest ({low:g}s) is longer than the longest ({high:g}s)")
        return low, high

    def seed(n: Node, fld: str) -> int:
        value = NON_NEGATIVE(n, fld)
        if value > MAX_SEED:
            raise error(n, fld, f"a seed is at most {MAX_SEED}")
        return value

    args = ChaosArgs(
        duration_s=duration_s,
        faults=f.get("faults", fault_list, _CHAOS_DEFAULT_FAULTS),
        targets=f.get("targets", target_list,
                      tuple(Selector(role=r) for r in PROFILES[ctx.system].chaos_targets)),
        gap_s=f.get("gap", bounds, (5.0, 15.0)),
        hold_s=f.get("hold", bounds, (3.0, 10.0)),
        seed=f.get("seed", seed, None),
        order=f.get("order", choice(*CHAOS_ORDERS, kind="order"), "random"))
    if args.gap_s[0] + args.hold_s[0] > duration_s:
        raise error(node, field, f"duration {duration_s:g}s is shorter than the shortest gap and "
                                 f"hold ({args.gap_s[0]:g}s + {args.hold_s[0]:g}s): no fault fits")
    return args


_PARSERS: dict[str, _Parser] = {
    "produce": _produce,
    "consume": _consume,
    "copy": _copy,
    "sleep": _sleep,
    "await": _await,
    **dict.fromkeys(NODE_FAULTS, _node_fault),
    "powerloss": _powerloss,
    "corrupt": _corrupt,
    "partition": _partition_fault,
    "degrade": _degrade,
    "clock": _clock,
    "heal": _heal,
    "inject": _inject,
    "unload": _unload,
    "split": _split,
    "reassign": _reassign,
    "quorum": _quorum,
    "subscribe": _subscribe,
    "chaos": _chaos,
    "release": _release,
}
