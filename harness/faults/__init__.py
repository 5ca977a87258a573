"""Fault primitives on cluster nodes, looked up by name, each with a heal.

``kill9`` (SIGKILL; the container keeps its data), ``remove`` (SIGKILL, and the node stays
out for good: nothing starts it again during the run), ``stop`` (SIGTERM, then
SIGKILL after a grace period), ``start``, ``pause``/``resume`` (cgroup
freezer), ``partition``/``heal`` (iptables run from the host inside the
container's network namespace: no capability is needed in the container),
``diskfull``/``heal`` (the system makes the node's disks look full), ``readonly``/``heal`` (a
lazy disk's writes fail with EROFS), ``corrupt`` (a bit flip
or a truncation of a file of a node's lazy disk: :mod:`harness.backend.lazyfs`),
``snapshot``/``rollback`` (a down node's lazy disk copied aside, and put back), ``replace`` (a
node replaced by a new one with an empty lazy disk at the same address), ``degrade``/``heal``
(loss, a rate limit, delay with jitter, duplication and reordering between chosen nodes:
:mod:`harness.faults.degrade`), ``clock``/``heal`` (a jump, a drift or a strobe of a node's own
wall clock: :mod:`harness.faults.clock`), ``join`` (a spare node's process started: a new
member, :mod:`harness.backend.spare`) and ``decommission`` (a node drained by the system,
stopped cleanly and unregistered, then out for good like a removed one).

:class:`Nemesis` remembers what it did so that :meth:`Nemesis.heal_all` can
undo it; every operation is idempotent, and ``heal_all`` is safe to call at
any time, any number of times (it is the runner's cleanup step).
"""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict
from typing import Any

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_fixed

from ..backend.cluster import Cluster, Node
from ..backend.netns import CHAIN, NetNs
from ..errors import BackendError, FaultError, HarnessError
from ..history import Recorder
from ..wait import wait_until
from .clock import ClockDriver, ClockPlan
from .degrade import Effects, Shaping, interface_of, loss_rules, shape, unshape

log = logging.getLogger(__name__)

__all__ = ["Nemesis", "FAULTS", "DIRECTIONS", "Effects", "ClockPlan"]

DIRECTIONS = ("both", "in", "out")
FREEZE_ATTEMPTS = 5
_CHAIN = CHAIN


