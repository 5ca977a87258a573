"""Exploration without Docker: a seed replays the same schedule; every drawn schedule is a
valid case; shrinking a synthetic failing schedule keeps the failure and gets smaller; a
campaign with a stand-in runner finds, shrinks and writes a case that loads."""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.case import load_case, load_case_text
from harness.errors import HarnessError
from harness.explore import run_campaign
from harness.explore.schedule import Episode, Schedule, case_text, draw
from harness.explore.shrink import shrink


@pytest.mark.parametrize(("cluster", "version"), [("kafka-zk", "0.10.2.2"), ("kafka-kraft", None),
                                                  ("pulsar", None)])
def test_a_seed_replays_its_schedule_and_every_draw_is_a_valid_case(cluster: str,
                                                                    version: str | None) -> None:
    for seed in range(40):
        s = draw(seed, cluster, version)
        assert s == draw(seed, cluster, version)
        assert 1 <= len(s.episodes) <= 3
        assert sum(e.fault == "powerloss" for e in s.episodes) <= 1
        assert sum(not e.restart and e.kind in ("point", "crash") for e in s.episodes) <= 1
        case = load_case_text(case_text(s), "drawn.yaml")
        assert case.version == s.version and case.system == s.system
    assert [draw(s, cluster, version) for s in range(5)] != [draw(s + 99, cluster, version) for s in range(5)]


def test_guided_draws_prefer_what_was_seen_least() -> None:
    points = [f"point:{p}" for p in ("C1", "C2", "C3", "C4", "C5", "HW-LEADER-ONLY", "NEW-LEADER-FETCH",
                                     "TRUNCATE-BEFORE", "TRUNCATE-AFTER")]
    seen = {**dict.fromkeys(points, 50), "kill9": 50, "stop": 50, "pause": 50, "partition": 50}
    firsts = [draw(seed, "kafka-zk", "0.10.2.2", seen=seen).episodes[0].fault for seed in range(30)]
    assert firsts.count("powerloss") > 20  # the one never seen (at most one per schedule)
    plain = [draw(seed, "kafka-zk", "0.10.2.2").episodes[0].fault for seed in range(30)]
    assert plain.count("powerloss") < 10


def test_an_unknown_version_is_one_error() -> None:
    with pytest.raises(HarnessError, match="cluster kafka-zk has no version '9.9'"):
        draw(1, "kafka-zk", "9.9")


def _schedule() -> Schedule:
    eps = (Episode("pause", "pause", "follower", 10.0),
           Episode("point", "kill9", "leader", 20.0, True, point="HW-LEADER-ONLY", inflight=True),
           Episode("crash", "powerloss", "leader", 5.0, False),
           Episode("partition", "partition", "leader", 2.0))
    return Schedule(7, "kafka", "kafka-zk", "0.10.2.2", base=100, episodes=eps, load_s=40)


def test_shrinking_keeps_a_synthetic_failure_and_gets_smaller() -> None:
    """The failure: a kill9 at HW-LEADER-ONLY with at least 20 base records."""
    def fails(s: Schedule) -> bool:
        return s.base >= 20 and any(e.point == "HW-LEADER-ONLY" and e.fault == "kill9" for e in s.episodes)

    start = _schedule()
    small, tries = shrink(start, fails)
    assert fails(small) and small.size() < start.size()
    assert [e.point for e in small.episodes] == ["HW-LEADER-ONLY"]
    # without the load, the point's episode sends its own write
    assert small.base == 25 and small.load_s == 0 and small.episodes[0].inflight
    assert small.episodes[0].hold_s == 1.0
    assert any(not t.kept for t in tries) and all(t.size < start.size() for t in tries)
    load_case_text(case_text(small), "small.yaml")
    capped, few = shrink(start, fails, max_tries=3)
    assert len(few) == 3 and fails(capped)


def test_shrinking_makes_a_power_loss_a_kill_when_the_failure_does_not_need_it() -> None:
    """A failure at NEW-LEADER-FETCH whatever crashes the held node: the shrunk schedule
    kills it -9 (the shape KIP-101 describes) instead of cutting its power."""
    ep = Episode("point", "powerloss", "held", 10.0, True, point="NEW-LEADER-FETCH", inflight=True,
                 trigger="leader")
    start = Schedule(3, "kafka", "kafka-zk", "0.10.2.2", base=10, episodes=(ep,), load_s=40)
    small, _ = shrink(start, lambda s: any(e.point == "NEW-LEADER-FETCH" for e in s.episodes))
    assert [e.fault for e in small.episodes] == ["kill9"]
    picky, _ = shrink(start, lambda s: any(e.fault == "powerloss" for e in s.episodes))
    assert [e.fault for e in picky.episodes] == ["powerloss"]


