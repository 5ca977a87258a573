"""The Pulsar points' judgement, on recorded evidence: the managed ledger's last confirmed
entry at the hit and each bookie's copy from the bookie dump (no cluster)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.errors import InjectError
from harness.inject import POINTS, _Armed
from harness.inject.pulsar import PulsarInjector
from harness.systems.pulsar_bookies import ASKED, LedgerRange, asked_reads


class _Node:
    def __init__(self, name: str) -> None:
        self.name = name


def _injector(tmp_path: Path) -> PulsarInjector:
    return PulsarInjector(system=None, topic="t", run_dir=tmp_path, timeline=None)  # type: ignore[arg-type]


def _armed(point: str, node: str, *, confirmed: list[int] | None, hit: bool = True) -> _Armed:
    armed = _Armed(point, "k", 100, 0, [_Node(node)], "/chaos/k.events", POINTS[point], "broker-1",
                   None, 0.0)
    armed.extra = {"ledger": 7, "quorums": [2, 2, 2], "ensemble": ["bookie-1:3181", "bookie-2:3181"],
                   "write_set": ["bookie-1:3181", "bookie-2:3181"]}
    if hit:
        armed.hit = {"node": node, "ledger": 7, "entry": 100}
        armed.at_hit = [{"when": "hit", "last_confirmed": confirmed}]
    return armed


def _dump(tmp_path: Path, *rows: dict[str, Any]) -> None:
    (tmp_path / "bookies").mkdir(exist_ok=True)
    (tmp_path / "bookies" / "entries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _copy(bookie: str, entry: int = 100, rc: int = 0) -> dict[str, Any]:
    return {"ledger": 7, "entry": entry, "bookie": bookie, "rc": rc, "bytes": 10, "crc32": "a", "lac": 99}


def test_ack_quorum_hit_needs_the_entry_unconfirmed_and_on_the_ack_quorum(tmp_path: Path) -> None:
    inj = _injector(tmp_path)
    _dump(tmp_path, _copy("bookie-1:3181"), _copy("bookie-2:3181"))
    judged = inj.judge(_armed("BK-ACK-QUORUM", "broker-1", confirmed=[7, 99]))
    assert judged["hit"] is True
    assert "7:99" in judged["observed"] and "bookie-1:3181, bookie-2:3181" in judged["observed"]
    # confirmed already at the hit: the state was not the point's
    assert inj.judge(_armed("BK-ACK-QUORUM", "broker-1", confirmed=[7, 100]))["hit"] is False
    # no stats at the hit: not judged a hit
    assert inj.judge(_armed("BK-ACK-QUORUM", "broker-1", confirmed=None))["hit"] is False


def test_ack_quorum_hit_fails_when_fewer_bookies_than_the_ack_quorum_hold_it(tmp_path: Path) -> None:
    _dump(tmp_path, _copy("bookie-1:3181"), _copy("bookie-2:3181", rc=-13))
    judged = _injector(tmp_path).judge(_armed("BK-ACK-QUORUM", "broker-1", confirmed=[7, 99]))
    assert judged["hit"] is False and "held by bookie-1:3181 of write set" in judged["observed"]


def test_journaled_hit_needs_the_held_bookies_copy(tmp_path: Path) -> None:
    inj = _injector(tmp_path)
    _dump(tmp_path, _copy("bookie-1:3181"), _copy("bookie-3:3181"))  # bookie-2 lost it
    assert inj.judge(_armed("BK-JOURNALED", "bookie-1", confirmed=[7, 99]))["hit"] is True
    assert inj.judge(_armed("BK-JOURNALED", "bookie-2", confirmed=[7, 99]))["hit"] is False
    # an earlier ledger's last confirmed entry is before any entry of this one
    assert inj.judge(_armed("BK-JOURNALED", "bookie-1", confirmed=[6, 500]))["hit"] is True


def test_no_dump_and_no_hit_are_misses_with_a_reason(tmp_path: Path) -> None:
    inj = _injector(tmp_path)
    judged = inj.judge(_armed("BK-JOURNALED", "bookie-1", confirmed=[7, 99]))
    assert judged["hit"] is False and "no bookie dump" in judged["observed"]
    judged = inj.judge(_armed("BK-JOURNALED", "bookie-1", confirmed=None, hit=False))
    assert judged["hit"] is False and judged["observed"] == "the point was never reached"


@pytest.mark.parametrize("point", ["BK-JOURNALED", "BK-ACK-QUORUM"])
def test_a_user_rule_is_judged_on_firing_only(tmp_path: Path, point: str) -> None:
    armed = _armed(point, "bookie-1", confirmed=None)
    armed.spec = None
    assert _injector(tmp_path).judge(armed)["hit"] is True


def test_asked_reads_add_only_what_the_write_sets_do_not_read(tmp_path: Path) -> None:
    led = LedgerRange(0, 7, "OPEN", 2, 2, 2, {0: ["bookie-1:3181", "bookie-2:3181"],
                                               100: ["bookie-3:3181", "bookie-2:3181"]}, 100, read_to=102)
    path = tmp_path / ASKED
    path.write_text("".join(json.dumps(r) + "\n" for r in [
        {"ledger": 7, "entry": 100, "bookie": "bookie-1:3181"},  # out of the ensemble since 100
        {"ledger": 7, "entry": 100, "bookie": "bookie-2:3181"},  # read anyway
        {"ledger": 7, "entry": 100, "bookie": "bookie-1:3181"},  # asked twice: read once
        {"ledger": 9, "entry": 3, "bookie": "bookie-1:3181"},  # a ledger the stats lack
    ]) + "not json\n")
    assert asked_reads(path, [led]) == [(7, "bookie-1:3181", 100, 100), (9, "bookie-1:3181", 3, 3)]
    assert asked_reads(tmp_path / "missing", [led]) == []


def _cursor_armed(moved: list[int] | None, kill_t: float | None = 100.0) -> _Armed:
    armed = _Armed("CURSOR-UNPERSISTED", "k", 50, 0, [_Node("broker-1")], "/chaos/k.events",
                   POINTS["CURSOR-UNPERSISTED"], "broker-1", None, 0.0)
    armed.hit = {"node": "broker-1", "subscription": "app", "ledger": 7, "entry": 60, "persisted": "7:40"}
    armed.at_hit = [{"when": "hit", "last_confirmed": [7, 199],
                     "mark_delete": {"app": moved} if moved else {}}]
    armed.kill = {"action": "kill9", "node": "broker-1", "t": kill_t} if kill_t else None
    return armed


def _polls(tmp_path: Path, *rows: tuple[float, int, str]) -> None:
    (tmp_path / "history").mkdir(exist_ok=True)
    (tmp_path / "history" / "app.jsonl").write_text("".join(
        json.dumps({"type": "poll", "client": "app", "t": t, "m": t, "phase": "run", "mid": f"p-{e}",
                    "topic": "t", "partition": 0, "ledger": 7, "entry": e, "batch": -1,
                    "subscription": sub}) + "\n" for t, e, sub in rows))


def test_cursor_hit_needs_the_position_moved_in_memory_and_a_redelivery(tmp_path: Path) -> None:
    inj = _injector(tmp_path)
    # read once before the kill, then 45..60 again after it (the restored position was 7:44)
    _polls(tmp_path, *[(50.0, e, "app") for e in range(61)], *[(120.0, e, "app") for e in range(45, 70)])
    judged = inj.judge(_cursor_armed([7, 62]))
    assert judged["hit"] is True and "16 message(s)" in judged["observed"]
    # the mark-delete position had not moved to the held one at the hit
    assert inj.judge(_cursor_armed([7, 55]))["hit"] is False
    assert inj.judge(_cursor_armed(None))["hit"] is False
    # no kill after the hit: nothing to show the write never landed
    assert inj.judge(_cursor_armed([7, 62], kill_t=None))["hit"] is False


def test_cursor_hit_fails_without_redelivery_or_for_another_subscription(tmp_path: Path) -> None:
    inj = _injector(tmp_path)
    _polls(tmp_path, *[(50.0, e, "app") for e in range(61)], *[(120.0, e, "app") for e in range(61, 70)],
           *[(120.0, e, "other") for e in range(0, 70)])
    judged = inj.judge(_cursor_armed([7, 62]))
    assert judged["hit"] is False and "0 message(s)" in judged["observed"]


def test_managed_ledger_names() -> None:
    from harness.inject.pulsar import managed_ledger

    assert managed_ledger("persistent://public/default/t-partition-0") == \
        "public/default/persistent/t-partition-0"
    assert managed_ledger("persistent://public/deduplicated/x") == "public/deduplicated/persistent/x"


def _stored_armed(point: str, hit: dict[str, Any] | None, at_hit: dict[str, Any],
                  **extra: Any) -> _Armed:
    armed = _Armed(point, "k", 100, 0, [_Node("broker-1")], "/chaos/k.events", POINTS[point],
                   "broker-1", None, 0.0)
    armed.extra = {"ledger": 7, "quorums": [2, 2, 2], "ensemble": ["bookie-1:3181", "bookie-2:3181"],
                   "write_set": [], **extra}
    armed.hit = hit
    armed.at_hit = [{"when": "hit", **at_hit}] if hit else None
    return armed


_CHANGE = {"node": "broker-1", "ledger": 7, "entry": 153, "failed": "[bookie-2:3181]",
           "new_ensemble": "[bookie-1:3181,bookie-3:3181]", "lac": 152}


def test_ensemble_change_hit_needs_the_failed_bookie_down_and_the_old_ensemble_stored(tmp_path: Path) -> None:
    inj = _injector(tmp_path)
    stored = {"state": "OPEN", "ensembles": {"0": ["bookie-1:3181", "bookie-2:3181"]},
              "running_bookies": ["bookie-1", "bookie-3"]}
    judged = inj.judge(_stored_armed("ENSEMBLE-CHANGE", _CHANGE, stored))
    assert judged["hit"] is True
    assert "failed bookie-2:3181 (down)" in judged["observed"]
    assert "new ensemble from entry 153: bookie-1:3181, bookie-3:3181" in judged["observed"]
    # the new ensemble already written: the change was not held before its metadata write
    written = {**stored, "ensembles": {"0": ["bookie-1:3181", "bookie-2:3181"],
                                       "153": ["bookie-1:3181", "bookie-3:3181"]}}
    assert inj.judge(_stored_armed("ENSEMBLE-CHANGE", _CHANGE, written))["hit"] is False
    # the "failed" bookie still runs: the change had another cause than the case's fault
    alive = {**stored, "running_bookies": ["bookie-1", "bookie-2", "bookie-3"]}
    assert inj.judge(_stored_armed("ENSEMBLE-CHANGE", _CHANGE, alive))["hit"] is False
    # the metadata not read at the hit
    unread = {"error": "no running bookie", "running_bookies": ["bookie-1", "bookie-3"]}
    assert inj.judge(_stored_armed("ENSEMBLE-CHANGE", _CHANGE, unread))["hit"] is False
    assert inj.judge(_stored_armed("ENSEMBLE-CHANGE", None, {}))["hit"] is False


def _ledgers(tmp_path: Path, *rows: dict[str, Any]) -> None:
    (tmp_path / "bookies").mkdir(exist_ok=True)
    (tmp_path / "bookies" / "ledgers.json").write_text(json.dumps(list(rows)))


def test_recovery_hit_needs_in_recovery_at_the_hit_and_closed_at_or_past_the_lac(tmp_path: Path) -> None:
    inj = _injector(tmp_path)
    hit = {"node": "broker-2", "ledger": 7, "entry": 120, "lac": 119}
    _ledgers(tmp_path, {"ledger": 7, "state": "CLOSED", "last_confirmed": 120},
             {"ledger": 9, "state": "OPEN", "last_confirmed": 300})
    judged = inj.judge(_stored_armed("LEDGER-RECOVERY", hit, {"state": "IN_RECOVERY"}))
    assert judged["hit"] is True and "CLOSED at entry 120" in judged["observed"]
    # still OPEN in the store at the hit: the recovery had not marked it
    assert inj.judge(_stored_armed("LEDGER-RECOVERY", hit, {"state": "OPEN"}))["hit"] is False
    # closed below what the held recovery had found confirmed
    _ledgers(tmp_path, {"ledger": 7, "state": "CLOSED", "last_confirmed": 118})
    assert inj.judge(_stored_armed("LEDGER-RECOVERY", hit, {"state": "IN_RECOVERY"}))["hit"] is False
    # never closed (or no dump)
    _ledgers(tmp_path, {"ledger": 7, "state": "IN_RECOVERY", "last_confirmed": 119})
    judged = inj.judge(_stored_armed("LEDGER-RECOVERY", hit, {"state": "IN_RECOVERY"}))
    assert judged["hit"] is False and "not closed" in judged["observed"]


def test_bundle_hit_needs_the_held_broker_holding_the_lock_and_the_ledger_unfenced(tmp_path: Path) -> None:
    inj = _injector(tmp_path)
    hit = {"node": "broker-2", "ledger": 7, "entry": 100}
    bundle = {"bundle": "public/deduplicated/0x40000000_0x80000000"}
    judged = inj.judge(_stored_armed("BUNDLE-ACQUIRED", hit,
                                     {"bundle_holder": "broker-2", "state": "OPEN"}, **bundle))
    assert judged["hit"] is True and "held by broker-2" in judged["observed"]
    for at_hit in ({"bundle_holder": "broker-1", "state": "OPEN"},  # the lock is another's
                   {"bundle_holder": None, "state": "OPEN"},  # nobody holds it
                   {"bundle_holder": "broker-2", "state": "IN_RECOVERY"}):  # already fenced
        assert inj.judge(_stored_armed("BUNDLE-ACQUIRED", hit, at_hit, **bundle))["hit"] is False


def test_the_new_pulsar_points_have_rules_on_both_lines() -> None:
    from harness.points import available_points

    for version in ("4.0.7", "4.2.4"):
        points = available_points("pulsar", version)
        assert {"ENSEMBLE-CHANGE", "LEDGER-RECOVERY", "BUNDLE-ACQUIRED"} <= set(points), version


def test_an_ensemble_change_is_armed_once_a_spare_bookie_registered(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A bookie started the step before may not be registered yet; with none beyond the
    ensemble, the owner closes the ledger instead of changing its ensemble."""
    import harness.inject.pulsar as mod

    monkeypatch.setattr("tenacity.nap.time.sleep", lambda s: None)
    registered = [{"bookie-1:3181", "bookie-2:3181"}, {"bookie-1:3181", "bookie-2:3181", "bookie-3:3181"}]
    injector = _injector(tmp_path)
    injector.system = SimpleNamespace(live_bookies=lambda: registered.pop(0) if len(registered) > 1
                                      else registered[0])  # type: ignore[assignment]
    injector._await_spare(["bookie-1:3181", "bookie-2:3181"])
    assert len(registered) == 1
    registered[:] = [{"bookie-1:3181", "bookie-2:3181"}]
    monkeypatch.setattr(mod, "ARM_WAIT_S", 0.01)
    with pytest.raises(InjectError, match="no bookie can replace one of the ensemble bookie-1:3181"):
        injector._await_spare(["bookie-1:3181", "bookie-2:3181"])
