"""Runs one validated case end to end.

:func:`run_case`, in order:

1. make the run directory (``reports/<run-id>/``) and copy the case into it;
2. remove leftovers of dead harness processes; bring the cluster up (or reuse
   a matching one) and wait until it is ready; create the case topic;
3. run the steps in order (workloads, faults, awaits, injections), recording
   each step and every fault actually applied in ``timeline.jsonl``;
4. recovery: stop workloads, heal everything (start stopped nodes), wait for
   convergence (leaders, full ISR), then read every partition from the
   beginning with a fresh consumer, so "lost" is judged only after recovery;
5. collect evidence (broker logs, truncation lines, replica dumps);
6. check the history (PySpark) and judge the expectations;
7. write ``result.json`` and the HTML report, and tear the cluster down
   unless it is kept or was reused.

Steps 4-7 run on every exit path: an error, a failed expectation or Ctrl-C
still heals, collects, writes what was recorded and removes the containers
(an ``ExitStack`` holds the cleanup, not the happy path).
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .case import (AwaitArgs, Case, ConsumeArgs, FaultArgs, HealArgs, InjectArgs, ProduceArgs,
                   Step, UnloadArgs)
from .clusters import ROOT
from .errors import HarnessError, WaitTimeout
from .history import HistoryWriter
from .wait import wait_until

__all__ = ["run_case", "RunOutcome", "DEFAULT_REPORTS", "judge"]

DEFAULT_REPORTS = ROOT / "reports"
#: How long a reused cluster may take to look healthy before it is recreated.
REUSE_READY_S = 45.0
#: ZooKeeper mode: how long an ``await isr_size`` or recovery waits for the ISR before it
#: checks for a controller stuck on stale broker epochs
UNSTICK_AFTER_S = 30.0
#: How long recovery waits for a ready cluster before the system's readiness remedy looks
READY_REMEDY_AFTER_S = 60.0
Progress = Callable[[str], None]


@dataclass(frozen=True)
class RunOutcome:
    run_dir: Path
    result: dict[str, Any]

    @property
    def exit_code(self) -> int:
        """0 as expected, 1 expectations not met, 2 error."""
        if self.result.get("verdict") == "error":
            return 2
        return 0 if self.result.get("as_expected") else 1

    @property
    def report(self) -> Path:
        return self.run_dir / "report.html"


def _new_run_dir(reports: Path, name: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name)[:60]
    run_dir = reports / f"{stamp}-{safe}-{secrets.token_hex(2)}"
    (run_dir / "history").mkdir(parents=True)
    return run_dir


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Run:
    """The state of one run; methods are the runner's phases."""

    def __init__(self, case: Case, run_dir: Path, progress: Progress, stack: ExitStack,
                 keep_cluster: bool, owner: str | None = None) -> None:
        self.case = case
        self.run_dir = run_dir
        self.progress = progress
        self.stack = stack
        self.keep_cluster = keep_cluster
        self.owner = owner  # the owner label of a cluster this run creates (None: this process)
        self.deadline = time.monotonic() + case.timeout_s
        self.timeline = stack.enter_context(HistoryWriter(run_dir / "timeline.jsonl", "runner"))
        self.steps: list[dict[str, Any]] = []
        self.leader_before_fault: dict[int, int | str | None] = {}
        self.evidence: Any = None
        self.recovery: dict[str, Any] = {}
        self.injection: dict[str, Any] | None = None
        self.topic = case.topic.name or f"chaos-{run_dir.name[-4:]}-{secrets.token_hex(3)}"
        self.started_wall = time.time()

    def remaining(self, want: float) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise WaitTimeout(f"the case's time budget ({self.case.timeout_s:.0f}s) is used up")
        return min(want, left)

    # -- set-up -------------------------------------------------------------------------
    def setup(self) -> None:
        from .backend.cluster import Cluster, remove_leftovers
        from .backend.docker import Engine
        from .faults import Nemesis
        from .roles import LeaderWatch, Resolver
        from .systems import open_system
        from .workloads import Workloads

        case = self.case
        engine = Engine()
        for name in remove_leftovers(engine):
            self.progress(f"removed leftovers of a dead run: cluster {name}")
        self.cluster = Cluster.named(engine, case.cluster, case.version, case.broker_config,
                                     owner=self.owner)
        self.progress(f"cluster {case.cluster} ({case.system} {self.cluster.version})")
        reused = self.cluster.up(self.progress)
        self.system = open_system(self.cluster)
        t0 = time.monotonic()
        if reused:
            try:  # reuse is an optimisation: a cluster an earlier run left unhealthy is replaced
                self.system.wait_ready(timeout=self.remaining(REUSE_READY_S))
            except WaitTimeout as exc:
                self.progress(f"the reused cluster is not healthy ({str(exc).splitlines()[0]}); "
                              f"recreating it")
                self.cluster.up(self.progress, reuse=False)
                reused = False
        if reused and not self._reuse_healthy():
            reused = False
        #: the cluster outlives this run (a reused or kept one): leave it healthy
        self.kept = reused or self.keep_cluster
        if not self.kept:
            self.stack.callback(self._teardown)
        self.system.wait_ready(timeout=self.remaining(240))
        self.progress(f"cluster ready ({time.monotonic() - t0:.1f}s)")
        self.stack.callback(self._collect_once)
        self.nemesis = Nemesis(self.cluster, self.timeline)
        self.stack.callback(self._heal_quietly)
        self._create_topic()
        self.watch = LeaderWatch(self.system, self.topic, case.topic.partitions, self.timeline).start()
        self.stack.callback(self.watch.stop)
        self.resolver = Resolver(self.system, self.topic, self.watch)
        self.workloads = Workloads(case, self.run_dir, self.topic, self.cluster.spec.bootstrap,
                                   self.progress, cluster=self.cluster)
        self.stack.callback(self._stop_workloads_quietly)

    def _reuse_healthy(self) -> bool:
        """A reused cluster must be fit for this case (:func:`~harness.systems.fit_for_reuse`);
        False when it had to be recreated."""
        from .systems import fit_for_reuse

        self.system.wait_ready(timeout=self.remaining(REUSE_READY_S))
        return fit_for_reuse(self.system, self.cluster, self.progress, self.remaining)

    def _create_topic(self) -> None:
        t = self.case.topic
        if self.case.system == "kafka":
            config = {"unclean.leader.election.enable": str(t.unclean_leader_election).lower(),
                      **dict(t.config)}
            if t.min_insync_replicas is not None:
                config["min.insync.replicas"] = str(t.min_insync_replicas)
            self.system.create_topic(self.topic, t.partitions, t.replication_factor, config)
        else:
            self.system.create_topic(self.topic, t.partitions, ensemble=t.ensemble,
                                     write_quorum=t.write_quorum, ack_quorum=t.ack_quorum,
                                     deduplication=t.deduplication or None)  # False: broker default
            if t.spread:
                owners = self.system.spread(self.topic, t.partitions)
                self.timeline.record("mark", label="partitions spread over the brokers",
                                     detail={str(p): o for p, o in owners.items()})
                self.progress(f"topic {self.topic}: owners {owners}")
        self.progress(f"topic {self.topic}: {t.partitions} partition(s)")

    # -- steps --------------------------------------------------------------------------
    def run_steps(self) -> None:
        for step in self.case.steps:
            self.remaining(1)
            record: dict[str, Any] = {"index": step.index, "action": step.action,
                                      "label": step.label, "line": step.line, "t": time.time(),
                                      "status": "start", "error": None}
            self.steps.append(record)
            self.timeline.record("step", index=step.index, name=step.label, status="start")
            t0 = time.monotonic()
            try:
                detail = self._run_step(step)
            except HarnessError as exc:
                record.update(status="error", error=str(exc), duration_s=time.monotonic() - t0)
                self.timeline.record("step", index=step.index, name=step.label, status="error",
                                     error=str(exc))
                raise HarnessError(f"{self.case.path or self.case.name}:{step.line}: "
                                   f"{step.label}: {exc}") from exc
            record.update(status="done", duration_s=round(time.monotonic() - t0, 3), detail=detail)
            self.timeline.record("step", index=step.index, name=step.label, status="done",
                                 detail=detail)

    def _run_step(self, step: Step) -> Any:
        args = step.args
        if not (isinstance(args, ProduceArgs) and args.driver == "java" and args.background):
            self.workloads.release()  # connected Java producers start sending together now
        if isinstance(args, (ProduceArgs, ConsumeArgs)):
            return self.workloads.start(args)
        if isinstance(args, AwaitArgs):
            return self._await(args)
        if isinstance(args, FaultArgs):
            return self._fault(step.action, args)
        if isinstance(args, HealArgs):
            node = self.resolver.resolve(args.target) if args.target else None
            self.nemesis.heal(node)
            self.progress(f"{step.label}: healed {node.name if node else 'everything'}")
            return {"node": node.name if node else None}
        if isinstance(args, InjectArgs):
            return self._inject(args)
        if isinstance(args, UnloadArgs):
            return self._unload(args)
        raise HarnessError(f"no runner for step {step.action!r}")

    def _fault(self, action: str, args: FaultArgs) -> dict[str, Any]:
        node = self.resolver.resolve(args.target)
        p = args.target.partition
        if args.target.node is None and args.target.role == "leader" and self.case.system == "kafka":
            # just resolved: asking again would delay a kill that must land while a point holds
            self.leader_before_fault[p] = self.system.broker_id(node)
            self.watch.observe(p, node.name)
        elif self.injector is not None and self.case.system == "kafka" \
                and (last := self.watch.last_leader(p)) is not None:
            # a point is armed and may be holding a thread: the kill must land at once, and
            # the leader watch (polled every second) knows the leader well enough
            self.leader_before_fault[p] = self.system.broker_id(last)
        else:
            self.leader_before_fault[p] = self._leader(p)
        params: dict[str, Any] = {}
        if action == "partition":
            params["peers"] = [self.resolver.resolve(args.peer)] if args.peer else None
            params["direction"] = args.direction
        self.nemesis.apply(action, node, role=str(args.target), **params)
        self.resolver.last_target = node.name
        self.progress(f"{action} {node.name} ({args.target})")
        if self.injector is not None:
            self.injector.note_fault(action, node)
        return {"node": node.name, "role": str(args.target)}

    def _unload(self, args: UnloadArgs) -> dict[str, Any]:
        """Pulsar: moves the partition's bundle to another broker (a graceful ownership transfer)."""
        p = args.partition
        before = self._leader(p)
        self.leader_before_fault[p] = before
        dest = self.resolver.resolve(args.to) if args.to is not None else None
        t0 = time.monotonic()
        new = self.system.unload(self.topic, p, to=dest, timeout=self.remaining(90))
        detail = {"partition": p, "from": before, "to": new.name,
                  "seconds": round(time.monotonic() - t0, 3)}
        self.timeline.record("fault", action="unload", node=new.name, role="bundle", detail=detail)
        self.watch.observe(p, new.name)
        if before is not None:
            self.resolver.last_target = str(before)
        self.progress(f"unload partition {p}: {before} -> {new.name} ({detail['seconds']}s)")
        return detail

    def _leader(self, partition: int) -> int | str | None:
        """The partition's leader (Kafka broker id, -1 for none; Pulsar owner node name)."""
        try:
            if self.case.system == "kafka":
                leader: int | str | None = int(self.system.partition_state(self.topic, partition).leader)
                name = self.system.node_name(leader) if leader >= 0 else None  # type: ignore[operator]
            else:
                owner = self.system.owner(self.topic, partition)
                leader = name = owner.name if owner else None
        except HarnessError:
            return None
        self.watch.observe(partition, name)
        return leader

    def _await(self, args: AwaitArgs) -> dict[str, Any]:
        cond, params = args.condition, args.params
        if cond == "time":
            time.sleep(self.remaining(float(params["seconds"])))
            return {"seconds": params["seconds"]}
        timeout = self.remaining(args.timeout_s)
        if cond == "workload":
            return self.workloads.wait(str(params["name"]), timeout)
        if cond == "injection":
            return self._require_injector().await_hit(str(params["point"]), timeout)
        p = int(params.get("partition", 0))
        logs = self.cluster.node_logs
        t0 = time.monotonic()
        if cond == "leader_change":
            before = self.leader_before_fault.get(p, self._leader(p))
            now = wait_until(lambda: (v := self._leader(p)) not in (None, -1, before) and v,
                             timeout=timeout, what=f"partition {p}: a leader other than {before}",
                             logs=logs)
            result: dict[str, Any] = {"from": before, "to": now}
        elif cond == "no_leader":
            wait_until(lambda: self._leader(p) in (-1, None), timeout=timeout,
                       what=f"partition {p}: no leader", logs=logs)
            result = {}
        elif cond == "leader_is":
            target = self.resolver.resolve(params["target"])
            want: int | str = (self.system.broker_id(target) if self.case.system == "kafka"
                               else target.name)
            wait_until(lambda: self._leader(p) == want, timeout=timeout,
                       what=f"partition {p}: {target.name} leading", logs=logs)
            result = {"leader": target.name}
        elif cond == "isr_size":
            size = int(params["size"])
            self._wait_unsticking(lambda: len(self.system.partition_state(self.topic, p).isr) == size,
                                  timeout=timeout, what=f"partition {p}: an ISR of {size}", logs=logs)
            result = {"size": size}
        elif cond == "log":
            node = self.resolver.resolve(params["target"])
            pattern = re.compile(str(params["pattern"]))
            since = self.started_wall
            line = wait_until(lambda: next((ln for ln in node.container.logs(since=since).splitlines()
                                            if pattern.search(ln)), None),
                              timeout=timeout, what=f"{node.name} to log /{pattern.pattern}/",
                              logs=lambda: self.cluster.node_logs([node.name]))
            result = {"node": node.name, "line": line[:300]}
        else:
            raise HarnessError(f"unknown await condition {cond!r}")
        result["waited_s"] = round(time.monotonic() - t0, 3)
        self.progress(f"await {cond}: {result}")
        return result

    # -- injection (crash timing) -------------------------------------------------------
    injector: Any = None

    def _require_injector(self) -> Any:
        if self.injector is None:
            raise HarnessError("no injection point is armed")
        return self.injector

    def _inject(self, args: InjectArgs) -> dict[str, Any]:
        from .inject import Injector

        if self.injector is None:
            self.injector = Injector(self.system, self.topic, self.run_dir, self.timeline,
                                     self.progress)
            self.stack.callback(self.injector.disarm_all)
        return self.injector.arm(args, self.resolver)

    # -- recovery, evidence, teardown -----------------------------------------------------
    def recover(self) -> None:
        problems = self.workloads.stop_all()
        if problems:
            raise HarnessError("; ".join(problems))
        if self.injector is not None:
            self.injector.disarm_all()
        self.progress("recovery: healing every fault and starting stopped nodes")
        problems = self.nemesis.heal_all(start_down=True)
        if problems:
            raise HarnessError("heal failed: " + "; ".join(problems))
        t0 = time.monotonic()
        self._wait_ready(max(self.remaining(240), 1))
        self._wait_converged(max(self.remaining(240), 1))
        self.recovery["converged_s"] = round(time.monotonic() - t0, 1)
        self.progress(f"recovery: converged in {self.recovery['converged_s']}s; reading every "
                      f"partition from the beginning")
        self.watch.poll()
        stats = self.workloads.recovery_read(self.case.topic.partitions)
        self.recovery["read"] = stats
        self.progress(f"recovery: read {stats.get('polled', 0)} records")
        lock_loops = getattr(self.system, "lock_loops", None)
        if lock_loops is not None:
            loops = lock_loops()
            if loops:
                self.recovery["lock_loops"] = loops
                note = ("after recovery " + ", ".join(f"{n} logged {c} lock invalidations in 10 s"
                                                      for n, c in sorted(loops.items()))
                        + ": a registration lock flapping in a loop (apache/pulsar#17759)")
                self.recovery.setdefault("observations", []).append(note)
                self.timeline.record("mark", label="lock loop", detail=loops)
                self.progress(note)
                if self.kept:  # a loop burns CPU (and slows the check) until someone restarts
                    done = self.system.restart(sorted(loops))
                    action = (f"the cluster outlives the run, so after the recovery read the "
                              f"harness {done} to end the loop")
                    self.recovery.setdefault("actions", []).append(action)
                    self.progress(action)

    def _wait_remedied(self, wait: Callable[[float], Any], timeout: float, *, after: float,
                       remedy: Callable[[], tuple[str, str, Any] | None]) -> Any:
        """``wait(timeout)``, with one remedy when it is stuck: after ``after`` seconds
        ``remedy()`` looks at the cluster and, when it finds what keeps it stuck, repairs it
        (as an operator would) and returns ``(note, timeline label, detail)``; the note goes
        to the recovery's actions (the report's story) and the progress, the mark to the
        timeline. Then the wait goes on for the rest of ``timeout``."""
        if timeout <= after + 5:
            return wait(timeout)
        t0 = time.monotonic()
        try:
            return wait(after)
        except WaitTimeout:
            pass
        done = remedy()
        if done is not None:
            note, label, detail = done
            self.recovery.setdefault("actions", []).append(note)
            self.timeline.record("mark", label=label, detail=detail)
            self.progress(note)
        return wait(max(timeout - (time.monotonic() - t0), 1.0))

    def _wait_unsticking(self, pred: Any, *, timeout: float, what: str, logs: Any) -> Any:
        """``wait_until``, with a remedy in ZooKeeper mode for a controller stuck on stale
        broker epochs (3.9.2, seen when a partition's replicas and the controller restart
        in quick succession: the brokers reject every LeaderAndIsr, so the ISR never grows).
        After ``UNSTICK_AFTER_S``, if every broker runs and the controller is broken (it logged
        that it fails its state changes) or one broker does not take its requests, the harness
        forces a controller election, as an operator would, records it in the timeline and
        the story, and waits on."""
        def wait(t: float) -> Any:
            return wait_until(pred, timeout=t, what=what, logs=logs)

        if self.cluster.spec.mode != "zk":
            return wait(timeout)

        def remedy() -> tuple[str, str, Any] | None:
            if not all(n.container.status == "running" for n in self.system.brokers()):
                return None
            problem = self.system.broken_controller() or self.system.controller_problem(timeout=10)
            if problem is None:
                return None
            self.system.force_controller_election()
            return (f"while waiting for {what}, the controller was stuck ({problem}); the "
                    f"harness forced a controller election (deleted /controller)",
                    "forced controller election", {"problem": problem})

        return self._wait_remedied(wait, timeout, after=UNSTICK_AFTER_S, remedy=remedy)

    def _wait_ready(self, timeout: float) -> None:
        """The system's ``wait_ready``, with its ``ready_remedy`` (where it has one) applied
        after ``READY_REMEDY_AFTER_S``: Pulsar restarts a bookie that runs but never
        re-registered after its ZooKeeper session expired."""
        remedy = getattr(self.system, "ready_remedy", None)
        if remedy is None:
            self.system.wait_ready(timeout=timeout)
            return

        def remedied() -> tuple[str, str, Any] | None:
            done = remedy()
            if done is None:
                return None
            return (f"recovery: not ready {READY_REMEDY_AFTER_S:g} s after the heal, {done}",
                    "readiness remedy", {"action": done})

        self._wait_remedied(lambda t: self.system.wait_ready(timeout=t), timeout,
                            after=READY_REMEDY_AFTER_S, remedy=remedied)

    def _wait_converged(self, timeout: float) -> None:
        parts = range(self.case.topic.partitions)
        if self.case.system == "kafka":
            rf = self.case.topic.replication_factor

            def full() -> bool:
                states = [self.system.partition_state(self.topic, p) for p in parts]
                return all(s.leader >= 0 and len(s.isr) == rf for s in states)

            self._wait_unsticking(full, timeout=timeout,
                                  what=f"{self.topic}: every partition led with a full ISR of {rf}",
                                  logs=self.cluster.node_logs)
        else:
            wait_until(lambda: all(self.system.owner(self.topic, p) for p in parts),
                       timeout=timeout, what=f"{self.topic}: every partition owned",
                       logs=self.cluster.node_logs)

    def collect(self) -> None:
        from .collect import Evidence, collect_kafka_replicas, collect_logs

        self.evidence = Evidence()
        self.progress("collecting broker logs and replica dumps")
        collect_logs(self.cluster, self.run_dir, self.evidence, self.topic)
        if self.case.system == "kafka":
            try:
                collect_kafka_replicas(self.cluster, self.run_dir, self.evidence, self.topic,
                                       self.case.topic.partitions)
            except HarnessError as exc:
                self.evidence.problems.append(f"replicas: {exc}")

    def _collect_once(self) -> None:
        if self.evidence is None:
            try:
                self.collect()
            except Exception as exc:  # cleanup must go on to teardown
                self.progress(f"collecting evidence failed: {exc}")

    def _heal_quietly(self) -> None:
        for problem in self.nemesis.heal_all(start_down=True):
            self.progress(f"heal: {problem}")

    def _stop_workloads_quietly(self) -> None:
        for problem in self.workloads.stop_all(timeout_s=60):
            self.progress(f"stopping workloads: {problem}")

    def _teardown(self) -> None:
        self.progress(f"removing cluster {self.case.cluster}")
        self.cluster.down()