def _outcome(tmp_path: Path, case: Any, lost: bool, elections: list[dict[str, Any]] | None = None) -> Any:
    """What a stand-in runner returns: a run that lost a write, or passed; ``elections``: the
    unclean elections its controller logged."""
    run_dir = tmp_path / "runs" / Path(str(case.path)).stem
    run_dir.mkdir(parents=True, exist_ok=True)
    result = SimpleNamespace(verdict="fail" if lost else "pass", injections=[], error=None,
                             anomalies={"lost-write": 1} if lost else {}, elections=elections or [])
    return SimpleNamespace(result=result, run_dir=run_dir)


def test_a_campaign_finds_shrinks_and_writes_a_case(tmp_path: Path) -> None:
    """A stand-in runner: a run 'loses' a write when its case kills the leader at a point."""
    def runner(case: Any, **_: Any) -> Any:
        text = Path(str(case.path)).read_text()
        lost = '"inject"' in text and ('"kill9": "leader"' in text or '"kill9": "held"' in text)
        return _outcome(tmp_path, case, lost)

    camp = run_campaign("kafka-zk", "0.10.2.2", seed=3, runs=60, reports_dir=tmp_path, runner=runner,
                        found_dir=tmp_path / "found", confirm_runs=3, other_versions=("0.11.0.3",))
    assert camp.finding is not None and camp.finding["anomalies"] == ["lost-write"]
    assert camp.confirmed == "3/3" and camp.versions == {"0.11.0.3": "reproduces"}
    found = load_case(Path(str(camp.found_case)), version="0.10.2.2")
    assert found.expect.reproduces == frozenset({"lost-write"})
    assert len(found.steps) <= 8 and not found.in_ci
    root = next(tmp_path.glob("explore-*"))
    assert (root / "campaign.json").is_file() and "Found lost-write" in (root / "index.html").read_text()
    assert replace(camp.runs[0]).purpose == "search"


def test_a_finding_that_does_not_come_back_is_recorded_and_the_search_goes_on(tmp_path: Path) -> None:
    """A stand-in runner in which a schedule without a point loses a write the first time it
    runs and never again (a race the faults won once): the rechecks do not see it, so it is
    recorded as flaky and the search goes on to a schedule that loses every time."""
    runs: Counter[str] = Counter()

    def runner(case: Any, **_: Any) -> Any:
        text = Path(str(case.path)).read_text()
        steps = text.split("steps:")[1]
        runs[steps] += 1
        point = '"inject"' in text
        lost = (point and ('"kill9": "leader"' in text or '"kill9": "held"' in text)) or (
            not point and runs[steps] == 1)
        return _outcome(tmp_path, case, lost)

    # a campaign whose first draw has no point, so that it finds the flaky loss first
    seed = next(n for n in range(100) if all(e.kind != "point" for e in draw(
        random.Random(n).randrange(2**31), "kafka-zk", "0.10.2.2").episodes))
    camp = run_campaign("kafka-zk", "0.10.2.2", seed=seed, runs=60, reports_dir=tmp_path, runner=runner,
                        found_dir=tmp_path / "found", confirm_runs=2)
    assert camp.flaky and all(f["rechecked"] == "0/2" for f in camp.flaky)
    assert camp.finding is not None and camp.finding["run"] > max(f["run"] for f in camp.flaky)
    assert camp.confirmed == "2/2" and camp.found_case
    purposes = [r.purpose for r in camp.runs]
    assert purposes[camp.finding["run"] + 1:camp.finding["run"] + 3] == ["recheck", "recheck"]
    page = (next(tmp_path.glob("explore-*")) / "index.html").read_text()
    assert "back in 0/2 rechecks" in page


def test_a_loss_after_an_unclean_election_is_explained_and_the_search_goes_on(tmp_path: Path) -> None:
    """A stand-in runner in which every run loses a write, and the first three do so after an
    unclean election (Kafka's last-known-leader rule): those are recorded as explained, never
    rechecked or shrunk, and the search ends at the first loss without one."""
    count = Counter[str]()

    def runner(case: Any, **_: Any) -> Any:
        count["runs"] += 1
        unclean = [{"leader": 1, "epoch": 3}] if count["runs"] <= 3 else []
        return _outcome(tmp_path, case, True, unclean)

    camp = run_campaign("kafka-kraft", "4.1.2", seed=3, runs=60, reports_dir=tmp_path, runner=runner,
                        found_dir=tmp_path / "found", do_shrink=False)
    assert [e["run"] for e in camp.explained] == [0, 1, 2]
    assert camp.explained[0] == {"run": 0, "anomalies": ["lost-write"], "unclean": ["broker 1, epoch 3"]}
    assert [(r.found, r.explained) for r in camp.runs[:3]] == [([], ["lost-write"])] * 3
    assert camp.finding is not None and camp.finding["run"] == 3 and len(camp.runs) == 4
    page = (next(tmp_path.glob("explore-*")) / "index.html").read_text()
    assert "after an unclean election by the controller (broker 1, epoch 3)" in page