class Nemesis:
    """Applies and heals faults on one cluster, recording each in the timeline."""

    def __init__(self, cluster: Cluster, timeline: Recorder | None = None) -> None:
        self.cluster = cluster
        self.timeline = timeline
        self.paused: set[str] = set()
        #: nodes a fault step took down and nothing started again, in the order they went down
        self.down: dict[str, None] = {}
        #: nodes a ``remove`` took out for good: no step, heal or recovery starts them
        self.removed: set[str] = set()
        self.partitioned: set[str] = set()
        self.last_freeze_attempts = 0
        #: the system's :meth:`~harness.systems.base.StartGate.before_start`, if it has one
        self.before_start: Callable[[Node], dict[str, Any] | None] | None = None
        #: the system's :meth:`~harness.systems.base.DiskFull.set_disk_full`, if it has one
        self.set_disk_full: Callable[[Node, bool], dict[str, Any]] | None = None
        #: nodes whose disks a ``diskfull`` made look full, not healed since
        self.full: set[str] = set()
        #: nodes whose outgoing traffic a ``degrade`` shapes: node -> its shaping
        self.shaped: dict[str, Shaping] = {}
        #: what each node's delayers did (packets held, duplicated...), for the next heal's entry
        self.delayed: dict[str, dict[str, Any]] = {}
        #: nodes whose wall clock a ``clock`` fault moved -> the drift or strobe moving it, if any
        self.clocked: dict[str, ClockDriver | None] = {}
        #: the seed of the delayers' draws (each ``degrade`` adds its count)
        self.seed = 0
        self._degrades = 0
        #: the target of each ``degrade`` -> the nodes it shaped (a heal of it unshapes them)
        self.shaped_for: dict[str, set[str]] = {}

    # -- bookkeeping -------------------------------------------------------------
    def _record(self, action: str, node: Node | None, role: str | None = None, **detail: Any) -> None:
        if self.timeline is not None:
            self.timeline.record("fault", action=action, node=node.name if node else None,
                                 role=role, detail=detail or None)

    def apply(self, action: str, node: Node, *, role: str | None = None, **params: Any) -> None:
        """Runs fault ``action`` (a name from :data:`FAULTS`) on ``node``."""
        try:
            fn = FAULTS[action]
        except KeyError:
            raise FaultError(f"unknown fault {action!r} (known: {', '.join(sorted(FAULTS))})") from None
        self.last_freeze_attempts = 0
        try:
            returned = fn(self, node, **params)
        except BackendError as exc:
            raise FaultError(f"{action} on {node.name} failed: {exc}") from exc
        detail = {k: _plain(v) for k, v in params.items() if not callable(v)}
        if isinstance(returned, dict):
            detail.update(returned)
        if self.last_freeze_attempts > 1:
            detail["freeze_attempts"] = self.last_freeze_attempts
        self._record(action, node, role, **detail)

    # -- process faults --------------------------------------------------------------
    def kill9(self, node: Node) -> None:
        if node.container.status in ("running", "paused"):
            if node.container.status == "paused":
                node.container.unpause()  # SIGKILL to a frozen task is delivered on thaw
                self.paused.discard(node.name)
            node.container.kill("KILL")
        self.down.pop(node.name, None)
        self.down[node.name] = None
        self._network_died(node)
        if node.disk is None:
            self.full.discard(node.name)  # a diskfull rule dies with its JVM (a full disk stays full)

    def powerloss(self, node: Node, lose: Callable[[Node], dict[str, Any]]) -> dict[str, Any]:
        """kill -9, then ``lose`` (the system's) cuts what the node had not flushed; returns
        what was cut, for the timeline."""
        self.kill9(node)
        wait_until(lambda: node.container.status not in ("running", "paused"), timeout=30,
                   what=f"{node.name} dead after kill -9")
        return lose(node)

    def corrupt(self, node: Node, file: str, how: str, offset: int | None = None,
                prefer: str | None = None) -> dict[str, Any]:
        """Changes the largest file of kind ``file`` on ``node``'s lazy disk (one whose path
        has ``prefer``, the case's topic, if any): ``bitflip`` at ``offset`` or ``truncate``
        to it, by default the middle; returns what it changed. Nothing heals it: the system
        must find it (a checksum, a replica) or the checker will."""
        if node.disk is None:
            raise FaultError(f"corrupt: {node.name} has no lazy disk (set disk: lazy)")
        files = node.disk.files(file, prefer)
        if not files:
            raise FaultError(f"corrupt: no {file} file on {node.name}'s disk yet")
        return node.disk.corrupt(files[0], how, offset)

    def snapshot(self, node: Node) -> dict[str, Any]:
        """Copies ``node``'s lazy disk aside (the node down: its files at rest)."""
        return {"bytes": self._at_rest(node, "snapshot").snapshot("case")}

    def rollback(self, node: Node) -> dict[str, Any]:
        """Puts ``node``'s lazy disk back as its last ``snapshot`` (the node down), as a disk
        restored from an old image: everything written since is gone."""
        return {"bytes": self._at_rest(node, "rollback").rollback("case")}

    def replace(self, node: Node, forget: Callable[[Node], dict[str, Any]]) -> dict[str, Any]:
        """Replaces ``node`` by a new node with an empty disk at the same address: kill -9 (if
        it runs), its lazy disk emptied, ``forget`` (the system's: what the cluster keeps of
        the old node, a bookie's cookie), then the new node started. Returns what was
        removed, for the timeline."""
        if node.disk is None:
            raise FaultError(f"replace: {node.name} has no lazy disk (set disk: lazy)")
        self.removed.discard(node.name)  # a new machine at a removed or decommissioned node's address
        if node.container.status in ("running", "paused"):
            self.kill9(node)
            wait_until(lambda: node.container.status not in ("running", "paused"), timeout=30,
                       what=f"{node.name} dead after kill -9")
        detail: dict[str, Any] = {"bytes_wiped": node.disk.wipe()}
        detail.update(forget(node))
        started = self.start(node)
        if started:
            detail.update(started)
        return detail

    @staticmethod
    def _at_rest(node: Node, what: str) -> Any:
        if node.disk is None:
            raise FaultError(f"{what}: {node.name} has no lazy disk (set disk: lazy)")
        if node.container.status in ("running", "paused"):
            raise FaultError(f"{what}: {node.name} is running; {what} a node that is down "
                             "(after kill9, stop or powerloss)")
        return node.disk

    def stop(self, node: Node, grace: int = 30) -> None:
        if node.container.status == "paused":
            node.container.unpause()
            self.paused.discard(node.name)
        if node.container.status == "running":
            node.container.stop(timeout=grace)
        self.down.pop(node.name, None)
        self.down[node.name] = None
        self._network_died(node)
        if node.disk is None:
            self.full.discard(node.name)

    def _network_died(self, node: Node) -> None:
        """A container's network namespace dies with its process, and its rules with it; a
        host's network outlives the node, so its rules are flushed here, as Docker would."""
        ns = node.container.netns() if node.container.net_persists else None
        if ns is not None and node.name in self.partitioned:
            _flush_chain(ns)
        self.partitioned.discard(node.name)
        self._drop_shaping(node.name, ns=ns)

    def remove(self, node: Node) -> None:
        """kill -9, and ``node`` stays out for good, as a machine lost with its disk: no
        ``start``, heal or recovery starts it again (only the cleanup of a kept cluster)."""
        self.kill9(node)
        self.down.pop(node.name, None)
        self.removed.add(node.name)

    def join(self, node: Node, wait: Callable[[Node], dict[str, Any]]) -> dict[str, Any]:
        """Adds a spare ``node`` to the cluster: opens its gate (its process starts, a member
        the cluster has never seen) and waits until the system counts it (``wait``, the
        system's). Returns what that waited for and the seconds taken (joined_s)."""
        if node.gate is None:
            spares = ", ".join(n.name for n in self.cluster.spec.spares) or "none"
            raise FaultError(f"join: {node.name} is no spare of cluster {self.cluster.spec.name} "
                             f"(spares: {spares})")
        if node.gate.joined:
            raise FaultError(f"join: {node.name} has joined already")
        t0 = time.monotonic()
        node.gate.open()
        detail = dict(wait(node))
        detail["joined_s"] = round(time.monotonic() - t0, 3)
        return detail

    def decommission(self, node: Node, drain: Callable[[Node], dict[str, Any]],
                     retire: Callable[[Node], dict[str, Any]], grace: int = 30) -> dict[str, Any]:
        """Takes ``node`` out as an operator does: ``drain`` (the system's: what it holds moves
        to the others), a clean stop, ``retire`` (the system's: its registration removed).
        Like a ``remove``, no step, heal or recovery starts it again (only the cleanup of a
        kept cluster). Returns what each part did and the seconds of the stop."""
        detail = dict(drain(node))
        t0 = time.monotonic()
        self.stop(node, grace)
        detail["stopped_s"] = round(time.monotonic() - t0, 3)
        detail.update(retire(node))
        self.down.pop(node.name, None)
        self.removed.add(node.name)
        return detail

    def start(self, node: Node) -> dict[str, Any] | None:
        """Starts a stopped ``node`` once the system lets it (:attr:`before_start`); what
        that waited for goes into the fault's detail."""
        if node.name in self.removed:
            raise FaultError(f"{node.name} was removed for good (a remove or decommission step): "
                             "nothing starts it again")
        waited = None
        if node.container.status not in ("running", "paused"):
            waited = self._gate(node)
            node.container.start()
        wait_until(lambda: node.container.status == "running", timeout=30,
                   what=f"{node.name} running after start")
        self.down.pop(node.name, None)
        return waited

    def _gate(self, node: Node) -> dict[str, Any] | None:
        """The system's wait before ``node`` starts; a wait that fails (ZooKeeper down, its
        bound passed) is logged and the node is started anyway, as before gates existed."""
        if self.before_start is None:
            return None
        try:
            return self.before_start(node)
        except HarnessError as exc:
            log.warning("starting %s without waiting: %s", node.name, exc)
            return {"start_gate": str(exc)[:200]}

    def pause(self, node: Node) -> None:
        """Freezes ``node``'s cgroup.

        runc gives the kernel a bounded time to freeze every task and fails with
        "unable to freeze" (thawing again) when a busy JVM's threads are not all
        frozen in time: that is retried, up to :data:`FREEZE_ATTEMPTS` times, and
        the number of attempts is kept for the timeline.
        """
        self.last_freeze_attempts = 0
        for attempt in Retrying(stop=stop_after_attempt(FREEZE_ATTEMPTS), wait=wait_fixed(0.2),
                                retry=retry_if_exception(_freeze_timed_out), reraise=True):
            with attempt:
                self.last_freeze_attempts += 1
                if node.container.status == "running":
                    node.container.pause()
        self.paused.add(node.name)

    def resume(self, node: Node) -> None:
        if node.container.status == "paused":
            node.container.unpause()
        self.paused.discard(node.name)

    # -- storage faults ----------------------------------------------------------------
    def diskfull(self, node: Node) -> dict[str, Any]:
        """Makes ``node``'s disks full: on a lazy disk every write fails with ENOSPC and the
        disk reports no free space (for any system, until ``heal``: a restart does not empty
        it); otherwise the system's :attr:`set_disk_full`. ``heal`` undoes it."""
        if node.disk is not None:
            node.disk.set_mode("full")
            self.full.add(node.name)
            return {"disk": "lazy: writes fail with ENOSPC, no free space reported"}
        if self.set_disk_full is None:
            raise FaultError(f"diskfull: the {self.cluster.spec.name} cluster has no disk-full fault")
        self.full.add(node.name)  # first: a heal unloads the rule even if the wait failed
        return self.set_disk_full(node, True)

    def readonly(self, node: Node) -> dict[str, Any]:
        """Makes ``node``'s lazy disk read-only: every write fails with EROFS (as a file system
        the kernel remounted read-only after an error), until ``heal``."""
        if node.disk is None:
            raise FaultError(f"readonly: {node.name} has no lazy disk (set disk: lazy)")
        node.disk.set_mode("readonly")
        self.full.add(node.name)
        return {"disk": "lazy: writes fail with EROFS"}

    def _unfill(self, node: Node) -> None:
        if node.name in self.full and node.disk is not None:
            node.disk.set_mode("normal")  # kept in ``full`` if this fails: heal_all tries again
            self.full.discard(node.name)
            return
        if node.name not in self.full or self.set_disk_full is None:
            return
        if node.container.status == "running":  # a node killed since lost the rule with its JVM
            self.set_disk_full(node, False)  # kept in ``full`` if this fails: heal_all tries again
        self.full.discard(node.name)

    # -- network faults ----------------------------------------------------------------
    def partition(self, node: Node, peers: Iterable[Node] | None = None,
                  direction: str = "both") -> None:
        """Cuts ``node`` from ``peers`` (default: every other node of the cluster).

        ``direction``: ``both``, ``in`` (drop what peers send to node) or
        ``out`` (drop what node sends to peers). The harness's own client
        traffic (through the published loopback ports) is not cut.
        """
        if direction not in DIRECTIONS:
            raise FaultError(f"partition direction {direction!r} (expected {', '.join(DIRECTIONS)})")
        targets = list(peers) if peers is not None else \
            [n for n in self.cluster.nodes() if n.name != node.name]
        ips = [p.container.ip() for p in targets if p.container.status in ("running", "paused")]
        ns = node.container.netns()
        _ensure_chain(ns)
        for ip in ips:
            if direction in ("both", "in"):
                _iptables(ns, ["-A", _CHAIN, "-s", ip, "-j", "DROP"])
            if direction in ("both", "out"):
                _iptables(ns, ["-A", _CHAIN, "-d", ip, "-j", "DROP"])
        self.partitioned.add(node.name)

    def degrade(self, node: Node, effects: Effects, peers: Iterable[Node] | None = None,
                direction: str = "both") -> dict[str, Any]:
        """Degrades the network between ``node`` and ``peers`` (default: every other node of
        the cluster): ``effects`` on what ``node`` sends them (``out``), what they send it
        (``in``), or both. Loss drops packets in ``node``'s own chain; the other effects shape
        the sender's interface (:mod:`harness.faults.degrade`), and a later ``degrade`` from
        the same sender replaces its shaping. Returns the nodes shaped, for the timeline."""
        if direction not in DIRECTIONS:
            raise FaultError(f"degrade direction {direction!r} (expected {', '.join(DIRECTIONS)})")
        targets = list(peers) if peers is not None else \
            [n for n in self.cluster.nodes() if n.name != node.name]
        live = [p for p in targets if p.container.status in ("running", "paused")]
        if effects.loss_pct:
            ns = node.container.netns()
            _ensure_chain(ns)
            matches = [(flag, p.container.ip()) for p in live for flag, way in (("-s", "in"), ("-d", "out"))
                       if direction in ("both", way)]
            for rule in loss_rules(matches, effects.loss_pct / 100):
                _iptables(ns, rule)
            self.partitioned.add(node.name)  # its chain holds rules: a heal flushes them
        shaped: list[str] = []
        if effects.shapes:
            senders = ([(node, [p.container.ip() for p in live])] if direction in ("both", "out") else []) \
                + ([(p, [node.container.ip()]) for p in live] if direction in ("both", "in") else [])
            for sender, ips in senders:
                sender_ns = sender.container.netns()
                old = self.shaped.get(sender.name)
                self._drop_shaping(sender.name, ns=sender_ns)
                shaping = Shaping(old.iface if old else interface_of(sender_ns, sender.container.ip()))
                self.shaped[sender.name] = shaping  # first: a heal unshapes it even if this fails
                self.shaped_for.setdefault(node.name, set()).add(sender.name)
                self._degrades += 1
                shape(sender_ns, shaping, ips, effects, seed=self.seed + self._degrades)
                shaped.append(sender.name)
        return {"shaped": shaped} if shaped else {}

    def _drop_shaping(self, name: str, ns: NetNs | None) -> None:
        """Ends the shaping of node ``name`` (``ns`` None: its network namespace died with
        it, only the delayer is left to stop); keeps what its delayer did for the next heal."""
        shaping = self.shaped.pop(name, None)
        if shaping is None:
            return
        counts = unshape(ns, shaping)
        if counts:
            self.delayed[name] = counts

    def _unshape(self, names: Iterable[str]) -> None:
        """Removes the shaping of the nodes ``names`` (of a dead node only its delayer: the
        rest went with its network namespace)."""
        names = [name for name in names if name in self.shaped]
        if not names:
            return
        by_name = {n.name: n for n in self.cluster.nodes()}
        for name in names:
            n = by_name.get(name)
            self._drop_shaping(name, ns=_network_of(n) if n is not None else None)

    def _delayed(self) -> dict[str, Any]:
        """What the stopped delayers did, for a heal's timeline entry (then forgotten)."""
        done, self.delayed = self.delayed, {}
        return {"delayed": done} if done else {}

    # -- clock faults ------------------------------------------------------------------
    def clock(self, node: Node, plan: ClockPlan) -> dict[str, Any]:
        """Moves ``node``'s own wall clock (a cluster with fake clocks): a jump at once, or a
        drift or a strobe in a thread until its ``for_s`` or a heal; a later clock fault on the
        node replaces a drift or a strobe. Returns the offset, for the timeline."""
        if node.clock is None:
            raise FaultError(f"clock: {node.name} has the host's clock (a case with a clock step makes "
                             "its cluster with clocks of their own)")
        driver = self.clocked.pop(node.name, None)
        if driver is not None:
            driver.stop()
        if plan.jump_s is not None:
            node.clock.set(node.clock.offset() + plan.jump_s)
            self.clocked[node.name] = None
        else:
            self.clocked[node.name] = ClockDriver(node.clock, plan).start()
        return {"offset_s": round(node.clock.offset(), 3)}

    def _reset_clock(self, node: Node) -> dict[str, Any]:
        """Sets ``node``'s clock back to the real time; returns what it was (none: untouched)."""
        if node.name not in self.clocked or node.clock is None:
            return {}
        driver = self.clocked.pop(node.name)
        done = driver.stop() if driver is not None else {}
        was = node.clock.offset()
        node.clock.set(0.0)
        return {node.name: {"offset_s": round(was, 3), **done}}

    def heal(self, node: Node | None = None) -> None:
        """Removes network and clock faults (of ``node``, or of every node) and resumes paused
        nodes."""
        nodes = [node] if node is not None else self.cluster.nodes()
        clocks: dict[str, Any] = {}
        for n in nodes:
            if n.container.status == "paused":
                n.container.unpause()
            self.paused.discard(n.name)
            ns = _network_of(n)
            if ns is not None:
                _flush_chain(ns)
            self.partitioned.discard(n.name)
            self._unshape({n.name} | self.shaped_for.pop(n.name, set()))
            self._unfill(n)
            clocks.update(self._reset_clock(n))
        detail: dict[str, Any] = {**self._delayed(), **({"clocks": clocks} if clocks else {})}
        self._record("heal", node, None, **detail)

    def heal_all(self, *, start_down: bool = True, start_removed: bool = False) -> list[str]:
        """Undoes everything: resume, unpartition, and (by default) start stopped nodes;
        nodes removed for good only with ``start_removed`` (the cleanup of a kept cluster).

        Never raises for a single node: returns the problems met instead, so the
        runner's cleanup always reaches teardown.
        """
        problems: list[str] = []
        try:
            nodes = self.cluster.nodes()
        except BackendError as exc:
            return [str(exc)]
        clocks: dict[str, Any] = {}
        for n in nodes:
            try:
                clocks.update(self._reset_clock(n))  # a clock is the node's file: down or up
                status = n.container.status
                if status == "paused":
                    n.container.unpause()
                    status = "running"
                if status == "running" or n.container.net_persists:
                    ns = n.container.netns()
                    _flush_chain(ns)
                    self._unshape([n.name])
                if status == "running":
                    self._unfill(n)
                elif start_down and status in ("exited", "created") and (
                        start_removed or n.name not in self.removed):
                    self._gate(n)
                    n.container.start()
            except HarnessError as exc:  # a backend or fault error, or a heal's wait timing out
                problems.append(f"{n.name}: {exc}")
        for name in list(self.shaped):  # a node gone from the cluster: its delayer still stops
            try:
                self._drop_shaping(name, ns=None)
            except (OSError, subprocess.SubprocessError) as exc:
                problems.append(f"{name}: stopping its delayer: {exc}")
        self.paused.clear()
        self.partitioned.clear()
        self.shaped_for.clear()
        self.full.clear()
        if start_down:
            self.down.clear()
        if start_removed:
            self.removed.clear()
        if self.timeline is not None:
            detail = {**({"problems": problems} if problems else {}), **self._delayed(),
                      **({"clocks": clocks} if clocks else {})}
            self.timeline.record("fault", action="heal-all", node=None, role=None,
                                 detail=detail or None)
        return problems


