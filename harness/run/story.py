"""The run's story: what happened, in sentences, for the report's first screen."""

from __future__ import annotations

from typing import Any

from ..history import history_files, read_events
from ..result import RunResult
from ..systems.base import CrashPoints
from .context import RunContext
from .scenario import scenario_missed

__all__ = ["election_sentence", "loss_sentence", "scenario_sentence", "story"]


def story(result: RunResult, ctx: RunContext) -> list[str]:
    """Injection, truncations, in-flight records, remedies, loss."""
    lines = []
    inj = result.injection
    if inj:
        verdict = "hit" if inj.hit else "MISSED"
        lines.append(f"Point {inj.point} was {verdict} (N = {inj.n}): expected "
                     f"{inj.expected}; observed {inj.observed}.")
    seen = set()
    for t in result.truncations:
        key = (t["node"], t["offset"])
        if t.get("effective") and t["offset"] > 0 and key not in seen:
            seen.add(key)
            lines.append(f"{t['node']} truncated its log of partition {t['partition']} to offset "
                         f"{t['offset']}.")
    lines.extend(election_sentence(e, ctx) for e in result.elections)
    if inj and ctx.injector is not None:
        armed_at = ctx.injector.first_armed_at()
        if armed_at is not None:
            lines.extend(_in_flight(ctx, armed_at))
        if inj.seed:
            lines.append(inj.seed)
    for note in ctx.recovery.actions + ctx.recovery.observations:
        lines.append(note[0].upper() + note[1:] + ".")
    missed = scenario_sentence(result)
    if missed is not None:
        lines.append(missed)
    loss = loss_sentence(result)
    if loss is not None:
        lines.append(loss)
    return lines


def election_sentence(e: dict[str, Any], ctx: RunContext | None = None) -> str:
    """An unclean election the controller logged, in a sentence."""
    leader = e.get("leader")
    system = ctx.system if ctx is not None else None
    who = (system.node_name(leader) if isinstance(system, CrashPoints) and isinstance(leader, int)
           else f"broker {leader}")
    return (f"The controller elected {who} leader of partition {e.get('partition')} by an unclean "
            f"election (leader epoch {e.get('epoch')}; the ISR was {e.get('isr')}): outside the ISR and "
            "the eligible replicas, it may lack acknowledged records.")


def scenario_sentence(result: RunResult) -> str | None:
    """``Scenario did not happen: ...`` when a fact of the case's scenario did not hold."""
    missed = scenario_missed(result.expectations)
    return missed[0].upper() + missed[1:] + "." if missed else None


def loss_sentence(result: RunResult) -> str | None:
    """The story's last sentence: how many acknowledged records were lost (if checked)."""
    lost = result.anomalies.get("lost-write")
    if lost is None:
        return None
    unjudged = result.counts.get("unjudged-ok", 0)
    if unjudged:
        head = (f"{lost} acknowledged record(s) were lost" if lost
                else "No judged acknowledged record was lost")
        return f"{head}; {unjudged} acknowledged write(s) had no message id and could not be judged."
    return "No acknowledged record was lost." if not lost else f"{lost} acknowledged record(s) were lost."


def _in_flight(ctx: RunContext, armed_at: float) -> list[str]:
    """The first three records sent after the point was armed: their send outcome, and
    whether the recovery read found them."""
    outcome: dict[str, str] = {}
    recovered: dict[str, Any] = {}
    for path in history_files(ctx.run_dir):
        for e in read_events(path):
            if e["type"] == "invoke" and e["t"] >= armed_at:
                outcome.setdefault(e["mid"], "no outcome")
            elif e["type"] in ("ok", "fail", "info") and e["mid"] in outcome:
                outcome[e["mid"]] = e["type"] + (f" at offset {e['offset']}"
                                                 if e.get("offset") is not None else "")
            elif e["type"] == "poll" and e.get("phase") == "recovery":
                recovered[e["mid"]] = e.get("offset")
    lines = []
    for mid, what in list(outcome.items())[:3]:
        where = (f"present after recovery at offset {recovered[mid]}" if mid in recovered
                 else "absent after recovery")
        lines.append(f"In-flight record {mid}: send outcome {what}; {where}.")
    return lines
