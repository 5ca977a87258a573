"""The scenario a case states (``expect.scenario``), counted from what the run recorded.

A case about a bug or its fix proves nothing unless the interleaving it is about happened:
the hold that lets the broker abort a transaction, the truncation a version makes or does
not make, the power loss that cuts records, the faults a chaos step applies. Each fact of
:data:`~harness.case.model.SCENARIO_FACTS` is counted here from the run directory's
records, as the checker counts anomalies: the injections' HIT lines, the steps' details and
the recovery's lock loops (``result.json``), the timeline's faults, the clients' history. A
fact with nothing recorded to count it is *not measured*, and its bound does not hold.

The case's bound on repairs (``expect.repairs``) is judged here too: a repair made while the
run waited on its cluster (``recovery.repairs``) may have hidden the liveness bug the case is
about, so a case can forbid it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..case import Case
from ..history import history_files, read_events
from ..result import Expectation, RunResult
from .scenario_bookies import Measured, ensemble_changes, fenced_rereplications, ledger_directories

__all__ = ["MEASURES", "REPAIRS_ROW", "SCENARIO_ROW", "Measured", "measure", "repairs_row", "scenario_missed",
           "scenario_rows"]

#: How the name of a scenario row begins (``scenario: truncated``).
SCENARIO_ROW = "scenario: "
#: The name of the row that judges ``expect.repairs``.
REPAIRS_ROW = "repairs"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _truncated(result: RunResult, run_dir: Path | None) -> Measured:
    """The most records one follower's truncation cut: a HIT line's ``leo_before - leo``."""
    cuts = []
    for inj in result.injections or ([result.injection] if result.injection else []):
        hit = inj.detail or {}
        if _is_int(hit.get("leo_before")) and _is_int(hit.get("leo")):
            cuts.append((hit["leo_before"] - hit["leo"], str(hit.get("node") or inj.node)))
    if not cuts:
        return Measured(None, "no injection's HIT line gives leo_before and leo")
    count, node = max(cuts)
    return Measured(count, f"on {node}")


def _fault_events(run_dir: Path | None, action: str) -> list[dict[str, Any]] | None:
    """The timeline's fault events of ``action`` (None: no timeline)."""
    timeline = run_dir / "timeline.jsonl" if run_dir is not None else None
    if timeline is None or not timeline.is_file():
        return None
    return [e for e in read_events(timeline, expand=False)
            if e["type"] == "fault" and e.get("action") == action]


def _powerloss_cut(result: RunResult, run_dir: Path | None) -> Measured:
    """The records the timeline's ``powerloss`` faults cut, summed."""
    losses = _fault_events(run_dir, "powerloss")
    if losses is None:
        return Measured(None, "no timeline")
    if not losses:
        return Measured(None, "no power loss was applied")
    cut = 0
    for event in losses:
        detail = event.get("detail")
        cuts = detail.get("cuts") if isinstance(detail, dict) else None
        for c in cuts if isinstance(cuts, list) else []:
            if isinstance(c, dict) and _is_int(c.get("records_lost")):
                cut += c["records_lost"]
    return Measured(cut, f"by {len(losses)} power loss(es)")


def _powerloss_bytes(result: RunResult, run_dir: Path | None) -> Measured:
    """The bytes the timeline's power losses on lazy disks dropped, summed."""
    losses = _fault_events(run_dir, "powerloss")
    if losses is None:
        return Measured(None, "no timeline")
    lost = [e["detail"]["bytes_lost"] for e in losses
            if isinstance(e.get("detail"), dict) and _is_int(e["detail"].get("bytes_lost"))]
    if not lost:
        return Measured(None, "no power loss of a lazy disk was applied")
    return Measured(sum(lost), f"by {len(lost)} power loss(es) of lazy disks")


def _powerlosses(result: RunResult, run_dir: Path | None) -> Measured:
    """The power losses the timeline records (each a ``powerloss`` fault applied)."""
    losses = _fault_events(run_dir, "powerloss")
    if losses is None:
        return Measured(None, "no timeline")
    nodes = [str(e.get("node")) for e in losses]
    return Measured(len(nodes), f"of {', '.join(nodes)}" if nodes else "none applied")


def _chaos_faults(result: RunResult, run_dir: Path | None) -> Measured:
    """The faults the chaos steps applied (their step detail's ``applied``), summed."""
    applied = [s.detail["applied"] for s in result.steps
               if s.action == "chaos" and isinstance(s.detail, dict) and _is_int(s.detail.get("applied"))]
    if not applied:
        return Measured(None, "no chaos step finished")
    return Measured(sum(applied))


