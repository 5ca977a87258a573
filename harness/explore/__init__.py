"""Exploration: runs of drawn fault schedules until one breaks a promise, then the failing
schedule shrunk to a small case file (``harness explore``, docs/exploration.md).

A campaign (:func:`run_campaign`) draws one schedule per run from the campaign's seed
(:mod:`.schedule`: crash-timing points of the system and version, node faults, partitions,
pauses, under a workload), writes it as a case file and runs it on a cluster kept between
runs. Draws prefer the points and faults hit least so far (``seen``, recorded per run so a
run replays). A point a run awaited in vain (the run's error) counts more, so it is drawn
less. The first run whose check finds an anomaly the
system promises against (:data:`.schedule.PROMISED`) with no unclean election logged by the
controller (one that did is ``explained``: Kafka elects the last known leader when no replica of
the ISR or the ELR is left, and documents that it may lose records), and that shows it again in each of
``probe_runs`` rechecks, ends the search (one that does not is recorded in ``flaky`` and the
search goes on); its schedule is shrunk
(:mod:`.shrink`: each candidate run ``probe_runs`` times, kept only if every run shows the
anomaly), the result run ``confirm_runs`` times; when at least :data:`CONFIRM_SHARE` of them
show it, it is run once on each other version asked for and written under ``cases/found/``
with what each version did. Everything is recorded in
``reports/explore-*/campaign.json`` and drawn on its ``index.html`` as it goes.
"""

from __future__ import annotations

import json
import logging
import random
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..case import load_case_text
from ..clusters import REPORTS_DIR, ROOT, get_cluster
from ..run import remove_own_clusters
from .page import write_page
from .schedule import PROMISED, Schedule, case_text, draw, faults_of
from .shrink import Try, shrink

__all__ = ["Campaign", "ExploreRun", "run_campaign", "FOUND_DIR"]

log = logging.getLogger(__name__)
#: where found cases are written
FOUND_DIR = ROOT / "cases" / "found"
#: how much a point not reached in a run counts toward ``seen`` (a hit or a draw counts 1):
#: a point this schedule's faults could not reach is drawn less, so that the campaign spends
#: fewer runs on errors
UNREACHED_WEIGHT = 3
#: the share of confirmation runs that must show the anomaly for a case to be written
CONFIRM_SHARE = 0.8
_UNREACHED = re.compile(r"waiting for a thread to reach point (\S+)")


@dataclass
class ExploreRun:
    """One run of a campaign: its draw, its verdict, what it found."""

    index: int
    seed: int
    purpose: str  # search, shrink, confirm, version
    label: str
    case_file: str
    run_dir: str
    verdict: str
    seconds: float
    found: list[str] = field(default_factory=list)
    points_hit: list[str] = field(default_factory=list)
    error: str | None = None
    version: str | None = None
    #: the point whose await timed out (the run's error): drawn less afterwards
    unreached: list[str] = field(default_factory=list)
    #: the points whose rule fired (a thread reached them); ``points_hit`` are those whose
    #: state, read from the files at the fault, was the point's
    points_reached: list[str] = field(default_factory=list)
    #: anomalies of ``PROMISED`` that followed an unclean election (not in ``found``)
    explained: list[str] = field(default_factory=list)
    #: the unclean elections the controller logged: ``broker B, epoch E``
    unclean: list[str] = field(default_factory=list)