def judge(case: Case, check: dict[str, Any], injection: dict[str, Any] | None) -> tuple[
        list[dict[str, Any]], str]:
    """Expectations against what was observed, and the verdict they give."""
    anomalies = check.get("anomalies", {})
    rows = []
    for name, limit in case.expect.anomalies.items():
        observed = int(anomalies.get(name, 0))
        rows.append({"name": name, "expected": f"<= {limit}", "observed": observed,
                     "ok": observed <= limit})
    acked = int(check.get("counts", {}).get("ok", 0))
    rows.append({"name": "acknowledged writes", "expected": f">= {case.expect.min_acked}",
                 "observed": acked, "ok": acked >= case.expect.min_acked})
    if case.expect.injection_hit is not None:
        hit = bool(injection and injection.get("hit"))
        rows.append({"name": "injection hit", "expected": case.expect.injection_hit,
                     "observed": hit, "ok": hit == case.expect.injection_hit})
    return rows, "pass" if all(r["ok"] for r in rows) else "fail"


def run_case(case: Case, *, reports_dir: Path = DEFAULT_REPORTS, progress: Progress = print,
             keep_cluster: bool = False, spark_master: str | None = None,
             owner: str | None = None) -> RunOutcome:
    """Runs ``case``; always returns an outcome with ``result.json`` written (see module doc).

    ``keep_cluster``: leave the cluster running at the end. ``owner``: the owner label of a
    cluster this run creates; by default this process (the pytest plugin keeps its clusters
    for the session and removes them at its end; a later process removes a dead one's as
    leftovers); ``"keep"`` (``harness run --keep-cluster``, like ``harness cluster up``) gives
    it to no process, so later runs reuse it until ``harness cluster down`` or ``harness clean``.

    KeyboardInterrupt is re-raised after cleanup and after the result is written.
    """
    run_dir = _new_run_dir(Path(reports_dir), case.name)
    if case.path is not None and Path(case.path).exists():
        shutil.copy2(case.path, run_dir / "case.yaml")
    progress(f"run {run_dir.name}: case {case.name}")
    result: dict[str, Any] = {
        "schema": 1, "run_id": run_dir.name, "case": case.name,
        "case_file": str(case.path) if case.path else None, "description": case.description,
        "system": case.system, "cluster": case.cluster, "version": case.version,
        "started": _iso(time.time()), "verdict": "error", "expected_verdict": case.expect.verdict,
        "error": None, "files": {"case": "case.yaml", "logs": []},
        "observed": sorted(case.expect.observe),
    }
    t0 = time.monotonic()
    run: _Run | None = None
    interrupted: BaseException | None = None
    try:
        with ExitStack() as stack:
            run = _Run(case, run_dir, progress, stack, keep_cluster, owner)
            result["topic"] = run.topic
            run.setup()
            run.run_steps()
            run.recover()
            run.collect()
        _check_and_judge(case, run, result, spark_master, progress)
    except HarnessError as exc:
        result["error"] = str(exc)
        progress(f"error: {exc}")
        if run is not None and run.recovery.get("read"):
            _check_and_judge(case, run, result, spark_master, progress, after_error=True)
        # without the recovery read, "lost" cannot be judged: no anomaly counts are reported
    except KeyboardInterrupt as exc:
        result["error"] = "interrupted (Ctrl-C); faults healed, evidence collected"
        interrupted = exc
    finally:
        if run is not None:
            _fill_from_run(result, run)
        if run is not None:
            try:
                result["story"] = _story(result, run)
            except Exception as exc:  # the story is a summary; never lose the result over it
                result["story"] = [f"(no story: {exc})"]
        result["finished"] = _iso(time.time())
        result["duration_s"] = round(time.monotonic() - t0, 1)
        (run_dir / "result.json").write_text(json.dumps(result, indent=2, default=str))
        _render(run_dir, Path(reports_dir), progress)
    if interrupted is not None:
        raise interrupted
    return RunOutcome(run_dir, result)


