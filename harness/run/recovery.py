"""Recovery and evidence: heal everything, wait until the cluster is whole, read it all.

"Lost" is judged only after :func:`recover`: workloads stopped, every fault healed,
stopped nodes started, the cluster ready and converged, every partition read from
the beginning. When the cluster stays stuck in a way the system knows
(:class:`~harness.systems.base.ControllerRemedy`,
:class:`~harness.systems.base.ReadyRemedy`), the harness repairs it once, as an
operator would, and the run's story says what and why (:func:`wait_remedied`). Every repair
is also named in ``recovery.repairs`` (or ``recovery.upkeep`` for a cluster that outlives the
run: :func:`record_repair`), which the summaries, the index and the matrix show and
``expect.repairs`` bounds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from ..errors import HarnessError, WaitTimeout, WorkloadError
from ..systems.base import ControllerRemedy, LockLoopWatch, ReadyRemedy, Removable
from ..wait import wait_until
from .context import RunContext
from .halts import failed_partitions, finish_halts, last_fatal

__all__ = ["READY_REMEDY_AFTER_S", "UNSTICK_AFTER_S", "collect", "collect_once", "heal_quietly",
           "recover", "record_repair", "repair_name", "wait_remedied", "wait_unsticking"]

log = logging.getLogger(__name__)

#: How long an ``await isr_size`` or recovery waits before it looks for a stuck controller
UNSTICK_AFTER_S = 30.0
#: How long recovery waits for a ready cluster before the system's readiness remedy looks:
#: three of the bookies' 10 s session timeouts (a bookie that re-registers does so within a
#: few seconds of the heal; one that closed its ZooKeeper client never does)
READY_REMEDY_AFTER_S = 30.0
#: A remedy found something and repaired it: (the story's note, the repair's short name, the
#: timeline mark's label, its detail)
Remedied = tuple[str, str, str, Any]


def recover(ctx: RunContext) -> None:
    """Stops workloads, heals, waits for a whole cluster, reads every partition."""
    problems = ctx.the_workloads.stop_all()
    if problems:
        raise HarnessError("; ".join(problems))
    if ctx.injector is not None:
        ctx.injector.disarm_all()
    log.info("recovery: healing every fault and starting stopped nodes")
    problems = ctx.the_nemesis.heal_all(start_down=True)
    if problems:
        raise HarnessError("heal failed: " + "; ".join(problems))
    t0 = time.monotonic()
    wait_ready_remedied(ctx, max(ctx.remaining(240), 1))
    _wait_converged(ctx, max(ctx.remaining(240), 1))
    ctx.recovery.converged_s = round(time.monotonic() - t0, 1)
    log.info("recovery: converged in %ss; reading every partition from the beginning",
             ctx.recovery.converged_s)
    ctx.the_watch.poll()
    try:
        stats = ctx.the_workloads.recovery_read(ctx.case.topic.partitions)
    except HarnessError:
        raise
    except Exception as exc:  # a client library's error: one line, not a traceback
        raise WorkloadError(f"recovery read failed: {type(exc).__name__}: {exc}") from exc
    ctx.recovery.read = stats
    ctx.recovered = True
    log.info("recovery: read %s records", stats.get("polled", 0))
    timeouts = (stats.get("errors") or {}).get("lookup_timeouts", 0)
    if timeouts:  # the topic was unavailable to a new client for a while after the faults
        ctx.recovery.observations.append(
            f"the recovery reader's creation timed out {timeouts} time(s) (the client's operation "
            "timeout each) before a broker answered for the topic")
    _end_lock_loops(ctx)


def _end_lock_loops(ctx: RunContext) -> None:
    """Records the nodes whose metadata session was lost and whose lock flapped in a loop
    during the run (apache/pulsar#17759); on a cluster that outlives the run, restarts the
    nodes still looping (a loop burns CPU, and slows the check, until then)."""
    system = ctx.the_system
    if not isinstance(system, LockLoopWatch):
        return
    ctx.recovery.sessions_lost = system.sessions_lost(ctx.started_wall)
    ctx.recovery.fenced_writes = system.fenced_writes(ctx.started_wall)
    seen = system.lock_loops_since(ctx.started_wall)
    going = system.lock_loops()
    if seen:
        ctx.recovery.lock_loops = seen
        note = ("during the run " + ", ".join(f"{n} logged up to {c} lock invalidations in 10 s"
                                             for n, c in sorted(seen.items()))
                + ": a registration lock flapping in a loop (apache/pulsar#17759)"
                + (f"; still looping after the recovery read: {', '.join(sorted(going))}"
                   if going else "; none still looping after the recovery read"))
        ctx.recovery.observations.append(note)
        ctx.events.mark("lock loop", seen)
        log.info("%s", note)
    if going and ctx.kept:
        done = system.restart(sorted(going))
        record_repair(ctx, f"lock loop ended: {repair_name(done)}",
                      f"the cluster outlives the run, so after the recovery read the harness "
                      f"{done} to end the loop", "lock loop ended", {"action": done}, upkeep=True)
    stale = [n for n in system.stale_after_session_loss(ctx.recovery.sessions_lost) if n not in going]
    if stale and ctx.kept:
        done = system.restart(stale)
        record_repair(ctx, f"session lost: {repair_name(done)}",
                      f"the cluster outlives the run, and a node whose metadata session was lost "
                      f"is not fit for the next (a Pulsar broker is not assignable until its next "
                      f"load report), so after the recovery read the harness {done}",
                      "session loss mended", {"action": done}, upkeep=True)


def repair_name(done: str, limit: int = 100) -> str:
    """What a remedy said it did, short enough for a summary line: without its parenthesised
    asides (``forced a controller election (deleted /controller)`` -> ``forced a controller
    election``), cut at ``limit`` characters."""
    out, depth = [], 0
    for ch in done:
        if ch == "(":
            depth += 1
        elif ch == ")" and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    name = " ".join("".join(out).split()).replace(" ,", ",")
    return name if len(name) <= limit else name[:limit - 3] + "..."


def record_repair(ctx: RunContext, name: str, note: str, label: str, detail: Any, *,
                  upkeep: bool = False) -> None:
    """Records one repair everywhere it must show: ``name`` in ``recovery.repairs`` (or, with
    ``upkeep``, a repair of a cluster that outlives runs, in ``recovery.upkeep``: never judged),
    ``note`` in the story's actions and the log, ``label`` as a timeline mark."""
    (ctx.recovery.upkeep if upkeep else ctx.recovery.repairs).append(name)
    ctx.recovery.actions.append(note)
    ctx.events.mark(label, detail)
    log.info("%s", note)


def wait_remedied(ctx: RunContext, wait: Callable[[float], Any], timeout: float, *,
                  after: float, remedy: Callable[[], Remedied | None]) -> Any:
    """``wait(timeout)``, with one remedy when it is stuck: after ``after`` seconds
    ``remedy()`` looks at the cluster and, when it finds what keeps it stuck, repairs it and
    says what it did (:func:`record_repair`: the mark's label names the repair). Then the wait
    goes on for the rest of ``timeout``."""
    if timeout <= after + 5:
        return wait(timeout)
    t0 = time.monotonic()
    try:
        return wait(after)
    except WaitTimeout:
        pass
    done = remedy()
    if done is not None:
        note, name, label, detail = done
        record_repair(ctx, name, note, label, detail)
    rest = max(timeout - (time.monotonic() - t0), 1.0)
    try:
        return wait(rest)
    except WaitTimeout as exc:  # say the whole wait, not its last part
        said = f"timed out after {rest:.0f}s"
        text = str(exc)
        if text.startswith(said):
            raise WaitTimeout(f"timed out after {time.monotonic() - t0:.0f}s" + text[len(said):]) from None
        raise


def wait_unsticking(ctx: RunContext, pred: Callable[[], Any], *, timeout: float,
                    what: str) -> Any:
    """``wait_until``, with the system's stuck-controller remedy: Kafka 3.9.2 in ZooKeeper
    mode sometimes keeps a controller on stale broker epochs after a partition's replicas
    and the controller restart in quick succession (the brokers reject every LeaderAndIsr,
    so the ISR never grows). After ``UNSTICK_AFTER_S``, if the system finds its controller
    stuck, the harness forces a controller election and waits on."""
    system, logs = ctx.the_system, ctx.the_cluster.node_logs

    def wait(t: float) -> Any:
        return wait_until(pred, timeout=t, what=what, logs=logs)

    if not isinstance(system, ControllerRemedy):
        return wait(timeout)

    def remedy() -> Remedied | None:
        problem = system.stuck_controller(timeout=10)
        if problem is None:
            return None
        system.force_controller_election()
        return (f"while waiting for {what}, the controller was stuck ({problem}); the "
                f"harness forced a controller election (deleted /controller)",
                "forced controller election", "forced controller election", {"problem": problem})

    return wait_remedied(ctx, wait, timeout, after=UNSTICK_AFTER_S, remedy=remedy)


def wait_ready_remedied(ctx: RunContext, timeout: float, *, after: str = "recovery: not ready {s:g} s "
                        "after the heal") -> None:
    """The system's ``wait_ready``, with its readiness remedy (where it has one) after
    ``READY_REMEDY_AFTER_S``: Pulsar restarts a bookie that runs but never re-registered
    after its ZooKeeper session expired, or that exited at start. ``after`` begins the
    repair's note."""
    system = ctx.the_system
    if not isinstance(system, ReadyRemedy):
        system.wait_ready(timeout=timeout)
        return

    def remedied() -> Remedied | None:
        done = system.ready_remedy()
        if done is None:
            return None
        return (f"{after.format(s=READY_REMEDY_AFTER_S)}, {done}",
                repair_name(done), "readiness remedy", {"action": done})

    wait_remedied(ctx, lambda t: system.wait_ready(timeout=t), timeout,
                  after=READY_REMEDY_AFTER_S, remedy=remedied)


def _wait_converged(ctx: RunContext, timeout: float) -> None:
    """Until every partition is whole again; or, while every partition has a leader, until
    a broker the heal started has exited again on its own (Kafka 0.10 halts a follower whose
    leader's log is shorter than its own: "log truncation is not allowed") or a follower's
    fetcher has given up a partition for good (:func:`.halts.failed_partitions`): the
    partitions are then read from their leaders, and the story says which broker stayed down
    or out of the ISR, and why."""
    topic, spec, system = ctx.topic, ctx.case.topic, ctx.the_system
    halted: set[str] = set()

    def whole_or_settled() -> tuple[str, str, list[str]] | bool:
        if system.converged(topic, spec.partitions, spec.replication_factor):
            return True
        running = [n.name for n in system.brokers() if n.container.status == "running"]
        logs = dict(ctx.the_cluster.node_logs(running, tail=5000)) if running else {}
        halted.update(finish_halts(ctx, halted, logs))
        exited = [n.name for n in system.brokers() if n.container.status == "exited"]
        if exited and _all_led(ctx):
            return ("broker exited in recovery", f"{', '.join(exited)} exited on its own after the heal "
                    f"started it, and stayed down{last_fatal(ctx, exited)}", exited)
        stuck = {name: failed for name, text in logs.items() if name not in halted
                 and (failed := failed_partitions(text, topic, spec.partitions))}
        if stuck and _all_led(ctx):
            return ("fetcher gave up in recovery", "; ".join(
                f"{name}'s fetcher gave up partition {p} ({why}), and it stayed out of the ISR"
                for name, failed in stuck.items() for p, why in failed.items()), list(stuck))
        return False

    outcome = wait_unsticking(ctx, whole_or_settled, timeout=timeout,
                              what=f"{topic}: every partition whole again (led with a full ISR "
                                   f"of {spec.replication_factor}, or owned)")
    if outcome is True:
        return
    label, said, nodes = outcome
    note = f"{said}; every partition had a leader, and was read from it"
    ctx.recovery.observations.append(note)
    ctx.events.mark(label, {"nodes": nodes})
    log.warning("recovery: %s", note)


def _all_led(ctx: RunContext) -> bool:
    try:
        return all(ctx.the_system.leader_of(ctx.topic, p).node is not None
                   for p in range(ctx.case.topic.partitions))
    except HarnessError:
        return False


def collect(ctx: RunContext) -> None:
    """Broker logs, truncation lines, and the system's own evidence (replica dumps)."""
    from ..collect import Evidence, collect_logs

    ctx.evidence = evidence = Evidence()
    log.info("collecting broker logs and replica dumps")
    collect_logs(ctx.the_cluster, ctx.run_dir, evidence, ctx.topic)
    ctx.the_system.collect_evidence(ctx.run_dir, evidence, ctx.topic, ctx.case.topic.partitions)


def collect_once(ctx: RunContext) -> None:
    """:func:`collect`, as cleanup: once, and never raising (teardown must follow)."""
    if ctx.evidence is None:
        try:
            collect(ctx)
        except Exception as exc:
            log.warning("collecting evidence failed: %s", exc)


def heal_quietly(ctx: RunContext) -> None:
    """The cleanup's heal: everything, nodes removed for good too (the evidence is read; a
    kept cluster must be whole for the next run)."""
    if ctx.the_nemesis.removed and isinstance(ctx.system, Removable):
        ctx.system.removed.clear()
    for problem in ctx.the_nemesis.heal_all(start_down=True, start_removed=True):
        log.warning("heal: %s", problem)