@dataclass
class Campaign:
    """A campaign's record (``campaign.json``)."""

    cluster: str
    version: str
    seed: int
    started: str
    command: str
    runs: list[ExploreRun] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)
    finding: dict[str, Any] | None = None
    tries: list[Try] = field(default_factory=list)
    found_case: str | None = None
    confirmed: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    finished: str | None = None
    #: the faults the campaign draws (``--faults``; the system's own by default)
    faults: list[str] = field(default_factory=list)
    #: laid over the brokers of the campaign's version (``--broker-config``), not of the others
    broker_config: dict[str, str] = field(default_factory=dict)
    #: findings whose schedule did not show the anomaly again in every recheck run (``run``,
    #: ``anomalies``, ``rechecked`` "k/n", ``schedule``): real broken promises that a shrink
    #: could not start from; the search went on after each
    flaky: list[dict[str, Any]] = field(default_factory=list)
    #: search runs whose anomalies followed an unclean election (``run``, ``anomalies``,
    #: ``unclean``): Kafka's documented way to lose records, not a broken promise
    explained: list[dict[str, Any]] = field(default_factory=list)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_campaign(cluster: str, version: str | None = None, *, seed: int | None = None, runs: int = 60,
                 minutes: float = 120, reports_dir: Path = REPORTS_DIR, do_shrink: bool = True,
                 probe_runs: int = 2, confirm_runs: int = 10, max_tries: int = 30,
                 other_versions: tuple[str, ...] = (), command: str = "harness explore",
                 spark_master: str | None = None, found_dir: Path = FOUND_DIR,
                 runner: Callable[..., Any] | None = None, disk: str = "plain",
                 faults: tuple[str, ...] | None = None,
                 broker_config: dict[str, str] | None = None,
                 reset: Callable[[], None] | None = None) -> Campaign:
    """Runs a campaign (module doc); returns its record, also in ``campaign.json``.
    ``faults``: what the draws choose from (:func:`.schedule.faults_of`). ``broker_config``:
    laid over the brokers of ``version``'s runs (an old inter-broker protocol on a new
    version); the ``other_versions`` run with their own defaults. ``runner`` (tests): called
    like :func:`harness.run.run_case`; ``reset``: removes the campaign's cluster after a run that
    ended in an error (default: with the real runner, :func:`harness.run.remove_own_clusters`)."""
    from ..run import run_case

    spec = get_cluster(cluster)
    version = version or spec.default_version
    drawn = faults_of(spec.system, disk, faults)
    seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
    root = Path(reports_dir) / f"explore-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{seed}"
    (root / "cases").mkdir(parents=True)
    camp = Campaign(cluster, version, seed, _now(), command, faults=list(drawn),
                    broker_config=dict(broker_config or {}))
    run = runner or run_case
    reset = reset or (remove_own_clusters if runner is None else (lambda: None))
    deadline = time.monotonic() + minutes * 60
    seeds = random.Random(seed)
    seen: Counter[str] = Counter()

    def one(s: Schedule, purpose: str, label: str | None = None) -> ExploreRun:
        index = len(camp.runs)
        path = root / "cases" / f"{index:03d}-{purpose}.yaml"
        path.write_text(case_text(s, name=f"explore-{seed}-{index:03d}"), encoding="utf-8")
        t0 = time.monotonic()
        outcome = run(load_case_text(path.read_text(encoding="utf-8"), path), reports_dir=root / "runs",
                      keep_cluster=True, spark_master=spark_master)
        result = outcome.result
        if result.verdict == "error":
            # a run that ended in an error may leave its cluster broken in a way the next run's
            # readiness check does not see (a KRaft voter sending to another node's address):
            # the next run starts a new one
            reset()
        injections = result.injections or []
        broken = [a for a in PROMISED[s.system] if result.anomalies.get(a, 0) > 0]
        unclean = [f"broker {e.get('leader')}, epoch {e.get('epoch')}" for e in result.elections]
        done = ExploreRun(index, s.seed, purpose, label or s.label(), str(path), str(outcome.run_dir),
                          result.verdict, round(time.monotonic() - t0, 1),
                          [] if unclean else broken,
                          sorted({i.point for i in injections if i.hit}),
                          result.error, s.version, _UNREACHED.findall(result.error or "")[:1],
                          sorted({i.point for i in injections if i.detail}),
                          broken if unclean else [], unclean)
        camp.runs.append(done)
        _save(root, camp)
        log.info("explore: run %d (%s) %s: %s%s", index, purpose, done.label, done.verdict,
                 f", found {', '.join(done.found)}" if done.found else "")
        return done

    found: Schedule | None = None
    try:
        for _ in range(runs):
            if time.monotonic() > deadline:
                log.info("explore: the %g-minute budget is spent", minutes)
                break
            s = draw(seeds.randrange(2**31), cluster, version, seen=dict(seen), disk=disk, faults=drawn,
                     broker_config=broker_config)
            done = one(s, "search")
            seen.update(f"point:{e.point}" if e.point else e.fault for e in s.episodes)
            seen.update(f"point:{p}" for p in done.points_hit)
            seen.update({f"point:{p}": UNREACHED_WEIGHT for p in done.unreached})
            camp.seen = dict(seen)
            if done.explained:
                camp.explained.append({"run": done.index, "anomalies": done.explained,
                                       "unclean": done.unclean})
                _save(root, camp)
                log.info("explore: run %d's %s followed an unclean election (%s): the search goes on",
                         done.index, ", ".join(done.explained), "; ".join(done.unclean))
            if not done.found:
                continue
            if do_shrink:  # a shrink starts only from a schedule that shows it again every time
                again = [done.found[0] in one(s, "recheck").found for _ in range(probe_runs)]
                if not all(again):
                    camp.flaky.append({"run": done.index, "anomalies": done.found,
                                       "rechecked": f"{sum(again)}/{probe_runs}", "schedule": _plain(s)})
                    _save(root, camp)
                    log.info("explore: run %d's %s came back in %d of %d rechecks: the search goes on",
                             done.index, done.found[0], sum(again), probe_runs)
                    continue
            camp.finding = {"run": done.index, "anomalies": done.found, "schedule": _plain(s)}
            found = s
            break
        if found is not None and do_shrink:
            _shrink_and_write(camp, found, one, root, found_dir, probe_runs, confirm_runs, max_tries,
                              other_versions)
    finally:
        camp.finished = _now()
        _save(root, camp)
        if runner is None:
            remove_own_clusters()
    return camp


