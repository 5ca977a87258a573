"""Fault schedules drawn from a seed, and the case files they become.

A :class:`Schedule` is a base workload (records written before any fault, a background load
or not) and a few :class:`Episode` s, each one fault at a moment: at a crash-timing point
(armed, awaited, then the node it holds or a role killed), or by role (kill -9, power loss,
stop, pause, a partition), with the node started, resumed or healed again after a hold or
left down, or by role with parameters (a degraded network toward every other node, a moved
wall clock: only when the campaign asks for those faults). :func:`draw` makes one from a
seed, the same one for the same seed, system, version and weights; :func:`case_text` writes
it as a case file (YAML) that :func:`harness.case.load_case_text` validates like any other.
The expectation is the system's promise for the drawn settings (acks=all, at least two
in-sync replicas; a Pulsar write quorum acknowledged): nothing acknowledged lost, replicas
and bookies that agree; what the settings allow (duplicates without idempotence, a reordered
retry) is observed.

At most one power loss per schedule: Kafka relies on replication, not fsync, so two power
losses within its flush interval may lose acknowledged records without any bug.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ..clusters import get_cluster
from ..errors import HarnessError
from ..points import POINTS, available_points
from ..run.chaos import draw_params

__all__ = ["Episode", "Schedule", "draw", "case_text", "faults_of", "PROMISED", "KINDS", "FAULTS"]

#: what an episode does
KINDS = ("point", "crash", "pause", "partition", "degrade", "clock")
#: every fault a campaign may draw (``faults_of``: a system's own, by default)
FAULTS = ("kill9", "stop", "pause", "partition", "powerloss", "degrade", "clock")
#: faults held then healed, with drawn parameters: a degraded network (one of four mixes
#: toward every other node) and a moved wall clock (a jump or a strobe), as `chaos` draws them
_WITH_PARAMS = ("degrade", "clock")
#: the anomalies a schedule's case judges: what the system promises for the drawn settings
PROMISED = {
    "kafka": ("lost-write", "inconsistent-offsets", "replica-divergence", "truncation-skip", "unexpected"),
    "pulsar": ("lost-write", "under-replicated", "bookie-divergence", "past-closed-end", "unexpected"),
}


@dataclass(frozen=True)
class _Profile:
    """What a system's schedules use: the roles faults aim at, those a point's fault aims at
    (the node the point holds: a thread held on a node the fault spares stays held, and the
    recovery waits for a replica that cannot catch up),
    the node faults, the topic and client settings, the steps that settle the base records,
    and what the case observes."""

    roles: tuple[str, ...]
    point_roles: tuple[str, ...]
    faults: tuple[str, ...]
    topic: Mapping[str, object]
    client: Mapping[str, object]
    settle: tuple[Mapping[str, object], ...]
    observe: tuple[str, ...]
    #: the first episode's point armed before the load and every later one once the load has
    #: ended (Kafka's rules hold offset N exactly: armed under load, the followers' fetches pass
    #: N before the rule is in), or each at its episode, under load or not (Pulsar's hold the
    #: first entry at or after N; armed early, a write-path point holds the load's first
    #: entry, and every later acknowledgement waits behind it)
    arm_early: bool = True
    #: seconds an episode waits for its point and its record (Pulsar: a killed owner's bundle
    #: moves after its 15-s metadata session expires and the client looks the topic up again)
    await_s: int = 30


#: points whose state needs a failure of another kind than the leader's or owner's first
_TRIGGERS = {"ENSEMBLE-CHANGE": "bookie"}
#: points a drawn schedule cannot reach (a consumer acknowledging: the schedules have none)
_UNREACHABLE = frozenset({"CURSOR-UNPERSISTED"})


def _trigger(point: str, profile: _Profile) -> str | None:
    """The role to kill first so that ``point`` can be hit (None: the load reaches it)."""
    spec = POINTS[point]
    if point in _TRIGGERS:
        return _TRIGGERS[point]
    if spec.fetch_hold or spec.truncate_hold or spec.role == "new-owner":
        return profile.roles[0]  # the leader or the owner
    return None


def _acked_at_hit(point: str) -> bool:
    """Whether the write a point holds is acknowledged when it hits (every follower has it:
    HW-LEADER-ONLY), so the episode waits for that acknowledgement before its fault."""
    return POINTS[point].every_follower


_OBSERVE = ("unseen", "duplicate", "nonmonotonic-send", "nonmonotonic-poll")
_PROFILES = {
    "kafka": _Profile(("leader", "follower"), ("held",), ("kill9", "stop", "pause", "partition",
                                                                    "powerloss"),
                      {"partitions": 1, "replication_factor": 3, "min_insync_replicas": 2},
                      {"acks": "all", "retries": 5, "request_timeout_ms": 30000,
                       "delivery_timeout_ms": 120000},
                      ({"await": {"isr_size": {"partition": 0, "size": 3}, "timeout": "60s"}},), _OBSERVE),
    "pulsar": _Profile(("owner", "bookie", "non-owner"), ("held",), ("kill9", "stop", "pause",
                                                                            "partition"),
                       {"partitions": 1, "ensemble": 2, "write_quorum": 2, "ack_quorum": 2},
                       {"batching": False, "send_timeout_ms": 60000}, (), _OBSERVE + ("under-write-quorum",),
                       arm_early=False, await_s=90),
}


@dataclass(frozen=True)
class Episode:
    """One fault: ``kind`` (:data:`KINDS`); ``point`` (kind point) the crash-timing point to
    arm and await; ``fault`` kill9, powerloss, stop, pause or partition; ``target`` a role;
    ``restart``: the node is started (resumed, healed) again after ``hold_s``; ``inflight``:
    (kind point) one record sent in the background once the point is armed, the write the
    point holds."""

    kind: str
    fault: str
    target: str
    hold_s: float = 5.0
    restart: bool = True
    point: str | None = None
    inflight: bool = False
    #: (kind degrade, clock) the fault's drawn parameters, as :func:`harness.run.chaos.draw_params`
    #: gives them (``delay_ms``, ``loss_pct``, ...; ``jump_s``, ``strobe_s``, ``period_s``)
    params: tuple[tuple[str, float], ...] = ()
    #: (kind point) the role killed first, so that the point's state can happen: a leader
    #: change for a hold on the new leader's first fetch or a follower's truncation, an
    #: ownership change for a new owner's points, a bookie failure for an ensemble change;
    #: started again at the episode's end
    trigger: str | None = None
    #: the trigger's node is started again at the episode's end (the last episode may leave
    #: it to the recovery, once shrinking found it needs no restart)
    trigger_restart: bool = True

    def label(self) -> str:
        where = ((f"kill9 {self.trigger}, " if self.trigger else "")
                 + (f"{self.point} then " if self.point else ""))
        step = _step_params(self.fault, dict(self.params), self.hold_s)
        shown = {k: v for k, v in step.items() if k != "for"}
        what = f" ({', '.join(f'{k} {v}' for k, v in shown.items())})" if shown else ""
        return f"{where}{self.fault} {self.target}{what}" + ("" if self.restart else " (left down)")


@dataclass(frozen=True)
class Schedule:
    """A drawn run: ``base`` records first; ``load_s`` seconds of background load at
    ``rate`` (0: none) during the episodes; the episodes in order."""

    seed: int
    system: str
    cluster: str
    version: str
    base: int
    episodes: tuple[Episode, ...]
    load_s: int = 0
    rate: int = 50
    broker_config: Mapping[str, str] = field(default_factory=dict)
    #: the nodes' disks (``lazy``: a power loss drops every unsynced byte, on any system)
    disk: str = "plain"

    def label(self) -> str:
        return "; ".join(e.label() for e in self.episodes) or "no fault"

    def size(self) -> int:
        """How big the schedule is (fewer episodes, records and seconds is smaller; a power
        loss is bigger than a kill -9, which loses nothing the page cache holds)."""
        per = sum(2 * e.inflight + e.restart + bool(e.trigger) * (1 + e.trigger_restart) + int(e.hold_s)
                  + (e.fault == "powerloss") for e in self.episodes)
        return 100 * len(self.episodes) + per + self.base // 10 + self.load_s


def _weighted(rng: random.Random, options: list[str], seen: Mapping[str, int]) -> str:
    """One of ``options``, preferring those ``seen`` counts less (1 / (1 + count))."""
    weights = [1.0 / (1 + seen.get(o, 0)) for o in options]
    return rng.choices(options, weights=weights)[0]


def faults_of(system: str, disk: str = "plain", wanted: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The faults a campaign on ``system`` draws: ``wanted`` (each checked: ``powerloss`` needs
    Kafka or a lazy disk), else the system's own (kill9, stop, pause, partition; Kafka's or a
    lazy disk's power loss)."""
    own = list(_PROFILES[system].faults)
    if disk == "lazy" and "powerloss" not in own:
        own.append("powerloss")
    if wanted is None:
        return tuple(own)
    allowed = own + [f for f in _WITH_PARAMS if f not in own]
    for f in wanted:
        if f not in allowed:
            why = (" (a power loss on Pulsar needs --disk lazy)" if f == "powerloss" else
                   f" (known: {', '.join(FAULTS)})" if f not in FAULTS else "")
            raise HarnessError(f"explore cannot draw fault {f!r} on {system}{why}")
    if not wanted:
        raise HarnessError("give at least one fault to draw")
    return tuple(dict.fromkeys(wanted))


