"""Clock faults: how a case states them, and the offsets they write (no Docker: the offset
file is a plain file here; tests/integration/test_clock.py moves a real node's clock)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness.backend.clock import FakeClock, compose_override
from harness.case import FaultArgs, load_case_text
from harness.errors import CaseError, FaultError
from harness.faults.clock import ClockDriver, ClockPlan

HEAD = "system: kafka\ncluster: kafka-zk\nsteps:\n  - produce: {count: 10}\n"


def _clock(step: str) -> dict[str, float]:
    case = load_case_text(HEAD + f"  - {step}\n", "c.yaml")
    args = case.steps[1].args
    assert isinstance(args, FaultArgs) and case.clock == "fake"
    return dict(args.clock)


def test_a_clock_step_reads_a_signed_jump_a_drift_and_a_strobe() -> None:
    assert _clock("clock: {node: leader, jump: +10m}") == {"jump_s": 600.0}
    assert _clock("clock: {node: leader, jump: -30s}") == {"jump_s": -30.0}
    assert _clock("clock: {node: leader, jump: 90}") == {"jump_s": 90.0}
    assert _clock("clock: {node: follower, drift: -5%, for: 30s}") == {"drift": -0.05, "for_s": 30.0}
    assert _clock("clock: {node: kafka-1, strobe: 10s}") == {"strobe_s": 10.0, "period_s": 1.0}
    assert _clock("clock: {node: leader, strobe: -2m, period: 3s, for: 20s}") == {
        "strobe_s": -120.0, "period_s": 3.0, "for_s": 20.0}
    plain = load_case_text(HEAD + "  - kill9: leader\n", "c.yaml")
    assert plain.clock == "real"  # a case without clock faults does not pay for them


@pytest.mark.parametrize(("step", "fragment"), [
    ("clock: {node: leader}", "give one of jump (+10m, -30s), drift (5%, -5%) or strobe"),
    ("clock: {node: leader, jump: 1m, drift: 5%}", "not jump and drift"),
    ("clock: {node: leader, jump: soon}", "invalid duration string 'soon'"),
    ("clock: {node: leader, jump: +-1m}", "invalid duration string '-1m'"),
    ("clock: {node: leader, jump: 1m, for: 10s}", "steps[1].clock.for: a jump is at once"),
    ("clock: {node: leader, drift: 5%, period: 2s}", "steps[1].clock.period: period belongs to a strobe"),
    ("clock: {node: leader, strobe: 5s, period: 500ms}", "a strobe's period is at least 1s"),
    ("clock: {node: leader, drift: 500%}", "a percentage above 0 and at most 100"),
    ("clock: {node: leader, jump: 1m, speed: 2}", "unknown key 'speed'"),
])
def test_a_bad_clock_step_is_one_error_naming_line_and_field(step: str, fragment: str) -> None:
    with pytest.raises(CaseError) as info:
        load_case_text(HEAD + f"  - {step}\n", "c.yaml")
    assert info.value.line == 5 and fragment in str(info.value), str(info.value)


def test_a_plan_is_exactly_one_fault() -> None:
    with pytest.raises(FaultError, match="one of jump, drift or strobe"):
        ClockPlan()
    with pytest.raises(FaultError, match="one of jump, drift or strobe"):
        ClockPlan(jump_s=1, drift=0.1)
    with pytest.raises(FaultError, match="period is at least 1"):
        ClockPlan(strobe_s=5, period_s=0.2)


def test_the_offset_file_is_replaced_whole_and_read_back(tmp_path: Path) -> None:
    clock = FakeClock(tmp_path / "kafka-1").create()
    assert clock.path.read_text() == "+0.000\n" and clock.offset() == 0
    clock.set(-90.25)
    assert clock.path.read_text() == "-90.250\n" and clock.offset() == -90.25
    assert not list(clock.home.glob(".*"))  # no half-written file left beside it


def test_a_drift_moves_the_offset_by_its_share_of_the_time_and_stops(tmp_path: Path) -> None:
    clock = FakeClock(tmp_path / "n").create()
    clock.set(10.0)
    driver = ClockDriver(clock, ClockPlan(drift=0.5)).start()
    time.sleep(1.3)
    done = driver.stop()
    moved = clock.offset() - 10.0
    assert 0.2 <= moved <= 0.7 and done["steps"] >= 2 and "error" not in done  # half of ~1 s
    time.sleep(0.6)
    assert clock.offset() - 10.0 == moved  # stopped: no more steps


def test_a_strobe_swings_between_two_offsets_until_its_time_is_up(tmp_path: Path) -> None:
    clock = FakeClock(tmp_path / "n").create()
    seen = set()
    driver = ClockDriver(clock, ClockPlan(strobe_s=-5.0, period_s=1.0, for_s=2.5)).start()
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        seen.add(clock.offset())
        time.sleep(0.1)
    assert seen == {0.0, -5.0}
    assert driver.stop()["steps"] == 3  # at 0, 1 and 2 s; none after for_s


def test_the_compose_override_preloads_libfaketime_with_the_nodes_offset_file(tmp_path: Path) -> None:
    from harness.backend import clock as clock_module

    if not clock_module.LIBFAKETIME.is_file():
        pytest.fail("libfaketime is not installed: run bin/setup")
    import json

    override = json.loads(compose_override(tmp_path, ["kafka-1"]).read_text())
    node = override["services"]["kafka-1"]
    assert node["environment"]["FAKETIME_DONT_FAKE_MONOTONIC"] == "1"
    assert node["environment"]["FAKETIME_TIMESTAMP_FILE"] == "/chaos-clock/offset"
    assert f"{tmp_path / 'kafka-1'}:/chaos-clock" in node["volumes"]
    assert (tmp_path / "kafka-1" / "offset").read_text() == "+0.000\n"


_WAITS = """
import java.util.concurrent.locks.LockSupport;
public class W { public static void main(String[] a) throws Exception {
  long t0 = System.nanoTime(); for (int i = 0; i < 20; i++) LockSupport.parkNanos(5_000_000L);
  long t1 = System.nanoTime(); for (int i = 0; i < 20; i++) Thread.sleep(5);
  long t2 = System.nanoTime();
  System.out.println((t1 - t0) / 1000000 + " " + (t2 - t1) / 1000000 + " " + System.currentTimeMillis()); } }
