"""Counting a flapping lock (apache/pulsar#17759) in Docker's time-stamped log lines."""

import datetime as dt
from typing import Any

from harness.systems.pulsar import count_recent, densest, stamps_of

NOW = dt.datetime(2026, 11, 22, 8, 17, 0, tzinfo=dt.timezone.utc).timestamp()


def _line(second: int, text: str) -> str:
    return f"2026-11-22T08:16:{second:02d}.838123456Z [2026-11-22 08:16:{second:02d},838] {text}"


def test_only_recent_lines_with_the_needle_count() -> None:
    flap = "INFO Lock on resource /ledgers/available/bookie-2:3181 was invalidated. state Valid"
    text = "\n".join([_line(30, flap), _line(49, flap), _line(55, flap), _line(56, flap),
                      _line(57, "INFO Successfully re-acquired lock"), "no stamp was invalidated",
                      ""])
    assert count_recent(text, "was invalidated", NOW - 10) == 2  # 08:16:49.8 is 10.2 s ago
    assert count_recent(text, "was invalidated", NOW - 60) == 4
    assert count_recent(text, "was invalidated", NOW - 4) == 1
    assert count_recent(text, "was invalidated", NOW + 3600) == 0
    assert count_recent("", "was invalidated", NOW - 10) == 0


def test_a_loop_is_the_densest_ten_seconds_of_the_run() -> None:
    flap = "INFO Lock on resource /ledgers/available/bookie-2:3181 was invalidated. state Valid"
    # a burst of 5 at 08:16:10-14, ended by an outage, and 3 spread over 08:16:30-50
    text = "\n".join([_line(s, flap) for s in (10, 11, 12, 13, 14, 30, 40, 50)]
                     + [_line(20, "INFO Notifying session is lost")])
    stamps = stamps_of(text, "was invalidated", NOW - 60)
    assert len(stamps) == 8 and stamps == sorted(stamps)
    assert densest(stamps, 10) == 5
    assert densest(stamps_of(text, "was invalidated", NOW - 25), 10) == 2  # 08:16:40, :50
    assert densest(stamps, 60) == 8
    assert densest([], 10) == 0


def test_ready_remedy_restarts_only_unregistered_bookies_and_says_why() -> None:
    from types import SimpleNamespace

    from harness.systems.pulsar import PulsarSystem

    log = ("INFO ZooKeeper client reconnection with server quorum. Current status: SessionLost\n"
           "Caused by: org.apache.zookeeper.KeeperException$SessionExpiredException: "
           "KeeperErrorCode = Session expired\n\tat org.apache.zookeeper.KeeperException.create\n"
           "INFO Got ZK session watch event: WatchedEvent state:Closed type:None path:null\n"
           "INFO Extracted entry log meta from entryLogId: 0\n")
    restarted: list[str] = []

    def node(name: str) -> SimpleNamespace:
        container = SimpleNamespace(logs=lambda tail: log if name == "bookie-1" else "",
                                    stop=lambda timeout: restarted.append(name),
                                    start=lambda: None)
        return SimpleNamespace(name=name, container=container)

    system: Any = object.__new__(PulsarSystem)
    system._restarted, system.removed = {}, set()
    system.cluster = SimpleNamespace(node=node)
    system.spec = SimpleNamespace(nodes_of=lambda kind: [node(f"bookie-{i}") for i in (1, 2, 3)])
    system.live_bookies = lambda: {"bookie-2:3181", "bookie-3:3181"}
    done = system.ready_remedy()
    assert restarted == ["bookie-1"] and "bookie-1" in system._restarted
    assert done is not None and "state:Closed" in done and "bookie-2" not in done
    system.live_bookies = lambda: {f"bookie-{i}:3181" for i in (1, 2, 3)}
    assert system.ready_remedy() is None


def test_a_broker_missing_from_the_load_managers_registry_makes_a_kept_cluster_unfit() -> None:
    """After its metadata session expired a broker registers again only with its next load
    report: a kept cluster is unfit until then (no bundle can be assigned to it), and the
    remedy restarts that broker alone."""
    from types import SimpleNamespace

    from harness.systems.pulsar import PulsarSystem

    restarted: list[str] = []

    def node(name: str) -> SimpleNamespace:
        container = SimpleNamespace(status="running", stop=lambda timeout: restarted.append(name),
                                    start=lambda: None)
        return SimpleNamespace(name=name, container=container)

    system: Any = object.__new__(PulsarSystem)
    system._restarted = {}
    system.cluster = SimpleNamespace(node=node)
    system.brokers = lambda: [node("broker-1"), node("broker-2")]
    system.lock_loops = lambda: {}
    system.active_brokers = lambda: {"broker-2:8080"}
    problem = system.reuse_problem()
    assert problem is not None and "not registered with the load manager" in problem and "broker-1" in problem
    assert system.reuse_remedy(problem) == "restarted broker-1" and restarted == ["broker-1"]
    system.active_brokers = lambda: {"broker-1:8080", "broker-2:8080"}
    assert system.reuse_problem() is None
