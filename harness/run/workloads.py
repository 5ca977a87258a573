"""Runs a case's produce/consume steps, in the foreground or on background threads.

Each workload writes ``history/<name>.jsonl`` through an instrumented client
of the case's system. Background workloads stop on :meth:`Workloads.stop_all`
(the runner's cleanup) and are always bounded: by their own count/duration
and by the case's timeout.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..case import Case, ConsumeArgs, CopyArgs, ProduceArgs
from ..errors import HarnessError, WaitTimeout, WorkloadError
from ..history import HistoryWriter
from ..systems.base import JavaProducers, System

log = logging.getLogger(__name__)

__all__ = ["Workloads", "output_topics"]


def output_topics(case: Case, topic: str) -> list[str]:
    """The output topic of each copier of the case (``<case topic>-<copier name>``)."""
    return [f"{topic}-{step.args.name}" for step in case.steps if isinstance(step.args, CopyArgs)]


def _transactional(spec: Any, txn: Any, transactional_id: str) -> Any:
    """A ClientSpec for a transactional producer with ``transactional_id``: idempotent,
    acks=all, and with the workload's transaction timeout (TxnArgs) when it sets one
    (librdkafka: the delivery and request timeouts are cut to fit inside it)."""
    spec = dataclasses.replace(spec, idempotence=True, acks="all", transactional_id=transactional_id)
    if txn.timeout_s is not None:
        ms = int(txn.timeout_s * 1000)
        delivery = min(spec.delivery_timeout_ms, ms)
        spec = dataclasses.replace(spec, delivery_timeout_ms=delivery,
                                   request_timeout_ms=min(spec.request_timeout_ms, delivery),
                                   extra={**spec.extra, "transaction.timeout.ms": str(ms)})
    return spec


@dataclass
class _Running:
    name: str
    thread: threading.Thread
    stop: threading.Event
    result: dict[str, Any] = field(default_factory=dict)
    error: BaseException | None = None
    ready: threading.Event = field(default_factory=threading.Event)


class Workloads:
    """The workloads of one run against one topic."""

    #: How long a background workload may take to get ready (the Java producer compiles first).
    READY_S = 120.0

    def __init__(self, case: Case, run_dir: Path, topic: str, system: System) -> None:
        self.case = case
        self.system = system
        self.run_dir = run_dir
        self.topic = topic
        self.running: dict[str, _Running] = {}
        #: Java producers connected and waiting to start sending (released together)
        self._waiting: list[Any] = []
        #: held producers (``held: true``) -> the event a ``release`` step sets
        self._held: dict[str, threading.Event] = {}
        self.finished: dict[str, dict[str, Any]] = {}

    def _writer(self, name: str) -> HistoryWriter:
        return HistoryWriter(self.run_dir / "history" / f"{name}.jsonl", name)

    # -- one workload ---------------------------------------------------------------
    def _produce(self, args: ProduceArgs, stop: threading.Event,
                 ready: threading.Event | None = None) -> dict[str, Any]:
        cap = self.case.timeout_s
        spec = dataclasses.replace(self.case.client, **args.settings) if args.settings \
            else self.case.client
        txn = args.transactions
        if txn is not None:  # a transactional producer of its own (one id per workload)
            spec = _transactional(spec, txn, spec.transactional_id or f"{self.topic}-{args.name}")
        if args.driver == "java":
            if not isinstance(self.system, JavaProducers):
                raise WorkloadError(f"workload {args.name}: {self.system.name} has no Java driver")
            java = self.system.java_producer(self.run_dir, self.topic, args.name, spec, ready)
            if txn is not None:
                java.transactions = txn
            if args.background:  # consecutive Java producers start sending together: release()
                java.go_now = False
                self._waiting.append(java)
            return dict(java.run(count=args.count,
                                 duration_s=min(args.duration_s, cap) if args.duration_s else None,
                                 rate=args.rate, value_size=args.value_size, keys=args.keys,
                                 partition=args.partition, stop=stop, max_s=cap).as_dict())
        with self._writer(args.name) as hist:
            client = self.system.producer(self.topic, hist, spec)
            try:
                if args.held:  # connected (the client looked the topic up): idle until released
                    prepare = getattr(client, "prepare", None)
                    if prepare is not None:
                        prepare(args.partition)
                    go = self._held[args.name]
                    if ready is not None:
                        ready.set()
                    while not go.wait(0.2):
                        if stop.is_set():
                            return dict(client.run(count=0, duration_s=None, rate=args.rate,
                                                   value_size=args.value_size, keys=args.keys,
                                                   partition=args.partition, stop=stop).as_dict())
                if txn is not None:
                    run_transactions = getattr(client, "run_transactions", None)
                    if run_transactions is None:
                        raise WorkloadError(f"workload {args.name}: {self.system.name} has no "
                                            f"transactional producer")
                    stats = run_transactions(
                        size=txn.size, aborts=txn.aborts, count=args.count,
                        duration_s=min(args.duration_s, cap) if args.duration_s else min(cap, 3600.0),
                        rate=args.rate, value_size=args.value_size, keys=args.keys,
                        partition=args.partition, stop=stop, hold_at=txn.hold_at, hold_s=txn.hold_s)
                    return dict(stats.as_dict())
                stats = client.run(count=args.count,
                                   duration_s=min(args.duration_s, cap) if args.duration_s else None,
                                   rate=args.rate, value_size=args.value_size, keys=args.keys,
                                   partition=args.partition, stop=stop)
            finally:
                client.close()
        return stats.as_dict()

    def _consume(self, args: ConsumeArgs, stop: threading.Event) -> dict[str, Any]:
        spec = self.case.client if args.subscription_type is None else \
            dataclasses.replace(self.case.client, subscription_type=args.subscription_type)
        if args.isolation_level is not None:
            spec = dataclasses.replace(spec, isolation_level=args.isolation_level)
        with self._writer(args.name) as hist:
            stats = self.system.consumer(self.topic, hist, spec, args.group).run(
                count=args.count, duration_s=args.duration_s, stop=stop, max_s=self.case.timeout_s)
        return stats.as_dict()

    def _copy(self, args: CopyArgs, stop: threading.Event) -> dict[str, Any]:
        copier = getattr(self.system, "copier", None)
        if copier is None:
            raise WorkloadError(f"workload {args.name}: {self.system.name} has no copier")
        txn = args.transactions
        spec = _transactional(self.case.client, txn, f"{self.topic}-{args.name}")
        cap = self.case.timeout_s
        with self._writer(args.name) as out, self._writer(f"{args.name}-in") as inp:
            target = f"{self.topic}-{args.name}"  # output_topics(); also the copier's group
            client = copier(self.topic, target, out, inp, spec, target)
            stats = client.run(size=txn.size, aborts=txn.aborts, count=args.count,
                               duration_s=min(args.duration_s, cap) if args.duration_s else min(cap, 3600.0),
                               value_size=args.value_size, stop=stop, hold_at=txn.hold_at, hold_s=txn.hold_s,
                               rewind=args.rewind)
        return dict(stats.as_dict())

    def start(self, args: ProduceArgs | ConsumeArgs | CopyArgs) -> dict[str, Any] | None:
        """Runs a workload; returns its stats (foreground) or None (background)."""
        fn: Any = (self._produce if isinstance(args, ProduceArgs)
                   else self._copy if isinstance(args, CopyArgs) else self._consume)
        stop = threading.Event()
        if not args.background:
            log.info(f"workload {args.name}: {self._describe(args)}")
            try:
                result = fn(args, stop)
            except HarnessError:
                raise
            except Exception as exc:  # a client library's error: one line, not a traceback
                raise WorkloadError(f"workload {args.name} failed: {exc}") from exc
            self.finished[args.name] = result
            log.info(f"workload {args.name}: done {self._summary(result)}")
            return result
        running = _Running(args.name, threading.Thread(), stop)
        java = isinstance(args, ProduceArgs) and args.driver == "java"
        held = isinstance(args, ProduceArgs) and args.held
        if held:
            self._held[args.name] = threading.Event()

        def body() -> None:
            try:
                if java or held:
                    running.result = self._produce(args, stop, running.ready)  # type: ignore[arg-type]
                else:
                    running.result = fn(args, stop)
            except BaseException as exc:  # reported by wait()/stop_all()
                running.error = exc
            finally:
                running.ready.set()

        running.thread = threading.Thread(target=body, name=f"workload-{args.name}", daemon=True)
        self.running[args.name] = running
        running.thread.start()
        if java:  # the Java producer compiles and connects first: later steps wait for it
            t0 = time.monotonic()
            if not running.ready.wait(self.READY_S):
                raise WaitTimeout(f"workload {args.name}: the Java producer was not ready in "
                                  f"{self.READY_S:.0f}s")
            log.info(f"workload {args.name}: Java producer ready after "
                          f"{time.monotonic() - t0:.1f}s")
            if running.error is not None:
                raise WorkloadError(f"workload {args.name} failed: {running.error}")
        if held:  # connected before the next step: the broker it reached is the owner now
            if not running.ready.wait(self.READY_S) or running.error is not None:
                raise WorkloadError(f"workload {args.name}: the producer did not connect"
                                    + (f": {running.error}" if running.error else
                                       f" in {self.READY_S:.0f}s"))
            log.info(f"workload {args.name}: connected, held until its release step "
                     f"({self._describe(args)})")
            return None
        log.info(f"workload {args.name}: started in the background ({self._describe(args)})")
        return None

    def release_held(self, name: str) -> dict[str, Any]:
        """A ``release`` step: the held producer ``name`` starts sending."""
        self._held[name].set()
        log.info(f"workload {name}: released")
        return {"name": name}

    def release(self) -> None:
        """Lets every connected Java producer start sending (before any other kind of step)."""
        for java in self._waiting:
            java.go()
        self._waiting.clear()

    def wait(self, name: str, timeout_s: float) -> dict[str, Any]:
        """Waits for background workload ``name`` to finish by itself."""
        running = self.running[name]
        running.thread.join(timeout_s)
        if running.thread.is_alive():
            raise WaitTimeout(f"timed out after {timeout_s:.0f}s waiting for workload {name}")
        return self._finish(running)

    def stop_all(self, timeout_s: float = 240.0) -> list[str]:
        """Stops every background workload (cleanup); returns the problems met."""
        self.release()
        problems = []
        for running in list(self.running.values()):
            running.stop.set()
        deadline = time.monotonic() + timeout_s
        for running in list(self.running.values()):
            running.thread.join(max(0.0, deadline - time.monotonic()))
            if running.thread.is_alive():
                problems.append(f"workload {running.name} did not stop in time")
                continue
            try:
                self._finish(running)
            except WorkloadError as exc:
                problems.append(str(exc))
        return problems

    def _finish(self, running: _Running) -> dict[str, Any]:
        self.running.pop(running.name, None)
        if running.error is not None:
            err = running.error
            raise WorkloadError(f"workload {running.name} failed: {type(err).__name__}: {err}") from err
        self.finished[running.name] = running.result
        log.info(f"workload {running.name}: done {self._summary(running.result)}")
        return running.result

    # -- the final read -----------------------------------------------------------------
    def recovery_read(self, partitions: int) -> dict[str, Any]:
        """Reads the whole topic, and each copier's output topic, from the beginning with a
        fresh consumer each (phase ``recovery``)."""
        with self._writer("recovery") as hist:
            stats = self.system.recovery_read(self.topic, hist, self.case.client, partitions)
            for topic in output_topics(self.case, self.topic):
                more = self.system.recovery_read(topic, hist, self.case.client, partitions)
                stats = {**stats, "polled": stats.get("polled", 0) + more.get("polled", 0),
                         "seconds": stats.get("seconds", 0) + more.get("seconds", 0),
                         "topics": {**stats.get("topics", {self.topic: stats.get("polled", 0)}),
                                    topic: more.get("polled", 0)}}
            return stats

    @staticmethod
    def _describe(args: ProduceArgs | ConsumeArgs | CopyArgs) -> str:
        what = ("produce" if isinstance(args, ProduceArgs) else "copy" if isinstance(args, CopyArgs)
                else "consume")
        if isinstance(args, ProduceArgs) and args.driver != "python":
            what += f" ({args.driver} client)"
        if isinstance(args, ConsumeArgs) and args.subscription_type:
            what += f" ({args.subscription_type})"
        bound = (f"{args.count} records" if args.count else
                 f"{args.duration_s:.0f}s" if args.duration_s else "until stopped")
        rate = f" at {args.rate:.0f}/s" if isinstance(args, ProduceArgs) and args.rate else ""
        return f"{what} {bound}{rate}"

    @staticmethod
    def _summary(stats: dict[str, Any]) -> str:
        keys = ("sent", "ok", "fail", "info", "polled")
        return ", ".join(f"{k} {stats[k]}" for k in keys if stats.get(k)) or "(nothing)"
