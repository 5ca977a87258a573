"""What a check reads is validated before Spark starts (one clear CheckError naming the
path); lines that cannot be read (history and replica lines) and sends without a message id
are counted, per file and reason, by both checkers alike, and named to the user; a history
of which no line could be read is an error, not a clean run."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.check import check_run, plan
from harness.check.inputs import first_skipped, first_unread
from harness.check.result import skipped_lines
from harness.errors import CheckError
from harness.testing import reference_checker
from harness.testing.synthetic import Profile, generate

CHECKERS: dict[str, Callable[[Path], object]] = {"spark": check_run, "reference": reference_checker.check}


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting Spark fails: what raises here was found before."""

    def refuse(master: str | None = None) -> None:
        raise AssertionError("Spark started before the inputs were validated")

    monkeypatch.setattr(plan, "session_for", refuse)


@pytest.mark.parametrize("checker", CHECKERS)
@pytest.mark.parametrize("bad", ["history-dir", "replica-dir", "fifo", "dangling-link", "replicas-file"])
def test_unreadable_inputs_are_named_before_spark_starts(tmp_path: Path, no_spark: None, checker: str,
                                                         bad: str) -> None:
    run = tmp_path / "run"
    generate(run, Profile(records=50, replicas=1))
    path = {"history-dir": run / "history" / "consumer-9.jsonl", "replica-dir": run / "replicas" / "x.jsonl",
            "fifo": run / "history" / "fifo.jsonl", "dangling-link": run / "history" / "gone.jsonl",
            "replicas-file": run / "replicas"}[bad]
    if bad in ("history-dir", "replica-dir"):
        path.mkdir()
        (path / "inside.jsonl").write_text("{}\n")
        reason = "a directory, not a file of lines"
    elif bad == "fifo":
        os.mkfifo(path)
        reason = "not a regular file"
    elif bad == "dangling-link":
        path.symlink_to(run / "no-such-file.jsonl")
        reason = "cannot be read: No such file or directory"
    else:
        for f in path.iterdir():
            f.unlink()
        path.rmdir()
        path.write_text("")
        reason = "not a directory"
    with pytest.raises(CheckError) as err:
        CHECKERS[checker](run)
    assert f"{path}: {reason}" in str(err.value)


@pytest.mark.parametrize("checker", CHECKERS)
def test_a_run_without_history_is_named(tmp_path: Path, no_spark: None, checker: str) -> None:
    with pytest.raises(CheckError, match="no history/ directory"):
        CHECKERS[checker](tmp_path)
    (tmp_path / "history").mkdir()
    with pytest.raises(CheckError, match=r"no history/\*\.jsonl files"):
        CHECKERS[checker](tmp_path)


@pytest.mark.parametrize("checker", CHECKERS)
def test_a_history_of_random_bytes_is_an_error(tmp_path: Path, checker: str) -> None:
    (tmp_path / "history").mkdir()
    rng = random.Random(18)
    for name in ("producer-0", "consumer-0"):
        (tmp_path / "history" / f"{name}.jsonl").write_bytes(rng.randbytes(20_000))
    with pytest.raises(CheckError, match=r"no history line could be read: all \d+ lines were skipped"):
        CHECKERS[checker](tmp_path)


@pytest.mark.parametrize("checker", CHECKERS)
def test_an_empty_history_is_an_error(tmp_path: Path, checker: str) -> None:
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "producer-0.jsonl").write_text("\n  \n")
    with pytest.raises(CheckError, match="no history line could be read: the history files hold no lines"):
        CHECKERS[checker](tmp_path)