def _clock_faults(result: RunResult, run_dir: Path | None) -> Measured:
    """The clock faults the timeline records, and the offsets they left."""
    timeline = run_dir / "timeline.jsonl" if run_dir is not None else None
    if timeline is None or not timeline.is_file():
        return Measured(None, "no timeline")
    moved = [e for e in read_events(timeline, expand=False)
             if e["type"] == "fault" and e.get("action") == "clock"]
    shown = [f"{e.get('node')} {e['detail']['offset_s']:+g} s" for e in moved
             if isinstance(e.get("detail"), dict) and isinstance(e["detail"].get("offset_s"), (int, float))]
    return Measured(len(moved), ", ".join(shown) if shown else "none applied")


def _delayed_packets(result: RunResult, run_dir: Path | None) -> Measured:
    """The packets the degrade steps' queues held, summed over the heal entries' ``delayed``
    (each queue's report when it stopped)."""
    timeline = run_dir / "timeline.jsonl" if run_dir is not None else None
    if timeline is None or not timeline.is_file():
        return Measured(None, "no timeline")
    held: dict[str, int] = {}
    for event in read_events(timeline, expand=False):
        detail = event.get("detail") if event["type"] == "fault" else None
        delayed = detail.get("delayed") if isinstance(detail, dict) else None
        for node, counts in (delayed.items() if isinstance(delayed, dict) else ()):
            if isinstance(counts, dict) and _is_int(counts.get("held")):
                held[str(node)] = held.get(str(node), 0) + counts["held"]
    if not held:
        return Measured(None, "no queue reported (no degrade with a delay was healed)")
    return Measured(sum(held.values()), ", ".join(f"{n}: {c}" for n, c in sorted(held.items())))


def _wiped_bytes(result: RunResult, run_dir: Path | None) -> Measured:
    """The bytes the timeline's ``replace`` faults wiped, summed (each replace in the note)."""
    events = _fault_events(run_dir, "replace")
    if events is None:
        return Measured(None, "no timeline")
    wiped = [(str(e.get("node")), e["detail"]["bytes_wiped"]) for e in events
             if isinstance(e.get("detail"), dict) and _is_int(e["detail"].get("bytes_wiped"))]
    if not wiped:
        return Measured(None, "no replace was applied")
    return Measured(sum(b for _, b in wiped), ", ".join(f"{n}: {b:,}" for n, b in wiped))


def _history(run_dir: Path | None) -> list[Path] | None:
    return history_files(run_dir) if run_dir is not None and (run_dir / "history").is_dir() else None


def _stalls(result: RunResult, run_dir: Path | None) -> Measured:
    """The ``stall`` events of the clients' history."""
    files = _history(run_dir)
    if files is None:
        return Measured(None, "no history")
    return Measured(sum(1 for path in files for e in read_events(path, expand=False) if e["type"] == "stall"))


def _held_transactions_aborted(result: RunResult, run_dir: Path | None) -> Measured:
    """Transactions held before their commit (a ``stall`` with a ``tx``) whose commit was
    called and never returned ``ok``, none of whose records the recovery read holds (the
    case reads read_committed there: the loader sees to it)."""
    files = _history(run_dir)
    if files is None:
        return Measured(None, "no history")
    if result.recovery is None or result.recovery.read is None:
        return Measured(None, "no recovery read")
    held: set[str] = set()
    commits: dict[str, set[str]] = {}
    sent: dict[str, set[str]] = {}
    recovered: set[str] = set()
    for path in files:
        for e in read_events(path):
            kind, tx = e["type"], e.get("tx")
            if kind == "stall" and isinstance(tx, str) and "commit" in str(e.get("reason", "commit")):
                held.add(tx)
            elif kind == "txn" and e.get("action") == "commit" and isinstance(tx, str):
                commits.setdefault(tx, set()).add(str(e.get("status")))
            elif kind == "invoke" and isinstance(tx, str):
                sent.setdefault(tx, set()).add(str(e.get("mid")))
            elif kind == "poll" and e.get("phase") == "recovery":
                recovered.add(str(e.get("mid")))
    aborted = [tx for tx in sorted(held)
               if commits.get(tx) and "ok" not in commits[tx] and not sent.get(tx, set()) & recovered]
    if not held:
        return Measured(0, "no transaction was held")
    return Measured(len(aborted), f"of {len(held)} held" + (f": {', '.join(aborted)}" if aborted else ""))


def _polled(result: RunResult, run_dir: Path | None) -> Measured:
    """The distinct ids that run-phase polls read (the consume steps' consumers)."""
    files = _history(run_dir)
    if files is None:
        return Measured(None, "no history")
    mids = {str(e["mid"]) for path in files for e in read_events(path)
            if e["type"] == "poll" and e.get("phase") != "recovery" and e.get("mid") is not None}
    return Measured(len(mids))


