"""A run's result as plain text: what ``harness run`` prints and a failed case test says.

It reads the judge's and the checker's decisions from :class:`RunResult` (verdict,
expectations, anomaly counts and examples) and decides nothing itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.result import RunResult

__all__ = ["format_result", "repairs_line"]


def _value(value: Any) -> str:
    """A string as itself, anything else as compact JSON (``true``, ``3``, ``{"a": 1}``)."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _example(example: dict[str, Any]) -> str:
    return " ".join(f"{k}={_value(v)}" for k, v in example.items())


def _anomalies(result: RunResult, examples: bool) -> list[str]:
    """The non-zero anomaly counts, observed ones marked; with ``examples`` the first of each."""
    if not result.checked:
        return ["anomalies: not checked"]
    found = [(kind, n) for kind, n in result.anomalies.items() if n]
    if not found:
        return ["anomalies: none"]
    lines = ["anomalies: " + ", ".join(
        f"{kind} {n}" + (" (observed)" if kind in result.observed else "") for kind, n in found)]
    if examples:
        lines += [f"  {kind} e.g. {_example(result.examples[kind][0])}"
                  for kind, _ in found if result.examples.get(kind)]
    return lines


def _latency_line(latency: Any) -> str | None:
    """``latency: send p50 3.1 / p99 12.0 ms; end-to-end ...; publish delay ... (paced
    producers); longest unavailability 8.2 s``."""
    if not isinstance(latency, dict):
        return None

    def part(name: str, key: str) -> str | None:
        s = latency.get(key)
        if not isinstance(s, dict) or not isinstance(s.get("p50"), (int, float)):
            return None
        p99 = s.get("p99")
        return f"{name} p50 {s['p50']:.1f} / p99 {p99:.1f} ms" if isinstance(p99, (int, float)) else None

    named = (("send", "send"), ("end-to-end", "e2e"), ("publish delay", "delay"))
    parts = [p for p in (part(name, key) for name, key in named) if p]
    worst = latency.get("max_unavailable_s")
    if isinstance(worst, (int, float)):
        parts.append(f"longest unavailability after a fault {worst:g} s")
    return "latency: " + "; ".join(parts) if parts else None


def _transactions_line(counts: Any) -> str | None:
    """``transactions: 13 committed, 6 aborted, 1 unknown (0 seen); 36 aborted records read
    uncommitted`` when the run had transactions."""
    if not isinstance(counts, dict):
        return None
    n = {k: counts.get(f"txn-{k}") for k in ("committed", "aborted", "unknown", "seen-committed")}
    if not any(isinstance(v, int) and v for v in n.values()):
        return None
    copied = counts.get("eos-copied")
    return (f"transactions: {n['committed']} committed, {n['aborted']} aborted, {n['unknown']} unknown "
            f"({n['seen-committed']} of them seen committed); "
            f"{counts.get('aborted-uncommitted-read')} aborted records read uncommitted"
            + (f"; {copied} input records copied" if isinstance(copied, int) and copied else ""))


def repairs_line(result: RunResult) -> str | None:
    """``repairs: 1 (forced controller election)``, and the repairs of a cluster kept between
    runs (``; between runs: 1 (reused cluster: restarted bookie-2)``); None when the harness
    repaired nothing. Every summary shows it: a repair can turn a liveness bug into a pass."""
    made, upkeep = result.repairs, result.upkeep
    if not made and not upkeep:
        return None
    line = f"repairs: {len(made)}" + (f" ({'; '.join(made)})" if made else "")
    return line + (f"; between runs: {len(upkeep)} ({'; '.join(upkeep)})" if upkeep else "")


def format_result(result: RunResult, run_dir: Path, *, verbose: bool = False) -> str:
    """The summary of a run: verdict, error, expectations not met, repairs, anomalies, report.

    Short by default (``harness run``: the error's first line; the progress lines showed the
    rest). ``verbose`` (a failed case test): the whole error, every expectation marked met or
    not, an example of each anomaly found, and the run directory.
    """
    lines = [f"verdict: {result.verdict} (expected {result.expected_verdict})"
             + (f"; case {result.case}" if result.case else "")
             + (f" on {result.variant}" if result.variant else "")]
    if result.verdict == result.expected_verdict != "error" and not result.as_expected:
        lines.append("not as expected: the case names the anomalies it reproduces, and the "
                     "expectations that failed are not exactly those")
    if result.seed is not None:
        lines.append(f"seed: {result.seed} (replay: {result.replay})")
    if result.error:
        lines.append("error: " + (result.error if verbose else result.error.splitlines()[0]))
    for e in result.expectations:
        if verbose or not e.ok:
            mark = "ok     " if e.ok else "NOT MET"
            lines.append(f"  {mark} {e.name}: expected {_value(e.expected)}, "
                         f"observed {_value(e.observed)}")
    repairs = repairs_line(result)
    if repairs:
        lines.append(repairs)
    lines += _anomalies(result, examples=verbose)
    latency = _latency_line(result.latency)
    if latency:
        lines.append(latency)
    txns = _transactions_line(result.counts)
    if txns:
        lines.append(txns)
    if verbose:
        lines.append(f"run directory: {run_dir}")
    report = Path(run_dir) / "report.html"
    lines.append(f"report: {report}" if report.is_file()
                 else f"report: not rendered (harness report {run_dir})")
    return "\n".join(lines)