def test_skipped_lines_are_counted_alike(tmp_path: Path) -> None:
    """Junk lines among good ones: each is counted once, by the Spark job and the
    reference checker, and the result is otherwise the run's."""
    expected = generate(tmp_path, Profile(records=400, replicas=2, seed=18, inject={"lost-write": 1},
                                          torn_replicas=True))
    junk = ["{not json", "[1,2]", '"text"', '{"type":"fault","node":"kafka-1"}', '{"mid":"p0-1"}',
            '{"type":"polls","client":"consumer-0","partitions":[0,0],"offsets":[1],"mids":["p0-1","p0-2"]}',
            '{"type":"ok","client":"producer-0","mid":"p0-1","partition":0,"offset":"7"}',
            "\x00\x01\x02"]  # and a line of bytes that are not UTF-8
    fine = ['{"type":"stall","client":"producer-0","seconds":0.5}', "", "   "]  # read; blank lines
    with open(tmp_path / "history" / "producer-0.jsonl", "ab") as fh:
        fh.write("".join(line + "\n" for line in junk + fine).encode("utf-8") + b"\xff\xfe{\n")
    with open(tmp_path / "replicas" / "kafka-1.jsonl", "a", encoding="utf-8") as fh:
        fh.write("not a replica line\n")  # counted apart
    result = check_run(tmp_path)
    assert result.anomalies == expected.anomalies
    assert expected.counts["skipped"] > 0 and expected.counts["replica-skipped"] == 6  # the generator's junk
    assert result.counts == {**expected.counts, "lines": expected.counts["lines"] + len(junk) + 2,
                             "skipped": expected.counts["skipped"] + len(junk) + 1,
                             "replica-lines": expected.counts["replica-lines"] + 1,
                             "replica-skipped": expected.counts["replica-skipped"] + 1}
    assert result.unread["replicas/kafka-1.jsonl"] == {"not a JSON object": 2, "not a replica record": 1,
                                                       "offset: not a 64-bit integer": 1}
    assert result == reference_checker.check(tmp_path)
    assert skipped_lines({**result.counts, "replica-skipped": 0}) == (
        f"{result.counts['skipped']} of {result.counts['lines']} history lines could not be read and were "
        "skipped")
    assert json.loads(json.dumps(result.to_dict()))["counts"]["skipped"] == result.counts["skipped"]


def test_no_warning_without_skipped_lines() -> None:
    assert skipped_lines({"lines": 10, "skipped": 0}) is None
    assert skipped_lines({}) is None


def test_the_first_skipped_lines_are_named(tmp_path: Path) -> None:
    """first_skipped names the file, the line (from 1) and why, in file order, up to its
    limit; nothing for a history larger than it reads."""
    history = tmp_path / "history"
    history.mkdir()
    (history / "a.jsonl").write_text('{"type":"ok","mid":"a","partition":0,"offset":1}\n\n{not json\n')
    (history / "b.jsonl").write_text('{"type":"meta","partitions":8}\r\n{"type":"fault"}\n'
                                     '{"type":"ok","mid":"b","offset":1.5}')
    assert first_skipped(tmp_path) == ["history/a.jsonl:3 (not a JSON object)",
                                       "history/b.jsonl:1 (partitions: not a list)",
                                       "history/b.jsonl:2 (type 'fault': not a client event of the history "
                                       "contract)"]
    assert first_skipped(tmp_path, limit=5)[-1] == "history/b.jsonl:3 (offset: not a 64-bit integer)"
    assert first_skipped(tmp_path, limit=1) == ["history/a.jsonl:3 (not a JSON object)"]
    assert first_skipped(tmp_path, max_bytes=10) == []


