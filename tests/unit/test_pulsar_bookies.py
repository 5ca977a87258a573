"""The per-bookie dump's plan: ledger metadata parsed, write sets, the ranges each bookie is
asked for (no Docker; the dump itself runs in the Pulsar cases)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.check.anomalies.bookies import write_set
from harness.systems.pulsar_bookies import PAST_LAST, parse_metadata, read_ranges

CLOSED = ("LedgerMetadata{formatVersion=3, ensembleSize=3, writeQuorumSize=2, ackQuorumSize=2, "
          "state=CLOSED, length=4200, lastEntryId=41, digestType=CRC32C, password=OMITTED, "
          "ensembles={0=[bookie-1:3181, bookie-2:3181, bookie-3:3181], 20=[bookie-1:3181, "
          "bookie-4:3181, bookie-3:3181]}, customMetadata={component=base64:bWFuYWdlZC1sZWRnZXI=}}")
OPEN = ("LedgerMetadata{formatVersion=3, ensembleSize=2, writeQuorumSize=2, ackQuorumSize=2, "
        "state=OPEN, digestType=CRC32C, password=OMITTED, ensembles={0=[bookie-2:3181, "
        "bookie-1:3181]}, customMetadata={}}")


def test_metadata_gives_quorums_ensembles_and_the_last_entry() -> None:
    closed = parse_metadata(0, 7, CLOSED, last_confirmed=99)
    assert (closed.state, closed.ensemble_size, closed.write_quorum, closed.ack_quorum) == ("CLOSED", 3, 2, 2)
    assert closed.ensembles == {0: ["bookie-1:3181", "bookie-2:3181", "bookie-3:3181"],
                                20: ["bookie-1:3181", "bookie-4:3181", "bookie-3:3181"]}
    assert closed.last_confirmed == 41  # a closed ledger's own, not the stats'
    assert parse_metadata(1, 8, OPEN, last_confirmed=5).last_confirmed == 5
    assert parse_metadata(1, 8, OPEN, last_confirmed=None).last_confirmed == -1
    with pytest.raises(ValueError, match="ledger 9"):
        parse_metadata(0, 9, "LedgerMetadata{state=OPEN}", None)


def test_write_sets_are_round_robin_within_the_ensemble_in_force() -> None:
    meta = parse_metadata(0, 7, CLOSED, None)
    ens = {k: tuple(v) for k, v in meta.ensembles.items()}

    def ws(entry: int) -> list[str]:
        return write_set(ens, meta.write_quorum, entry)

    assert ws(0) == ["bookie-1:3181", "bookie-2:3181"]
    assert ws(2) == ["bookie-3:3181", "bookie-1:3181"]
    assert ws(19) == ["bookie-2:3181", "bookie-3:3181"]
    assert ws(20) == ["bookie-3:3181", "bookie-1:3181"]  # 20 mod 3 = 2, new ensemble
    assert ws(22) == ["bookie-4:3181", "bookie-3:3181"]


def test_each_ensemble_s_range_is_read_from_each_of_its_bookies() -> None:
    closed, opened = parse_metadata(0, 7, CLOSED, None), parse_metadata(1, 8, OPEN, 5)
    tasks = read_ranges([closed, opened])
    assert tasks == [(7, "bookie-1:3181", 0, 19), (7, "bookie-2:3181", 0, 19), (7, "bookie-3:3181", 0, 19),
                     (7, "bookie-1:3181", 20, 41 + PAST_LAST), (7, "bookie-4:3181", 20, 41 + PAST_LAST),
                     (7, "bookie-3:3181", 20, 41 + PAST_LAST),
                     (8, "bookie-2:3181", 0, 5 + PAST_LAST), (8, "bookie-1:3181", 0, 5 + PAST_LAST)]
    assert not closed.cut and closed.read_to == 41 + PAST_LAST


def test_a_read_budget_cuts_the_ranges_and_says_so() -> None:
    closed, opened = parse_metadata(0, 7, CLOSED, None), parse_metadata(1, 8, OPEN, 5)
    tasks = read_ranges([closed, opened], max_reads=90)  # 60 for the first ensemble, 30 left
    assert tasks[-1] == (7, "bookie-3:3181", 20, 29)
    assert closed.cut and closed.read_to == 29
    assert all(t[0] == 7 for t in tasks)  # nothing left for ledger 8: cut, nothing read
    assert opened.cut and opened.read_to == -1


def test_the_stats_last_confirmed_entry_is_only_its_own_ledger_s(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """An open ledger that is not the one the stats' last confirmed position names (one not
    recovered yet) gets no last entry: read, not judged."""
    import json as _json
    from types import SimpleNamespace

    from harness.systems import pulsar_bookies

    stats = {"lastConfirmedEntry": "12:5",
             "ledgers": [{"ledgerId": 9, "metadata": OPEN}, {"ledgerId": 12, "metadata": OPEN},
                         {"ledgerId": 13}]}
    ran: list[list[tuple[int, str, int, int]]] = []
    monkeypatch.setattr(pulsar_bookies, "_run_dump",
                        lambda system, run_dir, tasks, digests: ran.append(tasks))
    problems: list[str] = []
    system = SimpleNamespace(internal_stats=lambda topic, part: stats, removed=set(), autorecovery=False)
    out = pulsar_bookies.dump_bookies(system, tmp_path, "t", 1, problems)  # type: ignore[arg-type]
    assert out is not None and out == tmp_path / "bookies"
    written = {r["ledger"]: r["last_confirmed"] for r in _json.loads((out / "ledgers.json").read_text())}
    assert written == {9: -1, 12: 5}
    assert problems == ["bookies: partition 0 ledger 13: no metadata"]
    assert ran and all(t[3] <= 5 + PAST_LAST for t in ran[0])


def test_a_removed_bookie_is_not_asked_and_its_reads_say_so(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import json as _json
    from types import SimpleNamespace

    from harness.systems import pulsar_bookies

    stats = {"lastConfirmedEntry": "12:5", "ledgers": [{"ledgerId": 12, "metadata": OPEN}]}
    ran: list[list[tuple[int, str, int, int]]] = []
    monkeypatch.setattr(pulsar_bookies, "_run_dump",
                        lambda system, run_dir, tasks, digests: ran.append(tasks))
    gone = {b.split(":")[0] for b in pulsar_bookies.parse_metadata(0, 12, OPEN, 5).ensembles[0][:1]}
    system = SimpleNamespace(internal_stats=lambda topic, part: stats, removed=gone, autorecovery=False)
    out = pulsar_bookies.dump_bookies(system, tmp_path, "t", 1, [])  # type: ignore[arg-type]
    assert out is not None and ran and all(t[1].split(":")[0] not in gone for t in ran[0])
    rows = [_json.loads(line) for line in (out / "entries.jsonl").read_text().splitlines()]
    assert rows and {r["rc"] for r in rows} == {"removed"}
    assert {r["bookie"].split(":")[0] for r in rows} == gone
    assert [r["entry"] for r in rows] == list(range(0, 5 + PAST_LAST + 1))


def test_with_autorecovery_the_ledgers_come_from_the_store_and_the_copies_are_asked_where_they_are(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The owner's stats keep the metadata of the handle it holds: an open ledger's first
    fragment re-replicated off bookie-3 still names bookie-3 there. With AutoRecovery on, the
    dump takes each ledger's metadata from the store and asks the bookie that holds the copy."""
    import json as _json
    from types import SimpleNamespace

    from harness.systems import pulsar_bookies

    owner = ("LedgerMetadata{formatVersion=3, ensembleSize=2, writeQuorumSize=2, ackQuorumSize=2, "
             "state=OPEN, digestType=CRC32C, password=OMITTED, ensembles={0=[bookie-3:3181, bookie-2:3181], "
             "30=[bookie-1:3181, bookie-2:3181]}, customMetadata={}}")
    store = owner.replace("0=[bookie-3:3181, bookie-2:3181]", "0=[bookie-1:3181, bookie-2:3181]")
    stats = {"lastConfirmedEntry": "6:39", "ledgers": [{"ledgerId": 6, "metadata": owner},
                                                       {"ledgerId": 5, "metadata": CLOSED}]}
    ran: list[list[tuple[int, str, int, int]]] = []
    monkeypatch.setattr(pulsar_bookies, "_run_dump",
                        lambda system, run_dir, tasks, digests: ran.append(tasks))
    problems: list[str] = []
    asked: list[list[int]] = []

    def stored(ids: object) -> dict[int, str]:
        asked.append(sorted(ids))  # type: ignore[call-overload]
        return {6: store}

    system = SimpleNamespace(internal_stats=lambda topic, part: stats, removed=set(), autorecovery=True,
                             stored_metadata=stored)
    out = pulsar_bookies.dump_bookies(system, tmp_path, "t", 1, problems)  # type: ignore[arg-type]
    assert out is not None and asked == [[5, 6]]
    written = {r["ledger"]: r for r in _json.loads((out / "ledgers.json").read_text())}
    assert written[6]["ensembles"]["0"] == ["bookie-1:3181", "bookie-2:3181"]
    assert written[6]["metadata"] == "store"
    assert written[6]["last_confirmed"] == 39 and written[5]["metadata"] == "owner"
    assert problems == ["bookies: ledger 5: no metadata in the store; the owner's is used"]
    assert not any(t[0] == 6 and t[1] == "bookie-3:3181" for t in ran[0])


def test_the_store_is_read_by_the_bookie_shell_one_jvm_a_ledger_in_one_exec() -> None:
    from types import SimpleNamespace
    from typing import Any, cast

    from harness.systems.pulsar import PulsarSystem

    scripts: list[str] = []

    def run(cmd: list[str]) -> tuple[int, str]:
        scripts.append(cmd[-1])
        return 0, (f"@5@ ledgerID: 5\n@5@ {CLOSED}\n@6@ 12:00:01 INFO starting\n@6@ {OPEN}\n"
                   "@7@ ERROR No such ledger exists\n")

    system = PulsarSystem.__new__(PulsarSystem)
    bookie = SimpleNamespace(name="bookie-1", container=SimpleNamespace(status="running", exec=run))
    cast(Any, system).bookies = lambda: [bookie]
    assert system.stored_metadata([6, 5, 7, 6]) == {5: CLOSED, 6: OPEN}
    assert len(scripts) == 1 and scripts[0].count("ledgermetadata -ledgerid") == 3
    assert scripts[0].endswith(" wait")
