"""The chaos step on a real cluster (issue 18): the same seed gives the same fault schedule,
the timeline and result.json record it, and the report names the seed and the replay.

One run: its schedule must be the one its seed alone gives (``plan`` of ``step_seed``),
and ``plan`` is a function of its seed (tests/unit/test_chaos_schema.py), so a run with
the same seed replays it."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from harness.case import ChaosArgs, load_case
from harness.history import read_events
from harness.run.chaos import plan, step_seed

pytestmark = [pytest.mark.docker, pytest.mark.kafka]
CASE = Path(__file__).resolve().parent.parent / "data" / "integration" / "chaos-short.yaml"


def _schedule(run_dir: Path) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The planned schedule (the timeline's chaos event) and the faults applied, in order:
    (action, role) from the timeline's fault events."""
    events = list(read_events(run_dir / "timeline.jsonl"))
    planned = [e for e in events if e.get("type") == "chaos"]
    assert len(planned) == 1
    faults = [(e["action"], e["role"]) for e in events if e.get("type") == "fault"
              and str(e.get("role", "")).startswith("chaos:")
              and e["role"] not in ("chaos:heal", "chaos:restart")]
    return planned[0]["schedule"], faults


#: a run seed whose 14 s plan holds each kind of fault once (the step's own seed comes from it)
SEED = 55


def test_a_seed_replays_the_same_schedule(chaos_run) -> None:
    outcome = chaos_run(CASE, seed=SEED)
    assert outcome.exit_code == 0, outcome.result.error
    assert outcome.result.seed == SEED
    plan1, faults1 = _schedule(outcome.run_dir)
    # the schedule is the one the seed gives, and nothing else
    step = next(s for s in load_case(CASE).steps if s.action == "chaos")
    args = step.args
    assert isinstance(args, ChaosArgs)
    targets = tuple(dict.fromkeys(str(t) for t in args.targets))
    expected = plan(step_seed(SEED, step.index), args.duration_s, args.faults, targets,
                    args.gap_s, args.hold_s)
    # as the timeline holds it: JSON, where a tuple is a list
    assert plan1 == json.loads(json.dumps([asdict(p) for p in expected]))
    assert [(p["fault"], p["target"]) for p in plan1] == [
        ("kill9", "leader"), ("partition", "leader"), ("pause", "follower"), ("stop", "follower")]
    detail = next(s.detail for s in outcome.result.steps if s.action == "chaos")
    assert detail["seed"] == step_seed(SEED, step.index)
    assert detail["planned"] == len(plan1) and detail["applied"] >= 1
    # every planned fault was applied or skipped with a reason, in the planned order
    applied = [(e["fault"], f"chaos:{e['target']}") for e in detail["schedule"] if "node" in e]
    assert faults1 == applied
    assert all("node" in e or e.get("skipped") for e in detail["schedule"])
    # every fault was healed before the next one started
    ends = [(e["started_s"], e.get("healed_s", e["started_s"])) for e in detail["schedule"]]
    assert all(b[0] >= a[1] for a, b in zip(ends, ends[1:], strict=False))
    # a node that exited on its own after its heal (a broker restarted while its old ZooKeeper
    # session held its registration) was started again when the step ended, and recorded
    restarts = [(e["action"], e["node"]) for e in read_events(outcome.run_dir / "timeline.jsonl")
                if e.get("type") == "fault" and e.get("role") == "chaos:restart"]
    assert restarts == [("start", r["node"]) for r in detail.get("restarted", [])]
    html = outcome.report.read_text()
    assert 'id="seed"' in html and f"--seed {SEED}" in html
