"""A held producer connects when its step runs, sends nothing until its release step, and
ends quietly when the case stops first (a fake system: no cluster)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from harness.case import load_case_text
from harness.run.workloads import Workloads

CASE = """system: pulsar
cluster: pulsar
topic: {partitions: 2}
steps:
  - produce: {count: 5, background: true, held: true, partition: 1, name: late}
  - release: late
"""


class _Client:
    def __init__(self) -> None:
        self.prepared: list[int | None] = []
        self.runs: list[tuple[int | None, float]] = []

    def prepare(self, partition: int | None) -> None:
        self.prepared.append(partition)

    def run(self, *, count: int | None, **kwargs: Any) -> Any:
        self.runs.append((count, time.monotonic()))
        return SimpleNamespace(as_dict=lambda: {"sent": count or 0})

    def close(self) -> None:
        pass


def _workloads(tmp_path: Path, client: _Client) -> tuple[Workloads, Any]:
    case = load_case_text(CASE, "c.yaml")
    system = SimpleNamespace(name="pulsar", producer=lambda topic, hist, spec: client)
    return Workloads(case, tmp_path, "t", system), case  # type: ignore[arg-type]


def test_a_held_producer_connects_then_sends_only_after_its_release(tmp_path: Path) -> None:
    client = _Client()
    workloads, case = _workloads(tmp_path, client)
    produce, release = case.steps[0].args, case.steps[1].args
    assert produce.held and release.name == "late"
    assert workloads.start(produce) is None  # returns once connected
    assert client.prepared == [1]  # the partition's producer connected before the next step
    time.sleep(0.5)
    assert client.runs == []  # held: nothing sent
    released_at = time.monotonic()
    workloads.release_held("late")
    assert workloads.wait("late", 10)["sent"] == 5
    assert client.runs[0][0] == 5 and client.runs[0][1] >= released_at


def test_a_held_producer_the_case_stops_first_sends_nothing(tmp_path: Path) -> None:
    client = _Client()
    workloads, case = _workloads(tmp_path, client)
    workloads.start(case.steps[0].args)
    workloads.running["late"].stop.set()
    workloads.running["late"].thread.join(5)
    assert client.runs and client.runs[0][0] == 0
    assert isinstance(workloads.running["late"].thread, threading.Thread)