def test_no_case_is_written_when_the_shrunk_schedule_does_not_confirm(tmp_path: Path) -> None:
    """A stand-in runner whose loss comes three times (the find and its two rechecks) and
    never again: no shrink candidate keeps it, the confirmation runs show it in none, and no
    case claims a reproduction."""
    losses = Counter[str]()

    def runner(case: Any, **_: Any) -> Any:
        text = Path(str(case.path)).read_text()
        lost = '"inject"' in text and '"kill9"' in text and losses["lost"] < 3
        losses["lost"] += lost
        return _outcome(tmp_path, case, lost)

    camp = run_campaign("kafka-zk", "0.10.2.2", seed=3, runs=60, reports_dir=tmp_path, runner=runner,
                        found_dir=tmp_path / "found", confirm_runs=4, other_versions=("0.11.0.3",))
    assert camp.finding is not None and camp.confirmed == "0/4"
    assert camp.found_case is None and not camp.versions and not (tmp_path / "found").exists()
    assert "too few for a case" in (next(tmp_path.glob("explore-*")) / "index.html").read_text()


def test_a_broker_config_reaches_the_campaign_version_only_and_its_entry_in_the_found_case(
        tmp_path: Path) -> None:
    """An old inter-broker protocol on 3.9.2: the stand-in loses a write only when the runs'
    brokers have it, so 0.11.0.3 (run with its defaults) holds, and the written case gives the
    setting to the 3.9.2 entry alone."""
    ibp = {"inter.broker.protocol.version": "0.11.0-IV1"}

    def runner(case: Any, **_: Any) -> Any:
        text = Path(str(case.path)).read_text()
        lost = dict(case.broker_config) == ibp and '"inject"' in text
        return _outcome(tmp_path, case, lost)

    assert draw(5, "kafka-zk", "3.9.2", broker_config=ibp).episodes == draw(5, "kafka-zk", "3.9.2").episodes
    camp = run_campaign("kafka-zk", "3.9.2", seed=3, runs=60, reports_dir=tmp_path, runner=runner,
                        found_dir=tmp_path / "found", confirm_runs=2, other_versions=("0.11.0.3",),
                        broker_config=ibp)
    assert camp.broker_config == ibp and camp.confirmed == "2/2" and camp.versions == {"0.11.0.3": "holds"}
    old = load_case(Path(str(camp.found_case)), version="3.9.2-with-config")
    assert dict(old.broker_config) == ibp and old.expect.reproduces == frozenset({"lost-write"})
    new = load_case(Path(str(camp.found_case)), version="0.11.0.3")
    assert not new.broker_config and not new.expect.reproduces