def _lock_loops(result: RunResult, run_dir: Path | None) -> Measured:
    """The nodes whose metadata lock flapped in a loop during the run, looked for after the
    recovery read (``recovery.lock_loops``; apache/pulsar#17759)."""
    if result.recovery is None or result.recovery.read is None:
        return Measured(None, "no recovery read, after which loops are looked for")
    loops = result.recovery.lock_loops
    if not loops:
        return Measured(0, "no lock flapped")
    return Measured(len(loops), ", ".join(f"{node}: up to {n} invalidations in 10 s"
                                          for node, n in sorted(loops.items())))


def _sessions_lost(result: RunResult, run_dir: Path | None) -> Measured:
    """The nodes whose metadata session was declared lost during the run, looked for after
    the recovery read (``recovery.sessions_lost``)."""
    if result.recovery is None or result.recovery.read is None:
        return Measured(None, "no recovery read, after which lost sessions are looked for")
    lost = result.recovery.sessions_lost
    if not lost:
        return Measured(0, "no node's metadata session was declared lost")
    return Measured(len(lost), ", ".join(f"{node}: {n} times" for node, n in sorted(lost.items())))


def _fenced_writes(result: RunResult, run_dir: Path | None) -> Measured:
    """Writes the bookies refused because the ledger was fenced, from the brokers' logs after
    the recovery read (``recovery.fenced_writes``): an old owner's writes stopped by the
    recovery of its successor."""
    if result.recovery is None or result.recovery.read is None:
        return Measured(None, "no recovery read, after which refused writes are looked for")
    refused = result.recovery.fenced_writes
    if not refused:
        return Measured(0, "no write was refused as fenced")
    return Measured(sum(refused.values()), ", ".join(f"{node}: {n}" for node, n in sorted(refused.items())))


#: fact -> how it is counted
MEASURES: dict[str, Callable[[RunResult, Path | None], Measured]] = {
    "stalls": _stalls,
    "held-transactions-aborted": _held_transactions_aborted,
    "truncated": _truncated,
    "powerloss-cut": _powerloss_cut,
    "powerloss-bytes": _powerloss_bytes,
    "powerlosses": _powerlosses,
    "chaos-faults": _chaos_faults,
    "clock-faults": _clock_faults,
    "delayed-packets": _delayed_packets,
    "wiped-bytes": _wiped_bytes,
    "lock-loops": _lock_loops,
    "sessions-lost": _sessions_lost,
    "fenced-writes": _fenced_writes,
    "ledger-directories": ledger_directories,
    "ensemble-changes": ensemble_changes,
    "polled": _polled,
    "fenced-rereplications": fenced_rereplications,
}


def measure(fact: str, result: RunResult, run_dir: Path | None) -> Measured:
    """``fact`` counted from ``result`` and the run directory (None: the result alone)."""
    return MEASURES[fact](result, run_dir)


def repairs_row(limit: int, result: RunResult) -> Expectation:
    """``expect.repairs`` against the repairs made while the run waited on its cluster."""
    made = result.repairs
    observed: int | str = f"{len(made)} ({'; '.join(made)})" if made else 0
    return Expectation(REPAIRS_ROW, f"<= {limit}", observed, len(made) <= limit)


def scenario_rows(case: Case, result: RunResult, run_dir: Path | None) -> list[Expectation]:
    """One row per fact of the case's scenario (its bounds against its count), and one for
    its bound on repairs when it has one."""
    rows = []
    for fact, bound in case.expect.scenario.items():
        got = measure(fact, result, run_dir)
        if got.count is None:
            rows.append(Expectation(SCENARIO_ROW + fact, str(bound), f"not measured ({got.note})", False))
        else:
            rows.append(Expectation(SCENARIO_ROW + fact, str(bound),
                                    f"{got.count} ({got.note})" if got.note else got.count,
                                    bound.holds(got.count)))
    if case.expect.repairs is not None:
        rows.append(repairs_row(case.expect.repairs, result))
    return rows


def scenario_missed(rows: list[Expectation]) -> str | None:
    """Why the rows of :func:`scenario_rows` failed: ``scenario did not happen: truncated 0
    (on kafka-3), expected >= 1``, ``repaired more than the case allows: 1 (forced controller
    election), expected <= 0`` (None: they held, or the case has none)."""
    missed = [f"{r.name[len(SCENARIO_ROW):]} {r.observed}, expected {r.expected}"
              for r in rows if r.name.startswith(SCENARIO_ROW) and not r.ok]
    why = ["scenario did not happen: " + "; ".join(missed)] if missed else []
    why += [f"repaired more than the case allows: {r.observed}, expected {r.expected}"
            for r in rows if r.name == REPAIRS_ROW and not r.ok]
    return "; ".join(why) or None
