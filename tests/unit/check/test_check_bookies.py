"""The bookie family (Pulsar's per-bookie copies, ``bookies/``): injected under-replicated,
under-write-quorum and bookie-divergence entries are found in exactly the injected numbers,
by the Spark check and the reference checker alike; the noise a dump holds (copies past the
last confirmed entry, copies outside an entry's write set) is not counted; bad input is said."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.check import check_run
from harness.errors import CheckError
from harness.testing import reference_checker
from harness.testing.bookie_dump import write_dump
from harness.testing.synthetic import Profile, generate

KINDS = ("under-replicated", "under-write-quorum", "bookie-divergence")


def _run(tmp_path: Path, inject: dict[str, int], bad_lines: int = 0) -> dict[str, int]:
    history = generate(tmp_path, Profile(records=300, system="pulsar", partitions=2, seed=3))
    assert not any(history.anomalies.values())
    return write_dump(tmp_path, inject, seed=5, bad_lines=bad_lines)


def test_injected_bookie_anomalies_are_found_by_both_checkers(tmp_path: Path) -> None:
    expected = _run(tmp_path, dict.fromkeys(KINDS, 2), bad_lines=3)
    assert expected == dict.fromkeys(KINDS, 2)
    result = check_run(tmp_path)
    assert {k: result.anomalies[k] for k in KINDS} == expected
    assert sum(result.anomalies.values()) == 6  # nothing else, and not the noise
    assert not result.valid  # under-replicated and bookie-divergence invalidate; the other does not
    assert result.unread["bookies/entries.jsonl"] == {"not a bookie read": 3}
    for kind in KINDS:
        for ex in result.examples[kind]:
            held = [h["bookie"] for h in ex["held"]]
            assert set(held) <= set(ex["write_set"]) and len(ex["write_set"]) == ex["write_quorum"]
            assert 0 <= ex["entry"] <= ex["last_confirmed"]
            if kind == "under-replicated":
                assert len(held) < ex["ack_quorum"]
            elif kind == "under-write-quorum":
                assert ex["ack_quorum"] <= len(held) < ex["write_quorum"]
            else:
                assert len({h["crc32"] for h in ex["held"]}) == 2
    assert reference_checker.check(tmp_path) == result


def test_informational_alone_keeps_a_run_valid(tmp_path: Path) -> None:
    _run(tmp_path, {"under-write-quorum": 3})
    result = check_run(tmp_path)
    assert result.anomalies["under-write-quorum"] == 3 and result.valid
    assert reference_checker.check(tmp_path) == result


def test_an_entry_whose_bookie_did_not_answer_is_not_judged(tmp_path: Path) -> None:
    """A read that failed (not "no such entry") leaves the copies unknown: fewer than the ack
    quorum were read, yet it is no under-replicated entry; the failures are listed."""
    history = generate(tmp_path, Profile(records=300, system="pulsar", partitions=2, seed=3))
    assert not any(history.anomalies.values())
    write_dump(tmp_path, {"under-replicated": 1}, seed=5, failed_reads=4)
    result = check_run(tmp_path)
    assert result.anomalies["under-replicated"] == 1 and result.anomalies["under-write-quorum"] == 0
    assert result.unread["bookies/entries.jsonl"]["bookie read failed (rc -8)"] >= 4
    assert reference_checker.check(tmp_path) == result


def test_no_such_ledger_is_a_missing_copy_unless_no_bookie_returned_the_entry(tmp_path: Path) -> None:
    """A bookie down when its ledger was made answers "no such ledger": a missing copy when
    another bookie returned the entry; when none did, the ledger may have been trimmed
    between the stats and the dump, and the entry is not judged."""
    history = generate(tmp_path, Profile(records=300, system="pulsar", partitions=2, seed=3))
    assert not any(history.anomalies.values())
    expected = write_dump(tmp_path, {}, seed=5, no_ledger=3, trimmed=2)
    assert expected["under-write-quorum"] == 3
    result = check_run(tmp_path)
    assert {k: result.anomalies[k] for k in KINDS} == expected
    unread = result.unread["bookies/entries.jsonl"]
    assert list(unread) == ["bookie read failed (rc -7)"]
    assert 4 <= unread["bookie read failed (rc -7)"] <= 6  # the write sets (2 or 3) of 2 entries
    assert reference_checker.check(tmp_path) == result


def test_a_clean_dump_and_no_dump_count_nothing(tmp_path: Path) -> None:
    _run(tmp_path, {})
    clean = reference_checker.check(tmp_path)
    assert not any(clean.anomalies[k] for k in KINDS) and "bookies/entries.jsonl" not in clean.unread
    for name in ("ledgers.json", "entries.jsonl"):
        (tmp_path / "bookies" / name).unlink()
    assert not any(reference_checker.check(tmp_path).anomalies[k] for k in KINDS)


@pytest.mark.parametrize("text", [
    "{not json", '{"ledger": 7}', '[{"ledger": 7, "partition": 0}]',
    '[{"ledger": 7, "write_quorum": 2, "ack_quorum": 2, "ensembles": {"0": ["a"]}, "last_confirmed": 3}]'])
def test_a_ledger_list_that_is_not_one_is_an_error_naming_it(tmp_path: Path, text: str) -> None:
    _run(tmp_path, {})
    (tmp_path / "bookies" / "ledgers.json").write_text(text)
    with pytest.raises(CheckError, match=r"bookies/ledgers\.json: not the ledger list of a bookie dump"):
        reference_checker.check(tmp_path)
    from harness.check.anomalies import bookies

    with pytest.raises(CheckError, match=r"bookies/ledgers\.json: not the ledger list of a bookie dump"):
        bookies.find(tmp_path)


def test_write_sets_follow_the_ensemble_in_force() -> None:
    from harness.check.anomalies.bookies import write_set

    ens = {0: ("a:1", "b:1", "c:1"), 4: ("a:1", "d:1", "c:1")}
    assert write_set(ens, 2, 0) == ["a:1", "b:1"] and write_set(ens, 2, 2) == ["c:1", "a:1"]
    assert write_set(ens, 2, 4) == ["d:1", "c:1"]  # 4 mod 3 = 1, in the new ensemble
    assert write_set(ens, 3, 5) == ["c:1", "a:1", "d:1"]
    assert write_set({2: ("a:1",)}, 1, 1) == []  # before the first ensemble: none


def test_receipts_past_a_closed_ledgers_end_are_found_by_both_checkers(tmp_path: Path) -> None:
    """An acknowledged message whose entry lies past its closed ledger's last entry is
    past-closed-end (once per message, batch lines expanded); the same past an open ledger's
    last confirmed entry is not judged (the ledger has no last entry yet)."""
    from harness.testing.bookie_dump import write_closed_short

    history = generate(tmp_path, Profile(records=600, system="pulsar", partitions=2, seed=4))
    assert not any(history.anomalies.values())
    expected = write_closed_short(tmp_path, cut=3)
    assert expected > 0
    result = check_run(tmp_path)
    assert result.anomalies.get("past-closed-end") == expected
    assert sum(result.anomalies.values()) == expected and not result.valid
    for ex in result.examples["past-closed-end"]:
        assert ex["entry"] > ex["last_entry"] and ex["mid"]
    assert reference_checker.check(tmp_path) == result


def test_nothing_past_the_end_when_the_ledgers_close_at_their_last_receipt(tmp_path: Path) -> None:
    from harness.testing.bookie_dump import write_closed_short

    generate(tmp_path, Profile(records=300, system="pulsar", partitions=2, seed=4))
    assert write_closed_short(tmp_path, cut=0) == 0
    result = check_run(tmp_path)
    assert result.anomalies.get("past-closed-end") == 0 and result.valid
    assert reference_checker.check(tmp_path) == result


def test_a_bookie_removed_for_good_holds_nothing(tmp_path: Path) -> None:
    """The ``remove`` fault's reads (``rc`` "removed", not asked) count as copies not held:
    entries whose other copy was not re-replicated are under-replicated, and no read failed."""
    import json

    generate(tmp_path, Profile(records=50, system="pulsar", partitions=1, seed=3))
    base = tmp_path / "bookies"
    base.mkdir()
    (base / "ledgers.json").write_text(json.dumps([{
        "partition": 0, "ledger": 9000, "state": "CLOSED", "ensemble_size": 2, "write_quorum": 2,
        "ack_quorum": 2, "ensembles": {"0": ["bookie-1:3181", "bookie-2:3181"],
                                       "3": ["bookie-1:3181", "bookie-3:3181"]},
        "last_confirmed": 5, "read_to": 7, "cut": False, "digest": "CRC32C"}]))
    rows = [{"ledger": 9000, "entry": e, "bookie": b, "rc": 0, "crc32": "1", "bytes": 40, "lac": e - 1}
            for e in range(6) for b in ("bookie-1:3181",) + (("bookie-3:3181",) if e >= 3 else ())]
    rows += [{"ledger": 9000, "entry": e, "bookie": "bookie-2:3181", "rc": "removed"} for e in range(3)]
    (base / "entries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = check_run(tmp_path)
    assert result.anomalies["under-replicated"] == 3  # entries 0-2: bookie-1's copy alone
    assert [ex["entry"] for ex in result.examples["under-replicated"]] == [0, 1, 2]
    assert "bookies/entries.jsonl" not in result.unread
    assert reference_checker.check(tmp_path) == result