def _step_params(fault: str, params: Mapping[str, float], hold_s: float) -> dict[str, object]:
    """A drawn fault's parameters in the case syntax (cases/SCHEMA.md's degrade and clock)."""
    out: dict[str, object] = {}
    for key, value in params.items():
        if key.endswith("_pct"):
            out[key.removesuffix("_pct")] = f"{value:g}%"
        elif key.endswith("_ms"):
            out[key.removesuffix("_ms")] = f"{value:g}ms"
        elif key == "rate_bps":
            out["rate"] = f"{value / 1e6:g}mbit"
        elif key in ("jump_s", "strobe_s"):
            out[key.removesuffix("_s")] = f"{value:+g}s"
        elif key == "period_s":
            out["period"] = f"{value:g}s"
    if fault == "clock" and "strobe" in out:
        out["for"] = f"{hold_s:g}s"
    return out


def draw(seed: int, cluster: str, version: str | None = None, *,
         seen: Mapping[str, int] | None = None, max_episodes: int = 3, disk: str = "plain",
         faults: tuple[str, ...] | None = None, broker_config: Mapping[str, str] | None = None) -> Schedule:
    """The schedule of ``seed`` on ``cluster`` at ``version`` (the cluster's default if
    None). ``seen``: how often each point and fault was already drawn or hit in the
    campaign; the draw prefers the rarer ones (guided), and depends on it, so a replay
    passes the same ``seen`` (the campaign records it per run). ``disk`` ``lazy``: the
    nodes' disks forget what was not fsynced, and every system's schedules draw power
    losses. ``faults``: the faults to draw (:func:`faults_of`; default the system's own, so a
    seed draws what it drew before degrade and clock could be asked for). ``broker_config``:
    laid over every run's brokers (an old inter-broker protocol on a new version); it does not
    change the draw."""
    spec = get_cluster(cluster)
    version = version or spec.default_version
    if version not in spec.versions:
        raise HarnessError(f"cluster {cluster} has no version {version!r} "
                           f"(it has: {', '.join(spec.versions)})")
    seen = seen or {}
    rng = random.Random(seed)
    system = spec.system
    profile = _PROFILES[system]
    points = sorted(available_points(system, version) - _UNREACHABLE)
    drawn = list(faults_of(system, disk, faults))
    episodes: list[Episode] = []
    for _ in range(rng.randint(1, max_episodes)):
        options = [f"point:{p}" for p in points] + drawn
        if any(e.fault == "powerloss" for e in episodes):
            options.remove("powerloss")
        pick = _weighted(rng, options, seen)
        hold = float(rng.choice((2, 5, 10, 20)))
        if pick.startswith("point:"):
            crash = [f for f in ("kill9", "powerloss", "stop") if f in options] or ["kill9"]
            point = pick.split(":", 1)[1]
            episodes.append(Episode("point", rng.choice(crash), rng.choice(profile.point_roles), hold,
                                    rng.random() < 0.7, point=point, inflight=rng.random() < 0.5,
                                    trigger=_trigger(point, profile)))
        elif pick in ("pause", "partition"):
            episodes.append(Episode(pick, pick, rng.choice(profile.roles), hold))
        elif pick in _WITH_PARAMS:
            params = tuple(draw_params(rng, pick).items())
            episodes.append(Episode(pick, pick, rng.choice(profile.roles), hold, params=params))
        else:
            episodes.append(Episode("crash", pick, rng.choice(profile.roles), hold, rng.random() < 0.7))
    # one node left down at most (with two down a replicated write cannot be acknowledged), by
    # the last episode that crashes one, so that each earlier `start: down` starts its own
    crashes = [i for i, e in enumerate(episodes) if e.kind in ("point", "crash")]
    for i in crashes[:-1]:
        episodes[i] = replace(episodes[i], restart=True)
    base, load_s = rng.choice((10, 50, 100)), rng.choice((0, 20, 40))
    if not load_s:  # a point holds a write: without a load, its episode sends one
        episodes = [replace(e, inflight=True) if e.kind == "point" else e for e in episodes]
    return Schedule(seed, system, cluster, version, base=base, episodes=tuple(episodes), load_s=load_s,
                    disk=disk, broker_config=dict(broker_config or {}))