def _check_and_judge(case: Case, run: _Run, result: dict[str, Any], spark_master: str | None,
                     progress: Progress, after_error: bool = False) -> None:
    from .check import check_run

    try:
        progress("checking the history (Spark)")
        check = check_run(run.run_dir, spark_master=spark_master).to_dict()
    except HarnessError as exc:
        if not after_error:
            result["error"] = f"check failed: {exc}"
        return
    result.update({k: check.get(k) for k in ("anomalies", "examples", "counts")})
    injection = run.injector.summary() if run.injector is not None else None
    rows, verdict = judge(case, check, injection)
    result["expectations"] = rows
    if not after_error:
        result["verdict"] = verdict
        result["as_expected"] = verdict == case.expect.verdict
        progress(f"verdict: {verdict}" + ("" if result["as_expected"] else
                                          f" (expected {case.expect.verdict})"))


def _story(result: dict[str, Any], run: _Run) -> list[str]:
    """What happened, in sentences: injection, truncations, in-flight records, loss."""
    from .history import history_files, read_events

    lines = []
    inj = result.get("injection")
    if inj:
        verdict = "hit" if inj.get("hit") else "MISSED"
        lines.append(f"Point {inj['point']} was {verdict} (N = {inj.get('n')}): expected "
                     f"{inj.get('expected')}; observed {inj.get('observed')}.")
    seen = set()
    for t in result.get("truncations") or []:
        key = (t["node"], t["offset"])
        if t.get("effective") and t["offset"] > 0 and key not in seen:
            seen.add(key)
            lines.append(f"{t['node']} truncated its log of partition {t['partition']} to offset "
                         f"{t['offset']}.")
    if inj and run.injector is not None:
        armed_at = run.injector.first_armed_at()
        if armed_at is not None:
            outcome: dict[str, str] = {}
            recovered: dict[str, Any] = {}
            for path in history_files(run.run_dir):
                for e in read_events(path):
                    if e["type"] == "invoke" and e["t"] >= armed_at:
                        outcome.setdefault(e["mid"], "no outcome")
                    elif e["type"] in ("ok", "fail", "info") and e["mid"] in outcome:
                        outcome[e["mid"]] = e["type"] + (f" at offset {e['offset']}"
                                                         if e.get("offset") is not None else "")
                    elif e["type"] == "poll" and e.get("phase") == "recovery":
                        recovered[e["mid"]] = e.get("offset")
            for mid, what in list(outcome.items())[:3]:
                where = (f"present after recovery at offset {recovered[mid]}" if mid in recovered
                         else "absent after recovery")
                lines.append(f"In-flight record {mid}: send outcome {what}; {where}.")
        if inj.get("seed"):
            lines.append(inj["seed"])
    for key in ("actions", "observations"):
        for note in (run.recovery or {}).get(key, []):
            lines.append(note[0].upper() + note[1:] + ".")
    lost = (result.get("anomalies") or {}).get("lost-write")
    if lost is not None:
        lines.append("No acknowledged record was lost." if not lost else
                     f"{lost} acknowledged record(s) were lost.")
    return lines


def _fill_from_run(result: dict[str, Any], run: _Run) -> None:
    result["steps"] = run.steps
    result["recovery"] = run.recovery or None
    if run.injector is not None:
        result["injection"] = run.injector.summary()
    if run.evidence is not None:
        result["truncations"] = run.evidence.truncations
        result["replicas"] = run.evidence.replicas + (run.injector.replicas_at_kill()
                                                      if run.injector is not None else [])
        result["files"]["logs"] = run.evidence.logs
        if run.evidence.problems:
            result["collect_problems"] = run.evidence.problems
    if hasattr(run, "cluster"):
        result["version"] = run.cluster.version


def _render(run_dir: Path, reports_dir: Path, progress: Progress) -> None:
    try:
        from .report import render_index, render_run

        render_run(run_dir)
        render_index(reports_dir)
    except Exception as exc:  # a report failure must not hide the result
        progress(f"report rendering failed: {exc}")