def _shrink_and_write(camp: Campaign, s: Schedule, one: Callable[..., ExploreRun], root: Path,
                      found_dir: Path, probe_runs: int, confirm_runs: int, max_tries: int,
                      other_versions: tuple[str, ...]) -> None:
    assert camp.finding is not None
    anomaly = camp.finding["anomalies"][0]

    def test(c: Schedule) -> bool:
        return all(anomaly in one(c, "shrink").found for _ in range(probe_runs))

    small, camp.tries = shrink(s, test, max_tries=max_tries)
    kept = sum(anomaly in one(small, "confirm").found for _ in range(confirm_runs))
    camp.confirmed = f"{kept}/{confirm_runs}"
    if kept < CONFIRM_SHARE * confirm_runs:  # a case that states a reproduction must give one
        log.info("explore: the shrunk schedule showed %s in %s confirmation runs, under %d%%: no case "
                 "written (its runs are in the campaign's cases/)", anomaly, camp.confirmed,
                 CONFIRM_SHARE * 100)
        _save(root, camp)
        return
    for v in other_versions:
        again = one(replace(small, version=v, broker_config={}), "version")
        camp.versions[v] = "reproduces" if anomaly in again.found else "holds"
    name = f"{camp.cluster}-{camp.version}-{camp.seed}".replace(".", "-")
    found_dir.mkdir(parents=True, exist_ok=True)
    path = found_dir / f"{name}.yaml"
    path.write_text(_found_text(small, name, anomaly, camp), encoding="utf-8")
    load_case_text(path.read_text(encoding="utf-8"), path)  # the file is a valid case
    camp.found_case = str(path)
    _save(root, camp)


def _found_text(s: Schedule, name: str, anomaly: str, camp: Campaign) -> str:
    """The found case: the shrunk schedule, with a versions list of what each version did
    (observed by the campaign, not a public source: a person checks it before it joins the
    library)."""
    text = case_text(replace(s, broker_config={}), name=name, description=(
        f"Found by harness explore (campaign seed {camp.seed}, {camp.cluster} {camp.version}"
        + "".join(f", {k}={v}" for k, v in s.broker_config.items())
        + f"): {anomaly} after {s.label()}. Shrunk from run {camp.finding and camp.finding['run']}; "
        f"reproduced in {camp.confirmed} confirmation runs. The versions below are what the "
        "campaign observed, not a public source."))
    head, _, expect = text.rpartition("expect: ")
    observe = json.loads(expect)["observe"]
    first: dict[str, Any] = {"version": camp.version, "source": "observed by harness explore", "expect": {
        "reproduces": [anomaly], "observe": observe, "min_acked": 1}}
    if s.broker_config:  # the campaign's own entry only: the other versions ran with their defaults
        first = {"label": f"{camp.version}-with-config", **first, "broker_config": dict(s.broker_config)}
    entries = [first]
    for v, what in camp.versions.items():
        entry: dict[str, Any] = {"observe": observe, "min_acked": 1}
        if what == "reproduces":
            entry["reproduces"] = [anomaly]
        entries.append({"version": v, "source": "observed by harness explore", "expect": entry})
    head = "\n".join(line for line in head.splitlines() if not line.startswith("version:"))
    head += "\nci: false  # a found case joins CI once a person has checked it against a source"
    return (head + "\nexpect: " + expect.strip() + "\nversions:\n"
            + "".join(f"  - {json.dumps(e)}\n" for e in entries))


def _plain(s: Schedule) -> dict[str, Any]:
    return {**asdict(s), "broker_config": dict(s.broker_config)}


def _save(root: Path, camp: Campaign) -> None:
    data = asdict(camp)
    (root / "campaign.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    write_page(root, data)