def _steps(s: Schedule) -> list[Mapping[str, object]]:
    profile = _PROFILES[s.system]
    steps: list[Mapping[str, object]] = [{"produce": {"count": s.base}}, *profile.settle]
    first = s.episodes[0] if s.episodes else None
    # Kafka: the first episode's point is armed before the load (a rule holds offset N exactly:
    # armed under load, the followers' fetches pass N before the rule is in)
    early = first.point if profile.arm_early and first is not None and first.kind == "point" else None
    if early:
        steps.append({"inject": {"point": early, "partition": 0}})
    load = {"produce": {"duration": f"{s.load_s}s", "rate": s.rate, "background": True, "name": "load"}}
    # C4, C5 and HW-LEADER-ONLY need a follower's fetch from exactly N+1: under a load started
    # with N, N and N+1 reach a follower in one fetch and the point is never hit. A first point
    # with no failure before it holds its own record, sent alone; the load starts after its
    # fault, so that the state the hit is judged on at the kill is the point's
    deferred = bool(s.load_s and early and first is not None and not first.trigger)
    if s.load_s and not deferred:
        steps.append(load)
    load_done = not s.load_s
    wait = f"{profile.await_s}s"
    for i, e in enumerate(s.episodes):
        if e.kind == "point":
            assert e.point is not None
            at_episode = not (early and i == 0)
            if at_episode:
                if profile.arm_early and not load_done:
                    # Kafka: a later point is armed once the load has ended (under load, N
                    # would pass before its rule is in); Pulsar's hold the first entry at or
                    # after N, under load or not
                    steps.append({"await": {"workload": "load", "timeout": "3m"}})
                    load_done = True
                steps.append({"inject": {"point": e.point, "partition": 0}})
            # a point armed at its episode, maybe after the load has ended, that no failure
            # starts holds a record of its own
            inflight = e.inflight or (deferred and i == 0) or (at_episode and not e.trigger)
            if inflight:
                steps.append({"produce": {"count": 1, "background": True, "name": f"inflight-{i}"}})
            if e.trigger:
                if e.inflight:  # acknowledged just before the failure that starts the point's
                    # state: the followers may not know it is committed yet (their high
                    # watermark lags a fetch), the write a new leader's followers can lose
                    steps.append({"await": {"workload": f"inflight-{i}", "timeout": wait}})
                # Pulsar: a topic moves on its next lookup, and an ensemble changes on its next
                # write: a producer connected before the failure looks the topic up again when
                # the owner dies (no broker takes a topic nobody asks for), and sends one record
                # once released (the write the failed bookie fails)
                after = not profile.arm_early
                if after:
                    steps.append({"produce": {"count": 1, "background": True, "held": True,
                                              "name": f"after-{i}"}})
                steps.append({"kill9": e.trigger})
                if after:
                    steps.append({"release": f"after-{i}"})
            steps.append({"await": {"injection": e.point, "timeout": wait}})
            if inflight and not e.trigger and _acked_at_hit(e.point):  # acknowledged before the fault
                steps.append({"await": {"workload": f"inflight-{i}", "timeout": wait}})
        if e.kind in _WITH_PARAMS:
            step = {"node": e.target, **_step_params(e.fault, dict(e.params), e.hold_s)}
            steps += [{e.fault: step}, {"sleep": f"{e.hold_s:g}s"}, {"heal": "all"}]
            continue
        steps.append({e.fault: e.target})
        if deferred and i == 0:
            steps.append(load)
        if e.kind == "partition":
            steps += [{"sleep": f"{e.hold_s:g}s"}, {"heal": "all"}]
        elif e.kind == "pause":
            steps += [{"sleep": f"{e.hold_s:g}s"}, {"resume": "last-target"}]
        elif e.restart or e.trigger:
            if e.restart:  # the fault held, then undone; a node left down needs no hold
                steps.append({"sleep": f"{e.hold_s:g}s"})
            # the node down longest first: the trigger's, then the fault's
            steps += [{"start": "down"}] * (bool(e.trigger and e.trigger_restart) + e.restart)
    if not load_done:
        steps.append({"await": {"workload": "load", "timeout": "3m"}})
    return steps


