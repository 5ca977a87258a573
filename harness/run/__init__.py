"""Runs one validated case end to end.

:func:`run_case`, in order:

1. make the run directory (``reports/<run-id>/``) and copy the case into it;
2. set-up (:mod:`.setup`): remove leftovers of dead harness processes; bring the
   cluster up (or reuse a matching one) and wait until it is ready; create the
   case topic; start the leader watch;
3. run the steps in order (:mod:`.steps`: workloads, faults, awaits, injections),
   recording each step and every fault actually applied in ``timeline.jsonl``
   through the run's event hook (:mod:`.events`);
4. recovery (:mod:`.recovery`): stop workloads, heal everything (start stopped
   nodes), wait for convergence, then read every partition from the beginning with
   a fresh consumer, so "lost" is judged only after recovery;
5. collect evidence (broker logs, truncation lines, replica dumps);
6. check the history (PySpark) and judge the expectations (:mod:`.judge`);
7. write ``result.json`` (:class:`~harness.result.RunResult`) and the HTML report,
   and tear the cluster down unless it is kept or was reused.

Steps 4-7 run on every exit path: an error, a failed expectation or Ctrl-C still
heals, collects, writes what was recorded and removes the containers (an
``ExitStack`` holds the cleanup, not the happy path).

Modules: ``context`` (the run's state), ``events`` (timeline and console),
``setup``, ``steps``, ``awaits``, ``roles`` (selectors, leader watch),
``workloads``, ``recovery``, ``judge``, ``story``.
"""

from __future__ import annotations

import logging
import re
import secrets
import shutil
import time
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..case import Case
from ..clusters import REPORTS_DIR, NodesFile
from ..errors import HarnessError
from ..history import HistoryWriter
from ..result import InjectionSummary, RunResult
from .context import RunContext
from .events import Listener, RunEvents
from .judge import check_and_judge, judge

__all__ = ["DEFAULT_REPORTS", "RunOutcome", "judge", "remove_own_clusters", "run_case"]

log = logging.getLogger(__name__)

DEFAULT_REPORTS = REPORTS_DIR


@dataclass(frozen=True)
class RunOutcome:
    """Where a run wrote its evidence, and what it decided."""

    run_dir: Path
    result: RunResult

    @property
    def exit_code(self) -> int:
        """0 as expected, 1 expectations not met, 2 error."""
        return self.result.exit_code

    @property
    def report(self) -> Path:
        return self.run_dir / "report.html"