"""


def test_a_jvm_under_the_nodes_clock_settings_reads_the_offset_and_keeps_timed_waits(
        tmp_path: Path) -> None:
    """The settings each node gets, on the host's JVM: 20 parks and 20 sleeps of 5 ms take
    about 100 ms each (libfaketime's monotonic fix made the parks return at once and the
    sleeps take three times as long), and the wall clock is the offset ahead."""
    import json
    import os
    import shutil
    import subprocess

    from harness.backend import clock as clock_module

    java = shutil.which("java")
    if java is None or not clock_module.LIBFAKETIME.is_file():
        pytest.fail("java and libfaketime are needed: run bin/setup")
    node = json.loads(compose_override(tmp_path, ["n"]).read_text())["services"]["n"]
    env = {**os.environ, **node["environment"], "LD_PRELOAD": str(clock_module.LIBFAKETIME),
           "FAKETIME_TIMESTAMP_FILE": str(tmp_path / "n" / "offset")}
    FakeClock(tmp_path / "n").set(3600.0)
    (tmp_path / "W.java").write_text(_WAITS)
    out = subprocess.run([java, str(tmp_path / "W.java")], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr[-1000:]
    park_ms, sleep_ms, now_ms = (int(x) for x in out.stdout.split())
    assert 90 <= park_ms <= 200 and 90 <= sleep_ms <= 200, out.stdout
    assert abs(now_ms / 1000 - time.time() - 3600) < 10