def _plain(value: Any) -> Any:
    if isinstance(value, Node):
        return value.name
    if isinstance(value, Effects):
        return value.as_dict()
    if isinstance(value, ClockPlan):
        return {k: v for k, v in asdict(value).items() if v is not None and not (k == "period_s" and
                                                                                value.strobe_s is None)}
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    return value


def _network_of(node: Node) -> NetNs | None:
    """The network ``node``'s rules are in, while there is one: a container's while its
    process lives, a host's always."""
    live = node.container.net_persists or node.container.status in ("running", "paused")
    return node.container.netns() if live else None


def _iptables(ns: NetNs, args: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    return ns.run(["iptables", "-w", "5", *args], check=check)


def _ensure_chain(ns: NetNs) -> None:
    if _iptables(ns, ["-L", _CHAIN, "-n"], check=False).returncode != 0:
        _iptables(ns, ["-N", _CHAIN])
    for hook in ("INPUT", "OUTPUT"):
        if _iptables(ns, ["-C", hook, "-j", _CHAIN], check=False).returncode != 0:
            _iptables(ns, ["-I", hook, "1", "-j", _CHAIN])


def _flush_chain(ns: NetNs) -> None:
    if _iptables(ns, ["-L", _CHAIN, "-n"], check=False).returncode == 0:
        _iptables(ns, ["-F", _CHAIN])


Fault = Callable[..., Any]
#: The fault registry: case files name faults by these keys.
FAULTS: dict[str, Fault] = {
    "kill9": Nemesis.kill9,
    "remove": Nemesis.remove,
    "powerloss": Nemesis.powerloss,
    "corrupt": Nemesis.corrupt,
    "snapshot": Nemesis.snapshot,
    "rollback": Nemesis.rollback,
    "replace": Nemesis.replace,
    "join": Nemesis.join,
    "decommission": Nemesis.decommission,
    "stop": Nemesis.stop,
    "start": Nemesis.start,
    "pause": Nemesis.pause,
    "resume": Nemesis.resume,
    "partition": Nemesis.partition,
    "degrade": Nemesis.degrade,
    "clock": Nemesis.clock,
    "diskfull": Nemesis.diskfull,
    "readonly": Nemesis.readonly,
    "heal": Nemesis.heal,
}


def _freeze_timed_out(exc: BaseException) -> bool:
    return isinstance(exc, BackendError) and "unable to freeze" in str(exc)