def run_case(case: Case, *, reports_dir: Path = DEFAULT_REPORTS, keep_cluster: bool = False,
             spark_master: str | None = None, owner: str | None = None,
             listeners: tuple[Listener, ...] = (), seed: int | None = None,
             hosts: NodesFile | None = None) -> RunOutcome:
    """Runs ``case``; always returns an outcome with ``result.json`` written (see module doc).

    ``keep_cluster``: leave the cluster running at the end. ``owner``: the owner label of a
    cluster this run creates; by default this process (the pytest plugin keeps its clusters
    for the session and removes them at its end; a later process removes a dead one's as
    leftovers); ``"keep"`` (``harness run --keep-cluster``, like ``harness cluster up``) gives
    it to no process, so later runs reuse it until ``harness cluster down`` or ``harness clean``.
    ``seed``: the run's seed, from which each ``chaos`` step without its own draws its fault
    schedule (default: drawn at random; kept in ``result.json`` either way).
    ``hosts``: the hosts that play the nodes (a nodes file, :mod:`harness.backend.remote`;
    checked against the case by :func:`harness.backend.remote.fit`), instead of containers.
    ``listeners``: called with every timeline event as it is recorded. Progress goes to the
    ``harness`` loggers (:func:`harness.run.events.console` shows it).

    KeyboardInterrupt is re-raised after cleanup and after the result is written.
    """
    from .recovery import collect, recover
    from .setup import setup
    from .steps import run_steps

    run_dir = _new_run_dir(Path(reports_dir), case.name)
    if case.path is not None and Path(case.path).exists():
        shutil.copy2(case.path, run_dir / "case.yaml")
    log.info("run %s: case %s", run_dir.name, case.name)
    result = RunResult(run_dir.name, case=case.name,
                       case_file=str(case.path) if case.path else None,
                       description=case.description, system=case.system, cluster=case.cluster,
                       version=case.version, variant=case.variant,
                       broker_config=dict(case.broker_config), started=_iso(time.time()),
                       expected_verdict=case.expect.verdict, observed=sorted(case.expect.observe))
    t0 = time.monotonic()
    ctx: RunContext | None = None
    interrupted: BaseException | None = None
    try:
        with ExitStack() as stack:
            timeline = stack.enter_context(HistoryWriter(run_dir / "timeline.jsonl", "runner"))
            ctx = RunContext(case, run_dir, stack, RunEvents(timeline, listeners),
                             keep_cluster=keep_cluster, owner=owner, hosts=hosts)
            if seed is not None:
                ctx.seed = seed
            if any(step.action == "chaos" for step in case.steps):
                result.seed = ctx.seed
            result.topic = ctx.topic
            setup(ctx)
            run_steps(ctx)
            recover(ctx)
            collect(ctx)
        _fill_from_run(result, ctx)
        check_and_judge(case, result, run_dir, spark_master)
    except HarnessError as exc:
        result.error = str(exc)
        log.error("error: %s", exc)
        if ctx is not None and ctx.recovered:
            _fill_from_run(result, ctx)
            check_and_judge(case, result, run_dir, spark_master, after_error=True)
        # without the recovery read, "lost" cannot be judged: no anomaly counts are reported
    except KeyboardInterrupt as exc:
        result.error = "interrupted (Ctrl-C); faults healed, evidence collected"
        interrupted = exc
    except Exception as exc:  # a bug: one line here, the traceback in the run directory
        import traceback

        (run_dir / "error.log").write_text("".join(traceback.format_exception(exc)), encoding="utf-8")
        result.error = (f"internal error: {type(exc).__name__}: {exc} (traceback in "
                        f"{run_dir / 'error.log'}); faults healed, evidence collected")
        log.error("error: %s", result.error)
    finally:
        _finish(result, ctx, run_dir, Path(reports_dir), t0)
    if interrupted is not None:
        raise interrupted
    return RunOutcome(run_dir, result)


def _finish(result: RunResult, ctx: RunContext | None, run_dir: Path, reports_dir: Path,
            t0: float) -> None:
    """Fills what the run recorded, writes ``result.json`` and renders the report."""
    from .story import story

    if ctx is not None:
        _fill_from_run(result, ctx)
        try:
            result.story = story(result, ctx)
        except Exception as exc:  # the story is a summary; never lose the result over it
            result.story = [f"(no story: {exc})"]
    result.finished = _iso(time.time())
    result.duration_s = round(time.monotonic() - t0, 1)
    result.write(run_dir)
    try:
        from ..report import render_index, render_run

        render_run(run_dir)
        render_index(reports_dir)
    except Exception as exc:  # a report failure must not hide the result
        log.error("report rendering failed: %s", exc)


def _fill_from_run(result: RunResult, ctx: RunContext) -> None:
    result.steps = ctx.steps
    result.recovery = ctx.recovery if ctx.recovery != type(ctx.recovery)() else None
    if ctx.injector is not None:
        result.injections = [InjectionSummary(**s) for s in ctx.injector.summaries()]
        result.injection = result.injections[-1] if result.injections else None
    if ctx.evidence is not None:
        result.truncations = ctx.evidence.truncations
        result.elections = ctx.evidence.elections
        result.replicas = ctx.evidence.replicas + (ctx.injector.replicas_at_kill()
                                                   if ctx.injector is not None else [])
        result.files["logs"] = ctx.evidence.logs
        result.collect_problems = ctx.evidence.problems
    if ctx.cluster is not None:
        result.version = ctx.cluster.version


def _new_run_dir(reports: Path, name: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name)[:60]
    run_dir = reports / f"{stamp}-{safe}-{secrets.token_hex(2)}"
    (run_dir / "history").mkdir(parents=True)
    return run_dir


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def remove_own_clusters() -> None:
    """Removes the clusters this process started (kept between a matrix's or a campaign's
    runs), and their lazy disks."""
    from ..backend.cluster import this_owner
    from ..backend.docker import LABEL_OWNER, Engine
    from ..backend.lazyfs import sweep

    me = this_owner()
    try:
        Engine().remove_labelled({LABEL_OWNER: me})
    except HarnessError:
        pass  # no engine: nothing of ours runs
    sweep(lambda owner: owner != me)