def case_text(s: Schedule, name: str | None = None, description: str | None = None) -> str:
    """The case file of ``s`` (YAML; JSON flow style, which YAML reads)."""
    profile = _PROFILES[s.system]
    topic, client, observe = dict(profile.topic), dict(profile.client), list(profile.observe)
    lines = [f"name: {json.dumps(name or f'explore-{s.seed}')}",
             "description: " + json.dumps(description or (
                 f"Drawn by harness explore from seed {s.seed} on {s.cluster} {s.version}: "
                 f"{s.label()}.")),
             f"system: {s.system}", f"cluster: {s.cluster}", f"version: {json.dumps(s.version)}",
             "timeout: 8m", f"topic: {json.dumps(topic)}", f"client: {json.dumps(client)}"]
    if s.broker_config:
        lines.append(f"broker_config: {json.dumps(dict(s.broker_config))}")
    if s.disk != "plain":
        lines.append(f"disk: {s.disk}")
    lines.append("steps:")
    lines += [f"  - {json.dumps(step)}" for step in _steps(s)]
    lines.append(f"expect: {json.dumps({'observe': observe, 'min_acked': 1})}")
    return "\n".join(lines) + "\n"


def smaller(s: Schedule) -> list[Schedule]:
    """The one-step simplifications of ``s`` (delta debugging's second phase: the episodes
    themselves are removed by :mod:`.shrink`), smallest first: no load, fewer base records,
    no in-flight record, a shorter hold, a kill instead of a power loss, a node left down
    instead of started again (one at most); each strictly smaller."""
    out = []
    if s.load_s:  # a point's episode then sends its own write, as a drawn one does
        out.append(replace(s, load_s=0, episodes=tuple(replace(e, inflight=True) if e.kind == "point" else e
                                                       for e in s.episodes)))
    if s.base > 10:
        out.append(replace(s, base=max(10, s.base // 2)))
    for i, e in enumerate(s.episodes):
        simpler = []
        if e.inflight and s.load_s:
            simpler.append(replace(e, inflight=False))
        if e.hold_s > 1:
            simpler.append(replace(e, hold_s=max(1.0, e.hold_s // 2)))
        if e.fault == "powerloss":
            simpler.append(replace(e, fault="kill9"))
        last = max((j for j, o in enumerate(s.episodes) if o.kind in ("point", "crash")), default=-1)
        if e.restart and i == last:
            simpler.append(replace(e, restart=False))  # left down (the last crash only)
        if e.trigger and e.trigger_restart and not e.restart and i == len(s.episodes) - 1:
            simpler.append(replace(e, trigger_restart=False))  # both left to the recovery
        for x in simpler:
            out.append(replace(s, episodes=s.episodes[:i] + (x,) + s.episodes[i + 1:]))
    return [c for c in out if c.size() < s.size()]