@pytest.mark.parametrize("system", ["kafka", "pulsar"])
def test_unusable_lines_and_sends_without_ids_are_counted_alike(tmp_path: Path, system: str) -> None:
    """Acks, invokes, fails and infos without a message id (a batch's records one by one)
    and junk replica lines: counted per file and reason, the same by the Spark job, the
    reference checker and the generator; the run is otherwise judged as it is (the acks
    without ids count as unacked sends, read, so nothing is reported lost)."""
    profile = Profile(records=600, replicas=2, seed=5, system=system, no_mid=7, torn_replicas=True,
                      inject={"lost-write": 1, "nonmonotonic-send": 1})
    expected = generate(tmp_path, profile)
    result = check_run(tmp_path)
    assert result.anomalies == expected.anomalies
    assert result.counts == expected.counts
    assert (result.counts["unjudged-ok"], result.counts["unjudged"]) == (7, 12)
    assert result == reference_checker.check(tmp_path)  # unread too, per file and reason
    assert sum(reasons.get("ok without a message id", 0) for reasons in result.unread.values()) == 7
    assert result.unread["history/producer-0.jsonl"]["invoke without a message id"] == 3
    prefix = "kafka" if system == "kafka" else "bookie"
    assert result.unread[f"replicas/{prefix}-2.jsonl"] == {"not a JSON object": 1, "not a replica record": 1,
                                                          "offset: not a 64-bit integer": 1}
    assert json.loads(json.dumps(result.to_dict()))["unread"] == result.unread


def test_the_warning_names_what_the_check_could_not_use() -> None:
    counts = {"lines": 100, "skipped": 2, "unjudged": 150, "unjudged-ok": 147, "replica-lines": 40,
              "replica-skipped": 3}
    assert skipped_lines(counts) == (
        "2 of 100 history lines could not be read and were skipped. 150 sends (invoke, ok, fail, info) have "
        "no message id and were not judged, 147 of them acknowledged writes. 3 of 40 replica lines could "
        "not be read and were skipped")
    first = {"unjudged": ["history/p.jsonl:4 (fail without a message id)"],
             "replica-skipped": ["replicas/kafka-1.jsonl:1 (not a JSON object)"]}
    assert skipped_lines({"unjudged": 1, "replica-lines": 9, "replica-skipped": 1}, first) == (
        "1 sends (invoke, ok, fail, info) have no message id and were not judged, none of them acknowledged "
        "writes; the first: history/p.jsonl:4 (fail without a message id). 1 of 9 replica lines could not "
        "be read and were skipped; the first: replicas/kafka-1.jsonl:1 (not a JSON object)")
    assert skipped_lines({"lines": 5, "unjudged-ok": 0, "replica-lines": 3}) is None


def test_the_first_unusable_lines_are_named(tmp_path: Path) -> None:
    """first_unread names, in file order and up to the number wanted of each, the skipped
    history lines, the lines with sends without a message id (all, and acknowledged ones)
    and the skipped replica lines; nothing of what is larger than it reads."""
    (tmp_path / "history").mkdir()
    (tmp_path / "replicas").mkdir()
    (tmp_path / "history" / "a.jsonl").write_text(
        '{"type":"invoke","mid":"a"}\n{"type":"fail","error":"x"}\n{not json\n'
        '{"type":"oks","mids":["a",null],"partitions":[0,0],"offsets":[1,2]}\n{"type":"ok","offset":3}\n')
    (tmp_path / "replicas" / "kafka-1.jsonl").write_text(
        '{"type":"replica","mid":"a","topic":"t","partition":0,"offset":1}\n{"type":"hw"}\n')
    want = {"skipped": 3, "unjudged": 3, "unjudged-ok": 1, "replica-skipped": 3}
    assert first_unread(tmp_path, want) == {
        "skipped": ["history/a.jsonl:3 (not a JSON object)"],
        "unjudged": ["history/a.jsonl:2 (fail without a message id)",
                     "history/a.jsonl:4 (oks: 1 of 2 records without a message id)",
                     "history/a.jsonl:5 (ok without a message id)"],
        "unjudged-ok": ["history/a.jsonl:4 (oks: 1 of 2 records without a message id)"],
        "replica-skipped": ["replicas/kafka-1.jsonl:2 (type 'hw': not a replica record)"]}
    assert "unjudged-ok" not in first_unread(tmp_path, {**want, "unjudged-ok": 0})  # none wanted
    assert first_unread(tmp_path, want, max_bytes=10) == {name: [] for name in want}