def test_a_broker_config_without_a_value_is_one_error(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    assert main(["explore", "--broker-config", "inter.broker.protocol.version", "--dry-run", "1"]) == 2
    assert "give KEY=VALUE" in capsys.readouterr().err


def test_lazy_disks_give_every_system_power_losses_and_the_case_says_so() -> None:
    drawn = [draw(seed, "pulsar", None, disk="lazy") for seed in range(60)]
    assert any(e.fault == "powerloss" for s in drawn for e in s.episodes)
    assert not any(e.fault == "powerloss" for seed in range(60) for e in draw(seed, "pulsar").episodes)
    for s in drawn[:10]:
        case = load_case_text(case_text(s), "lazy.yaml")
        assert case.disk == "lazy" and s == draw(s.seed, "pulsar", None, disk="lazy")


def test_a_triggered_point_waits_for_its_record_before_the_failure_and_may_leave_both_down() -> None:
    ep = Episode("point", "kill9", "held", 2.0, restart=False, point="NEW-LEADER-FETCH", inflight=True,
                 trigger="leader")
    s = Schedule(1, "kafka", "kafka-zk", "0.10.2.2", base=10, episodes=(ep,))
    steps = [step.action for step in load_case_text(case_text(s), "t.yaml").steps]
    text = case_text(s)
    assert text.index('"await": {"workload": "inflight-0"') < text.index('"kill9": "leader"')
    assert steps.count("start") == 1  # the trigger's node
    from harness.explore.schedule import smaller

    both_down = [c for c in smaller(s) if not c.episodes[0].trigger_restart]
    assert both_down and case_text(both_down[0]).count('"start"') == 0
    assert len(load_case_text(case_text(both_down[0]), "t.yaml").steps) == 8


def test_pulsar_arms_each_point_at_its_episode_and_kafka_its_first_before_the_load() -> None:
    crash = Episode("crash", "kill9", "owner", 5.0)
    held = Episode("point", "kill9", "held", 5.0, point="BK-ACK-QUORUM", inflight=False)
    s = Schedule(1, "pulsar", "pulsar", "4.0.7", base=10, episodes=(crash, held), load_s=20)
    text = case_text(s)
    # armed before the load, the write-path hold would take the load's first entry, and the
    # first episode's owner failover would wait behind it
    # and holds a record of its own: the load may have ended by then
    assert text.index('"kill9": "owner"') < text.index('"inject"') < text.index('"name": "inflight-1"')
    assert '"timeout": "90s"' in text and '"timeout": "30s"' not in text
    load_case_text(text, "p.yaml")
    # a point drawn at two episodes is armed at each (the first arm's hit is the first episode's)
    twice = case_text(replace(s, episodes=(held, crash, held)))
    assert twice.count('"inject"') == 2 and twice.index('"kill9": "owner"') < twice.rindex('"inject"')
    load_case_text(twice, "p.yaml")
    # a new owner's point: a client looks the topic up after the owner's kill, or none takes it
    # (and an ensemble change needs a write after the bookie's)
    moved = replace(held, point="LEDGER-RECOVERY", trigger="owner")
    text = case_text(replace(s, episodes=(moved,), load_s=0))
    assert (text.index('"name": "after-0"') < text.index('"kill9": "owner"') < text.index('"release"')
            < text.index('"injection": "LEDGER-RECOVERY"'))
    load_case_text(text, "p.yaml")
    # Kafka: a later episode's point is armed once the load has ended, with a record of its own
    # (armed before the load, it would hold the load's first record, long before its episode)
    k = Schedule(1, "kafka", "kafka-zk", "0.10.2.2", base=10, load_s=20, episodes=(
        Episode("crash", "kill9", "leader", 5.0), replace(held, point="C2")))
    text = case_text(k)
    order = ['"name": "load"', '"kill9": "leader"', '"workload": "load"', '"inject"',
             '"name": "inflight-1"', '"injection": "C2"', '"kill9": "held"']
    assert [text.index(x) for x in order] == sorted(text.index(x) for x in order)
    assert text.count('"workload": "load"') == 1 and '"timeout": "30s"' in text
    load_case_text(text, "k.yaml")
    # a first episode's point holds its own record, sent alone: the load starts after its fault
    # (under load a follower fetches N and N+1 at once, and HW-LEADER-ONLY is never hit; and a
    # load before the kill would move the leader's log end the hit is judged on)
    alone = replace(held, point="HW-LEADER-ONLY", inflight=False)
    text = case_text(replace(k, episodes=(alone, replace(held, point="C1"))))
    order = ['"inject": {"point": "HW-LEADER-ONLY"', '"name": "inflight-0"', '"injection": "HW-LEADER-ONLY"',
             '"workload": "inflight-0"', '"kill9": "held"', '"name": "load"', '"workload": "load"',
             '"inject": {"point": "C1"', '"name": "inflight-1"']
    assert [text.index(x) for x in order] == sorted(text.index(x) for x in order)
    load_case_text(text, "k.yaml")
    triggered = replace(held, point="NEW-LEADER-FETCH", trigger="leader")  # its failure comes first
    text = case_text(replace(k, episodes=(triggered,)))
    assert text.index('"inject"') < text.index('"name": "load"') < text.index('"kill9": "leader"')


@pytest.mark.parametrize("cluster", ["kafka-kraft", "pulsar"])
def test_asked_for_degrade_and_clock_are_drawn_with_parameters_and_healed(cluster: str) -> None:
    faults = ("kill9", "pause", "degrade", "clock")
    drawn = [draw(seed, cluster, None, faults=faults) for seed in range(60)]
    episodes = [e for s in drawn for e in s.episodes]
    for fault in ("degrade", "clock"):
        assert any(e.fault == fault and e.params for e in episodes)
    assert {e.fault for e in episodes} <= set(faults)  # a point's crash is a kill9 here
    for s in drawn:
        assert s == draw(s.seed, cluster, None, faults=faults)
        case = load_case_text(case_text(s), "faults.yaml")
        actions = [step.action for step in case.steps]
        for e in s.episodes:
            if e.kind in ("degrade", "clock"):  # the fault, its hold, a heal of all
                i = actions.index(e.fault)
                assert actions[i + 1:i + 3] == ["sleep", "heal"]
        assert case.clock == ("fake" if any(e.fault == "clock" for e in s.episodes) else "real")
    # the default draws what it drew before degrade and clock could be asked for
    assert all(e.fault not in ("degrade", "clock") for seed in range(60)
               for e in draw(seed, cluster, None).episodes)


def test_a_fault_a_system_cannot_draw_is_one_error() -> None:
    with pytest.raises(HarnessError, match="power loss on Pulsar needs --disk lazy"):
        draw(1, "pulsar", None, faults=("kill9", "powerloss"))
    with pytest.raises(HarnessError, match="cannot draw fault 'flood'"):
        draw(1, "kafka-zk", None, faults=("flood",))
    assert draw(1, "pulsar", None, faults=("powerloss",), disk="lazy").episodes


def test_a_point_awaited_in_vain_is_drawn_less_and_its_cluster_made_anew(tmp_path: Path) -> None:
    """A stand-in runner in which C2 is never reached: each such run is an error naming the
    point; the campaign records it, weighs it, and draws C2 less than a campaign that
    reaches it."""
    def runner(unreachable: str | None) -> Any:
        def run(case: Any, **_: Any) -> Any:
            text = Path(str(case.path)).read_text()
            error = (f"c.yaml:9: steps[4].await: timed out after 30s waiting for a thread to reach point "
                     f"{unreachable} (t offset 10)") if unreachable and f'"point": "{unreachable}"' in text \
                else None
            run_dir = tmp_path / "runs" / Path(str(case.path)).stem
            run_dir.mkdir(parents=True, exist_ok=True)
            result = SimpleNamespace(verdict="error" if error else "pass", injections=[], error=error,
                                     anomalies={}, elections=[])
            return SimpleNamespace(result=result, run_dir=run_dir)
        return run

    resets: list[int] = []

    def c2_draws(unreachable: str | None) -> tuple[int, Any]:
        camp = run_campaign("kafka-zk", "0.10.2.2", seed=11, runs=40, reports_dir=tmp_path / str(unreachable),
                            runner=runner(unreachable), found_dir=tmp_path / "found",
                            reset=lambda: resets.append(1))
        return sum("C2 then" in r.label for r in camp.runs), camp

    vain, camp = c2_draws("C2")
    assert vain >= 1 and all(r.unreached == ["C2"] for r in camp.runs if r.error)
    assert camp.seen["point:C2"] >= 3 * vain
    # after each run that ended in an error the next run starts a new cluster (the error may
    # have left this one broken in a way its readiness check does not see)
    assert len(resets) == sum(1 for r in camp.runs if r.verdict == "error") >= 1
    reached, _ = c2_draws(None)
    assert vain < reached
    root = next((tmp_path / "C2").glob("explore-*"))
    assert "runs that awaited it in vain" in (root / "index.html").read_text()


def test_the_campaign_counts_points_reached_apart_from_points_hit(tmp_path: Path) -> None:
    """A rule that fired whose state the files at the fault did not show (a graceful stop let
    the follower fetch first) is reached, not hit: the page counts both."""
    def runner(case: Any, **_: Any) -> Any:
        text = Path(str(case.path)).read_text()
        points = re.findall(r'"inject": \{"point": "([A-Z0-9-]+)"', text)
        run_dir = tmp_path / "runs" / Path(str(case.path)).stem
        run_dir.mkdir(parents=True, exist_ok=True)
        injections = [SimpleNamespace(point=p, detail={"node": "kafka-1"}, hit=p != "C1") for p in points]
        result = SimpleNamespace(verdict="pass", injections=injections, error=None, anomalies={},
                                 elections=[])
        return SimpleNamespace(result=result, run_dir=run_dir)

    camp = run_campaign("kafka-zk", "0.10.2.2", seed=5, runs=30, reports_dir=tmp_path, runner=runner,
                        found_dir=tmp_path / "found")
    with_c1 = [r for r in camp.runs if "C1 then" in r.label]
    assert with_c1 and all("C1" in r.points_reached and "C1" not in r.points_hit for r in with_c1)
    assert all(set(r.points_hit) <= set(r.points_reached) for r in camp.runs)
    page = (next(tmp_path.glob("explore-*")) / "index.html").read_text()
    c1_row = re.search(r"<tr><td>point:C1</td><td>\d+</td><td>(\d+)</td><td>(\d*)</td>", page)
    assert c1_row and c1_row.groups() == (str(len(with_c1)), "")
