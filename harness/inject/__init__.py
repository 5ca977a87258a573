"""Precise crash timing: arm a named replication point with Byteman, learn when it is hit.

Points C1-C5 (shared/seeds/003; table in docs/injection.md and in
:data:`harness.points.POINTS`) are rules in ``rules/<system>-<major>.<minor>.btm``.
Arming renders the point's rule for the case's topic, partition and target
offset N, submits it to the broker that hosts the point (through the Byteman
listener inside the container), and returns. When a thread reaches the point,
the rule writes one ``HIT`` line to an event file and holds the thread;
:meth:`Injector.await_hit` sees the line and the case's next step (typically
``kill9``) runs while the thread is held. A user-supplied rule
(``inject: {rule: file.btm}``) is submitted to every broker and uses the same
placeholders and HIT line.

At the kill, the replicas' log end offsets are read from their files, and
the run states whether the intended interleaving happened (``hit``): for C1
the leader's LEO was N+1 and the follower's N, and so on (:data:`POINTS`).
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from ..backend.byteman import ListenerDown, submit_rules, unload_rules
from ..case import InjectArgs, Selector
from ..errors import AdminError, BackendError, InjectError, WaitTimeout
from ..history import Recorder
from ..points import POINTS, RULES_DIR, PointSpec, available_points, rule_blocks, rule_file
from ..systems.base import CrashPoints, LedgerPoints, System
from ..systems.kafka_segments import log_end_offset
from ..wait import wait_until

__all__ = ["available_points", "Injector", "RuleInjector", "injector_for", "POINTS", "PointSpec",
           "RULES_DIR", "rule_blocks", "rule_file", "render_rule"]
#: seconds an arm waits for a node that is starting (its Byteman listener, its topic's stats)
ARM_WAIT_S = 60.0
_HIT = re.compile(r"^HIT (?P<point>\S+)(?P<fields>.*)$")
log = logging.getLogger(__name__)


def _each(items: list[Any], fn: Callable[[Any], Any]) -> list[Any]:
    """``[fn(item) for item in items]``, the calls in parallel threads."""
    if len(items) < 2:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=len(items)) as pool:
        return list(pool.map(fn, items))


def render_rule(text: str, values: dict[str, Any]) -> str:
    """Substitutes ``@NAME@`` placeholders; an unknown placeholder is an error."""
    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in values:
            raise InjectError(f"rule placeholder @{key}@ is unknown (known: "
                              f"{', '.join('@' + k + '@' for k in values)})")
        return str(values[key])

    return re.sub(r"@([A-Z0-9_]+)@", sub, text)


@dataclass
class _Armed:
    point: str
    key: str
    n: int
    partition: int
    nodes: list[Any]
    events: str
    spec: PointSpec | None
    leader: str
    follower: str | None
    armed_at: float
    hit: dict[str, Any] | None = None
    at_kill: list[dict[str, Any]] | None = None
    at_hit: list[dict[str, Any]] | None = None
    kill: dict[str, Any] | None = None
    #: nodes killed or stopped since the arm: their JVM, if started again, holds nothing
    #: and has none of the arm's rules (the Byteman agent starts with no script)
    restarted: set[str] = field(default_factory=set)
    #: what the system's injector knows of the arm (Pulsar: the ledger, its quorums, the
    #: write set of N)
    extra: dict[str, Any] = field(default_factory=dict)
    #: wall time of the hit (0 before it)
    hit_at: float = 0.0


def injector_for(system: System, topic: str, run_dir: Path, timeline: Recorder) -> RuleInjector:
    """The injector of ``system``'s points: Kafka's (:class:`Injector`) or Pulsar's
    (:class:`harness.inject.pulsar.PulsarInjector`)."""
    if isinstance(system, CrashPoints):
        return Injector(system, topic, run_dir, timeline)
    if isinstance(system, LedgerPoints):
        from .pulsar import PulsarInjector

        return PulsarInjector(system, topic, run_dir, timeline)
    raise InjectError(f"{system.name} has no crash-timing points")


class RuleInjector:
    """What every system's injector shares: submitting rules through the node's Byteman
    listener, reading HIT lines, freezing the state at the first kill after a hit, releasing
    held threads and unloading the rules. A subclass arms (:meth:`arm`), reads the state a
    hit is judged on (:meth:`state`) and judges it (:meth:`judge`)."""

    #: the system whose rule files (``rules/<system>-<major>.<minor>.btm``) hold the points
    system_name = "kafka"

    def __init__(self, system: Any, topic: str, run_dir: Path, timeline: Recorder,
                 hold_ms: int = 120_000) -> None:
        """``timeline`` records the inject events (progress goes to this module's log)."""
        self.system = system
        self.topic = topic
        self.run_dir = run_dir
        self.timeline = timeline
        self.hold_ms = hold_ms
        self.armed: dict[str, _Armed] = {}
        self._disarmed: list[_Armed] = []

    def arm(self, args: InjectArgs, resolver: Any) -> dict[str, Any]:
        raise NotImplementedError

    def state(self, when: str, armed: _Armed) -> list[dict[str, Any]]:
        """The state a hit is judged on, read independently of the rule at ``when`` (hit,
        kill)."""
        raise NotImplementedError

    def judge(self, armed: _Armed) -> dict[str, Any]:
        raise NotImplementedError

    def _rules(self) -> str | None:
        """The text of the cluster version's rule file (None: the version has none)."""
        path = rule_file(self.system_name, self.system.cluster.version)
        return path.read_text(encoding="utf-8") if path.exists() else None

    def _record_arm(self, armed: _Armed, detail: dict[str, Any]) -> None:
        earlier = self.armed.get(armed.point)
        if earlier is not None:  # the point armed again: its earlier arm is retired and judged alone
            self._retire(earlier, self._release_rules())
        self.armed[armed.point] = armed
        self.timeline.record("inject", point=armed.point, node=",".join(x.name for x in armed.nodes),
                             status="armed", detail=detail)

    def _submit(self, node: Any, rules: str, key: str) -> None:
        # a node started again just before (a schedule arming at its episode) may not listen
        # yet: its JVM starts the agent's listener within seconds
        retrying = Retrying(retry=retry_if_exception_type(ListenerDown), stop=stop_after_delay(ARM_WAIT_S),
                            wait=wait_fixed(1), reraise=True)
        try:
            retrying(submit_rules, node, rules, key)
        except BackendError as exc:
            text = str(exc)
            raise InjectError(text if text.startswith("Byteman rejected") else
                              f"submitting rules to {node.name} failed: {text}") from exc

    # -- hits --------------------------------------------------------------------------------
    def _read_hit(self, armed: _Armed) -> dict[str, Any] | None:
        for node in armed.nodes:
            if node.container.status != "running":
                continue
            code, out = node.container.exec(["cat", armed.events])
            if code != 0:
                continue
            for line in out.splitlines():
                m = _HIT.match(line.strip())
                if m and m.group("point") == armed.point:
                    fields: dict[str, Any] = {"node": node.name}
                    for kv in m.group("fields").split():
                        k, _, v = kv.partition("=")
                        fields[k] = int(v) if v.lstrip("-").isdigit() else v
                    return fields
        return None

    def await_hit(self, point: str, timeout: float) -> dict[str, Any]:
        armed = self.armed.get(point)
        if armed is None:
            raise InjectError(f"point {point} is not armed")
        try:
            hit = wait_until(lambda: self._read_hit(armed), timeout=timeout, interval=0.1,
                             max_interval=0.5, what=f"a thread to reach point {point} "
                             f"({self.topic} offset {armed.n})",
                             logs=lambda: self.system.cluster.node_logs([n.name for n in armed.nodes]))
        except WaitTimeout:
            self.timeline.record("inject", point=point, node=None, status="timeout", detail=None)
            raise
        assert hit is not None  # wait_until returns a truthy value or raises
        armed.hit = hit
        armed.hit_at = time.time()
        armed.at_hit = self.state("hit", armed)
        self.timeline.record("inject", point=point, node=hit["node"], status="hit", detail=hit)
        log.info(f"inject {point}: hit on {hit['node']} {hit}")
        return hit

    def note_fault(self, action: str, node: Any) -> None:
        """After a fault: a node killed or stopped is one the disarm leaves alone (its JVM is
        gone), and the first kill/stop after a hit freezes the state the hit is judged on."""
        if action not in ("kill9", "stop", "powerloss"):
            return
        for armed in self.armed.values():
            armed.restarted.add(node.name)
            if armed.hit is not None and armed.at_kill is None:
                armed.kill = {"action": action, "node": node.name, "t": time.time()}
                armed.at_kill = self.state("kill", armed)

    def before_cut(self, lose: Callable[[Any], dict[str, Any]], node: Any) -> dict[str, Any]:
        """A power loss's cut of ``node``'s unflushed data, once the state a hit is judged on is
        read: the node is dead and its files are as the kill left them (after the cut, the held
        node's log ends where its last flush left it, not where the point held it)."""
        self.note_fault("powerloss", node)
        return lose(node)

    # -- judgement ------------------------------------------------------------------------------
    def summaries(self) -> list[dict[str, Any]]:
        """One ``injection`` block per armed point, in the order they were armed."""
        every = sorted(self._disarmed + list(self.armed.values()), key=lambda a: a.armed_at)
        return [self.judge(a) for a in every]

    def held_node(self) -> str | None:
        """The node of the most recent hit (where a thread is held, unless it was released)."""
        hits = [(a.hit_at, a.hit) for a in self._disarmed + list(self.armed.values()) if a.hit is not None]
        return str(max(hits, key=lambda h: h[0])[1]["node"]) if hits else None

    def first_armed_at(self) -> float | None:
        """Wall time of the first arm of this run (records sent after it are in flight)."""
        return min((a.armed_at for a in self._disarmed + list(self.armed.values())), default=None)

    def replicas_at_kill(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for armed in self._disarmed + list(self.armed.values()):
            rows.extend(armed.at_hit or [])
            rows.extend(armed.at_kill or [])
        return rows

    def disarm_all(self) -> None:
        """Releases held threads and unloads the rules on every running node (idempotent).

        The built-in library's RELEASE rule wakes the held thread on the node's next
        request; it is loaded only now, or it would release the hold at once.
        """
        release = self._release_rules()
        for armed in list(self.armed.values()):
            self._retire(armed, release)

    def _release_rules(self) -> str | None:
        """The version's RELEASE rule, and its companions for other kinds of node (Pulsar:
        brokers and bookies); None when it has none."""
        text = self._rules()
        blocks = rule_blocks(text) if text else {}
        return "\n\n".join(b for name, b in blocks.items()
                           if name == "RELEASE" or name.startswith("RELEASE.")) or None

    def _retire(self, armed: _Armed, release: str | None) -> None:
        """Releases ``armed``'s held threads and unloads its rules; it is judged with the rest."""
        self._disarm(armed, release)
        if self.armed.get(armed.point) is armed:
            del self.armed[armed.point]
        self._disarmed.append(armed)

    def _disarm(self, armed: _Armed, release: str | None) -> None:
        # a node down or started again since the arm holds no thread and has no rule
        live = [n for n in armed.nodes if n.container.status == "running" and n.name not in armed.restarted]
        # each Submit starts a JVM in the node (about 0.4 s): the nodes go in parallel
        released = _each(live, lambda node: self._release(node, armed, release))
        if any(released):
            time.sleep(1.5)  # brokers handle requests many times a second
        _each(list(zip(live, released, strict=True)), lambda pair: self._unload(pair[0], armed, pair[1]))

    def _release(self, node: Any, armed: _Armed, release: str | None) -> bool:
        """Loads ``armed``'s RELEASE rule on ``node``; whether it took it."""
        if not release:
            return False
        try:
            self._submit(node, render_rule(release, {"KEY": armed.key}), armed.key + "-release")
        except InjectError:
            return False  # nothing to release on a node that cannot take rules
        return True

    @staticmethod
    def _unload(node: Any, armed: _Armed, released: bool) -> None:
        """Unloads ``armed``'s rules (and its RELEASE rule, when loaded) from ``node`` in one
        Submit."""
        keys = [armed.key] + ([f"{armed.key}-release"] if released else [])
        try:
            unload_rules(node, *keys)
        except BackendError:
            pass  # the node died meanwhile: it holds nothing


class Injector(RuleInjector):
    """Arms points on one run's Kafka cluster and reports hits (one run, many points)."""

    def __init__(self, system: System, topic: str, run_dir: Path, timeline: Recorder,
                 hold_ms: int = 120_000) -> None:
        if not isinstance(system, CrashPoints):
            raise InjectError(f"{system.name} has no Kafka crash-timing points")
        super().__init__(system, topic, run_dir, timeline, hold_ms)

    # -- arming ------------------------------------------------------------------------
    def arm(self, args: InjectArgs, resolver: Any) -> dict[str, Any]:
        version = self.system.cluster.version
        leader = resolver.resolve(Selector(role="leader", partition=args.partition))
        follower = resolver.resolve(Selector(role="follower", partition=args.partition))
        n = self._target_offset(args)
        key = f"chaos-{args.point}-{secrets.token_hex(4)}"
        events = f"/chaos/{key}.events"
        if args.rule is not None:
            text = Path(args.rule).read_text(encoding="utf-8")
            spec = POINTS.get(args.point)
            nodes = [b for b in self.system.brokers() if b.container.status == "running"]
        else:
            blocks = rule_blocks(self._rules() or "")
            if args.point not in blocks:
                raise InjectError(f"point {args.point} has no rule for kafka {version}")
            text = "\n\n".join(b for name, b in blocks.items()
                                 if name == args.point or name.startswith(args.point + "."))
            spec = POINTS[args.point]
            if spec.role == "followers":
                nodes = [n for n in self.system.followers(self.topic, args.partition)
                         if n.container.status == "running"]
            else:
                nodes = [leader if spec.role == "leader" else follower]
        rendered = render_rule(text, {"TOPIC": self.topic, "PARTITION": args.partition, "N": n,
                                      "N1": n + 1, "KEY": key, "EVENTS": events,
                                      "HOLD_MS": self.hold_ms})
        for node in nodes:
            self._submit(node, rendered, key)
        armed = _Armed(args.point, key, n, args.partition, nodes, events, spec, leader.name,
                       follower.name, time.time())
        self._record_arm(armed, {"n": n, "key": key, "leader": leader.name, "follower": follower.name})
        log.info(f"inject {args.point}: armed on {', '.join(x.name for x in nodes)} "
                      f"for {self.topic}-{args.partition} at offset N={n}")
        return {"point": args.point, "n": n, "nodes": [x.name for x in nodes]}

    def _target_offset(self, args: InjectArgs) -> int:
        """The case's offset, or the partition's high watermark ("next"). A leader elected
        just before answers "high watermark is not caught up" until its followers fetched
        (KIP-207): retried for up to ARM_WAIT_S."""
        if isinstance(args.offset, int):
            return args.offset
        retrying = Retrying(retry=retry_if_exception_type(AdminError), stop=stop_after_delay(ARM_WAIT_S),
                            wait=wait_fixed(1), reraise=True)
        try:
            return int(retrying(self.system.high_watermark, self.topic, args.partition))
        except AdminError as exc:
            raise InjectError(f"inject {args.point}: {exc} (for {ARM_WAIT_S:.0f} s)") from exc

    def replica_offsets(self, when: str, armed: _Armed) -> list[dict[str, Any]]:
        """The armed partition's log end offset on each of its replicas, read from the files
        (a dead node's files too)."""
        out = []
        for node in self.system.brokers():  # every replica (a broker without one is skipped)
            try:
                records = self.system.replica_log(node, self.topic, armed.partition)
            except BackendError:
                continue
            out.append({"node": node.name, "topic": self.topic, "partition": armed.partition,
                        "log_end_offset": log_end_offset(records), "when": when})
        return out

    def state(self, when: str, armed: _Armed) -> list[dict[str, Any]]:
        return self.replica_offsets(when, armed)

    def judge(self, armed: _Armed) -> dict[str, Any]:
        result: dict[str, Any] = {"point": armed.point, "n": armed.n, "leader": armed.leader,
                                  "follower": armed.follower, "hit": False,
                                  "node": armed.hit.get("node") if armed.hit else None,
                                  "detail": armed.hit, "kill": armed.kill}
        spec = armed.spec
        if spec is None:
            result["hit"] = armed.hit is not None
            result["observed"] = "rule fired" if armed.hit else "rule never fired"
            return result
        n = armed.n
        result["meaning"] = spec.meaning
        result["seed"] = spec.seed
        state = armed.at_kill or armed.at_hit or []
        leos = {r["node"]: r["log_end_offset"] for r in state}
        lleo, fleo = leos.get(armed.leader), leos.get(armed.follower)
        when = "kill" if armed.at_kill else "hit"
        if spec.fetch_hold:  # a hold on a fetch, wherever the follower stands
            result["expected"] = ("the follower's fetch held, at the follower's log end offset "
                                  "read from its files")
            if armed.hit is None:
                result["observed"] = "the point was never reached"
                return result
            fetched = armed.hit.get("fetch_offset")
            result["leader"] = armed.hit.get("node")
            if isinstance(armed.hit.get("follower"), int):
                result["follower"] = self.system.node_name(armed.hit["follower"])
            lleo, fleo = leos.get(result["leader"]), leos.get(result["follower"])
            result["observed"] = (f"leader LEO={lleo}, follower LEO={fleo}, fetch_offset={fetched}"
                                  f" (at {when})")
            result["hit"] = fleo is not None and fetched == fleo
            return result
        if spec.truncate_hold:  # a hold at a follower's truncation: its files against the rule's leo
            result["expected"] = ("the follower held at its truncation, its log end offset read from "
                                  "its files equal to the rule's leo")
            if armed.hit is None:
                result["observed"] = "the point was never reached"
                return result
            held = armed.hit.get("node")
            result["follower"] = held
            fleo = leos.get(held)
            before = armed.hit.get("leo_before")
            result["observed"] = (f"follower LEO={fleo}, rule leo={armed.hit.get('leo')}, "
                                  f"target={armed.hit.get('target')}"
                                  + (f", leo_before={before}" if before is not None else "")
                                  + f" (at {when})")
            result["hit"] = fleo is not None and fleo == armed.hit.get("leo")
            return result
        assert spec.leader_leo is not None and spec.follower_leo is not None and spec.hw is not None
        result["expected"] = (f"leader LEO={n + spec.leader_leo}, follower LEO={n + spec.follower_leo}"
                              f", {spec.hw_field}={n + spec.hw}"
                              + (" on every follower" if spec.every_follower else ""))
        if armed.hit is None:
            result["observed"] = "the point was never reached"
            return result
        hw = armed.hit.get(spec.hw_field)
        others = [r for r in state if r["node"] not in (armed.leader, armed.follower)]
        result["observed"] = (f"leader LEO={lleo}, follower LEO={fleo}, {spec.hw_field}={hw}"
                              + "".join(f", {r['node']} LEO={r['log_end_offset']}" for r in others)
                              + f" (at {when})")
        result["hit"] = (lleo == n + spec.leader_leo and fleo == n + spec.follower_leo
                         and hw == n + spec.hw
                         and (not spec.every_follower
                              or all(r["log_end_offset"] == n + spec.follower_leo for r in others)))
        return result
