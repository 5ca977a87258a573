"""The judge: the case's expectations against what the checker found.

The checker (:mod:`harness.check`) counts anomalies; the judge compares those
counts, the acknowledged writes, the injection's hit and the facts of the case's
scenario (:mod:`.scenario`: what must have happened) with the case's ``expect``
section. An acknowledged write the checker could not judge (an ``ok`` without a message
id: lost or not, nothing can tell) makes the verdict ``error``, beyond what the case
allows (``expect.unjudged_acks``, 0 when it says nothing). Nothing else in the harness
decides a verdict.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..case import Case
from ..errors import HarnessError
from ..result import Expectation, InjectionSummary, RunResult
from .scenario import scenario_missed, scenario_rows

__all__ = ["CHECK_FAILED", "apply_check", "as_expected", "check_and_judge", "judge", "unjudged_acks"]

log = logging.getLogger(__name__)

#: How ``result.error`` begins when the run went well but its check failed.
CHECK_FAILED = "check failed: "


def judge(case: Case, check: dict[str, Any], injection: InjectionSummary | None,
          injections: list[InjectionSummary] | None = None,
          scenario: list[Expectation] | None = None) -> tuple[list[Expectation], str]:
    """Expectations against what was observed, and the verdict they give (``injection_hit``
    judges every armed point in ``injections``, else the one ``injection``; ``scenario``: the
    rows of :func:`.scenario.scenario_rows`, judged with the rest)."""
    anomalies = check.get("anomalies", {})
    rows = []
    for name, limit in case.expect.anomalies.items():
        observed = int(anomalies.get(name, 0))
        rows.append(Expectation(name, f"<= {limit}", observed, observed <= limit))
    acked = int(check.get("counts", {}).get("ok", 0))
    rows.append(Expectation("acknowledged writes", f">= {case.expect.min_acked}", acked,
                            acked >= case.expect.min_acked))
    if case.expect.min_aborted_seen is not None:
        seen = int(check.get("counts", {}).get("aborted-uncommitted-read", 0))
        rows.append(Expectation("aborted records read uncommitted", f">= {case.expect.min_aborted_seen}",
                                seen, seen >= case.expect.min_aborted_seen))
    rows += _latency_rows(case, check.get("latency"))
    if case.expect.injection_hit is not None:
        every = injections or ([injection] if injection else [])
        hit = bool(every) and all(i.hit for i in every)
        rows.append(Expectation("injection hit", case.expect.injection_hit, hit,
                                hit == case.expect.injection_hit))
    rows += scenario or []
    return rows, "pass" if all(r.ok for r in rows) else "fail"


def _latency_rows(case: Case, latency: Any) -> list[Expectation]:
    """The latency and availability bounds of the case against what the checker measured
    (a bound with nothing measured does not hold: the run cannot show it)."""
    latency = latency if isinstance(latency, dict) else {}
    expect = case.expect
    rows = []
    for name, limit, observed, unit in (
            ("max unavailable", expect.max_unavailable_s, latency.get("max_unavailable_s"), "s"),
            ("p99 send latency", expect.p99_latency_ms, (latency.get("send") or {}).get("p99"), "ms"),
            ("p99 end-to-end latency", expect.p99_e2e_latency_ms, (latency.get("e2e") or {}).get("p99"),
             "ms")):
        if limit is None:
            continue
        ok = isinstance(observed, (int, float)) and observed <= limit
        rows.append(Expectation(f"{name} ({unit})", f"<= {limit:g}",
                                observed if observed is not None else "not measured", ok))
    return rows


def as_expected(case: Case, rows: list[Expectation], verdict: str) -> bool:
    """Whether the verdict is the one the case expects; a case that expects ``fail`` fails
    exactly on the anomalies it ``reproduces`` (each over its limit, every other expectation
    holding), never on any failure at all."""
    if verdict != case.expect.verdict:
        return False
    if case.expect.verdict != "fail":
        return True
    named = case.expect.reproduces
    return bool(named) and named <= {r.name for r in rows} and all(r.ok != (r.name in named) for r in rows)


def check_and_judge(case: Case, result: RunResult, run_dir: Path, spark_master: str | None, *,
                    after_error: bool = False) -> None:
    """Checks the run's history and fills ``result``'s counts, expectations and verdict.

    ``after_error``: the run failed after its recovery read; the counts are reported, the
    verdict stays ``error``."""
    from ..check import check_run

    try:
        log.info("checking the history (Spark)")
        check = check_run(run_dir, spark_master=spark_master).to_dict()
    except HarnessError as exc:
        if not after_error:
            result.error = f"{CHECK_FAILED}{exc}"
        return
    apply_check(case, result, check, after_error=after_error, run_dir=run_dir)


def apply_check(case: Case, result: RunResult, check: dict[str, Any], *, after_error: bool = False,
                run_dir: Path | None = None) -> None:
    """Fills ``result``'s anomalies, examples, counts and expectations from a check (a
    :meth:`CheckResult.to_dict <harness.check.CheckResult.to_dict>`), and unless
    ``after_error`` its verdict (``error`` when acknowledged writes could not be judged:
    :func:`unjudged_acks`); warns when the check could not use some lines (skipped history
    or replica lines, sends without a message id: :func:`harness.check.result.skipped_lines`),
    naming the first of them when ``run_dir`` is given
    (:func:`harness.check.inputs.first_unread`)."""
    from ..check.inputs import first_unread
    from ..check.result import skipped_lines

    result.anomalies = dict(check.get("anomalies") or {})
    result.examples = dict(check.get("examples") or {})
    result.counts = dict(check.get("counts") or {})
    result.unread = {str(k): dict(v) for k, v in (check.get("unread") or {}).items()}
    result.latency = check.get("latency")
    result.transactions = check.get("transactions")
    first: dict[str, list[str]] = {}
    warning = skipped_lines(result.counts)
    if warning and run_dir is not None:
        # no further than the last such line the check counted (or the third)
        first = first_unread(run_dir, {name: min(3, int(result.counts.get(name, 0)))
                                       for name in ("skipped", "unjudged", "unjudged-ok", "replica-skipped")})
        warning = skipped_lines(result.counts, first)
    if warning:
        log.warning("warning: %s", warning)
    rows, verdict = judge(case, check, result.injection, result.injections,
                          scenario_rows(case, result, run_dir))
    result.expectations = rows
    missed = scenario_missed(rows)
    if missed:
        log.warning("%s", missed)
    if after_error:
        return
    unjudged = unjudged_acks(case, result.counts, first.get("unjudged-ok"), check.get("unread"))
    if unjudged is not None:
        result.verdict, result.as_expected = "error", False
        result.error = f"{CHECK_FAILED}{unjudged}"
        log.error("error: %s", result.error)
        return
    result.verdict = verdict
    result.as_expected = as_expected(case, rows, verdict)
    log.info("verdict: %s%s", verdict, "" if result.as_expected else
             f" (expected {case.expect.verdict}){': ' + missed if missed else ''}")


def unjudged_acks(case: Case, counts: dict[str, Any], first: list[str] | None = None,
                  unread: Any = None) -> str | None:
    """Why the run cannot be judged: more acknowledged writes without a message id (the
    check's ``unjudged-ok``) than the case allows (``expect.unjudged_acks``, 0 when the case
    has no such key): nothing can tell whether they were lost. Names where the first are
    (``first``: :func:`harness.check.inputs.first_unread`'s), else the files that hold them
    (``unread``: the check's, by file and reason). None when the run can be judged."""
    from ..check.lines import unjudged

    n = int(counts.get("unjudged-ok", 0) or 0)
    allowed = int(getattr(case.expect, "unjudged_acks", 0) or 0)
    if n <= allowed:
        return None
    where = list(first or [])
    if not where and isinstance(unread, dict):
        where = [f"{name} ({reasons[unjudged('ok')]})" for name, reasons in unread.items()
                 if isinstance(reasons, dict) and reasons.get(unjudged("ok"))][:3]
    return (f"{n} acknowledged writes have no message id and cannot be judged (lost or not: nothing can "
            f"tell; the case allows {allowed})" + (f"; the first: {', '.join(where)}" if where else ""))
